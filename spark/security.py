"""TLS and credentials of the connector's Pulsar clients (:mod:`pulsar_txn`), as the official clients take them.

``Security.token(...)``, ``Security.basic(...)`` and ``Security.tls(...)`` name the provider and its data;
``tls_trust_certs_file`` and ``tls_validate_hostname`` check the broker of a ``pulsar+ssl://`` URL. A token given as
a callable is asked again when the broker sends AUTH_CHALLENGE (an expiring token refreshed on a live connection).
:meth:`Security.from_plugin` reads the Java client's ``authPluginClassName`` / ``authParams`` pair.

A ``Security`` made of plain values (no token supplier) pickles and hashes, so Spark carries it to its executors
and per-process client caches key on it; :func:`new_client` opens a :class:`pulsar_txn.Client` with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

import pulsar_txn

#: The Java client's authentication plugin classes (and short names) -> CONNECT's ``auth_method_name``.
PLUGINS = {
    "org.apache.pulsar.client.impl.auth.AuthenticationToken": "token",
    "org.apache.pulsar.client.impl.auth.AuthenticationBasic": "basic",
    "org.apache.pulsar.client.impl.auth.AuthenticationTls": "tls",
    "token": "token",
    "basic": "basic",
    "tls": "tls",
}


@dataclass(frozen=True)
class Security:
    """How a client authenticates and checks the broker over TLS."""

    #: CONNECT's ``auth_method_name``: ``none``, ``token``, ``basic`` or ``tls``.
    auth_method: str = "none"
    #: Its ``auth_data``, or a callable returning it (called for every CONNECT and AUTH_CHALLENGE).
    auth_data: bytes | Callable[[], bytes] = field(default=b"", repr=False)
    #: PEM CAs the broker's certificate must chain to (None: the system's).
    tls_trust_certs_file: str | None = None
    #: Check that the broker's certificate names the host of the URL.
    tls_validate_hostname: bool = True
    #: A client certificate and key presented over TLS (the broker's ``tls`` provider takes its CN as the role).
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    #: Accept any broker certificate (no chain or host name check), as the Java client's
    #: ``tlsAllowInsecureConnection``; for tests only.
    tls_allow_insecure_connection: bool = False

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

    @classmethod
    def from_plugin(cls, plugin: str, params: str, **tls: object) -> Security:
        """The credentials a Java client configures with ``authPluginClassName`` and ``authParams``, read now.

        ``plugin``: a class name of :data:`PLUGINS` (or ``token`` / ``basic`` / ``tls``). ``params`` as that plugin
        parses them: a token as ``token:<jwt>``, ``file:///path`` (the file is read here, once), JSON
        ``{"token": ...}`` or the bare token;
        basic as JSON ``{"userId": ..., "password": ...}``; tls as ``tlsCertFile:<path>,tlsKeyFile:<path>`` or the
        same keys in JSON. Raises ValueError saying what is wrong.
        """
        method = PLUGINS.get(plugin.strip())
        if method is None:
            raise ValueError(f"unsupported authentication plugin {plugin!r}; supported: {', '.join(PLUGINS)}")
        params = params.strip()
        if not params:
            raise ValueError(f"the {method} authentication plugin needs parameters")
        if method == "token":
            return cls.token(_token_of(params), **tls)
        if method == "basic":
            found = _json_object(params, "basic authentication parameters")
            user, password = found.get("userId"), found.get("password")
            if not isinstance(user, str) or not isinstance(password, str):
                raise ValueError('basic authentication parameters need "userId" and "password" strings')
            return cls.basic(user, password, **tls)
        found = _json_object(params, "tls authentication parameters") if params.startswith("{") else _key_values(params)
        cert, key = found.get("tlsCertFile"), found.get("tlsKeyFile")
        if not cert or not key:
            raise ValueError("tls authentication parameters need tlsCertFile and tlsKeyFile")
        for path in (cert, key):
            if not Path(path).is_file():
                raise ValueError(f"tls authentication: no file {path}")
        return cls.tls(cert, key, **tls)

    def data(self) -> bytes:
        """The credentials to send now."""
        return self.auth_data() if callable(self.auth_data) else self.auth_data


class _Credentials(pulsar_txn.Authentication):
    """A :class:`Security`'s credentials as pulsar_txn takes them (a token supplier is asked at every CONNECT and
    AUTH_CHALLENGE)."""

    def __init__(self, security: Security) -> None:
        self.method = security.auth_method
        self._security = security
        if security.tls_cert_file and security.tls_key_file:
            self.tls_certificate = (security.tls_cert_file, security.tls_key_file)

    def data(self) -> bytes:
        return self._security.data()


def new_client(
    service_url: str, security: Security | None = None, operation_timeout_seconds: int = 30
) -> pulsar_txn.Client:
    """A :class:`pulsar_txn.Client` of ``service_url`` with ``security``'s credentials and TLS checks."""
    security = security or Security()
    return pulsar_txn.Client(
        service_url,
        authentication=_Credentials(security),
        operation_timeout_seconds=operation_timeout_seconds,
        tls_trust_certs_file_path=security.tls_trust_certs_file,
        tls_allow_insecure_connection=security.tls_allow_insecure_connection,
        tls_validate_hostname=security.tls_validate_hostname,
    )


def _token_of(params: str) -> str:
    """The token of AuthenticationToken's parameters (``token:``, ``file:``, JSON ``{"token": ...}`` or the token)."""
    if params.startswith("{"):
        token = _json_object(params, "token authentication parameters").get("token")
        if not isinstance(token, str):
            raise ValueError('token authentication parameters in JSON need a "token" string')
    elif params.startswith("token:"):
        token = params[len("token:") :]
    elif params.startswith("file:"):
        path = Path(unquote(urlparse(params).path))
        try:
            token = path.read_text()
        except OSError as exc:
            raise ValueError(f"cannot read the token file {path}: {exc.strerror}") from None
    else:
        token = params
    token = token.strip()
    if not token:
        raise ValueError("the token is empty")
    return token


def _json_object(text: str, what: str) -> dict[str, object]:
    try:
        found = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} must be a JSON object: {exc}") from None
    if not isinstance(found, dict):
        raise ValueError(f"{what} must be a JSON object")
    return found


def _key_values(text: str) -> dict[str, str]:
    """Pulsar's ``key1:value1,key2:value2`` parameter form."""
    found = {}
    for pair in text.split(","):
        key, sep, value = pair.partition(":")
        if not sep:
            raise ValueError(f"expected key:value pairs separated by commas, not {pair!r}")
        found[key.strip()] = value.strip()
    return found
