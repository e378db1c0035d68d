"""The wasmtime engine: configuration, identity, the epoch ticker, and the thin call path.

## The one decision
Every engine kuro uses has epoch interruption on, and a run is stopped by the
*epoch deadline callback*, not by a deadline counted in ticks: the store's
deadline is one tick ahead, and at each tick the callback asks the run "should
you stop?" (killed, deadline passed, output capped). Ticks are events, not a
clock: a shared ticker thread sleeps until the earliest deadline of the live
runs and ticks then (and every millisecond while a run past its deadline is
still live), and every other reason to stop ticks at once
(:func:`interrupt`, from ``RunContext.stop``). Each tick takes the GIL in
every running guest's callback: a 1 ms ticker cost ~20 µs of CPU per warm
trivial run in a worker and ~38 µs of wall per run through one, for a check
that answers "continue" almost every time. A wall-clock check at the due tick
stops a 50 ms deadline as soon as the thread wakes, and a kill at once. Fuel
needs ``consume_fuel`` in the engine config, so
there are two engines (fuel off / on), each with its own :func:`engine_key`,
and the compiled-module cache is keyed by it.

A process may narrow how wasmtime reserves linear memory (:func:`set_memory_profile`,
before its first engine): a worker process does, so that ``RLIMIT_AS`` can bound
it (wasmtime's default reserves 4 GiB + a 2 GiB guard per memory, which any
useful address-space limit refuses). The profile changes compiled code (explicit
bounds checks), so it is part of :func:`engine_key` and the cache keeps such
artifacts apart.

## Effects
Creates wasmtime engines (one per config, for the process), runs one daemon
ticker thread that exits after a second with no live run (it waits on a pipe,
made once per process; during a main-thread run that pipe is Python's signal
wakeup fd, so a signal handler runs promptly while wasm runs; a forked child gets a pipe, a lock and a thread
of its own), and calls wasmtime's
C API directly (``wasmtime._ffi``) for the epoch callback, instantiation and
export calls. The public wasmtime-py call path re-raises a process-global
"last Python exception" (it can surface on the wrong thread); this path never
touches it. It is pinned to wasmtime-py 50 (``pyproject.toml``) and tested in
``tests/host/test_host_limits.py``.

## Not done here
No stack-size tuning: ``max_wasm_stack`` above 2 MiB aborts the process, so the
default is kept and a stack overflow is a ``STACK_OVERFLOW`` trap.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import select
import signal
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import wasmtime
from wasmtime import _ffi as ffi

__all__ = [
    "CallOutcome",
    "TrapInfo",
    "EngineConfig",
    "MemoryProfile",
    "Interruptible",
    "call_export",
    "call_raw",
    "call_unchecked",
    "engine_for",
    "engine_identity",
    "engine_key",
    "engines_exist",
    "foreign",
    "func_signature",
    "install_interrupt",
    "interrupt",
    "remove_interrupt",
    "instantiate",
    "live_run",
    "lookup_func",
    "lookup_memory",
    "memory_profile",
    "new_store",
    "memory_base_fixed",
    "set_memory_profile",
    "wasmtime_version",
    "watch_signals_in_runs",
]

_TICK_SECONDS: Final = 0.001

_P = ctypes.c_void_p


def foreign(name: str, restype: Any, *argtypes: Any, keep_gil: bool = False) -> Any:
    """A foreign function of wasmtime's library with our own (address-only) types; wasmtime-py's are untouched.

    wasmtime-py wraps each C function in a Python function that converts ctypes pointer objects;
    a run makes a dozen such calls, so the run's path binds the same symbols taking plain addresses.
    ``keep_gil``: for calls that run no wasm and take no lock (a field read, a setting), call
    without releasing the GIL — releasing and re-taking it costs more than the call, and invites a
    thread switch. Anything that may run wasm releases it (the epoch ticker needs it to tick).
    """
    return (ctypes.PYFUNCTYPE if keep_gil else ctypes.CFUNCTYPE)(restype, *argtypes)((name, ffi.dll))


def address(ptr: Any) -> int:
    """The address a non-NULL ctypes pointer object points at (``addressof(ptr.contents)``: 0.08 µs, not
    ``ctypes.cast``'s 0.6 µs)."""
    return ctypes.addressof(ptr.contents)


def context_address(store: wasmtime.Store) -> int:
    """The address of ``store``'s ``wasmtime_context_t`` (a run's key in the host's registries)."""
    return ctypes.addressof(store._context().contents)


_store_new = foreign(
    "wasmtime_store_new", ctypes.POINTER(ffi.wasmtime_store_t), _P, _P, _P, keep_gil=True
)  # (engine, data, finalizer)
_store_context = foreign(
    "wasmtime_store_context", ctypes.POINTER(ffi.wasmtime_context_t), ctypes.POINTER(ffi.wasmtime_store_t),
    keep_gil=True,
)  # fmt: skip
_store_limiter = foreign("wasmtime_store_limiter", None, _P, *(ctypes.c_int64,) * 5, keep_gil=True)
_set_epoch_deadline = foreign("wasmtime_context_set_epoch_deadline", None, _P, ctypes.c_uint64, keep_gil=True)
_pre_instantiate = foreign("wasmtime_instance_pre_instantiate", _P, _P, _P, _P, _P)
_export_get = foreign("wasmtime_instance_export_get", ctypes.c_bool, _P, _P, ctypes.c_char_p, ctypes.c_size_t, _P,
                      keep_gil=True)  # fmt: skip
_increment_epoch = foreign("wasmtime_engine_increment_epoch", None, _P, keep_gil=True)  # an atomic add
_func_call = foreign("wasmtime_func_call", _P, _P, _P, _P, ctypes.c_size_t, _P, ctypes.c_size_t, _P)
_EXTERN_FUNC: Final = int(ffi.WASMTIME_EXTERN_FUNC.value)
_EXTERN_MEMORY: Final = int(ffi.WASMTIME_EXTERN_MEMORY.value)
_IDLE_EXIT_SECONDS: Final = 1.0


@functools.cache
def wasmtime_version() -> str:
    """The installed wasmtime-py version, e.g. ``"50.0.1"`` (read once).

    From the name of wasmtime's ``*.dist-info`` folder beside the package when there is exactly
    one (importing ``importlib.metadata`` costs more than a warm run of a guest; so did ``Path.glob``, 0.4–0.6 ms
    of a new process's first load — its pattern compiled — against ~0.1 ms for a listing), else from
    ``importlib.metadata``.
    """
    found = [
        name[len("wasmtime-") : -len(".dist-info")]
        for name in os.listdir(os.path.dirname(os.path.dirname(wasmtime.__file__)))
        if name.startswith("wasmtime-") and name.endswith(".dist-info")
    ]
    if len(found) == 1:
        return found[0]
    from importlib import metadata

    try:
        return metadata.version("wasmtime")
    except metadata.PackageNotFoundError:  # pragma: no cover - an unpackaged checkout
        return "unknown"


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The engine settings that change compiled code. ``fuel`` adds fuel metering."""

    fuel: bool = False


@dataclass(frozen=True, slots=True)
class MemoryProfile:
    """How every engine of this process reserves a linear memory (bytes): the virtual reservation, the
    guard after it, and the extra room reserved when a memory that outgrew its reservation moves."""

    reservation: int
    guard: int
    growth: int


_PROFILE: list[MemoryProfile | None] = [None]


def memory_profile() -> MemoryProfile | None:
    """The memory profile set for this process, or None (wasmtime's defaults)."""
    return _PROFILE[0]


def memory_base_fixed() -> bool:
    """Whether a linear memory's base address stays put for the memory's life in this process's engines.

    True under wasmtime's default reservation (4 GiB plus guard on 64-bit hosts): engines are then
    made with ``memory_may_move = False``, so a 32-bit memory grows in place and a host call may keep
    the base it read (a growth past the reservation — only a 64-bit memory could ask — fails
    instead, as ``memory.grow`` may). A narrowed profile lets memories move: the base is asked each time.
    """
    return _PROFILE[0] is None


def set_memory_profile(profile: MemoryProfile | None) -> None:
    """Fix how this process's engines reserve linear memory; only before the first engine exists.

    Raises RuntimeError: an engine exists already (its compiled code assumes the old profile).
    """
    with _ENGINES_LOCK:
        if _ENGINES and profile != _PROFILE[0]:
            raise RuntimeError("the memory profile is fixed once an engine exists")
        _PROFILE[0] = profile
    engine_key.cache_clear()
    engine_identity.cache_clear()


@functools.cache
def engine_key(config: EngineConfig) -> str:
    """A stable string naming ``config``, the memory profile and the wasmtime version: part of every cache key.

    >>> engine_key(EngineConfig(fuel=True)).endswith("epoch+fuel;fixed-base")
    True
    """
    profile = _PROFILE[0]
    memory = ";fixed-base" if profile is None else f";memory={profile.reservation}/{profile.guard}/{profile.growth}"
    return f"wasmtime-{wasmtime_version()};epoch{'+fuel' if config.fuel else ''}{memory}"


@functools.cache
def engine_identity(config: EngineConfig) -> str:
    """The ``kuro/engine`` value of a receipt, e.g. ``"wasmtime 50.0.1 (epoch-interruption)"``."""
    extras = "epoch-interruption, fuel" if config.fuel else "epoch-interruption"
    if _PROFILE[0] is not None:
        extras += ", bounded memory reservation"
    return f"wasmtime {wasmtime_version()} ({extras})"


_ENGINES: dict[EngineConfig, wasmtime.Engine] = {}
#: Re-entrant: a signal handler that stops a run (interrupt() takes it) may run on a thread inside engine_for.
_ENGINES_LOCK = threading.RLock()


def engine_for(config: EngineConfig) -> wasmtime.Engine:
    """The process-wide engine for ``config`` (created on first use; one engine serves every thread)."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(config)
        if engine is None:
            cfg = wasmtime.Config()
            cfg.epoch_interruption = True
            cfg.consume_fuel = config.fuel
            profile = _PROFILE[0]
            if profile is not None:
                cfg.memory_reservation = profile.reservation
                cfg.memory_guard_size = profile.guard
                cfg.memory_reservation_for_growth = profile.growth
            else:  # the default reservation (4 GiB) holds any 32-bit memory whole: its base need never move
                cfg.memory_may_move = False
            engine = wasmtime.Engine(cfg)
            _ENGINES[config] = engine
        return engine


def engines_exist() -> bool:
    """Whether this process has created an engine yet (a process that will fork must not have)."""
    with _ENGINES_LOCK:
        return bool(_ENGINES)


# ---- ticker


class _Ticker:
    """One daemon thread that advances every engine's epoch when a live run's deadline is due.

    It sleeps until the earliest deadline of the live runs (a run with an earlier one wakes it), then
    ticks every :data:`_TICK_SECONDS` while a run past its deadline is still live (inside a host call,
    or not yet reached by its callback). Every other reason to stop ticks at once (:func:`interrupt`).

    A signal handler of Python's runs only when the main thread runs Python code: while the main thread
    runs wasm, that is at its next epoch callback. So a run on the main thread makes the thread wait on
    Python's signal wakeup fd too (:func:`signal.set_wakeup_fd`) and tick when a signal comes; if the
    program uses that fd itself (an asyncio loop), the run is ticked every :data:`_TICK_SECONDS` instead.
    """

    def __init__(self) -> None:
        #: re-entrant: a signal handler may start a run (and so register one) on a thread that is inside acquire
        self._lock = threading.RLock()
        self._deadlines: dict[int, float] = {}
        self._next = 0
        self._thread: threading.Thread | None = None
        self._idle_since = 0.0
        #: when the thread wakes next (inf: it is not waiting); a run due earlier must wake it
        self._wake_at = float("inf")
        #: a pipe the thread waits on: a 0 byte wakes it, any other is a signal's number (the wakeup fd)
        self._pipe: tuple[int, int] | None = None

    def acquire(self, deadline: float) -> int:
        """Register a live run due at ``deadline`` (monotonic seconds); returns the key for :meth:`release`."""
        with self._lock:
            if self._pipe is None:
                self._pipe = os.pipe()
                for fd in self._pipe:
                    os.set_blocking(fd, False)
            self._next += 1
            key = self._next
            self._deadlines[key] = deadline
            if self._thread is None:  # (set before it starts: a run registered meanwhile, see _lock, wakes it)
                thread = self._thread = threading.Thread(target=self._loop, name="kuro-epoch-ticker", daemon=True)
                thread.start()
            elif deadline < self._wake_at:
                self._wake()
            return key

    def release(self, key: int) -> None:
        """The run registered under ``key`` is over (the thread is not woken: a stale wake costs one check)."""
        with self._lock:
            self._deadlines.pop(key, None)  # (absent in a forked child for a run of its parent)
            if not self._deadlines:
                self._idle_since = time.monotonic()

    def watch_signals(self) -> int | None:
        """On the main thread, with a run live: make a signal wake the thread. Returns the wakeup fd to restore
        after the run, or None if the program has its own (the caller then registers a run that is always due).

        Python tells whether the program has a wakeup fd only by replacing it (``set_wakeup_fd`` returns the
        old fd), and cannot read back its ``warn_on_full_buffer``: the program's fd is put back with the flag
        False. trio sets False (its wakeup socket holds a few bytes; a warning per signal past them is noise);
        asyncio leaves Python's default True, where the flag only decides whether a signal's byte that finds
        its ~200 KiB socket full is dropped with a warning or without one.
        """
        assert self._pipe is not None
        mine = self._pipe[1]
        old = signal.set_wakeup_fd(mine, warn_on_full_buffer=False)
        if old not in (-1, mine):
            signal.set_wakeup_fd(old, warn_on_full_buffer=False)
            return None
        return old

    def _wake(self) -> None:
        assert self._pipe is not None
        try:
            os.write(self._pipe[1], b"\0")
        except BlockingIOError:  # the pipe is full of wakes already
            pass

    def _loop(self) -> None:
        assert self._pipe is not None
        wake = self._pipe[0]
        poller = select.poll()  # not select.select: it refuses an fd past FD_SETSIZE (a process with 1024 files open)
        poller.register(wake, select.POLLIN)
        while True:
            with self._lock:
                now = time.monotonic()
                if self._deadlines:
                    due = min(self._deadlines.values())
                elif now - self._idle_since >= _IDLE_EXIT_SECONDS:
                    self._thread = None
                    return
                else:
                    due = self._idle_since + _IDLE_EXIT_SECONDS
                if due <= now:  # a live run is past its deadline: tick, and again until it is over
                    for engine in list(_ENGINES.values()):
                        _increment_epoch(address(engine.ptr()))
                    due = now + _TICK_SECONDS
                wake_at = self._wake_at = min(due, now + _IDLE_EXIT_SECONDS)
            ready = poller.poll(max(0, math.ceil((wake_at - now) * 1000)))  # milliseconds, rounded up
            with self._lock:
                self._wake_at = float("inf")
            if ready:
                try:
                    got = os.read(wake, 4096)
                except BlockingIOError:
                    got = b""
                if got.strip(b"\0"):  # a signal: the main thread's callback runs its handler
                    interrupt()

    def after_fork_in_child(self) -> None:
        """In a forked child: the parent's thread is not here, its lock may have been held, and its pipe is shared.

        The child gets a lock and a pipe of its own under the same fd numbers (so a wakeup fd set to the old
        one — a fork inside a main-thread run — now wakes the child's thread), and a thread starts when its
        first run registers (not here: a child may be about to exec, as under ``preexec_fn``). The parent's
        runs are not the child's: their deadlines are forgotten (a run the forking thread was inside goes on
        in the child without one).
        """
        self._lock = threading.RLock()
        self._deadlines = {}
        self._thread = None
        self._wake_at = float("inf")
        self._idle_since = time.monotonic()
        if self._pipe is not None:
            fresh = os.pipe()
            for fd, old in zip(fresh, self._pipe, strict=True):
                os.set_blocking(fd, False)
                os.dup2(fd, old, inheritable=False)
                os.close(fd)


_TICKER = _Ticker()


def _after_fork_in_child() -> None:
    global _ENGINES_LOCK, _CHECKS_LOCK
    _ENGINES_LOCK = threading.RLock()
    _CHECKS_LOCK = threading.RLock()
    _TICKER.after_fork_in_child()


#: Whether a run on the main thread makes a signal wake it (:class:`live_run`); see :func:`watch_signals_in_runs`.
_WATCH_SIGNALS: list[bool] = [True]


def watch_signals_in_runs(on: bool) -> None:
    """Whether a run on the main thread makes a signal wake it, so that a Python signal handler runs while the guest
    does (:class:`_Ticker`; on by default). A process with no Python signal handler at all (a worker process: SIGINT
    ignored, every other signal at its default action) turns it off: Python's wakeup fd, set and given back around
    every run (two ``set_wakeup_fd`` calls, four system calls), would then wake the run for nothing to run."""
    _WATCH_SIGNALS[0] = on


class live_run:
    """Context manager: registers one run, due at ``deadline``, with the ticker for the duration of the run."""

    __slots__ = ("_deadline", "_key", "_signal_fd")

    def __init__(self, deadline: float = float("inf")) -> None:
        self._deadline = deadline
        self._key = 0
        self._signal_fd: int | None = None

    def __enter__(self) -> None:
        self._key = _TICKER.acquire(self._deadline)
        if _WATCH_SIGNALS[0] and threading.current_thread() is threading.main_thread():
            self._signal_fd = _TICKER.watch_signals()
            if self._signal_fd is None:  # the program's wakeup fd, not ours: tick this run as if always due
                _TICKER.release(self._key)
                self._key = _TICKER.acquire(float("-inf"))

    def __exit__(self, *exc: object) -> None:
        _TICKER.release(self._key)
        if self._signal_fd is not None:  # -1, or ours (an outer run's): ours never warns (a full pipe is a wake)
            signal.set_wakeup_fd(self._signal_fd, warn_on_full_buffer=False)
            self._signal_fd = None


def interrupt() -> None:
    """Advance every engine's epoch now: each running guest's callback asks its run whether to stop.

    What makes a stop other than the deadline prompt (:meth:`RunContext.stop`: kill, output cap, host
    error); a guest with no reason to stop continues. Thread-safe (an atomic add in wasmtime), and made
    without letting the GIL go: a thread that stops a run and goes straight on (a worker exiting as its host
    goes) is not overtaken here by the run's own thread.
    """
    with _ENGINES_LOCK:
        engines = list(_ENGINES.values())
    for engine in engines:
        _increment_epoch(address(engine.ptr()))


# ---- epoch callback

_EpochCallback = ctypes.CFUNCTYPE(
    ctypes.c_size_t,
    ctypes.POINTER(ffi.wasmtime_context_t),
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ffi.wasmtime_update_deadline_kind_t),
)
_Finalizer = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_epoch_deadline_callback = foreign(
    "wasmtime_store_epoch_deadline_callback", None, _P, _EpochCallback, _P, _Finalizer, keep_gil=True
)


class Interruptible(Protocol):
    """What the epoch callback asks at each tick (a run's context)."""

    def should_stop(self) -> str | None:
        """The reason to stop now, or None to continue."""
        ...

    def stop(self, reason: str, detail: str | None = None) -> None:
        """Record a reason to stop."""
        ...


_CHECKS: dict[int, Interruptible] = {}
_CHECKS_LOCK = threading.RLock()
_NEXT_ID = [0]
os.register_at_fork(after_in_child=_after_fork_in_child)


def _error_ptr(message: str) -> int:
    err = ffi.wasmtime_error_new(message.encode("utf-8", "replace"))
    return int(ctypes.cast(err, ctypes.c_void_p).value or 0)


@_EpochCallback  # type: ignore[untyped-decorator]
def _on_epoch(_ctx: Any, data: Any, delta: Any, kind: Any) -> int:
    run: Interruptible | None = None
    try:
        run = _CHECKS.get(int(data or 0))
        reason = run.should_stop() if run is not None else "no run"
        if reason is not None:
            return _error_ptr(f"kuro: stopped ({reason})")
        delta[0] = 1
        kind[0] = 0  # WASMTIME_UPDATE_DEADLINE_CONTINUE
        return 0
    except KeyboardInterrupt:  # rarely reached: ctypes swallows one raised on entry (host.run handles SIGINT)
        if run is not None:
            run.stop("cancelled")
        return _error_ptr("kuro: stopped (interrupted)")
    except BaseException as exc:
        if run is not None:
            run.stop("host-error", f"epoch check: {type(exc).__name__}: {exc}")
        return _error_ptr("kuro: stopped (host error in epoch check)")


# NULL, not a Python finalizer: a store that dies at interpreter exit could otherwise call a
# ctypes thunk that was already freed. The registration is removed by remove_interrupt instead.
_NULL_FINALIZER: Final = _Finalizer()


def remove_interrupt(key: int) -> None:
    """Forget the run registered by :func:`install_interrupt` under ``key`` (idempotent)."""
    with _CHECKS_LOCK:
        _CHECKS.pop(key, None)


def install_interrupt(store: wasmtime.Store, run: Interruptible, context: int = 0) -> int:
    """Arm ``store``: at every epoch tick ``run.should_stop()`` is asked; a non-None answer stops the guest.

    Sets the deadline one tick ahead (a new store's deadline is 0, which would
    interrupt a healthy guest at the first tick), or at 0 if the run must stop already
    (a :meth:`~Interruptible.stop` before this call ticked no store of it). ``should_stop`` must be cheap;
    if it raises, the run is stopped with reason ``host-error``. Returns the key to
    pass to :func:`remove_interrupt` when the run is over. ``context``: ``store``'s context address if the
    caller holds it, else 0.
    """
    with _CHECKS_LOCK:
        _NEXT_ID[0] += 1
        key = _NEXT_ID[0]
        _CHECKS[key] = run
    _epoch_deadline_callback(address(store.ptr()), _on_epoch, key, _NULL_FINALIZER)
    cctx = context or context_address(store)
    _set_epoch_deadline(cctx, 1)
    if run.should_stop() is not None:  # stopped before the deadline above was set: its interrupt came too early
        _set_epoch_deadline(cctx, 0)
    return key


def new_store(engine: wasmtime.Engine) -> wasmtime.Store:
    """``wasmtime.Store(engine)``: the same C calls and the same object, without the constructor's wrappers.

    ``Store.__init__`` (wasmtime-py 50, pinned) calls ``wasmtime_store_new`` with no data and a NULL
    finalizer and keeps the store and its context pointers; this does exactly that (half the cost of a
    run's store: 1.4 µs, not 2.8). ``tests/host/test_engine_calls.py`` holds it to the constructor's
    attributes, so a wasmtime-py that changes them fails there, not in a run.
    """
    store: wasmtime.Store = object.__new__(wasmtime.Store)
    ptr = _store_new(address(engine.ptr()), None, None)
    store._Managed__ptr = ptr  # type: ignore[attr-defined]
    store._Store__context = _store_context(ptr)  # type: ignore[attr-defined]
    store.engine = engine
    return store


def set_store_limits(
    store: wasmtime.Store, memory_size: int, table_elements: int, instances: int, tables: int, memories: int
) -> None:
    """``store.set_limits(...)`` (the same C call; a negative limit is not set), without wasmtime-py's wrappers."""
    _store_limiter(address(store.ptr()), memory_size, table_elements, instances, tables, memories)


# ---- instantiate and call, below the public API


@dataclass(frozen=True, slots=True)
class TrapInfo:
    """A trap known by its text only (wasmtime's component API reports traps as errors): its code, and message."""

    trap_code: wasmtime.TrapCode | None
    message: str


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What a wasm entry returned: ``values`` on success, else a ``trap`` or an ``error``.

    ``result`` is a typed result as receipt data, in a 1-tuple (a component
    export's; None: the entry has none), written to the receipt's ``kuro/result``.
    """

    values: tuple[int | float, ...] = ()
    trap: wasmtime.Trap | TrapInfo | None = None
    error: str | None = None
    result: tuple[Any] | None = None


def instantiate(pre: wasmtime.InstancePre, store: wasmtime.Store) -> tuple[Any, CallOutcome | None]:
    """Instantiate ``pre`` in ``store``: ``(raw instance, None)``, or ``(None, failure)``."""
    instance = ffi.wasmtime_instance_t()
    trap = ctypes.c_void_p()
    error = _pre_instantiate(
        address(pre.ptr()), context_address(store), ctypes.addressof(instance), ctypes.addressof(trap)
    )
    if error:
        return None, CallOutcome(error=_take_error(error))
    if trap.value:
        return None, CallOutcome(trap=_take_trap(trap.value))
    return instance, None


def _kind(item: Any) -> int:
    """The kind tag of a ``wasmtime_extern_t`` (a ctypes field reads back as an int)."""
    return int(item.kind)


def _export(store: wasmtime.Store, instance: Any, name: str, kind: int, context: int = 0) -> Any:
    """The ``wasmtime_extern_t`` exported as ``name`` if it is of ``kind``, else None."""
    item = ffi.wasmtime_extern_t()
    raw = name.encode("utf-8")
    cctx = context or context_address(store)
    if not _export_get(cctx, ctypes.addressof(instance), raw, len(raw), ctypes.addressof(item)):
        return None
    return item if _kind(item) == kind else None


def lookup_func(store: wasmtime.Store, instance: Any, name: str, context: int = 0) -> Any:
    """The raw ``wasmtime_func_t`` exported as ``name``, or None (never lists all exports).

    ``context``: ``store``'s context address when the caller has it (a registered run's
    :attr:`~kuro_wasm.host.context.RunContext.context`), else 0 (asked of ``store``); as in :func:`call_export`.
    """
    item = _export(store, instance, name, _EXTERN_FUNC, context)
    return None if item is None else item.of.func


def lookup_memory(store: wasmtime.Store, instance: Any, name: str = "memory") -> Any:
    """The raw ``wasmtime_memory_t`` exported as ``name``, or None."""
    item = _export(store, instance, name, _EXTERN_MEMORY)
    return None if item is None else item.of.memory


_KIND_CODES: Final[dict[str, int]] = {
    "i32": ffi.WASMTIME_I32.value,
    "i64": ffi.WASMTIME_I64.value,
    "f32": ffi.WASMTIME_F32.value,
    "f64": ffi.WASMTIME_F64.value,
}
#: A ``wasmtime_val_t``: a one-byte kind, then the value at offset 8, in 32 bytes.
_VAL_SIZE: Final = ctypes.sizeof(ffi.wasmtime_val_t)
_VAL_FORMAT: Final[dict[str, str]] = {"i32": "I", "i64": "Q", "f32": "f", "f64": "d"}
_RESULT_FORMAT: Final[dict[str, str]] = {"i32": "i", "i64": "q", "f32": "f", "f64": "d"}
_MASK: Final[dict[str, int]] = {"i32": 2**32 - 1, "i64": 2**64 - 1}


@functools.lru_cache(maxsize=256)
def _layout(params: tuple[str, ...], results: tuple[str, ...]) -> tuple[Any, struct.Struct, struct.Struct]:
    """(the value array type, the args' layout, the results' layout) of one signature; the array's last
    slot holds the trap pointer. A result of another kind than the four numbers is skipped (it reads as 0)."""

    def slot(lead: str, fmt: str) -> str:
        return f"{lead}{fmt}{_VAL_SIZE - 8 - struct.calcsize('<' + fmt)}x"

    args = struct.Struct("<" + "".join(slot("B7x", _VAL_FORMAT[p]) for p in params))
    found = struct.Struct(
        "<" + "".join(slot("8x", _RESULT_FORMAT[r]) if r in _RESULT_FORMAT else f"{_VAL_SIZE}x" for r in results)
    )
    return ffi.wasmtime_val_t * (len(params) + len(results) + 1), args, found


def call_export(
    store: wasmtime.Store,
    func: Any,
    params: Sequence[str],
    args: Sequence[int | float],
    results: Sequence[str],
    context: int = 0,
) -> CallOutcome:
    """Call the raw ``func`` with numeric ``args`` typed by ``params``; results typed by ``results``.

    The caller has checked ``args`` against ``params`` (:func:`kuro_wasm.model.abi.check_args`).
    Arguments and results move through one value array laid out by a precompiled ``struct``
    per signature (an argument is stored as a C assignment would store it; a result of another kind
    than the four numbers reads as 0). ``context``: ``store``'s context address if the caller holds it
    (a registered run's ``context``: one address fewer to ask of wasmtime-py per call), else 0.
    """
    return call_raw(context or context_address(store), ctypes.addressof(func), params, args, results)


def call_raw(
    cctx: int, func: int, params: Sequence[str], args: Sequence[int | float], results: Sequence[str]
) -> CallOutcome:
    """:func:`call_export` given addresses: of the store's context, and of a ``wasmtime_func_t``."""
    params, results = tuple(params), tuple(results)
    array_type, arg_layout, result_layout = _layout(params, results)
    vals = array_type()
    values: list[Any] = []
    for kind, arg in zip(params, args, strict=True):
        values.append(_KIND_CODES[kind])
        values.append(_arg(kind, arg))
    arg_layout.pack_into(vals, 0, *values)
    base = ctypes.addressof(vals)
    n, m = len(params), len(results)
    trap_at = base + (n + m) * _VAL_SIZE
    failed = _failed(_func_call(cctx, func, base, n, base + n * _VAL_SIZE, m, trap_at), trap_at)
    if failed is not None:
        return failed
    got = result_layout.unpack_from(vals, n * _VAL_SIZE)
    if len(got) != m:
        known = iter(got)
        got = tuple(next(known) if r in _RESULT_FORMAT else 0 for r in results)
    return CallOutcome(values=got)


#: A ``wasmtime_val_raw_t``: a 16-byte union, the value at offset 0.
_RAW_SIZE: Final = ctypes.sizeof(ffi.wasmtime_val_raw_t)
_func_call_unchecked = foreign("wasmtime_func_call_unchecked", _P, _P, _P, _P, ctypes.c_size_t, _P)


@functools.lru_cache(maxsize=256)
def _raw_layout(params: tuple[str, ...], results: tuple[str, ...]) -> tuple[Any, struct.Struct, struct.Struct, int]:
    """(the raw value array type, the args' layout, the results' layout, the trap pointer's offset) of one
    signature for :func:`call_unchecked`: args and results share the array's first slots, the trap pointer
    follows them (and ends the results' layout: read with them)."""

    def slot(fmt: str) -> str:
        return f"{fmt}{_RAW_SIZE - struct.calcsize('<' + fmt)}x"

    slots = max(len(params), len(results))
    args = struct.Struct("<" + "".join(slot(_VAL_FORMAT[p]) for p in params))
    gap = (slots - len(results)) * _RAW_SIZE
    found = struct.Struct("<" + "".join(slot(_RESULT_FORMAT[r]) for r in results) + f"{gap}xQ")
    return ffi.wasmtime_val_raw_t * (slots + 1), args, found, slots * _RAW_SIZE


def call_unchecked(
    cctx: int, func: int, params: tuple[str, ...], args: Sequence[int | float], results: tuple[str, ...]
) -> tuple[int | float, ...]:
    """:func:`call_raw` through ``wasmtime_func_call_unchecked``: the same arguments and results, without
    wasmtime's check of the arguments against the function's type (it reflects the type on every call) and
    without a :class:`CallOutcome` — the results, or the failure raised. A four-argument call took 5.8 µs through
    :func:`call_raw`, most of it those two (measured on one store).

    The caller must know that the function at ``func`` has the core type ``params → results``, all four of them
    numbers (:func:`func_signature`): otherwise wasm reads values of other types than were written.

    Raises wasmtime.Trap: the call trapped; wasmtime.WasmtimeError: wasmtime failed it.
    """
    array_type, arg_layout, result_layout, trap_offset = _raw_layout(params, results)
    vals = array_type()
    try:  # numbers in their slot's range (a realloc's, a lowered call's) are packed as they are
        arg_layout.pack_into(vals, 0, *args)
    except (struct.error, OverflowError, TypeError):  # others wrapped or rounded as call_raw does
        arg_layout.pack_into(vals, 0, *[_arg(kind, arg) for kind, arg in zip(params, args, strict=True)])
    base = ctypes.addressof(vals)
    error = _func_call_unchecked(cctx, func, base, trap_offset // _RAW_SIZE, base + trap_offset)
    if error:
        raise wasmtime.WasmtimeError(_take_error(error))
    got = result_layout.unpack_from(vals, 0)
    if got[-1]:
        raise _take_trap(got[-1])
    return got[:-1]


def func_signature(cctx: int, func: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The core type of the ``wasmtime_func_t`` at ``func`` as (params, results), each named as ``str`` of
    wasmtime-py's ``ValType`` names it (``i32``, …, ``funcref``)."""
    context = ctypes.cast(cctx, ctypes.POINTER(ffi.wasmtime_context_t))
    ptr = ffi.wasmtime_func_type(context, ctypes.cast(func, ctypes.POINTER(ffi.wasmtime_func_t)))
    ty = wasmtime.FuncType._from_ptr(ptr, None)  # owns (and deletes) the type
    return tuple(str(t) for t in ty.params), tuple(str(t) for t in ty.results)


def _arg(kind: str, arg: int | float) -> int | float:
    """A number as its slot holds it: an integer wrapped to its width, an f32 rounded (and overflowed to ±inf) as
    a C float would be, where ``struct`` would refuse it."""
    if kind in _MASK:
        return int(arg) & _MASK[kind]
    return float(arg) if kind == "f64" else ctypes.c_float(float(arg)).value


def _failed(error: int | None, trap_at: int) -> CallOutcome | None:
    """How a call that answered ``error`` (its ``wasmtime_error_t``, or None) and left its trap pointer at
    ``trap_at`` failed; None if it did not."""
    if error:
        return CallOutcome(error=_take_error(error))
    trap = ctypes.c_void_p.from_address(trap_at).value
    return CallOutcome(trap=_take_trap(trap)) if trap else None


def _take_trap(trap: int) -> wasmtime.Trap:
    return wasmtime.Trap._from_ptr(ctypes.cast(trap, ctypes.POINTER(ffi.wasm_trap_t)))


def _take_error(error: int) -> str:
    return str(wasmtime.WasmtimeError._from_ptr(ctypes.cast(error, ctypes.POINTER(ffi.wasmtime_error_t))))
