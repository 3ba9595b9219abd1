"""What TLS and token authentication cost: produce throughput over TLS versus plaintext (batched and not), and
connections set up per second with TLS + token, for this endpoint and (``--pulsar``) a Pulsar standalone with the
equivalent broker.conf.

Both targets run with token authentication on both ports, so the plaintext and TLS figures differ by TLS alone.
Throughput: the official Python client, ``send_async`` of 100-byte messages then flush, best of three runs
alternating plaintext and TLS. Set-up: sequential
connections, each a TCP connect, TLS handshake (trust file, host name verified), CONNECT with a token and the
CONNECTED answer. Run: ``.venv/bin/python bench/security.py [--messages N] [--connections N] [--pulsar]``.
"""

from __future__ import annotations

import argparse
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pulsar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.core import produce
from tests.conformance.pulsar_standalone import PulsarStandalone
from tests.security import ADMIN_ROLE, Material, pulsar_auth_conf
from tests.server_process import ServerProcess, free_port
from wire.commands import frame
from wire.framing import FrameDecoder
from wire.pulsar_api_pb2 import BaseCommand

#: Alternating plaintext/TLS produce runs per figure.
ROUNDS = 3


@dataclass
class Target:
    name: str
    url: str
    tls_url: str


@contextmanager
def endpoint(material: Material, work: Path) -> Iterator[Target]:
    tls_port = free_port()
    args = [
        "--tls-port", str(tls_port), "--admin-tls-port", str(free_port()),
        "--tls-cert-file", material.path("server.pem"), "--tls-key-file", material.path("server.key"),
        "--tls-trust-certs-file", material.path("ca.pem"),
        "--authentication-enabled", "--authentication-providers", "token",
        "--token-secret-key", f"file://{material.path('secret.key')}",
    ]  # fmt: skip
    proc = ServerProcess(work / "endpoint", *args).start(timeout=60)
    try:
        yield Target("this endpoint", proc.url, f"pulsar+ssl://localhost:{tls_port}")
    finally:
        proc.stop()


@contextmanager
def standalone(material: Material, work: Path) -> Iterator[Target]:
    tls_port = free_port()
    pulsar_process = PulsarStandalone(
        work / "pulsar",
        extra_conf=pulsar_auth_conf(material, tls_port, free_port()),
        admin_headers={"Authorization": f"Bearer {material.token(ADMIN_ROLE)}"},
    ).start(timeout=300)
    try:
        yield Target("Pulsar 4.2.4 standalone", pulsar_process.url, f"pulsar+ssl://localhost:{tls_port}")
    finally:
        pulsar_process.stop()


def throughput(url: str, material: Material, count: int, batching: bool) -> float:
    """Messages per second of one ``bench.core.produce`` run with a token (and the trust file) to a fresh topic."""
    options = {
        "authentication": pulsar.AuthenticationToken(material.token("bench")),
        "tls_trust_certs_file_path": material.path("ca.pem"),
        "tls_validate_hostname": True,
    }
    return produce(url, f"persistent://public/default/sec-{time.time_ns()}", count, batching, **options)


def setups_per_second(url: str, material: Material, count: int) -> float:
    """Sequential connections (TLS when the URL is ``pulsar+ssl``) that reach CONNECTED with a token, per second."""
    tls = url.startswith("pulsar+ssl://")
    host, port = url.split("://")[1].rsplit(":", 1)
    context = ssl.create_default_context(cafile=material.path("ca.pem")) if tls else None
    hello = frame(
        BaseCommand.CONNECT,
        client_version="bench",
        protocol_version=20,
        auth_method_name="token",
        auth_data=material.token("bench").encode(),
    )
    started = time.perf_counter()
    for _ in range(count):
        sock = socket.create_connection((host, int(port)), timeout=10)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname=host)
        sock.sendall(hello)
        decoder = FrameDecoder()
        answered = False
        while not answered:
            data = sock.recv(65536)
            if not data:
                raise RuntimeError("closed before CONNECTED")
            for item in decoder.feed(data):
                if item.command.type != BaseCommand.CONNECTED:
                    raise RuntimeError(f"refused: {item.command}")
                answered = True
        sock.close()
    return count / (time.perf_counter() - started)


def measure(target: Target, material: Material, messages: int, connections: int) -> dict[str, float]:
    figures = {}
    for batching, label in ((True, "batched"), (False, "non-batched")):
        count = messages * (10 if batching else 1)
        # Alternating runs, best of each: the first runs warm up both sides (and the JVM of Pulsar).
        plain = over_tls = 0.0
        for _ in range(ROUNDS):
            plain = max(plain, throughput(target.url, material, count, batching))
            over_tls = max(over_tls, throughput(target.tls_url, material, count, batching))
        figures[f"produce {label}, plaintext + token (msg/s)"] = plain
        figures[f"produce {label}, TLS + token (msg/s)"] = over_tls
        figures[f"produce {label}, TLS / plaintext"] = over_tls / plain
    figures["connection set-up, plaintext + token (per s)"] = setups_per_second(target.url, material, connections)
    figures["connection set-up, TLS + token (per s)"] = setups_per_second(target.tls_url, material, connections)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000, help="non-batched messages per run (x10 batched)")
    parser.add_argument("--connections", type=int, default=300, help="connections per set-up figure")
    parser.add_argument("--pulsar", action="store_true", help="also measure a Pulsar standalone (Java, Maven)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        work = Path(tmp)
        material = Material(work / "material")
        results: dict[str, dict[str, float]] = {}
        with endpoint(material, work) as target:
            results[target.name] = measure(target, material, args.messages, args.connections)
        if args.pulsar:
            with standalone(material, work) as target:
                results[target.name] = measure(target, material, args.messages, args.connections)
    names = list(results)
    print("| figure | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for figure in results[names[0]]:
        ratio = figure.endswith("TLS / plaintext")
        cells = [f"{results[name][figure]:,.2f}" if ratio else f"{results[name][figure]:,.0f}" for name in names]
        print(f"| {figure} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
