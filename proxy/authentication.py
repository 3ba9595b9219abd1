"""Authentication as a Pulsar broker does it: the ``token``, ``basic`` and ``tls`` providers and the
:class:`Authenticator` that picks one for a CONNECT (by ``auth_method_name``) or an admin request (by header).

Each provider reads its settings once, at start-up; a bad one (missing file, unreadable key) raises
:class:`~proxy.config.SettingsError`. Refused credentials raise :class:`AuthenticationError` with the text
Pulsar's provider gives.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from proxy.config import Settings, SettingsError

#: Header naming the provider of an admin request (Pulsar's ``X-Pulsar-Auth-Method-Name``).
AUTH_METHOD_HEADER = "X-Pulsar-Auth-Method-Name"
PROVIDER_NAMES = ("token", "basic", "tls")
#: Pulsar's provider classes, accepted for the names so that broker.conf's value can be copied as it is.
_PULSAR_CLASSES = {
    f"org.apache.pulsar.broker.authentication.AuthenticationProvider{name.title()}": name for name in PROVIDER_NAMES
}


class AuthenticationError(Exception):
    """Credentials were refused; ``message`` is Pulsar's text for the reason."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Identity:
    """Who authenticated, and until when their credentials hold (epoch seconds; None: no expiry)."""

    role: str
    expires_at: float | None = None


class Provider(Protocol):
    """One authentication method."""

    method: str

    def identify(self, data: bytes, peer_certificate: Any) -> Identity:
        """The identity ``data`` (a CONNECT's ``auth_data``) proves, or AuthenticationError."""
        ...

    def identify_http(self, authorization: str | None, peer_certificate: Any) -> Identity:
        """The identity an admin request's ``Authorization`` header (or TLS certificate) proves."""
        ...


# -- key material in Pulsar's notations -------------------------------------------------------------------


def read_material(value: str, setting: str) -> bytes:
    """Bytes named as Pulsar names key material: ``data:`` and ``file:`` URLs, ``env:NAME``, a file path, or
    the base64 text itself; SettingsError naming ``setting`` if they cannot be read."""
    if value.startswith(("data:", "file:")):
        try:
            with urllib.request.urlopen(value) as source:
                return source.read()
        except (OSError, ValueError, urllib.error.URLError) as exc:
            raise SettingsError(f"{setting}: cannot read {value}: {exc}") from None
    if value.startswith("env:"):
        found = os.environ.get(value[4:])
        if found is None:
            raise SettingsError(f"{setting}: environment variable {value[4:]} is not set")
        return found.encode()
    path = Path(value)
    if path.exists():
        try:
            return path.read_bytes()
        except OSError as exc:
            raise SettingsError(f"{setting}: cannot read {value}: {exc.strerror or exc}") from None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise SettingsError(f"{setting}: no such file: {value} (nor is it a data:/file: URL or base64)") from None


def _java_split(text: str, separator: str) -> list[str]:
    """``String.split`` of Java: trailing empty strings are dropped."""
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


# -- token ------------------------------------------------------------------------------------------------


