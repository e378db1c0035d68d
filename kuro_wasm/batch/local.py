"""The batch backend without Dask: a few spawned worker processes on this machine.

## The one decision
A chunk is taken at most once because a worker says so before it runs anything: it writes
``("claimed", token)`` to its pipe, *then* runs the chunk. The pipe is the worker's only way out,
and a write that returned is in the kernel's buffer, where the worker's death does not take it
back, so when a worker dies the driver reads everything it said: a chunk it claimed is ``lost``
(its invocations may have run and are recorded ``worker-died``, with the signal that ended it),
a chunk it was sent but never claimed is ``unstarted`` and goes to another worker. A dead worker
is replaced. Each worker holds at most two chunks (one running, one waiting), so a death strands
little. Processes are *spawned* (never forked: a child forked from a process that has compiled a
module can hang in wasmtime's compiler threads), with SIGINT ignored so that Ctrl-C reaches the
driver alone, which cancels through a shared event the workers watch.

This is the fallback behind :class:`~kuro_wasm.batch.backend.Backend` for ``kuro batch --local N``
when Dask is not installed; the worker-process pool of ``isolation="process"`` (branch
``workers``) is meant to take its place (see :func:`kuro_wasm.batch.driver.backend_for`).

## Effects
Processes, pipes, a ``multiprocessing`` event; the workers run guests and read the block store.

## Not done here
OS hardening of the workers (the worker-process pool's job); remote machines (Dask's).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import tempfile
import threading
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Final

from kuro_wasm.batch.backend import Done
from kuro_wasm.batch.stores import WorkerStore
from kuro_wasm.batch.worker import Kill, WorkerState
from kuro_wasm.errors import BatchError

__all__ = ["PER_WORKER", "LocalPool"]

#: Chunks one worker holds at once (one running, one waiting).
PER_WORKER: Final = 2


def _serve(conn: Connection, store: WorkerStore, home: Any, cancel: Any) -> None:
    """A worker's life: open the store once, then claim and run chunks until told to stop."""
    with tempfile.TemporaryDirectory(prefix="kuro-batch-") as scratch:
        state = WorkerState(store, home, Path(scratch))
        current: list[Kill] = []

        def watch() -> None:
            cancel.wait()
            for kill in list(current):
                kill.pull()

        threading.Thread(target=watch, name="kuro-batch-watch", daemon=True).start()
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return
            if message[0] != "run":
                return
            _, token, chunk = message
            if state.error is not None:
                conn.send(("failed", token, state.error))
                continue
            if cancel.is_set():
                conn.send(("refused", token))
                continue
            conn.send(("claimed", token))
            kill = Kill()
            current[:] = [kill]
            if cancel.is_set():
                kill.pull()
            result = state.run_chunk(chunk, kill)
            result["worker"] = {"pid": os.getpid()}
            conn.send(("ran", token, result))


class _Worker:
    def __init__(self, process: Any, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.sent: list[str] = []
        self.claimed: set[str] = set()


class LocalPool:
    """``workers`` spawned processes running chunks (see the module docstring)."""

    def __init__(self, workers: int, *, store: WorkerStore, home: Any = None) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise BatchError(f"a local pool needs at least 1 worker, got {workers!r}")
        self._size = workers
        self._store = store
        self._home = home
        self._context = multiprocessing.get_context("spawn")
        self._cancel = self._context.Event()
        self._workers: list[_Worker] = []
        self._closed = False

    def open(self, batch_id: str) -> None:
        for _ in range(self._size):
            self._workers.append(self._spawn())

    def _spawn(self) -> _Worker:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(
            target=_serve, args=(theirs, self._store, self._home, self._cancel), name="kuro-batch-worker", daemon=True
        )
        on_main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if on_main else None
        try:
            process.start()
        finally:
            if on_main:
                signal.signal(signal.SIGINT, previous)
        theirs.close()
        return _Worker(process, ours)

    def slots(self) -> int:
        return self._size

    def submit(self, token: str, chunk: dict[str, Any]) -> None:
        worker = min(self._workers, key=lambda w: len(w.sent))
        if len(worker.sent) >= PER_WORKER:
            raise BatchError("every local worker already holds its chunks")  # the driver's window prevents this
        worker.sent.append(token)
        try:
            worker.conn.send(("run", token, chunk))
        except OSError:
            pass  # the worker is gone: wait() sees its sentinel and reports the chunk unstarted

    def wait(self, timeout: float) -> list[Done]:
        ready = wait([w.conn for w in self._workers] + [w.process.sentinel for w in self._workers], timeout)
        out: list[Done] = []
        for worker in list(self._workers):
            if worker.conn in ready:
                out.extend(self._read(worker))
        for worker in list(self._workers):
            if worker.process.sentinel in ready and not worker.process.is_alive():
                out.extend(self._read(worker))  # what it said before it died counts
                out.extend(self._bury(worker))
        return out

    def _read(self, worker: _Worker) -> list[Done]:
        out: list[Done] = []
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                kind, token = message[0], message[1]
                if kind == "claimed":
                    worker.claimed.add(token)
                    continue
                if token in worker.sent:
                    worker.sent.remove(token)
                worker.claimed.discard(token)
                if kind == "ran":
                    out.append(Done(token, "ran", message[2]))
                elif kind == "failed":
                    out.append(Done(token, "failed", {"error": f"worker {worker.process.pid}: {message[2]}"}))
                else:
                    out.append(Done(token, "unstarted"))
        except (EOFError, OSError):
            pass
        return out

    def _bury(self, worker: _Worker) -> list[Done]:
        worker.process.join()
        code = worker.process.exitcode
        who: dict[str, Any] = {"pid": worker.process.pid}
        if isinstance(code, int) and code < 0:
            who["signal"] = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        elif code is not None:
            who["exit-status"] = code
        out = [
            Done(token, "lost", {"worker": who}) if token in worker.claimed else Done(token, "unstarted")
            for token in worker.sent
        ]
        worker.conn.close()
        self._workers.remove(worker)
        if not self._closed:
            self._workers.append(self._spawn())
        return out

    def cancel(self) -> None:
        self._cancel.set()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for worker in self._workers:
            try:
                worker.conn.send(("stop",))
            except OSError:
                pass
        for worker in self._workers:
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self._workers = []
