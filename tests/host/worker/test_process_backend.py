"""isolation="process": everything works across the process boundary as it does in-process."""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hostkit import wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.errors import ModelError
from kuro_wasm.host.api import Handle, ProcessHandle, run, run_async, start
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.model import stream as _stream
from kuro_wasm.model.sessions import guest, session

WAIT = 60.0  # a bound on waiting for an event, never a measured duration


def _setup(store: Any, name: str, mode: str = "terminal-repo") -> tuple[Any, str]:
    fs = Fs.empty(store).write("notes/a.txt", b"alpha").fs.write("greeting.txt", b"hi there").fs
    return session("s-proc", fs.root, mode), add_guest(store, wat(name))


def _started(handle: Handle | dict[str, Any]) -> ProcessHandle:
    assert isinstance(handle, ProcessHandle), handle
    return handle


def test_chunks_reach_on_chunk_while_the_guest_is_still_running(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "cat")
    seen: list[bytes] = []
    arrived = threading.Semaphore(0)

    def on_chunk(s: _stream.Stream, chunk: _stream.Chunk) -> None:
        seen.append(chunk.data)
        arrived.release()

    handle = _started(start(sess, guest(cid, "run"), store=store, isolation=pool, on_chunk=on_chunk, home=False))
    handle.write(b"first")
    assert arrived.acquire(timeout=WAIT)
    assert seen == [b"first"] and not handle.done  # the guest is blocked in read: it has not ended
    handle.write(b"second")
    assert arrived.acquire(timeout=WAIT)
    handle.close_stdin()
    receipt = handle.wait(WAIT)
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"], seen) == ("ok", b"firstsecond", [b"first", b"second"])
    assert receipt["kuro/isolation"] == "process"
    assert handle.stream.state == "exited"


def test_kill_stops_a_guest_blocked_on_stdin(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "cat")
    got = threading.Event()
    handle = _started(start(sess, guest(cid, "run"), store=store, isolation=pool, on_chunk=lambda s, c: got.set()))
    handle.write(b"x")
    assert got.wait(WAIT)
    handle.kill()
    receipt = handle.wait(WAIT)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"], receipt["kuro/stdout"]) == ("cancelled", 130, b"x")


def test_the_deadline_stops_an_infinite_loop(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "spin")
    receipt = run(sess, guest(cid, "run"), store=store, isolation=pool, timeout_ms=50)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"], receipt["kuro/timed-out?"]) == ("timeout", 124, True)
    assert receipt["kuro/limits"]["timeout-ms"] == 50


