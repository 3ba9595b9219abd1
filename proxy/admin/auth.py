"""Authentication of admin requests, before any route runs, as Pulsar's web service filters them.

With authentication enabled, a request to the admin API (``/admin/v2``, ``/admin/v3``) or the HTTP lookup
(``/lookup``) needs credentials a provider accepts: ``Authorization: Bearer <token>`` (or a ``token`` query
parameter, as Pulsar accepts for browsers), ``Authorization: Basic ...``, or a client certificate on the https
port. Without, it gets Pulsar's 401 page. ``/metrics`` stays readable unless authenticate-metrics-endpoint is
set; paths Pulsar serves from no authenticated servlet are routed as before (404).
"""

from __future__ import annotations

import html
import logging
from typing import TYPE_CHECKING

from proxy.admin.http import Reply
from proxy.authentication import AuthenticationError
from proxy.tls import verified_peer_certificate

if TYPE_CHECKING:
    from twisted.web.server import Request

    from proxy.authentication import Authenticator

log = logging.getLogger(__name__)

#: Attribute of a ``twisted.web`` request holding its authenticated role.
_ROLE = "pulsar_role"
#: First path segments of the resources Pulsar authenticates (its Jersey servlets).
_AUTHENTICATED_ROOTS = (("admin", "v2"), ("admin", "v3"), ("lookup",))


def role_of(request: Request) -> str | None:
    """The role the request authenticated as; None when authentication is disabled (or the path needs none)."""
    return getattr(request, _ROLE, None)


class AdminAuthentication:
    """Authenticates admin requests with the broker's :class:`~proxy.authentication.Authenticator`."""

    def __init__(self, authenticator: Authenticator | None, authenticate_metrics: bool = False) -> None:
        self.authenticator = authenticator
        self.authenticate_metrics = authenticate_metrics

    role_of = staticmethod(role_of)

    def needs_credentials(self, segments: list[str]) -> bool:
        """Whether a request to this path must authenticate."""
        if self.authenticator is None or not self.authenticator.enabled:
            return False
        if segments[:1] == ["metrics"]:
            return self.authenticate_metrics
        return any(tuple(segments[: len(root)]) == root for root in _AUTHENTICATED_ROOTS)

    def check(self, request: Request, segments: list[str]) -> Reply | None:
        """Authenticate ``request`` (its role is then :func:`role_of` it); the 401 to send if it fails."""
        if not self.needs_credentials(segments):
            return None
        assert self.authenticator is not None

        def header(name: str) -> str | None:
            value = request.getHeader(name)
            if value is None and name == "Authorization":
                token = request.args.get(b"token")
                if token:
                    text = token[-1].decode("utf-8", "replace")
                    return text if text.startswith("Bearer ") else f"Bearer {text}"
            return value

        try:
            role = self.authenticator.authenticate_http(header, verified_peer_certificate(request.transport))
        except AuthenticationError as exc:
            log.info("admin %s refused: %s", request.path.decode("utf-8", "replace"), exc.message)
            # Pulsar sends its own reason only for an unknown method; every refused credential is "required".
            reason = exc.message if exc.message.startswith("Unsupported authentication method") else None
            return unauthorized(request.path.decode("utf-8", "replace"), reason or "Authentication required")
        setattr(request, _ROLE, role)
        return None


def unauthorized(path: str, message: str) -> Reply:
    """The 401 page of Pulsar's web server (Jetty's error page) for ``path``."""
    escaped, uri = html.escape(message), html.escape(path)
    page = (
        "<html>\n<head>\n"
        '<meta http-equiv="Content-Type" content="text/html;charset=ISO-8859-1"/>\n'
        f"<title>Error 401 {escaped}</title>\n</head>\n"
        f"<body><h2>HTTP ERROR 401 {escaped}</h2>\n<table>\n"
        f"<tr><th>URI:</th><td>{uri}</td></tr>\n"
        "<tr><th>STATUS:</th><td>401</td></tr>\n"
        f"<tr><th>MESSAGE:</th><td>{escaped}</td></tr>\n"
        "</table>\n\n</body>\n</html>\n"
    )
    return Reply(
        401,
        page.encode("iso-8859-1", "replace"),
        "text/html;charset=iso-8859-1",
        [("Cache-Control", "must-revalidate,no-cache,no-store")],
    )
