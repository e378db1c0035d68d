"""The guard of the program's signal handlers when the host itself fails around a main-thread run.

A guarded handler that raised and then a host failure must lose neither; a host bug raised while a main-thread
caller reads its worker's frames is the host's, never called a signal handler's; a guard that cannot be put in
place leaves no run behind it. Runs in this process, on pytest's main thread (no real signal is sent: the
failures are injected where they would land).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hostkit import make_fs, make_session, wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.errors import HostError
from kuro_wasm.host import api, interrupts
from kuro_wasm.host.job import Job
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.host.worker.run import RemoteRun
from kuro_wasm.model.sessions import Session, guest


@pytest.fixture
def setting() -> Iterator[tuple[MemoryBlockStore, Session, str]]:
    assert signal.getsignal(signal.SIGINT) in (signal.default_int_handler, api._on_sigint)  # run() claims Ctrl-C, leads
    store = MemoryBlockStore()
    cid = add_guest(store, wat("spin"))
    yield store, make_session(make_fs(store), grant=["guest/invoke"]), cid
    assert not interrupts._HELD and not api._MAIN_RUNS  # nothing left behind


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    with WorkerPool(1, spare=0) as pool:
        yield pool


def _said(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any] | None]:
    """The receipts run() raises an exception after (through interrupts.raised_after)."""
    said: list[dict[str, Any] | None] = []
    told = interrupts.raised_after

    def spy(exc: BaseException, receipt: dict[str, Any] | None, **kw: Any) -> BaseException:
        said.append(receipt)
        return told(exc, receipt, **kw)

    monkeypatch.setattr(interrupts, "raised_after", spy)
    return said


def test_a_handlers_exception_then_a_host_failure_in_process_raises_the_handlers_with_the_failure_kept(
    setting: tuple[MemoryBlockStore, Session, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guarded SIGTERM handler exited (the run stopped for it), then the Job could build no receipt: run()
    raised only the HostError, and the program's SystemExit was lost."""
    store, sess, cid = setting

    def execute(job: Job) -> dict[str, Any]:
        job.interrupted(SystemExit(3))
        raise HostError("no receipt could be built")

    monkeypatch.setattr(Job, "execute", execute)
    with pytest.raises(SystemExit) as info:
        api.run(sess, guest(cid, "count", [1]), store=store, home=False)
    assert info.value.args == (3,)
    assert isinstance(info.value.__context__, HostError)
    assert any("HostError: no receipt could be built" in note for note in info.value.__notes__)


def test_a_handlers_exception_then_a_host_failure_while_reading_frames_raises_the_handlers_with_the_failure_kept(
    setting: tuple[MemoryBlockStore, Session, str], pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, sess, cid = setting
    lead = WorkerPool.lead

    def failing(self: WorkerPool, run: RemoteRun) -> dict[str, Any]:
        lead(self, run)
        run.interruption = SystemExit(3)  # as the guard keeps a handler's exception
        raise HostError("the worker's channel broke")

    monkeypatch.setattr(WorkerPool, "lead", failing)
    with pytest.raises(SystemExit) as info:
        api.run(sess, guest(cid, "count", [1]), store=store, home=False, isolation=pool)
    assert info.value.args == (3,)
    assert isinstance(info.value.__context__, HostError)
    assert any("HostError: the worker's channel broke" in note for note in info.value.__notes__)


def _once(raise_it: Callable[[], None]) -> Callable[[WorkerPool, RemoteRun], dict[str, Any]]:
    """WorkerPool.lead that runs ``raise_it`` the first time (the run still live), then leads as it does."""
    lead = WorkerPool.lead
    calls: list[int] = []

    def once(self: WorkerPool, run: RemoteRun) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            raise_it()
        return lead(self, run)

    return once


def test_a_host_bug_while_reading_frames_is_the_hosts_not_a_signal_handlers(
    setting: tuple[MemoryBlockStore, Session, str], pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TypeError of the host's own in WorkerPool.lead was recorded "interrupted: a signal handler raised
    TypeError", as if the program had stopped the run."""
    store, sess, cid = setting

    def bug() -> None:
        raise TypeError("a host bug")

    said = _said(monkeypatch)
    monkeypatch.setattr(WorkerPool, "lead", _once(bug))
    with pytest.raises(TypeError, match="a host bug"):
        api.run(sess, guest(cid, "run", []), store=store, home=False, isolation=pool, timeout_ms=20000)
    [receipt] = said
    assert receipt is not None and receipt["kuro/outcome"] == "cancelled"
    assert "signal" not in receipt["kuro/error"] and "interrupted" not in receipt["kuro/error"]
    assert receipt["kuro/error"] == "host failure while its run() caller waited: TypeError: a host bug"


def test_a_handler_raising_unguarded_while_reading_frames_is_still_the_handlers(
    setting: tuple[MemoryBlockStore, Session, str], pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler the guard does not cover (installed during the run) that raises: the program stopped the run."""
    store, sess, cid = setting

    def handler(_signum: int, _frame: Any) -> None:
        raise TimeoutError("the program's own timeout")

    def lands() -> None:  # the handler installed during the run, and its signal landing in the frame read
        signal.signal(signal.SIGUSR1, handler)
        handler(signal.SIGUSR1, sys._getframe())

    said = _said(monkeypatch)
    monkeypatch.setattr(WorkerPool, "lead", _once(lands))
    try:
        with pytest.raises(TimeoutError, match="the program's own timeout"):
            api.run(sess, guest(cid, "run", []), store=store, home=False, isolation=pool, timeout_ms=20000)
    finally:
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    [receipt] = said
    assert receipt is not None
    assert receipt["kuro/error"] == "interrupted: a signal handler raised TimeoutError: the program's own timeout"


@pytest.mark.parametrize("isolation", ["in-process", "process"])
def test_a_guard_that_cannot_be_put_in_place_leaves_no_run_held_nor_ctrl_c_routed_to_it(
    setting: tuple[MemoryBlockStore, Session, str], pool: WorkerPool, monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    """hold() raised before run()'s ``try``: the run stayed in interrupts._HELD and api._MAIN_RUNS for good
    (later Ctrl-C cancelled a run long gone; later guards stopped it again)."""
    store, sess, cid = setting

    def broken(_signum: int) -> Any:
        raise RuntimeError("cannot read the handler")

    monkeypatch.setattr(interrupts, "_getsignal", broken)
    with pytest.raises(RuntimeError, match="cannot read the handler"):
        api.run(
            sess,
            guest(cid, "count", [1]),
            store=store,
            home=False,
            isolation=None if isolation == "in-process" else pool,
        )
    assert not interrupts._HELD and not api._MAIN_RUNS
