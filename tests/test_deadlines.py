"""The deadline tracker behind transaction timeouts, on a manual clock."""

from __future__ import annotations

from engine.clock import ManualClock
from engine.deadlines import DeadlineTracker


def make() -> tuple[ManualClock, DeadlineTracker[str], list[tuple[float, str]]]:
    """A tracker on a manual clock whose wall and monotonic times both read 1000 s."""
    clock = ManualClock(0.0)
    clock.advance(1000.0)
    fired: list[tuple[float, str]] = []
    return clock, DeadlineTracker(clock, lambda key: fired.append((clock.monotonic(), key))), fired


def test_keys_expire_at_their_deadlines_in_order() -> None:
    clock, tracker, fired = make()
    tracker.add("late", 1030.0)
    tracker.add("early", 1010.0)
    tracker.add("middle", 1020.0)
    clock.advance(9.9)
    assert fired == []
    clock.advance(30)
    assert fired == [(1010.0, "early"), (1020.0, "middle"), (1030.0, "late")]
    assert len(tracker) == 0


def test_a_discarded_key_never_expires_and_the_next_one_still_does() -> None:
    clock, tracker, fired = make()
    tracker.add("ended", 1005.0)
    tracker.add("open", 1006.0)
    tracker.discard("ended")
    assert "ended" not in tracker and "open" in tracker
    clock.advance(10)
    assert fired == [(1006.0, "open")]


def test_adding_again_replaces_the_deadline() -> None:
    clock, tracker, fired = make()
    tracker.add("txn", 1050.0)
    tracker.add("txn", 1002.0)
    clock.advance(3)
    assert fired == [(1002.0, "txn")]
    clock.advance(100)
    assert fired == [(1002.0, "txn")]


def test_a_deadline_in_the_past_expires_on_the_next_turn() -> None:
    clock, tracker, fired = make()
    tracker.add("overdue", 900.0)
    assert fired == []
    clock.advance(0)
    assert fired == [(1000.0, "overdue")]


def test_many_ended_keys_are_compacted_away_without_losing_live_ones() -> None:
    clock, tracker, fired = make()
    for i in range(10_000):
        tracker.add(f"ended-{i}", 1060.0 + i / 1000)
        tracker.discard(f"ended-{i}")
        if i % 1000 == 0:
            tracker.add(f"open-{i}", 1060.0 + i / 1000)
    assert len(tracker._heap) < 3 * 1024  # stale entries do not pile up
    clock.advance(100)
    assert [key for _, key in fired] == [f"open-{i}" for i in range(0, 10_000, 1000)]


def test_an_expiry_may_add_keys() -> None:
    clock, tracker, fired = make()

    def expired(key: str) -> None:
        fired.append((clock.monotonic(), key))
        if key == "first":
            tracker.add("second", clock.monotonic() + 5)

    tracker = DeadlineTracker(clock, expired)
    tracker.add("first", 1001.0)
    clock.advance(10)
    assert fired == [(1001.0, "first"), (1006.0, "second")]


def test_steps_of_the_wall_clock_neither_hold_nor_fire_deadlines() -> None:
    clock, tracker, fired = make()
    tracker.add("txn", 1010.0)
    clock.step_wall(-3600)
    clock.advance(10)
    assert fired == [(1010.0, "txn")]
    tracker.add("next", 1030.0)
    clock.step_wall(+3600)
    clock.advance(1)
    assert fired == [(1010.0, "txn")]
    clock.advance(19)
    assert fired == [(1010.0, "txn"), (1030.0, "next")]
