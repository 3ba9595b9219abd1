"""Topic figures in the JSON shapes of Pulsar's ``TopicStatsImpl``, ``SubscriptionStatsImpl``, ``ConsumerStatsImpl``,
``PublisherStatsImpl``, ``PartitionedTopicStatsImpl`` and ``PersistentTopicInternalStats``, and for non-persistent
topics ``NonPersistentTopicStatsImpl`` (the same fields, nothing stored, plus ``msgDropRate``).

Each topic partition has a single ledger (its ``ledger_id``) that is never rolled over, so internal stats show
one ledger, open, holding every stored entry.
"""

from __future__ import annotations

from typing import Any

from engine.backlog_quota import QuotaType
from engine.non_persistent import NonPersistentSubscription, NonPersistentTopic
from engine.stats import BrokerStats
from engine.subscription import ConsumerGroup, Subscription, SubType
from engine.topic import AccessMode, Producer, ProducerHost, Topic
from proxy.stats_json import client_fields, consumer_stats, pulsar_time, unacked

_SUB_TYPES = {
    SubType.EXCLUSIVE: "Exclusive",
    SubType.SHARED: "Shared",
    SubType.FAILOVER: "Failover",
    SubType.KEY_SHARED: "Key_Shared",
}
_ACCESS_MODES = {
    AccessMode.SHARED: "Shared",
    AccessMode.EXCLUSIVE: "Exclusive",
    AccessMode.WAIT_FOR_EXCLUSIVE: "WaitForExclusive",
    AccessMode.EXCLUSIVE_WITH_FENCING: "ExclusiveWithFencing",
}
_COMPACTION = {
    "lastCompactionRemovedEventCount": 0,
    "lastCompactionSucceedTimestamp": 0,
    "lastCompactionFailedTimestamp": 0,
    "lastCompactionDurationTimeInMills": 0,
}
#: ``LedgerInfo`` of the compacted ledger when there is none.
NO_LEDGER = {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False, "underReplicated": False}


def acked_ranges(subscription: Subscription) -> list[tuple[int, int]]:
    """Inclusive ranges of entries acknowledged above the mark-delete position."""
    ranges: list[list[int]] = []
    for entry_id in sorted(subscription.cursor.acked):
        if ranges and ranges[-1][1] == entry_id - 1:
            ranges[-1][1] = entry_id
        else:
            ranges.append([entry_id, entry_id])
    return [(a, b) for a, b in ranges]


def _subscription_fields(
    stats: BrokerStats, sub: ConsumerGroup, rates: tuple[float, ...], backlog: int, backlog_size: int, consumers: bool
) -> dict[str, Any]:
    """The ``SubscriptionStatsImpl`` fields of a subscription of either domain (``rates``: out, throughput)."""
    rate, throughput = rates[:2]
    out: dict[str, Any] = {
        "msgRateOut": rate,
        "msgThroughputOut": throughput,
        "bytesOutCounter": sub.bytes_out,
        "msgOutCounter": sub.messages_out,
        "msgRateRedeliver": 0.0,
        "messageAckRate": 0.0,
        "chunkedMessageRate": 0.0,
        "msgBacklog": backlog,
        "backlogSize": backlog_size,
        "earliestMsgPublishTimeInBacklog": 0,
        "msgBacklogNoDelayed": backlog,
        "blockedSubscriptionOnUnackedMsgs": False,
        "msgDelayed": 0,
        "msgInReplay": 0,
        "unackedMessages": sum(unacked(sub, c) for c in sub.consumers),
        "type": _SUB_TYPES[sub.sub_type],
        "msgRateExpired": 0.0,
        "totalMsgExpired": 0,
        "lastExpireTimestamp": 0,
        "lastConsumedFlowTimestamp": max((c.last_flow_ms for c in sub.consumers), default=0),
        "lastConsumedTimestamp": 0,
        "lastAckedTimestamp": 0,
        "lastMarkDeleteAdvancedTimestamp": 0,
        "consumers": [consumer_stats(stats, c, sub) for c in sub.consumers] if consumers else [],
        "isDurable": False,
        "isReplicated": False,
        "allowOutOfOrderDelivery": False,
        "consumersAfterMarkDeletePosition": {},
        "drainingHashesCount": 0,
        "drainingHashesClearedTotal": 0,
        "drainingHashesUnackedMessages": 0,
        "nonContiguousDeletedMessagesRanges": 0,
        "nonContiguousDeletedMessagesRangesSerializedSize": 0,
        "delayedMessageIndexSizeInBytes": 0,
        "subscriptionProperties": {},
        "filterProcessedMsgCount": 0,
        "filterAcceptedMsgCount": 0,
        "filterRejectedMsgCount": 0,
        "filterRescheduledMsgCount": 0,
    }
    if sub.sub_type == SubType.KEY_SHARED:
        out["keySharedMode"] = "STICKY" if sub.sticky_mode else "AUTO_SPLIT"
    return out


