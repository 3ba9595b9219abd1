"""Pulsar's own command-line tools, ``pulsar-admin`` and ``pulsar-client`` (``org.apache.pulsar:pulsar-client-tools``,
resolved from Maven Central by ``tests/conformance/pulsar-tools``), run as a user runs them against one target.

The commands of one :class:`Tools` run in one JVM (``dev.pulsartxnproxy.tools.ToolSession``, built with the
tools): each goes through the tool's own entry code and is answered with its exit code and what it printed, as a
JVM of its own would be, without paying the tools' start-up (about 2 s of CPU) for every command.
"""

from __future__ import annotations

import base64
import contextlib
import queue
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.maven import jar_classpath
from tests.txn_harness import class_data_sharing

PROJECT = Path(__file__).resolve().parent / "pulsar-tools"
SESSION_MAIN = "dev.pulsartxnproxy.tools.ToolSession"
#: How ToolSession marks its answer lines on standard output (anything else there is a logger's, ignored).
ANSWER = "\x1etool-session"
_PUBLISH_TIME = re.compile(r"publishTime:\[\d+\]")
#: A JVM that starts fast rather than runs fast: the commands are short.
#: ``-Xlog:disable``: the JVM's own log (class-data sharing warnings among it) would go to standard output.
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


def _encoded(field: str) -> str:
    return base64.b64encode(field.encode()).decode()


class Tools:
    """Runs ``pulsar-admin`` against ``admin_url`` and ``pulsar-client`` against ``service_url``; a context manager
    (closing stops its JVM)."""

    def __init__(self, service_url: str, admin_url: str) -> None:
        self.classpath = jar_classpath(PROJECT, "conformance-pulsar-tools")
        self.service_url = service_url
        self.admin_url = admin_url
        # The tools read a client.conf first (the scripts pass conf/client.conf); the options given here win.
        self.conf = Path(tempfile.mkstemp(prefix="client-", suffix=".conf")[1])
        self._jvm: subprocess.Popen[str] | None = None
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._cleanup = contextlib.ExitStack()

    def __enter__(self) -> Tools:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _start(self) -> subprocess.Popen[str]:
        jar = Path(self.classpath.split(":", 1)[0])
        # A class-data sharing archive (dumped when the first session ends) saves about a quarter of the start.
        cds = self._cleanup.enter_context(class_data_sharing(jar.parent / "ToolSession.jsa", jar))
        jvm = subprocess.Popen(
            ["java", *JVM_OPTIONS, cds, "-cp", self.classpath, SESSION_MAIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._cleanup.callback(self._stop, jvm)
        threading.Thread(target=self._read, args=(jvm,), daemon=True).start()
        return jvm

    def _read(self, jvm: subprocess.Popen[str]) -> None:
        assert jvm.stdout is not None
        for line in jvm.stdout:
            if line.startswith(ANSWER):
                self._answers.put(line.rstrip("\n"))
        self._answers.put(None)

    @staticmethod
    def _stop(jvm: subprocess.Popen[str]) -> None:
        assert jvm.stdin is not None
        with contextlib.suppress(OSError):
            jvm.stdin.close()  # the session exits at the end of its input
        try:
            jvm.wait(30)
        except subprocess.TimeoutExpired:
            jvm.kill()
            jvm.wait()

    def _run(self, tool: str, *args: str, timeout: float) -> Result:
        if self._jvm is None:
            self._jvm = self._start()
        assert self._jvm.stdin is not None
        self._jvm.stdin.write("\t".join([tool, *map(_encoded, (str(self.conf), *args))]) + "\n")
        self._jvm.stdin.flush()
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            self._jvm.kill()
            raise subprocess.TimeoutExpired([tool, *args], timeout) from None
        if answer is None:
            raise RuntimeError(f"the tool session's JVM ended (exit code {self._jvm.wait()}) during {tool} {args}")
        _, code, out, err = answer.split("\t")
        # A process's exit status is the code modulo 256 (``System.exit(-1)`` exits with 255).
        return Result(int(code) & 0xFF, base64.b64decode(out).decode(), base64.b64decode(err).decode())

    def admin(self, *args: str, timeout: float = 120) -> Result:
        """``pulsar-admin --admin-url <target> ARGS``."""
        return self._run("admin", "--admin-url", self.admin_url, *args, timeout=timeout)

    def client(self, *args: str, timeout: float = 120) -> Result:
        """``pulsar-client --url <target> ARGS``."""
        return self._run("client", "--url", self.service_url, *args, timeout=timeout)

    def close(self) -> None:
        """Stop the session's JVM (dumping its class-data sharing archive the first time) and forget the conf."""
        self._cleanup.close()
        self._jvm = None
        self.conf.unlink(missing_ok=True)
