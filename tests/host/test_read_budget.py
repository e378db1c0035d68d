"""A guest's fs_read copies at most what the run's fs budget allows, decided before a byte is copied.

The bytes a call would copy, min(size, cap), are known from the file's root block: past the
``Fs`` budget's bytes the call answers TOO_LARGE (-9, kuro.fs ``over-budget``), copies nothing
and names nothing in ``kuro/reads``. A caller sets the budget with ``run(fs=Fs(...).with_budget(bytes=N))``.
"""

from __future__ import annotations

from pathlib import Path

from hostkit import make_fs, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host import fsgate
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest

# fs_read("big", buf=1024, cap) + 100: TOO_LARGE (-9) is exit 91, a 5000-byte file's size 5100.
READER = """(module
  (import "kuro" "fs_read" (func $r (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2) (data (i32.const 0) "big")
  (func (export "read") (param $cap i32) (result i32)
    (i32.add (call $r (i32.const 0) (i32.const 3) (i32.const 1024) (local.get $cap)) (i32.const 100))))"""


def test_fs_read_past_the_budget_is_too_large_and_copies_nothing(store: MemoryBlockStore, home: Path) -> None:
    fs = make_fs(store, {"big": b"\x07" * 5000})
    cid = add_guest(store, READER)
    tight = fs.with_budget(bytes=4096)
    over = run(make_session(fs), guest(cid, "read", [65536]), store=store, fs=tight, home=home)
    assert (over["kuro/exit-code"], over["kuro/reads"]) == (91, [])
    # Under the budget the same file is read: a cap within it copies a prefix and answers the full size.
    prefix = run(make_session(fs), guest(cid, "read", [4096]), store=store, fs=tight, home=home)
    assert prefix["kuro/exit-code"] == 5100 and len(prefix["kuro/reads"]) == 1
    whole = run(make_session(fs), guest(cid, "read", [65536]), store=store, fs=fs, home=home)
    assert whole["kuro/exit-code"] == 5100


def test_the_gate_decides_before_the_sink_sees_a_byte(store: MemoryBlockStore) -> None:
    fs = make_fs(store, {"big": b"x" * 3000}).with_budget(bytes=2999)
    seen: list[int] = []
    answer = fsgate.call(fs, "read_into", "big", 3000, lambda at, piece: seen.append(len(piece)))
    assert (answer.reason, answer.read, seen) == ("over-budget", None, [])
    # ``whole`` (a component's fs.read, which returns the file as one list): a file longer than the cap
    # is refused too, even under the budget, rather than copied and then dropped.
    answer = fsgate.call(fs.with_budget(bytes=1 << 20), "read_into", "big", 2000, lambda at, piece: None, True)
    assert (answer.reason, answer.read) == ("over-budget", None)
    fits = fsgate.call(fs.with_budget(bytes=1 << 20), "read_into", "big", 3000, lambda at, p: seen.append(len(p)), True)
    assert fits.reason is None and sum(seen) == 3000
