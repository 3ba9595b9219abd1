"""Failures the subscription model (tests/subscription_model.py) found, each replayed as its shrunk step sequence.

Each test is the sequence of :class:`~tests.subscription_model.SubscriptionMachine` steps that failed, so the model's
checks (what must come back after a drain, what must never come again) decide the outcome. Apache Pulsar 4.2.4 passes
every one (``MODEL_SERVICE_URL=pulsar://host:port`` runs them there; the restart ones then skip).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.subscription_model import SubscriptionMachine, target


@pytest.fixture
def state() -> Iterator[SubscriptionMachine]:
    machine = SubscriptionMachine()
    yield machine
    machine.teardown()


@pytest.fixture
def restartable() -> None:
    if not target().restartable:
        # As the suite's other tests that restart a server: with another broker given, they fail saying why.
        pytest.fail("this test restarts the server, which MODEL_SERVICE_URL's broker cannot be", pytrace=False)


def test_cumulative_transactional_ack_inside_a_batch_leaves_the_rest_of_the_batch(state: SubscriptionMachine) -> None:
    """Issue 19 #2: a transactional cumulative ack of index 2 of a 4-message batch; index 3 must come back."""
    state.initialize(batch_index_ack=False)
    state.publish(count=4, batched=True)
    state.reconnect_and_drain(kind="tx")
    state.transactional_acknowledge_cumulative(pick=2)
    state.reconnect_and_drain(kind="tx")


def test_cumulative_transactional_ack_leaves_the_messages_to_a_new_consumer(state: SubscriptionMachine) -> None:
    """A cumulative ack in an open transaction does not hide m0..m2 from a new consumer: Pulsar delivers them again."""
    state.initialize(batch_index_ack=False)
    state.publish(count=4, batched=False)
    state.reconnect_and_drain(kind="tx")
    state.transactional_acknowledge_cumulative(pick=2)
    state.reconnect_and_drain(kind="tx")


def test_cumulative_ack_of_a_batch_head_acknowledges_nothing(state: SubscriptionMachine) -> None:
    """Issue 19 #1: the client acks "up to the entry before the batch" (entry -1): the whole backlog must stay."""
    state.initialize(batch_index_ack=False)
    state.publish(count=5, batched=True)
    state.reconnect_and_drain(kind="py")
    state.acknowledge_cumulative(pick=0)
    state.reconnect_and_drain(kind="py")


def test_transactional_ack_after_a_committed_cumulative_ack_inside_the_batch(state: SubscriptionMachine) -> None:
    """After a committed cumulative ack of index 0, index 1 of the same batch can be acknowledged in a transaction."""
    state.initialize(batch_index_ack=False)
    state.publish(count=3, batched=True)
    state.reconnect_and_drain(kind="tx")
    state.transactional_acknowledge_cumulative(pick=0)
    state.commit()
    state.transactional_acknowledge(pick=0)
    state.commit()
    state.reconnect_and_drain(kind="py")


def test_cumulative_transactional_ack_of_a_whole_batch(state: SubscriptionMachine) -> None:
    """A committed cumulative ack of the last index of a batch acknowledges the entry (found on Pulsar: the
    transaction client sent an ack set of zero words where Java's client sends none)."""
    state.initialize(batch_index_ack=False)
    state.publish(count=1, batched=True)
    state.publish(count=2, batched=True)
    state.reconnect_and_drain(kind="tx")
    state.transactional_acknowledge_cumulative(pick=0)
    state.commit()
    state.reconnect_and_drain(kind="py")