def _iso(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(int(seconds), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TokenProvider:
    """JSON Web Tokens signed with an HMAC secret (HS256/384/512) or a key pair (``token-public-alg``)."""

    method = "token"

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        import jwt  # only with token authentication: keeps it off the start-up path otherwise

        self._jwt = jwt
        self._clock = clock
        self.claim = settings.token_auth_claim or "sub"
        if settings.token_secret_key:
            secret = read_material(settings.token_secret_key, "token-secret-key")
            if len(secret) < 32:
                raise SettingsError(
                    f"token-secret-key: the key has {len(secret) * 8} bits; HMAC-SHA keys need at least 256"
                )
            self.key: Any = secret
            self.algorithms = [
                alg for alg, bits in (("HS256", 256), ("HS384", 384), ("HS512", 512)) if len(secret) * 8 >= bits
            ]
        elif settings.token_public_key:
            self.key = _public_key(read_material(settings.token_public_key, "token-public-key"))
            self.algorithms = [settings.token_public_alg]
            if settings.token_public_alg not in (
                "RS256",
                "RS384",
                "RS512",
                "ES256",
                "ES384",
                "ES512",
                "PS256",
                "PS384",
                "PS512",
            ):
                raise SettingsError(f"token-public-alg: unsupported algorithm {settings.token_public_alg!r}")
        else:
            raise SettingsError("token authentication needs token-secret-key or token-public-key")

    def identify(self, data: bytes, peer_certificate: Any) -> Identity:
        token = data.decode("utf-8", "replace")
        if not token.strip():
            raise AuthenticationError("Blank token found")
        return self._verify(token)

    def identify_http(self, authorization: str | None, peer_certificate: Any) -> Identity:
        if authorization is None or not authorization.startswith("Bearer "):
            raise AuthenticationError("Invalid HTTP Authorization header")
        token = authorization[len("Bearer ") :]
        if not token.strip():
            raise AuthenticationError("Blank token found")
        return self._verify(token)

    def _verify(self, token: str) -> Identity:
        jwt = self._jwt
        now = self._clock()
        try:
            claims = jwt.decode(
                token,
                self.key,
                algorithms=self.algorithms,
                options={"verify_exp": False, "verify_iat": False, "verify_aud": False, "verify_iss": False},
            )
        except jwt.InvalidSignatureError:
            raise _token_error(
                "JWT signature does not match locally computed signature. JWT validity cannot be asserted and "
                "should not be trusted."
            ) from None
        except jwt.DecodeError as exc:
            periods = token.count(".")
            if periods != 2:
                raise _token_error(f"JWT strings must contain exactly 2 period characters. Found: {periods}") from None
            raise _token_error(f"Malformed JWT: {exc}") from None
        except jwt.InvalidTokenError as exc:
            raise _token_error(str(exc)) from None
        expires_at = claims.get("exp")
        if isinstance(expires_at, int | float) and not isinstance(expires_at, bool):
            if now > expires_at:  # as jjwt: valid through its expiry second
                difference = int(now * 1000) - int(expires_at) * 1000
                raise _token_error(
                    f"JWT expired at {_iso(expires_at)}. Current time: {_iso(now)}, a difference of {difference} "
                    "milliseconds.  Allowed clock skew: 0 milliseconds."
                )
        else:
            expires_at = None
        not_before = claims.get("nbf")
        if isinstance(not_before, int | float) and not isinstance(not_before, bool) and not_before > now:
            raise _token_error(f"JWT must not be accepted before {_iso(not_before)}. Current time: {_iso(now)}.")
        role = claims.get(self.claim)
        if isinstance(role, list):
            role = role[0] if role and isinstance(role[0], str) else None
        if not isinstance(role, str):
            raise _token_error(f"the token has no {self.claim} claim naming a role")
        return Identity(role, float(expires_at) if expires_at is not None else None)


def _token_error(detail: str) -> AuthenticationError:
    return AuthenticationError(f"Failed to authentication token: {detail}")


def _public_key(material: bytes) -> Any:
    from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

    try:
        return (
            load_pem_public_key(material) if material.lstrip().startswith(b"-----") else load_der_public_key(material)
        )
    except ValueError as exc:
        raise SettingsError(f"token-public-key: not a public key in PEM or DER: {exc}") from None


# -- basic ------------------------------------------------------------------------------------------------


class BasicProvider:
    """User names and password hashes from ``basic-auth-conf`` (``$apr1$`` MD5 or traditional DES crypt)."""

    method = "basic"
    REFUSED = "Unknown user or invalid password"

    def __init__(self, settings: Settings) -> None:
        if not settings.basic_auth_conf:
            raise SettingsError("basic authentication needs basic-auth-conf")
        text = read_material(settings.basic_auth_conf, "basic-auth-conf").decode("utf-8", "replace")
        self.users: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), 1):
            parts = _java_split(line, ":")
            if len(parts) != 2:
                raise SettingsError(f"basic-auth-conf: line {number} is not user:hash")
            self.users[parts[0]] = parts[1]

    def identify(self, data: bytes, peer_certificate: Any) -> Identity:
        return self._check(data.decode("utf-8", "replace"))

    def identify_http(self, authorization: str | None, peer_certificate: Any) -> Identity:
        if not authorization or not authorization.upper().startswith("BASIC "):
            raise AuthenticationError('Authentication token has to be started with "Basic "')
        parts = _java_split(authorization, " ")
        if len(parts) != 2:
            raise AuthenticationError("Base64 encoded token is not found")
        try:
            decoded = base64.b64decode(parts[1], validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError) as exc:
            raise AuthenticationError(f"Base64 decoding is failure: {exc}") from None
        return self._check(decoded)

    def _check(self, params: str) -> Identity:
        parts = _java_split(params, ":")
        if len(parts) != 2:
            raise AuthenticationError("Base64 decoded params are invalid")
        user, password = parts
        stored = self.users.get(user)
        if stored is None or not _password_matches(password, stored):
            raise AuthenticationError(self.REFUSED)
        return Identity(user)