def test_the_output_cap_and_fuel_apply_in_the_worker(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, flood = _setup(store, "flood")
    capped = run(sess, guest(flood, "run"), store=store, isolation=pool, max_output_bytes=4096)
    assert (capped["kuro/outcome"], capped["kuro/stdout-bytes"], capped["kuro/truncated?"]) == (
        "output-capped",
        4096,
        True,
    )
    assert capped["kuro/dropped-bytes"] == 1024 and capped["kuro/capped-by"] == "bytes"
    chunks = run(sess, guest(flood, "run"), store=store, isolation=pool, max_output_chunks=5)
    assert (chunks["kuro/capped-by"], chunks["kuro/stdout-bytes"], chunks["kuro/dropped-bytes"]) == (
        "chunks",
        5120,
        1024,
    )
    spin = add_guest(store, wat("spin"))
    fuel = run(sess, guest(spin, "run"), store=store, isolation=pool, fuel=10_000)
    assert (fuel["kuro/outcome"], fuel["kuro/exit-code"]) == ("fuel-exhausted", 124)


def test_run_async_awaits_the_receipt_and_cancelling_kills_the_guest(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "hello")
    spin = add_guest(store, wat("spin"))

    async def main() -> tuple[dict[str, Any], bool]:
        done = await run_async(sess, guest(cid, "run"), store=store, isolation=pool)
        task = asyncio.ensure_future(run_async(sess, guest(spin, "run"), store=store, isolation=pool))
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return done, True
        return done, False

    done, cancelled = asyncio.run(main())
    assert (done["kuro/outcome"], done["kuro/stdout"], cancelled) == ("ok", b"hello, kuro\n", True)
    after = run(sess, guest(cid, "run"), store=store, isolation=pool)  # the killed spin did not wedge the worker
    assert after["kuro/outcome"] == "ok"


def test_runs_waiting_for_a_worker_can_be_killed_and_time_out_there(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "spin")
    busy = _started(start(sess, guest(cid, "run"), store=store, isolation=pool))  # holds the only active worker
    queued = _started(start(sess, guest(cid, "run"), store=store, isolation=pool))  # pipelined behind it
    waiting = _started(start(sess, guest(cid, "run"), store=store, isolation=pool))  # waits in the host
    late = _started(start(sess, guest(cid, "run"), store=store, isolation=pool, timeout_ms=1))
    assert late.wait(WAIT)["kuro/outcome"] == "timeout"
    waiting.kill()
    queued.kill()
    assert waiting.wait(WAIT)["kuro/outcome"] == "cancelled"
    assert queued.wait(WAIT)["kuro/outcome"] == "cancelled"
    assert not busy.done
    busy.kill()
    assert busy.wait(WAIT)["kuro/outcome"] == "cancelled"


def test_a_short_run_is_not_stuck_behind_a_long_one(pool2: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, spin = _setup(store, "spin")
    cat = add_guest(store, wat("cat"))
    long_a = _started(start(sess, guest(spin, "run"), store=store, isolation=pool2))
    blocked = _started(start(sess, guest(cat, "run"), store=store, isolation=pool2))
    behind = _started(start(sess, guest(cat, "run"), store=store, isolation=pool2, stdin=b"short"))
    behind.close_stdin()
    blocked.close_stdin()  # the cat run ends; its worker falls idle and takes back the run queued behind spin
    assert behind.wait(WAIT)["kuro/stdout"] == b"short"
    long_a.kill()
    assert long_a.wait(WAIT)["kuro/outcome"] == "cancelled"


def test_a_run_taken_back_by_a_worker_that_read_later_runs_gets_every_stdin_byte(pool2: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, cat = _setup(store, "cat")
    hello = add_guest(store, wat("hello"))
    first = _started(start(sess, guest(cat, "run"), store=store, isolation=pool2))  # worker 1, blocked on stdin
    second = _started(start(sess, guest(cat, "run"), store=store, isolation=pool2))  # worker 2
    echoed = threading.Event()
    moved = _started(start(sess, guest(cat, "run"), store=store, isolation=pool2, on_chunk=lambda *_: echoed.set()))
    later = _started(start(sess, guest(hello, "run"), store=store, isolation=pool2))  # behind the second: worker 2
    second.close_stdin()
    assert later.wait(WAIT)["kuro/outcome"] == "ok"  # worker 2 falls idle and takes back the run behind the first
    moved.write(b"every ")
    assert echoed.wait(WAIT)  # it runs, so on worker 2: worker 1 still runs the first
    moved.write(b"byte")
    moved.close_stdin()
    receipt = moved.wait(WAIT)
    assert (receipt["kuro/stdout"], receipt["kuro/worker"]["pid"]) == (b"every byte", later.worker_pid)
    first.close_stdin()
    assert first.wait(WAIT)["kuro/outcome"] == "ok"


def test_fs_writes_come_back_verified_into_a_memory_store(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "fs-write", "terminal-build")
    receipt = run(sess, guest(cid, "run"), store=store, isolation=pool)
    after = Fs(store, receipt["kuro/fs-root-after"])
    assert after.read("out/hello.txt").value == b"written by a guest"
    assert after.read("notes/a.txt").value == b"alpha"


@pytest.mark.parametrize("granted", [True, False])
def test_a_file_block_store_is_read_directly_where_granted_and_written_through_the_host(
    pool: WorkerPool, store_dir: Path, tmp_path: Path, granted: bool
) -> None:
    store = FileBlockStore((store_dir if granted else tmp_path) / f"blocks-{tmp_path.name}")
    sess, write = _setup(store, "fs-write", "terminal-build")
    cat = add_guest(store, wat("fs-cat"))
    written = run(sess, guest(write, "run"), store=store, isolation=pool)
    fs = Fs(store, written["kuro/fs-root-after"])
    asked = pool.answered["get"]
    read = run(sess, guest(cat, "run"), store=store, fs=fs, isolation=pool)
    assert written["kuro/outcome"] == "ok" and read["kuro/exit-code"] == 0, read
    assert read["kuro/stdout"] == b"hi there" and len(read["kuro/reads"]) == 1
    assert fs.read("out/hello.txt").value == b"written by a guest"
    assert (pool.answered["get"] == asked) is granted  # a store it may not read comes block by block as frames


def test_an_fs_value_keeps_its_own_grant_across_the_boundary(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "fs-write", "terminal-build")
    narrowed = Fs.empty(store).with_grant(["fs/read"])
    receipt = run(sess, guest(cid, "run"), store=store, fs=narrowed, isolation=pool)
    assert receipt["kuro/exit-code"] == 1  # -DENIED: the Fs value's grant lacks fs/write
    assert "kuro/fs-root-after" not in receipt
    # the session grants fs/write; the receipt says which grant refused it
    assert "fs/write" in receipt["kuro/effective-capabilities"] and receipt["kuro/fs-grant"] == ["fs/read"]
    here = run(sess, guest(cid, "run"), store=store, fs=narrowed, isolation="wasmtime")
    assert (here["kuro/exit-code"], here["kuro/fs-grant"]) == (1, ["fs/read"])
    assert "kuro/fs-grant" not in run(sess, guest(cid, "run"), store=store, fs=Fs.empty(store), isolation=pool)


def test_an_fs_value_over_another_store_than_the_guests_is_read_and_written_there(pool: WorkerPool) -> None:
    # Guests in one store, the filesystem in another: the Fs value's store is where its blocks are read
    # from and where a write's blocks go, in a worker as in-process.
    guests, data = MemoryBlockStore(), MemoryBlockStore()
    fs = Fs.empty(data).write("greeting.txt", b"hi there").fs
    sess = session("s-proc", fs.root, "terminal-build")
    cat, write = add_guest(guests, wat("fs-cat")), add_guest(guests, wat("fs-write"))
    for how in ("wasmtime", pool):
        read = run(sess, guest(cat, "run"), store=guests, fs=fs, isolation=how)
        assert (read["kuro/outcome"], read["kuro/stdout"]) == ("ok", b"hi there"), how
        wrote = run(sess, guest(write, "run"), store=guests, fs=fs, isolation=how)
        after = Fs(data, wrote["kuro/fs-root-after"])  # in the Fs value's store, not the guests'
        assert after.read("out/hello.txt").value == b"written by a guest"
        assert not guests.has(wrote["kuro/fs-root-after"])


def test_an_fs_values_read_budget_holds_across_the_boundary(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "fs-cat")
    small = Fs(store, sess.fs_root_cid).with_budget(bytes=4)  # greeting.txt holds 8 bytes
    receipts = {how: run(sess, guest(cid, "run"), store=store, fs=small, isolation=how) for how in ("wasmtime", pool)}
    for receipt in receipts.values():
        assert receipt["kuro/exit-code"] == 9 and receipt["kuro/stdout"] == b""  # -TOO_LARGE: over the budget


def test_a_write_into_a_root_large_enough_to_be_sharded_comes_back_believed(pool: WorkerPool) -> None:
    # A root of more than 256 entries is a sharded directory: the host must believe a sharded new root too.
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    for i in range(300):
        fs = fs.write(f"f{i:03d}.txt", b"x").fs
    sess, cid = session("s-proc", fs.root, "terminal-build"), add_guest(store, wat("fs-write"))
    receipts = {how: run(sess, guest(cid, "run"), store=store, isolation=how) for how in ("wasmtime", pool)}
    assert receipts[pool]["kuro/outcome"] == "ok", receipts[pool].get("kuro/error")
    assert receipts[pool]["kuro/fs-root-after"] == receipts["wasmtime"]["kuro/fs-root-after"]


def test_an_fs_values_directory_layout_holds_across_the_boundary(pool: WorkerPool) -> None:
    # The layout is part of the format (another layout, other CIDs): a worker writing with the default
    # layout would hand back a root that is not the one this run writes in-process.
    from kuro_fs.fsdir import DirLayout
    from kuro_fs.hamt import Shape

    store = MemoryBlockStore()
    sess, cid = _setup(store, "fs-write", "terminal-build")
    sharded = replace(Fs(store, sess.fs_root_cid), layout=DirLayout(max_flat=1, shape=Shape(bit_width=3)))
    receipts = {how: run(sess, guest(cid, "run"), store=store, fs=sharded, isolation=how) for how in ("wasmtime", pool)}
    here, there = receipts["wasmtime"]["kuro/fs-root-after"], receipts[pool]["kuro/fs-root-after"]
    assert here == there
    assert here != run(sess, guest(cid, "run"), store=store, isolation="wasmtime")["kuro/fs-root-after"]


def test_the_isolation_option_names_a_backend_or_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "hello")
    with pytest.raises(ModelError, match="names no backend") as err:
        run(sess, guest(cid, "run"), store=store, isolation="container")
    assert err.value.reason == "invalid-run-option"
    with pytest.raises(ModelError):
        run(sess, guest(cid, "run"), store=store, isolation=3)
    monkeypatch.setenv("KURO_ISOLATION", "vm")
    with pytest.raises(ModelError, match="KURO_ISOLATION"):
        run(sess, guest(cid, "run"), store=store)
    denied = run(sess, ["ls"], store=store, isolation="container")
    assert denied["kuro/reason"] == "argv-not-a-process"  # the denial is decided first, as always


def test_kuro_isolation_in_the_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "hello")
    monkeypatch.setenv("KURO_ISOLATION", "process")
    assert run(sess, guest(cid, "run"), store=store)["kuro/isolation"] == "process"
    assert run(sess, guest(cid, "run"), store=store, isolation="wasmtime")["kuro/isolation"] == "wasmtime"


def test_a_process_handle_is_a_handle_and_overrides_all_of_it() -> None:
    public = {n for n, _ in inspect.getmembers(Handle) if not n.startswith("_")} | {"__init__", "_start", "close"}
    overridden = {n for n in public if n in vars(ProcessHandle)}
    assert overridden == public  # a member added to Handle must be given its process form too
    assert issubclass(ProcessHandle, Handle)


def test_runs_started_from_many_threads_at_once_all_run_once_in_order_per_worker(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "hello")
    receipts: list[dict[str, Any]] = []
    lock = threading.Lock()

    def client() -> None:
        handles = [start(sess, guest(cid, "add", [i, 1]), store=store, isolation=pool) for i in range(60)]
        got = [_started(h).wait(WAIT) for h in handles]
        with lock:
            receipts.extend(got)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert len(receipts) == 240
    assert {r["kuro/outcome"] for r in receipts} == {"exit"}  # no worker was killed for a frame out of order
    assert sorted(r["kuro/exit-code"] for r in receipts) == sorted(list(range(1, 61)) * 4)


@pytest.mark.parametrize("how", ["wasmtime", "pool"])
def test_an_on_start_that_is_not_callable_is_the_same_model_error_on_both_backends(pool: WorkerPool, how: str) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "hello")
    with pytest.raises(ModelError, match="on_start must be callable, got int") as err:
        run(sess, guest(cid, "run"), store=store, on_start=5, isolation=pool if how == "pool" else how)  # type: ignore[arg-type]
    assert err.value.reason == "invalid-run-option"


