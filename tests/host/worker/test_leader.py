"""A run() caller reads its own worker's frames while it waits (leader/follower), and every promise holds as before:
its own receipt for each of several callers at once, live chunks, kill, Ctrl-C, and a worker dying under it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hostkit import wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import ProcessHandle, run, start
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.model.sessions import Session, guest, session

WAIT = 60.0


@pytest.fixture(scope="module")
def lpool() -> Iterator[WorkerPool]:
    """One active worker and a spare, never probed (a probed worker's frames are always its keeper's to read)."""
    with WorkerPool(1, spare=1) as started:
        assert started.wait_ready(WAIT)
        yield started


@pytest.fixture
def world() -> tuple[MemoryBlockStore, Session, dict[str, str]]:
    store = MemoryBlockStore()
    cids = {name: add_guest(store, wat(name)) for name in ("cat", "flood")}
    return store, session("s-leader", Fs.empty(store).root), cids


def _until(predicate: Any) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, "the condition never came"
        time.sleep(0.001)


def _echoed_on(lpool: WorkerPool, world: Any, text: bytes) -> set[threading.Thread]:
    """The threads ``cat``'s chunks came on, for a run() of it made from this thread (its receipt checked)."""
    store, sess, cids = world
    threads: set[threading.Thread] = set()
    receipt = run(
        sess,
        guest(cids["cat"], "run"),
        store=store,
        isolation=lpool,
        stdin=text,
        on_chunk=lambda s, c: threads.add(threading.current_thread()),
    )
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"]) == ("ok", text)
    return threads


def test_a_run_caller_reads_its_own_frames_and_gets_its_chunks_on_its_own_thread(lpool: WorkerPool, world: Any) -> None:
    assert _echoed_on(lpool, world, b"mine") == {threading.current_thread()}  # no thread of the pool carried it


def test_callers_at_once_each_get_their_own_receipt_beside_started_runs(lpool: WorkerPool, world: Any) -> None:
    store, sess, cids = world
    results: dict[str, list[Any]] = {}

    def caller(name: str) -> None:
        results[name] = [
            run(sess, guest(cids["cat"], "run"), store=store, isolation=lpool, stdin=f"{name}-{i}".encode())
            for i in range(8)
        ]

    def starter() -> None:
        handles = [
            start(sess, guest(cids["cat"], "run"), store=store, isolation=lpool, stdin=f"s-{i}".encode())
            for i in range(8)
        ]
        started = [h for h in handles if isinstance(h, ProcessHandle)]
        assert len(started) == len(handles)
        for h in started:
            h.close_stdin()
        results["s"] = [h.wait(WAIT) for h in started]

    workers = [threading.Thread(target=caller, args=(n,)) for n in "abcd"] + [threading.Thread(target=starter)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(WAIT)
    assert sorted(results) == ["a", "b", "c", "d", "s"]
    for name, receipts in results.items():
        assert [(r["kuro/outcome"], r["kuro/stdout"]) for r in receipts] == [
            ("ok", f"{name}-{i}".encode()) for i in range(8)
        ]


def test_chunks_reach_a_reading_caller_while_the_guest_runs(lpool: WorkerPool, world: Any) -> None:
    store, sess, cids = world
    kills: list[Any] = []
    receipt = run(
        sess,
        guest(cids["flood"], "write_then_spin"),
        store=store,
        isolation=lpool,
        timeout_ms=int(WAIT * 1000),  # a chunk held back to the end would make this a timeout, not a kill
        on_start=kills.append,
        on_chunk=lambda s, c: kills[0](),
    )
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("cancelled", 130)
    assert receipt["kuro/stdout"]


def test_a_worker_killed_under_a_reading_caller_ends_its_run_and_the_run_behind_goes_elsewhere(
    lpool: WorkerPool, world: Any
) -> None:
    store, sess, cids = world
    pid = lpool.pids[0]
    behind: list[dict[str, Any]] = []
    second = threading.Thread(
        target=lambda: behind.append(run(sess, guest(cids["cat"], "run"), store=store, isolation=lpool, stdin=b"b"))
    )

    def killing(_s: object, _c: object) -> None:  # on this (reading) thread, while the guest spins
        if second.is_alive() or behind:
            return
        second.start()
        conn = next(c for c in lpool._active if c.pid == pid)
        _until(lambda: len(conn.outstanding) == 2)  # queued behind this run, on the same worker, not started
        os.kill(pid, signal.SIGKILL)

    receipt = run(sess, guest(cids["flood"], "write_then_spin"), store=store, isolation=lpool, on_chunk=killing)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("worker-died", 137)
    assert receipt["kuro/worker"]["signal"] == "SIGKILL"
    second.join(WAIT)
    assert (behind[0]["kuro/outcome"], behind[0]["kuro/stdout"]) == ("ok", b"b")  # its first run, elsewhere
    assert behind[0]["kuro/worker"]["pid"] != pid
    assert lpool.wait_ready(WAIT)


def test_ctrl_c_while_a_main_thread_caller_reads_kills_the_run_and_returns_its_receipt(
    lpool: WorkerPool, world: Any, request: pytest.FixtureRequest
) -> None:
    assert threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # the precondition (see test_host_limits)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    store, sess, cids = world
    fired: list[bool] = []

    def on_chunk(_s: object, _c: object) -> None:
        if not fired:  # the guest spins now, writing nothing: the caller blocks reading when the signal comes
            fired.append(True)
            threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT)).start()

    receipt = run(
        sess,
        guest(cids["flood"], "write_then_spin"),
        store=store,
        isolation=lpool,
        timeout_ms=int(WAIT * 1000),
        on_chunk=on_chunk,
    )
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("cancelled", 130)
    with pytest.raises(KeyboardInterrupt):  # outside a run, Ctrl-C is Python's own KeyboardInterrupt again
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(WAIT)


