"""The Dask backend: chunks as Dask tasks, each taken at most once through a fence on the scheduler.

## The one decision
Dask runs a task again, silently, when it thinks the first attempt was lost: a worker that died
while it held the task (up to ``allowed-failures`` times), a finished task whose result lived
only on a worker that then died (recomputed), a worker retired while busy. A guest would then
run twice under one submission. So every chunk is submitted under a fresh token, and before it
runs anything a worker must **claim** that token at the scheduler (:func:`fence`, a handler of
the :class:`Fence` scheduler plugin, atomic in the scheduler's event loop); a token claimed or
revoked once is refused forever, so a second attempt of any kind runs nothing and says who
took the token. When a chunk's future errs (``KilledWorker``) the driver **revokes** its token:
if no one had claimed it, it provably never ran and may be sent again; if someone had, that
worker died with it and its invocations are ``lost`` (recorded ``worker-died``). Retries are
also switched off where this backend decides (``allowed-failures`` 0 on the cluster it starts,
``retries=0`` on every task), but the fence, not the setting, is what keeps the promise — on
an existing scheduler with retries on, a retried chunk is refused at the fence.

Per worker, a :class:`WorkerPlugin` keeps one :class:`~kuro_wasm.batch.worker.WorkerState` (its
block store, and the process's engine and module cache); tasks carry plain data only, each chunk
pickled by the driver into one ``bytes`` value (Dask's client would otherwise walk every item of
every chunk looking for futures: a cost per invocation in the driver). A cancel
is a flag at the fence: unclaimed chunks are refused from then on, and a watcher beside each
running chunk polls it and kills the guest.

No address: a ``LocalCluster`` of processes with one thread each, started and stopped here, with
SIGINT ignored in its worker processes (inherited across their spawn), so that Ctrl-C reaches
only the driver, which cancels the batch instead of losing its workers, and Dask's background
sampling it does not need switched off (:data:`LOCAL_CONFIG`).

## Effects
A Dask client (and maybe a local cluster); RPCs to the scheduler; threads in the workers.

## Not done here
Streaming receipts out of a running chunk (a chunk's receipts come back together, so a worker's
death loses the receipts of the chunk it held); cancelling a single invocation.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from queue import Empty
from typing import Any, Final

from distributed import Client, as_completed, get_worker
from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin
from distributed.utils import sync

from kuro_wasm.batch.backend import Done
from kuro_wasm.batch.stores import WorkerStore
from kuro_wasm.batch.worker import Kill, WorkerState
from kuro_wasm.errors import BatchError

__all__ = ["CANCEL_POLL_S", "DaskBackend", "Fence", "KuroWorker", "LOCAL_CONFIG", "fence", "local_cluster"]

#: How often (s) a running chunk asks the fence whether its batch was cancelled.
CANCEL_POLL_S: Final = 0.2
#: What a local cluster started here changes from Dask's defaults. Retries off (the fence keeps the promise;
#: this keeps Dask from trying). Dask's statistical profiler off: it samples the stack of every task 100
#: times a second, and a chunk's stack is one wasm call that says nothing. The event-loop tick every
#: second, not every 20 ms: it only times the loop to log a blocked one. Together they were most of
#: an idle LocalCluster(2)'s CPU (about 140 ms of CPU a second across its three processes; about 40 ms
#: without them), taken from the guests on a small machine.
LOCAL_CONFIG: Final = {
    "distributed.scheduler.allowed-failures": 0,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
}
_HANDLER: Final = "kuro_batch"
_FENCE_NAME: Final = "kuro-batch-fence"
_FORGOTTEN: Final = "the scheduler lost this batch's fence (was it restarted?)"

# ---- the fence (runs in the scheduler's process, in its event loop: one call at a time)

_BATCHES: dict[str, dict[str, Any]] = {}


def fence(batch: str, action: str, token: str | None = None, who: Any = None) -> dict[str, Any]:
    """One fence operation for ``batch``: ``open``, ``claim``, ``revoke``, ``status``, ``cancel`` or ``close``.

    ``claim``/``revoke`` of a token nobody has claimed or revoked yet succeed (``{"ok": True}``);
    afterwards every claim or revoke of it is refused with the state it is in and who put it
    there. A claim is refused too once the batch is cancelled or closed.
    """
    if action == "open":
        _BATCHES[batch] = {"tokens": {}, "cancelled": False}
        return {"ok": True}
    state = _BATCHES.get(batch)
    if state is None:
        return {"ok": False, "state": "closed"}
    tokens: dict[str, tuple[str, Any]] = state["tokens"]
    if action in ("claim", "revoke"):
        if action == "claim" and state["cancelled"] and token not in tokens:
            tokens[str(token)] = ("cancelled", None)
        held = tokens.get(str(token))
        if held is None:
            tokens[str(token)] = ("claimed" if action == "claim" else "revoked", who)
            return {"ok": True}
        return {"ok": False, "state": held[0], "by": held[1]}
    if action == "status":
        return {"ok": True, "cancelled": state["cancelled"]}
    if action == "cancel":
        state["cancelled"] = True
        return {"ok": True}
    if action == "close":
        _BATCHES.pop(batch, None)
        return {"ok": True}
    return {"ok": False, "state": f"unknown action {action!r}"}


class Fence(SchedulerPlugin):
    """Installs :func:`fence` as the scheduler's ``kuro_batch`` handler (idempotent: one per scheduler)."""

    idempotent = True
    name = _FENCE_NAME

    async def start(self, scheduler: Any) -> None:
        scheduler.handlers[_HANDLER] = fence


