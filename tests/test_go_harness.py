"""tests/go_harness.py: when it builds the Go harness, and how it fails without a Go toolchain."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests import go_harness


def test_missing_go_fails_with_a_clear_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(go_harness, "BINARY", tmp_path / "bin" / "harness")
    monkeypatch.setattr(go_harness.shutil, "which", lambda _name: None)
    monkeypatch.setattr(go_harness, "GO_FALLBACK", tmp_path / "no-go")
    with pytest.raises(RuntimeError, match=r"needs the Go toolchain .*`go` is not on PATH"):
        go_harness.build_harness()


def test_binary_newer_than_the_sources_is_not_rebuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    binary = tmp_path / "harness"
    binary.write_bytes(b"")
    later = time.time() + 60
    os.utime(binary, (later, later))
    monkeypatch.setattr(go_harness, "BINARY", binary)
    monkeypatch.setattr(go_harness, "_go", lambda: pytest.fail("built although the binary is up to date"))
    assert go_harness.build_harness() == binary


def test_binary_older_than_a_source_is_rebuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    binary = tmp_path / "harness"
    binary.write_bytes(b"")
    os.utime(binary, (0, 0))
    monkeypatch.setattr(go_harness, "BINARY", binary)
    monkeypatch.setattr(go_harness.shutil, "which", lambda _name: None)
    monkeypatch.setattr(go_harness, "GO_FALLBACK", tmp_path / "no-go")
    with pytest.raises(RuntimeError, match="needs the Go toolchain"):
        go_harness.build_harness()
