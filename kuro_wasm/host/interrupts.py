"""The program's own Python signal handlers, guarded while a main-thread run's guest runs or its frames are read.

## The one decision
While a guest runs on the main thread, wasm calls back into Python through ctypes callbacks (every
host call, the epoch check), and Python runs a pending signal handler at the first bytecode of such
a callback — before any ``try`` of the host's. An exception a handler raises there (a ``SIGALRM``
timeout, a ``SIGTERM`` handler calling ``sys.exit``, asyncio's second Ctrl-C) is swallowed by ctypes,
which then hands wasmtime its uninitialised result slot as a trap or error pointer: wasmtime frees
it and the process aborts (``free(): invalid pointer``). So for the length of a main-thread run every
Python handler the program has installed is replaced by a guard (:func:`hold`) that calls it and,
if it raises, keeps the exception for every run held, stops each (``cancelled``) and returns; the
run ends with its receipt, and :func:`kuro_wasm.host.api.run` then raises the exception.
:func:`release` puts the program's handlers back.

The same guard holds while a main-thread ``run()`` caller reads its worker's frames itself
(:meth:`kuro_wasm.host.api.ProcessHandle.run_to_end`): a handler raising there would leave the channel
half-read (a frame's header read, its payload not), which costs the worker and the run its own
receipt; guarded, the run is stopped between frames, the frame is read whole, and ``run()`` raises
the exception after the ``cancelled`` receipt. Why not mask the signals around each frame read
instead (``signal.pthread_sigmask``): a process-directed signal (``setitimer``'s ``SIGALRM``, a
``kill``) blocked on the main thread is delivered to another thread, whose C handler trips the main
thread's pending flag all the same, so Python would still run the handler inside the frame (tried:
a handler ran in the main thread's pure-Python loop while that thread had SIGALRM blocked).

Why not callbacks that cannot hand back garbage (cffi's ``ffi.callback(..., onerror=...)``): measured
interleaved, a bare cffi callback costs 0.375 µs a call where ctypes' costs 0.231 µs, which would take
the gated ``kuro.write`` from ~2.9× to ~3.5× the bare callback (issue 12's goal: ≤ 3×). The guard
costs one scan of the handlers per main-thread run (``_signal.getsignal`` of each signal, fed straight
into one set test: hold + release measured 1.3–1.5 µs when nothing needs a guard, 2.2 µs when the
handlers were first gathered into a tuple) and nothing per call. The scan is not skipped when "nothing
changed": CPython 3.11 tells no one when a handler is set (no audit event, no counter, and
``_signal.signal`` can be called directly, as this module does), so a skipped scan could miss a
handler installed since the last run, and that handler raising inside a callback is the abort above.

## Effects
``signal.signal`` for each signal with a Python handler of the program's, at the start and the end
of a main-thread run.

## Not done here
A handler installed while the run goes on (from ``on_chunk``) is not guarded: if it raises inside a
callback the abort above can still happen. A second signal landing at the very first bytecode of the
guard itself raises past it. Runs on other threads need no guard: Python runs handlers on the main
thread only.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # CPython's C module behind signal (no stub): no enum conversion
import signal
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

__all__ = ["Held", "Interruptible", "hold", "own", "raised_after", "raised_by_a_handler", "release"]

#: Every signal a handler can be set for (not SIGKILL and SIGSTOP: they read as SIG_DFL, never as a Python handler).
_SIGNALS: Final = tuple(
    sorted(int(s) for s in signal.valid_signals() if 0 < s < signal.NSIG and s not in (signal.SIGKILL, signal.SIGSTOP))
)
_getsignal: Final = _signal.getsignal


class Interruptible(Protocol):
    """A run a guard stops."""

    def interrupted(self, exc: BaseException) -> None:
        """A program's signal handler raised ``exc`` while this run was held: keep it, and stop the run."""
        ...


#: The runs held now, outermost first (main-thread runs nest: a run made from another's on_chunk).
_HELD: list[Interruptible] = []
#: What a signal's handler may be without needing a guard: SIG_DFL, SIG_IGN, None (set from C), and the host's
#: own handlers that never raise while a run is held (:func:`own`). Most runs find nothing else: one set test.
_QUIET: set[Any] = {signal.SIG_DFL.value, signal.SIG_IGN.value, None}


class _Guard:
    """A program's handler, called as it is; what it raises while a run is held stops the runs instead."""

    __slots__ = ("handler",)

    def __init__(self, handler: Callable[[int, Any], Any]) -> None:
        self.handler = handler

    def __call__(self, signum: int, frame: Any) -> Any:
        try:
            return self.handler(signum, frame)
        except BaseException as exc:
            if not _HELD:  # no run (a signal that came after the last release): the program's exception as it is
                raise
            for run in _HELD:
                run.interrupted(exc)
            return None


def own(handler: Callable[[int, Any], Any]) -> None:
    """Mark ``handler`` (installed by the host itself) as one that never raises while a run is held."""
    _QUIET.add(handler)


#: What :func:`hold` changed: (signal, the program's handler, its guard).
Held = tuple[tuple[int, Any, _Guard], ...]


def hold(run: Interruptible) -> Held:
    """Guard every Python handler of the program until :func:`release` (on the main thread, as ``run`` starts).

    If it raises, it leaves nothing held: ``run`` is not in the runs held, and each handler is put back."""
    _HELD.append(run)
    changed: list[tuple[int, Any, _Guard]] = []
    try:
        try:
            if _QUIET.issuperset(map(_getsignal, _SIGNALS)):  # (read as they come: no tuple of them is built)
                return ()
        except TypeError:  # an unhashable handler (a callable object with __eq__ and no __hash__): look at each
            pass
        for signum in _SIGNALS:
            handler = _getsignal(signum)
            if handler.__class__ is int or handler.__class__ is _Guard or any(handler is q for q in _QUIET):
                continue
            guard = _Guard(handler)
            _signal.signal(signum, guard)
            changed.append((signum, handler, guard))
    except BaseException:
        release(run, tuple(changed))
        raise
    return tuple(changed)


def release(run: Interruptible, held: Held) -> None:
    """Put back the handlers ``hold`` guarded for ``run`` (a handler the program set meanwhile is left as it is)."""
    for signum, handler, guard in held:
        if _getsignal(signum) is guard:
            _signal.signal(signum, handler)
    if _HELD and _HELD[-1] is run:  # the innermost run: how main-thread runs end (they nest)
        _HELD.pop()
        return
    for i in range(len(_HELD) - 1, -1, -1):
        if _HELD[i] is run:
            del _HELD[i]
            break


def raised_after(
    exc: BaseException, receipt: Mapping[str, Any] | None, *, failure: BaseException | None = None
) -> BaseException:
    """``exc``, raised by the program during a run that was stopped for it, with a note saying what the receipt says
    — or, ``failure``, the host's error that left it none (raise ``exc`` where ``failure`` is handled: it is then
    ``exc``'s context too, so neither is lost)."""
    said = "no receipt could be made" if receipt is None else f"its receipt says {receipt['kuro/outcome']}"
    if failure is not None:
        said = f"{said} ({type(failure).__name__}: {failure})"
    exc.add_note(f"kuro: raised during a run, which was stopped: {said}")
    return exc


def raised_by_a_handler(exc: BaseException, held: Held) -> bool:
    """Whether ``exc`` came out of a Python signal handler of the program's — one ``held`` guarded, one a signal
    has now (installed since: unguarded), or a guard — rather than the host's own code: one of their functions
    is a frame of its traceback. (What a run's caller sees raised that no handler raised is a host failure.)"""
    handlers: list[Any] = [handler for _, handler, _ in held]
    codes = {_Guard.__call__.__code__}
    try:  # (on an error path: a handler that cannot be looked at is left out, not raised over ``exc``)
        for signum in _SIGNALS:
            handler = _getsignal(signum)
            if handler.__class__ is not int and handler is not None:
                handlers.append(handler.handler if handler.__class__ is _Guard else handler)
        for handler in handlers:
            for _ in range(4):  # a function, a bound method, a functools.partial, a callable object: its code
                code = getattr(handler, "__code__", None)
                if code is not None:
                    codes.add(code)
                    break
                handler = getattr(handler, "__func__", None) or getattr(handler, "func", None) or type(handler).__call__
    except Exception:
        pass
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False
