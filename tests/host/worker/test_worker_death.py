"""A worker that dies mid-run takes down its run, never the host: a receipt of its own, no silent retry."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

from hostkit import wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import cid_for
from kuro_fs.fs import Fs
from kuro_wasm.host.api import ProcessHandle, run, start
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker.hardening import Hardening
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.host.worker.serve import INCOMPLETE_DIR
from kuro_wasm.ledger.ledger import Ledger
from kuro_wasm.model.sessions import guest, session

WAIT = 60.0


def _running_cat(pool: WorkerPool) -> tuple[ProcessHandle, Any, MemoryBlockStore, str]:
    """A cat run that has echoed b"x" (so it is running in its worker, blocked on stdin)."""
    store = MemoryBlockStore()
    sess = session("s-death", Fs.empty(store).root)
    cid = add_guest(store, wat("cat"))
    echoed = threading.Event()
    handle = start(sess, guest(cid, "run"), store=store, isolation=pool, on_chunk=lambda s, c: echoed.set())
    assert isinstance(handle, ProcessHandle)
    handle.write(b"x")
    assert echoed.wait(WAIT)
    return handle, sess, store, cid


def test_a_worker_killed_mid_run_ends_that_run_with_worker_died_and_its_signal(pool: WorkerPool) -> None:
    handle, sess, store, cid = _running_cat(pool)
    pid = handle.worker_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    receipt = handle.wait(WAIT)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("worker-died", 137)
    assert receipt["kuro/worker"]["signal"] == "SIGKILL" and receipt["kuro/worker"]["signal-number"] == 9
    assert receipt["kuro/stdout"] == b"x"  # what the guest wrote before is kept
    assert "not retried" in receipt["kuro/error"]
    again = run(sess, guest(cid, "run"), store=store, isolation=pool, stdin=b"next")
    assert (again["kuro/outcome"], again["kuro/stdout"]) == ("ok", b"next")
    assert again["kuro/worker"]["pid"] != pid  # the pool replaced the worker
    assert pool.wait_ready(WAIT)


def test_a_worker_that_aborts_mid_run_is_128_plus_its_signal(pool: WorkerPool) -> None:
    handle, *_ = _running_cat(pool)
    pool.probe_async("abort")
    receipt = handle.wait(WAIT)
    worker = receipt["kuro/worker"]
    assert receipt["kuro/outcome"] == "worker-died"
    # PID 1 of its own pid namespace ignores a signal it sends itself: abort() then ends it with SIGSEGV
    assert worker["signal"] == ("SIGSEGV" if "pid-namespace" in worker["hardening"] else "SIGABRT")
    assert receipt["kuro/exit-code"] == 128 + worker["signal-number"]


def test_runs_queued_behind_a_dying_worker_run_on_another_not_retried(pool: WorkerPool) -> None:
    handle, sess, store, _ = _running_cat(pool)
    hello = add_guest(store, wat("hello"))
    behind = start(sess, guest(hello, "run"), store=store, isolation=pool)  # pipelined behind the cat run
    assert isinstance(behind, ProcessHandle)
    pid = handle.worker_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert handle.wait(WAIT)["kuro/outcome"] == "worker-died"
    receipt = behind.wait(WAIT)
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"]) == ("ok", b"hello, kuro\n")  # it had not started
    assert receipt["kuro/worker"]["pid"] != pid


def test_a_block_that_does_not_hash_to_its_cid_gets_the_worker_killed(pool: WorkerPool) -> None:
    handle, _, store, _ = _running_cat(pool)
    pool.probe_async("lie-block")
    receipt = handle.wait(WAIT)
    assert (receipt["kuro/outcome"], receipt["kuro/worker"]["signal"]) == ("worker-died", "SIGKILL")
    assert "do not hash" in receipt["kuro/error"]
    assert not store.has(cid_for(b"what was claimed"))


def test_a_ledgered_run_records_worker_died_and_replays_it_never_running_again(
    pool: WorkerPool, tmp_path: Path
) -> None:
    store = MemoryBlockStore()
    sess = session("s-ledger", Fs.empty(store).root)
    cid = add_guest(store, wat("flood"))
    spinning = threading.Event()
    with Ledger(tmp_path / "ledger.sqlite", store=store) as ledger:
        box: dict[str, Any] = {}

        def go() -> None:
            box["first"] = ledger.run(
                "op-1", sess, guest(cid, "write_then_spin"), isolation=pool, on_chunk=lambda s, c: spinning.set()
            )

        runner = threading.Thread(target=go)
        runner.start()
        assert spinning.wait(WAIT)
        os.kill(pool.pids[0], signal.SIGKILL)
        runner.join(WAIT)
        first = box["first"]
        assert (first["kuro/outcome"], first["kuro/exit-code"], first["kuro/replayed"]) == ("worker-died", 137, False)
        again = ledger.run("op-1", sess, guest(cid, "write_then_spin"), isolation=pool)
        assert (again["kuro/outcome"], again["kuro/replayed"]) == ("worker-died", True)


def test_a_worker_past_its_cpu_limit_dies_and_says_so() -> None:
    store = MemoryBlockStore()
    sess = session("s-cpu", Fs.empty(store).root)
    cid = add_guest(store, wat("spin"))
    with WorkerPool(1, spare=0, hardening=Hardening(cpu_seconds=1)) as small:
        receipt = run(sess, guest(cid, "run"), store=store, isolation=small, timeout_ms=60_000)
    assert receipt["kuro/outcome"] == "worker-died"
    assert receipt["kuro/worker"]["signal"] in ("SIGXCPU", "SIGKILL")


def test_a_frozen_worker_is_killed_by_the_host_and_the_run_ends_with_its_stop(pool: WorkerPool) -> None:
    handle, *_ = _running_cat(pool)
    pid = handle.worker_pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # the worker can no longer honour anything
    handle.kill()
    receipt = handle.wait(WAIT)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("cancelled", 130)
    assert "the host killed it" in receipt["kuro/error"] and receipt["kuro/worker"]["signal"] == "SIGKILL"


def test_a_new_fs_root_that_is_not_complete_is_not_believed_and_leaves_nothing_in_the_store(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess = session("s-root", Fs.empty(store).root, "terminal-build")
    cid = add_guest(store, wat("fs-write"))
    before = set(store.cids())
    assert pool.probe("lie-root") == {"armed": True}
    receipt = run(sess, guest(cid, "run"), store=store, isolation=pool)
    assert (receipt["kuro/outcome"], receipt["kuro/worker"]["signal"]) == ("worker-died", "SIGKILL")
    assert "neither in the store nor handed back" in receipt["kuro/error"]
    assert "kuro/fs-root-after" not in receipt
    assert set(store.cids()) == before  # not the lie, nor the blocks the guest's writes handed back


def test_a_block_handed_back_in_one_run_is_not_believed_as_a_root_in_a_later_one(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess = session("s-plant", Fs.empty(store).root, "terminal-build")
    cid = add_guest(store, wat("fs-write"))
    assert pool.probe("plant") == {"armed": True}  # hand back an incomplete directory, do not claim it
    planted = run(sess, guest(cid, "run"), store=store, isolation=pool)
    assert planted["kuro/outcome"] == "ok"
    assert not store.has(cid_for(INCOMPLETE_DIR, "dag-cbor"))  # not under the believed root: not kept
    assert Fs(store, planted["kuro/fs-root-after"]).read("out/hello.txt").value == b"written by a guest"
    assert pool.probe("claim") == {"armed": True}  # now claim it as a root, handing nothing back
    claimed = run(sess, guest(cid, "run"), store=store, isolation=pool)
    assert claimed["kuro/outcome"] == "worker-died" and "kuro/fs-root-after" not in claimed
    assert "is neither in the block store nor handed back" in claimed["kuro/error"]


def test_a_ctrl_c_that_reaches_a_worker_blocked_in_read_leaves_its_run_alone(pool: WorkerPool) -> None:
    # A terminal's Ctrl-C reaches every process of its group, the workers too: the host decides what it cancels.
    handle, *_ = _running_cat(pool)
    assert handle.worker_pid is not None
    os.kill(handle.worker_pid, signal.SIGINT)
    handle.write(b"y")
    handle.close_stdin()
    receipt = handle.wait(WAIT)
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"]) == ("ok", b"xy")


def test_a_ctrl_c_that_reaches_a_worker_running_wasm_leaves_its_run_alone(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    wrote = threading.Event()
    handle = start(
        session("s-sigint", Fs.empty(store).root),
        guest(add_guest(store, wat("flood")), "write_then_spin"),
        store=store,
        isolation=pool,
        on_chunk=lambda s, c: wrote.set(),
    )
    assert isinstance(handle, ProcessHandle) and wrote.wait(WAIT)
    assert handle.worker_pid is not None
    os.kill(handle.worker_pid, signal.SIGINT)  # lands in the epoch check the wakeup makes (it used to abort there)
    handle.kill()
    receipt = handle.wait(WAIT)
    assert (receipt["kuro/outcome"], len(receipt["kuro/stdout"])) == ("cancelled", 1024)
