"""The limits the policies set on a topic, as the topic applies them (the policies themselves are in
:mod:`engine.namespaces`, which computes these)."""

from __future__ import annotations

from typing import NamedTuple


class TopicLimits(NamedTuple):
    """The limits in force on a topic (a topic's own policy, else its namespace's, else the broker's); 0 or None:
    no limit."""

    max_producers: int
    max_consumers: int
    max_consumers_per_subscription: int
    max_subscriptions: int
    #: Subscription types allowed (every type when empty).
    subscription_types: tuple[str, ...]
    max_unacked_per_consumer: int
    max_unacked_per_subscription: int
    #: Bytes of a message's metadata and payload (None: the broker's limit).
    max_message_size: int | None
