"""Pulsar's own command-line tools, ``pulsar-admin`` and ``pulsar-client`` (``org.apache.pulsar:pulsar-client-tools``,
resolved from Maven Central by ``tests/conformance/pulsar-tools``), run as a user runs them against one target.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.maven import dependencies
from tests.txn_harness import class_data_sharing

PROJECT = Path(__file__).resolve().parent / "pulsar-tools"
ADMIN_MAIN = "org.apache.pulsar.admin.cli.PulsarAdminTool"
CLIENT_MAIN = "org.apache.pulsar.client.cli.PulsarClientTool"
_PUBLISH_TIME = re.compile(r"publishTime:\[\d+\]")
#: A short-lived JVM per command: start fast rather than run fast.
#: ``-Xlog:disable``: the JVM's own log (class-data sharing warnings among it) would go to the tools' standard output.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx256m", "-Xlog:disable")


@dataclass(frozen=True)
class Result:
    """What one command printed and how it exited."""

    code: int
    out: str
    err: str


def cleaned(text: str, suffix: str) -> str:
    """Output with a run's unique ``suffix`` and the publish times ``pulsar-client consume`` prints replaced."""
    return _PUBLISH_TIME.sub("publishTime:[<t>]", text.replace(suffix, "<s>")).strip()


class Tools:
    """Runs ``pulsar-admin`` against ``admin_url`` and ``pulsar-client`` against ``service_url``."""

    def __init__(self, service_url: str, admin_url: str) -> None:
        self.lib = dependencies(PROJECT)
        self.service_url = service_url
        self.admin_url = admin_url
        # The tools read a client.conf first (the scripts pass conf/client.conf); the options given here win.
        self.conf = Path(tempfile.mkstemp(prefix="client-", suffix=".conf")[1])

    def _run(self, main: str, *args: str, timeout: float) -> Result:
        # A class-data sharing archive per tool (dumped by the first run) saves about a quarter of each JVM's start.
        jars = sorted(self.lib.glob("*.jar"))
        with class_data_sharing(self.lib.parent / f"{main.rsplit('.', 1)[1]}.jsa", jars[0]) as cds:
            argv = ["java", *JVM_OPTIONS, cds, "-cp", ":".join(map(str, jars)), main, str(self.conf), *args]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        return Result(done.returncode, done.stdout, done.stderr)

    def admin(self, *args: str, timeout: float = 120) -> Result:
        """``pulsar-admin --admin-url <target> ARGS``."""
        return self._run(ADMIN_MAIN, "--admin-url", self.admin_url, *args, timeout=timeout)

    def client(self, *args: str, timeout: float = 120) -> Result:
        """``pulsar-client --url <target> ARGS``."""
        return self._run(CLIENT_MAIN, "--url", self.service_url, *args, timeout=timeout)
