"""The Protocols through which a lower module reaches the object above it (ADR 0008) are what those objects really
have: each member a Protocol declares exists on the object the wiring passes down, and each method takes the
parameters the Protocol names. Nothing type-checks the Protocols in ``make test``; without this, a renamed method of
``Broker`` would leave a Protocol describing a member that is gone.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Protocol

import pytest
from twisted.internet.testing import MemoryReactorClock

from engine.broker import Broker, BrokerConfig
from engine.clock import ManualClock
from engine.coordinator import CoordinatorHost
from engine.store import Store
from engine.subscription import Consumer, HeldAcks, SubType
from engine.topic import (
    ConsumerCount,
    LiveTxn,
    Subscriber,
    TopicCompaction,
    TopicHost,
    TopicPolicies,
    TopicSubscription,
    TopicTxnBuffer,
    TxnRegistry,
)
from engine.transactions import TxnStatus
from proxy.admin.auth import AdminAuthentication
from proxy.admin.http import RequestAuthentication
from proxy.connection import ConnectionService, ConnectionTimeouts, PulsarConnection
from proxy.server import BrokerService
from proxy.topic_lists import WatchConnection
from proxy.transactions import TxnConnection
from pulsar_txn.core.connection import ConsumerCore as ConsumerSeam
from pulsar_txn.core.connection import ProducerCore as ProducerSeam
from pulsar_txn.core.consumer import ConsumerConfig, ConsumerCore
from pulsar_txn.core.producer import ProducerConfig, ProducerCore

TOPIC = "persistent://public/default/seams"


class _Sink:
    def deliver(self, *args: Any) -> None: ...

    def active_consumer_change(self, *args: Any) -> None: ...

    def close_consumer(self, *args: Any) -> None: ...


def _members(protocol: type) -> dict[str, Any]:
    """What a Protocol declares, its bases' included: annotated attributes (None) and callables."""
    found: dict[str, Any] = {}
    for cls in reversed(protocol.__mro__):
        if cls in (object, Protocol, Any) or not getattr(cls, "_is_protocol", False):
            continue
        for name in getattr(cls, "__annotations__", {}):
            found[name] = None
        for name, value in vars(cls).items():
            if not name.startswith("_") and (callable(value) or isinstance(value, property)):
                found[name] = value
    return found


def _check(protocol: type, obj: object) -> list[str]:
    problems = []
    for name, declared in _members(protocol).items():
        if not hasattr(obj, name):
            problems.append(f"{protocol.__name__}.{name}: missing on {type(obj).__name__}")
            continue
        if declared is None or isinstance(declared, property):
            continue
        wanted = [p for p in inspect.signature(declared).parameters if p != "self"]
        actual = inspect.signature(getattr(obj, name)).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in actual.values())
        missing = [p for p in wanted if p not in actual and not takes_any and not p.startswith("fields")]
        if missing:
            problems.append(f"{protocol.__name__}.{name}: {type(obj).__name__} takes no {missing}")
    return problems


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    broker = Broker(Store(tmp_path / "store.sqlite"), ManualClock(), BrokerConfig(transaction_coordinators=1))
    topic = broker.topic(TOPIC)
    consumer = Consumer(1, "c", _Sink())  # type: ignore[arg-type]
    subscription = topic.subscribe(
        "s", SubType.SHARED, consumer, durable=True, earliest=True, start_entry=None, sticky=False
    )
    return broker, topic, subscription, consumer


def test_engine_objects_have_what_the_layers_below_declare(engine: Any) -> None:
    broker, topic, subscription, consumer = engine
    pairs: list[tuple[type, object]] = [
        (TopicHost, broker),
        (TopicPolicies, broker.namespaces),
        (TxnRegistry, broker.coordinators),
        (CoordinatorHost, broker),
        (TopicSubscription, subscription),
        (ConsumerCount, subscription),
        (Subscriber, consumer),
        (HeldAcks, subscription.pending_ack),
        (TopicTxnBuffer, topic.txn_buffer),
        (TopicCompaction, topic.compaction),
    ]
    problems = [p for protocol, obj in pairs for p in _check(protocol, obj)]
    assert not problems, "\n".join(problems)


def test_a_live_transaction_has_its_partitions(engine: Any) -> None:
    broker = engine[0]
    box: list[Any] = []
    broker.coordinators.new_txn(0, 60_000, box.append)
    broker.clock.advance(0)
    meta = broker.coordinators.live(box[0])
    assert meta is not None and meta.status is TxnStatus.OPEN
    assert _check(LiveTxn, meta) == []


def test_proxy_objects_have_what_the_layers_below_declare(engine: Any) -> None:
    broker = engine[0]
    service = BrokerService(broker, MemoryReactorClock(), "127.0.0.1", 6650, ConnectionTimeouts())
    connection = PulsarConnection(service)
    problems = (
        _check(ConnectionService, service)
        + _check(TxnConnection, connection)
        + _check(WatchConnection, connection)
        + _check(RequestAuthentication, AdminAuthentication(None))
    )
    assert not problems, "\n".join(problems)


def test_client_cores_have_what_the_connection_routes_to() -> None:
    producer = ProducerCore("persistent://public/default/t", -1, ProducerConfig(), 0.0)
    consumer = ConsumerCore("persistent://public/default/t", -1, ConsumerConfig("s"))
    problems = _check(ProducerSeam, producer) + _check(ConsumerSeam, consumer)
    assert not problems, "\n".join(problems)


def test_the_check_sees_a_missing_member_and_a_missing_parameter() -> None:
    class Wanted(Protocol):
        size: int

        def put(self, key: str, value: bytes) -> None: ...

    class Drifted:
        def put(self, key: str) -> None: ...

    assert _check(Wanted, Drifted()) == ["Wanted.size: missing on Drifted", "Wanted.put: Drifted takes no ['value']"]
