"""The connector on a real Spark standalone cluster (``@pytest.mark.spark_cluster``): a master and two workers started
with PySpark's own launcher, the job sent with ``spark-submit --master spark://...`` and the project's code shipped to
the executors as a ``--py-files`` zip. An executor is SIGKILLed mid-run (its tasks run again on a new one) and the
endpoint is killed and restarted mid-stream; the sink holds every record exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import batches_in, name, read_committed, values
from test_spark_reconnect import publish_keyed

from spark.cluster import LocalCluster, _environment, py_files, submit_command

HERE = Path(__file__).resolve().parent
RECORDS = 4000
PER_BATCH = 250

pytestmark = pytest.mark.spark_cluster


def _wait(condition: Any, what: str, job: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert job.poll() is None, f"the job ended before {what}: {job.returncode}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_job_on_a_standalone_cluster_survives_a_killed_executor_and_an_endpoint_restart(
    server_factory: Any, tmp_path: Path
) -> None:
    server = server_factory()
    source, sink = name("cluster-src"), name("cluster-sink")
    expected = [f"r{i}" for i in range(RECORDS)]
    publish_keyed(server.url, source, expected)
    checkpoint = tmp_path / "checkpoint"
    with LocalCluster(tmp_path / "cluster", workers=2, cores=1, memory="1g") as cluster:
        command = submit_command(
            cluster.master_url,
            HERE / "cluster_copy_job.py",
            [server.url, source, sink, str(checkpoint), str(PER_BATCH)],
            py_files(tmp_path),
        )
        log = open(tmp_path / "driver.log", "wb")  # noqa: SIM115
        job = subprocess.Popen(command, env=_environment(), cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait(lambda: len(batches_in(checkpoint, "commits")) >= 2, "two batches", job)
            executors = cluster.executor_pids()
            assert len(executors) == 2, f"expected an executor per worker, found {executors}"
            os.kill(executors[0], signal.SIGKILL)
            killed_at = len(batches_in(checkpoint, "commits"))
            _wait(lambda: len(batches_in(checkpoint, "commits")) >= killed_at + 2, "progress after the kill", job)
            assert job.poll() is None and len(batches_in(checkpoint, "commits")) < RECORDS // PER_BATCH
            server.kill()  # mid-stream
            time.sleep(10)
            server.start()
            assert job.wait(600) == 0, (tmp_path / "driver.log").read_text(errors="replace")[-4000:]
        finally:
            if job.poll() is None:
                job.kill()
            log.close()
    assert len(batches_in(checkpoint, "commits")) == RECORDS // PER_BATCH
    assert "Lost executor" in (tmp_path / "driver.log").read_text(errors="replace")  # Spark saw the kill
    # The killed executor's open transaction holds read-committed readers back until its timeout (20 s).
    deadline = time.monotonic() + 60
    got = values(read_committed(server.url, sink))
    while len(got) < RECORDS and time.monotonic() < deadline:
        time.sleep(2)
        got = values(read_committed(server.url, sink))
    assert sorted(got) == sorted(expected)