def _password_matches(password: str, stored: str) -> bool:
    from passlib.hash import apr_md5_crypt, des_crypt

    try:
        if stored.startswith("$apr1"):
            return len(stored.split("$")) == 4 and apr_md5_crypt.verify(password, stored)
        return des_crypt.verify(password, stored)
    except (ValueError, TypeError):
        return False  # a hash neither scheme can read matches no password


# -- tls --------------------------------------------------------------------------------------------------


class TlsProvider:
    """The common name (CN) of the client certificate the TLS handshake verified."""

    method = "tls"

    def identify(self, data: bytes, peer_certificate: Any) -> Identity:
        return self._of(peer_certificate)

    def identify_http(self, authorization: str | None, peer_certificate: Any) -> Identity:
        return self._of(peer_certificate)

    @staticmethod
    def _of(peer_certificate: Any) -> Identity:
        if peer_certificate is None:
            raise AuthenticationError("Failed to get TLS certificates from client")
        from cryptography.x509.oid import NameOID

        certificate = (
            peer_certificate.to_cryptography() if hasattr(peer_certificate, "to_cryptography") else peer_certificate
        )
        names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        if not names:
            raise AuthenticationError("Client unable to authenticate with TLS certificate")
        return Identity(str(names[0].value))


# -- the service ------------------------------------------------------------------------------------------


class Authenticator:
    """The configured providers, by method name, as Pulsar's AuthenticationService holds them."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        names = [
            _PULSAR_CLASSES.get(name.strip(), name.strip().lower())
            for name in settings.authentication_providers.split(",")
            if name.strip()
        ]
        unknown = [name for name in names if name not in PROVIDER_NAMES]
        if unknown:
            raise SettingsError(
                f"authentication-providers: unknown provider {unknown[0]!r} (expected {', '.join(PROVIDER_NAMES)})"
            )
        if settings.authentication_enabled and not names:
            raise SettingsError("authentication-enabled needs authentication-providers (token, basic, tls)")
        if "tls" in names and settings.tls_port is None and settings.admin_tls_port is None:
            raise SettingsError("authentication-providers: tls needs tls-port or admin-tls-port")
        built: dict[str, Provider] = {}
        for name in dict.fromkeys(names):
            if name == "token":
                built[name] = TokenProvider(settings, clock)
            elif name == "basic":
                built[name] = BasicProvider(settings)
            else:
                built[name] = TlsProvider()
        self.providers = built

    @property
    def enabled(self) -> bool:
        return self.settings.authentication_enabled

    @property
    def anonymous_role(self) -> str | None:
        """The role given to clients without credentials, when configured (``anonymous-user-role``)."""
        return getattr(self.settings, "anonymous_user_role", None) or None

    def identify(self, method: str, data: bytes, peer_certificate: Any) -> Identity:
        """The identity a CONNECT (or AUTH_RESPONSE) with ``method`` and ``data`` proves."""
        provider = self.providers.get(method)
        if provider is None:
            anonymous = self.anonymous_role
            if anonymous is None:
                raise AuthenticationError("No anonymous role, and no authentication provider configured")
            return Identity(anonymous)
        return provider.identify(data, peer_certificate)

    def authenticate(self, method: str, data: bytes, peer_certificate: Any) -> str:
        """The role a CONNECT's ``auth_method_name`` and ``auth_data`` prove, or AuthenticationError."""
        return self.identify(method, data, peer_certificate).role

    def authenticate_http(self, header: Callable[[str], str | None], peer_certificate: Any) -> str:
        """The role of an admin request (``header(name)`` reads its headers), or AuthenticationError.

        The provider is the one ``X-Pulsar-Auth-Method-Name`` names, else the first whose check passes.
        """
        authorization = header("Authorization")
        named = header(AUTH_METHOD_HEADER)
        if named is not None:
            provider = self.providers.get(named)
            if provider is None:
                raise AuthenticationError(f"Unsupported authentication method: [{named}].")
            return provider.identify_http(authorization, peer_certificate).role
        first: AuthenticationError | None = None
        for provider in self.providers.values():
            try:
                return provider.identify_http(authorization, peer_certificate).role
            except AuthenticationError as exc:
                first = first or exc
        anonymous = self.anonymous_role
        if anonymous is not None:
            return anonymous
        raise first or AuthenticationError("Authentication required")
