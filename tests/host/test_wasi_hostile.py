"""WASI guests written to break the host: array counts that pass 4 GiB, WASI calls from a start function.

An iovec or subscription count is a u32 the guest chooses; its byte size (count × item size) may pass
2**32. Such an array cannot be inside any guest memory, so the call is ``EFAULT`` with nothing read or
written — never the array's size reduced mod 2**32 (which made ``fd_write(1, iovs, 2**29 + 1, …)``
write the first iovec). A module's start function runs inside instantiation and may call WASI, as
under wasmtime's WASI; ``proc_exit`` there ends the run with its code.
"""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hostkit import make_fs, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest

EFAULT = 21
MODES = ["wasmtime", "process"]

_SIGS = {
    "clock_time_get": "(param i32 i64 i32) (result i32)",
    "fd_write": "(param i32 i32 i32 i32) (result i32)",
    "fd_read": "(param i32 i32 i32 i32) (result i32)",
    "poll_oneoff": "(param i32 i32 i32 i32) (result i32)",
    "proc_exit": "(param i32)",
    "random_get": "(param i32 i32) (result i32)",
}
_IMPORTS = "".join(f'(import "wasi_snapshot_preview1" "{n}" (func ${n} {sig}))' for n, sig in _SIGS.items())


def _run(store: MemoryBlockStore, home: Path, source: str, isolation: str, stdin: bytes | None = None) -> Any:
    fs = make_fs(store)
    spec = guest(add_guest(store, source), "_start")
    return run(make_session(fs), spec, store=store, fs=fs, home=home, stdin=stdin, isolation=isolation)


def _run_traced(store: MemoryBlockStore, home: Path, source: str, fs: Fs) -> tuple[Any, int]:
    """The receipt of a run of ``source`` over ``fs`` in this process, and the most memory Python held during it."""
    spec = guest(add_guest(store, source), "_start")
    tracemalloc.start()
    try:
        receipt = run(make_session(fs), spec, store=store, fs=fs, home=home)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return receipt, peak


# ---- counts whose byte size passes 2**32


@pytest.mark.parametrize("isolation", MODES)
@pytest.mark.parametrize(
    "call",
    [
        "(call $fd_write (i32.const 1) (i32.const 2000) (i32.const 536870913) (i32.const 2100))",  # 8 × (2**29+1)
        "(call $fd_write (i32.const 1) (i32.const 2000) (i32.const 536870912) (i32.const 2100))",  # exactly 2**32
        "(call $fd_read (i32.const 0) (i32.const 2000) (i32.const 536870913) (i32.const 2100))",
        "(call $poll_oneoff (i32.const 0) (i32.const 8000) (i32.const 89478486) (i32.const 2100))",  # 48 × n > 2**32
    ],
    ids=["fd_write-2^29+1", "fd_write-2^29", "fd_read-2^29+1", "poll_oneoff-2^32/48+1"],
)
def test_an_array_count_whose_byte_size_passes_4_gib_is_efault_and_moves_nothing(
    store: MemoryBlockStore, home: Path, call: str, isolation: str
) -> None:
    """The first iovec names "hi" (and stdin holds bytes): were the size wrapped, "hi" would be written or
    stdin read into memory. The errno is the exit code; the nwritten/nread cell keeps its marker."""
    source = f"""(module {_IMPORTS} (memory (export "memory") 1) (data (i32.const 140) "hi")
      (func (export "_start") (result i32) (local $e i32)
        (i32.store (i32.const 2000) (i32.const 140)) (i32.store (i32.const 2004) (i32.const 2))
        (i32.store (i32.const 2100) (i32.const 77))
        (local.set $e {call})
        (if (i32.ne (i32.load (i32.const 2100)) (i32.const 77)) (then (return (i32.const 99))))
        (if (i32.ne (i32.load (i32.const 140)) (i32.const 0x6968)) (then (return (i32.const 98))))
        (local.get $e)))"""
    receipt = _run(store, home, source, isolation, stdin=b"XY")
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("exit", EFAULT), receipt
    assert receipt["kuro/stdout"] == b""


# ---- WASI from a start function


_SAYS_NO = '(func (export "_start") (drop (call $fd_write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 24))))'


