"""The JSON shapes of Pulsar's stats that both protocols answer with: a consumer's ``ConsumerStatsImpl`` (the
binary protocol's CONSUMER_STATS and the admin API's topic stats) and Pulsar's time format.

It sits below the connection and the admin API, which both use it; it knows the engine's consumers, not HTTP.
"""

from __future__ import annotations

from typing import Any

from engine.stats import BrokerStats
from engine.subscription import Consumer, ConsumerGroup, SubType


def pulsar_time(ms: int) -> str:
    """Epoch milliseconds (a Java ``long``: a ``uint64`` field goes through :func:`signed64` first) as Pulsar's
    ``DateFormatter`` writes them: ISO 8601 in UTC, the fraction only when not zero, a year past 9999 signed, over the
    whole range of a ``long``."""
    seconds, millis = divmod(ms, 1000)
    days, seconds = divmod(seconds, 86400)
    year, month, day = _civil(days)
    if year > 9999:
        year_text = f"+{year}"
    elif year < 0:
        year_text = f"-{-year:04d}"
    else:
        year_text = f"{year:04d}"
    fraction = f".{millis:03d}" if millis else ""
    hour, minute, second = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{year_text}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}{fraction}Z"


def _civil(days: int) -> tuple[int, int, int]:
    """Year, month and day of the proleptic Gregorian calendar ``days`` after 1970-01-01 (any integer)."""
    days += 719468  # from 0000-03-01
    era, day_of_era = divmod(days, 146097)
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153  # 0 is March
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    return year_of_era + era * 400 + (month <= 2), month, day


def client_fields(sink: object) -> dict[str, Any]:
    """The fields of a consumer or producer that name its connection."""
    return {
        "address": f"/{getattr(sink, 'peer', '?')}",
        "connectedSince": pulsar_time(getattr(sink, "connected_ms", 0)),
        "clientVersion": getattr(sink, "client_version", ""),
    }


def unacked(sub: ConsumerGroup, consumer: Consumer) -> int:
    """Entries delivered to a consumer and not acknowledged: Pulsar tracks them on Shared and Key_Shared only."""
    return 0 if sub.single_active else len(consumer.pending)


def consumer_stats(stats: BrokerStats, consumer: Consumer, sub: ConsumerGroup) -> dict[str, Any]:
    """One ``ConsumerStatsImpl``."""
    rate, throughput = stats.rates.of(consumer, (consumer.messages_out, consumer.bytes_out))
    out: dict[str, Any] = {
        "msgRateOut": rate,
        "msgThroughputOut": throughput,
        "bytesOutCounter": consumer.bytes_out,
        "msgOutCounter": consumer.messages_out,
        "msgRateRedeliver": 0.0,
        "messageAckRate": 0.0,
        "chunkedMessageRate": 0.0,
        "consumerName": consumer.name,
        "availablePermits": max(consumer.permits, 0),
        "unackedMessages": unacked(sub, consumer),
        "avgMessagesPerEntry": 0,
        "blockedConsumerOnUnackedMsgs": consumer.blocked_on_unacked,
        "drainingHashesCount": 0,
        "drainingHashesClearedTotal": 0,
        "drainingHashesUnackedMessages": 0,
        "lastAckedTimestamp": 0,
        "lastConsumedTimestamp": 0,
        "firstMessagesSentTimestamp": 0,
        "lastConsumedFlowTimestamp": consumer.last_flow_ms,
        "firstConsumedFlowTimestamp": 0,
        "metadata": dict(consumer.metadata),
        **client_fields(consumer.sink),
    }
    if sub.sub_type == SubType.KEY_SHARED and consumer.hash_ranges:
        out["keyHashRanges"] = [f"[{a}, {b}]" for a, b in consumer.hash_ranges]
    return out