# ---- the worker side


class KuroWorker(WorkerPlugin):
    """Holds one :class:`WorkerState` per worker process for a batch (its store, opened once).

    ``home`` is a path as the caller wrote it, or None: resolved *on the worker*
    (:func:`kuro_fs.home.worker_home`), so a worker's caches are its own, never the driver's.
    """

    def __init__(self, store: WorkerStore, home: str | None) -> None:
        self.store = store
        self.home = home
        self.state: WorkerState | None = None

    def setup(self, worker: Any) -> None:
        from kuro_fs.home import worker_home

        self.state = WorkerState(self.store, worker_home(self.home))
        if self.state.error is None:
            from kuro_wasm.host import engine

            engine.engine_for(engine.EngineConfig(fuel=False))  # the engine exists before the first chunk

    def teardown(self, worker: Any) -> None:
        state, self.state = self.state, None
        if state is not None:
            state.close()


def _ask(worker: Any, **message: Any) -> dict[str, Any]:
    answer: dict[str, Any] = sync(worker.loop, getattr(worker.scheduler, _HANDLER), **message)
    return answer


def _watch(worker: Any, batch: str, kill: Kill, done: threading.Event) -> None:
    while not done.wait(CANCEL_POLL_S):
        try:
            cancelled = _ask(worker, batch=batch, action="status").get("cancelled", True)
        except Exception:  # the scheduler is gone: nobody will take our answer; stop the run
            cancelled = True
        if cancelled:
            kill.pull()
            return


def _unavailable(worker: Any, batch: str, token: str, why: str) -> dict[str, Any]:
    """Not run here; but an earlier attempt may have taken the token: the fence decides which answer this is."""
    revoked = _ask(worker, batch=batch, action="revoke", token=token)
    if not revoked.get("ok"):
        return {"fenced": revoked}
    return {"unavailable": why, "taken": False}  # revoked: no attempt can ever take it now


def run_chunk(batch: str, token: str, plugin: str, chunk: bytes) -> dict[str, Any]:
    """The task: claim ``token`` at the fence, then run ``chunk`` (:func:`to_wire`'s data, pickled by the driver)."""
    worker = get_worker()
    holder = worker.plugins.get(plugin)
    state = getattr(holder, "state", None)
    if not isinstance(state, WorkerState):
        return _unavailable(worker, batch, token, f"the worker {worker.address} has no state for this batch")
    if state.error is not None:
        return _unavailable(worker, batch, token, f"{worker.address}: {state.error}")
    who = {"address": worker.address, "pid": os.getpid()}
    claim = _ask(worker, batch=batch, action="claim", token=token, who=who)
    if not claim.get("ok"):
        return {"fenced": claim}
    kill = Kill()
    done = threading.Event()
    watcher = threading.Thread(target=_watch, args=(worker, batch, kill, done), name="kuro-batch-watch", daemon=True)
    watcher.start()
    try:
        result = state.run_chunk(pickle.loads(chunk), kill)  # the driver's own bytes, as trusted as Dask's
    finally:
        done.set()
    result["worker"] = who
    return result


# ---- the driver side