@pytest.mark.parametrize("isolation", MODES)
def test_a_start_function_may_write_and_draw_random_bytes_before_the_entry_runs(
    store: MemoryBlockStore, home: Path, isolation: str
) -> None:
    source = f"""(module {_IMPORTS} (memory (export "memory") 1)
      (data (i32.const 0) "hi\\n") (data (i32.const 8) "\\00\\00\\00\\00\\03\\00\\00\\00")
      (data (i32.const 32) "no\\n") (data (i32.const 16) "\\20\\00\\00\\00\\03\\00\\00\\00")
      (func $init
        (drop (call $random_get (i32.const 100) (i32.const 16)))
        (drop (call $fd_write (i32.const 1) (i32.const 8) (i32.const 1) (i32.const 24))))
      (start $init) {_SAYS_NO})"""
    receipt = _run(store, home, source, isolation)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("ok", 0), receipt
    assert receipt["kuro/stdout"] == b"hi\nno\n"
    assert receipt["kuro/nondeterminism"] == {"random-bytes": 16}


@pytest.mark.parametrize("isolation", MODES)
def test_proc_exit_in_a_start_function_ends_the_run_with_its_code_and_calls_no_entry(
    store: MemoryBlockStore, home: Path, isolation: str
) -> None:
    source = f"""(module {_IMPORTS} (memory (export "memory") 1)
      (data (i32.const 32) "no\\n") (data (i32.const 16) "\\20\\00\\00\\00\\03\\00\\00\\00")
      (func $init (call $proc_exit (i32.const 3))) (start $init) {_SAYS_NO})"""
    receipt = _run(store, home, source, isolation)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"], receipt["kuro/stdout"]) == ("exit", 3, b""), receipt


# ---- the virtual clocks at the end of time


@pytest.mark.parametrize("isolation", MODES)
def test_a_deterministic_sleep_past_the_end_of_time_leaves_the_clocks_at_their_last_u64(
    store: MemoryBlockStore, home: Path, isolation: str
) -> None:
    """Two relative sleeps of 2**64 - 1 ns move the virtual clocks past any u64: a reading is then 2**64 - 1 (as
    the component kind's), never a host error from packing a larger number. The reading is the exit code's
    witness: 0 when the clock reads all ones (its low and high words are both -1)."""
    sub = struct.pack("<QB7xI4xQQH6x", 1, 0, 1, 2**64 - 1, 0, 0)  # a relative monotonic-clock subscription
    data = "".join(f"\\{b:02x}" for b in sub)
    source = f"""(module {_IMPORTS} (memory (export "memory") 1) (data (i32.const 1000) "{data}")
      (func (export "_start") (result i32)
        (drop (call $poll_oneoff (i32.const 1000) (i32.const 3000) (i32.const 1) (i32.const 2996)))
        (drop (call $poll_oneoff (i32.const 1000) (i32.const 3000) (i32.const 1) (i32.const 2996)))
        (if (call $clock_time_get (i32.const 0) (i64.const 0) (i32.const 400)) (then (return (i32.const 90))))
        (if (call $clock_time_get (i32.const 1) (i64.const 0) (i32.const 408)) (then (return (i32.const 91))))
        (i32.xor (i32.and (i32.and (i32.load (i32.const 400)) (i32.load (i32.const 404)))
                          (i32.and (i32.load (i32.const 408)) (i32.load (i32.const 412)))) (i32.const -1))))"""
    fs = make_fs(store)
    spec = guest(add_guest(store, source), "_start")
    receipt = run(make_session(fs), spec, store=store, fs=fs, home=home, isolation=isolation, deterministic=True)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("ok", 0), receipt


# ---- iovec arrays longer than IOV_MAX


_IO_SIGS = {
    "path_open": "(param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)",
    "fd_pread": "(param i32 i32 i32 i64 i32) (result i32)",
    "fd_pwrite": "(param i32 i32 i32 i64 i32) (result i32)",
    "fd_readdir": "(param i32 i32 i32 i64 i32) (result i32)",
}
_OPEN_F = (
    "(drop (call $path_open (i32.const 3) (i32.const 0) (i32.const 100) (i32.const 1) (i32.const 1)"
    " (i64.const 0x1fffffff) (i64.const 0x1fffffff) (i32.const 0) (i32.const 96)))"
)


