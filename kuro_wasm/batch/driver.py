"""``run_many``: fan invocations out over workers, hand back receipts as they complete, run nothing twice.

## The one decision
The driver alone owns the ledger, and it decides everything about an invocation's fate before
and after a backend touches it:

1. every invocation is checked first (a bad one refuses the batch before anything runs);
2. a denied one gets its denial at once, never sent;
3. an op id the ledger already knows is answered from it — replayed, running or unknown —
   **without touching the cluster** (:meth:`~kuro_wasm.ledger.ledger.Ledger.recorded_many`,
   which claims nothing);
4. the rest go out in chunks (a few invocations per task, so the per-task cost disappears;
   the size adapts to about :data:`TARGET_CHUNK_S` of work), at most two chunks per worker
   slot in flight; a chunk's op ids are claimed in one transaction
   (:meth:`~kuro_wasm.ledger.ledger.Ledger.claim_many`) **as it is sent**, so a driver that
   dies leaves ``unknown`` only what it had sent — the rest were never claimed, and a rerun of
   the batch runs them (an op id another process recorded meanwhile is answered, not sent);
5. each chunk ends as the backend proves it did (:mod:`kuro_wasm.batch.backend`): receipts are
   verified and rebuilt (:mod:`kuro_wasm.batch.verify`), their blocks stored, their op ids
   settled, *then* handed out; a ``lost`` chunk's invocations are recorded ``worker-died``;
   an ``unstarted`` chunk goes out again; a ``failed`` one stops the batch (its op ids are
   released only if the backend proves no worker took it, else recorded ``unknown``).

Nothing is retried behind the caller's back: an invocation runs again only under a new op id.
An op id is used up only by a run that may have happened: whatever stops the batch before an
invocation is sent — a backend that cannot start, a caller that stops iterating, a ledger that
refuses a chunk's claims (no more is sent, what is out drains, then the error is raised) —
leaves it free.
A ``KeyboardInterrupt`` while the batch waits (Ctrl-C; the CLI turns SIGTERM and SIGHUP into one)
cancels it: nothing more is sent, running guests are killed (``cancelled`` receipts), what
finished is stored and handed out, what never started is listed in :attr:`Batch.not_run` and
its op ids released; then the interrupt is raised again. One that lands while finished receipts
are being recorded in the ledger acts once they are recorded. A second one — or the first after
:meth:`Batch.cancel`, which a signal handler calls on the first signal — stops waiting: whatever is
still out is recorded ``unknown`` in the ledger.

## Effects
The backend's workers, the driver's block store, the ledger, the clock.

## Not done here
The command line (:mod:`kuro_wasm.cli.batch`); streaming output of running guests; keeping
receipts without op ids anywhere (they are handed out, as :func:`kuro_wasm.host.api.run` hands
its receipt out; the CLI stores each).
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kuro_fs.blocks import BlockStore
from kuro_wasm.batch.backend import Backend, Done
from kuro_wasm.batch.stores import WorkerStore, worker_store_for
from kuro_wasm.batch.verify import accepted, host_error, worker_died
from kuro_wasm.batch.worker import to_wire
from kuro_wasm.errors import BatchError, LedgerError, ModelError
from kuro_wasm.ledger.ledger import Claim, Ledger
from kuro_wasm.model.invocation import Invocation, invocation
from kuro_wasm.model.sessions import denial

__all__ = ["MAX_CHUNK", "TARGET_CHUNK_S", "Batch", "Completed", "backend_for", "dask_available", "run_many"]

#: How much work (seconds, as measured) a chunk should hold once the batch knows its pace.
TARGET_CHUNK_S: Final = 0.1
#: The most invocations one chunk holds (what a worker's death can strand).
MAX_CHUNK: Final = 512
_FIRST_CHUNK: Final = 4


@dataclass(frozen=True)
class Completed:
    """One invocation's end: its index in the batch, what was asked, and its receipt (or ledger answer).

    ``value`` is a receipt, a denial, or — for an op id the ledger already knew — the ledger's
    answer (``kuro/status`` ``done`` with ``kuro/replayed`` True, ``running`` or ``unknown``).
    """

    index: int
    invocation: Invocation
    value: dict[str, Any]


def dask_available() -> bool:
    """Whether ``distributed`` is installed (``pip install 'kuro-wasm[dask]'``); nothing is imported."""
    import importlib.util

    return importlib.util.find_spec("distributed") is not None


def backend_for(
    cluster: Any, *, store: WorkerStore, workers: int | None = None, home: Any = None, worker_home: str | None = None
) -> Backend:
    """The backend for ``cluster``: a Dask address or ``Client``, a :class:`Backend`, or None (this machine).

    ``home`` is the cache home of runs in this process (the worker-process pool's); ``worker_home``
    the one Dask workers resolve where they run (:func:`kuro_fs.home.worker_home`).

    None: a Dask ``LocalCluster`` of ``workers`` processes (default: the cores) when Dask is
    installed, else this machine's worker-process pool (:class:`~kuro_wasm.batch.local.LocalPool`
    over the pool of ``isolation="process"``).

    Raises BatchError: an address given without Dask installed, ``workers`` not from 1 to
    :data:`~kuro_wasm.model.limits.MAX_WORKERS`.
    """
    _check_workers(workers)
    if cluster is not None and hasattr(cluster, "submit") and hasattr(cluster, "wait"):
        return cluster  # type: ignore[no-any-return]
    if dask_available():
        from kuro_wasm.batch.cluster import DaskBackend

        return DaskBackend(cluster, store=store, workers=workers, worker_home=worker_home)
    if cluster is not None:
        raise BatchError("a Dask cluster needs Dask: pip install 'kuro-wasm[dask]'")
    from kuro_wasm.batch.local import LocalPool

    return LocalPool(workers or _cores(), store=store, home=home)


def _check_workers(workers: object) -> None:
    """Raises BatchError: ``workers`` is given and is not an integer from 1 to ``MAX_WORKERS``."""
    from kuro_wasm.model.limits import MAX_WORKERS

    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS
    ):
        raise BatchError(f"workers must be an integer from 1 to {MAX_WORKERS}, got {workers!r}")


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def run_many(
    specs: Iterable[Invocation | Mapping[str, Any]],
    *,
    store: BlockStore,
    cluster: Any = None,
    workers: int | None = None,
    ledger: Ledger | None = None,
    worker_store: WorkerStore | None = None,
    home: Any = None,
    worker_home: str | None = None,
    chunk_size: int | None = None,
    keep_output: bool = False,
) -> Batch:
    """Run every spec on ``cluster``; iterate the returned :class:`Batch` for receipts as they complete.

    ``specs``: :class:`~kuro_wasm.model.invocation.Invocation` values, or batch-line mappings
    (:func:`kuro_wasm.model.invocation.invocation`: ``guest``, ``export``, ``args``, … with
    ``fs`` a root CID). ``store``: the driver's block store (blocks the guests write land here,
    verified). ``cluster``: a Dask scheduler address, a ``distributed.Client``, a backend, or None
    (this machine: ``workers`` processes). ``worker_store``: where workers read blocks (default:
    ``store``'s directory, or its gateway). ``home``: the cache home (compiled modules, a gateway's
    verified blocks) of runs on this machine's worker-process pool — this process's home (None: its
    own kuro home, False: memory only). ``worker_home``: the cache home of Dask workers, a path
    resolved on each worker (None: the worker's own, :func:`kuro_fs.home.worker_home` — its
    ``$KURO_HOME``, else ``<temp dir>/kuro-worker-<uid>``); ``home`` is never sent to a Dask worker.
    ``ledger``: required when a spec has an ``op_id``.
    ``chunk_size``: invocations per task (default: adapted to about :data:`TARGET_CHUNK_S` of work).
    ``keep_output``: ledgered receipts keep their raw output in the ledger's private output store.

    Nothing runs until the batch is iterated. Raises ModelError (before anything runs): a bad
    spec (the message names its index), an op id without a ledger, one op id twice.
    Raises BatchError (before any op id is claimed): ``workers`` not from 1 to
    :data:`~kuro_wasm.model.limits.MAX_WORKERS`.
    Raises GatewayUnreachable, GatewayTimeout, GatewayRefused (before any op id is claimed):
    workers would read from a gateway that does not answer its probe
    (:meth:`~kuro_wasm.batch.stores.WorkerStore.check`).
    """
    checked: list[Invocation] = []
    batch_id = uuid.uuid4().hex[:12]
    default_fs: str | None = None
    for index, spec in enumerate(specs):
        if isinstance(spec, Invocation):
            checked.append(spec)
            continue
        if default_fs is None:
            from kuro_fs.fs import Fs

            default_fs = str(Fs.empty(store).root)
        try:
            checked.append(invocation(spec, session_id=f"batch-{batch_id}", default_fs=default_fs))
        except ModelError as exc:
            raise ModelError(f"invocation {index}: {exc}", reason=exc.reason, hint=exc.hint) from exc
    first: dict[str, int] = {}
    for index, inv in enumerate(checked):
        if inv.op_id is not None and first.setdefault(inv.op_id, index) != index:
            raise ModelError(
                f"invocation {index}: op_id {inv.op_id!r} is already invocation {first[inv.op_id]}'s",
                reason="duplicate-op-id",
            )
    if ledger is None and any(inv.op_id is not None for inv in checked):
        raise ModelError("invocations with an op_id need a ledger (run_many(..., ledger=Ledger()))", reason="no-ledger")
    _check_workers(workers)
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ModelError(f"chunk_size must be an int >= 1, got {chunk_size!r}", reason="invalid-run-option")
    if worker_home is not None and (not isinstance(worker_home, str) or not worker_home or "\0" in worker_home):
        raise ModelError(
            f"worker_home must be a non-empty path string, got {worker_home!r}", reason="invalid-run-option"
        )
    if any(denial(inv.session, inv.command) is None for inv in checked):  # something may be sent: can workers read?
        try:
            where = worker_store or worker_store_for(store)
        except ModelError:
            where = None  # refused when the batch starts, as it always was
        if where is not None:
            where.check()
    return Batch(
        batch_id,
        checked,
        store,
        ledger,
        cluster,
        workers,
        worker_store,
        home,
        chunk_size,
        keep_output=keep_output,
        worker_home=worker_home,
    )


class Batch:
    """A batch in progress: iterate it for :class:`Completed` values, in the order they complete.

    :attr:`not_run` lists the indexes that never started (a cancel or an error came first), once iteration ends;
    :attr:`lost` those whose worker died holding them; :attr:`running` counts those out now.
    :meth:`cancel` (from a signal handler or another thread) stops it as Ctrl-C does, without
    raising; keep iterating to receive what finishes. ``with run_many(...) as batch:`` cancels
    and drains on the way out if the loop stopped early (what finishes is still stored — blocks,
    ledger rows — but no longer handed out).
    """

    def __init__(
        self,
        batch_id: str,
        invocations: list[Invocation],
        store: BlockStore,
        ledger: Ledger | None,
        cluster: Any,
        workers: int | None,
        worker_store: WorkerStore | None,
        home: Any,
        chunk_size: int | None,
        *,
        keep_output: bool,
        worker_home: str | None = None,
    ) -> None:
        self.id = batch_id
        self.invocations = invocations
        self.not_run: list[int] = []
        self.lost: list[int] = []
        self.running = 0
        self._store = store
        self._ledger = ledger
        self._cluster = cluster
        self._workers = workers
        self._worker_store = worker_store
        self._home = home
        self._worker_home = worker_home
        self._fixed_chunk = chunk_size
        self._keep = keep_output
        self._claims: dict[int, Claim] = {}
        self._cancelled = False
        self._cancel_asked = False
        self._flow: Iterator[Completed] | None = None
        self._per_item: float | None = None
        self._failure: str | None = None
        self._stopped_by: Exception | None = None
        self._interrupted: KeyboardInterrupt | None = None

    def __len__(self) -> int:
        return len(self.invocations)

    def cancel(self) -> None:
        """Stop sending; running guests are killed; the iteration still hands out what finished.

        A ``KeyboardInterrupt`` after it (a second signal, where a handler calls this on the first) stops waiting.
        """
        self._cancel_asked = True
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` (or Ctrl-C) has stopped the batch."""
        return self._cancelled

    def __iter__(self) -> Iterator[Completed]:
        return self

    def __next__(self) -> Completed:
        if self._flow is None:
            self._flow = self._completions()
        return next(self._flow)

    def close(self) -> None:
        """Cancel what has not finished and wait for what is out (stored, not handed out). Idempotent."""
        if self._flow is None:
            self._flow = iter(())
            return
        self.cancel()
        for _ in self._flow:
            pass

    def stop(self) -> None:
        """Stop waiting now, as a second Ctrl-C does: nothing more is sent or handed out, whatever is out is
        recorded ``unknown`` in the ledger, what was never sent is listed in :attr:`not_run` (op ids released).
        Idempotent; :meth:`close` after it waits for nothing."""
        self.cancel()
        flow, self._flow = self._flow, iter(())
        close = getattr(flow, "close", None)
        if close is not None:
            close()  # the generator ends where it waits: its handlers abandon what is out, release the rest

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _completions(self) -> Iterator[Completed]:
        pending: deque[int] = deque()
        denied: deque[tuple[int, dict[str, Any]]] = deque()
        for index, inv in enumerate(self.invocations):
            refused = denial(inv.session, inv.command)
            if refused is not None:
                denied.append((index, refused))
            else:
                pending.append(index)
        try:
            answered = self._recorded()
            known = {done.index for done in answered}
            if known:
                pending = deque(index for index in pending if index not in known)
            yield from answered
            refusals = {index: refused for index, refused in denied if index not in known}
            taken, raced = self._take(list(refusals))  # one transaction to claim, one to settle them all
            finished = self._finish_many([(index, refusals[index]) for index in taken])
            denied.clear()
            yield from raced
            yield from finished
            self._deferred()
            if pending:
                yield from self._run(pending)  # it empties pending: sent, or listed in not_run
        except BaseException:  # whatever was never sent is listed as not run
            self.not_run.extend([*pending, *(index for index, _ in denied)])
            pending.clear()
            raise
        finally:  # still claimed, never settled nor released: it may have run (or been denied): unknown
            for index in sorted(self._claims):
                self._abandon(index, "the batch stopped before this invocation's receipt was recorded")

    # ---- the ledger

    def _request(self, index: int) -> tuple[str, Any, Any, dict[str, Any]]:
        inv = self.invocations[index]
        return (
            inv.op_id or "",
            inv.session,
            inv.command,
            {**inv.run_options(), "store": self._store, "keep_output": self._keep},
        )

    def _recorded(self) -> list[Completed]:
        """The ledger's answers for op ids it already knows (replayed, running, unknown): claimed by no one here."""
        ledger = self._ledger
        wanted = [i for i, inv in enumerate(self.invocations) if inv.op_id is not None]
        if ledger is None or not wanted:
            return []
        known = ledger.recorded_many([self._request(i) for i in wanted])
        return [Completed(i, self.invocations[i], v) for i, v in zip(wanted, known, strict=True) if v is not None]

    def _take(self, indexes: list[int]) -> tuple[list[int], list[Completed]]:
        """Claim the op ids of ``indexes`` about to be sent (those not claimed yet); what may go, and what
        the ledger answered instead (another process recorded the op id since the batch began)."""
        ledger = self._ledger
        wanted = [i for i in indexes if self.invocations[i].op_id is not None and i not in self._claims]
        if ledger is None or not wanted:
            return indexes, []
        held: dict[str, Claim] = {}
        try:
            got = ledger.claim_many([self._request(i) for i in wanted], held=held)
        finally:  # every claim made is ours, even if an interrupt comes first: it is released, settled or abandoned
            for index in wanted:
                claim = held.get(self.invocations[index].op_id or "")
                if claim is not None:
                    self._claims[index] = claim
        raced = {
            index: Completed(index, self.invocations[index], value)
            for index, value in zip(wanted, got, strict=True)
            if not isinstance(value, Claim)
        }
        return [i for i in indexes if i not in raced], list(raced.values())

    def _finish_many(self, values: list[tuple[int, dict[str, Any]]]) -> list[Completed]:
        """Settle the receipts of claimed ones; a Ctrl-C meanwhile waits until they are stored (:meth:`_deferred`)."""
        ledgered = [(i, v) for i, v in values if i in self._claims]
        settled: dict[int, dict[str, Any]] = {}
        if ledgered and self._ledger is not None:
            claims = [(self._claims[i], v) for i, v in ledgered]
            try:
                saved = self._ledger.settle_many(claims)
            except KeyboardInterrupt as exc:  # a receipt that was produced is stored first (saving it twice is a no-op)
                self._interrupted = self._interrupted or exc
                saved = self._ledger.settle_many(claims)  # a second interrupt here stops: the claims become unknown
            for i, _ in ledgered:  # settled: no longer ours to abandon
                self._claims.pop(i, None)
            settled = {i: s for (i, _), s in zip(ledgered, saved, strict=True)}
        return [Completed(i, self.invocations[i], settled.get(i, v)) for i, v in values]

    def _deferred(self) -> None:
        """Raise the Ctrl-C that came while receipts were being settled, now that they are stored."""
        exc, self._interrupted = self._interrupted, None
        if exc is not None:
            raise exc

    # ---- the backend

    def _run(self, pending: deque[int]) -> Iterator[Completed]:
        store = self._worker_store or worker_store_for(self._store)
        out: dict[str, list[int]] = {}
        arrived: deque[Done] = deque()
        interrupt: BaseException | None = None
        backend: Backend | None = None
        try:
            backend = backend_for(
                self._cluster, store=store, workers=self._workers, home=self._home, worker_home=self._worker_home
            )
            backend.open(self.id)
            serial = 0
            cancel_sent = False
            while pending or out:
                try:
                    if self._cancelled and not cancel_sent:
                        cancel_sent = True
                        backend.cancel()
                        self.not_run.extend(pending)
                        pending.clear()
                    while pending and len(out) < 2 * backend.slots():
                        chunk = [pending.popleft() for _ in range(min(len(pending), self._size()))]
                        placed = False
                        try:
                            taken, raced = self._take(chunk)  # claimed as it leaves: a crash leaves only these
                            if taken:
                                token = f"kuro-batch-{self.id}-{serial}"
                                serial += 1
                                out[token] = taken
                            placed = True
                        except LedgerError as exc:  # nothing of it claimed: send no more
                            placed = True
                            self.not_run.extend([*chunk, *pending])
                            pending.clear()
                            self._stopped_by = self._stopped_by or exc
                            break
                        finally:  # stopped before it was out (a Ctrl-C): back in line, never sent (claims released)
                            if not placed:
                                pending.extendleft(reversed(chunk))
                        if taken:
                            self.running += len(taken)
                            backend.submit(token, to_wire([(i, self.invocations[i]) for i in taken]))
                        yield from raced
                    arrived.extend(backend.wait(0.25))
                    while arrived:  # kept across an interrupt: a backend hands each end out once
                        done = arrived.popleft()
                        chunk = out.pop(done.token, [])
                        self.running -= len(chunk)
                        yield from self._ended(done, chunk, pending)
                        self._deferred()
                except KeyboardInterrupt as exc:
                    if interrupt is not None or self._cancel_asked:  # a cancel came first: this one stops waiting
                        raise
                    interrupt = exc
                    self._cancelled = True
        except BaseException:
            self._record_arrived(arrived, out, pending)
            for chunk in out.values():
                for index in chunk:
                    self._abandon(index, "the batch stopped waiting for this invocation's worker")
            self.not_run.extend(pending)  # never sent: released below
            pending.clear()
            raise
        finally:
            self._release(sorted(set(self.not_run)))
            if backend is not None:
                backend.close()
        if interrupt is not None:
            raise interrupt
        if self._stopped_by is not None:
            raise self._stopped_by
        if self._failure is not None:
            raise BatchError(f"no worker can run this batch: {self._failure}")

    def _record_arrived(self, arrived: deque[Done], out: dict[str, list[int]], pending: deque[int]) -> None:
        """Chunks that had ended when the batch stopped waiting: their receipts are recorded (not handed out)."""
        while arrived:
            done = arrived.popleft()
            chunk = out.pop(done.token, [])
            self.running -= len(chunk)
            try:
                for _ in self._ended(done, chunk, pending):
                    pass
            except Exception:  # what it could not settle is still claimed: abandoned as unknown
                pass

    def _size(self) -> int:
        if self._fixed_chunk is not None:
            return self._fixed_chunk
        if self._per_item is None:
            return _FIRST_CHUNK
        return max(1, min(MAX_CHUNK, int(TARGET_CHUNK_S / max(self._per_item, 1e-6))))

    def _ended(self, done: Done, chunk: list[int], pending: deque[int]) -> Iterator[Completed]:
        if done.kind == "ran":
            ran = done.detail.get("ran", [])
            seconds = done.detail.get("seconds")
            if ran and isinstance(seconds, (int, float)):
                pace = seconds / len(ran)
                self._per_item = pace if self._per_item is None else 0.7 * self._per_item + 0.3 * pace
            values = []
            members = set(chunk)
            seen: set[int] = set()
            for answer in ran:
                index = answer.get("i") if isinstance(answer, dict) else None
                if type(index) is int and index in members and index not in seen:  # a damaged answer's 2nd word: no
                    seen.add(index)
                    values.append((index, accepted(self._store, self.invocations[index], answer)))
            for index in done.detail.get("skipped", []):
                if type(index) is int and index in members and index not in seen:
                    self.not_run.append(index)
                    seen.add(index)
            for index in chunk:  # an invocation the worker did not account for may have run
                if index not in seen:
                    values.append((index, self._host_error(index, "the worker's answer left it out")))
            # a run whose own worker process died under it (the worker-process pool's runs)
            self.lost.extend(i for i, v in values if v.get("kuro/outcome") == "worker-died")
            yield from self._finish_many(values)
        elif done.kind == "lost":
            now = int(time.time() * 1000)
            worker = dict(done.detail.get("worker") or {})
            error = done.detail.get("error")
            self.lost.extend(chunk)
            if error:
                values = [(i, self._host_error(i, f"its chunk failed after a worker took it: {error}")) for i in chunk]
            else:
                values = [(i, worker_died(self.invocations[i], worker, now)) for i in chunk]
            yield from self._finish_many(values)
        elif done.kind == "unstarted":
            if self._cancelled or self._stopped_by is not None:  # nothing more is sent: it stays not run
                self.not_run.extend(chunk)
            else:
                pending.extendleft(reversed(chunk))
        else:  # no worker can run it: stop sending, let the rest drain, then say why
            error = str(done.detail.get("error", "unknown reason"))
            if done.detail.get("taken") is False:  # the backend proves no worker took it: it never ran
                self.not_run.extend(chunk)
            else:  # it may have run: its op ids are used up, never released to run again
                why = f"its chunk failed and may have run: {error}"
                for index in chunk:
                    value = self._host_error(index, why)
                    claim = self._claims.pop(index, None)
                    if claim is not None and self._ledger is not None:
                        value = self._ledger.abandon(claim, why)
                    yield Completed(index, self.invocations[index], value)
            self._cancelled = True
            if self._failure is None:
                self._failure = error

    def _host_error(self, index: int, why: str) -> dict[str, Any]:
        return host_error(self.invocations[index], f"{why}; it may have run, and is not run again")

    def _release(self, indexes: list[int]) -> None:
        claims = [self._claims.pop(i) for i in indexes if i in self._claims]
        if claims and self._ledger is not None:
            self._ledger.release(claims)

    def _abandon(self, index: int, why: str) -> None:
        claim = self._claims.pop(index, None)
        if claim is not None and self._ledger is not None:
            self._ledger.abandon(claim, why)
