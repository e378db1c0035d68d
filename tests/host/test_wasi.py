"""WASI preview 1 guests as runs: stopping while blocked, what the world looks like, determinism, the receipt.

Byte-level behaviour (every program, every errno) is held to wasmtime's own WASI by tests/wasi; the
fixture cases (guests/fixtures/wasi-*.toml) pin denials and commit points. These are the run-level
rules a fixture cannot state: kill and deadline while a guest waits, argv[0], the host's environment,
nondeterminism and seeded runs, and the spec and option errors.
"""

from __future__ import annotations

import os
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import wasmtime
from hostkit import ALL_CAPS, GUESTS, make_fs

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.errors import ModelError
from kuro_wasm.host.api import run, start
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.operation import argument_digest
from kuro_wasm.model.receipt import KEYS
from kuro_wasm.model.sessions import guest, session

TIMING_KEYS = {"kuro/started-at", "kuro/finished-at", "kuro/duration-ms"}


def c_guest(store: MemoryBlockStore, name: str) -> str:
    return add_guest(store, (GUESTS / "c" / f"{name}.wasm").read_bytes())


@pytest.fixture
def store() -> MemoryBlockStore:
    return MemoryBlockStore()


def _session(store: MemoryBlockStore, files: dict[str, str] | None = None, grant: list[str] | None = None) -> Any:
    fs = make_fs(store, files or {})
    return session("s-wasi", fs.root, "terminal-build", grant=ALL_CAPS if grant is None else grant)


# ---- stopping a guest that waits


def test_a_guest_blocked_reading_stdin_is_cancelled_promptly_by_kill(store: MemoryBlockStore, home: Path) -> None:
    echoed = threading.Event()
    handle = start(
        _session(store),
        guest(c_guest(store, "cat"), "_start"),
        store=store,
        home=home,
        on_chunk=lambda _s, chunk: echoed.set(),
    )
    assert not isinstance(handle, dict)
    handle.write(b"first line\n")
    assert echoed.wait(60), "cat never echoed its first read"  # it is now back in fd_read, waiting for more
    handle.kill()
    receipt = handle.wait(60)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("cancelled", 130)
    assert receipt["kuro/stdout"] == b"first line\n"


def test_a_guest_blocked_reading_stdin_stops_at_the_deadline(store: MemoryBlockStore, home: Path) -> None:
    handle = start(_session(store), guest(c_guest(store, "cat"), "_start"), store=store, home=home, timeout_ms=200)
    assert not isinstance(handle, dict)
    receipt = handle.wait(60)  # stdin is never closed: only the deadline ends it
    assert (receipt["kuro/outcome"], receipt["kuro/timed-out?"]) == ("timeout", True)


def test_a_sleeping_guest_is_cancelled_by_kill(store: MemoryBlockStore, home: Path) -> None:
    handle = start(_session(store), guest(c_guest(store, "sleep"), "_start", ["600000"]), store=store, home=home)
    assert not isinstance(handle, dict)
    handle.kill()
    receipt = handle.wait(60)
    assert receipt["kuro/outcome"] == "cancelled" and receipt["kuro/stdout"] == b""


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_kill_keeps_what_was_committed_and_drops_the_pending_writes(
    store: MemoryBlockStore, home: Path, isolation: str
) -> None:
    """docs/wasi.md: a killed run gets no end-of-run commit. commit.c wrote kept.txt and closed it (a commit
    point), then wrote pending.txt and left it open, and waits on stdin: only kept.txt survives the kill."""
    waiting = threading.Event()
    before = make_fs(store, {"old.txt": "old"})
    handle = start(
        session("s-wasi", before.root, "terminal-build", grant=ALL_CAPS),
        guest(c_guest(store, "commit"), "_start", ["wait"]),
        store=store,
        home=home,
        isolation=isolation,  # type: ignore[arg-type]
        on_chunk=lambda _s, chunk: waiting.set() if b"waiting" in chunk.data else None,
    )
    assert not isinstance(handle, dict)
    assert waiting.wait(60), "commit never said it was waiting"  # both files are written by now
    handle.kill()
    receipt = handle.wait(60)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("cancelled", 130)
    after = Fs(store, receipt["kuro/fs-root-after"])
    assert [e["name"] for e in after.ls(".").value] == ["kept.txt", "old.txt"]
    assert after.read("kept.txt").value == b"kept"


