"""A broker that authenticates: missing and forged credentials refused, the given ones accepted, on every path.

These scenarios need only the credentials the run was given (``--auth-plugin``/``--auth-params``, ``--token``):
what they are refused with is a client without them and a token signed with a key of the scenario's own making
(unknown to any broker), so they run against any broker with authentication, whatever its provider. The
scenarios that mint credentials of the broker's own (tokens of several roles, expired ones, certificates of its CA)
stay in ``tests/conformance/test_authentication.py``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import ssl
import urllib.error
import urllib.request
from typing import Any

from pulsar_txn_proxy.conformance import security
from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.raw import RawConnection
from wire.pulsar_api_pb2 import BaseCommand, ServerError

T = BaseCommand


def _forged_token() -> str:
    """An HS256 token for the role ``conformance`` signed with a random key: no broker can verify it."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header, claims = json.dumps({"alg": "HS256", "typ": "JWT"}), json.dumps({"sub": "conformance"})
    signed = f"{b64(header.encode())}.{b64(claims.encode())}"
    signature = hmac.new(secrets.token_bytes(32), signed.encode(), hashlib.sha256).digest()
    return f"{signed}.{b64(signature)}"


def _without(credentials: security.Credentials, plugin: str = "", params: str = "") -> security.Credentials:
    """The same TLS settings with other (or no) authentication."""
    return security.Credentials(
        plugin,
        params,
        credentials.tls_trust_certs_file_path,
        credentials.tls_allow_insecure_connection,
        credentials.tls_validate_hostname,
    )


def _connect(run: Run, credentials: security.Credentials) -> list[str]:
    """A raw CONNECT with these credentials: the answer, and then whether the broker closed the connection."""
    conn = RawConnection.to(run.target.service_url, timeout=15)
    conn.credentials = credentials
    try:
        conn.send(T.CONNECT, client_version="credentials-probe", protocol_version=20, **conn.connect_fields())
        try:
            command = conn.read().command
        except (AssertionError, OSError):
            return ["closed"]
        if command.type == T.ERROR:
            answer = f"ERROR {ServerError.Name(command.error.error)} {command.error.message}"
        else:
            answer = T.Type.Name(command.type)
        if command.type == T.CONNECTED:
            return [answer]
        try:
            conn.read()
            return [answer, "open"]
        except (AssertionError, OSError):
            return [answer, "closed"]
    finally:
        conn.close()


@scenario
def test_connections_without_valid_credentials(run: Run) -> Outcome:
    """The official Python client and raw CONNECTs without credentials and with a forged token are refused (the
    raw ones with one ERROR, then the connection closes); with the given credentials the CONNECT is answered."""
    given = run.credentials
    forged = _without(given, security.TOKEN_PLUGIN, f"token:{_forged_token()}")
    outcome: dict[str, Any] = {}
    for name, credentials in (("missing", _without(given)), ("forged", forged)):
        kwargs = {"authentication": None, **credentials.python_client_kwargs()}
        client = run.client(operation_timeout_seconds=3, **kwargs)
        outcome[f"client_{name}"] = run.attempt(lambda c=client, n=name: c.create_producer(run.topic(n)) and "ok")
        outcome[f"connect_{name}"] = _connect(run, credentials)
    outcome["connect_given"] = _connect(run, given)
    return outcome


def _status(run: Run, credentials: security.Credentials) -> int:
    """The status ``GET /admin/v2/clusters`` answers with these credentials."""
    assert run.target.admin_url
    request = urllib.request.Request(run.target.admin_url + "/admin/v2/clusters", headers=credentials.http_headers())
    context = credentials.ssl_context() if request.full_url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=15, context=context) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except ssl.SSLError as exc:
        return -1 if "certificate" in str(exc) else -2


@scenario
def test_admin_calls_without_valid_credentials(run: Run) -> Outcome:
    """``GET /admin/v2/clusters`` without credentials and with a forged token is refused; with the given ones it
    answers."""
    given = run.credentials
    return {
        "missing": _status(run, _without(given)),
        "forged": _status(run, _without(given, security.TOKEN_PLUGIN, f"token:{_forged_token()}")),
        "given": _status(run, given),
    }
