"""tests/python_suite.py's own logic: which tag of pulsar-client-python it takes and how it reads a test's outcome."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.python_suite import outcome, release_ref, result_name

PASSED = "test_x (m.C.test_x) ... ok\n\n" + "-" * 70 + "\nRan 1 test in 0.2s\n\nOK\n"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (PASSED, "PASS"),
        (PASSED + "2026-11-27 WARN ConsumerImpl | Destroyed consumer which was not properly closed\n", "PASS"),
        (PASSED + "terminate called without an active exception\n", "PASS"),
        (PASSED.replace("\nOK\n", "\nOK (skipped=1)\n"), "SKIP"),
        (PASSED.replace("\nOK\n", "\nFAILED (errors=1)\n"), "FAIL"),
        ("test_x (m.C.test_x) ... \n(killed after 240 s)\n", "FAIL"),
    ],
)
def test_outcome_is_unittests_verdict(output: str, expected: str) -> None:
    assert outcome(output) == expected


def test_release_ref_takes_the_tag_else_the_last_candidate(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "c")
    for tag in ("v3.13.0-candidate-1", "v3.13.0-candidate-10", "v3.13.0-candidate-2", "v3.12.0"):
        git("tag", tag)
    assert release_ref(tmp_path, "3.13.0") == "v3.13.0-candidate-10"
    assert release_ref(tmp_path, "3.12.0") == "v3.12.0"
    with pytest.raises(RuntimeError):
        release_ref(tmp_path, "9.9.9")


def test_result_name() -> None:
    assert result_name("pulsar_test.PulsarTest.test_chunking") == "pulsar_test.py::PulsarTest::test_chunking"
