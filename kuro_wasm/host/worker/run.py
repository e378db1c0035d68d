"""One run on a worker process, seen from the host: its live stream, its controls, and the receipt the host signs off.

## The one decision
The receipt of a process run is assembled **by the host**, from the host's own facts wherever it has
them, and checked by the model like any other: the session and command are the host's values; the
output is the host's own stream, fed chunk by chunk as frames arrive (so ``on_chunk`` fires while the
guest writes, and the cap is applied again on this side); the limits, clock readings and
``kuro/isolation: "process"`` are the host's; ``kuro/worker`` names the worker and the hardening it
reported. From the worker's own receipt only the facts of the guest's run are taken (exit code,
outcome, trap, error, reads, denials, fuel, engine), through
:func:`kuro_wasm.model.receipt.namespace` and the model's value checks; a worker may not claim
``worker-died`` or ``abandoned``, and its new fs root is believed only after
:func:`kuro_wasm.host.worker.verify.check_root`. Anything the model refuses is a protocol violation:
the pool kills that worker and the run's receipt says so.

A run that ends without its worker's word is decided here, with the model's rules
(:func:`kuro_wasm.model.outcome.decide`): killed or out of time before a worker took it →
``cancelled``/``timeout``; a worker that ignored a stop for :data:`STOP_GRACE_S` and was killed by
the host → the stop's outcome; a worker that died on its own → ``worker-died``, exit code 128 + the
signal (``kuro/worker`` records it, or says the status is unknown), never retried.

## Effects
Calls the caller's ``on_chunk``/``on_exit`` on the pool's threads; the wall clock.

## Not done here
Transport and scheduling (:mod:`.pool`); the run itself (a :class:`kuro_wasm.host.job.Job` in the worker).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from kuro_fs.blocks import BlockStore
from kuro_fs.errors import KuroFsError
from kuro_fs.fs import Fs
from kuro_wasm.errors import HostError
from kuro_wasm.host.job import OnChunk, OnExit
from kuro_wasm.host.worker.protocol import decode_receipt
from kuro_wasm.host.worker.verify import Staged
from kuro_wasm.model import stream as _stream
from kuro_wasm.model.limits import Limits
from kuro_wasm.model.operation import narrowed_fs_grant
from kuro_wasm.model.outcome import decide
from kuro_wasm.model.receipt import exit_code_for, from_json, host_value, namespace
from kuro_wasm.model.sessions import Session

__all__ = ["HOST_STATED", "ISOLATION", "STOP_GRACE_S", "Latch", "RemoteRun", "died_result"]

ISOLATION: Final = "process"
#: How long a worker may take to honour a kill or its deadline before the host kills the worker itself.
STOP_GRACE_S: Final = 1.0
#: Keys the host states itself; the worker's values for them are dropped.
HOST_STATED: Final = frozenset(
    {
        "kuro/isolation",
        "kuro/limits",
        "kuro/fs-grant",
        "kuro/started-at",
        "kuro/finished-at",
        "kuro/duration-ms",
        "kuro/worker",
        "kuro/stdout",
        "kuro/stderr",
        "kuro/stdout-cid",
        "kuro/stderr-cid",
        "kuro/stdout-bytes",
        "kuro/stderr-bytes",
        "kuro/truncated?",
        "kuro/dropped-bytes",
        "kuro/capped-by",
    }
)
_NOT_FROM_A_WORKER: Final = frozenset({"worker-died", "abandoned"})
_COUNTERS: Final = frozenset({"seq", "dropped", "truncated", "capped_by"})
_CAPPED_BY: Final = (None, "bytes", "chunks")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def died_result(status: int | None, detail: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The result keys and ``kuro/worker`` facts of a run whose worker ended with wait ``status`` (None: unknown).

    The exit code is 128 + the signal that ended the worker, or the worker's own exit status if it
    exited by itself with a nonzero one. When neither is known (the zygote that would report it is
    gone) ``kuro/worker`` says ``"status": "unknown"`` and the code is the outcome's own (137, as a
    batch worker whose end nobody reported); a worker that exited with status 0 mid-run gets that
    code too, with its ``exit-status`` recorded.

    >>> died_result(9, "x")[0]["exit-code"], died_result(9, "x")[1]
    (137, {'signal': 'SIGKILL', 'signal-number': 9})
    >>> died_result(3 << 8, "x")[0]["exit-code"], died_result(0, "x")[1]
    (3, {'exit-status': 0})
    >>> died_result(None, "x")[1], died_result(None, "x")[0]["exit-code"]
    ({'status': 'unknown'}, 137)
    """
    facts: dict[str, Any] = {}
    code = exit_code_for("worker-died")
    if status is None:
        facts["status"] = "unknown"
        how = "how is unknown: no process reported its wait status"
    elif _signalled(status):
        number = _termsig(status)
        code = 128 + number
        facts["signal"] = _signal_name(number)
        facts["signal-number"] = number
        how = facts["signal"]
    else:
        facts["exit-status"] = (status >> 8) & 0xFF
        code = facts["exit-status"] or code
        how = f"exit status {facts['exit-status']}"
    result = {
        "exit-code": code,
        "outcome": "worker-died",
        "error": f"the worker process running the guest ended ({how}): {detail}; the run was not retried",
    }
    return result, facts