# ---- the world a WASI guest sees


def test_argv0_is_the_guests_cid_unless_the_spec_names_it(store: MemoryBlockStore, home: Path) -> None:
    cid = c_guest(store, "envargs")
    plain = run(_session(store), guest(cid, "_start", ["x"]), store=store, home=home)
    assert plain["kuro/stdout"].splitlines()[1:3] == [f"argv[0] = <{cid}>".encode(), b"argv[1] = <x>"]
    named = run(_session(store), guest(cid, "_start", ["x"], argv0="envargs"), store=store, home=home)
    assert named["kuro/stdout"].splitlines()[1] == b"argv[0] = <envargs>"


def test_no_host_environment_variable_reaches_a_guest(
    store: MemoryBlockStore, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KURO_TEST_SECRET", "from the host")
    cid = c_guest(store, "envargs")
    receipt = run(
        _session(store), guest(cid, "_start", ["-g", "KURO_TEST_SECRET", "PATH", "HOME"]), store=store, home=home
    )
    assert receipt["kuro/stdout"] == b"KURO_TEST_SECRET unset\nPATH unset\nHOME unset\n"
    given = run(_session(store), guest(cid, "_start", env={"A": "1"}), store=store, home=home)
    assert given["kuro/stdout"].endswith(b"envc 1\nenv <A=1>\n")
    assert given["kuro/env"] == {"A": "1"} and given["kuro/command"]["kuro/env"] == {"A": "1"}
    assert "KURO_TEST_SECRET" in os.environ


def test_a_program_that_reads_nothing_records_no_reads_and_moves_no_root(store: MemoryBlockStore, home: Path) -> None:
    receipt = run(
        _session(store, {"d/a.txt": "abc"}), guest(c_guest(store, "ls"), "_start", ["d"]), store=store, home=home
    )
    assert receipt["kuro/stdout"] == b"d:\nf 3 a.txt\n\n"
    assert receipt["kuro/reads"] == [] and "kuro/fs-root-after" not in receipt
    assert set(receipt) <= {f"kuro/{k}" for k in KEYS}


#: Opens the preopen (fd 3) again as fd 4 with ``path_open`` alone, then exits with what
#: ``path_create_directory(4, "d")`` answers.
CUT_THEN_MKDIR = """(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_create_directory" (func $mkdir (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "d") (data (i32.const 32) ".")
  (func (export "_start")
    (if (call $open (i32.const 3) (i32.const 0) (i32.const 32) (i32.const 1) (i32.const 2)
          (i64.const 8192) (i64.const 0) (i32.const 0) (i32.const 64))
      (then (call $exit (i32.const 99))))
    (call $exit (call $mkdir (i32.load (i32.const 64)) (i32.const 16) (i32.const 1)))))"""


@pytest.mark.parametrize("grant", [ALL_CAPS, ["guest/invoke", "fs/read", "fs/ls"]], ids=["granted", "not-granted"])
def test_a_call_the_descriptor_has_no_right_for_is_enotcapable_and_no_denial(
    store: MemoryBlockStore, home: Path, grant: list[str]
) -> None:
    """An fd right the program did not ask for is checked before the grant: ENOTCAPABLE (76), nothing recorded,
    nothing made."""
    cid = add_guest(store, bytes(wasmtime.wat2wasm(CUT_THEN_MKDIR)))
    receipt = run(_session(store, grant=grant), guest(cid, "_start"), store=store, home=home)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("exit", 76)
    assert receipt.get("kuro/denials") == [] and "kuro/fs-root-after" not in receipt


@pytest.mark.parametrize("code", [1, 255, 256, 2**31, 2**32 - 1])
def test_the_exit_code_is_proc_exits_u32_as_the_program_passed_it(
    store: MemoryBlockStore, home: Path, code: int
) -> None:
    """C's exit(-1) passes 4294967295 (the witx exitcode is u32): never a negative code, never ok."""
    signed = code - 2**32 if code >= 2**31 else code
    source = f"""(module
      (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
      (memory (export "memory") 1)
      (func (export "_start") (call $exit (i32.const {signed})))
      (func (export "returns") (result i32) (i32.const {signed})))"""
    cid = add_guest(store, bytes(wasmtime.wat2wasm(source)))
    for export in ("_start", "returns"):  # an entry's i32 result is read the same way
        receipt = run(_session(store), guest(cid, export), store=store, home=home)
        assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("exit", code)


# ---- stdout and stderr are the stream


@pytest.mark.parametrize(("fd", "name"), [(1, "stdout"), (2, "stderr")])
@pytest.mark.parametrize("iovs", ["1", "64"])
def test_a_write_the_cap_must_drop_is_never_built(
    store: MemoryBlockStore, home: Path, fd: int, name: str, iovs: str
) -> None:
    """spew writes 4 MiB from one buffer, once or as 64 iovecs over it (256 MiB): past the 1 MiB cap either
    way, so dropped whole and the guest stopped — and the host never gathers what it drops (before it did,
    a 256 MiB write cost the host 512 MiB). The receipt states the drop; nothing is kept."""
    args = [str(fd), "1", str(4 << 20), iovs]
    tracemalloc.start()
    try:
        receipt = run(_session(store), guest(c_guest(store, "spew"), "_start", args), store=store, home=home)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("output-capped", 125)
    assert (receipt["kuro/truncated?"], receipt["kuro/capped-by"]) == (True, "bytes")
    assert receipt["kuro/dropped-bytes"] == int(iovs) * (4 << 20)
    assert (receipt["kuro/stdout"], receipt["kuro/stderr"]) == (b"", b"")
    assert peak < 2 << 20, f"the host built {peak} bytes for a {name} write it dropped"


def test_a_file_write_naming_one_buffer_many_times_is_written_a_buffer_at_a_time(
    store: MemoryBlockStore, home: Path
) -> None:
    """spew writes one writev of 32 iovecs over one 1 MiB buffer to a file: 32 MiB land in it, and the host
    never holds them gathered (before, the peak was twice the write; kuro.fs keeps the repeated leaves once)."""
    tracemalloc.start()
    try:
        args = ["out", "1", str(1 << 20), "32"]
        receipt = run(_session(store), guest(c_guest(store, "spew"), "_start", args), store=store, home=home)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert receipt["kuro/outcome"] == "ok"
    after = Fs(store, receipt["kuro/fs-root-after"]).read("out").value
    assert after == (b"a" * ((1 << 20) - 1) + b"\n") * 32
    assert peak < 16 << 20, f"the host held {peak} bytes for a 32 MiB write of one 1 MiB buffer"


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_stderr_is_bounded_and_live_like_stdout(store: MemoryBlockStore, home: Path, isolation: str) -> None:
    """Many stderr writes (spew: 2000 writes of 1000 bytes) share the one cap with stdout on both backends:
    the kept stderr is an exact prefix — whole writes — each kept write a live chunk, the drop stated."""
    seen: list[tuple[str, bytes]] = []
    receipt = run(
        _session(store),
        guest(c_guest(store, "spew"), "_start", ["2", "2000", "1000"]),
        store=store,
        home=home,
        isolation=isolation,  # type: ignore[arg-type]
        max_output_bytes=300_500,
        on_chunk=lambda _s, chunk: seen.append((chunk.stream, chunk.data)),
    )
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("output-capped", 125)
    expected = b"".join(bytes([97 + i % 26]) * 999 + b"\n" for i in range(300))
    assert receipt["kuro/stderr"] == expected and receipt["kuro/stdout"] == b""
    assert (receipt["kuro/stderr-bytes"], receipt["kuro/dropped-bytes"]) == (300_000, 1000)
    assert seen == [("stderr", expected[i : i + 1000]) for i in range(0, 300_000, 1000)]


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_a_block_the_store_lacks_is_eio_for_the_program_and_a_store_fault_in_the_receipt(
    store: MemoryBlockStore, home: Path, isolation: str
) -> None:
    """A leaf gone from the store: the program's read fails (EIO) and exits 1 — and the receipt names the
    block, so that exit is not read as the program's own failure. On both backends."""
    from kuro_fs.dagpb import decode as decode_node

    sess = _session(store, {"big.bin": bytes(range(256)) * 2400})  # 600 KiB: three leaves
    root = Fs(store, sess.fs_root_cid).stat("big.bin").value["cid"]
    leaf = decode_node(store.get(root) or b"").links[1].cid
    store.delete(leaf)
    receipt = run(
        sess,
        guest(c_guest(store, "readfile"), "_start", ["big.bin"]),
        store=store,
        home=home,
        isolation=isolation,  # type: ignore[arg-type]
    )
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("exit", 1)
    assert b"I/O error" in receipt["kuro/stderr"]
    assert receipt["kuro/store-faults"] == [{"kuro/cid": leaf, "kuro/fault": "missing"}]


# ---- clocks and random


def test_clock_and_random_readings_are_counted_as_nondeterminism(store: MemoryBlockStore, home: Path) -> None:
    receipt = run(_session(store), guest(c_guest(store, "clockrand"), "_start"), store=store, home=home)
    assert receipt["kuro/stdout"] == b"clock ok\nsleep ok\nrandom ok\n"
    seen = receipt["kuro/nondeterminism"]
    assert seen["wall-clock"] >= 1 and seen["monotonic-clock"] >= 2 and seen["random-bytes"] == 64
    assert "kuro/deterministic" not in receipt
    quiet = run(_session(store), guest(c_guest(store, "hello"), "_start"), store=store, home=home)
    assert "kuro/nondeterminism" not in quiet


def test_a_deterministic_run_gives_the_same_receipt_for_the_same_inputs(store: MemoryBlockStore, home: Path) -> None:
    cid = c_guest(store, "clockrand")

    def once(seed: int) -> dict[str, Any]:
        return run(_session(store), guest(cid, "_start", ["-v"]), store=store, home=home, deterministic=True, seed=seed)

    first, second, other = once(7), once(7), once(8)
    assert first["kuro/outcome"] == "ok" and first["kuro/stdout"].startswith(b"clock ok\nsleep ok\nrandom ok\n")
    assert {k: v for k, v in first.items() if k not in TIMING_KEYS} == {
        k: v for k, v in second.items() if k not in TIMING_KEYS
    }
    assert first["kuro/deterministic"] == {"seed": 7} and "kuro/nondeterminism" not in first
    assert b"realtime 1704067200" in first["kuro/stdout"]  # the fixed clock starts at 2024-01-01T00:00:00Z
    random_line = [line for line in first["kuro/stdout"].splitlines() if line.startswith(b"random ")][-1]
    assert random_line not in other["kuro/stdout"].splitlines()


def test_a_deterministic_sleep_advances_the_clock_without_waiting(store: MemoryBlockStore, home: Path) -> None:
    receipt = run(
        _session(store),
        guest(c_guest(store, "sleep"), "_start", ["600000"]),
        store=store,
        home=home,
        deterministic=True,
        timeout_ms=60_000,
    )
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"]) == ("ok", b"slept 600000\n")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"seed": 5}, "a seed is for deterministic runs"),
        ({"deterministic": "yes"}, "deterministic must be True or False"),
        ({"deterministic": True, "seed": -1}, "seed must be an int"),
        ({"deterministic": True, "seed": 2**64}, "seed must be an int"),
        ({"deterministic": True, "seed": True}, "seed must be an int"),
    ],
)
def test_a_bad_deterministic_option_is_refused_before_anything_runs(
    store: MemoryBlockStore, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ModelError, match=message) as info:
        run(_session(store), guest(c_guest(store, "hello"), "_start"), store=store, home=False, **options)
    assert info.value.reason == "invalid-run-option"


