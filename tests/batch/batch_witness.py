"""A test-only worker store: the worker's shared store, logging every read of a guest's input file.

Each invocation of the batch tests reads its own file (``greeting.txt`` = ``b"effect N"``, a raw
block nobody else reads), so the log — one ``pid cid`` line per read, appended by whichever
worker process read it — counts how often each invocation's guest ran, and where. Reading the
``kill_on`` block kills the reading worker (``SIGKILL``, after logging the read): a worker dies
in the middle of a guest's run, exactly where the test says, with no timing. Under the local
backend the worker-process pool's host reads blocks for its workers, on a reader thread named
after the worker: the log names, and the kill hits, that worker. Workers import
this module by name (it is on the test's ``sys.path``, which spawned processes inherit).
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kuro_fs.blocks import BlockStore
from kuro_fs.filestore import FileBlockStore
from kuro_wasm.batch.stores import SharedStore


def _reader() -> int:
    """The pid this read is for: this process, or — read by a worker-process pool's reader thread on its
    worker's behalf (``kuro-pool-reader-PID``) — that worker."""
    name = threading.current_thread().name
    prefix = "kuro-pool-reader-"
    return int(name[len(prefix) :]) if name.startswith(prefix) else os.getpid()


class _Logging:
    def __init__(self, inner: BlockStore, log: str, watched: frozenset[str], kill_on: str | None) -> None:
        self._inner = inner
        self._log = log
        self._watched = watched
        self._kill_on = kill_on

    def get(self, cid: str) -> bytes | None:
        if cid in self._watched:
            pid = _reader()
            fd = os.open(self._log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{pid} {cid}\n".encode())
            finally:
                os.close(fd)
            if cid == self._kill_on:
                os.kill(pid, signal.SIGKILL)
        return self._inner.get(cid)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass(frozen=True)
class WitnessStore:
    """:class:`SharedStore` at ``path``, whose reads of ``watched`` CIDs are logged to ``log``."""

    path: str
    log: str
    watched: frozenset[str]
    kill_on: str | None = None

    def open(self, scratch: Path | None) -> BlockStore:
        inner = SharedStore(self.path).open(scratch)
        return _Logging(inner, self.log, self.watched, self.kill_on)  # type: ignore[return-value]

    def describe(self) -> str:
        return f"the witnessed store {self.path}"

    def check(self) -> None:
        pass


def reads(log: str) -> list[tuple[int, str]]:
    """``(pid, cid)`` for every logged read."""
    if not os.path.exists(log):
        return []
    with open(log, encoding="utf-8") as f:
        return [(int(pid), cid) for pid, cid in (line.split() for line in f if line.strip())]


@dataclass
class Shared:
    """A FileBlockStore every worker can read, the guests in it, and an empty fs root."""

    store: FileBlockStore
    batch: str
    trap: str
    spin: str
    cat: str
    empty: str
