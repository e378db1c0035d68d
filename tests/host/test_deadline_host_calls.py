"""The run's deadline holds between and inside host calls, not only while wasm code runs.

Only the epoch tick (which wasmtime takes in wasm code) used to turn a passed deadline into the stop: a
guest making host calls back to back, or one long host call (random bytes, a large file write, the
end-of-run commit), ran on past it — 22 s against a 200 ms deadline. Now every host call checks the
deadline before it starts, a long one between chunks of its work, and a stop found in the end-of-run
commit is that stop (``timeout``), never ``host-error``. Deterministic: the deadline is set in the past
from inside the run (by a hook at a known point), no clock is raced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hostkit import make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import Handle, start
from kuro_wasm.host.clocks import RunClocks
from kuro_wasm.host.context import STOP_CHECK_BYTES, RunContext
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest

HANG_GUARD = 30.0  # seconds: only so a broken host fails instead of hanging the suite


class _Held:
    """The run's handle, once ``start`` has returned it (a hook on the run's thread may fire before)."""

    def __init__(self) -> None:
        self.handle: Handle | None = None
        self.ready = threading.Event()

    def expire(self) -> None:
        """Put the run's deadline in the past: the next check must see it."""
        self.ready.wait(HANG_GUARD)
        assert self.handle is not None
        self.handle._job.ctx.deadline = 0.0

    def start(self, fs: Fs, store: MemoryBlockStore, cid: str, export: str, home: Path, **kw: Any) -> Any:
        handle = start(make_session(fs), guest(cid, export), store=store, fs=fs, home=home, **kw)
        assert isinstance(handle, Handle)
        self.handle = handle
        self.ready.set()
        return handle.wait(HANG_GUARD)


def test_a_host_call_after_the_deadline_passed_does_nothing_even_with_no_wasm_between(home: Path) -> None:
    """Two kuro.write calls back to back: the deadline passes inside the first (its chunk's callback);
    the second must not write, and the run is a timeout (before: "ab", and ok)."""
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    source = """(module (import "kuro" "write" (func $w (param i32 i32 i32) (result i32)))
      (memory (export "memory") 1) (data (i32.const 0) "ab")
      (func (export "run") (result i32)
        (drop (call $w (i32.const 1) (i32.const 0) (i32.const 1)))
        (drop (call $w (i32.const 1) (i32.const 1) (i32.const 1))) (i32.const 0)))"""
    held = _Held()
    receipt = held.start(
        fs, store, add_guest(store, source), "run", home, on_chunk=lambda _s, _c: held.expire(), timeout_ms=60_000
    )
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"]) == ("timeout", b"a"), receipt


