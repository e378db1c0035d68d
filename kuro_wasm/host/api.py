"""The wasmtime host: run a guest invocation spec by CID and finish with a receipt.

## The one decision
The public entry points decide only *whether* a command may run, and they
decide it before anything is loaded: :func:`kuro_wasm.model.sessions.denial` first,
then the limits; a denial is returned as the value (from :func:`run`,
:func:`start` and :func:`run_async` alike) and nothing is fetched, compiled or
run. Everything after that is one :class:`kuro_wasm.host.job.Job`, which always
ends in exactly one receipt (why it ended: :mod:`kuro_wasm.model.outcome`), with
``kuro/isolation: "wasmtime"`` meaning exactly this table:

=================================  ==========================================================
guarantee                          mechanism
=================================  ==========================================================
guest bytes are the CID's bytes    every block re-hashed before compiling (:mod:`.loader`); cache hits by tag
only its kind's effects            imports checked at load (kuro ABI v1, or WASI preview 1 over a virtual world)
capability per import call         checked at call time; refusals in ``kuro/denials``
memory confined                    every (ptr, len) bounds-checked; wasm's own sandbox
prompt stop (loop)                 epoch tick at the deadline or the stop (:mod:`.engine`)
prompt stop (blocked in ``read``)  condition variable woken by stdin/kill/deadline
memory limit                       ``Store.set_limits``: ``memory.grow`` returns -1 (all memories + tables)
stack overflow                     wasmtime's guard: a ``stack-overflow`` trap
one run cannot disturb another     one ``Store`` per run; run state in its own context
=================================  ==========================================================

``kuro/isolation: "wasmtime"`` means exactly the table above. It does **not**
mean: protection from wasmtime or Cranelift bugs; constant-time execution or
freedom from side channels (timing, cache); a bound on host CPU other than
the deadline/fuel; a bound on host memory beyond the guest's linear memory;
confidentiality of anything the grant lets the guest read; or process/OS
isolation (the guest runs in the host's process).

``isolation="process"`` (or ``$KURO_ISOLATION``, :mod:`kuro_wasm.host.isolation`) runs the same
Job in a worker process instead (:mod:`kuro_wasm.host.worker`), behind the same :class:`Handle`
interface (:class:`ProcessHandle`); its receipts say ``kuro/isolation: "process"``, whose meaning
table is in ``docs/abi.md``.

## Effects
Threads: one worker per :func:`start`/:func:`run_async`; :func:`run` executes
on the caller's thread (no thread hop on the warm path). A process run uses no
thread of its own: the worker pool's threads carry it, and a :func:`run` caller reads its own
worker's frames while it waits (:meth:`~kuro_wasm.host.worker.pool.WorkerPool.lead`).

## Not done here
Unread stdin is not counted anywhere.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # CPython's C module behind signal (no stub)
import functools
import os
import pathlib
import signal
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from kuro_fs.blocks import BlockStore
from kuro_wasm.errors import HostError, ModelError, StillRunning
from kuro_wasm.host import interrupts
from kuro_wasm.host.fsgate import open_fs
from kuro_wasm.host.isolation import resolve_isolation, worker_pool
from kuro_wasm.host.job import ISOLATION, Job, OnChunk, OnExit
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model import checkpoint as _checkpoint
from kuro_wasm.model import stream as _stream
from kuro_wasm.model.limits import (
    DEFAULT_MAX_INSTANCES,
    DEFAULT_MAX_MEMORIES,
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_MAX_OUTPUT_CHUNKS,
    DEFAULT_MAX_TABLE_ELEMENTS,
    DEFAULT_MAX_TABLES,
    DEFAULT_MAX_VALUE_BYTES,
    DEFAULT_TIMEOUT_MS,
    Limits,
)
from kuro_wasm.model.operation import run_seed
from kuro_wasm.model.sessions import Session, denial

if TYPE_CHECKING:  # the worker-process backend loads on the first isolation="process" run (~15 ms of imports)
    from kuro_wasm.host.worker.pool import WorkerPool
    from kuro_wasm.host.worker.run import RemoteRun

__all__ = [
    "ISOLATION",
    "Handle",
    "ProcessHandle",
    "add_guest",
    "run",
    "run_async",
    "start",
    "stop_and_wait",
    "wait_event",
]


#: The concrete pathlib classes, whose ``__fspath__`` is ``str(self)``: a ``home`` of one is its str.
_PATH_TYPES: Final = frozenset({pathlib.PosixPath, pathlib.WindowsPath, pathlib.PurePosixPath, pathlib.PureWindowsPath})


def _check_options(home: object, on_chunk: object, on_exit: object) -> object:
    """``home`` as the run uses it (a str path, None or False), after checking every option.

    Refused before anything runs: a bad home would otherwise surface mid-run as a "host error" trap,
    and ``""`` would be the current directory (a cache written wherever the program happens to run).
    """
    if home is not None and home is not False:
        if type(home) in _PATH_TYPES:  # (a pathlib path: its str, without the PathLike ABC check)
            home = str(home)
        if type(home) is not str:
            if not isinstance(home, os.PathLike):
                raise ModelError(
                    f"home must be a path, None or False, got {type(home).__name__}", reason="invalid-run-option"
                )
            try:
                home = os.fsdecode(home)
            except TypeError as exc:  # a __fspath__ answering neither str nor bytes
                raise ModelError(f"home must be a path: {exc}", reason="invalid-run-option") from None
        assert isinstance(home, str)
        if not home:
            raise ModelError("home must not be empty", reason="invalid-run-option")
        if "\0" in home:
            raise ModelError("home must not contain a NUL character", reason="invalid-run-option")
        if home.startswith("~") and os.path.expanduser(home).startswith("~"):  # ~user of no user (or no $HOME)
            raise ModelError(f"home {home!r} names the home of no user", reason="invalid-run-option")
    if on_chunk is not None and not callable(on_chunk):
        raise ModelError(f"on_chunk must be callable, got {type(on_chunk).__name__}", reason="invalid-run-option")
    if on_exit is not None and not callable(on_exit):
        raise ModelError(f"on_exit must be callable, got {type(on_exit).__name__}", reason="invalid-run-option")
    return home


class _Waitable(Protocol):
    """A run's end as its handle waits for it: a ``threading.Event``, or a process run's
    :class:`~kuro_wasm.host.worker.run.Latch`."""

    def wait(self, timeout: float | None = None) -> bool: ...


def wait_event(event: _Waitable, timeout: float | None) -> bool:
    """``event.wait(timeout)``, except that an interrupt inside it is raised as itself.

    A ``KeyboardInterrupt`` (or a signal handler's exception) that lands in ``Condition.wait``'s
    ``finally`` before it re-takes its lock surfaces as ``RuntimeError: release unlocked lock``
    (the ``with`` then releases a lock it does not hold); that error's context is the interrupt.
    Nothing is lost by re-raising the interrupt: the condition's lock is not held, and the stale
    waiter it leaves is released by the event's next ``set``.
    """
    try:
        return event.wait(timeout)
    except RuntimeError as exc:
        if isinstance(exc.__context__, KeyboardInterrupt):
            raise exc.__context__ from None
        raise


def _seconds(timeout: object) -> float | None:
    """``timeout`` for ``Event.wait``: None (no bound) for None and for more than the platform can count.

    Raises ModelError (``invalid-run-option``): not a number of seconds (a bool, nan, a string …).
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != timeout:  # nan
        raise ModelError(f"timeout must be None or seconds, got {timeout!r}", reason="invalid-run-option")
    return None if timeout > threading.TIMEOUT_MAX else float(timeout)


def _waiting_on_itself() -> ModelError:
    return ModelError(
        "wait() from the run's own on_chunk: its receipt is made only after the callback returns "
        "(kill() or close() stops it from there)",
        reason="wait-in-own-callback",
    )


#: The remote run whose ``on_chunk`` this thread is calling (a pool reader thread's), if any.
_CALLING_BACK = threading.local()


def _marking_callback(on_chunk: OnChunk, remote: list[Any]) -> OnChunk:
    """``on_chunk`` that marks this thread as calling back for ``remote[0]`` while it runs (a process run's)."""

    def call(stream: _stream.Stream, chunk: _stream.Chunk) -> None:
        outer = getattr(_CALLING_BACK, "run", None)
        _CALLING_BACK.run = remote[0] if remote else None
        try:
            on_chunk(stream, chunk)
        finally:
            _CALLING_BACK.run = outer

    return call


class _Stoppable(Protocol):
    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> Mapping[str, Any]: ...


def stop_and_wait(handle: _Stoppable) -> Mapping[str, Any]:
    """Kill ``handle``'s guest and wait for its (``cancelled``) receipt, whatever interrupts arrive meanwhile.

    A second Ctrl-C (or SIGTERM after it) does not stop the wait: the kill is already asked, and a
    killed run ends within its stop grace — at the epoch tick the kill makes in this process, or
    :data:`~kuro_wasm.host.worker.run.STOP_GRACE_S` after the kill for a worker process, which is
    then SIGKILLed. Giving up the wait instead would lose the receipt of a run that is ending anyway.
    """
    while True:
        try:
            handle.kill()  # again after an interrupt: harmless, and certain to have been asked
            return handle.wait()
        except KeyboardInterrupt:
            continue


class Handle:
    """A running guest: feed stdin, stop it, watch its stream, wait for its receipt.

    ``close()`` kills a run that is still going and waits for its receipt; it is
    idempotent, and ``with start(...) as h:`` closes on exit. A handle dropped
    without ``close()`` leaves its guest running until it ends or its deadline
    passes (the worker thread is a daemon; nothing else stops it).
    """

    def __init__(self, job: Job) -> None:
        self._job = job
        self._thread = threading.Thread(target=job.execute_quietly, name="kuro-guest", daemon=True)

    def _start(self) -> None:
        try:
            self._thread.start()
        except KeyboardInterrupt:
            # Thread.start waits for the thread to begin, and by then the guest may be running (and
            # writing): an interrupt here is that run's cancel, never a guest left running unhandled.
            self.kill()
            if self._thread.ident is None:  # interrupted before the thread existed: run the stopped job
                self._thread = threading.Thread(target=self._job.execute_quietly, name="kuro-guest", daemon=True)
                self._thread.start()

    @property
    def stream(self) -> _stream.Stream:
        """The live stream value (``running`` until the receipt exists, then ``exited``)."""
        return self._job.stream

    @property
    def done(self) -> bool:
        """True once the receipt exists."""
        return self._job.done.is_set()

    @property
    def receipt(self) -> dict[str, Any] | None:
        """The receipt, or None while the guest runs."""
        return self._job.receipt

    def write(self, data: bytes) -> None:
        """Give the guest stdin bytes (ignored after :meth:`close_stdin`).

        Like a pipe's writer, this waits while :data:`~kuro_wasm.host.context.STDIN_BUFFER_BYTES`
        (4 MiB) are buffered unread, until the guest reads, input is closed or the run ends
        (then what did not fit is dropped): a guest that never reads holds the writer back
        instead of growing the host's memory. Stdin given to :func:`start` is held whole, as given
        (and counts toward the 4 MiB). Called from ``on_chunk`` it never waits and is kept whole:
        in-process that is the guest's own thread, under ``isolation="process"`` a reader thread
        of the pool or a :func:`run` caller reading its worker's frames, whose writes never wait for any run.

        Raises ModelError (``invalid-stdin``): ``data`` is not bytes, as :func:`start`'s ``stdin``.
        """
        assert self._job.ctx.stdin is not None
        self._job.ctx.stdin.write(_stdin_bytes(data))

    def close_stdin(self) -> None:
        """End of input: the guest's next ``read`` returns what is left, then 0."""
        assert self._job.ctx.stdin is not None
        self._job.ctx.stdin.close()

    def kill(self) -> None:
        """Stop the guest (receipt outcome ``cancelled``, 130) unless it has already ended."""
        self._job.ctx.stop("cancelled")

    def checkpoint(self, max_chunk_bytes: int | None = None) -> dict[str, Any]:
        """A checkpoint of this run as it is now (:func:`kuro_wasm.model.checkpoint.to_data`), or a denial.

        The run's session must grant ``agent/checkpoint``; without it the value
        is the ``missing-capabilities`` denial and nothing is saved. Restored,
        a checkpoint of a running guest is ``orphaned`` (a guest never survives its host).

        Raises ModelError: ``max_chunk_bytes`` is not an int >= 0.
        """
        current = self._job.stream  # a value: the writer hands out a consistent snapshot
        return _checkpoint.to_data(
            current, self._job.session, self._job.command, max_chunk_bytes=max_chunk_bytes, isolation=ISOLATION
        )

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Block until the receipt exists and return it.

        Raises StillRunning (a TimeoutError): if ``timeout`` seconds pass first (the guest keeps running).
        Raises HostError: if the run ended but no receipt could be built (a host bug).
        Raises ModelError (``invalid-run-option``): ``timeout`` is not None nor a number of seconds;
        (``wait-in-own-callback``): called from this run's own ``on_chunk`` before the receipt exists
        (the thread that would make it is the one waiting).
        """
        seconds = _seconds(timeout)
        if not self._job.done.is_set() and self._in_own_callback():
            raise _waiting_on_itself()
        if not wait_event(self._job.done, seconds):
            raise StillRunning(f"the guest is still running after {timeout} s")
        if self._job.failure is not None:
            raise self._job.failure
        assert self._job.receipt is not None
        return self._job.receipt

    def close(self) -> None:
        """Kill the guest if it still runs and wait for its receipt. Calling it twice is harmless.

        From this run's own ``on_chunk`` it only kills: the receipt comes once the callback returns.
        """
        if not self._job.done.is_set():
            self.kill()
            if self._in_own_callback():
                return
        if self._thread.is_alive() or self._thread.ident is not None:
            wait_event(self._job.done, None)

    def _in_own_callback(self) -> bool:
        """Whether this thread carries the run (its ``on_chunk`` is calling): waiting here would never end."""
        return threading.get_ident() == self._thread.ident

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stdin_bytes(data: object) -> bytes:
    """``data`` as stdin bytes. Raises ModelError (``invalid-stdin``): it is not bytes (nor bytearray/memoryview)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ModelError(f"stdin must be bytes, got {type(data).__name__}", reason="invalid-stdin")
    return bytes(data)


def _job(
    session: Session,
    command: Any,
    store: BlockStore,
    fs: Any,
    stdin: bytes | None,
    on_chunk: OnChunk | None,
    on_exit: OnExit | None,
    timeout_ms: int,
    max_output_bytes: int,
    max_memory_bytes: int | None,
    fuel: int | None,
    bounds: Mapping[str, int],
    home: Any,
    *,
    stdin_closed: bool,
    isolation: object = None,
    seed: int | None = None,
) -> Job | RemoteRun | dict[str, Any]:
    refused = denial(session, command)
    if refused is not None:
        return refused
    limits = Limits.of(timeout_ms, max_output_bytes, max_memory_bytes, fuel, bounds)
    if stdin is not None:
        _stdin_bytes(stdin)
    home = _check_options(home, on_chunk, on_exit)
    if not hasattr(store, "get") or not hasattr(store, "has") or not hasattr(store, "put"):
        raise HostError(f"store must be a BlockStore, got {type(store).__name__}")
    if fs is not None:
        problem = open_fs(store, fs, session.fs_root_cid)
        if isinstance(problem, str):
            raise ModelError(problem, reason="invalid-fs-root")
    if resolve_isolation(isolation) == "process":
        pool = _pool_for(isolation)
        made: list[Any] = []  # the remote run, once made: its on_chunk marks the pool thread calling it
        remote = pool.prepare(
            session,
            command,
            store,
            fs,
            limits=limits,
            home=home,
            stdin=None if stdin is None else bytes(stdin),
            stdin_closed=stdin_closed,
            on_chunk=None if on_chunk is None else _marking_callback(on_chunk, made),
            on_exit=on_exit,
            seed=seed,
        )
        made.append(remote)
        return remote
    return Job(
        session,
        command,
        store,
        fs,
        on_chunk=on_chunk,
        on_exit=on_exit,
        limits=limits,
        home=home,
        stdin_closed=stdin_closed,
        stdin=None if stdin is None else bytes(stdin),
        seed=seed,
    )


def start(
    session: Session,
    command: Mapping[str, Any],
    *,
    store: BlockStore,
    fs: Any = None,
    stdin: bytes | None = None,
    on_chunk: OnChunk | None = None,
    on_exit: OnExit | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    max_memory_bytes: int | None = None,
    fuel: int | None = None,
    home: Any = None,
    isolation: Any = None,
    max_table_elements: int = DEFAULT_MAX_TABLE_ELEMENTS,
    max_instances: int = DEFAULT_MAX_INSTANCES,
    max_tables: int = DEFAULT_MAX_TABLES,
    max_memories: int = DEFAULT_MAX_MEMORIES,
    max_output_chunks: int = DEFAULT_MAX_OUTPUT_CHUNKS,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    deterministic: bool = False,
    seed: int = 0,
) -> Handle | dict[str, Any]:
    """Start ``command`` (a :func:`kuro_wasm.model.sessions.guest` spec) on a worker thread.

    Returns a :class:`Handle`, or the denial value (and then nothing was loaded
    or run). A ``KeyboardInterrupt`` that lands while the worker thread starts
    (the guest may already be running) cancels the run and the handle is still
    returned: its receipt says ``cancelled``. ``fs`` is a ``kuro_fs.Fs`` or a root CID (default: the session's
    root). ``stdin`` bytes are available at once and input stays open until
    :meth:`Handle.close_stdin`. ``on_chunk(stream, chunk)`` fires on the
    worker thread as each kept chunk is written (an ``Exception`` it raises is kept in ``kuro/error`` and the
    run goes on; a ``SystemExit`` or ``KeyboardInterrupt`` cancels the run, its ``kuro/error`` naming it, and
    :func:`run` raises it once the receipt is made); ``on_exit(receipt)`` once at
    the end. ``home`` selects the compiled-module cache directory
    (:func:`kuro_fs.home.resolve_home`; ``False`` keeps it in memory only).
    ``isolation`` picks the backend: ``"wasmtime"`` (in this process), ``"process"`` (a worker
    process of the default pool) or a :class:`~kuro_wasm.host.worker.pool.WorkerPool`; default
    ``$KURO_ISOLATION``, else ``"wasmtime"``.

    Raises ModelError: a limit that is not an int from its minimum to 2**64-1 (``invalid-limit``),
    stdin that is not bytes, a ``home`` that is not a non-empty path (or None/False) or ``on_chunk``/``on_exit``
    not callable (``invalid-run-option``). Raises HostError: ``store`` is not a block store.

    ``deterministic=True`` fixes what a guest could read from outside its inputs: its clocks are
    virtual (fixed starts, +1 µs per reading, sleeps advance them without waiting) and its random
    bytes come from ``seed`` (an int in 0..2**64-1); the receipt says ``kuro/deterministic``
    ``{"seed": seed}``. Then the same inputs give the same receipt, but for the host's own
    ``started-at``/``finished-at``/``duration-ms``. Raises ModelError (``invalid-run-option``): a
    ``deterministic`` that is not a bool, or a bad ``seed``, or a ``seed`` without ``deterministic=True``.
    """
    job = _job(
        session,
        command,
        store,
        fs,
        stdin,
        on_chunk,
        on_exit,
        timeout_ms,
        max_output_bytes,
        max_memory_bytes,
        fuel,
        {
            "max_table_elements": max_table_elements,
            "max_instances": max_instances,
            "max_tables": max_tables,
            "max_memories": max_memories,
            "max_output_chunks": max_output_chunks,
            "max_value_bytes": max_value_bytes,
        },
        home,
        stdin_closed=False,
        seed=run_seed(deterministic, seed),
        isolation=isolation,
    )
    if isinstance(job, dict):
        return job
    handle = Handle(job) if isinstance(job, Job) else ProcessHandle(job, _pool_for(isolation))
    handle._start()
    return handle


def run(
    session: Session,
    command: Mapping[str, Any],
    *,
    store: BlockStore,
    fs: Any = None,
    stdin: bytes | None = None,
    on_chunk: OnChunk | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    max_memory_bytes: int | None = None,
    fuel: int | None = None,
    home: Any = None,
    isolation: Any = None,
    max_table_elements: int = DEFAULT_MAX_TABLE_ELEMENTS,
    max_instances: int = DEFAULT_MAX_INSTANCES,
    max_tables: int = DEFAULT_MAX_TABLES,
    max_memories: int = DEFAULT_MAX_MEMORIES,
    max_output_chunks: int = DEFAULT_MAX_OUTPUT_CHUNKS,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    deterministic: bool = False,
    seed: int = 0,
    on_start: Callable[[Callable[[], None]], None] | None = None,
) -> dict[str, Any]:
    """Run ``command`` to the end on the calling thread; return its receipt, or the denial value.

    ``stdin`` is all the input there is (end of input follows it). On the main
    thread, Ctrl-C cancels the guest and this returns its ``cancelled`` receipt
    (130). ``on_start(kill)`` is called on the calling thread before the guest loads
    (not for a denial); ``kill()`` stops this run from any thread, as
    :meth:`Handle.kill` does (a batch worker cancels the run it is executing so).
    A signal handler of the program's that raises during the run on the main thread, or an ``on_chunk``
    raising ``SystemExit``/``KeyboardInterrupt``, cancels the guest; once its receipt is made, this raises
    that exception (with a note giving the receipt's outcome).
    Limits and errors as :func:`start`; an ``on_start`` that is not callable is a ModelError
    (``invalid-run-option``) on every backend, raised before anything is submitted.
    """
    if on_start is not None and not callable(on_start):  # refused the same way on every backend, before any work
        raise ModelError(f"on_start must be callable, got {type(on_start).__name__}", reason="invalid-run-option")
    job = _job(
        session,
        command,
        store,
        fs,
        stdin,
        on_chunk,
        None,
        timeout_ms,
        max_output_bytes,
        max_memory_bytes,
        fuel,
        {
            "max_table_elements": max_table_elements,
            "max_instances": max_instances,
            "max_tables": max_tables,
            "max_memories": max_memories,
            "max_output_chunks": max_output_chunks,
            "max_value_bytes": max_value_bytes,
        },
        home,
        stdin_closed=True,
        seed=run_seed(deterministic, seed),
        isolation=isolation,
    )
    if isinstance(job, dict):
        return job
    if not isinstance(job, Job):
        remote = ProcessHandle(job, _pool_for(isolation))
        if on_start is not None:
            on_start(remote.kill)
        return remote.run_to_end()
    if on_start is not None:
        on_start(functools.partial(job.ctx.stop, "cancelled"))
    if threading.current_thread() is not threading.main_thread():
        receipt = job.execute()
    else:
        claimed = _claim_main_ctrl_c(job)
        held: interrupts.Held = ()
        try:
            held = interrupts.hold(job)
            receipt = job.execute()
        except HostError as failure:  # no receipt: a handler's exception that stopped the run is still raised
            if job.interruption is None:
                raise
            raise interrupts.raised_after(job.interruption, None, failure=failure)  # noqa: B904 (failure: its context)
        finally:
            interrupts.release(job, held)
            if claimed:
                _MAIN_RUNS.pop()
    if job.interruption is not None:  # the program stopped the run by raising: the receipt is made, now raise it
        raise interrupts.raised_after(job.interruption, receipt)
    return receipt


# ---- Ctrl-C during run() on the main thread
#
# Python raises KeyboardInterrupt at the next bytecode, which during a run is
# inside a wasmtime callback, where ctypes swallows it ("Exception ignored on
# calling ctypes callback"): the guest would run on to its deadline. So a
# run() on the main thread that finds Python's default SIGINT handler installs
# _on_sigint in its place (once: it then stays): while a main-thread run() is live, SIGINT records
# ``cancelled`` in that run's context (the epoch tick the signal makes or a blocked
# ``read`` acts on it); otherwise it raises KeyboardInterrupt exactly as the default
# handler does. A program that installs its own SIGINT handler keeps it — for the
# runs made while it is installed. The handler is looked at on every main-thread
# run, not once per process: a handler that was only in place for a while (a
# batch's, a CLI command's) when the first run came must not turn Ctrl-C off for
# the rest of the process (found by a suite where such a run came first).
# Main-thread runs nest (a run made from another's on_chunk, or from a signal handler,
# while that one is in a host call): Ctrl-C cancels every one of them, innermost first —
# the innermost is the guest running, and the outer ones could not stop before it returns.

_MAIN_RUNS: list[Job | RemoteRun] = []


def _on_sigint(signum: int, frame: Any) -> None:
    if not _MAIN_RUNS:
        signal.default_int_handler(signum, frame)
    for job in reversed(_MAIN_RUNS):
        if isinstance(job, Job):
            job.ctx.stop("cancelled")
        else:
            job.interrupt()  # a process run whose caller reads its frames: it kills the run and waits for the receipt


interrupts.own(_on_sigint)  # it raises only when no main-thread run is live


def _claim_ctrl_c(job: Job | RemoteRun) -> bool:
    """Route Ctrl-C to ``job`` while it runs; False (nothing changed) off the main thread or under a custom handler.

    The handler is read with ``_signal.getsignal`` (~0.1 µs; ``signal.getsignal``'s enum conversion
    costs microseconds on this per-run path).
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    return _claim_main_ctrl_c(job)


def _claim_main_ctrl_c(job: Job | RemoteRun) -> bool:
    """:func:`_claim_ctrl_c` for a caller known to be on the main thread."""
    handler = _signal.getsignal(signal.SIGINT)
    if handler is not _on_sigint:
        if handler is not signal.default_int_handler:
            return False  # the program's own handler: it keeps Ctrl-C
        signal.signal(signal.SIGINT, _on_sigint)
    _MAIN_RUNS.append(job)
    return True


async def run_async(
    session: Session,
    command: Mapping[str, Any],
    *,
    store: BlockStore,
    fs: Any = None,
    stdin: bytes | None = None,
    on_chunk: OnChunk | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    max_memory_bytes: int | None = None,
    fuel: int | None = None,
    home: Any = None,
    isolation: Any = None,
    max_table_elements: int = DEFAULT_MAX_TABLE_ELEMENTS,
    max_instances: int = DEFAULT_MAX_INSTANCES,
    max_tables: int = DEFAULT_MAX_TABLES,
    max_memories: int = DEFAULT_MAX_MEMORIES,
    max_output_chunks: int = DEFAULT_MAX_OUTPUT_CHUNKS,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    deterministic: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Await the receipt of ``command`` (or get the denial at once); the guest runs on a worker thread.

    Cancelling the awaiting task kills the guest. Limits and errors as :func:`start`.
    """
    import asyncio  # only here: the asyncio package costs more to import than a warm run takes

    loop = asyncio.get_running_loop()
    future: asyncio.Future[dict[str, Any]] = loop.create_future()
    job = _job(
        session,
        command,
        store,
        fs,
        stdin,
        on_chunk,
        None,
        timeout_ms,
        max_output_bytes,
        max_memory_bytes,
        fuel,
        {
            "max_table_elements": max_table_elements,
            "max_instances": max_instances,
            "max_tables": max_tables,
            "max_memories": max_memories,
            "max_output_chunks": max_output_chunks,
            "max_value_bytes": max_value_bytes,
        },
        home,
        stdin_closed=True,
        seed=run_seed(deterministic, seed),
        isolation=isolation,
    )
    if isinstance(job, dict):
        return job
    handle = Handle(job) if isinstance(job, Job) else ProcessHandle(job, _pool_for(isolation))

    def settle() -> None:
        if future.done():
            return
        if job.failure is not None:
            future.set_exception(job.failure)
        elif job.receipt is not None:
            future.set_result(job.receipt)

    def on_settled() -> None:
        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop is gone; nobody is awaiting
            pass

    job.on_settled = on_settled
    handle._start()
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        handle.kill()
        raise


# ---- isolation="process": the same Handle, its guest in a worker process (kuro_wasm.host.worker)


def _pool_for(isolation: Any) -> WorkerPool:
    """The pool an isolation="process" run goes to: the one given, else the default pool."""
    pool = worker_pool(isolation)  # (no import statement: this is on every process run's path)
    if pool is not None:
        return pool  # type: ignore[no-any-return]
    from kuro_wasm.host.worker.pool import default_pool

    return default_pool()


class ProcessHandle(Handle):
    """A :class:`Handle` whose guest runs in a worker process (``isolation="process"``): same methods, same meanings.

    No thread of this process runs the guest; the pool's reader thread for its worker calls ``on_chunk``.
    ``worker_pid`` is the pid of the worker running the guest (None while it waits for one).
    """

    def __init__(self, run: RemoteRun, pool: WorkerPool) -> None:  # not Handle.__init__: no thread here
        self._run = run
        self._pool = pool

    def _start(self) -> None:
        self._pool.submit(self._run)

    @property
    def stream(self) -> _stream.Stream:
        return self._run.stream

    @property
    def done(self) -> bool:
        return self._run.done.is_set()

    @property
    def receipt(self) -> dict[str, Any] | None:
        return self._run.receipt

    @property
    def worker_pid(self) -> int | None:
        conn = self._run.conn
        return None if conn is None else conn.pid

    def write(self, data: bytes) -> None:
        self._pool.stdin(self._run, _stdin_bytes(data))

    def close_stdin(self) -> None:
        self._pool.close_stdin(self._run)

    def kill(self) -> None:
        self._pool.kill(self._run)

    def checkpoint(self, max_chunk_bytes: int | None = None) -> dict[str, Any]:
        """As :meth:`Handle.checkpoint`: the stream as the host has received it, or the denial."""
        from kuro_wasm.host.worker.run import ISOLATION as PROCESS  # loaded already: this run is one of its

        return _checkpoint.to_data(
            self._run.stream,
            self._run.session,
            self._run.command,
            max_chunk_bytes=max_chunk_bytes,
            isolation=PROCESS,
        )

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        seconds = _seconds(timeout)
        if not self._run.done.is_set() and self._in_own_callback():
            raise _waiting_on_itself()
        if not wait_event(self._run.done, seconds):
            raise StillRunning(f"the guest is still running after {timeout} s")
        if self._run.failure is not None:
            raise self._run.failure
        assert self._run.receipt is not None
        return self._run.receipt

    def close(self) -> None:
        if not self._run.done.is_set():
            self.kill()
            if not self._in_own_callback():
                wait_event(self._run.done, None)

    def _in_own_callback(self) -> bool:
        return getattr(_CALLING_BACK, "run", None) is self._run

    def run_to_end(self) -> dict[str, Any]:
        """Submit, then wait; Ctrl-C on the main thread kills the guest and returns its ``cancelled`` receipt.

        The waiting thread reads its worker's frames itself (:meth:`WorkerPool.lead`) — on the main thread only
        while Ctrl-C is routed to the run (Python's own handler was in place) or ignored (``SIG_IGN``: a program
        started in the background by a shell; no Ctrl-C can raise into it), else it waits as ``wait`` does. While
        the main thread reads, the program's other Python signal handlers are guarded as for a main-thread guest
        run (:func:`kuro_wasm.host.interrupts.hold`): one that raises (a SIGALRM timeout, a SIGTERM that exits)
        would otherwise raise inside a frame and leave the channel half-read, costing the worker and the run its
        own receipt; guarded, it stops the run (``cancelled``), the frame is read whole, and run() raises it after.
        Anything else raised into the wait is stopped for the same way, its receipt naming it: a handler's exception
        (one the guard did not cover) as the handler's, any other as the host's failure — never a signal's, never
        the guest's. A HostError that leaves no receipt after a handler stopped the run raises the handler's
        exception, the HostError its context and named in a note.
        """
        claimed = _claim_ctrl_c(self._run)
        main = threading.current_thread() is threading.main_thread()
        self._run.leading = claimed or not main or _signal.getsignal(signal.SIGINT) == _signal.SIG_IGN
        guarded = self._run.leading and main
        held: interrupts.Held = ()
        try:
            if guarded:
                held = interrupts.hold(self._run)
            self._start()
            receipt = self._pool.lead(self._run) if self._run.leading else self.wait()
        except KeyboardInterrupt:
            if threading.current_thread() is not threading.main_thread():
                raise
            return dict(stop_and_wait(self))
        except HostError as failure:  # no receipt: a handler's exception that stopped the run is still raised
            if self._run.interruption is None:
                raise
            raise interrupts.raised_after(self._run.interruption, None, failure=failure)  # noqa: B904 (its context)
        except BaseException as exc:  # the run is stopped, its receipt made (naming why), then exc is raised
            if interrupts.raised_by_a_handler(exc, held):  # a signal handler of the program's (unguarded)
                if self._run.interruption is None:  # (its receipt names it, as a guarded one's does)
                    self._run.interruption = exc
            elif self._run.host_failure is None:  # the host's own (a bug, no memory): never called a signal's
                self._run.host_failure = f"host failure while its run() caller waited: {type(exc).__name__}: {exc}"
            raise interrupts.raised_after(exc, self._stopped()) from exc.__cause__
        finally:
            if guarded:
                interrupts.release(self._run, held)
            if claimed:
                _MAIN_RUNS.pop()
        if self._run.interruption is not None:  # on_chunk raised SystemExit or KeyboardInterrupt: the run stopped
            raise interrupts.raised_after(self._run.interruption, receipt)
        return receipt

    def _stopped(self) -> dict[str, Any] | None:
        """Kill the run and wait for its receipt, reading its frames if this caller was to (None: it has none)."""
        while True:
            try:
                self.kill()
                return self._pool.lead(self._run) if self._run.leading else self.wait()
            except KeyboardInterrupt:
                continue  # the kill is asked already: the run ends within its stop grace
            except HostError:
                return None
