"""A long host call honours the run's deadline and kill between blocks, not after the whole call.

An ``fs_read`` of a file of many leaves is stopped part-way: a store that trips at its third
leaf expires the deadline (or kills the run) right there, and the run must read no further leaf,
end with the ``timeout`` (or ``cancelled``) outcome, and still name the file in ``kuro/reads``
(its first leaves reached guest memory). Deterministic: the deadline is set in the past from
inside the call, no clock is raced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hostkit import make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import Handle, start
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest

HANG_GUARD = 30.0  # seconds: only so a broken host fails instead of hanging the suite
LEAVES = 64

READER = """(module
  (import "kuro" "fs_read" (func $r (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2) (data (i32.const 0) "big")
  (func (export "run") (result i32) (call $r (i32.const 0) (i32.const 3) (i32.const 1024) (i32.const 65536))))"""


class TrippingStore(MemoryBlockStore):
    """Counts the raw leaves handed out; at leaf ``trip_at`` calls ``on_trip`` once."""

    def __init__(self) -> None:
        super().__init__()
        self.leaves = 0
        self.after_trip = 0
        self.trip_at = -1
        self.on_trip: Callable[[], None] = lambda: None

    def get(self, cid: str) -> bytes | None:
        if cid.startswith("bafkrei"):
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
    fs = Fs(store, Fs.empty(store).root, chunk_size=1024).write("big", bytes(range(256)) * 4 * LEAVES).fs
    file_cid = fs.stat("big").value["cid"]
    cid = add_guest(store, READER)
    held: list[Handle] = []
    started = threading.Event()  # the run's thread may reach the leaf before start() has returned its handle
    store.trip_at, store.on_trip = 3, lambda: started.wait(HANG_GUARD) and trip(held)
    handle = start(make_session(fs), guest(cid, "run"), store=store, fs=fs, home=home, timeout_ms=60_000)
    assert isinstance(handle, Handle)
    held.append(handle)
    started.set()
    receipt = handle.wait(HANG_GUARD)
    assert receipt["kuro/outcome"] == outcome, receipt
    assert store.leaves == 3 and store.after_trip == 0  # the 61 other leaves were never fetched
    assert receipt["kuro/reads"] == [file_cid]  # two leaves reached guest memory: the read is recorded


def test_an_untripped_read_reads_every_leaf(home: Path) -> None:
    store = TrippingStore()
    fs = Fs(store, Fs.empty(store).root, chunk_size=1024).write("big", bytes(1024 * LEAVES)).fs
    handle = start(make_session(fs), guest(add_guest(store, READER), "run"), store=store, fs=fs, home=home)
    assert isinstance(handle, Handle)
    receipt = handle.wait(HANG_GUARD)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"], store.leaves) == ("exit", 1024 * LEAVES, LEAVES)