def subscription_stats(
    stats: BrokerStats, topic: Topic, sub: Subscription, avg_entry: float, consumers: bool = True
) -> dict[str, Any]:
    """One ``SubscriptionStatsImpl``."""
    backlog = sub.backlog()
    rates = stats.rates.of(sub, (sub.messages_out, sub.bytes_out))
    out = _subscription_fields(stats, sub, rates, backlog, int(backlog * avg_entry), consumers)
    out["isDurable"] = sub.durable
    out["blockedSubscriptionOnUnackedMsgs"] = sub.blocked_on_unacked
    out["nonContiguousDeletedMessagesRanges"] = len(acked_ranges(sub)) if sub.cursor.acked else 0
    active = sub.active_consumer
    if active is not None and sub.single_active:
        out["activeConsumerName"] = active.name
    return out


def non_persistent_subscription_stats(
    stats: BrokerStats, sub: NonPersistentSubscription, consumers: bool = True
) -> dict[str, Any]:
    """One ``NonPersistentSubscriptionStatsImpl``: no backlog, and the rate of messages dropped for lack of permits.

    As Pulsar's, it names no active consumer and leaves ``isDurable`` false.
    """
    rates = stats.rates.of(sub, (sub.messages_out, sub.bytes_out, sub.messages_dropped))
    out = _subscription_fields(stats, sub, rates, 0, 0, consumers)
    out["msgDropRate"] = rates[2]
    return out


def publisher_stats(stats: BrokerStats, producer: Producer) -> dict[str, Any]:
    """One ``PublisherStatsImpl``."""
    rate, throughput = stats.rates.of(producer, (producer.messages_in, producer.bytes_in))
    return {
        "accessMode": _ACCESS_MODES[producer.access_mode],
        "msgRateIn": rate,
        "msgThroughputIn": throughput,
        "averageMsgSize": throughput / rate if rate else 0.0,
        "chunkedMessageRate": 0.0,
        "producerId": producer.producer_id,
        "supportsPartialProducer": False,
        "producerName": producer.name,
        "metadata": dict(producer.metadata),
        **client_fields(producer.sink),
    }


def _topic_fields(
    stats: BrokerStats,
    topic: ProducerHost,
    subs: dict[str, dict[str, Any]],
    publishers: list[dict[str, Any]],
    owner: str,
) -> dict[str, Any]:
    """The ``TopicStatsImpl`` fields of a topic of either domain, with nothing stored and no transactions."""
    rate_in, throughput_in = stats.rates.of(topic, (topic.messages_in, topic.bytes_in))
    return {
        "msgRateIn": rate_in,
        "msgThroughputIn": throughput_in,
        "msgRateOut": sum(s["msgRateOut"] for s in subs.values()),
        "msgThroughputOut": sum(s["msgThroughputOut"] for s in subs.values()),
        "bytesInCounter": topic.bytes_in,
        "msgInCounter": topic.messages_in,
        "systemTopicBytesInCounter": 0,
        "bytesOutCounter": sum(s["bytesOutCounter"] for s in subs.values()),
        "msgOutCounter": sum(s["msgOutCounter"] for s in subs.values()),
        "bytesOutInternalCounter": 0,
        "averageMsgSize": throughput_in / rate_in if rate_in else 0.0,
        "msgChunkPublished": False,
        "lastPublishTimeStamp": 0,
        "storageSize": 0,
        "backlogSize": 0,
        "backlogQuotaLimitSize": -1,
        "backlogQuotaLimitTime": -1,
        "oldestBacklogMessageAgeSeconds": -1,
        "publishRateLimitedTimes": 0,
        "earliestMsgPublishTimeInBacklogs": 0,
        "offloadedStorageSize": 0,
        "lastOffloadLedgerId": 0,
        "lastOffloadSuccessTimeStamp": 0,
        "lastOffloadFailureTimeStamp": 0,
        "ongoingTxnCount": 0,
        "abortedTxnCount": 0,
        "committedTxnCount": 0,
        "publishers": publishers,
        "waitingPublishers": len(topic.waiting_producers),
        "subscriptions": subs,
        "replication": {},
        "nonContiguousDeletedMessagesRanges": sum(s["nonContiguousDeletedMessagesRanges"] for s in subs.values()),
        "nonContiguousDeletedMessagesRangesSerializedSize": 0,
        "delayedMessageIndexSizeInBytes": 0,
        "compaction": dict(_COMPACTION),
        "ownerBroker": owner,
    }


