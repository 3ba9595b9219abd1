"""HTTP plumbing of the admin API: routes, calls, replies and Pulsar-style errors on ``twisted.web``.

A handler takes a :class:`Call` and returns what Jersey would make of a resource method's result: ``None``
becomes ``204 No Content``, plain data becomes a ``200`` JSON body, a :class:`Reply` is sent as is, and a
``Deferred`` of any of these is awaited. Errors are :class:`AdminError` (or engine errors, mapped to the status
Pulsar gives) and go out as ``{"reason": "..."}`` with their status code.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from twisted.web import server
from twisted.web.resource import Resource

from engine.errors import BrokerError
from wire.pulsar_api_pb2 import ServerError

log = logging.getLogger(__name__)

JSON = "application/json"
TEXT = "text/plain"

#: HTTP status of an engine error, as the admin REST API of a Pulsar broker answers it.
_STATUS_OF_ERROR = {
    ServerError.TopicNotFound: 404,
    ServerError.SubscriptionNotFound: 404,
    ServerError.ConsumerNotFound: 404,
    ServerError.TransactionNotFound: 404,
    ServerError.TransactionCoordinatorNotFound: 404,
    ServerError.InvalidTopicName: 412,
    ServerError.NotAllowedError: 405,
    ServerError.IncompatibleSchema: 409,
    ServerError.TopicTerminatedError: 412,
    ServerError.InvalidTxnStatus: 409,
}


class AdminError(Exception):
    """A request failed with an HTTP status and Pulsar's ``reason`` text."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def from_broker_error(exc: BrokerError) -> AdminError:
    """The admin error an engine error becomes."""
    return AdminError(_STATUS_OF_ERROR.get(exc.code, 500), exc.message)


@dataclass
class Reply:
    """A complete response."""

    status: int = 200
    body: bytes = b""
    content_type: str = JSON
    headers: list[tuple[str, str]] = field(default_factory=list)


def json_reply(value: Any, status: int = 200) -> Reply:
    """A JSON body."""
    return Reply(status, json.dumps(value, separators=(",", ":")).encode())


def text_reply(value: str, content_type: str = JSON) -> Reply:
    """A string written as is, as Jersey writes a resource method's ``String`` result."""
    return Reply(200, value.encode(), content_type)


def absent_reply() -> Reply:
    """What Pulsar answers for a policy that is not set: 200 without a body (a Jersey resource resumed with null)."""
    return Reply(200, b"", "")


def error_reply(status: int, reason: str) -> Reply:
    """Pulsar's error body, ``{"reason": ...}``."""
    return json_reply({"reason": reason}, status)


@dataclass
class Call:
    """One request as handlers see it: path parameters (decoded), query, body."""

    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: bytes
    content_type: str = ""
    host: str = ""
    #: The role the request authenticated as (None when authentication is disabled); see proxy.admin.auth.
    role: str | None = None

    def __getitem__(self, name: str) -> str:
        return self.params[name]

    def json(self, required: bool = False) -> Any:
        """The body parsed as JSON (None if empty); malformed JSON is a 400."""
        text = self.body.strip()
        if not text:
            if required:
                raise AdminError(400, "Request body is required")
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise AdminError(400, f"Malformed JSON body: {exc}") from None

    def path_integer(self, name: str) -> int:
        """An integer path parameter; 404 if it is not one, as Jersey finds no resource for such a path."""
        try:
            return int(self.params[name])
        except ValueError:
            raise AdminError(404, "Not Found") from None

    def flag(self, name: str, default: bool = False) -> bool:
        """A boolean query parameter."""
        value = self.query.get(name)
        if value is None or value == "":
            return default
        return value.lower() == "true"

    def integer(self, name: str, default: int | None = None) -> int | None:
        """An integer query parameter (400 if it is not one)."""
        value = self.query.get(name)
        if value is None or value == "":
            return default
        try:
            return int(value)
        except ValueError:
            raise AdminError(400, f"Query parameter {name} is not an integer: {value}") from None


Handler = Callable[[Call], Any]


@dataclass
class _Route:
    method: str
    parts: tuple[str, ...]
    handler: Handler
    literals: int


