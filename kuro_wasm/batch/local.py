"""The batch backend without Dask: this machine's worker-process pool, fed by a few driver threads.

## The one decision
``kuro batch --local N`` without Dask runs every invocation on the worker-process pool of
``isolation="process"`` (:class:`~kuro_wasm.host.worker.pool.WorkerPool`, ``N`` hardened workers
forked from a zygote), driven by ``N`` threads of the driver's own process. A thread takes a chunk
from the queue and runs its invocations one after another, each as a process-isolated run reading
the batch's store through a :class:`~kuro_wasm.batch.worker.CaptureStore`, exactly as a Dask worker
runs a chunk in its own process.

So the question a backend must answer — was this chunk taken? — is answered in this process, by
the thread that took it, with no message to lose: a chunk still in the queue when the batch is
cancelled is ``unstarted``; a chunk a thread took always ends ``ran``. A worker process that dies
mid-run takes down that one run, which the pool records as ``worker-died`` (with its signal) and
never re-runs; the chunk's other invocations run on the pool's replacement worker. Nothing is
ever ``lost``, unless the thread itself fails, and then its chunk is (it may have run part).

Compared with Dask's ``LocalCluster``, every invocation crosses a process boundary (a frame each
way, blocks served on request and re-hashed by the host): the pool's per-run cost. In return the
runs get the pool's OS hardening (seccomp, rlimits, namespaces where allowed) and receipts that say
``kuro/isolation: "process"``.

## Effects
Threads in this process; the pool's worker processes; reads of the batch's block store.

## Not done here
Remote machines (Dask's, :mod:`kuro_wasm.batch.cluster`); the hardening itself
(:mod:`kuro_wasm.host.worker.hardening`).
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from kuro_wasm.batch.backend import Done
from kuro_wasm.batch.stores import WorkerStore
from kuro_wasm.batch.worker import Kill, WorkerState
from kuro_wasm.errors import BatchError, HostError
from kuro_wasm.model.limits import MAX_WORKERS

__all__ = ["LocalPool"]

_STOP = None


class LocalPool:
    """``workers`` process-isolated runs at a time on this machine (see the module docstring).

    ``home``: the runs' cache home (this process's: None is its own kuro home, False memory only;
    a gateway's verified blocks go to its ``blocks/``). ``pool``: a
    :class:`~kuro_wasm.host.worker.pool.WorkerPool` to run on (kept open at the end); by default
    one of ``workers`` workers is started by :meth:`open` and closed by :meth:`close`.
    """

    def __init__(self, workers: int, *, store: WorkerStore, home: Any = None, pool: Any = None) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise BatchError(f"a local pool needs at least 1 worker, got {workers!r}")
        if workers > MAX_WORKERS:
            raise BatchError(f"a local pool has at most {MAX_WORKERS} workers, got {workers}")
        self._size = workers
        self._store = store
        self._home = home
        self._given = pool
        self._pool: Any = pool
        self._state: WorkerState | None = None
        self._todo: queue.SimpleQueue[tuple[str, dict[str, Any]] | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[Done] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._kills: set[Kill] = set()
        self._cancelled = False
        self._threads: list[threading.Thread] = []
        self._closed = False

    def open(self, batch_id: str) -> None:
        if self._pool is None:
            from kuro_wasm.host.worker.pool import WorkerPool

            try:
                self._pool = WorkerPool(self._size)
            except HostError as exc:
                raise BatchError(f"the worker-process pool cannot start: {exc}") from exc
        self._state = WorkerState(self._store, self._home, isolation=self._pool)
        for n in range(self._size):
            thread = threading.Thread(target=self._serve, name=f"kuro-batch-{batch_id}-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self) -> None:
        state = self._state
        assert state is not None
        while (item := self._todo.get()) is not _STOP:
            token, chunk = item
            with self._lock:
                if self._cancelled:
                    self._done.put(Done(token, "unstarted"))
                    continue
                kill = Kill()
                self._kills.add(kill)
            try:
                if state.error is not None:
                    self._done.put(Done(token, "failed", {"error": state.error, "taken": False}))
                    continue
                result = state.run_chunk(chunk, kill)
            except Exception as exc:  # the thread failed mid-chunk: any of its invocations may have run
                self._done.put(Done(token, "lost", {"worker": {}, "error": f"{type(exc).__name__}: {exc}"}))
            else:
                self._done.put(Done(token, "ran", result))
            finally:
                with self._lock:
                    self._kills.discard(kill)

    def slots(self) -> int:
        return self._size

    def submit(self, token: str, chunk: dict[str, Any]) -> None:
        self._todo.put((token, chunk))

    def wait(self, timeout: float) -> list[Done]:
        try:
            out = [self._done.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            kills = list(self._kills)
        for kill in kills:
            kill.pull()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.cancel()
        for _ in self._threads:
            self._todo.put(_STOP)
        for thread in self._threads:
            thread.join()
        if self._state is not None:
            self._state.close()
        if self._given is None and self._pool is not None:
            self._pool.close()