@pytest.mark.parametrize("how", ["wasmtime", "pool"])
def test_writing_stdin_that_is_not_bytes_is_a_model_error_as_start_s_stdin_is(pool: WorkerPool, how: str) -> None:
    store = MemoryBlockStore()
    sess, cid = _setup(store, "cat")
    handle = start(sess, guest(cid, "run"), store=store, isolation=pool if how == "pool" else how)
    assert not isinstance(handle, dict)
    with pytest.raises(ModelError, match="stdin must be bytes, got str") as err:
        handle.write("text")  # type: ignore[arg-type]
    assert err.value.reason == "invalid-stdin"
    handle.write(b"still open\n")
    handle.close_stdin()
    assert handle.wait()["kuro/stdout"] == b"still open\n"


def test_a_pool_larger_than_the_maximum_is_refused_before_a_process_is_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kuro_wasm.errors import HostError
    from kuro_wasm.host.worker import pool as pool_module
    from kuro_wasm.model.limits import MAX_WORKERS

    def no_zygote() -> None:
        raise AssertionError("a zygote was started")

    monkeypatch.setattr(pool_module, "Zygote", no_zygote)
    for workers, spare in ((MAX_WORKERS + 1, 1), (10**8, 1), (2, MAX_WORKERS + 1)):
        with pytest.raises(HostError, match=f"at most {MAX_WORKERS} workers"):
            WorkerPool(workers, spare=spare)
    monkeypatch.setenv("KURO_WORKERS", str(10**8))
    with pytest.raises(HostError, match=f"KURO_WORKERS must be an integer from 1 to {MAX_WORKERS}, got '100000000'"):
        WorkerPool()