def test_random_get_of_many_mebibytes_stops_at_the_next_chunk(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """random_get(8 MiB): the deadline passes while the first chunk is drawn; no second chunk is drawn and the
    fd_write after it never happens (before: all 8 MiB, then "done", and ok)."""
    drawn: list[int] = []
    original = RunClocks.random

    def tripping(self: RunClocks, run: RunContext, n: int) -> bytes:
        drawn.append(n)
        run.deadline = 0.0
        return original(self, run, n)

    monkeypatch.setattr(RunClocks, "random", tripping)
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    source = """(module
      (import "wasi_snapshot_preview1" "random_get" (func $r (param i32 i32) (result i32)))
      (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
      (memory (export "memory") 130) (data (i32.const 0) "done") (data (i32.const 8) "\\00\\00\\00\\00\\04\\00\\00\\00")
      (func (export "_start")
        (drop (call $r (i32.const 65536) (i32.const 8388608)))
        (drop (call $w (i32.const 1) (i32.const 8) (i32.const 1) (i32.const 16)))))"""
    receipt = _Held().start(fs, store, add_guest(store, source), "_start", home, timeout_ms=60_000)
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"]) == ("timeout", b""), receipt
    assert drawn == [STOP_CHECK_BYTES]
    assert receipt["kuro/nondeterminism"] == {"random-bytes": STOP_CHECK_BYTES}


class TrippingStore(MemoryBlockStore):
    """Counts the blocks put; at put ``trip_at`` calls ``on_trip`` once (then counts the puts after it)."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0
        self.after_trip = 0
        self.trip_at = -1
        self.on_trip: Callable[[], None] = lambda: None

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        self.puts += 1
        if self.puts > self.trip_at > 0:
            self.after_trip += 1
        elif self.puts == self.trip_at:
            self.on_trip()
        return super().put(data, codec, cid=cid)


def test_an_fs_write_of_many_chunks_stops_at_the_next_block(home: Path) -> None:
    """kuro.fs_write of 64 KiB in 1 KiB chunks: the deadline passes at the third leaf stored; no further
    block is stored and nothing is written (before: all 64 leaves and the tree, then the new root)."""
    store = TrippingStore()
    fs = Fs(store, Fs.empty(store).root, chunk_size=1024)
    source = """(module (import "kuro" "fs_write" (func $fw (param i32 i32 i32 i32) (result i32)))
      (memory (export "memory") 2) (data (i32.const 0) "big")
      (func (export "run") (result i32)
        (memory.fill (i32.const 65536) (i32.const 7) (i32.const 65536))
        (call $fw (i32.const 0) (i32.const 3) (i32.const 65536) (i32.const 65536))))"""
    cid = add_guest(store, source)
    held = _Held()
    store.puts = 0
    store.trip_at, store.on_trip = 3, held.expire
    receipt = held.start(fs, store, cid, "run", home, timeout_ms=60_000)
    assert receipt["kuro/outcome"] == "timeout", receipt
    assert store.puts == 3 and store.after_trip == 0
    assert "kuro/fs-root-after" not in receipt


def test_the_deadline_passing_during_the_end_of_run_commit_is_a_timeout_not_a_host_error(home: Path) -> None:
    """A WASI program creates a file, grows it to 10 MiB (a hole: nothing stored yet) and returns; the
    end-of-run commit stores its blocks, and the deadline passes at the first. The run is a timeout, no
    further block is stored, nothing is committed (before: host-error "Stopped: timeout")."""
    store = TrippingStore()
    fs = Fs.empty(store)
    rights = "(i64.const 0x3fffffff)"  # every right witx names (more bits trap, as on wasmtime)
    source = f"""(module
      (import "wasi_snapshot_preview1" "path_open"
        (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
      (import "wasi_snapshot_preview1" "fd_filestat_set_size" (func $size (param i32 i64) (result i32)))
      (memory (export "memory") 1) (data (i32.const 0) "big")
      (func (export "_start") (result i32)
        (if (call $open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 3) (i32.const 1) {rights} {rights}
              (i32.const 0) (i32.const 100)) (then (return (i32.const 90))))
        (if (call $size (i32.load (i32.const 100)) (i64.const 10485760)) (then (return (i32.const 91))))
        (i32.const 0)))"""
    cid = add_guest(store, source)
    _times_out_at_its_first_put(store, fs, cid, home)


def _times_out_at_its_first_put(store: TrippingStore, fs: Fs, cid: str, home: Path) -> None:
    """Run ``cid``'s ``_start`` with the deadline passing at its first block stored: a timeout (not an error),
    nothing stored after it, nothing committed."""
    held = _Held()
    store.puts = 0
    store.trip_at, store.on_trip = 1, held.expire
    receipt = held.start(fs, store, cid, "_start", home, timeout_ms=60_000)
    assert receipt["kuro/outcome"] == "timeout", receipt
    assert "kuro/error" not in receipt
    assert store.puts == 1 and store.after_trip == 0
    assert "kuro/fs-root-after" not in receipt


_PWRITE_Y_AT_0 = """(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_pwrite" (func $pwrite (param i32 i32 i32 i64 i32) (result i32)))
  (memory (export "memory") 1) (data (i32.const 0) "big") (data (i32.const 16) "y")
  (data (i32.const 32) "\\10\\00\\00\\00\\01\\00\\00\\00")
  (func (export "_start") (result i32)
    (if (call $open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 3) (i32.const 0) (i64.const 0x3fffffff)
          (i64.const 0x3fffffff) (i32.const 0) (i32.const 100)) (then (return (i32.const 90))))
    (if (call $pwrite (i32.load (i32.const 100)) (i32.const 32) (i32.const 1) (i64.const 0) (i32.const 104))
      (then (return (i32.const 91))))
    (i32.const 0)))"""


def _terabyte_file(store: MemoryBlockStore) -> Fs:
    """An fs holding ``big``: 1 TiB, all zeros but its last byte (the file a guest makes by writing there)."""
    from kuro_fs.unixfs import BalancedLayout

    fs = Fs.empty(store)
    chunk = fs.chunk_size
    layout = BalancedLayout(store.put, fs.width)
    layout.add_leaves(store.put(bytes(chunk), "raw"), chunk, (1 << 40) // chunk - 1)
    layout.add_leaf(store.put(bytes(chunk - 1) + b"x", "raw"), chunk)
    linked = fs.link("big", layout.finish().cid)
    assert linked.ok, linked.receipt
    return linked.fs


def test_the_end_of_run_commit_of_a_byte_written_into_a_stored_terabyte_file_costs_its_depth(home: Path) -> None:
    """A WASI program writes one byte at the start of a stored 1 TiB file and returns: the end-of-run commit
    stores that chunk and the nodes above it, keeping the rest of the tree (before: every level-1 node
    re-made, ~24 000 puts, a minute and > 1 GB of host memory)."""
    store = TrippingStore()
    fs = _terabyte_file(store)
    cid = add_guest(store, _PWRITE_Y_AT_0)
    store.puts = 0
    receipt = _Held().start(fs, store, cid, "_start", home, timeout_ms=60_000)
    assert receipt["kuro/outcome"] == "ok", receipt
    assert store.puts < 20, store.puts
    after = Fs(store, receipt["kuro/fs-root-after"])
    assert after.stat("big").value["size"] == 1 << 40
    assert after.read_range("big", 0, 2).value == b"y\0"
    assert after.read_range("big", (1 << 40) - 2, 2).value == b"\0x"


def test_the_deadline_passing_during_the_commit_of_a_stored_file_is_a_timeout(home: Path) -> None:
    """The same commit with the deadline passing at its first block stored: a timeout, nothing stored after it,
    nothing committed — reusing the base's subtrees reads them through the run's interruptible store too."""
    store = TrippingStore()
    fs = _terabyte_file(store)
    cid = add_guest(store, _PWRITE_Y_AT_0)
    _times_out_at_its_first_put(store, fs, cid, home)
