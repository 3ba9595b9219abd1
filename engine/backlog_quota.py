"""Backlog quotas of a namespace (its ``backlog_quota_map``) or a topic (its own), enforced as Pulsar's broker does.

A topic's backlog is what its slowest durable subscription has not acknowledged: its size in bytes
(``destination_storage`` quotas, ``limitSize``) and the age of its oldest message (``message_age`` quotas,
``limitTime`` in seconds). The age is measured from the message's publish time, as Pulsar does with
``preciseTimeBasedBacklogQuotaCheck``; its default estimates by the close times of ledgers, and this endpoint's topics
have one ledger that never closes. A topic without subscriptions has no backlog. When a quota is exceeded:

- ``producer_request_hold`` / ``producer_exception``: a new producer is refused with ProducerBlockedQuotaExceededError /
  ProducerBlockedQuotaExceededException, and the periodic check disconnects the connected ones, which are then
  refused when they come back;
- ``consumer_backlog_eviction``: the periodic check moves the slowest subscriptions on until the backlog is 90% of the
  limit (oldest messages first), or expires the messages older than 90% of the time limit.

The ``__compaction`` subscription does not hold a backlog (Pulsar moves it on rather than block producers).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from engine.compaction import COMPACTION_SUBSCRIPTION
from engine.errors import BrokerError
from wire.pulsar_api_pb2 import ServerError

if TYPE_CHECKING:
    from engine.subscription import Subscription
    from engine.topic import Topic

log = logging.getLogger(__name__)

#: Eviction leaves this share of the limit, as Pulsar does.
EVICTION_TARGET = 0.9


class QuotaType(StrEnum):
    """What a quota limits (the keys of ``backlog_quota_map``)."""

    DESTINATION_STORAGE = "destination_storage"
    MESSAGE_AGE = "message_age"


class RetentionPolicy(StrEnum):
    """What happens when a quota is exceeded."""

    PRODUCER_REQUEST_HOLD = "producer_request_hold"
    PRODUCER_EXCEPTION = "producer_exception"
    CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"


#: The error a new producer gets, by policy.
_REFUSALS = {
    RetentionPolicy.PRODUCER_REQUEST_HOLD: ServerError.ProducerBlockedQuotaExceededError,
    RetentionPolicy.PRODUCER_EXCEPTION: ServerError.ProducerBlockedQuotaExceededException,
}
#: Pulsar's message for it.
REFUSAL_MESSAGE = (
    "org.apache.pulsar.broker.service.BrokerServiceException$TopicBacklogQuotaExceededException:"
    " Cannot create producer on topic with backlog quota exceeded"
)


@dataclass(frozen=True)
class BacklogQuota:
    """One quota: ``limit_size`` bytes (negative: no limit) or ``limit_time`` seconds (0 or less: no limit), and its
    policy."""

    limit_size: int
    limit_time: int
    policy: RetentionPolicy

    @classmethod
    def from_policy(cls, value: dict[str, Any]) -> BacklogQuota:
        """A quota from its admin-API form: ``limitSize`` (or the older ``limit``), ``limitTime``, ``policy``; a limit
        left out is 0, as Pulsar reads it."""
        size = value.get("limitSize")
        if size is None:
            size = value.get("limit")
        policy = value.get("policy") or RetentionPolicy.PRODUCER_REQUEST_HOLD
        return cls(int(size or 0), int(value.get("limitTime") or 0), RetentionPolicy(policy))

    def to_policy(self) -> dict[str, Any]:
        """The admin-API form Pulsar answers with."""
        return {
            "limit": self.limit_size,
            "limitSize": self.limit_size,
            "limitTime": self.limit_time,
            "policy": self.policy.value,
        }


Quotas = dict[QuotaType, BacklogQuota]


def parse_quotas(quota_map: dict[str, Any] | None) -> Quotas:
    """The quotas of a backlog quota map (a namespace's or a topic's policy), by type."""
    found = {}
    for kind, value in (quota_map or {}).items():
        if kind in QuotaType.__members__.values() and isinstance(value, dict):
            found[QuotaType(kind)] = BacklogQuota.from_policy(value)
    return found


def _holding(topic: Topic) -> list[Subscription]:
    return [s for name, s in topic.subscriptions.items() if s.durable and name != COMPACTION_SUBSCRIPTION]


def _slowest_mark(topic: Topic) -> int | None:
    """The mark-delete position of the slowest subscription that holds a backlog; None if none does."""
    return min((s.cursor.mark_delete for s in _holding(topic)), default=None)


def backlog_size(topic: Topic) -> int:
    """Bytes of the entries the slowest durable subscription has not acknowledged (0 without subscriptions)."""
    slowest = _slowest_mark(topic)
    if slowest is None:
        return 0
    return topic.store.entries_size(topic.topic_id, slowest, topic.last_confirmed)[1]


def oldest_backlog_publish_time(topic: Topic) -> int | None:
    """Publish time (ms) of the oldest entry a durable subscription has not acknowledged; None if there is none."""
    slowest = _slowest_mark(topic)
    if slowest is None:
        return None
    # The log is contiguous from its first stored entry on: the oldest unacknowledged entry is the one after the mark.
    oldest = max(slowest + 1, topic.first_entry_id())
    entries = topic.read(oldest, oldest)
    return entries[0].publish_time if entries else None


def exceeded(topic: Topic, quotas: Quotas, now_ms: int) -> list[tuple[QuotaType, BacklogQuota]]:
    """The quotas (those in force on the topic) that its backlog exceeds now."""
    found = []
    for kind, quota in quotas.items():
        if kind is QuotaType.DESTINATION_STORAGE and quota.limit_size >= 0:
            if backlog_size(topic) > quota.limit_size:
                found.append((kind, quota))
        elif kind is QuotaType.MESSAGE_AGE and quota.limit_time > 0:
            oldest = oldest_backlog_publish_time(topic)
            if oldest is not None and now_ms - oldest > quota.limit_time * 1000:
                found.append((kind, quota))
    return found


def check_new_producer(topic: Topic, quotas: Quotas, now_ms: int) -> None:
    """Refuse a new producer while a quota with a producer policy is exceeded."""
    for _, quota in exceeded(topic, quotas, now_ms):
        refusal = _REFUSALS.get(quota.policy)
        if refusal is not None:
            raise BrokerError(refusal, REFUSAL_MESSAGE)


def enforce(topic: Topic, quotas: Quotas, now_ms: int) -> None:
    """The periodic check: evict the backlog or disconnect the producers, by each exceeded quota's policy."""
    for kind, quota in exceeded(topic, quotas, now_ms):
        if quota.policy is not RetentionPolicy.CONSUMER_BACKLOG_EVICTION:
            log.info("%s: backlog quota %s exceeded; disconnecting its producers", topic.name, kind)
            for producer in list(topic.producers):
                topic.remove_producer(producer)
                producer.sink.close_producer(producer)
        elif kind is QuotaType.DESTINATION_STORAGE:
            _evict_to_size(topic, int(quota.limit_size * EVICTION_TARGET))
        else:
            cutoff = now_ms - int(quota.limit_time * 1000 * EVICTION_TARGET)
            for subscription in _holding(topic):
                subscription.expire_before(cutoff)


def _evict_to_size(topic: Topic, target: int) -> None:
    """Acknowledge the oldest entries of the subscriptions behind, until at most ``target`` bytes stay unacked."""
    over = topic.store.newest_over_size(topic.topic_id, topic.last_confirmed, target)
    if over is None:
        return
    for subscription in _holding(topic):
        if subscription.acknowledge_upto(over):
            log.info("%s: backlog quota evicted %s up to entry %d", topic.name, subscription.name, over)
