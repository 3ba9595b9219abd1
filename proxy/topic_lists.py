"""The topic-list commands of one connection: GET_TOPICS_OF_NAMESPACE, and the watches of PIP-145
(WATCH_TOPIC_LIST, answered by WATCH_TOPIC_LIST_SUCCESS and followed by WATCH_TOPIC_UPDATEs, until
WATCH_TOPIC_LIST_CLOSE or the connection's end). Answers, errors and hashes follow Pulsar's ``ServerCnx`` and
``TopicListService``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from engine.authorization import TenantNotFoundError
from engine.names import valid_namespace
from engine.topic_list import MAX_PATTERN_LENGTH, PatternError, TopicListWatch, TopicsPattern, topics_hash
from wire.framing import ProtocolError
from wire.pulsar_api_pb2 import BaseCommand, CommandGetTopicsOfNamespace, ServerError

if TYPE_CHECKING:
    from engine.broker import Broker


class WatchConnection(Protocol):
    """The connection whose topic-list watches these are (``proxy.connection.PulsarConnection`` satisfies it;
    passed down at construction)."""

    broker: Broker
    #: The role the client authenticated as (None: authentication is disabled).
    role: str | None

    def send(self, kind: int, **fields: object) -> None: ...


T = BaseCommand
Handler = Callable[[BaseCommand, bytes | None], None]


def _check_namespace(namespace: str) -> None:
    if not valid_namespace(namespace):
        # Pulsar's NamespaceName throws on it, and the exception closes the connection.
        raise ProtocolError(f"invalid namespace name {namespace!r}")


class TopicListCommands:
    """Handlers for GET_TOPICS_OF_NAMESPACE, WATCH_TOPIC_LIST and WATCH_TOPIC_LIST_CLOSE; the connection's watches."""

    def __init__(self, connection: WatchConnection) -> None:
        self.connection = connection
        self.broker = connection.broker
        self.watches: dict[int, TopicListWatch] = {}

    def register(self, handlers: dict[int, Handler]) -> None:
        """Add this object's handlers to a connection's routing table."""
        handlers.update(
            {
                T.GET_TOPICS_OF_NAMESPACE: self._on_get_topics_of_namespace,
                T.WATCH_TOPIC_LIST: self._on_watch,
                T.WATCH_TOPIC_LIST_CLOSE: self._on_close,
            }
        )

    def close(self) -> None:
        """End every watch of the connection (it is gone)."""
        for watch in self.watches.values():
            self.broker.topic_watches.unwatch(watch)
        self.watches.clear()

    def _refused(self, namespace: str, request_id: int, refused: str, missing_tenant: str) -> bool:
        """Whether this connection's role may not list ``namespace`` (Pulsar's GET_TOPICS namespace operation); if so
        the request is answered with AuthorizationError and Pulsar's text (``missing_tenant`` when the tenant is not
        there)."""
        try:
            allowed = self.broker.authorization.allow_namespace_operation(namespace, self.connection.role, "GET_TOPICS")
        except TenantNotFoundError:
            allowed, refused = False, missing_tenant
        if not allowed:
            self._error(request_id, ServerError.AuthorizationError, refused)
        return not allowed

    def _on_get_topics_of_namespace(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.getTopicsOfNamespace
        _check_namespace(request.namespace)
        if self._refused(
            request.namespace,
            request.request_id,
            "Client is not authorized to GetTopicsOfNamespace",
            "Exception occurred while trying to authorize GetTopicsOfNamespace",
        ):
            return
        topics = []
        if request.mode != CommandGetTopicsOfNamespace.NON_PERSISTENT:
            topics += self.broker.topics_of_namespace(request.namespace)
        if request.mode != CommandGetTopicsOfNamespace.PERSISTENT:
            # As Pulsar: the non-persistent topics this broker has loaded.
            topics += self.broker.non_persistent_topics(request.namespace)
        filtered = False
        if request.HasField("topics_pattern"):
            try:
                pattern = TopicsPattern(request.topics_pattern)
            except PatternError as exc:
                self.connection.send(
                    T.ERROR, request_id=request.request_id, error=ServerError.MetadataError, message=str(exc)
                )
                return
            # As Pulsar: a pattern too long to evaluate leaves the list whole (the client filters it).
            if not pattern.too_long:
                topics = pattern.filter(topics)
                filtered = True
        digest = topics_hash(topics)
        unchanged = request.HasField("topics_hash") and request.topics_hash == digest
        self.connection.send(
            T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
            request_id=request.request_id,
            topics=[] if unchanged else topics,
            filtered=filtered,
            topics_hash=digest,
            changed=not unchanged,
        )

    def _on_watch(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.watchTopicList
        _check_namespace(request.namespace)
        if self._refused(
            request.namespace,
            request.request_id,
            "Proxy Client is not authorized to watchTopicList",
            "Exception occurred while trying to handle command WatchTopicList",
        ):
            return
        try:
            pattern = TopicsPattern(request.topics_pattern)
        except PatternError as exc:
            self._error(request.request_id, ServerError.InvalidTopicName, f"Invalid topics pattern: {exc}")
            return
        if pattern.too_long:
            message = f"Unable to create topic list watcher: Pattern longer than maximum: {MAX_PATTERN_LENGTH}"
            self._error(request.request_id, ServerError.NotAllowedError, message)
            return
        watch = self.watches.get(request.watcher_id)
        if watch is None:
            # As Pulsar: a second WATCH_TOPIC_LIST with a watcher id in use is answered from the watch it names.
            watcher_id = request.watcher_id
            watch = self.broker.topic_watches.watch(
                request.namespace, pattern, lambda new, deleted, digest: self._update(watcher_id, new, deleted, digest)
            )
            self.watches[watcher_id] = watch
        digest = topics_hash(watch.topics)
        unchanged = request.HasField("topics_hash") and request.topics_hash == digest
        self.connection.send(
            T.WATCH_TOPIC_LIST_SUCCESS,
            request_id=request.request_id,
            watcher_id=request.watcher_id,
            topic=[] if unchanged else sorted(watch.topics),
            topics_hash=digest,
        )

    def _update(self, watcher_id: int, new: list[str], deleted: list[str], digest: str) -> None:
        self.connection.send(
            T.WATCH_TOPIC_UPDATE, watcher_id=watcher_id, new_topics=new, deleted_topics=deleted, topics_hash=digest
        )

    def _on_close(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.watchTopicListClose
        watch = self.watches.pop(request.watcher_id, None)
        if watch is not None:
            self.broker.topic_watches.unwatch(watch)
        # As Pulsar: closing a watch that does not exist succeeds too.
        self.connection.send(T.SUCCESS, request_id=request.request_id)

    def _error(self, request_id: int, code: int, message: str) -> None:
        self.connection.send(T.ERROR, request_id=request_id, error=code, message=message)
