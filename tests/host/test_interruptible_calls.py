"""A long host call honours the run's deadline and kill between blocks, not after the whole call.

An ``fs_read`` of a file of many leaves is stopped part-way: a store that trips at the third
leaf of the read's second window (:data:`kuro_fs.fileread.STREAM_WINDOW`) expires the deadline (or
kills the run) right there, and the run must read no further leaf, end with the ``timeout`` (or
``cancelled``) outcome, and still name the file in ``kuro/reads`` (its first window reached guest
memory). The leaves are distinct: a leaf linked again is copied, not fetched. Deterministic: the
deadline is set in the past from inside the call, no clock is raced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hostkit import make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fileread import STREAM_WINDOW
from kuro_fs.fs import Fs
from kuro_wasm.host.api import Handle, start
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest

HANG_GUARD = 30.0  # seconds: only so a broken host fails instead of hanging the suite
LEAVES = 64
WINDOW_LEAVES = STREAM_WINDOW // 1024

READER = """(module
  (import "kuro" "fs_read" (func $r (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") %d) (data (i32.const 0) "big")
  (func (export "run") (result i32) (call $r (i32.const 0) (i32.const 3) (i32.const 1024) (i32.const %d))))"""


def distinct_leaves(n: int) -> bytes:
    """``n`` KiB whose every 1 KiB leaf differs from the others."""
    return b"".join(i.to_bytes(4, "big") * 256 for i in range(n))


def reader(cap: int) -> str:
    return READER % (cap // 65536 + 2, cap)


class TrippingStore(MemoryBlockStore):
    """Counts the raw leaves handed out (but the blocks in ``ignore``: the guest's); at leaf ``trip_at`` calls
    ``on_trip`` once."""

    def __init__(self) -> None:
        super().__init__()
        self.leaves = 0
        self.after_trip = 0
        self.trip_at = -1
        self.on_trip: Callable[[], None] = lambda: None
        self.ignore: set[str] = set()

    def get(self, cid: str) -> bytes | None:
        if cid.startswith("bafkrei") and cid not in self.ignore:
            self.leaves += 1
            if self.leaves > self.trip_at > 0:
                self.after_trip += 1
            elif self.leaves == self.trip_at:
                self.on_trip()
        return super().get(cid)


def _expire(handle: list[Handle]) -> None:
    handle[0]._job.ctx.deadline = 0.0  # already passed: the next check must see it


def _kill(handle: list[Handle]) -> None:
    handle[0].kill()


@pytest.mark.parametrize(("trip", "outcome"), [(_expire, "timeout"), (_kill, "cancelled")])
def test_fs_read_of_many_leaves_stops_at_the_next_leaf(
    trip: Callable[[list[Handle]], None], outcome: str, home: Path
) -> None:
    store = TrippingStore()
    size = 1024 * (WINDOW_LEAVES + LEAVES)
    fs = Fs(store, Fs.empty(store).root, chunk_size=1024).write("big", distinct_leaves(WINDOW_LEAVES + LEAVES)).fs
    file_cid = fs.stat("big").value["cid"]
    cid = add_guest(store, reader(size))
    store.ignore.add(cid)
    held: list[Handle] = []
    started = threading.Event()  # the run's thread may reach the leaf before start() has returned its handle
    store.trip_at, store.on_trip = WINDOW_LEAVES + 3, lambda: started.wait(HANG_GUARD) and trip(held)
    handle = start(make_session(fs), guest(cid, "run"), store=store, fs=fs, home=home, timeout_ms=60_000)
    assert isinstance(handle, Handle)
    held.append(handle)
    started.set()
    receipt = handle.wait(HANG_GUARD)
    assert receipt["kuro/outcome"] == outcome, receipt
    assert store.leaves == WINDOW_LEAVES + 3 and store.after_trip == 0  # the 61 other leaves were never fetched
    assert receipt["kuro/reads"] == [file_cid]  # the first window reached guest memory: the read is recorded


def test_an_untripped_read_reads_every_leaf(home: Path) -> None:
    store = TrippingStore()
    fs = Fs(store, Fs.empty(store).root, chunk_size=1024).write("big", distinct_leaves(LEAVES)).fs
    cid = add_guest(store, reader(65536))
    store.ignore.add(cid)
    handle = start(make_session(fs), guest(cid, "run"), store=store, fs=fs, home=home)
    assert isinstance(handle, Handle)
    receipt = handle.wait(HANG_GUARD)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"], store.leaves) == ("exit", 1024 * LEAVES, LEAVES)