def _quiet_program(request: pytest.FixtureRequest) -> None:
    """On the main thread, this test's program has SIGINT ignored and no Python signal handler (pytest-timeout's
    SIGALRM one set aside) until the test ends."""
    assert threading.current_thread() is threading.main_thread()
    for signum in (signal.SIGINT, signal.SIGALRM):
        previous = signal.signal(signum, signal.SIG_IGN)
        request.addfinalizer(lambda signum=signum, previous=previous: signal.signal(signum, previous))


def test_a_main_thread_caller_with_ctrl_c_ignored_reads_its_own_frames_and_leaves_the_handler_as_it_was(
    lpool: WorkerPool, world: Any, request: pytest.FixtureRequest
) -> None:
    # SIGINT ignored (a program a shell started in the background): nothing can raise KeyboardInterrupt into the
    # caller, so it reads its own frames as a caller with Python's own handler does, instead of waiting for the
    # worker's keeper thread to hand it its receipt.
    _quiet_program(request)
    assert _echoed_on(lpool, world, b"quiet") == {threading.current_thread()}
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # the program's choice is left as it was


def test_a_main_thread_caller_with_ctrl_c_ignored_and_a_handler_of_its_own_still_reads_its_own_frames(
    lpool: WorkerPool, world: Any, request: pytest.FixtureRequest
) -> None:
    # A program with a Python handler of its own (a SIGTERM that exits, a SIGALRM timeout) may have it raise
    # anywhere, inside a frame too: the handler is guarded while the caller reads (a raise stops the run; see
    # tests/host/test_program_signal_handlers.py), so the caller reads its own frames all the same (before, its
    # worker's keeper thread read them: a hand-over per run), and the handler is the program's again after.
    _quiet_program(request)

    def handler(_signum: int, _frame: object) -> None:
        pass

    before = signal.signal(signal.SIGUSR2, handler)  # (the one handler of its own)
    request.addfinalizer(lambda: signal.signal(signal.SIGUSR2, before))
    assert _echoed_on(lpool, world, b"guarded") == {threading.current_thread()}
    assert signal.getsignal(signal.SIGUSR2) is handler


def test_a_started_run_is_read_by_the_pool_while_its_handle_is_not_waited_on(lpool: WorkerPool, world: Any) -> None:
    store, sess, cids = world
    seen = threading.Event()
    handle = start(sess, guest(cids["cat"], "run"), store=store, isolation=lpool, on_chunk=lambda s, c: seen.set())
    assert isinstance(handle, ProcessHandle)
    handle.write(b"live")
    assert seen.wait(WAIT)  # nobody waits on the handle: the worker's keeper reads its chunks
    handle.close_stdin()
    assert handle.wait(WAIT)["kuro/stdout"] == b"live"