@pytest.mark.parametrize("isolation", MODES)
@pytest.mark.parametrize(
    "call",
    [
        "(call $fd_write (i32.const 1) (i32.const 4096) (local.get $n) (i32.const 2100))",
        "(call $fd_write (local.get $f) (i32.const 4096) (local.get $n) (i32.const 2100))",
        "(call $fd_pwrite (local.get $f) (i32.const 4096) (local.get $n) (i64.const 0) (i32.const 2100))",
        "(call $fd_read (i32.const 0) (i32.const 4096) (local.get $n) (i32.const 2100))",
        "(call $fd_pread (local.get $f) (i32.const 4096) (local.get $n) (i64.const 0) (i32.const 2100))",
    ],
    ids=["fd_write-stdout", "fd_write-file", "fd_pwrite", "fd_read-stdin", "fd_pread"],
)
def test_more_iovecs_than_iov_max_is_einval_and_moves_nothing(
    store: MemoryBlockStore, home: Path, call: str, isolation: str
) -> None:
    """POSIX's readv/writev refuse more than IOV_MAX (1024 in wasi-libc's limits.h) buffers with EINVAL: so does
    kuro, before it reads the array — a guest whose memory is all iovecs (2**29 of them in 4 GiB, each a host
    object) cannot make the host build them all. 1024 iovecs of one byte each still move 1024 bytes; 1025 move
    none. The exit code is the first call's count, times 1000, plus the second call's errno."""
    more = "".join(f'(import "wasi_snapshot_preview1" "{n}" (func ${n} {sig}))' for n, sig in _IO_SIGS.items())
    imports = _IMPORTS + more
    source = f"""(module {imports} (memory (export "memory") 1) (data (i32.const 100) "f")
      (func (export "_start") (result i32) (local $f i32) (local $n i32) (local $i i32) (local $e i32) (local $c i32)
        (loop $fill  ;; 1025 iovecs at 4096, each one byte at 20000 + i
          (i32.store (i32.add (i32.const 4096) (i32.mul (local.get $i) (i32.const 8)))
                     (i32.add (i32.const 20000) (local.get $i)))
          (i32.store (i32.add (i32.const 4100) (i32.mul (local.get $i) (i32.const 8))) (i32.const 1))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $fill (i32.lt_u (local.get $i) (i32.const 1025))))
        (memory.fill (i32.const 20000) (i32.const 120) (i32.const 1025))
        {_OPEN_F} (local.set $f (i32.load (i32.const 96)))
        (drop (call $fd_write (local.get $f) (i32.const 4096) (i32.const 1024) (i32.const 2100)))  ;; 1024 bytes
        (local.set $n (i32.const 1024))
        (local.set $e {call})
        (local.set $c (i32.load (i32.const 2100)))
        (i32.store (i32.const 2100) (i32.const 7))
        (local.set $n (i32.const 1025))
        (local.set $e {call})
        (if (i32.ne (i32.load (i32.const 2100)) (i32.const 7)) (then (return (i32.const 99))))
        (i32.add (i32.mul (local.get $c) (i32.const 1000)) (local.get $e))))"""
    receipt = _run(store, home, source, isolation, stdin=b"y" * 2000)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("exit", 1024 * 1000 + 28), receipt
    assert receipt["kuro/stdout"] in (b"", b"x" * 1024)


# ---- poll_oneoff subscriptions past what any poll needs


@pytest.mark.parametrize("isolation", MODES)
def test_more_subscriptions_than_any_poll_needs_is_einval_and_moves_nothing(
    store: MemoryBlockStore, home: Path, isolation: str
) -> None:
    """One poll needs at most a read and a write subscription per open descriptor (16384 at most) and a timeout:
    32769. More is EINVAL, as POSIX poll answers more descriptors than a process may open, before the array is
    read — each subscription is a host object, and 4 GiB holds 89 million of them. 32769 due timers all fire; the
    exit code is their event count times 100, plus the errno of 32770."""
    most = 2 * 16384 + 1
    source = f"""(module {_IMPORTS} (memory (export "memory") 64)
      (func (export "_start") (result i32) (local $i i32) (local $e i32) (local $n i32)
        (loop $fill  ;; subscription i at 65536 + 48 i: userdata i, a monotonic clock due now
          (i64.store (i32.add (i32.const 65536) (i32.mul (local.get $i) (i32.const 48)))
                     (i64.extend_i32_u (local.get $i)))
          (i32.store (i32.add (i32.const 65552) (i32.mul (local.get $i) (i32.const 48))) (i32.const 1))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $fill (i32.le_u (local.get $i) (i32.const {most}))))
        (drop (call $poll_oneoff (i32.const 65536) (i32.const 2200000) (i32.const {most}) (i32.const 2100)))
        (local.set $n (i32.load (i32.const 2100)))
        (i32.store (i32.const 2100) (i32.const 7))
        (local.set $e (call $poll_oneoff (i32.const 65536) (i32.const 2200000) (i32.const {most + 1}) (i32.const 2100)))
        (if (i32.ne (i32.load (i32.const 2100)) (i32.const 7)) (then (return (i32.const 99))))
        (i32.add (i32.mul (local.get $n) (i32.const 100)) (local.get $e))))"""
    receipt = _run(store, home, source, isolation)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("exit", most * 100 + 28), receipt


# ---- a path longer than any path