def test_determinism_and_env_are_part_of_an_operations_identity(store: MemoryBlockStore) -> None:
    sess = _session(store)
    spec = guest(c_guest(store, "hello"), "_start")
    plain = argument_digest(sess, spec)
    assert argument_digest(sess, spec, deterministic=False) == plain
    assert argument_digest(sess, spec, deterministic=True) != plain
    assert argument_digest(sess, spec, deterministic=True, seed=1) != argument_digest(sess, spec, deterministic=True)
    assert argument_digest(sess, {**spec, "kuro/env": {"A": "1"}}) != plain


def test_a_ledgered_deterministic_run_replays_and_another_seed_is_another_operation(
    store: MemoryBlockStore, tmp_path: Path
) -> None:
    from kuro_wasm.errors import OperationConflict
    from kuro_wasm.ledger.ledger import Ledger

    sess = _session(store)
    spec = guest(c_guest(store, "clockrand"), "_start", ["-v"])
    with Ledger(home=tmp_path / "home", store=store) as ledger:
        first = ledger.run("op-seeded", sess, spec, deterministic=True, seed=9)
        again = ledger.run("op-seeded", sess, spec, deterministic=True, seed=9)
        assert first["kuro/deterministic"] == {"seed": 9} and again["kuro/replayed"] is True
        with pytest.raises(OperationConflict):
            ledger.run("op-seeded", sess, spec, deterministic=True, seed=10)