class Router:
    """Routes ``(method, path pattern)`` to handlers; ``{name}`` segments are parameters, ``{name:a|b}`` parameters
    that take one of the values listed."""

    def __init__(self) -> None:
        self._by_length: dict[int, list[_Route]] = {}

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        """Register a handler; the pattern's literal segments win over parameters when both match."""
        parts = tuple(pattern.strip("/").split("/"))
        literals = sum(1 for p in parts if not p.startswith("{") or ":" in p)
        routes = self._by_length.setdefault(len(parts), [])
        routes.append(_Route(method, parts, handler, literals))
        routes.sort(key=lambda r: -r.literals)

    def route(self, method: str, pattern: str) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`add`."""

        def register(handler: Handler) -> Handler:
            self.add(method, pattern, handler)
            return handler

        return register

    def wrap(self, wrapper: Callable[[str, str, Handler], Handler]) -> None:
        """Replace each route's handler with ``wrapper(method, pattern, handler)`` (the pattern without its slashes
        at the ends, as given to :meth:`add`)."""
        for routes in self._by_length.values():
            for route in routes:
                route.handler = wrapper(route.method, "/".join(route.parts), route.handler)

    def resolve(self, method: str, segments: list[str]) -> tuple[Handler, dict[str, str]]:
        """The handler and parameters of a request, or a 404 (no such path) / 405 (no such method)."""
        best = self._best(method, segments)
        if best is not None:
            return best[0].handler, best[1]
        if any(_match(r.parts, segments) is not None for r in self._by_length.get(len(segments), ())):
            raise AdminError(405, f"Method {method} is not allowed on this resource")
        raise AdminError(404, "Not Found")

    def routes(self) -> list[tuple[str, str]]:
        """``(method, pattern)`` of every route."""
        return [(r.method, "/" + "/".join(r.parts)) for routes in self._by_length.values() for r in routes]

    def serves(self, method: str, pattern: str) -> bool:
        """Whether a route of that method and pattern is registered."""
        parts = tuple(pattern.strip("/").split("/"))
        return any(r.method == method and r.parts == parts for r in self._by_length.get(len(parts), ()))

    def pattern_of(self, method: str, segments: list[str]) -> str | None:
        """The pattern of the route a request resolves to (None if none does)."""
        best = self._best(method, segments)
        return None if best is None else "/" + "/".join(best[0].parts)

    def _best(self, method: str, segments: list[str]) -> tuple[_Route, dict[str, str]] | None:
        """The route of that method matching the path with the most literal segments, and its parameters."""
        for route in self._by_length.get(len(segments), ()):  # sorted: most literal segments first
            if route.method == method:
                params = _match(route.parts, segments)
                if params is not None:
                    return route, params
        return None


def _match(parts: tuple[str, ...], segments: list[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    for part, segment in zip(parts, segments, strict=True):
        if part.startswith("{"):
            name, _, choices = part[1:-1].partition(":")
            if choices and segment not in choices.split("|"):
                return None
            params[name] = segment
        elif part != segment:
            return None
    return params


class RequestAuthentication(Protocol):
    """Checks a request's credentials before any route runs (``proxy.admin.auth.AdminAuthentication``, passed down
    at construction)."""

    def check(self, request: server.Request, segments: list[str]) -> Reply | None:
        """None to go on, else the refusal to send."""
        ...

    def role_of(self, request: server.Request) -> str | None:
        """The role a checked request authenticated as."""
        ...


class AdminResource(Resource):
    """The ``twisted.web`` resource serving a :class:`Router`."""

    isLeaf = True  # noqa: N815 (Twisted's name)

    def __init__(self, router: Router, authentication: RequestAuthentication | None = None) -> None:
        super().__init__()
        self.router = router
        #: Checks credentials before any route runs (None: no authentication).
        self.authentication = authentication

    def render(self, request: server.Request) -> bytes | int:
        method = request.method.decode("ascii", "replace")
        raw = request.path.decode("utf-8", "replace")
        segments = [unquote(s) for s in raw.strip("/").split("/")] if raw.strip("/") else []
        query = {k.decode(): v[-1].decode("utf-8", "replace") for k, v in request.args.items()}
        host = request.getRequestHostname().decode("ascii", "replace")
        role = None
        if self.authentication is not None:
            refused = self.authentication.check(request, segments)
            if refused is not None:
                return self._write(request, refused)
            role = self.authentication.role_of(request)
        try:
            handler, params = self.router.resolve(method, segments)
            call = Call(
                method,
                raw,
                params,
                query,
                request.content.read() if request.content is not None else b"",
                (request.getHeader("content-type") or ""),
                host,
                role,
            )
            result = handler(call)
        except Exception as exc:
            return self._write(request, _error_of(exc, method, raw))
        if isinstance(result, Deferred):
            finished = [False]
            request.notifyFinish().addErrback(lambda _: finished.__setitem__(0, True))

            def deliver(value: Any) -> None:
                if not finished[0]:
                    request.write(self._render_value(request, value))
                    request.finish()

            def fail(failure: Failure) -> None:
                if not finished[0]:
                    request.write(self._write(request, _error_of(failure.value, method, raw)))
                    request.finish()

            result.addCallbacks(deliver, fail)
            return server.NOT_DONE_YET
        return self._render_value(request, result)

    def _render_value(self, request: server.Request, value: Any) -> bytes:
        if isinstance(value, Reply):
            return self._write(request, value)
        if value is None:
            return self._write(request, Reply(204))
        return self._write(request, json_reply(value))

    @staticmethod
    def _write(request: server.Request, reply: Reply) -> bytes:
        request.setResponseCode(reply.status)
        if reply.status != 204 and reply.content_type:
            request.setHeader(b"Content-Type", reply.content_type.encode())
        for name, value in reply.headers:
            request.responseHeaders.addRawHeader(name.encode(), value.encode("utf-8", "replace"))
        return reply.body


def _error_of(exc: BaseException, method: str, path: str) -> Reply:
    if isinstance(exc, AdminError):
        return error_reply(exc.status, exc.reason)
    if isinstance(exc, BrokerError):
        error = from_broker_error(exc)
        return error_reply(error.status, error.reason)
    log.error("admin %s %s failed", method, path, exc_info=exc)
    return error_reply(500, f"Internal error: {exc}")
