"""A real Apache Pulsar standalone (the reference), resolved from Maven Central and run on loopback ports.

``tests/conformance/pulsar-broker/pom.xml`` resolves ``org.apache.pulsar:pulsar-broker`` and its runtime dependencies
into ``target/lib`` of its build in the per-user cache (``tests/maven.py``; nothing is compiled or committed).
:class:`PulsarStandalone` writes a standalone configuration with transactions enabled and starts
``org.apache.pulsar.PulsarStandaloneStarter`` with no functions worker and no stream storage, everything bound to
127.0.0.1 on free ports:

- the broker (``brokerServicePort``) and its web service (``webServicePort``, the admin REST API),
- one bookie (``--bookkeeper-port``; BKCluster binds it to the loopback interface),
- metadata in RocksDB under the data directory (Pulsar 2.11+ standalone default: no ZooKeeper).

The standalone creates ``public/default``, ``pulsar/system`` and the transaction-coordinator assign topic (one
partition) itself once ``transactionCoordinatorEnabled`` is set; :meth:`PulsarStandalone.start` returns once the
admin API lists ``public/default``, the coordinator metadata exists and coordinator 0 takes a client.

Run by hand: ``python -m tests.conformance.pulsar_standalone [--data-dir DIR]`` prints the URLs and runs until
Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from tests.maven import dependencies
from tests.server_process import first_answer
from wire.commands import frame
from wire.framing import FrameDecoder, ProtocolError
from wire.pulsar_api_pb2 import BaseCommand, ServerError

POM_DIR = Path(__file__).resolve().parent / "pulsar-broker"
MAIN_CLASS = "org.apache.pulsar.PulsarStandaloneStarter"
#: The system topic whose partitions stand for the transaction coordinators.
_TC_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"

#: Heap and direct memory of the JVM. bin/pulsar's default is 2 GB heap + 4 GB direct memory; a standalone under
#: test needs far less, and the machines this runs on are shared.
JVM_MEMORY = ("-Xms256m", "-Xmx1g", "-XX:MaxDirectMemorySize=1g")
#: What bin/pulsar passes to every Pulsar JVM on Java 11+ (netty, BookKeeper and GC-metrics reflective access).
JVM_OPTIONS = (
    "-Djava.net.preferIPv4Stack=true",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/sun.net=ALL-UNNAMED",
    "--add-opens", "java.management/sun.management=ALL-UNNAMED",
    "-Dlog4j2.is.webapp=false",
    "-Dlog4j.shutdownHookEnabled=false",
    "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
)

LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn" shutdownHook="disable">
  <Appenders>
    <Console name="Console" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{HH:mm:ss.SSS} %-5level [%t] %c{1.} - %msg%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="{level}"><AppenderRef ref="Console"/></Root>
  </Loggers>
</Configuration>
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _loopback_interface() -> str:
    """Name of the loopback network interface (``lo`` on Linux)."""
    names = [name for _, name in socket.if_nameindex()]
    return next((name for name in names if name.startswith("lo")), "lo")


def standalone_conf(
    broker_port: int, web_port: int, journal_sync: bool = False, extra: Mapping[str, object] | None = None
) -> str:
    """``standalone.conf``: Pulsar's standalone settings that matter here, everything else at its default; ``extra``
    adds broker.conf settings (TLS ports, authentication providers, ...) or overrides these (a setting whose value is
    None is left out)."""
    settings = {
        "clusterName": "standalone",
        "metadataStoreUrl": "",
        "brokerServicePort": broker_port,
        "webServicePort": web_port,
        "bindAddress": "127.0.0.1",
        "advertisedAddress": "127.0.0.1",
        # Transactions: the coordinator, the system topics it relies on (transaction-buffer snapshots, topic
        # policies) and acks of single messages inside batches.
        "transactionCoordinatorEnabled": "true",
        "systemTopicEnabled": "true",
        "topicLevelPoliciesEnabled": "true",
        "acknowledgmentAtBatchIndexLevelEnabled": "true",
        # As conf/standalone.conf: one bookie, no load balancing, non-partitioned auto-created topics.
        "managedLedgerDefaultEnsembleSize": 1,
        "managedLedgerDefaultWriteQuorum": 1,
        "managedLedgerDefaultAckQuorum": 1,
        "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.NoopLoadManager",
        "loadBalancerEnabled": "false",
        "allowAutoTopicCreation": "true",
        "allowAutoTopicCreationType": "non-partitioned",
        "allowAutoSubscriptionCreation": "true",
        "defaultNumberOfNamespaceBundles": 4,
        "subscriptionKeySharedUseConsistentHashing": "true",
        "bookkeeperUseV2WireProtocol": "true",
        # Differences from conf/standalone.conf, all to keep runs comparable: this endpoint keeps topics (and their
        # data) forever, and the suite must not depend on a 60 s inactivity sweep.
        "brokerDeleteInactiveTopicsEnabled": "false",
        # Time-based backlog quotas measured from the oldest unacknowledged message, as this endpoint does (Pulsar's
        # default estimates by ledger close times, and never for a topic whose only ledger is still open).
        "preciseTimeBasedBacklogQuotaCheck": "true",
        "webSocketServiceEnabled": "false",
        "functionsWorkerEnabled": "false",
        # The bookie reads this file too (BKCluster's base configuration): conf/standalone.conf's BookKeeper
        # section, and the loopback interface to bind to (without it the bookie listens on 0.0.0.0).
        "listeningInterface": _loopback_interface(),
        "allowLoopback": "true",
        "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
        "nettyMaxFrameSizeBytes": 5253120,
        "dbStorage_readAheadCacheBatchSize": 1000,
        "flushInterval": 60000,
        "dbStorage_rocksDB_writeBufferSizeMB": 4,
        "dbStorage_rocksDB_sstSizeInMB": 4,
        "dbStorage_rocksDB_blockSize": 4096,
        "dbStorage_rocksDB_bloomFilterBitsPerKey": 10,
        "dbStorage_rocksDB_numLevels": -1,
        "dbStorage_rocksDB_numFilesInLevel0": 4,
        "dbStorage_rocksDB_maxSizeInLevel1MB": 256,
        "journalMaxGroupWaitMSec": 1,
        # The standalone's default: the journal is not fsynced before an add is acknowledged.
        "journalSyncData": "true" if journal_sync else "false",
        "diskUsageThreshold": 0.99,
        "diskUsageWarnThreshold": 0.99,
        "gcWaitTime": 300000,
    }
    settings.update(extra or {})
    return "".join(f"{key}={value}\n" for key, value in settings.items() if value is not None)


def build(timeout: float = 1800) -> Path:
    """Resolve the broker's classpath with Maven unless done; returns the ``target/lib`` directory."""
    return dependencies(POM_DIR, timeout)