def test_a_path_longer_than_4096_bytes_is_enametoolong_and_never_copied(store: MemoryBlockStore, home: Path) -> None:
    """A path is at most 4096 bytes (ENAMETOOLONG past it, wherever it points): a 32 MiB one is refused by its
    length, never copied out of guest memory and decoded (it could be all of a 4 GiB memory). Past the end of
    memory it is still EFAULT. The exit code is both errnos, the first times 100."""
    imports = _IMPORTS + f'(import "wasi_snapshot_preview1" "path_open" (func $path_open {_IO_SIGS["path_open"]}))'
    size = 32 << 20

    def open_call(length: int) -> str:
        return (
            f"(call $path_open (i32.const 3) (i32.const 0) (i32.const 65536) (i32.const {length}) (i32.const 0)"
            " (i64.const 2) (i64.const 2) (i32.const 0) (i32.const 96))"
        )

    source = f"""(module {imports} (memory (export "memory") {size // 65536 + 1})
      (func (export "_start") (result i32)
        (memory.fill (i32.const 65536) (i32.const 97) (i32.const {size}))
        (i32.add (i32.mul {open_call(size)} (i32.const 100)) {open_call(size + 1)})))"""
    receipt, peak = _run_traced(store, home, source, make_fs(store))
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("exit", 37 * 100 + EFAULT), receipt
    assert peak < 4 << 20, f"the host held {peak} bytes"


# ---- writes of nothing


@pytest.mark.parametrize("count", [1, 2], ids=["one-iovec", "two-iovecs"])
def test_writing_nothing_to_stdout_adds_no_chunk_however_often(store: MemoryBlockStore, home: Path, count: int) -> None:
    """A write of 0 bytes to a pipe changes nothing (POSIX; wasmtime's WASI): 100001 of them — past the stream's
    100000-chunk bound — leave the run ``ok`` with no chunk, not ``output-capped`` with nothing output."""
    source = f"""(module {_IMPORTS} (memory (export "memory") 1)
      (func (export "_start") (local $i i32)
        (i32.store (i32.const 104) (i32.const 0)) (i32.store (i32.const 112) (i32.const 0))
        (loop $again
          (drop (call $fd_write (i32.const 1) (i32.const 100) (i32.const {count}) (i32.const 300)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $again (i32.lt_u (local.get $i) (i32.const 100001))))))"""
    fs = make_fs(store)
    chunks: list[object] = []
    spec = guest(add_guest(store, source), "_start")
    receipt = run(make_session(fs), spec, store=store, fs=fs, home=home, on_chunk=lambda _s, c: chunks.append(c))
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"], chunks) == ("ok", b"", []), receipt


# ---- listings of one large directory through many descriptors


def test_listings_held_by_many_descriptors_are_bounded_and_a_dropped_one_is_read_again(
    store: MemoryBlockStore, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each descriptor keeps the listing its ``fd_readdir`` at cookie 0 made (later cookies read it), but all of them
    keep at most ``MAX_LISTED`` entries: 40 descriptors over one directory of 1000 names hold about one listing, not
    40 (~7 MB). The first descriptor's listing, dropped long since, is read again at its next cookie: the entry at
    cookie 999 is still ``n0997`` (after ``.`` and ``..``), 24 bytes of dirent and its name. The exit code is 0
    when it is."""
    from kuro_wasm.host import wasi_state

    monkeypatch.setattr(wasi_state, "MAX_LISTED", 1500)
    names = {f"d/n{i:04d}": b"" for i in range(1000)}
    imports = _IMPORTS + "".join(
        f'(import "wasi_snapshot_preview1" "{n}" (func ${n} {_IO_SIGS[n]}))' for n in ("path_open", "fd_readdir")
    )
    source = f"""(module {imports} (memory (export "memory") 1) (data (i32.const 0) "d")
      (func $open (result i32)
        (drop (call $path_open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 2)
          (i64.const 0x4000) (i64.const 0) (i32.const 0) (i32.const 96)))
        (i32.load (i32.const 96)))
      (func (export "_start") (result i32) (local $first i32) (local $i i32)
        (local.set $first (call $open))
        (drop (call $fd_readdir (local.get $first) (i32.const 200) (i32.const 0) (i64.const 0) (i32.const 100)))
        (loop $more
          (drop (call $fd_readdir (call $open) (i32.const 200) (i32.const 0) (i64.const 0) (i32.const 100)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $more (i32.lt_u (local.get $i) (i32.const 39))))
        (drop (call $fd_readdir (local.get $first) (i32.const 200) (i32.const 29) (i64.const 999) (i32.const 100)))
        (i32.ne (i32.load (i32.const 225)) (i32.const 0x37393930))))"""  # "0997", after 24 bytes and "n"
    receipt, peak = _run_traced(store, home, source, make_fs(store, names))
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("ok", 0), receipt
    assert peak < 3 << 20, f"the host held {peak} bytes"
