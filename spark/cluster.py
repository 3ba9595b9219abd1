"""A Spark standalone cluster on this machine, started with PySpark's own launcher, and jobs submitted to it.

:class:`LocalCluster` starts a master and workers as separate JVMs (``spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` from the pyspark install); each application gets
executors on the workers, each executor a JVM of its own with its own Python workers. :func:`submit` runs a
driver script with ``spark-submit --master spark://...``, shipping this project's packages to the executors as a
``--py-files`` zip. ``python -m spark.cluster`` (``make spark-cluster-demo``) runs the demo pipeline on such a
cluster against an endpoint and stops everything afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

#: The packages the executors import (the connector and its codec).
SHIPPED_PACKAGES = ("spark", "wire")
ROOT = Path(__file__).resolve().parent.parent


def spark_home() -> Path:
    """The pyspark install, which carries ``bin/spark-class`` and ``bin/spark-submit``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    return env


def py_files(directory: Path) -> Path:
    """A zip of :data:`SHIPPED_PACKAGES` for ``--py-files`` (sources only)."""
    target = directory / "pulsar-txn-proxy-py.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in SHIPPED_PACKAGES:
            for path in sorted((ROOT / package).rglob("*.py*")):
                if path.suffix in (".py", ".pyi") and "__pycache__" not in path.parts:
                    archive.write(path, path.relative_to(ROOT))
    return target


class LocalCluster:
    """A standalone master and ``workers`` workers (``cores`` cores and ``memory`` each) on 127.0.0.1."""

    def __init__(self, work_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.work_dir = Path(work_dir)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = _free_port()
        self.ui_port = _free_port()
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _launch(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.work_dir / f"{name}.log", "ab")  # noqa: SIM115 (the child keeps it)
        env = _environment()
        if name == "master":
            # No REST submission server (its fixed port 6066 is shared by every master on the machine); a taken port
            # fails the master (started again on other ports) instead of moving it to the next one.
            env["SPARK_DAEMON_JAVA_OPTS"] = "-Dspark.master.rest.enabled=false -Dspark.port.maxRetries=0"
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.processes.append(process)
        return process

    def state(self) -> dict:
        """The master's JSON view (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as answer:
            return json.load(answer)

    def start(self, timeout: float = 120.0) -> LocalCluster:
        """Start the master, then the workers; returns once every worker registered."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        self._start_master(deadline)
        for index in range(self.workers):
            work = self.work_dir / f"worker-{index}"
            work.mkdir(exist_ok=True)
            self._launch(
                f"worker-{index}", "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                "--webui-port", str(_free_port()), "--work-dir", str(work), self.master_url,
            )
        while True:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a cluster process exited with {process.returncode}; logs in {self.work_dir}")
            try:
                alive = [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= self.workers:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not start within {timeout:.0f} s; logs in {self.work_dir}")
            time.sleep(0.5)

    def _start_master(self, deadline: float, attempts: int = 3) -> None:
        """Start the master and wait for its web UI; free ports taken meanwhile by another process cost a retry."""
        for attempt in range(attempts):
            master = self._launch(
                "master", "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port),
            )
            while master.poll() is None and time.monotonic() < deadline:
                try:
                    self.state()
                    return
                except OSError:
                    time.sleep(0.3)
            if master.poll() is None or attempt == attempts - 1:
                break
            self.processes.remove(master)
            self.port, self.ui_port = _free_port(), _free_port()
        raise RuntimeError(f"the Spark master did not start; its log is in {self.work_dir / 'master.log'}")

    def executor_pids(self) -> list[int]:
        """Process ids of the executor JVMs the workers launched."""
        found = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True)
        mine = []
        for pid in (int(p) for p in found.stdout.split()):
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")  # a worker runs its executors in its work directory
            except OSError:
                continue
            if Path(cwd).is_relative_to(self.work_dir.resolve()):
                mine.append(pid)
        return mine

    def stop(self) -> None:
        """Stop the workers (and their executors), then the master."""
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def submit_command(
    master_url: str, script: Path, args: Sequence[str], zip_path: Path, executor_memory: str = "512m"
) -> list[str]:
    """The ``spark-submit`` command line of a driver script on a cluster (client deploy mode)."""
    return [
        str(spark_home() / "bin" / "spark-submit"),
        "--master", master_url,
        "--py-files", str(zip_path),
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--conf", f"spark.executor.memory={executor_memory}",
        "--conf", "spark.executor.cores=1",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.log.level=WARN",
        str(script),
        *args,
    ]


def submit(master_url: str, script: Path, args: Sequence[str], work_dir: Path, timeout: float = 900) -> int:
    """Run a driver script on the cluster with ``spark-submit``; its exit status."""
    command = submit_command(master_url, script, args, py_files(work_dir))
    return subprocess.run(command, env=_environment(), cwd=work_dir, timeout=timeout).returncode


@contextmanager
def _endpoint_or(service_url: str | None, work: Path) -> Iterator[str]:
    if service_url:
        yield service_url
        return
    from spark.pipeline import endpoint

    with endpoint(work / "data") as url:
        yield url


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the demo pipeline on a local Spark standalone cluster")
    parser.add_argument("--service-url", help="a running endpoint (default: one is started on a temporary store)")
    parser.add_argument("--events", type=int, default=500, help="events per source topic")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="spark-cluster-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        url = stack.enter_context(_endpoint_or(args.service_url, work))
        cluster = stack.enter_context(LocalCluster(work / "cluster", workers=args.workers))
        print(f"cluster: {cluster.master_url} with {args.workers} workers; endpoint {url}", flush=True)
        script = Path(__file__).resolve().parent / "jobs" / "pipeline_job.py"
        return submit(
            cluster.master_url, script, ["--service-url", url, "--events", str(args.events),
                                         "--master", cluster.master_url], work,
        )


if __name__ == "__main__":
    sys.exit(main())