def _http_get(url: str, headers: Mapping[str, str] | None = None, timeout: float = 2.0) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


class PulsarStandalone:
    """One Pulsar standalone process with its own data directory; :meth:`stop` (or ``with``) ends it."""

    def __init__(
        self, data_dir: Path, *, log_level: str = "warn", memory: tuple[str, ...] = JVM_MEMORY,
        journal_sync: bool = False, extra_conf: Mapping[str, object] | None = None,
        admin_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        #: broker.conf settings of this standalone beyond (or instead of) :func:`standalone_conf`'s.
        self.extra_conf = dict(extra_conf or {})
        self.log_level = log_level
        self.memory = memory
        #: fsync the bookie journal before acknowledging (the standalone default is not to).
        self.journal_sync = journal_sync
        #: More broker.conf settings (see :func:`standalone_conf`), and the headers the readiness check sends to the
        #: admin API (its credentials when authentication is enabled).
        self.extra_conf = dict(extra_conf or {})
        self.admin_headers = dict(admin_headers or {})
        self.broker_port = free_port()
        self.web_port = free_port()
        self.bookie_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "pulsar-standalone.log"
        #: Seconds from exec to the first accepted connection on the broker port, and to readiness.
        self.first_connection_seconds = 0.0
        self.first_answer_seconds = 0.0
        self.ready_seconds = 0.0

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.broker_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def command(self) -> list[str]:
        conf = self.data_dir / "conf"
        return [
            "java", *self.memory, *JVM_OPTIONS,
            f"-Dlog4j.configurationFile={conf / 'log4j2.xml'}",
            "-cp", f"{build()}/*", MAIN_CLASS,
            "--config", str(conf / "standalone.conf"),
            "--no-functions-worker", "--no-stream-storage",
            "--metadata-dir", str(self.data_dir / "metadata"),
            "--bookkeeper-dir", str(self.data_dir / "bookkeeper"),
            "--bookkeeper-port", str(self.bookie_port),
            "--advertised-address", "127.0.0.1",
        ]

    def start(self, timeout: float = 180.0) -> PulsarStandalone:
        """Start (keeping data from an earlier run in the same directory) and wait until it is ready."""
        conf = self.data_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "standalone.conf").write_text(
            standalone_conf(self.broker_port, self.web_port, self.journal_sync, self.extra_conf)
        )
        (conf / "log4j2.xml").write_text(LOG4J2_XML.replace("{level}", self.log_level))
        command = self.command()
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it open)
        began = time.monotonic()
        # The working directory holds anything the standalone writes relative to it (data/standalone/...).
        self.process = subprocess.Popen(command, cwd=self.data_dir, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = began + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Pulsar exited with {self.process.returncode}:\n{self.log()[-8000:]}")
            if not self.first_connection_seconds:
                try:
                    accepted, answered = first_answer(self.broker_port, deadline, lambda: self.process.poll() is None)
                except RuntimeError as exc:
                    raise RuntimeError(f"Pulsar did not answer CONNECT ({exc}):\n{self.log()[-8000:]}") from None
                self.first_connection_seconds, self.first_answer_seconds = accepted - began, answered - began
            if self._ready():
                self.ready_seconds = time.monotonic() - began
                return self
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"Pulsar was not ready within {timeout} s:\n{self.log()[-8000:]}")

    def _ready(self) -> bool:
        try:
            status, body = _http_get(f"{self.admin_url}/admin/v2/namespaces/public", self.admin_headers)
            if status != 200 or "public/default" not in json.loads(body):
                return False
            status, body = _http_get(
                f"{self.admin_url}/admin/v2/{_TC_ASSIGN.replace('://', '/')}/partitions",
                self.admin_headers,
            )
            return status == 200 and json.loads(body).get("partitions", 0) > 0 and self._coordinator_ready()
        except (OSError, ValueError, ProtocolError):
            return False

    def _coordinator_ready(self) -> bool:
        """Whether transaction coordinator 0 takes a client, asked as the official clients ask: a lookup of its
        assign topic partition (which makes the broker own that bundle and load the coordinator), then
        TC_CLIENT_CONNECT, answered with an error until the coordinator is loaded. The clients retry; a scenario of
        raw frames asks once. A standalone that requires credentials is not probed."""
        with socket.create_connection(("127.0.0.1", self.broker_port), timeout=5) as sock:
            decoder = FrameDecoder()
            sock.sendall(frame(BaseCommand.CONNECT, client_version="readiness-probe", protocol_version=20))
            sock.sendall(frame(BaseCommand.LOOKUP, topic=f"{_TC_ASSIGN}-partition-0", request_id=1))
            while True:
                data = sock.recv(65536)
                if not data:
                    return False
                for item in decoder.feed(data):
                    command = item.command
                    if command.type == BaseCommand.ERROR:
                        return command.error.error == ServerError.AuthenticationError
                    if command.type == BaseCommand.LOOKUP_RESPONSE:
                        sock.sendall(frame(BaseCommand.TC_CLIENT_CONNECT_REQUEST, request_id=2, tc_id=0))
                    if command.type == BaseCommand.TC_CLIENT_CONNECT_RESPONSE:
                        return not command.tcClientConnectResponse.HasField("error")

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (a clean broker shutdown), then SIGKILL if it lingers; returns the exit code."""
        if self.process is None:
            return None
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.process = None
        return code

    def kill(self) -> None:
        """``kill -9``."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def restart(self, timeout: float = 180.0) -> PulsarStandalone:
        """Start again on the same ports and data (after :meth:`stop` or :meth:`kill`)."""
        self.stop()
        self.first_connection_seconds = self.first_answer_seconds = self.ready_seconds = 0.0
        return self.start(timeout)

    def rss_bytes(self) -> int:
        """Current resident set size of the JVM (0 when not running)."""
        return _rss(self.process.pid) if self.process else 0

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> PulsarStandalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def peak_rss(pid: int) -> int:
    """High-water mark of the resident set size (VmHWM) of a running process."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="keep data here (default: a temporary directory)")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="pulsar-standalone-"))
    pulsar = PulsarStandalone(data_dir, log_level=args.log_level).start()
    print(f"service URL {pulsar.url}  admin URL {pulsar.admin_url}  data {data_dir}")
    print(
        f"first connection after {pulsar.first_connection_seconds:.1f} s, CONNECT answered after "
        f"{pulsar.first_answer_seconds:.1f} s, ready after {pulsar.ready_seconds:.1f} s"
    )
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        pulsar.stop()
        os.sync()


if __name__ == "__main__":
    main()
