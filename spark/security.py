"""TLS and credentials of the project's Python client (:mod:`spark.protocol`), as the official clients take them.

``Security.token(...)``, ``Security.basic(...)`` and ``Security.tls(...)`` name the provider and its data;
``tls_trust_certs_file`` and ``tls_validate_hostname`` check the broker of a ``pulsar+ssl://`` URL. A token given as
a callable is asked again when the broker sends AUTH_CHALLENGE (an expiring token refreshed on a live connection).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Security:
    """How a client authenticates and checks the broker over TLS."""

    #: CONNECT's ``auth_method_name``: ``none``, ``token``, ``basic`` or ``tls``.
    auth_method: str = "none"
    #: Its ``auth_data``, or a callable returning it (called for every CONNECT and AUTH_CHALLENGE).
    auth_data: bytes | Callable[[], bytes] = b""
    #: PEM CAs the broker's certificate must chain to (None: the system's).
    tls_trust_certs_file: str | None = None
    #: Check that the broker's certificate names the host of the URL.
    tls_validate_hostname: bool = True
    #: A client certificate and key presented over TLS (the broker's ``tls`` provider takes its CN as the role).
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    @classmethod
    def token(cls, token: str | Callable[[], str], **tls: object) -> Security:
        """A JSON Web Token, or a supplier of fresh ones."""
        data = (lambda: token().encode()) if callable(token) else token.encode()
        return cls("token", data, **tls)  # type: ignore[arg-type]

    @classmethod
    def basic(cls, user: str, password: str, **tls: object) -> Security:
        """A user name and password (the broker's ``basic`` provider)."""
        return cls("basic", f"{user}:{password}".encode(), **tls)  # type: ignore[arg-type]

    @classmethod
    def tls(cls, cert_file: str, key_file: str, **tls: object) -> Security:
        """A client certificate (the broker's ``tls`` provider)."""
        return cls("tls", b"", tls_cert_file=cert_file, tls_key_file=key_file, **tls)  # type: ignore[arg-type]

    def data(self) -> bytes:
        """The credentials to send now."""
        return self.auth_data() if callable(self.auth_data) else self.auth_data

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of ``pulsar+ssl://`` connections."""
        context = ssl.create_default_context(cafile=self.tls_trust_certs_file)
        context.check_hostname = self.tls_validate_hostname
        if self.tls_cert_file:
            context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        return context