def _signalled(status: int) -> bool:
    return (status & 0x7F) != 0 and (status & 0x7F) != 0x7F


def _termsig(status: int) -> int:
    return status & 0x7F


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


#: Receipt payloads of ``done`` frames already decoded and checked → (receipt length, :func:`_taken` of the checked
#: values): a worker's receipt for a warm run of one command is the same bytes run after run. Bounded; payloads past
#: :data:`_STATED_MEMO_BYTES` are not kept. Read and written by the pool's reading threads (one dict operation each).
_STATED_MEMO: dict[bytes, tuple[int, dict[str, Any], tuple[Any, Any]]] = {}
_STATED_MEMO_SIZE: Final = 64
_STATED_MEMO_BYTES: Final = 4096


def _stated(receipt: object) -> dict[str, Any]:
    """The host keys of a worker's receipt, each checked against its kind (:func:`host_value`), None values dropped.

    Raises HostError or ModelError: not a map, a ``kuro/result`` that is not DAG-JSON text, a value of the wrong kind.
    """
    if type(receipt) is not dict:
        raise HostError("a done frame's receipt and stream counters must be maps")
    if "kuro/result" in receipt:  # DAG-JSON text (kuro_wasm.host.worker.serve): bytes survive the frame
        text = receipt["kuro/result"]
        try:
            receipt = {**receipt, "kuro/result": from_json(text if type(text) is str else "")}
        except ValueError as exc:
            raise HostError(f"the worker's kuro/result is not DAG-JSON text: {exc}") from None
    return {k: host_value(k, v) for k, v in namespace(receipt).items() if v is not None}


def _taken(stated: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[Any, Any]]:
    """What the host takes of a worker's checked receipt: its keys less those the host states itself, and the
    byte counts it says it kept of stdout and stderr (checked against the host's own stream)."""
    result = {k: v for k, v in stated.items() if k not in HOST_STATED}
    return result, (stated.get("kuro/stdout-bytes"), stated.get("kuro/stderr-bytes"))


_CONTAINERS: Final = frozenset({dict, list})


def _fresh(value: Any) -> Any:
    """A copy of checked plain data sharing no map or list with ``value`` (a receipt is its caller's to change)."""
    t = type(value)
    if t is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if t is list:
        return [_fresh(v) for v in value]
    return value


@functools.lru_cache(maxsize=64)
def _empty_stream(max_output_bytes: int, max_chunks: int) -> _stream.Stream:
    """A run's stream before its first chunk: a frozen value, the same for every run of one caller's limits (made
    once, not per run)."""
    return _stream.new(max_output_bytes, max_chunks=max_chunks)


@functools.lru_cache(maxsize=64)
def _empty_exited(max_output_bytes: int, max_chunks: int) -> _stream.Stream:
    """:func:`_empty_stream`, exited: how a run that wrote nothing ends (made once per limits, not per run)."""
    return _stream.mark_exited(_empty_stream(max_output_bytes, max_chunks))


