"""The conformance harnesses' builds (pulsar_txn_proxy/conformance/harness.py): once per version of the sources, in the
per-user cache, and a clear failure without a toolchain."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pulsar_txn_proxy.conformance import harness


@pytest.fixture(name="sources")
def sources_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the Go harness's sources as the harness's sources, and an empty cache."""
    sources = tmp_path / "go"
    shutil.copytree(harness.GO_SOURCES, sources, ignore=shutil.ignore_patterns("bin"))
    monkeypatch.setattr(harness, "GO_SOURCES", sources)
    monkeypatch.setenv("PULSAR_TXN_PROXY_CACHE", str(tmp_path / "cache"))
    harness.go_binary.cache_clear()
    yield sources
    harness.go_binary.cache_clear()


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    builds: list[Path] = []

    def build(command: list[str], cwd: Path, what: str) -> None:
        builds.append(cwd)
        output = Path(command[command.index("-o") + 1])
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_bytes(b"")

    monkeypatch.setattr(harness, "_run_build", build)
    return builds


def test_missing_go_fails_with_a_clear_message(sources: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "_go", lambda: None)
    with pytest.raises(harness.ToolchainMissingError, match=r"`go` is not on PATH .* need Go 1\.24\+"):
        harness.go_binary()


def test_same_sources_build_once_and_changed_sources_build_again(
    sources: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds = _count_builds(monkeypatch)
    first = harness.go_binary()
    harness.go_binary.cache_clear()
    assert harness.go_binary() == first  # a second process, or a fresh clone of the same sources: no build
    assert len(builds) == 1 and first.is_relative_to(Path(harness.cache_dir()))

    (sources / "main.go").write_text((sources / "main.go").read_text() + "\n// changed\n")
    harness.go_binary.cache_clear()
    changed = harness.go_binary()
    assert changed != first and len(builds) == 2
    assert (changed.parent.parent / "main.go").read_text().endswith("// changed\n")  # built from the new sources
