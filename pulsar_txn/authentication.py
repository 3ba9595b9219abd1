"""Credentials, named and called as in ``pulsar-client``: :class:`AuthenticationToken`, :class:`AuthenticationBasic`,
:class:`AuthenticationTLS` (all :class:`Authentication`)."""

from __future__ import annotations

from collections.abc import Callable

from pulsar_txn.exceptions import InvalidConfiguration


class Authentication:
    """Credentials sent with CONNECT (and again when the broker challenges them)."""

    #: CONNECT's ``auth_method_name``.
    method = "none"
    #: A client certificate and key presented in the TLS handshake (``pulsar+ssl://``).
    tls_certificate: tuple[str, str] | None = None

    def data(self) -> bytes:
        """The credentials to send now."""
        return b""


class AuthenticationToken(Authentication):
    """A JSON Web Token, or a function returning a fresh one (asked again when the broker challenges an expired
    token)."""

    method = "token"

    def __init__(self, token: str | Callable[[], str]) -> None:
        if not (isinstance(token, str) or callable(token)):
            raise InvalidConfiguration("token must be a string or a function returning one")
        self._token = token

    def data(self) -> bytes:
        return (self._token() if callable(self._token) else self._token).encode()


class AuthenticationBasic(Authentication):
    """A user name and password (the broker's ``basic`` provider); ``auth_params_string`` is the JSON
    ``{"userId": ..., "password": ...}`` form."""

    def __init__(
        self,
        username: str | None = None,
        password: str | None = None,
        method: str = "basic",
        auth_params_string: str | None = None,
    ) -> None:
        if auth_params_string is not None:
            import json

            params = json.loads(auth_params_string)
            username, password = params.get("userId"), params.get("password")
            method = params.get("method", method)
        if not isinstance(username, str) or not isinstance(password, str):
            raise InvalidConfiguration("AuthenticationBasic needs a username and a password")
        self.method = method
        self._data = f"{username}:{password}".encode()

    def data(self) -> bytes:
        return self._data


class AuthenticationTLS(Authentication):
    """A client certificate and its private key, presented over ``pulsar+ssl://`` (the broker's ``tls`` provider)."""

    method = "tls"

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        self.tls_certificate = (certificate_path, private_key_path)
