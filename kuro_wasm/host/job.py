"""One guest run, start to receipt: load, arm the limits, call, classify, finish.

## The one decision
A run's whole life is one :class:`Job`, executed by exactly one thread (the
caller's for :func:`kuro_wasm.host.api.run`, a worker's for
:func:`~kuro_wasm.host.api.start`), and it always ends in a receipt: load failures,
stops, traps and host bugs are all turned into host result keys
(:func:`kuro_wasm.model.outcome.decide`) and finished through the stream
(:func:`kuro_wasm.model.stream.finish`). Other threads touch a job only through its
:class:`~kuro_wasm.host.context.RunContext` (``stop``, stdin) and by reading its
immutable stream value. If even the receipt cannot be built (a bug), waiters
get a :class:`~kuro_wasm.errors.HostError` instead of hanging.

## Effects
wasmtime stores (one per run, closed at the end), the block store, the module
cache, the epoch ticker, the wall clock (``started-at``/``finished-at``).

## Not done here
No argument checking or denial (:mod:`kuro_wasm.host.api`); nothing that differs
between kinds of guest — which imports exist, how the entry point is called and
what its result means — is decided here: the guest's kind does that
(:mod:`kuro_wasm.host.kind`, :mod:`kuro_wasm.host.kinds`).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import wasmtime

from kuro_fs.blocks import BlockStore
from kuro_wasm.errors import HostError
from kuro_wasm.host import engine as _engine
from kuro_wasm.host import loader
from kuro_wasm.host.calls import register_run, unregister_run
from kuro_wasm.host.context import STDIN_BUFFER_BYTES, RunContext, StdinPipe
from kuro_wasm.host.fsgate import open_fs
from kuro_wasm.host.loader import LoadFailure
from kuro_wasm.model import stream as _stream
from kuro_wasm.model.limits import Limits
from kuro_wasm.model.operation import narrowed_fs_grant
from kuro_wasm.model.outcome import decide
from kuro_wasm.model.receipt import namespace
from kuro_wasm.model.sessions import Session

__all__ = ["ISOLATION", "Job", "OnChunk", "OnExit"]

ISOLATION = "wasmtime"

_PLAIN = _engine.EngineConfig(fuel=False)
_FUEL = _engine.EngineConfig(fuel=True)

_DONE_LOCK = threading.RLock()  # (re-entrant, as every lock a run takes: a signal handler may make a run)

OnChunk = Callable[[_stream.Stream, _stream.Chunk], None]
OnExit = Callable[[dict[str, Any]], None]


class Job:
    """One run's inputs and its mutable progress (owned by the thread that executes it)."""

    def __init__(
        self,
        session: Session,
        command: Mapping[str, Any],
        store: BlockStore,
        fs: Any,
        *,
        on_chunk: OnChunk | None,
        on_exit: OnExit | None,
        limits: Limits,
        home: Any,
        stdin_closed: bool,
        stdin: bytes | None,
        seed: int | None = None,
        stdin_bound: int | None = STDIN_BUFFER_BYTES,
    ) -> None:
        self.session = session
        self.command = dict(command)
        self.store = store
        self.fs_arg = fs
        self.on_chunk = on_chunk
        self.on_exit = on_exit
        self.limits = limits
        self.home = home
        self.started_ms = int(time.time() * 1000)
        self.started = time.monotonic()
        self.writer = _stream.Writer(max_output_bytes=limits.max_output_bytes, max_chunks=limits.max_output_chunks)
        self.exited = False  # the receipt exists: the stream value is then ``exited``
        self.callback_error: str | None = None
        #: what a program's signal handler raised while this run was held (:mod:`.interrupts`): raised after the receipt
        self.interruption: BaseException | None = None
        # Without on_chunk, imports append straight to the writer (no call through Job.emit on the hot path).
        emit = self.writer.append if on_chunk is None else self.emit
        cond = threading.Condition()
        self.ctx = RunContext(
            grant=session.grant,
            emit=emit,
            admit=self.writer.admit,
            deadline=self.started + limits.timeout_ms / 1000.0,
            cond=cond,
            stdin=StdinPipe(cond, stdin, closed=stdin_closed, bound=stdin_bound),
            command=self.command,
            seed=seed,
            max_value_bytes=limits.value_bound(),
        )
        self.receipt: dict[str, Any] | None = None
        self.guest_kind: str | None = None  # the kind that claimed the guest (kuro/guest-kind), once loaded
        self.failure: HostError | None = None
        self.on_settled: Callable[[], None] | None = None
        self._done: threading.Event | None = None
        self._finished = False
        self._spent: wasmtime.Store | None = None  # the run's wasmtime store, closed once the receipt is out

    @property
    def done(self) -> threading.Event:
        """Set once the receipt exists (or no receipt can be). Made on first use: a synchronous
        :func:`~kuro_wasm.host.api.run` never waits on it, and an Event costs as much as a gated call."""
        event = self._done
        if event is None:
            with _DONE_LOCK:
                event = self._done
                if event is None:
                    event = self._done = threading.Event()
                    if self._finished:
                        event.set()
        return event

    def _mark_done(self) -> None:
        with _DONE_LOCK:
            self._finished = True
            event = self._done
        if event is not None:
            event.set()

    # -- output

    @property
    def stream(self) -> _stream.Stream:
        """The stream value now (``running`` until the receipt exists, then ``exited``)."""
        return self.writer.value("exited" if self.exited else "running")

    def emit(self, name: str, data: bytes) -> bool:
        """Keep one chunk (or not: a bound was hit) and tell ``on_chunk``. Runs on the guest's thread only."""
        writer = self.writer
        if not writer.append(name, data):
            return False
        if self.on_chunk is not None:
            try:
                self.on_chunk(writer.value(), _stream.Chunk(name, data, writer.seq - 1))
            except BaseException as exc:
                if self.callback_error is None:
                    self.callback_error = f"on_chunk raised {type(exc).__name__}: {exc}"
                if not isinstance(exc, Exception):  # SystemExit, KeyboardInterrupt: the program means to stop
                    self.interrupted(exc)
                    return False  # (kept already: the write stops the guest, as a capped one does)
        return True

    def interrupted(self, exc: BaseException) -> None:
        """The program stopped this run by raising ``exc`` (a signal handler during a main-thread run, or a
        ``BaseException`` that is not an ``Exception`` from ``on_chunk``): keep the first, and cancel the run.
        :func:`~kuro_wasm.host.api.run` raises it once the receipt is made."""
        if self.interruption is None:
            self.interruption = exc
        self.ctx.stop("cancelled")

    # -- the run

    def execute(self) -> dict[str, Any]:
        """Run to the end and return the receipt. Raises HostError only if no receipt can be built."""
        assert self.ctx.stdin is not None
        self.ctx.stdin.reader = threading.get_ident()
        try:
            result, session = self._run()
        except Exception as exc:
            result = {"exit-code": 70, "outcome": "host-error", "error": f"host error: {type(exc).__name__}: {exc}"}
            session = self.session
        finally:
            self.ctx.stdin.end()  # a writer waiting for the guest to read returns: it never will now
        try:
            return self._finish(result, session)
        except Exception as exc:  # a receipt the model refuses: say so instead of leaving waiters hanging
            self.failure = HostError(f"no receipt could be built: {type(exc).__name__}: {exc}")
            self._mark_done()
            raise self.failure from exc
        finally:
            # Closed after the receipt is out (waiters woken, on_exit called — a worker process's report sent):
            # unmapping the guest's memory is nobody's wait. wasmtime_store_delete reports no error.
            spent, self._spent = self._spent, None
            if spent is not None:
                spent.close()

    def execute_quietly(self) -> None:
        """:meth:`execute` for the worker thread: a failure is kept for ``Handle.wait``, not raised."""
        try:
            self.execute()
        except HostError:
            pass
        finally:
            if self.on_settled is not None:
                self.on_settled()

    def _run(self) -> tuple[dict[str, Any], Session]:
        ctx = self.ctx
        config = _FUEL if self.limits.fuel is not None else _PLAIN
        session = self.session
        if ctx.stop_reason is not None:
            return self._stopped(), session
        # The Fs value is opened on the first fs import (most guests never touch it).
        store, fs_arg, session_root = self.store, self.fs_arg, session.fs_root_cid
        ctx.open_fs = lambda: open_fs(store, fs_arg, session_root)
        root = fs_arg if isinstance(fs_arg, str) else _root_of(fs_arg)
        if root is not None and root != session.fs_root_cid:
            session = dataclasses.replace(session, fs_root_cid=root)
        ready = loader.prepare(self.store, self.command["kuro/guest"], config, home=self.home)
        if isinstance(ready, LoadFailure):
            return self._load_failed(ready), session
        self.guest_kind = ready.kind.name
        entry = loader.resolve(
            ready, self.command["kuro/export"], self.command["kuro/args"], self.command, ctx.max_value_bytes
        )
        if isinstance(entry, LoadFailure):
            return self._load_failed(entry), session
        if ctx.should_stop() is not None:  # killed (or out of time) while loading: nothing runs
            return self._stopped(), session
        wstore = _engine.new_store(_engine.engine_for(config))
        fuel_left: int | None = None
        interrupt_key: int | None = None
        try:
            bounds = self.limits.store_bounds()  # max_memory_bytes split over every memory and table
            _engine.set_store_limits(
                wstore,
                -1 if bounds.per_memory_bytes is None else bounds.per_memory_bytes,
                bounds.per_table_elements,
                bounds.instances,
                bounds.tables,
                bounds.memories,
            )
            if self.limits.fuel is not None:
                wstore.set_fuel(self.limits.fuel)
            register_run(wstore, ctx)  # (sets ctx.context, the store's context address, used from here on)
            interrupt_key = _engine.install_interrupt(wstore, ctx, ctx.context)
            with _engine.live_run(ctx.deadline):
                instance, failed = ready.kind.instantiate(wstore, ready.pre)
                if failed is None:
                    outcome = ready.kind.call(wstore, instance, entry, ctx)
                else:
                    outcome = failed
            if self.limits.fuel is not None:
                try:
                    fuel_left = wstore.get_fuel()
                except wasmtime.WasmtimeError:
                    fuel_left = 0
        finally:
            if interrupt_key is not None:
                _engine.remove_interrupt(interrupt_key)
            unregister_run(wstore, ctx.context)
            self._spent = wstore  # closed by execute, after the receipt
        result = self._classify(outcome, instantiating=failed is not None)
        if fuel_left is not None and self.limits.fuel is not None:
            result["fuel-consumed"] = max(0, self.limits.fuel - fuel_left)
        return result, session

    def _stopped(self) -> dict[str, Any]:
        return decide(stop=self.ctx.stop_reason or "host-error", host_error=self.ctx.host_error)

    @staticmethod
    def _load_failed(failure: LoadFailure) -> dict[str, Any]:
        code = 127 if failure.outcome == "guest-not-found" else 126
        return {"exit-code": code, "outcome": failure.outcome, "error": failure.error}

    def _classify(self, called: _engine.CallOutcome, *, instantiating: bool) -> dict[str, Any]:
        """The result keys for what the call returned; a stop counts only if the guest did not finish first."""
        trap = called.trap
        finished = trap is None and called.error is None
        result = decide(
            stop=None if finished else self.ctx.stop_reason,
            host_error=self.ctx.host_error,
            trap_code=None if trap is None or trap.trap_code is None else trap.trap_code.name,
            trap_message=None if trap is None else trap.message,
            error=called.error,
            instantiating=instantiating,
            values=called.values,
        )
        if called.result is not None and result["outcome"] in ("ok", "exit"):
            result["result"] = called.result[0]
        return result

    def _finish(self, result: dict[str, Any], session: Session) -> dict[str, Any]:
        ctx = self.ctx
        finished_ms = int(time.time() * 1000)
        # ``result`` is this run's own fresh dict (from _run or execute). Its keys (the outcome's, a kind's own
        # facts) are namespaced here once; the run's other keys are written as ``kuro/…`` keys straight away,
        # in the order the bare ones had (no second pass over the whole receipt to namespace them).
        facts = ctx.kind_state.get("receipt")
        host = namespace({**facts, **result} if facts else result)  # a kind's own facts; the run's keys win
        host["kuro/isolation"] = ISOLATION
        host["kuro/limits"] = self.limits.receipt_value()
        host["kuro/engine"] = dict(_engine_data(self.limits.fuel is not None))
        host["kuro/reads"] = list(ctx.reads)
        host["kuro/denials"] = [dict(d) for d in ctx.denials]
        narrowed = narrowed_fs_grant(self.fs_arg)
        if narrowed is not None:
            host["kuro/fs-grant"] = narrowed
        if ctx.store_faults:
            host["kuro/store-faults"] = [dict(f) for f in ctx.store_faults]
        host["kuro/started-at"] = self.started_ms
        host["kuro/finished-at"] = finished_ms
        host["kuro/duration-ms"] = max(0, int((time.monotonic() - self.started) * 1000))
        if self.guest_kind is not None:
            host["kuro/guest-kind"] = self.guest_kind
        if ctx.seed is not None:
            host["kuro/deterministic"] = {"seed": ctx.seed}
        if ctx.wrote and ctx.fs is not None:
            after = _root_of(ctx.fs)
            if after is not None:
                host["kuro/fs-root-after"] = after
        if self.callback_error is not None and "kuro/error" not in host:
            host["kuro/error"] = self.callback_error
        if self.interruption is not None and "kuro/error" not in host:
            exc = self.interruption
            host["kuro/error"] = f"interrupted: a signal handler raised {type(exc).__name__}: {exc}"
        receipt = self._receipt(session, host)
        self.exited = True
        self.receipt = receipt
        self._mark_done()
        if self.on_exit is not None:
            try:
                self.on_exit(receipt)
            except Exception:
                pass
        return receipt

    def _receipt(self, session: Session, host: dict[str, Any]) -> dict[str, Any]:
        """The receipt of this run from its namespaced host keys ``host`` (taken over and completed in place).
        A worker process's Job reports only what its host cannot state itself (:mod:`kuro_wasm.host.worker.serve`).

        Raises ModelError: a bad exit code or outcome.
        """
        return self.writer.receipt_namespaced(session, self.command, host)


@functools.cache
def _engine_data(fuel: bool) -> dict[str, str]:
    config = _engine.EngineConfig(fuel=fuel)
    return {
        "name": "wasmtime",
        "version": _engine.wasmtime_version(),
        "config": _engine.engine_key(config),
        "identity": _engine.engine_identity(config),
    }


def _root_of(fs: Any) -> str | None:
    root = getattr(fs, "root", None)
    return root if isinstance(root, str) else None
