"""Fixtures: the endpoint as a local process, and official-client helpers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pulsar
import pytest

from tests.server_process import ServerProcess

_LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the session; tests use their own topic names."""
    proc = ServerProcess(tmp_path_factory.mktemp("shared") / "data").start()
    yield proc
    proc.stop()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start private servers (for restarts, kills and settings); all are stopped afterwards."""
    started: list[ServerProcess] = []

    def make(*extra: str, name: str = "data") -> ServerProcess:
        proc = ServerProcess(tmp_path / name, *extra).start()
        started.append(proc)
        return proc

    yield make
    for proc in started:
        if proc.process is not None:
            proc.kill()


def make_client(url: str, **kwargs: object) -> pulsar.Client:
    """An official Python client with quiet logging."""
    kwargs.setdefault("operation_timeout_seconds", 10)
    return pulsar.Client(url, logger=_LOGGER, **kwargs)


@pytest.fixture
def client(server: ServerProcess) -> Iterator[pulsar.Client]:
    """An official Python client connected to the session server."""
    c = make_client(server.url)
    yield c
    c.close()


@pytest.fixture
def topic() -> str:
    """A fresh topic name."""
    return f"persistent://public/default/t-{uuid.uuid4().hex[:12]}"