def test_a_run_too_large_to_queue_in_a_busy_worker_waits_for_it_and_blocks_nothing() -> None:
    # A busy worker reads its run channel only between runs: a 1 MB stdin pipelined behind a running run
    # would fill the socket and block the host's sender — start() and, behind the sender's lock, A's own
    # close_stdin — until A ended (A then timed out). It waits in the pool's queue instead.
    store = MemoryBlockStore()
    sess = session("s-big", Fs.empty(store).root, "terminal-repo", grant=["guest/invoke", "stdin/read"])
    cat = guest(add_guest(store, wat("cat")), "run")
    with WorkerPool(1, spare=0, depth=2) as pool:
        assert pool.wait_ready(60)
        assert run(sess, cat, store=store, isolation=pool, stdin=b"w", home=False)["kuro/stdout"] == b"w"  # warm:
        # A then asks the host nothing, so the worker reads no frame while A runs
        a = start(sess, cat, store=store, isolation=pool, home=False, timeout_ms=600_000)
        a.write(b"a")
        started: list[Any] = []
        starter = threading.Thread(
            target=lambda: started.append(start(sess, cat, store=store, isolation=pool, stdin=b"b" * 1_000_000))
        )
        starter.start()
        starter.join(30)  # a hang detector, not a timing: start() queues, it never waits for A (which waits on us)
        assert started, "start() of the large run blocked behind the running one"
        a.close_stdin()
        assert a.wait(60)["kuro/stdout"] == b"a"
        b = started[0]
        b.close_stdin()
        assert b.wait(60)["kuro/stdout"] == b"b" * 1_000_000


def test_a_withdrawal_the_host_did_not_ask_for_is_a_protocol_violation() -> None:
    # A compromised worker answering "withdrawn" for its running head would have the host run it again.
    from kuro_wasm.host.worker.protocol import ProtocolError

    store = MemoryBlockStore()
    sess = session("s-wd", Fs.empty(store).root, "terminal-repo", grant=["guest/invoke", "stdin/read"])
    cat = guest(add_guest(store, wat("cat")), "run")
    with WorkerPool(1, spare=0) as pool:
        assert pool.wait_ready(60)
        handle = start(sess, cat, store=store, isolation=pool, home=False)
        assert isinstance(handle, ProcessHandle)
        conn = pool._active[0]
        head = conn.outstanding[0]
        with pytest.raises(ProtocolError, match="not asked back"):
            pool._withdrawn(conn, head.id, True)
        assert conn.outstanding == [head]  # still the worker's: nothing re-queued
        handle.close_stdin()
        assert handle.wait(60)["kuro/outcome"] == "ok"
