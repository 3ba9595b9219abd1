"""TLS and authentication settings of the brokers a conformance run talks to, handed to every way it talks to them.

The ``conformance`` command takes the settings as the official tools name them (``--auth-plugin`` and
``--auth-params`` as ``pulsar-client``/``pulsar-admin``/``pulsar-perf`` take them; ``--tls-trust-certs-file-path``,
``--tls-allow-insecure-connection``, ``--tls-validate-hostname`` as the official Python client's keyword arguments;
``--token`` as ``pulsarctl``'s shortcut) and registers them for the broker's service and admin URLs with
:func:`register`. Each way of reaching a broker looks them up by URL: :meth:`Credentials.python_client_kwargs` for
the official Python client, :meth:`Credentials.connect_fields` and :meth:`Credentials.ssl_context` for raw protocol
connections, :meth:`Credentials.http_headers` for admin REST calls, :meth:`Credentials.harness_env` for the Java and
Go harness processes (``HARNESS_AUTH_PLUGIN``, ``HARNESS_AUTH_PARAMS``, ``HARNESS_AUTH_PARAMS_JSON``,
``HARNESS_HTTP_AUTHORIZATION``, ``HARNESS_TLS_*``).

The plugins understood everywhere are the three of Pulsar's own: token (``token:<jwt>``, ``file:///path``, a JSON
``{"token": ...}`` or the bare token), basic (``{"userId": ..., "password": ...}``) and TLS
(``tlsCertFile:/path,tlsKeyFile:/path``). Another plugin is passed to the official clients as it is; raw protocol
connections and admin calls cannot speak it and fail saying so.
"""

from __future__ import annotations

import base64
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The plugin names of each method, as the official clients accept them.
_METHODS = {
    "token": ("token", "org.apache.pulsar.client.impl.auth.AuthenticationToken"),
    "basic": ("basic", "org.apache.pulsar.client.impl.auth.AuthenticationBasic"),
    "tls": ("tls", "org.apache.pulsar.client.impl.auth.AuthenticationTls"),
}
TOKEN_PLUGIN = _METHODS["token"][1]


class CredentialsError(ValueError):
    """The settings cannot be used (an unreadable token file, params a plugin cannot read)."""


