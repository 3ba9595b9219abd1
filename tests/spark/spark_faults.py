"""Fault injection for the failure tests: the ``pulsar-faulty`` data source.

It is the ``pulsar`` data source with two switches, each a file holding a micro-batch id (the file
is consumed, so the fault strikes once):

- ``fault.failTaskFile``: the first task of that batch to see the file writes half of its rows, then
  raises (a task failing mid-batch);
- ``fault.killAfterCommitFile``: right after the sink's commit of that batch returns, the process group
  ``fault.killProcessGroup`` (the driver's, JVM included) is SIGKILLed, before Spark records the batch
  in its commit log.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from spark.datasource import PulsarDataSource
from spark.sink import PulsarStreamWriter, SinkOptions, TaskCommit, write_task

#: The options of ``pulsar-faulty`` beyond the sink's own.
FAULT_OPTIONS = ("fault.failTaskFile", "fault.killAfterCommitFile", "fault.killProcessGroup")


def _claim(path: str | None, batch_id: int | None) -> bool:
    """True once for the batch named in the file at ``path`` (the file is removed)."""
    if not path or batch_id is None:
        return False
    try:
        with open(path) as f:
            wanted = int(f.read().strip())
        if wanted != batch_id:
            return False
        os.remove(path)
    except (FileNotFoundError, ValueError):
        return False
    return True


def _half_then_fail(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield batch.slice(0, batch.num_rows // 2)
        raise RuntimeError("injected task failure in the middle of a batch")


class FaultyStreamWriter(PulsarStreamWriter):
    """The pulsar stream writer, failing or killing as the fault files say."""

    def __init__(
        self, options: SinkOptions, fail_task_file: str | None, kill_file: str | None, kill_group: int
    ) -> None:
        super().__init__(options)
        self.fail_task_file = fail_task_file
        self.kill_file = kill_file
        self.kill_group = kill_group

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch = context.getLocalProperty("streaming.sql.batchId") if context else None
        if _claim(self.fail_task_file, int(batch) if batch is not None else None):
            iterator = _half_then_fail(iterator)
        return write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        super().commit(messages, batchId)
        if _claim(self.kill_file, batchId):
            os.killpg(self.kill_group, signal.SIGKILL)


class FaultyPulsar(PulsarDataSource):
    """``format("pulsar-faulty")``."""

    @classmethod
    def name(cls) -> str:
        return "pulsar-faulty"

    def streamWriter(self, schema: StructType, overwrite: bool) -> FaultyStreamWriter:  # noqa: N802
        return FaultyStreamWriter(
            SinkOptions.parse(self.options, streaming=True, extra=FAULT_OPTIONS),
            self.options.get("fault.failTaskFile"),
            self.options.get("fault.killAfterCommitFile"),
            int(self.options.get("fault.killProcessGroup") or os.getpgrp()),
        )