def test_a_run_made_from_on_chunk_on_the_same_worker_ends_and_so_does_the_run_it_came_from(
    lpool: WorkerPool, world: Any
) -> None:
    """The reading caller's on_chunk runs another guest, pipelined behind its own run on the one worker: the outer
    run's frames are read by the worker's keeper meanwhile (before, nobody read them and both runs hung forever)."""
    store, sess, cids = world
    inner: list[dict[str, Any]] = []
    outer: list[dict[str, Any]] = []

    def nested(_s: object, _c: object) -> None:
        if not inner:
            inner.append(run(sess, guest(cids["cat"], "run"), store=store, isolation=lpool, stdin=b"in"))

    caller = threading.Thread(
        target=lambda: outer.append(
            run(sess, guest(cids["cat"], "run"), store=store, isolation=lpool, stdin=b"out", on_chunk=nested)
        ),
        daemon=True,
    )
    caller.start()
    caller.join(WAIT)
    assert not caller.is_alive(), "the outer run() never returned"
    assert (outer[0]["kuro/outcome"], outer[0]["kuro/stdout"]) == ("ok", b"out")
    assert (inner[0]["kuro/outcome"], inner[0]["kuro/stdout"]) == ("ok", b"in")


def test_a_run_made_from_a_started_runs_on_chunk_on_the_same_worker_ends_and_so_does_the_started_run(
    lpool: WorkerPool, world: Any
) -> None:
    """A started run's chunks reach on_chunk on the worker's keeper; a run() made there, pipelined behind it on the
    one worker, gets a stand-in reader for the keeper meanwhile (before, both hung forever)."""
    store, sess, cids = world
    inner: list[dict[str, Any]] = []

    def nested(_s: object, _c: object) -> None:
        if not inner:
            inner.append(run(sess, guest(cids["cat"], "run"), store=store, isolation=lpool, stdin=b"in"))

    handle = start(sess, guest(cids["cat"], "run"), store=store, isolation=lpool, stdin=b"out", on_chunk=nested)
    assert isinstance(handle, ProcessHandle)
    handle.close_stdin()
    outer = handle.wait(WAIT)  # TimeoutError if it never ends
    assert (outer["kuro/outcome"], outer["kuro/stdout"]) == ("ok", b"out")
    _until(lambda: inner)  # its receipt may come while on_chunk still waits for the run it made
    assert (inner[0]["kuro/outcome"], inner[0]["kuro/stdout"]) == ("ok", b"in")


def test_closing_the_pool_ends_the_run_leading_and_the_runs_queued_behind_it_in_its_worker(world: Any) -> None:
    """Three callers on one worker: one reads its running guest's frames, one is queued in the worker behind it, one
    waits in the pool's queue. close() ends all three cancelled (before, the one queued in the worker went back to a
    queue nobody served any more, and its caller waited forever, past its deadline)."""
    store, sess, cids = world
    results: list[dict[str, Any]] = []
    running = threading.Event()
    with WorkerPool(1, spare=0) as pool:
        assert pool.wait_ready(WAIT)

        def caller() -> None:
            results.append(
                run(
                    sess,
                    guest(cids["flood"], "write_then_spin"),
                    store=store,
                    isolation=pool,
                    timeout_ms=int(WAIT * 1000),
                    on_chunk=lambda s, c: running.set(),
                )
            )

        callers = [threading.Thread(target=caller, daemon=True) for _ in range(3)]
        for t in callers:
            t.start()
        assert running.wait(WAIT)
        _until(lambda: len(pool._active[0].outstanding) == 2)  # the second is queued in the worker
        pool.close()
        for t in callers:
            t.join(WAIT)
            assert not t.is_alive(), "a caller never got its receipt"
    assert sorted(r["kuro/outcome"] for r in results) == ["cancelled"] * 3


def test_ctrl_c_while_a_main_thread_caller_waits_for_its_turn_is_acted_on_at_once(
    lpool: WorkerPool, world: Any, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The caller waits on the pool's condition for a worker (the only one is busy); the Ctrl-C handler may not take
    # the pool's lock (it may run on a thread holding it), and the wait used to see the Ctrl-C only at its recheck.
    monkeypatch.setattr("kuro_wasm.host.worker.pool._LEAD_RECHECK_S", WAIT)  # no recheck comes to the rescue
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    store, sess, cids = world
    busy = threading.Event()
    spec = guest(cids["flood"], "write_then_spin")
    blocker = start(
        sess, spec, store=store, isolation=lpool, timeout_ms=int(WAIT * 1000), on_chunk=lambda *_: busy.set()
    )
    assert isinstance(blocker, ProcessHandle) and busy.wait(WAIT)

    def on_start(_kill: object) -> None:  # then the caller submits, and waits for the busy worker
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()

    try:
        receipt = run(sess, spec, store=store, isolation=lpool, timeout_ms=int(WAIT * 1000), on_start=on_start)
        assert (receipt["kuro/outcome"], receipt["kuro/stdout"]) == ("cancelled", b"")
        assert not blocker.done  # the caller did not wait for the worker to come free
    finally:
        blocker.kill()
        blocker.wait(WAIT)
