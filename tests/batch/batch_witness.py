"""A test-only worker store: the worker's shared store, logging every read of a guest's input file.

Each invocation of the batch tests reads its own file (``greeting.txt`` = ``b"effect N"``, a raw
block nobody else reads), so the log — one ``pid cid`` line per read, appended by whichever
worker process read it — counts how often each invocation's guest ran, and where. Reading the
``kill_on`` block kills the reading worker (``SIGKILL``, after logging the read) the first time it
is read, never again: a worker dies in the middle of a guest's run, exactly where the test says,
with no timing — and a second run of it (what the fence exists to prevent) is counted, not killed. Under the local
backend the worker-process pool's host reads blocks for its workers, on a reader thread named
after the worker: the log names, and the kill hits, that worker. Workers import
this module by name (it is on the test's ``sys.path``, which spawned processes inherit).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kuro_fs.blocks import BlockStore
from kuro_fs.filestore import FileBlockStore
from kuro_wasm.batch.stores import SharedStore
from kuro_wasm.host.worker.pool import answering_for


def _reader() -> int:
    """The pid this read is for: this process, or — read by a worker-process pool on a worker's behalf — that
    worker."""
    worker = answering_for()
    return os.getpid() if worker is None else worker


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _first(marker: str) -> bool:
    """True for the one caller, in any process, that creates ``marker``."""
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False
    return True


class _Logging:
    def __init__(
        self, inner: BlockStore, log: str, watched: frozenset[str], kill_on: str | None, log_has: bool
    ) -> None:
        self._inner = inner
        self._log = log
        self._watched = watched
        self._kill_on = kill_on
        self._log_has = log_has

    def get(self, cid: str) -> bytes | None:
        if cid in self._watched:
            pid = _reader()
            _append(self._log, f"{pid} {cid}\n")
            if cid == self._kill_on and _first(self._log + ".killed"):
                os.kill(pid, signal.SIGKILL)
        return self._inner.get(cid)

    def has(self, cid: str) -> bool:
        if self._log_has and cid in self._watched:
            _append(self._log, f"{_reader()} {cid}\n")
        found: bool = self._inner.has(cid)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass(frozen=True)
class WitnessStore:
    """:class:`SharedStore` at ``path``, whose reads of ``watched`` CIDs are logged to ``log``
    (and their ``has`` lookups too, with ``log_has``: a worker that compiled a guest before only looks it up)."""

    path: str
    log: str
    watched: frozenset[str]
    kill_on: str | None = None
    log_has: bool = False

    def open(self, home: Path | None) -> BlockStore:
        inner = SharedStore(self.path).open(home)
        return _Logging(inner, self.log, self.watched, self.kill_on, self.log_has)  # type: ignore[return-value]

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


def when_read(log: str, then: Callable[[], None]) -> threading.Thread:
    """A thread that calls ``then()`` once ``log`` names a first read (waits for the event, not a time)."""

    def watch() -> None:
        stop = threading.Event()
        while not reads(log):
            stop.wait(0.01)
        then()

    thread = threading.Thread(target=watch, name="witness-when-read", daemon=True)
    thread.start()
    return thread


@dataclass
class Shared:
    """A FileBlockStore every worker can read, the guests in it, and an empty fs root."""

    store: FileBlockStore
    batch: str
    trap: str
    spin: str
    cat: str
    empty: str


class Inline:
    """A backend that runs one chunk at a time in this process, when the driver waits (the real worker code).

    Deterministic: ``slots()`` is 1, so the driver has two chunks out at most, and the first one it
    sent is the one that ends at each wait.
    """

    def __init__(self, store: Any) -> None:
        self._spec = store
        self._queue: list[tuple[str, dict[str, Any]]] = []
        self._state: Any = None

    def open(self, batch_id: str) -> None:
        from kuro_wasm.batch.worker import WorkerState

        self._state = WorkerState(self._spec, False)

    def slots(self) -> int:
        return 1

    def submit(self, token: str, chunk: dict[str, Any]) -> None:
        self._queue.append((token, chunk))

    def wait(self, timeout: float) -> list[Any]:
        from kuro_wasm.batch.backend import Done
        from kuro_wasm.batch.worker import Kill

        if not self._queue:  # nothing out (a whole chunk was answered by another process's record)
            return []
        token, chunk = self._queue.pop(0)
        return [Done(token, "ran", self._state.run_chunk(chunk, Kill()))]

    def cancel(self) -> None:
        pass

    def close(self) -> None:
        pass