def topic_stats(
    stats: BrokerStats, topic: Topic, owner: str, *, publishers: bool = True, consumers: bool = True
) -> dict[str, Any]:
    """One ``TopicStatsImpl`` of a topic partition (or non-partitioned topic)."""
    entries, stored = stats.storage.of(topic)
    avg_entry = stored / entries if entries else 0.0
    subs = {
        name: subscription_stats(stats, topic, sub, avg_entry, consumers) for name, sub in topic.subscriptions.items()
    }
    producers = [publisher_stats(stats, p) for p in topic.producers] if publishers else []
    backlogs = [s["msgBacklog"] for name, s in subs.items() if topic.subscriptions[name].durable]
    txn = topic.txn_buffer
    out = _topic_fields(stats, topic, subs, producers, owner)
    quotas = topic.broker.namespaces.backlog_quotas(topic.name)
    size_quota = quotas.get(QuotaType.DESTINATION_STORAGE)
    age_quota = quotas.get(QuotaType.MESSAGE_AGE)
    out.update(
        storageSize=stored,
        backlogSize=int(max(backlogs, default=0) * avg_entry),
        backlogQuotaLimitSize=size_quota.limit_size if size_quota else -1,
        backlogQuotaLimitTime=age_quota.limit_time if age_quota else -1,
        ongoingTxnCount=len(txn.ongoing),
        abortedTxnCount=len(txn.aborted),
        committedTxnCount=txn.committed,
        deduplicationStatus="Enabled" if topic.broker.deduplication(topic.name) else "Disabled",
        topicCreationTimeStamp=topic.broker.created_ms(topic.name.full),
        lastPublishTimeStamp=topic.last_publish_ms(),
    )
    compaction = topic.compaction
    out["compaction"] = {
        "lastCompactionRemovedEventCount": compaction.removed_events,
        "lastCompactionSucceedTimestamp": compaction.succeeded_ms,
        "lastCompactionFailedTimestamp": compaction.failed_ms,
        "lastCompactionDurationTimeInMills": compaction.duration_ms,
    }
    return out


def non_persistent_topic_stats(
    stats: BrokerStats, topic: NonPersistentTopic, owner: str, *, publishers: bool = True, consumers: bool = True
) -> dict[str, Any]:
    """One ``NonPersistentTopicStatsImpl``.

    As Pulsar's: the out counters keep what removed subscriptions delivered, publishers carry a ``msgDropRate`` (of
    messages refused for too many in flight on a connection, which this endpoint never does) and the topic's own
    ``msgDropRate`` is left at 0 (drops show per subscription).
    """
    subs = {name: non_persistent_subscription_stats(stats, sub, consumers) for name, sub in topic.subscriptions.items()}
    producers = [{**publisher_stats(stats, p), "msgDropRate": 0.0} for p in topic.producers] if publishers else []
    out = _topic_fields(stats, topic, subs, producers, owner)
    out["bytesOutCounter"] += topic.removed_bytes_out
    out["msgOutCounter"] += topic.removed_messages_out
    out["msgDropRate"] = 0.0
    return out


#: Fields of ``TopicStatsImpl`` that partitioned stats sum over partitions.
_SUMMED = (
    "msgRateIn",
    "msgThroughputIn",
    "msgRateOut",
    "msgThroughputOut",
    "bytesInCounter",
    "msgInCounter",
    "bytesOutCounter",
    "msgOutCounter",
    "storageSize",
    "backlogSize",
    "ongoingTxnCount",
    "abortedTxnCount",
    "committedTxnCount",
    "waitingPublishers",
    "nonContiguousDeletedMessagesRanges",
)
_SUB_SUMMED = (
    "msgRateOut",
    "msgThroughputOut",
    "bytesOutCounter",
    "msgOutCounter",
    "msgBacklog",
    "backlogSize",
    "msgBacklogNoDelayed",
    "unackedMessages",
    "nonContiguousDeletedMessagesRanges",
)


def partitioned_stats(partitions: int, parts: dict[str, dict[str, Any]], per_partition: bool) -> dict[str, Any]:
    """A ``PartitionedTopicStatsImpl``: partition stats summed, subscriptions merged by name."""
    total: dict[str, Any] = {}
    subs: dict[str, dict[str, Any]] = {}
    publishers: list[dict[str, Any]] = []
    for part in parts.values():
        if not total:
            total = {k: v for k, v in part.items() if k not in ("subscriptions", "publishers")}
            total.update({k: 0 for k in _SUMMED})
        for key in _SUMMED:
            total[key] += part[key]
        total["lastPublishTimeStamp"] = max(total["lastPublishTimeStamp"], part["lastPublishTimeStamp"])
        publishers.extend(part["publishers"])
        for name, sub in part["subscriptions"].items():
            merged = subs.get(name)
            if merged is None:
                subs[name] = {**sub, "consumers": list(sub["consumers"])}
                continue
            for key in _SUB_SUMMED:
                merged[key] += sub[key]
            merged["consumers"].extend(sub["consumers"])
    rate = total.get("msgRateIn", 0)
    total["averageMsgSize"] = total["msgThroughputIn"] / rate if rate else 0.0
    total["publishers"] = publishers
    total["subscriptions"] = subs
    total["metadata"] = {"partitions": partitions}
    total["partitions"] = parts if per_partition else {}
    return total


