"""Topic names as Pulsar completes them."""

from __future__ import annotations

from pulsar_txn.exceptions import InvalidTopicName

PARTITION_SUFFIX = "-partition-"


def full_topic_name(topic: str) -> str:
    """``my-topic`` -> ``persistent://public/default/my-topic``; ``t/ns/x`` -> ``persistent://t/ns/x``."""
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1 and topic:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3 and all(parts):
        return f"persistent://{topic}"
    raise InvalidTopicName(f"invalid topic name: {topic!r}")


def split_partition(topic: str) -> tuple[str, int]:
    """``(parent name, partition index)`` of a topic; the index is -1 for a topic that is not a partition."""
    base, sep, index = topic.rpartition(PARTITION_SUFFIX)
    if sep and base and index.isdigit():
        return base, int(index)
    return topic, -1


def namespace_of(topic: str) -> str:
    """``tenant/namespace`` of a topic name."""
    rest = full_topic_name(topic).partition("://")[2]
    tenant, namespace, _ = rest.split("/", 2)
    return f"{tenant}/{namespace}"