def parse_params(params: str) -> dict[str, str]:
    """``--auth-params`` as a map: a JSON object, or ``key:value,key:value`` (``pulsar-client``'s two forms)."""
    text = params.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            decoded = json.loads(text)
        except ValueError as exc:
            raise CredentialsError(f"--auth-params is not valid JSON: {exc}") from None
        if not isinstance(decoded, dict):
            raise CredentialsError("--auth-params as JSON must be an object")
        return {str(k): str(v) for k, v in decoded.items()}
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition(":")
        if not sep:
            raise CredentialsError(f"--auth-params item {item!r} is not key:value")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class Credentials:
    """How to reach one broker: its authentication plugin and parameters, and how to trust its TLS certificate."""

    auth_plugin: str = ""
    auth_params: str = ""
    tls_trust_certs_file_path: str = ""
    tls_allow_insecure_connection: bool = False
    tls_validate_hostname: bool = False

    @property
    def method(self) -> str:
        """``token``, ``basic``, ``tls``, ``""`` (none) or ``other``."""
        if not self.auth_plugin:
            return ""
        for method, names in _METHODS.items():
            if self.auth_plugin in names:
                return method
        return "other"

    def describe(self) -> str:
        """For the terminal and the report: what is used, without a secret."""
        parts = [f"authentication {self.method or 'none'}" + (f" ({self.auth_plugin})" if self.method else "")]
        if self.tls_trust_certs_file_path:
            parts.append(f"trusting {self.tls_trust_certs_file_path}")
        if self.tls_allow_insecure_connection:
            parts.append("any TLS certificate accepted")
        if self.tls_validate_hostname:
            parts.append("host names validated")
        return ", ".join(parts)

    # -- what each method carries -----------------------------------------------------------------------------

    def _params(self) -> dict[str, str]:
        if self.method == "token" and not self.auth_params.strip().startswith("{"):
            text = self.auth_params.strip()
            if text.startswith(("token:", "file:")):
                key, _, value = text.partition(":")
                return {key: value}
            return {"token": text}
        return parse_params(self.auth_params)

    def token(self) -> str:
        params = self._params()
        if "token" in params:
            return params["token"]
        if "file" in params:
            path = params["file"].removeprefix("//")
            try:
                return Path(path).read_text().strip()
            except OSError as exc:
                raise CredentialsError(f"cannot read the token file {path}: {exc}") from None
        raise CredentialsError("the token plugin's --auth-params give neither token: nor file:")

    def basic(self) -> tuple[str, str]:
        params = self._params()
        user = params.get("userId", params.get("username"))
        if user is None or "password" not in params:
            raise CredentialsError('the basic plugin\'s --auth-params must be {"userId": ..., "password": ...}')
        return user, params["password"]

    def client_certificate(self) -> tuple[str, str]:
        params = self._params()
        if "tlsCertFile" not in params or "tlsKeyFile" not in params:
            raise CredentialsError("the tls plugin's --auth-params must be tlsCertFile:<path>,tlsKeyFile:<path>")
        return params["tlsCertFile"], params["tlsKeyFile"]

    def _unsupported(self, what: str) -> CredentialsError:
        return CredentialsError(
            f"{what} cannot authenticate with {self.auth_plugin}: only the token, basic and tls plugins are "
            "understood there (the official clients get any plugin)"
        )

    # -- per way of reaching the broker ---------------------------------------------------------------------

    def python_client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``pulsar.Client``."""
        import pulsar

        kwargs: dict[str, Any] = {}
        if self.method == "token":
            kwargs["authentication"] = pulsar.AuthenticationToken(self.token())
        elif self.method == "basic":
            kwargs["authentication"] = pulsar.AuthenticationBasic(*self.basic())
        elif self.method == "tls":
            kwargs["authentication"] = pulsar.AuthenticationTLS(*self.client_certificate())
        elif self.method == "other":
            kwargs["authentication"] = pulsar.Authentication(self.auth_plugin, self.auth_params)
        kwargs.update(self._tls_kwargs())
        return kwargs

    def txn_client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the project's transactional client (``pulsar_txn.Client``)."""
        import pulsar_txn as client

        kwargs: dict[str, Any] = {}
        if self.method == "token":
            kwargs["authentication"] = client.AuthenticationToken(self.token())
        elif self.method == "basic":
            kwargs["authentication"] = client.AuthenticationBasic(*self.basic())
        elif self.method == "tls":
            kwargs["authentication"] = client.AuthenticationTLS(*self.client_certificate())
        elif self.method == "other":
            raise self._unsupported("the project's transactional client")
        kwargs.update(self._tls_kwargs())
        return kwargs

    def _tls_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.tls_trust_certs_file_path:
            kwargs["tls_trust_certs_file_path"] = self.tls_trust_certs_file_path
        if self.tls_allow_insecure_connection:
            kwargs["tls_allow_insecure_connection"] = True
        if self.tls_validate_hostname:
            kwargs["tls_validate_hostname"] = True
        return kwargs

    def ssl_context(self) -> ssl.SSLContext:
        """For a ``pulsar+ssl://`` connection or an ``https://`` admin call."""
        context = ssl.create_default_context(cafile=self.tls_trust_certs_file_path or None)
        context.check_hostname = self.tls_validate_hostname and not self.tls_allow_insecure_connection
        if self.tls_allow_insecure_connection:
            context.verify_mode = ssl.CERT_NONE
        if self.method == "tls":
            context.load_cert_chain(*self.client_certificate())
        return context

    def connect_fields(self) -> dict[str, Any]:
        """The authentication fields of a raw CONNECT command."""
        if self.method == "token":
            return {"auth_method_name": "token", "auth_data": self.token().encode()}
        if self.method == "basic":
            user, password = self.basic()
            return {"auth_method_name": "basic", "auth_data": f"{user}:{password}".encode()}
        if self.method == "tls":
            return {"auth_method_name": "tls", "auth_data": b""}
        if self.method == "other":
            raise self._unsupported("a raw protocol connection")
        return {}

    def http_headers(self) -> dict[str, str]:
        """The authentication headers of an admin REST call."""
        if self.method == "token":
            return {"Authorization": f"Bearer {self.token()}"}
        if self.method == "basic":
            user, password = self.basic()
            return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
        if self.method == "other":
            raise self._unsupported("an admin REST call")
        return {}

    def harness_env(self) -> dict[str, str]:
        """The environment of a Java or Go harness process."""
        env: dict[str, str] = {}
        if self.auth_plugin:
            env["HARNESS_AUTH_PLUGIN"] = self.auth_plugin
            env["HARNESS_AUTH_PARAMS"] = self.auth_params
            # Go's NewAuthentication reads JSON only; the token plugin's shortcut forms become {"token": ...}.
            params = {"token": self.token()} if self.method == "token" else parse_params(self.auth_params)
            env["HARNESS_AUTH_PARAMS_JSON"] = json.dumps(params)
            if self.method in ("token", "basic"):
                env["HARNESS_HTTP_AUTHORIZATION"] = self.http_headers()["Authorization"]
        if self.tls_trust_certs_file_path:
            env["HARNESS_TLS_TRUST_CERTS_FILE_PATH"] = self.tls_trust_certs_file_path
        if self.tls_allow_insecure_connection:
            env["HARNESS_TLS_ALLOW_INSECURE_CONNECTION"] = "true"
        if self.tls_validate_hostname:
            env["HARNESS_TLS_VALIDATE_HOSTNAME"] = "true"
        return env


NONE = Credentials()
_BY_URL: dict[str, Credentials] = {}


def _key(url: str) -> str:
    return url.rstrip("/")


def register(credentials: Credentials, *urls: str | None) -> None:
    """Use ``credentials`` for every connection to these service and admin URLs."""
    for url in urls:
        if url:
            _BY_URL[_key(url)] = credentials


def for_url(url: str | None) -> Credentials:
    """The credentials registered for a service or admin URL (none when it has none)."""
    return _BY_URL.get(_key(url), NONE) if url else NONE