def _position(topic: Topic, entry_id: int) -> str:
    return f"{topic.ledger_id}:{entry_id}"


def cursor_stats(topic: Topic, sub: Subscription) -> dict[str, Any]:
    """One ``CursorStats`` of internal stats."""
    ranges = acked_ranges(sub)
    deleted = ", ".join(f"({_position(topic, a - 1)}..{_position(topic, b)}]" for a, b in ranges)
    waiting = any(c.permits > 0 for c in sub.consumers) and sub.read_position > topic.read_limit
    unacked_since = topic.last_confirmed - sub.cursor.mark_delete
    return {
        "markDeletePosition": _position(topic, sub.cursor.mark_delete),
        "readPosition": _position(topic, sub.read_position),
        "waitingReadOp": waiting,
        "pendingReadOps": 0,
        "messagesConsumedCounter": sub.messages_out,
        "cursorLedger": -1,
        "cursorLedgerLastEntry": -1,
        "individuallyDeletedMessages": f"[{deleted}]",
        "lastLedgerSwitchTimestamp": pulsar_time(topic.broker.stats.started_ms),
        "state": "NoLedger",
        "active": bool(sub.consumers),
        "numberOfEntriesSinceFirstNotAckedMessage": max(unacked_since, 0),
        "totalNonContiguousDeletedMessagesRange": len(ranges),
        "subscriptionHavePendingRead": waiting,
        "subscriptionHavePendingReplayRead": False,
        "properties": {},
    }


def ledger_internal_stats(
    ledger_id: int, entries: int, size: int, last_entry: int, state: str = "LedgerOpened"
) -> dict[str, Any]:
    """A ``ManagedLedgerInternalStats`` of a log with one open ledger."""
    return {
        "entriesAddedCounter": entries,
        "numberOfEntries": entries,
        "totalSize": size,
        "currentLedgerEntries": entries,
        "currentLedgerSize": size,
        "waitingCursorsCount": 0,
        "pendingAddEntriesCount": 0,
        "lastConfirmedEntry": f"{ledger_id}:{last_entry}",
        "state": state,
        "ledgers": [
            {"ledgerId": ledger_id, "entries": entries, "size": size, "offloaded": False, "underReplicated": False}
        ],
        "cursors": {},
        "properties": {},
    }


def internal_stats(stats: BrokerStats, topic: Topic) -> dict[str, Any]:
    """A ``PersistentTopicInternalStats``."""
    entries, size = stats.storage.of(topic)
    state = "Terminated" if topic.terminated is not None else "LedgerOpened"
    out = ledger_internal_stats(topic.ledger_id, entries, size, topic.last_confirmed, state)
    # The would-be ledgers of engine.ledgers (retention deletes closed ones whole), the open one last; message ids
    # keep the topic's one ledger id, so each shows it.
    spans = topic.ledgers.spans(topic.first_entry_id(), topic.last_confirmed)
    if len(spans) > 1:
        ledgers = []
        for first, last in spans:
            count, span_size = (0, 0) if last < first else topic.store.entries_size(topic.topic_id, first - 1, last)
            ledgers.append(
                {
                    "ledgerId": topic.ledger_id,
                    "entries": count,
                    "size": span_size,
                    "offloaded": False,
                    "underReplicated": False,
                }
            )
        out["ledgers"] = ledgers
        out["currentLedgerEntries"], out["currentLedgerSize"] = ledgers[-1]["entries"], ledgers[-1]["size"]
    out["entriesAddedCounter"] = topic.next_entry_id
    out["lastLedgerCreatedTimestamp"] = pulsar_time(stats.started_ms)
    out["pendingAddEntriesCount"] = topic.next_entry_id - 1 - topic.last_confirmed
    out["waitingCursorsCount"] = sum(1 for s in topic.subscriptions.values() if any(c.permits > 0 for c in s.consumers))
    out["cursors"] = {name: cursor_stats(topic, sub) for name, sub in topic.subscriptions.items() if sub.durable}
    out["schemaLedgers"] = []
    compaction = topic.compaction
    if compaction.exists:
        out["compactedLedger"] = {
            "ledgerId": compaction.ledger_id,
            "entries": compaction.entries,
            "size": compaction.size,
            "offloaded": False,
            "underReplicated": False,
        }
    else:
        out["compactedLedger"] = dict(NO_LEDGER)
    return out
