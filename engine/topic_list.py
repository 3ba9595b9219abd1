"""Topic lists of a namespace as pattern consumers see them: the topics a pattern matches, the hash a client compares
to learn whether a list changed, and watches that are told each topic that comes or goes (PIP-145).

As Pulsar's broker: a pattern is matched whole against a topic's name without its domain (``public/default/t``,
the partitioned topic's name for a partition) and its own domain prefix is dropped first; a pattern longer than
:data:`MAX_PATTERN_LENGTH` without that prefix is not evaluated. Patterns are RE2 expressions (Pulsar evaluates them
with RE2/J): their matching time is linear in the name, whatever a client writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import crc32c
import re2

from engine.names import TopicName

#: Pulsar's ``subscriptionPatternMaxLength``: longer patterns (without their domain) are not evaluated.
MAX_PATTERN_LENGTH = 50
_SCHEME = "://"
_DOMAINS = ("non-persistent", "persistent")
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


class PatternError(ValueError):
    """A topics pattern that does not compile."""


def topics_hash(topics: Iterable[str]) -> str:
    """Pulsar's hash of a topic list: CRC32C of the sorted names joined by commas, printed as Guava prints a 32-bit
    hash (its four bytes, least significant first, in hex)."""
    value = crc32c.crc32c(",".join(sorted(topics)).encode())
    return value.to_bytes(4, "little").hex()


def without_domain(pattern: str) -> str:
    """A pattern without its topic domain: ``persistent://public/default/t.*`` -> ``public/default/t.*``; a prefix
    before the domain is kept (``^persistent://a/b/c`` -> ``^a/b/c``)."""
    if _SCHEME not in pattern:
        return pattern
    parts = pattern.split(_SCHEME)
    prefix, rest = parts[0], parts[1]
    for domain in _DOMAINS:
        if prefix.endswith(domain):
            return prefix[: -len(domain)] + rest
    raise PatternError(f"Does not support topic domain: {prefix}")


class TopicsPattern:
    """A compiled topics pattern; :meth:`matches` takes full topic names (partitions included).

    A pattern longer than :data:`MAX_PATTERN_LENGTH` is not compiled (it is not evaluated either: see
    :attr:`too_long`), so that a client's megabytes of pattern cost nothing.
    """

    def __init__(self, pattern: str) -> None:
        self.text = without_domain(pattern)
        self._regex = None
        if not self.too_long:
            try:
                self._regex = re2.compile(self.text, _OPTIONS)
            except re2.error as exc:
                detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
                raise PatternError(str(detail)) from None

    @property
    def too_long(self) -> bool:
        """Whether Pulsar would refuse to evaluate this pattern."""
        return len(self.text) > MAX_PATTERN_LENGTH

    def matches(self, topic: str) -> bool:
        if self._regex is None:
            raise PatternError(f"a pattern longer than {MAX_PATTERN_LENGTH} characters is not evaluated")
        name = TopicName.parse(topic).partitioned_parent
        return self._regex.fullmatch(name.full.split(_SCHEME, 1)[1]) is not None

    def filter(self, topics: Iterable[str]) -> list[str]:
        return [topic for topic in topics if self.matches(topic)]


#: Called with the new topics, the deleted topics and the hash of the list after them.
Notify = Callable[[list[str], list[str], str], None]


class TopicListWatch:
    """One watch of a namespace's persistent topics that match a pattern."""

    def __init__(self, namespace: str, pattern: TopicsPattern, topics: list[str], notify: Notify) -> None:
        self.namespace = namespace
        self.pattern = pattern
        self.topics = set(topics)
        self.notify = notify

    def add(self, topic: str) -> None:
        self.topics.add(topic)
        self.notify([topic], [], topics_hash(self.topics))

    def remove(self, topic: str) -> None:
        self.topics.discard(topic)
        self.notify([], [topic], topics_hash(self.topics))


class TopicListWatches:
    """Every watch, by namespace; the broker calls :meth:`changed` whenever a namespace's topic list may change."""

    def __init__(self, topics_of: Callable[[str], list[str]]) -> None:
        self._topics_of = topics_of
        #: The watches of each namespace, in the order they began (which is the order their watchers are told in).
        self._by_namespace: dict[str, dict[TopicListWatch, None]] = {}

    def watch(self, namespace: str, pattern: TopicsPattern, notify: Notify) -> TopicListWatch:
        """Begin a watch; its ``topics`` are the matching topics now."""
        watch = TopicListWatch(namespace, pattern, pattern.filter(self._topics_of(namespace)), notify)
        self._by_namespace.setdefault(namespace, {})[watch] = None
        return watch

    def unwatch(self, watch: TopicListWatch) -> None:
        watches = self._by_namespace.get(watch.namespace)
        if watches is not None:
            watches.pop(watch, None)
            if not watches:
                del self._by_namespace[watch.namespace]

    def changed(self, namespace: str) -> None:
        """Compare each watch of ``namespace`` with its topics now, and tell its watcher of each topic that came or
        went, one at a time."""
        watches = self._by_namespace.get(namespace)
        if not watches:
            return
        topics = self._topics_of(namespace)
        now = [(watch, set(watch.pattern.filter(topics))) for watch in watches]
        # As Pulsar's broker: each topic that came or went is one event, which every watch it matters to gets in turn.
        for topic in sorted({t for watch, current in now for t in current - watch.topics}):
            for watch, current in now:
                if topic in current and topic not in watch.topics:
                    watch.add(topic)
        for topic in sorted({t for watch, current in now for t in watch.topics - current}):
            for watch, current in now:
                if topic in watch.topics and topic not in current:
                    watch.remove(topic)
