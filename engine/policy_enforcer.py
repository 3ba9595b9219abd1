"""The periodic application of the namespace and topic policies to the loaded topics: message TTL, retention, the
compaction threshold and backlog quotas, and the dropping of idle non-persistent topics.

It drives the :class:`engine.broker.Broker` facade from above (a reactor's timer through the injected clock), so it
sits over it in the engine's layers; the policies it applies are read from :mod:`engine.namespaces`.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

from engine import backlog_quota
from engine.clock import Cancellable, now_ms
from engine.compaction import CompactionStatus

if TYPE_CHECKING:
    from engine.broker import Broker
    from engine.topic import Topic

log = logging.getLogger(__name__)


# -- message TTL and retention -------------------------------------------------------------------


def consumed_upto(topic: Topic) -> int:
    """The last entry every durable subscription has acknowledged (everything readable if none)."""
    marks = [s.cursor.mark_delete for s in topic.subscriptions.values() if s.durable]
    return min([topic.read_limit, *marks])


def compact_over(topic: Topic, threshold: int) -> bool:
    """Start a compaction of a topic holding more than ``threshold`` bytes after its compacted view, as Pulsar's
    ``checkCompaction``; whether one started."""
    compaction = topic.compaction
    if compaction.status is CompactionStatus.RUNNING:
        return False
    _, size = topic.store.entries_size(topic.topic_id, compaction.horizon, topic.read_limit)
    if size <= threshold:
        return False
    log.info("%s: %d bytes after the compacted view exceed the compaction threshold %d", topic.name, size, threshold)
    compaction.trigger()
    return True


def retention_of(broker: Broker, topic: Topic) -> tuple[int, int]:
    """The retention ``(minutes, megabytes)`` of a topic: its namespace's policy, else the broker default."""
    return broker.namespaces.retention(topic.name) or broker.config.default_retention


def trim_now(broker: Broker, topic: Topic) -> int:
    """Apply retention to one topic now (the admin trim); the last entry deleted (-1 if none)."""
    return trim(broker, topic, retention_of(broker, topic), now_ms(broker.clock))


def trim_loaded(broker: Broker, topic: Topic) -> None:
    """As Pulsar when it loads a topic whose subscriptions acknowledged its closed ledgers (what was stored before
    the load is one): they go at once. A topic without subscriptions keeps them until the next check."""
    if topic.name.namespace_name in broker.namespaces and any(s.durable for s in topic.subscriptions.values()):
        trim_now(broker, topic)


def trim(broker: Broker, topic: Topic, retention: tuple[int, int], now: int) -> int:
    """Delete acknowledged entries beyond the retention limits; returns the last entry deleted (-1 if none).

    As in Pulsar, acknowledged data goes once it is older than the retention time, or once the topic holds
    more than the retention size; -1 for a limit means no limit, and entries still to be read stay. It goes a
    whole closed ledger at a time (see :mod:`engine.ledgers`): the open ledger stays.
    """
    ledgers = topic.ledgers
    ledgers.roll(topic.last_confirmed, now, broker.config.ledger_rollover)
    # What could go at most, found cheaply first: most checks stop here, without asking the store.
    upto = ledgers.deletable_upto(consumed_upto(topic))
    if upto < ledgers.first_kept or upto < topic.first_entry_id():
        return -1
    minutes, megabytes = retention
    limit = -1
    if minutes == 0 or megabytes == 0:
        limit = upto
    else:
        if minutes > 0:
            limit = max(limit, topic.entry_at_time(now - minutes * 60_000) - 1)
        if megabytes > 0:
            over = topic.store.newest_over_size(topic.topic_id, topic.last_confirmed, megabytes * 1024 * 1024)
            if over is not None:
                limit = max(limit, over)
    upto = ledgers.deletable_upto(min(upto, limit))
    if upto < topic.first_entry_id():
        return -1
    ledgers.deleted_upto(upto)
    topic.store.stage_trim(topic.topic_id, upto)
    # Counted again from the first kept entry at once: a stats read before the commit must not see what went.
    broker.stats.storage.forget(topic.topic_id)
    broker.request_flush()
    log.info("%s: retention %s deletes entries up to %d", topic.name, retention, upto)
    return upto


class PolicyEnforcer:
    """Applies message TTL, retention, the compaction threshold and backlog quotas to the loaded topics every
    ``interval`` seconds, and drops the non-persistent topics nobody used for that long."""

    def __init__(self, broker: Broker, interval: float) -> None:
        self.broker = broker
        self.interval = interval
        self._call: Cancellable | None = None
        broker.topic_loaded.append(functools.partial(trim_loaded, broker))

    def start(self) -> None:
        """Check now and then every ``interval`` seconds."""
        self._call = self.broker.clock.call_later(self.interval, self._tick)

    def stop(self) -> None:
        """Stop checking."""
        if self._call is not None:
            self._call.cancel()
            self._call = None

    def _tick(self) -> None:
        try:
            self.run()
        except Exception:
            log.exception("applying message TTL and retention failed")
        self.start()

    def run(self) -> None:
        """One pass over the loaded topics."""
        namespaces = self.broker.namespaces
        now = now_ms(self.broker.clock)
        for topic in list(self.broker.topics.values()):
            name = topic.name
            if name.namespace_name not in namespaces:
                continue
            ttl = namespaces.message_ttl(name)
            if ttl > 0:
                for subscription in list(topic.subscriptions.values()):
                    subscription.expire_before(now - ttl * 1000)
            trim(self.broker, topic, retention_of(self.broker, topic), now)
            threshold = namespaces.compaction_threshold(name)
            if threshold > 0:
                compact_over(topic, threshold)
            quotas = namespaces.backlog_quotas(name)
            if quotas:
                backlog_quota.enforce(topic, quotas, now)
        self.drop_idle_non_persistent(now)

    def drop_idle_non_persistent(self, now: int) -> None:
        """Forget the non-persistent topics found unused at two checks ``interval`` apart (they hold nothing)."""
        for name, topic in list(self.broker.non_persistent.items()):
            if topic.in_use:
                topic.idle_since = None
            elif topic.idle_since is None:
                topic.idle_since = now
            elif now - topic.idle_since >= self.interval * 1000:
                del self.broker.non_persistent[name]
                log.info("%s: dropped after %d s without producers or subscriptions", name, self.interval)
