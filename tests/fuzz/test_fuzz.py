"""The fuzz harness on a short budget: mutated frames beside an official-client witness, then a kill and restart."""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Server
from tests.fuzz.harness import run
from tests.server_process import KEEP_ACKNOWLEDGED, ServerProcess

#: Seconds of fuzzing in the default test run (``make fuzz`` runs 1,000,000 frames).
BUDGET_SECONDS = 30


def test_fuzzed_frames_harm_no_other_client(server_factory: Callable[..., Server]) -> None:
    server = server_factory(*KEEP_ACKNOWLEDGED)
    assert isinstance(server, ServerProcess)
    figures = run(server, frames=10**9, seed=20, seconds=BUDGET_SECONDS)
    print(figures.report())
    assert figures.frames > 1000
    assert figures.tracebacks == 0, server.log()[server.log().index("Traceback") - 300 :][:4000]
    assert figures.failed_commits == 0
    assert figures.witness_sent > 0
    assert figures.witness_failed_sends == 0
    assert figures.stalls == 0
    assert figures.blocked_topics == []
    assert figures.witness_lost == 0
    assert figures.rss_peak_mib < 512
