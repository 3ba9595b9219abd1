"""Steps of the system clock: timers and deadlines run on monotonic time, so a step neither stalls nor fires them.

The server runs under a wrapper that offsets ``time.time`` (what Twisted and the engine read as wall time) by an
hour back on SIGUSR1, as an administrator's ``date -s`` or an NTP step would, without touching the machine's clock.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import pulsar_txn
from tests.conftest import Server, make_client
from tests.server_process import ServerProcess

WRAPPER = '''
import signal, sys, time

_wall = time.time
_offset = [0.0]


def _stepped() -> float:
    return _wall() + _offset[0]


def _step_back(signum, frame) -> None:
    _offset[0] -= 3600.0


time.time = _stepped  # before Twisted and the engine bind it
signal.signal(signal.SIGUSR1, _step_back)
from proxy.cli import main

sys.exit(main(sys.argv[1:]))
'''


@pytest.fixture
def stepped_server(server_factory: Callable[..., Server], tmp_path: Path) -> ServerProcess:
    wrapper = tmp_path / "stepped_clock.py"
    wrapper.write_text(WRAPPER)
    server = server_factory()
    assert isinstance(server, ServerProcess)
    server.stop()
    server.launcher = [sys.executable, str(wrapper)]
    return server.start()


def test_a_backward_step_neither_stalls_sends_nor_holds_transaction_timeouts(
    stepped_server: ServerProcess, topic: str
) -> None:
    client = make_client(stepped_server.url)
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=5000)
    consumer = client.subscribe(topic, "s")
    failures: list[BaseException] = []
    sent: list[int] = []
    stop = threading.Event()

    def keep_sending() -> None:
        while not stop.is_set():
            try:
                producer.send(f"m{len(sent)}".encode())
                sent.append(1)
            except Exception as exc:  # a stalled commit shows as a send timeout
                failures.append(exc)
                return

    with pulsar_txn.Client(stepped_server.url) as txn_client:
        txn = txn_client.new_transaction(timeout_ms=2000)
        sender = threading.Thread(target=keep_sending)
        sender.start()
        time.sleep(0.5)
        assert stepped_server.process is not None
        os.kill(stepped_server.process.pid, signal.SIGUSR1)
        time.sleep(3.5)
        stop.set()
        sender.join(10)
        assert failures == []
        assert sent, "nothing was sent"
        producer.send(b"last")
        # The 2 s timeout fired on time although the wall clock went back an hour: the transaction is gone.
        # (Asked of the broker: ``txn.commit()`` would fail client-side, past the timeout.)
        with pytest.raises(Exception, match=r"(?i)transaction|status|not found"):
            txn_client.resume_transaction(txn.id).commit()
    received = 0
    while received < len(sent) + 1:
        consumer.acknowledge(consumer.receive(5000))
        received += 1
    client.close()
