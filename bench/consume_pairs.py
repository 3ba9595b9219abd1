"""A rate of pulsar_txn over the official Python client's, paired: on a shared machine the rates swing several times
between runs, so each round runs both clients back to back (order alternating) on the same work and the median of the
per-round ratios is printed, with the load average. ``--figure`` picks the rate: ``consume`` (receive + acknowledge
of a backlog of ``--messages``, the default), ``produce`` (batched: ``send_async`` + ``flush``) or ``send`` (``send()``
one at a time, ``--messages`` / 20 of them), as ``bench/python_client.py`` measures them.

Run: ``.venv/bin/python bench/consume_pairs.py [--figure consume|produce|send] [--rounds 10] [--messages 150000]
[--service-url pulsar://host:6650]`` (without ``--service-url`` a local endpoint on durable storage is started and
stopped).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import pulsar

import pulsar_txn
from bench.python_client import consume, produce_batched, produce_sync
from tests.server_process import ServerProcess

FIGURES = {"consume": consume, "produce": produce_batched, "send": produce_sync}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figure", choices=sorted(FIGURES), default="consume")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--messages", type=int, default=150000)
    parser.add_argument("--service-url", default=None)
    args = parser.parse_args()
    measure = FIGURES[args.figure]
    server = None
    url = args.service_url
    if url is None:
        server = ServerProcess(Path(tempfile.mkdtemp(prefix="bench-consume-pairs-")) / "data").start()
        url = server.url
    try:
        official: list[float] = []
        ours: list[float] = []
        for round_ in range(args.rounds):
            if round_ % 2 == 0:
                official.append(measure(pulsar, url, args.messages))
                ours.append(measure(pulsar_txn, url, args.messages))
            else:
                ours.append(measure(pulsar_txn, url, args.messages))
                official.append(measure(pulsar, url, args.messages))
            print(
                f"round {round_}: pulsar-client {official[-1]:.0f} msg/s, pulsar_txn {ours[-1]:.0f} msg/s, "
                f"ratio {ours[-1] / official[-1]:.2f}",
                flush=True,
            )
        ratio = statistics.median(b / a for a, b in zip(official, ours, strict=True))
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print(
            f"median ({args.figure}): pulsar-client {statistics.median(official):.0f} msg/s, pulsar_txn"
            f" {statistics.median(ours):.0f} msg/s, median ratio pulsar_txn/pulsar-client {ratio:.2f}"
            f" (load average {load})"
        )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