def test_a_deterministic_run_in_a_worker_process_gives_the_in_process_receipt(store: MemoryBlockStore) -> None:
    spec = guest(c_guest(store, "clockrand"), "_start", ["-v"])
    facts = TIMING_KEYS | {"kuro/isolation", "kuro/worker", "kuro/engine"}
    receipts = [
        {k: v for k, v in run(_session(store), spec, store=store, home=False, deterministic=True, seed=5,
                              isolation=isolation).items() if k not in facts}
        for isolation in ("wasmtime", "process")
    ]  # fmt: skip
    assert receipts[0] == receipts[1] and receipts[0]["kuro/deterministic"] == {"seed": 5}


#: Makes a chain of directories d/d/…/d as deep as a 4096-byte path allows (2048), then commits with fd_sync.
DEEP_CHAIN = """(module
  (import "wasi_snapshot_preview1" "path_create_directory" (func $mkdir (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_sync" (func $sync (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "CHAIN")
  (func (export "_start") (local $n i32)
    (local.set $n (i32.const 1))
    (block $done (loop $next
      (br_if $done (i32.gt_u (local.get $n) (i32.const 4095)))
      (if (call $mkdir (i32.const 3) (i32.const 16) (local.get $n)) (then (call $exit (local.get $n))))
      (local.set $n (i32.add (local.get $n) (i32.const 2)))
      (br $next)))
    (call $exit (call $sync (i32.const 3)))))""".replace("CHAIN", "/".join(["d"] * 2048))


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_a_chain_of_directories_as_deep_as_a_path_allows_commits(
    store: MemoryBlockStore, home: Path, isolation: str
) -> None:
    """2048 nested directories (a 4095-byte path) commit at fd_sync and at the end (once a RecursionError)."""
    cid = add_guest(store, bytes(wasmtime.wat2wasm(DEEP_CHAIN)))
    receipt = run(_session(store), guest(cid, "_start"), store=store, home=home, isolation=isolation)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("ok", 0), receipt.get("kuro/error")
    after = Fs(store, receipt["kuro/fs-root-after"])
    assert after.stat("/".join(["d"] * 2048)).ok and not after.stat("/".join(["d"] * 2049)).ok
