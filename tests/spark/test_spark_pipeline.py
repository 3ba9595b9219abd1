"""The example pipeline end to end: two JSON source topics -> windowed aggregates -> sink, exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spark_helpers import name, read_committed

from spark.pipeline import Event, build_query, produce, sample_events, window_totals

T0 = 1_700_000_000_000  # a multiple of the 10 s window


def _sink_rows(url: str, topic: str) -> list[dict[str, Any]]:
    messages = read_committed(url, topic, 800)
    rows = [json.loads(m.data()) for m in messages]
    assert [m.partition_key() for m in messages] == [r["key"] for r in rows]
    return rows


def test_pipeline_computes_the_exact_window_aggregates(session: Any, server: Any, tmp_path: Path) -> None:
    a1, a2, sink = name("source-a1"), name("source-a2"), name("sink-b")
    produce(server.url, a1, [
        Event("a", 1, T0 + 1_000), Event("b", 2, T0 + 2_000), Event("a", 3, T0 + 11_000),
        Event("end-of-input", 0, T0 + 90_000),
    ])
    produce(server.url, a2, [
        Event("a", 4, T0 + 5_000), Event("c", 5, T0 + 12_000), Event("b", 6, T0 + 25_000),
        Event("end-of-input", 0, T0 + 90_000),
    ])
    query = build_query(
        session, server.url, str(tmp_path / "checkpoint"), sources=(a1, a2), sink=sink,
        trigger={"availableNow": True},
    )
    query.awaitTermination()
    rows = _sink_rows(server.url, sink)
    assert sorted((r["window_start"] - T0, r["window_end"] - T0, r["key"], r["events"], r["total"]) for r in rows) == [
        (0, 10_000, "a", 2, 5),
        (0, 10_000, "b", 1, 2),
        (10_000, 20_000, "a", 1, 3),
        (10_000, 20_000, "c", 1, 5),
        (20_000, 30_000, "b", 1, 6),
    ]


def test_pipeline_over_many_micro_batches_matches_the_reference(session: Any, server: Any, tmp_path: Path) -> None:
    a1, a2, sink = name("source-a1"), name("source-a2"), name("sink-b")
    first, second = sample_events(600, seed=3), sample_events(600, seed=4)
    end = max(e.event_time for e in first + second) + 60_000
    produce(server.url, a1, [*first, Event("end-of-input", 0, end)])
    produce(server.url, a2, [*second, Event("end-of-input", 0, end)])
    query = build_query(
        session, server.url, str(tmp_path / "checkpoint"), sources=(a1, a2), sink=sink,
        watermark="30 seconds", max_records_per_trigger=400, trigger={"availableNow": True},
    )
    query.awaitTermination()
    assert len([p for p in query.recentProgress if p["numInputRows"]]) == 4
    rows = _sink_rows(server.url, sink)
    got = {(r["key"], r["window_start"]): (r["events"], r["total"]) for r in rows}
    assert len(got) == len(rows)
    assert got == window_totals(first + second)