#: How long a waiter blocked on a :class:`Latch` sleeps before it looks at the flag again (it is woken sooner).
_LATCH_RECHECK_S: Final = 0.25


class Latch:
    """A flag set once, and waited for: what ``threading.Event`` does for one run's end, at a fraction of the cost.

    Made per run (an Event builds a Condition and its lock, ~5 µs here) and waited on once per run: an Event's
    wait makes a new waiter lock and takes the Condition's lock on both sides, twice the CPU of a plain lock
    handed from the setting thread to the waiting one (measured: ~30 µs vs ~15 µs a round trip between two
    threads, loaded 2-core VM). The lock is held from the start and released once, by :meth:`set`; each waiter
    takes it and gives it back at once, so every waiter passes. A waiter interrupted between the two (a signal
    handler's exception) would leave it held: waiters therefore also look at the flag every
    :data:`_LATCH_RECHECK_S`, so none blocks for long on a lock nobody will release.
    """

    __slots__ = ("_flag", "_lock")

    def __init__(self) -> None:
        self._flag = False
        self._lock = threading.Lock()
        self._lock.acquire()

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        """Set the flag and wake every waiter. Called once (by the run's single ending); again it does nothing."""
        if self._flag:
            return
        self._flag = True
        try:
            self._lock.release()
        except RuntimeError:  # released already (set twice at once): the flag is what waiters look at
            pass

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the flag is set or ``timeout`` seconds pass (None: no bound); whether it is set."""
        if self._flag:
            return True
        end = None if timeout is None else time.monotonic() + timeout
        while not self._flag:
            step = _LATCH_RECHECK_S if end is None else min(_LATCH_RECHECK_S, end - time.monotonic())
            if step <= 0:
                break
            if self._lock.acquire(timeout=step):
                self._lock.release()
        return self._flag


class RemoteRun:
    """One run's host-side state: inputs, the live stream, controls, and (at the end) the receipt.

    The pool owns its scheduling fields (``conn``, ``sent``, ``withdrawing``); everything else changes
    under ``lock``. The receipt is set exactly once (:meth:`settle`).
    """

    def __init__(
        self,
        run_id: int,
        session: Session,
        command: Mapping[str, Any],
        store: BlockStore,
        fs: Any,
        *,
        limits: Limits,
        home: Any,
        stdin: bytes | None,
        stdin_closed: bool,
        on_chunk: OnChunk | None,
        on_exit: OnExit | None,
        seed: int | None = None,
    ) -> None:
        self.id = run_id
        self.seed = seed  # a deterministic run's seed, for the worker's Job
        self.session = session
        self.command = dict(command)
        self.store = store
        self.fs_arg = fs
        #: where the run's filesystem blocks are read from and its writes go: an Fs value's own store (as
        #: in-process), else the run's store; the guest's bytes always come from ``store``
        self.fs_store: BlockStore = fs.store if isinstance(fs, Fs) else store
        self.limits = limits
        self.home = home
        self.on_chunk = on_chunk
        self.on_exit = on_exit
        self.on_settled: Callable[[], None] | None = None
        self.started_ms = _now_ms()
        self.started = time.monotonic()
        self.deadline = self.started + limits.timeout_ms / 1000.0
        self.lock = threading.Lock()
        self.stream = _empty_stream(limits.max_output_bytes, limits.max_output_chunks)
        self.stdin = bytearray(stdin or b"")
        self.stdin_closed = stdin_closed
        #: stdin bytes given to the run in all, and how many of them its guest has read (the worker's ``took``)
        self.stdin_written = len(self.stdin)
        self.stdin_taken = 0
        self.stop_reason: str | None = None  # cancelled / timeout, as the host asked for it
        self.stop_at: float | None = None
        self.hard_stop: str | None = None  # set when the host killed the worker to enforce stop_reason
        self.callback_error: str | None = None
        #: a SystemExit or KeyboardInterrupt that on_chunk raised: the run is killed, and run() raises it after
        self.interruption: BaseException | None = None
        #: the host's own exception (not a handler's) that ended its run() caller's wait: the run is killed, and
        #: its receipt says so (never a signal's, never the guest's)
        self.host_failure: str | None = None
        self._staged: Staged | None = None  # made by the first block a worker hands back (:attr:`staged`)
        self.store_failure: KuroFsError | None = None  # the first block read the host's store failed
        #: the JSON object of its fixed fields (protocol.RUN_FIXED), encoded once when the pool takes it (``submit``)
        self.wire = b"{}"
        self.conn: Any = None
        self.sent = False
        self.withdrawing = False
        self.receipt: dict[str, Any] | None = None
        self.failure: HostError | None = None
        self.done = Latch()
        #: Leader/follower (:meth:`WorkerPool.lead`): its caller reads its worker's frames itself (set before it is
        #: submitted); ``waiter`` while that caller waits for its turn; ``wake`` tells the pool it has ended.
        self.leading = False
        self.waiter = False
        self.wake: Callable[[], None] | None = None
        #: A stop asked from a signal handler on the main thread — a Ctrl-C routed to this run (:meth:`interrupt`), or
        #: a program's handler that raised (:meth:`interrupted`) — and the eventfd that wakes its reading caller.
        self.stop_asked = False
        self.sigfd: int | None = None

    @property
    def staged(self) -> Staged:
        """The blocks the worker handed back, stored only with a believed root: made when first asked for (most runs
        hand back none, and a warm run then makes no set to drop)."""
        staged = self._staged
        if staged is None:
            with self.lock:
                staged = self._staged
                if staged is None:
                    staged = self._staged = Staged()
        return staged

    # ---- what the receipt says the guest saw

    def receipt_session(self) -> Session:
        """The session as the receipt states it: its fs root is the root the guest saw (as a Job decides it)."""
        root = self.fs_arg if isinstance(self.fs_arg, str) else getattr(self.fs_arg, "root", None)
        if isinstance(root, str) and root != self.session.fs_root_cid:
            return dataclasses.replace(self.session, fs_root_cid=root)
        return self.session

    # ---- output, as frames arrive (the pool's reader thread)

    def chunk(self, name: str, data: bytes) -> bool:
        """Append a kept chunk the worker sent; False if it does not fit this side's cap (a violation)."""
        with self.lock:
            if self.receipt is not None:
                return False
            self.stream, kept = _stream.append(self.stream, name, data)
            current = self.stream
        if kept is None:
            return False
        if self.on_chunk is not None:
            try:
                self.on_chunk(current, kept)
            except BaseException as exc:
                if self.callback_error is None:
                    self.callback_error = f"on_chunk raised {type(exc).__name__}: {exc}"
                if not isinstance(exc, Exception) and self.interruption is None:  # SystemExit, KeyboardInterrupt:
                    self.interruption = exc  # the program means to stop (the pool kills the run; run() raises it)
        return True

    # ---- endings

    def worker_result(self, receipt: object, counters: object) -> dict[str, Any]:
        """The result keys taken from a worker's receipt, after this side's stream caught up with its drops.

        Every field is the worker's word and checked here before anything uses it: ``receipt`` a map
        whose host keys have their kinds (:func:`kuro_wasm.model.receipt.host_value`), ``counters`` a
        map of exactly ``seq``/``dropped`` (counts), ``truncated`` (bool) and ``capped_by`` (None,
        ``"bytes"`` or ``"chunks"``). Raises HostError or ModelError (both KuroError): a field of the
        wrong form, or counters that disagree with what this side saw.
        """
        return self._result_of(*_taken(_stated(receipt)), counters)

    def frame_result(self, length: int, payload: bytes, counters: object) -> dict[str, Any]:
        """:meth:`worker_result` of the receipt a ``done`` frame carries (``length``, ``payload``:
        :func:`~kuro_wasm.host.worker.protocol.decode_receipt`'s arguments). A payload seen before is not decoded
        and checked again: its checked values are remembered (:data:`_STATED_MEMO`; a warm run's receipt is the
        same bytes every time) and handed out as copies.

        Raises ProtocolError: a payload that is not a receipt's JSON; HostError or ModelError as :meth:`worker_result`.
        """
        found = _STATED_MEMO.get(payload) if len(payload) <= _STATED_MEMO_BYTES else None
        if found is None or found[0] != length:
            result, kept = _taken(_stated(decode_receipt(length, payload)))
            if len(payload) <= _STATED_MEMO_BYTES:
                if len(_STATED_MEMO) >= _STATED_MEMO_SIZE:
                    _STATED_MEMO.clear()
                _STATED_MEMO[payload] = (length, result, kept)
        else:
            _, result, kept = found
        fresh = {k: _fresh(v) if type(v) in _CONTAINERS else v for k, v in result.items()}  # (a str is not copied)
        return self._result_of(fresh, kept, counters)

    def _result_of(self, result: dict[str, Any], kept: tuple[Any, Any], counters: object) -> dict[str, Any]:
        """:meth:`worker_result` once the receipt's values are checked (:func:`_taken` of :func:`_stated`'s: this
        run's own ``result``, and the byte counts the worker says it ``kept``)."""
        if type(counters) is not dict:
            raise HostError("a done frame's receipt and stream counters must be maps")
        if set(counters) != _COUNTERS:
            raise HostError(f"the stream counters must be exactly {sorted(_COUNTERS)}, got {sorted(counters)}")
        seq, dropped = counters["seq"], counters["dropped"]
        truncated, capped_by = counters["truncated"], counters["capped_by"]
        if type(seq) is not int or type(dropped) is not int or seq < 0 or dropped < 0:
            raise HostError(f"the stream counters seq and dropped must be counts, got {seq!r}, {dropped!r}")
        if type(truncated) is not bool or capped_by not in _CAPPED_BY:
            raise HostError(
                f"truncated must be a bool and capped_by one of {_CAPPED_BY}, got {truncated!r}, {capped_by!r}"
            )
        outcome = result.get("kuro/outcome")
        if outcome is not None and type(outcome) is not str:
            raise HostError(f"a worker's outcome must be a string, got {type(outcome).__name__}")
        if outcome in _NOT_FROM_A_WORKER:
            raise HostError(f"a worker may not report the outcome {outcome!r}")
        with self.lock:
            failure = self.store_failure
            s = self.stream
            if kept != (s.stdout_bytes, s.stderr_bytes):
                raise HostError(f"the worker kept {kept} bytes, this side received {(s.stdout_bytes, s.stderr_bytes)}")
            if truncated and seq > s.seq and capped_by is not None and dropped >= s.dropped_bytes:
                self.stream = _stream.drop(s, seq - s.seq, dropped - s.dropped_bytes, capped_by)
            elif truncated or seq != s.seq or dropped != 0:
                raise HostError(f"the worker's stream counters {counters} do not match this side's")
        if failure is not None and result.get("kuro/outcome") in ("guest-not-found", "load-error"):
            # the worker saw a block as absent because this side's store failed on it: say so, not "not found"
            from kuro_wasm.host.loader import unreadable

            guest = self.command.get("kuro/guest")
            result.update({"kuro/outcome": "load-error", "kuro/exit-code": 126})
            result["kuro/error"] = unreadable(guest if isinstance(guest, str) else "?", failure)
        return result

    def store_failed(self, exc: KuroFsError) -> None:
        """The host's store failed on a block this run asked for (the worker was told how: ``reply.fault``)."""
        with self.lock:
            if self.store_failure is None:
                self.store_failure = exc

    def settle(self, result: Mapping[str, Any], worker: Mapping[str, Any] | None, *, publish: bool = True) -> bool:
        """Build and publish the receipt from ``result`` (host keys); idempotent: the first ending wins.

        With ``publish=False`` the receipt is built and kept but waiters learn of it only at :meth:`publish`
        (the pool hands the worker its next run first); returns whether this call built it.

        Raises ModelError: the model refuses the result (the caller treats that as the worker's fault
        when the result came from a worker).
        """
        with self.lock:
            if self.receipt is not None or self.failure is not None:
                return False
            full = {
                **result,
                "kuro/isolation": ISOLATION,
                "kuro/limits": self.limits.receipt_value(),
                "kuro/started-at": self.started_ms,
                "kuro/finished-at": _now_ms(),
                "kuro/duration-ms": max(0, int((time.monotonic() - self.started) * 1000)),
            }
            narrowed = narrowed_fs_grant(self.fs_arg)
            if narrowed is not None:
                full["kuro/fs-grant"] = narrowed
            if worker is not None:
                full["kuro/worker"] = dict(worker)
            if self.callback_error is not None and not full.get("kuro/error") and not full.get("error"):
                full["kuro/error"] = self.callback_error
            elif self.interruption is not None and not full.get("kuro/error") and not full.get("error"):
                exc = self.interruption  # (as a Job's receipt says it: kuro_wasm.host.job)
                full["kuro/error"] = f"interrupted: a signal handler raised {type(exc).__name__}: {exc}"
            elif self.host_failure is not None and not full.get("kuro/error") and not full.get("error"):
                full["kuro/error"] = self.host_failure
            # Every value in ``full`` is the host's own or passed :meth:`worker_result`'s checks (host_value per
            # key), and the session and command passed the model's gate before the run was queued: the trusted
            # assembly applies the same outcome, key-set and stream rules without checking each value twice.
            receipt = _stream.finish_trusted(self.stream, self.receipt_session(), self.command, full)
            self.stream = self._exited()
            self.receipt = receipt
        if publish:
            self._published()
        return True

    def _exited(self) -> _stream.Stream:
        """The stream, exited (caller holds ``lock``): a run that wrote nothing ends in one value per limits, made
        once (as it starts in one: :func:`_empty_stream`)."""
        limits = self.limits
        if self.stream is _empty_stream(limits.max_output_bytes, limits.max_output_chunks):
            return _empty_exited(limits.max_output_bytes, limits.max_output_chunks)
        return _stream.mark_exited(self.stream)

    def publish(self) -> None:
        """Tell waiters of a receipt :meth:`settle` built with ``publish=False``."""
        self._published()

    def stopped(self, reason: str, detail: str | None, worker: Mapping[str, Any] | None) -> None:
        """End with the host's own stop (``cancelled``/``timeout``), decided by the model's rules."""
        result: dict[str, Any] = decide(stop=reason)
        if detail is not None:
            result["error"] = detail
        self.settle(result, worker)

    def fail(self, error: HostError) -> None:
        """No receipt can be had (the worker's Job could not build one): waiters get ``error``."""
        with self.lock:
            if self.receipt is not None or self.failure is not None:
                return
            self.failure = error
            self.stream = self._exited()
        self._published()

    def interrupted(self, exc: BaseException) -> None:
        """A program's signal handler raised ``exc`` while its run() caller read its worker's frames on the main
        thread (guarded: :func:`kuro_wasm.host.interrupts.hold`): keep the first, and stop the run as a Ctrl-C
        does (no lock is taken here); run() raises it once the ``cancelled`` receipt is made."""
        if self.interruption is None:
            self.interruption = exc
        self.interrupt()

    def interrupt(self) -> None:
        """Ctrl-C while its run() caller waits (a signal handler on the main thread: no lock is taken here); the
        caller kills the run and returns its ``cancelled`` receipt."""
        self.stop_asked = True
        if self.sigfd is not None:
            os.eventfd_write(self.sigfd, 1)
        if self.waiter and self.wake is not None:  # it waits for its turn on the pool's condition: wake it now.
            # (From a new thread: the notify takes the pool's lock, which this thread may hold as the signal lands.)
            threading.Thread(target=self.wake, name="kuro-interrupt", daemon=True).start()

    def _published(self) -> None:
        staged = self._staged
        if staged is not None:
            staged.close()  # what no believed root took is dropped
        self.done.set()
        if self.waiter and self.wake is not None:
            self.wake()
        if self.on_exit is not None and self.receipt is not None:
            try:
                self.on_exit(self.receipt)
            except Exception:
                pass
        if self.on_settled is not None:
            self.on_settled()
