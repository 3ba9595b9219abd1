"""One server per data directory: an exclusive ``flock`` on ``<data-dir>/LOCK``, held while the process lives.

Two servers on one store would each keep their own cursors and entry ids in memory and overwrite each other's
writes. The lock is taken before the store is opened; the kernel releases it when the process exits, however it
exits (``kill -9`` included), so a stale lock file never blocks a restart.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_NAME = "LOCK"


class DataDirInUseError(RuntimeError):
    """Another live process holds the data directory."""


def lock_data_dir(data_dir: Path) -> IO[str]:
    """Lock ``data_dir`` for this process (keep the returned file open), or raise :class:`DataDirInUseError`."""
    path = data_dir / LOCK_NAME
    handle = open(path, "a+")  # noqa: SIM115 (held open for the process's lifetime)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise DataDirInUseError(
            f"data directory {data_dir} is in use by another pulsar-txn-proxy (pid {holder}); "
            "each server needs a data directory of its own"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle
