"""The epoch ticker is event-driven: it ticks when a live run's deadline is due, a stop ticks at once.

A running guest's epoch callback asks its run whether to stop; each ask takes the GIL. These tests count
the asks of one CPU-bound guest: with a far deadline and no stop, none happen however long it loops; a
stop (kill, cap, …) and the deadline still end an endless loop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import wasmtime
from hostkit import wat

from kuro_wasm.host.context import RunContext
from kuro_wasm.host.engine import (
    EngineConfig,
    engine_for,
    install_interrupt,
    live_run,
    remove_interrupt,
    watch_signals_in_runs,
)

HANG_GUARD = 10.0  # seconds: only so a broken ticker fails instead of hanging the suite
_SPIN = str(Path(__file__).resolve().parents[2] / "guests" / "spin.wat")


def _script(tmp_path: Path, source: str, *args: str, hang: str) -> subprocess.CompletedProcess[str]:
    """Run ``source`` in a fresh interpreter (the ticker's state starts clean); a hang fails with ``hang``."""
    script = tmp_path / "script.py"
    script.write_text(source, encoding="utf-8")
    try:
        return subprocess.run(
            [sys.executable, str(script), *args], capture_output=True, text=True, timeout=HANG_GUARD + 50
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(hang) from None


COUNT = 200_000_000  # iterations of spin's ``count``: a fraction of a second of pure wasm


class CountingRun(RunContext):
    """A run context that counts how often the epoch callback asks it."""

    asks: int = 0

    def should_stop(self) -> str | None:
        self.asks += 1
        return super().should_stop()


def _spin(
    run: CountingRun, export: str, *args: int, then: Callable[[], None] | None = None
) -> tuple[float, str | None]:
    """Run spin's ``export`` under ``run`` (registered with the ticker at its deadline): (seconds, error).

    ``then`` is called in a new thread 20 ms after the call into wasm begins."""
    engine = engine_for(EngineConfig())
    store = wasmtime.Store(engine)
    key = install_interrupt(store, run)
    run.asks = 0  # install_interrupt asked once; only the callback's asks count
    try:
        instance = wasmtime.Instance(store, wasmtime.Module(engine, wat("spin")), [])
        func = instance.exports(store)[export]
        assert isinstance(func, wasmtime.Func)
        began = time.monotonic()
        if then is not None:
            threading.Timer(0.02, then).start()
        with live_run(run.deadline):
            try:
                func(store, *args)
            except wasmtime.WasmtimeError as err:
                return time.monotonic() - began, str(err)
        return time.monotonic() - began, None
    finally:
        remove_interrupt(key)


def test_a_run_with_a_far_deadline_is_never_asked_while_it_loops() -> None:
    run = CountingRun(grant=frozenset(), emit=lambda _n, _d: True, deadline=time.monotonic() + 60)
    took, error = _spin(run, "count", COUNT)
    assert error is None and run.stop_reason is None
    # A 1 ms ticker asked once per millisecond (hundreds of times here); the event-driven one never.
    assert run.asks == 0, f"{run.asks} asks in {took * 1000:.0f} ms"


def test_a_stop_from_another_thread_ends_an_endless_loop_with_a_far_deadline() -> None:
    run = CountingRun(grant=frozenset(), emit=lambda _n, _d: True, deadline=time.monotonic() + 60)
    took, error = _spin(run, "run", then=lambda: run.stop("cancelled"))
    assert error is not None and "cancelled" in error and run.stop_reason == "cancelled"
    assert took < HANG_GUARD


def test_the_deadline_ends_an_endless_loop() -> None:
    run = CountingRun(grant=frozenset(), emit=lambda _n, _d: True, deadline=time.monotonic() + 0.05)
    took, error = _spin(run, "run")
    assert error is not None and "timeout" in error and run.stop_reason == "timeout"
    assert took < HANG_GUARD


def test_a_stop_before_the_store_is_armed_still_ends_the_loop() -> None:
    # The stop's interrupt ticked no store of this run (none was armed yet): arming it honours the stop.
    run = CountingRun(grant=frozenset(), emit=lambda _n, _d: True, deadline=time.monotonic() + 60)
    run.stop("cancelled")
    _took, error = _spin(run, "run")
    assert error is not None and "cancelled" in error


def test_a_past_due_run_inside_a_host_call_is_still_stopped_when_it_returns_to_wasm() -> None:
    # The ticker keeps ticking while a run past its deadline is live: a guest whose callback was not reached
    # at the first tick (here: the deadline passed before the loop began) is stopped by a later one.
    run = CountingRun(grant=frozenset(), emit=lambda _n, _d: True, deadline=time.monotonic() + 0.01)
    engine = engine_for(EngineConfig())
    store = wasmtime.Store(engine)
    key = install_interrupt(store, run)
    try:
        instance = wasmtime.Instance(store, wasmtime.Module(engine, wat("spin")), [])
        func = instance.exports(store)["run"]
        assert isinstance(func, wasmtime.Func)
        with live_run(run.deadline):
            time.sleep(0.05)  # past the deadline, outside wasm: the first tick finds nothing to stop
            try:
                func(store)
            except wasmtime.WasmtimeError as err:
                assert "timeout" in str(err)
            else:
                raise AssertionError("the loop must be stopped")
    finally:
        remove_interrupt(key)


def test_a_process_that_says_it_has_no_python_signal_handler_leaves_the_wakeup_fd_alone_in_main_thread_runs() -> None:
    assert threading.current_thread() is threading.main_thread()
    seen: list[int] = []

    def wakeup_fd_in_a_run() -> int:
        with live_run(time.monotonic() + 60):
            current = signal.set_wakeup_fd(-1)
            signal.set_wakeup_fd(current, warn_on_full_buffer=False)
            return current

    before = signal.set_wakeup_fd(-1)
    try:
        seen.append(wakeup_fd_in_a_run())  # watched (the default): the ticker's pipe, while the run lasts
        watch_signals_in_runs(False)
        seen.append(wakeup_fd_in_a_run())
    finally:
        watch_signals_in_runs(True)
        signal.set_wakeup_fd(before)
    assert seen[0] != -1 and seen[1] == -1


@pytest.mark.parametrize("wakeup_fd", ["none", "the program's own"])
def test_a_signal_handler_runs_while_the_main_thread_runs_wasm(wakeup_fd: str) -> None:
    # Python runs a signal handler only when the main thread runs Python code: in a wasm loop, that is its
    # next epoch callback. A signal must tick (through Python's wakeup fd), or, when the program has a
    # wakeup fd of its own (an asyncio loop), the run is ticked every millisecond as before.
    assert threading.current_thread() is threading.main_thread()
    run = CountingRun(grant=frozenset(), emit=lambda _n, _d: True, deadline=time.monotonic() + HANG_GUARD)
    handled: list[bool] = []

    def handler(_signum: int, _frame: object) -> None:
        handled.append(time.monotonic() < run.deadline)  # False: only the deadline's tick let it run
        run.stop("cancelled")

    previous = signal.signal(signal.SIGUSR1, handler)
    theirs = os.pipe()
    os.set_blocking(theirs[1], False)
    before = signal.set_wakeup_fd(theirs[1] if wakeup_fd != "none" else -1)
    try:
        _took, error = _spin(run, "run", then=lambda: os.kill(os.getpid(), signal.SIGUSR1))
        assert signal.set_wakeup_fd(before) == (theirs[1] if wakeup_fd != "none" else -1)  # given back
    finally:
        signal.set_wakeup_fd(before)
        signal.signal(signal.SIGUSR1, previous)
        for fd in theirs:
            os.close(fd)
    assert handled == [True] and error is not None and "cancelled" in error


_FORK_DURING_A_RUN = """
import os, sys, time
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import run, start
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest, session

store = MemoryBlockStore()
spin = add_guest(store, open(sys.argv[1], encoding="utf-8").read())
sess = session("s-fork", Fs.empty(store).root, "terminal-repo", grant=["guest/invoke"])
assert run(sess, guest(spin, "run"), store=store, home=False, timeout_ms=1)["kuro/outcome"] == "timeout"  # compiled
live = start(sess, guest(spin, "run"), store=store, home=False)  # the ticker thread is alive while this runs
pid = os.fork()
if pid == 0:  # the child: the parent's ticker thread does not exist here
    receipt = run(sess, guest(spin, "run"), store=store, home=False, timeout_ms=50)
    os.write(1, receipt["kuro/outcome"].encode())
    os._exit(0)
live.close()
deadline = time.monotonic() + float(sys.argv[2])
while not os.waitpid(pid, os.WNOHANG)[0]:
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("hung")
        break
    time.sleep(0.01)
"""


def test_a_child_forked_while_the_ticker_runs_still_meets_its_deadline(tmp_path: Path) -> None:
    # The child inherits the ticker's state (a thread that is not there, a pipe shared with the parent, maybe a
    # held lock): it must tick for its own runs, or a deadline there is never met (it hung).
    done = _script(tmp_path, _FORK_DURING_A_RUN, _SPIN, str(HANG_GUARD), hang="the child's deadline was never met")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "timeout", done.stdout


_MANY_FDS = """
import os, resource, sys
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest, session

resource.setrlimit(resource.RLIMIT_NOFILE, (2048, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # the ticker's pipe gets fds past 1024
store = MemoryBlockStore()
spin = add_guest(store, open(sys.argv[1], encoding="utf-8").read())
sess = session("s-fds", Fs.empty(store).root, "terminal-repo", grant=["guest/invoke"])
print(run(sess, guest(spin, "run"), store=store, home=False, timeout_ms=50)["kuro/outcome"], end="")
"""


def test_the_deadline_holds_in_a_process_with_more_than_1024_open_files(tmp_path: Path) -> None:
    # select() takes no fd past FD_SETSIZE (1024): a server with many connections open made the ticker thread
    # die at its first wait, and every run's deadline was then never met (an endless guest hung for ever).
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip("the hard limit on open files is below 2048 here")
    done = _script(tmp_path, _MANY_FDS, _SPIN, hang="the run's deadline was never met")
    assert (done.returncode, done.stdout) == (0, "timeout"), done.stderr


_SIGNAL_WHILE_AN_ENGINE_IS_MADE = """
import os, signal, wasmtime
from kuro_wasm.host import engine
from kuro_wasm.host.context import RunContext

run = RunContext(grant=frozenset(), emit=lambda _n, _d: True)
signal.signal(signal.SIGUSR1, lambda _s, _f: run.stop("cancelled"))  # as run()'s Ctrl-C handler does
real = wasmtime.Engine


def engine_then_a_signal(config):
    made = real(config)
    os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs at the next bytecode: inside engine_for
    return made


wasmtime.Engine = engine_then_a_signal
engine.engine_for(engine.EngineConfig(fuel=True))
print(run.stop_reason, end="")
"""


def test_a_stop_from_a_signal_handler_while_the_first_engine_is_made_does_not_deadlock(tmp_path: Path) -> None:
    # A stop interrupts every engine, under the engines' lock; a signal handler that stops a run (Ctrl-C during
    # run() on the main thread) runs on the main thread, which may be inside engine_for holding that lock.
    done = _script(
        tmp_path,
        _SIGNAL_WHILE_AN_ENGINE_IS_MADE,
        hang="deadlocked: the handler's stop waited for the lock its own thread held",
    )
    assert (done.returncode, done.stdout) == (0, "cancelled"), done.stderr


_RUN_FROM_A_HANDLER_AS_THE_TICKER_STARTS = """
import os, signal, sys, threading
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest, session

store = MemoryBlockStore()
spin = add_guest(store, open(sys.argv[1], encoding="utf-8").read())
sess = session("s-handler", Fs.empty(store).root, "terminal-repo", grant=["guest/invoke"])
inner = []


def handler(_signum, _frame):
    inner.append(run(sess, guest(spin, "count", [1]), store=store, home=False))


signal.signal(signal.SIGUSR1, handler)
real_start = threading.Thread.start


def start_then_a_signal(self):
    real_start(self)
    if self.name == "kuro-epoch-ticker":  # the handler runs at the next bytecode: inside the ticker's acquire
        os.kill(os.getpid(), signal.SIGUSR1)


threading.Thread.start = start_then_a_signal
outer = run(sess, guest(spin, "count", [1]), store=store, home=False)
print(outer["kuro/outcome"], [r["kuro/outcome"] for r in inner], end="")
"""


def test_a_run_made_by_a_signal_handler_while_the_ticker_starts_does_not_deadlock(tmp_path: Path) -> None:
    done = _script(
        tmp_path,
        _RUN_FROM_A_HANDLER_AS_THE_TICKER_STARTS,
        _SPIN,
        hang="deadlocked: the handler's run waited for the ticker lock its own thread held",
    )
    assert (done.returncode, done.stdout) == (0, "ok ['ok']"), done.stderr