def local_cluster(workers: int) -> Any:
    """A Dask ``LocalCluster`` as a batch without an address starts it: ``workers`` processes, one thread each,
    under :data:`LOCAL_CONFIG` (Dask's defaults otherwise)."""
    import dask
    from distributed import LocalCluster

    with dask.config.set(LOCAL_CONFIG):
        return LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # a free port: the scheduler always serves HTTP; never a clash
            silence_logs=logging.CRITICAL,
        )


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while worker processes are spawned (they keep it ignored); the driver's handler restored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class DaskBackend:
    """Chunks on a Dask cluster: ``address`` (``tcp://host:8786``), a ``distributed.Client``, or None (local).

    ``workers``: the local cluster's size (default: this machine's cores). ``store``: where
    workers read blocks. ``worker_home``: each worker's cache home, a path on the worker (default:
    its own, :func:`kuro_fs.home.worker_home`); the driver's home is never sent.
    """

    def __init__(
        self, cluster: Any = None, *, store: WorkerStore, workers: int | None = None, worker_home: str | None = None
    ):
        self._target = cluster
        self._workers = workers
        self._store = store
        self._home = worker_home
        self._client: Any = None
        self._local: Any = None
        self._batch = ""
        self._plugin = ""
        self._futures: dict[str, Any] = {}
        self._ac: Any = None
        self._slots = (0, 0.0)

    def open(self, batch_id: str) -> None:
        self._batch = batch_id
        self._plugin = f"kuro-batch-{batch_id}"
        try:
            self._client = self._connect()
            self._client.register_plugin(Fence())
            self._call("open")
            self._client.register_plugin(KuroWorker(self._store, self._home), name=self._plugin)
        except BatchError:
            self.close()
            raise
        except (OSError, TimeoutError, ValueError) as exc:
            self.close()
            raise BatchError(f"cannot start the batch on the cluster: {exc}") from exc
        self._ac = as_completed(with_results=True, raise_errors=False, loop=self._client.loop)  # type: ignore[no-untyped-call]

    def _connect(self) -> Any:
        if isinstance(self._target, Client):
            return self._target
        if isinstance(self._target, str):
            try:
                return Client(self._target, timeout=10, set_as_default=False)  # type: ignore[no-untyped-call]
            except (OSError, TimeoutError) as exc:
                raise BatchError(f"no Dask scheduler answers at {self._target}: {exc}") from exc
        with _sigint_ignored():
            self._local = local_cluster(self._workers or os.cpu_count() or 1)
        return Client(self._local, set_as_default=False)  # type: ignore[no-untyped-call]

    def _call(self, action: str, **message: Any) -> dict[str, Any]:
        client = self._client
        answer: dict[str, Any] = client.sync(
            getattr(client.scheduler, _HANDLER), batch=self._batch, action=action, **message
        )
        return answer

    def slots(self) -> int:
        count, when = self._slots
        now = time.monotonic()
        if now - when > 1.0:
            count = max(1, sum(self._client.nthreads().values()))
            self._slots = (count, now)
        return count

    def submit(self, token: str, chunk: dict[str, Any]) -> None:
        payload = pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)  # one value Dask does not walk
        future = self._client.submit(
            run_chunk, self._batch, token, self._plugin, payload, key=token, pure=False, retries=0
        )
        self._futures[token] = future
        self._ac.add(future)

    def wait(self, timeout: float) -> list[Done]:
        out: list[Done] = []
        block = True
        while True:
            try:
                future, result = self._ac.queue.get(block=block, timeout=timeout if block else None)
            except Empty:
                return out
            block = False
            token = future.key
            self._futures.pop(token, None)
            done = self._judge(token, future.status, result)
            if done is not None:
                out.append(done)

    def _judge(self, token: str, status: str, result: Any) -> Done | None:
        if status == "finished" and isinstance(result, dict):
            if "ran" in result:
                return Done(token, "ran", result)
            if "unavailable" in result:
                return Done(token, "failed", {"error": str(result["unavailable"]), "taken": result.get("taken", True)})
            fenced = result.get("fenced", {})
            if fenced.get("state") == "claimed":  # a second attempt of a chunk some worker took: it was lost
                return Done(token, "lost", {"worker": fenced.get("by") or {}})
            if fenced.get("state") == "closed":  # the scheduler forgot the batch: an earlier attempt may have run
                return Done(token, "lost", {"worker": {}, "error": _FORGOTTEN})
            return Done(token, "unstarted")  # cancelled before it was taken (or revoked: already re-sent)
        error = result[1] if isinstance(result, tuple) and len(result) == 3 else result
        revoked = self._call("revoke", token=token)
        if revoked.get("ok"):
            return Done(token, "unstarted")
        if revoked.get("state") == "claimed":
            detail: dict[str, Any] = {"worker": revoked.get("by") or {}}
            if type(error).__name__ != "KilledWorker":
                detail["error"] = f"{type(error).__name__}: {error}"
            return Done(token, "lost", detail)
        if revoked.get("state") == "closed":  # whether a worker took it is forgotten: it may have run
            return Done(token, "lost", {"worker": {}, "error": _FORGOTTEN})
        return Done(token, "unstarted")  # cancelled before any worker took it

    def cancel(self) -> None:
        if self._client is not None and self._batch:
            try:
                self._call("cancel")
            except Exception:  # the scheduler is gone: nothing more will run anyway
                pass

    def close(self) -> None:
        client, local = self._client, self._local
        self._client = self._local = None
        if client is not None:
            try:
                if self._batch:
                    client.sync(getattr(client.scheduler, _HANDLER), batch=self._batch, action="close")
                if self._plugin and local is None:
                    client.unregister_worker_plugin(self._plugin)
            except Exception:  # closing is best effort: a gone scheduler has nothing left to release
                pass
            if client is not self._target:
                client.close()
        if local is not None:
            local.close()
