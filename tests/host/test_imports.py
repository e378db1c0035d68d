"""The import layer: run contexts, stdin, the shared linker, and calls from outside a run."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import wasmtime
from hostkit import make_fs, make_session, wat
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import raw_cid
from kuro_wasm.host.api import run
from kuro_wasm.host.calls import ADDRESS_SPACE, COPY_SMALL, register_run, unregister_run
from kuro_wasm.host.context import RunContext, StdinPipe
from kuro_wasm.host.engine import EngineConfig, engine_for, install_interrupt, live_run, remove_interrupt
from kuro_wasm.host.kinds.kuro_v1 import linker_for
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model import abi
from kuro_wasm.model.sessions import guest


def _emit(_name: str, _data: bytes) -> bool:
    return True


def test_the_first_stop_reason_wins() -> None:
    ctx = RunContext(grant=frozenset(), emit=_emit)
    ctx.stop("output-capped")
    ctx.stop("timeout")
    ctx.stop("cancelled")
    assert ctx.stop_reason == "output-capped"


def test_a_passed_deadline_becomes_timeout() -> None:
    ctx = RunContext(grant=frozenset(), emit=_emit, deadline=time.monotonic() - 1)
    assert ctx.should_stop() == "timeout"
    assert ctx.stop_reason == "timeout"


def test_stdin_hands_out_bytes_then_end_of_input() -> None:
    pipe = StdinPipe(threading.Condition(), b"abcdef")
    assert pipe.take(4) == b"abcd"
    assert pipe.take(4) == b"ef"
    assert pipe.take(4) is None  # open and empty: the reader waits
    pipe.close()
    pipe.write(b"late")
    assert pipe.take(4) == b""


def test_a_denial_is_recorded_with_import_capability_and_path() -> None:
    ctx = RunContext(grant=frozenset(), emit=_emit)
    assert ctx.deny("fs_read", "fs/read", "a.txt") == -1
    assert ctx.deny("read", "stdin/read", None) == -1
    assert ctx.denials == [
        {"kuro/import": "fs_read", "kuro/capability": "fs/read", "kuro/path": "a.txt"},
        {"kuro/import": "read", "kuro/capability": "stdin/read"},
    ]


def test_the_linker_is_shared_per_engine_and_defines_every_import() -> None:
    engine = engine_for(EngineConfig())
    linker = linker_for(engine)
    assert linker_for(engine) is linker
    store = wasmtime.Store(engine)
    for spec in abi.IMPORTS:
        assert linker.get(store, "kuro", spec.name) is not None
    assert linker_for(engine_for(EngineConfig(fuel=True))) is not linker


def test_an_import_called_from_an_unregistered_store_traps() -> None:
    engine = engine_for(EngineConfig())
    module = wasmtime.Module(engine, wat("hello"))
    store = wasmtime.Store(engine)
    store.set_epoch_deadline(10**9)
    instance = linker_for(engine).instantiate(store, module)
    run = instance.exports(store)["run"]
    assert isinstance(run, wasmtime.Func)
    try:
        run(store)
    except wasmtime.WasmtimeError as err:  # a trap made by a host function comes back as an error
        assert "outside a run" in str(err)
    else:
        raise AssertionError("an import outside a run must trap")


def test_a_registered_store_reaches_its_own_context() -> None:
    engine = engine_for(EngineConfig())
    module = wasmtime.Module(engine, wat("hello"))
    written: list[tuple[str, bytes]] = []

    def emit(name: str, data: bytes) -> bool:
        written.append((name, data))
        return True

    ctx = RunContext(grant=frozenset(), emit=emit)
    store = wasmtime.Store(engine)
    key = install_interrupt(store, ctx)
    register_run(store, ctx)
    try:
        with live_run():
            instance = linker_for(engine).instantiate(store, module)
            run = instance.exports(store)["run"]
            assert isinstance(run, wasmtime.Func)
            assert run(store) == 0
    finally:
        unregister_run(store)
        remove_interrupt(key)
    assert written == [("stdout", b"hello, kuro\n"), ("stderr", b"note: stderr works\n")]


def test_the_epoch_callback_stops_a_loop_when_asked() -> None:
    engine = engine_for(EngineConfig())
    module = wasmtime.Module(engine, wat("spin"))
    ctx = RunContext(grant=frozenset(), emit=_emit)
    store = wasmtime.Store(engine)
    install_interrupt(store, ctx)
    instance = wasmtime.Instance(store, module, [])
    spin = instance.exports(store)["run"]
    assert isinstance(spin, wasmtime.Func)
    threading.Timer(0.02, ctx.stop, args=("cancelled",)).start()
    with live_run():
        try:
            spin(store)
        except wasmtime.WasmtimeError as err:
            assert "cancelled" in str(err)
        else:
            raise AssertionError("the loop must be stopped")


# ---- multi-block files through the gate


def _pattern(size: int) -> bytes:
    return bytes((i * 7 + i // 251) % 256 for i in range(size))


def test_fs_read_of_a_multi_block_file_copies_exact_bytes(tmp_path: Path) -> None:
    store = MemoryBlockStore()
    data = _pattern(700_001)  # three chunks: a dag-pb root over raw leaves
    fs = make_fs(store, {"big.bin": data})
    sess = make_session(fs)
    cmd = guest(add_guest(store, wat("fs-cat")), "big", [600_000])
    receipt = run(sess, cmd, store=store, home=tmp_path)
    assert receipt["kuro/exit-code"] == 0, receipt
    assert receipt["kuro/stdout"] == data[:600_000]
    stat = fs.stat("big.bin")
    assert receipt["kuro/reads"] == [stat.value["cid"]]


@pytest.mark.parametrize("offset", [0, 262_140, 262_144, 524_286, 699_998, 700_001, 10**12])
def test_fs_read_at_across_chunk_boundaries(tmp_path: Path, offset: int) -> None:
    store = MemoryBlockStore()
    data = _pattern(700_001)
    sess = make_session(make_fs(store, {"greeting.txt": data}))
    receipt = run(sess, guest(add_guest(store, wat("fs-cat")), "at", [offset]), store=store, home=tmp_path)
    assert receipt["kuro/exit-code"] == 0
    assert receipt["kuro/stdout"] == data[offset : offset + 5]


def test_a_block_missing_under_a_file_is_io_for_the_guest(tmp_path: Path) -> None:
    store = MemoryBlockStore()
    data = _pattern(600_000)
    fs = make_fs(store, {"big.bin": data})
    root = fs.stat("big.bin").value["cid"]
    leaf = next(c for c in store.cids() if c.startswith("bafkrei") and c != root)
    store.delete(leaf)
    sess = make_session(fs)
    receipt = run(sess, guest(add_guest(store, wat("fs-cat")), "big", [600_000]), store=store, home=tmp_path)
    assert receipt["kuro/exit-code"] == 7  # -7 IO, negated by the guest
    assert receipt["kuro/outcome"] == "exit"


# ---- bounds: any pointer/length a guest passes


_I32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
_EDGE = st.sampled_from([0, 1, 11, 12, 65535, 65536, 65537, -1, -65536, 2**31 - 1, -(2**31)])
_PTR = st.one_of(_EDGE, _I32)
_PAGE = 65536


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryBlockStore, object, str, Path]:
    store = MemoryBlockStore()
    fs = make_fs(store, {"greeting.txt": "hello"})
    return (
        store,
        make_session(fs, mode="terminal-build", grant=None),
        add_guest(store, wat("bad-pointer")),
        (tmp_path_factory.mktemp("probe-home")),
    )


@settings(max_examples=60, deadline=None)
@given(ptr=_PTR, length=_PTR)
def test_write_answers_fault_exactly_when_the_range_leaves_memory(probe: tuple, ptr: int, length: int) -> None:  # type: ignore[type-arg]
    store, sess, cid, home = probe
    receipt = run(sess, guest(cid, "probe_write", [ptr, length]), store=store, home=home, max_output_bytes=2 * _PAGE)
    fits = abi.checked_range(_PAGE, ptr, length) is not None
    assert receipt["kuro/exit-code"] == (length % 2**32 if fits else -5)
    assert receipt["kuro/stdout-bytes"] == (length % 2**32 if fits else 0)
    if fits:
        assert receipt["kuro/stdout"] == _PROBE_MEMORY[ptr % 2**32 :][: length % 2**32]


#: bad-pointer.wat's memory: its data segment, then zeros to the end of its one page
_PROBE_MEMORY = b"greeting.txt".ljust(_PAGE, b"\0")


@pytest.mark.parametrize("ptr", [0, 5, _PAGE - 4096])
@pytest.mark.parametrize("length", [1, 7, 255, 256, 257, 300, 4096])
def test_write_hands_the_stream_exactly_the_guests_bytes_short_or_long(probe: tuple, ptr: int, length: int) -> None:  # type: ignore[type-arg]
    """Short writes are copied one way (a struct read), long ones another (a slice): both are the bytes."""
    store, sess, cid, home = probe
    receipt = run(sess, guest(cid, "probe_write", [ptr, length]), store=store, home=home)
    expected = _PROBE_MEMORY[ptr : ptr + length]
    assert receipt["kuro/exit-code"] == len(expected) and receipt["kuro/stdout"] == expected


def test_a_small_copy_is_the_bytes_at_the_address_for_every_size_it_covers() -> None:
    data = bytes(range(256)) * 3
    buffer = ctypes.create_string_buffer(data, len(data))
    at = ctypes.addressof(buffer)
    for n in range(len(COPY_SMALL)):
        for offset in (0, 1, 255):
            assert COPY_SMALL[n](ADDRESS_SPACE, at + offset)[0] == data[offset : offset + n]


@settings(max_examples=60, deadline=None)
@given(pptr=_PTR, plen=_PTR, bptr=_PTR, cap=_PTR)
def test_fs_read_never_touches_outside_memory(probe: tuple, pptr: int, plen: int, bptr: int, cap: int) -> None:  # type: ignore[type-arg]
    store, sess, cid, home = probe
    receipt = run(sess, guest(cid, "probe_fs_read", [pptr, plen, bptr, cap]), store=store, home=home)
    code = receipt["kuro/exit-code"]
    assert receipt["kuro/outcome"] in ("ok", "exit")
    if abi.checked_range(_PAGE, pptr, plen) is None or abi.checked_range(_PAGE, bptr, cap) is None:
        assert code in (-5, -4)  # a bad path range faults; a readable but non-UTF-8/empty path is a bad path
    else:
        assert code in (5, -2, -3, -4)  # the file's size, or what the path names


@settings(max_examples=40, deadline=None)
@given(pptr=_PTR, plen=_PTR, dptr=_PTR, dlen=_PTR)
def test_fs_write_of_an_out_of_range_buffer_writes_nothing(
    probe: tuple, pptr: int, plen: int, dptr: int, dlen: int
) -> None:  # type: ignore[type-arg]
    store, sess, cid, home = probe
    receipt = run(sess, guest(cid, "probe_fs_write", [pptr, plen, dptr, dlen]), store=store, home=home)
    if abi.checked_range(_PAGE, pptr, plen) is None or abi.checked_range(_PAGE, dptr, dlen) is None:
        assert receipt["kuro/exit-code"] in (-5, -4)
        assert "kuro/fs-root-after" not in receipt


# ---- -5 for every import: pinned edge ranges, including ones that wrap past 2**32 in u32 arithmetic

_BAD_RANGES = [(65530, 100), (0, -1), (-16, 32), (-8, 20), (-1, 1), (65536, 1), (2**31 - 1, 2), (-(2**31), 16)]
_GOOD_PATH = (0, 12)  # "greeting.txt" in bad-pointer.wat's data segment
_GOOD_BUF = (1024, 16)
#: (export, which (ptr, len) slot gets the bad range, the other slot's good range or None)
_SLOTS = [
    ("probe_write", 0, None),
    ("probe_read", 0, None),
    ("probe_fs_read", 0, _GOOD_BUF),
    ("probe_fs_read", 1, _GOOD_PATH),
    ("probe_fs_read_at", 0, _GOOD_BUF),
    ("probe_fs_read_at", 1, _GOOD_PATH),
    ("probe_fs_write", 0, _GOOD_BUF),
    ("probe_fs_write", 1, _GOOD_PATH),
    ("probe_fs_ls", 0, _GOOD_BUF),
    ("probe_fs_ls", 1, _GOOD_PATH),
    ("probe_fs_rm", 0, None),
]


@pytest.mark.parametrize(("export", "slot", "other"), _SLOTS, ids=[f"{e}-{s}" for e, s, _ in _SLOTS])
def test_every_import_answers_fault_for_every_out_of_range_pair(
    probe: tuple,  # type: ignore[type-arg]
    export: str,
    slot: int,
    other: tuple[int, int] | None,
) -> None:
    store, sess, cid, home = probe
    for bad in _BAD_RANGES:
        assert abi.checked_range(_PAGE, *bad) is None
        pairs = [bad] if other is None else ([bad, other] if slot == 0 else [other, bad])
        args = [n for pair in pairs for n in pair]
        receipt = run(sess, guest(cid, export, args), store=store, home=home, stdin=b"")
        assert (receipt["kuro/exit-code"], receipt["kuro/outcome"]) == (-5, "exit"), (bad, receipt)
        assert receipt["kuro/stdout-bytes"] == 0 and "kuro/fs-root-after" not in receipt
        assert receipt["kuro/reads"] == [] and receipt["kuro/denials"] == []


# ---- reads fetch only the blocks they need (a counting block store)

_CHUNK = 262_144


class GetCountingStore(MemoryBlockStore):
    """A memory store that remembers every CID fetched with ``get``."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: list[str] = []

    def get(self, cid: str) -> bytes | None:
        self.gets.append(cid)
        return super().get(cid)


def _leaves(data: bytes) -> list[str]:
    return [raw_cid(data[i : i + _CHUNK]) for i in range(0, len(data), _CHUNK)]


@pytest.mark.parametrize(
    ("offset", "needed"), [(0, [0]), (_CHUNK - 2, [0, 1]), (3 * _CHUNK + 10, [3]), (5 * _CHUNK - 3, [4])]
)
def test_fs_read_at_fetches_only_the_leaves_it_copies_from(tmp_path: Path, offset: int, needed: list[int]) -> None:
    store = GetCountingStore()
    data = _pattern(5 * _CHUNK)
    leaves = _leaves(data)
    assert len(set(leaves)) == 5
    sess = make_session(make_fs(store, {"greeting.txt": data}))
    cmd = guest(add_guest(store, wat("fs-cat")), "at", [offset])
    store.gets.clear()
    receipt = run(sess, cmd, store=store, home=tmp_path)
    assert receipt["kuro/stdout"] == data[offset : offset + 5]
    assert [c for c in store.gets if c in leaves] == [leaves[i] for i in needed]


def test_fs_read_with_a_small_cap_fetches_only_the_first_leaf(tmp_path: Path) -> None:
    store = GetCountingStore()
    data = _pattern(5 * _CHUNK)
    leaves = _leaves(data)
    sess = make_session(make_fs(store, {"big.bin": data}))
    cmd = guest(add_guest(store, wat("fs-cat")), "big", [5])
    store.gets.clear()
    receipt = run(sess, cmd, store=store, home=tmp_path)
    assert receipt["kuro/stdout"] == data[:5]
    assert [c for c in store.gets if c in leaves] == [leaves[0]]


# ---- every gated import: refused without its capability (recorded, the guest goes on); empty path is -4

_GATED = [
    ("probe_read", [1024, 16], "read", "stdin/read", None),
    ("probe_fs_read", [0, 12, 1024, 16], "fs_read", "fs/read", "greeting.txt"),
    ("probe_fs_read_at", [0, 12, 1024, 16], "fs_read_at", "fs/read", "greeting.txt"),
    ("probe_fs_write", [0, 12, 1024, 16], "fs_write", "fs/write", "greeting.txt"),
    ("probe_fs_ls", [0, 12, 1024, 16], "fs_ls", "fs/ls", "greeting.txt"),
    ("probe_fs_rm", [0, 12], "fs_rm", "fs/rm", "greeting.txt"),
]


@pytest.mark.parametrize(("export", "args", "name", "capability", "path"), _GATED, ids=[g[2] for g in _GATED])
def test_every_gated_import_without_its_capability_answers_denied_and_is_recorded(
    probe: tuple,  # type: ignore[type-arg]
    export: str,
    args: list[int],
    name: str,
    capability: str,
    path: str | None,
) -> None:
    store, _sess, cid, home = probe
    fs = make_fs(store, {"greeting.txt": "hello"})
    others = [c for c in ["guest/invoke", "fs/read", "fs/ls", "fs/write", "fs/rm", "stdin/read"] if c != capability]
    receipt = run(make_session(fs, grant=others), guest(cid, export, args), store=store, home=home, stdin=b"input")
    assert (receipt["kuro/exit-code"], receipt["kuro/outcome"]) == (-1, "exit")
    want = {"kuro/import": name, "kuro/capability": capability} | ({} if path is None else {"kuro/path": path})
    assert receipt["kuro/denials"] == [want]
    assert receipt["kuro/reads"] == [] and "kuro/fs-root-after" not in receipt and receipt["kuro/stdout-bytes"] == 0


@pytest.mark.parametrize("export", [g[0] for g in _GATED if g[0] != "probe_read"])
def test_an_empty_path_is_a_bad_path_for_every_fs_import(probe: tuple, export: str) -> None:  # type: ignore[type-arg]
    store, sess, cid, home = probe
    args = [0, 0, 1024, 16] if export != "probe_fs_rm" else [0, 0]
    receipt = run(sess, guest(cid, export, args), store=store, home=home)
    assert receipt["kuro/exit-code"] == -4
    assert receipt["kuro/denials"] == [] and "kuro/fs-root-after" not in receipt


def test_a_corrupt_block_on_disk_is_io_for_the_guest_never_its_bytes(tmp_path: Path) -> None:
    from kuro_fs.filestore import FileBlockStore

    with FileBlockStore(tmp_path / "blocks") as store:  # verify-on-get: the store's half of the contract
        data = _pattern(600_000)
        fs = make_fs(store, {"big.bin": data})  # type: ignore[arg-type]
        second = raw_cid(data[_CHUNK : 2 * _CHUNK])
        (found,) = [p for p in (tmp_path / "blocks").rglob("*") if p.is_file() and second in p.name]
        found.write_bytes(b"\0" * found.stat().st_size)
        sess = make_session(fs)
        cmd = guest(add_guest(store, wat("fs-cat")), "big", [600_000])
        receipt = run(sess, cmd, store=store, home=tmp_path / "home")
        assert (receipt["kuro/exit-code"], receipt["kuro/outcome"]) == (7, "exit")  # -7 IO, negated
        assert receipt["kuro/stdout"] == b""
        # the guest's exit 7 answers the host's failure: the receipt says whose it was
        assert receipt["kuro/store-faults"] == [{"kuro/cid": second, "kuro/fault": "corrupt"}]
        first = run(sess, guest(add_guest(store, wat("fs-cat")), "big", [5]), store=store, home=tmp_path / "home")
        assert first["kuro/stdout"] == data[:5]  # the blocks before the damage still read
        assert "kuro/store-faults" not in first  # absent: every block the run asked for was supplied


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_a_corrupt_block_is_named_as_corrupt_on_both_backends(tmp_path: Path, isolation: str) -> None:
    # A worker is told only that the block is absent; the host, whose store failed, corrects the record.
    from kuro_fs.filestore import FileBlockStore

    with FileBlockStore(tmp_path / "blocks") as store:
        fs = make_fs(store, {"greeting.txt": "hello"})  # type: ignore[arg-type]
        cid = fs.stat("greeting.txt").value["cid"]
        (found,) = [p for p in (tmp_path / "blocks").rglob("*") if p.is_file() and cid in p.name]
        found.write_bytes(b"jello")
        cmd = guest(add_guest(store, wat("deny-loop")), "same", [1])
        receipt = run(make_session(fs), cmd, store=store, home=tmp_path / "home", isolation=isolation)  # type: ignore[arg-type]
        assert receipt["kuro/outcome"] == "ok" and receipt["kuro/isolation"] == isolation
        assert receipt["kuro/store-faults"] == [{"kuro/cid": cid, "kuro/fault": "corrupt"}]


def test_the_fault_record_of_many_corrupt_blocks_is_the_same_on_both_backends(tmp_path: Path) -> None:
    # A worker is told how the host's store failed (reply.fault) and raises it as that store did, so the
    # record — folded entries included — is the in-process one.
    from kuro_fs.filestore import FileBlockStore
    from kuro_wasm.host.context import MAX_STORE_FAULT_ENTRIES

    with FileBlockStore(tmp_path / "blocks") as store:
        names = [f"{i:04d}" for i in range(MAX_STORE_FAULT_ENTRIES + 10)]
        fs = make_fs(store, {name: f"file {name}" for name in names})  # type: ignore[arg-type]
        for name in names:
            cid = fs.stat(name).value["cid"]
            (found,) = [p for p in (tmp_path / "blocks").rglob("*") if p.is_file() and cid in p.name]
            found.write_bytes(b"damaged " + name.encode())
        cmd = guest(add_guest(store, wat("deny-loop")), "distinct", [len(names)])
        records = [
            run(make_session(fs), cmd, store=store, home=tmp_path / "home", isolation=how)["kuro/store-faults"]  # type: ignore[arg-type]
            for how in ("wasmtime", "process")
        ]
        assert records[0] == records[1]
        assert records[0][-1] == {"kuro/fault": "corrupt", "kuro/count": 10}


def test_a_missing_block_is_a_store_fault_in_the_receipt_counted_per_call(tmp_path: Path) -> None:
    store = MemoryBlockStore()
    fs = make_fs(store, {"greeting.txt": "hello"})
    cid = fs.stat("greeting.txt").value["cid"]
    store.delete(cid)
    cmd = guest(add_guest(store, wat("deny-loop")), "same", [3])  # fs_read of greeting.txt, three times
    receipt = run(make_session(fs), cmd, store=store, home=tmp_path)
    assert receipt["kuro/outcome"] == "ok" and receipt["kuro/denials"] == [] and receipt["kuro/reads"] == []
    assert receipt["kuro/store-faults"] == [{"kuro/cid": cid, "kuro/fault": "missing", "kuro/count": 3}]


def test_a_store_failing_on_ever_new_blocks_keeps_the_fault_record_bounded(tmp_path: Path) -> None:
    from kuro_wasm.host.context import MAX_STORE_FAULT_ENTRIES

    store = MemoryBlockStore()
    names = [f"{i:04d}" for i in range(200)]
    fs = make_fs(store, {name: f"file {name}" for name in names})
    cids = [fs.stat(name).value["cid"] for name in names]
    for cid in cids:
        store.delete(cid)
    cmd = guest(add_guest(store, wat("deny-loop")), "distinct", [200])  # fs_read of "0000" … "0199"
    faults = run(make_session(fs), cmd, store=store, home=tmp_path)["kuro/store-faults"]
    assert len(faults) == MAX_STORE_FAULT_ENTRIES + 1
    assert faults[:2] == [{"kuro/cid": c, "kuro/fault": "missing"} for c in cids[:2]]
    assert faults[-1] == {"kuro/fault": "missing", "kuro/count": 200 - MAX_STORE_FAULT_ENTRIES}
    assert sum(f.get("kuro/count", 1) for f in faults) == 200  # every failed block is accounted for


def test_refused_calls_with_ever_new_paths_keep_the_denial_record_bounded(tmp_path: Path) -> None:
    from kuro_wasm.host.context import MAX_DENIAL_ENTRIES

    store = MemoryBlockStore()
    sess = make_session(make_fs(store), grant=["guest/invoke"])
    cmd = guest(add_guest(store, wat("deny-loop")), "distinct", [1000])
    denials = run(sess, cmd, store=store, home=tmp_path)["kuro/denials"]
    assert len(denials) == MAX_DENIAL_ENTRIES + 1
    assert [d.get("kuro/path") for d in denials[:3]] == ["0000", "0001", "0002"]
    assert denials[-1] == {
        "kuro/import": "fs_read",
        "kuro/capability": "fs/read",
        "kuro/count": 1000 - MAX_DENIAL_ENTRIES,
    }
    assert sum(d.get("kuro/count", 1) for d in denials) == 1000  # every refused call is accounted for


@pytest.mark.parametrize(("missing", "reached"), [(0, False), (15, False), (16, True), (18, True)])
def test_bytes_copied_before_a_missing_leaf_are_still_a_read(tmp_path: Path, missing: int, reached: bool) -> None:
    # fs_read copies window by window (kuro_fs.fileread.STREAM_WINDOW, 16 leaves) into guest memory; when leaf
    # `missing` is gone, the windows before its own are already in the guest's memory, so the file must be in
    # kuro/reads (and must not be when none was).
    from kuro_fs.dagpb import decode as decode_node
    from kuro_fs.fileread import STREAM_WINDOW

    store = MemoryBlockStore()
    size = STREAM_WINDOW + 600_000  # a window of 16 leaves, then three leaves
    fs = make_fs(store, {"big.bin": _pattern(size)})
    root = fs.stat("big.bin").value["cid"]
    leaves = [link.cid for link in decode_node(store.get(root) or b"").links]
    assert len(leaves) == 19
    store.delete(leaves[missing])
    receipt = run(make_session(fs), guest(add_guest(store, wat("fs-cat")), "big", [size]), store=store, home=tmp_path)
    assert receipt["kuro/exit-code"] == 7  # -7 IO, negated by the guest
    assert receipt["kuro/reads"] == ([root] if reached else [])


def test_fs_ls_leaves_out_an_old_name_with_a_newline_instead_of_forging_a_line(tmp_path: Path) -> None:
    # kuro.fs refuses control characters in new names; a tree made before (or by hand) may hold one.
    from kuro_fs.fs import Fs
    from kuro_fs.fsdir import Entry, encode_dir

    store = MemoryBlockStore()
    leaf = store.put(b"x")
    root = store.put(encode_dir({"evil\nfake": Entry(leaf, 1), "plain.txt": Entry(leaf, 1)}), "dag-cbor")
    fs = Fs(store, root)
    receipt = run(make_session(fs), guest(add_guest(store, wat("fs-ls")), "run"), store=store, fs=fs, home=tmp_path)
    assert receipt["kuro/exit-code"] == 0, receipt
    assert receipt["kuro/stdout"] == b"plain.txt\n"


GROWS = """(module
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (import "kuro" "read" (func $read (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "a")
  (func (export "run") (result i32)
    (if (i32.ne (call $write (i32.const 1) (i32.const 0) (i32.const 1)) (i32.const 1)) (then (return (i32.const 1))))
    (if (i32.ne (call $write (i32.const 1) (i32.const 65536) (i32.const 1)) (i32.const -5))
      (then (return (i32.const 2))))
    (if (i32.ne (call $read (i32.const 65536) (i32.const 1)) (i32.const -5)) (then (return (i32.const 3))))
    (drop (memory.grow (i32.const 1)))
    (i32.store8 (i32.const 65536) (i32.const 98))
    (if (i32.ne (call $write (i32.const 1) (i32.const 65536) (i32.const 1)) (i32.const 1))
      (then (return (i32.const 4))))
    (if (i32.ne (call $read (i32.const 65537) (i32.const 10)) (i32.const 2)) (then (return (i32.const 5))))
    (if (i32.ne (call $write (i32.const 1) (i32.const 65537) (i32.const 2)) (i32.const 2))
      (then (return (i32.const 6))))
    (if (i32.ne (call $write (i32.const 1) (i32.const 131071) (i32.const 2)) (i32.const -5))
      (then (return (i32.const 7))))
    (if (i32.ne (call $write (i32.const 1) (i32.const 131072) (i32.const 0)) (i32.const 0))
      (then (return (i32.const 8))))
    (i32.const 0)))"""


def test_a_range_checked_against_the_size_last_read_is_checked_again_after_the_memory_grew(tmp_path: Path) -> None:
    # A host call checks a range against the memory size it read last (a memory only grows), and asks
    # wasmtime again before refusing one: after memory.grow the new page is reachable, past it is not.
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, GROWS)
    receipt = run(make_session(fs), guest(cid, "run"), store=store, home=tmp_path, stdin=b"xy")
    assert receipt["kuro/exit-code"] == 0, receipt
    assert receipt["kuro/stdout"] == b"abxy"


def test_registrations_nest_on_a_thread_and_each_store_reaches_its_own_run() -> None:
    # A trampoline finds its run as the thread's current run: a run registered inside another's
    # (a host call that runs a guest) hides the outer one until it is unregistered, then the outer
    # one is current again.
    engine = engine_for(EngineConfig())
    module = wasmtime.Module(engine, wat("hello"))
    outer_writes: list[tuple[str, bytes]] = []
    inner_writes: list[tuple[str, bytes]] = []

    def call(store: wasmtime.Store) -> None:
        with live_run():
            instance = linker_for(engine).instantiate(store, module)
            func = instance.exports(store)["run"]
            assert isinstance(func, wasmtime.Func)
            assert func(store) == 0

    outer = RunContext(grant=frozenset(), emit=lambda n, d: outer_writes.append((n, d)) is None)
    inner = RunContext(grant=frozenset(), emit=lambda n, d: inner_writes.append((n, d)) is None)
    outer_store, inner_store = wasmtime.Store(engine), wasmtime.Store(engine)
    keys = [install_interrupt(outer_store, outer), install_interrupt(inner_store, inner)]
    register_run(outer_store, outer)
    try:
        register_run(inner_store, inner)
        try:
            call(inner_store)
        finally:
            unregister_run(inner_store)
        call(outer_store)
    finally:
        unregister_run(outer_store)
        for key in keys:
            remove_interrupt(key)
    assert len(inner_writes) == len(outer_writes) == 2
    seen: list[str] = []

    def elsewhere() -> None:  # another thread has no current run: its import calls trap
        store = wasmtime.Store(engine)
        store.set_epoch_deadline(10**9)
        func = linker_for(engine).instantiate(store, module).exports(store)["run"]
        assert isinstance(func, wasmtime.Func)
        try:
            func(store)
        except (wasmtime.WasmtimeError, wasmtime.Trap) as err:
            seen.append(str(err))

    worker = threading.Thread(target=elsewhere)
    register_run(outer_store := wasmtime.Store(engine), outer)
    try:
        worker.start()
        worker.join()
    finally:
        unregister_run(outer_store)
    assert len(seen) == 1 and "outside a run" in seen[0]


# ---- a run keeps its memory's base only where the engine never moves a memory

GROWS_FAR = """(module
  (import "kuro" "write" (func $write (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "a")
  (func (export "run") (result i32)
    (if (i32.ne (call $write (i32.const 1) (i32.const 0) (i32.const 1)) (i32.const 1)) (then (return (i32.const 1))))
    (if (i32.eq (memory.grow (i32.const 4095)) (i32.const -1)) (then (return (i32.const 2))))
    (i32.store8 (i32.const 268369920) (i32.const 98))
    (if (i32.ne (call $write (i32.const 1) (i32.const 268369920) (i32.const 1)) (i32.const 1))
      (then (return (i32.const 3))))
    (if (i32.ne (call $write (i32.const 1) (i32.const 0) (i32.const 1)) (i32.const 1)) (then (return (i32.const 4))))
    (i32.const 0)))"""


def test_under_the_default_profile_a_memory_grows_in_place_so_a_kept_base_stays_right(tmp_path: Path) -> None:
    engine = engine_for(EngineConfig())
    store = wasmtime.Store(engine)
    memory = wasmtime.Memory(store, wasmtime.MemoryType(wasmtime.Limits(1, None)))
    before = ctypes_address(memory.data_ptr(store))
    assert memory.grow(store, 4095) == 1
    assert ctypes_address(memory.data_ptr(store)) == before  # engines are made with memory_may_move = False
    blocks = MemoryBlockStore()
    cid = add_guest(blocks, GROWS_FAR)
    receipt = run(make_session(make_fs(blocks)), guest(cid, "run"), store=blocks, home=tmp_path)
    assert (receipt["kuro/exit-code"], receipt["kuro/stdout"]) == (0, b"aba")


_MOVING = f"""
import sys
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host import engine
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest, session

engine.set_memory_profile(engine.MemoryProfile(reservation=1 << 20, guard=64 << 10, growth=0))
assert not engine.memory_base_fixed()
blocks = MemoryBlockStore()
cid = add_guest(blocks, {GROWS_FAR!r})
receipt = run(session("s", Fs.empty(blocks).root), guest(cid, "run"), store=blocks, home=False)
sys.stdout.write(repr((receipt["kuro/exit-code"], receipt["kuro/stdout"])))
"""


def test_under_a_narrowed_profile_memories_move_and_every_call_asks_for_the_base() -> None:
    # A 1 MiB reservation: growing to 256 MiB moves the memory. A base kept from before would read freed pages.
    done = subprocess.run([sys.executable, "-c", _MOVING], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == repr((0, b"aba"))


def ctypes_address(pointer: object) -> int:
    import ctypes

    return ctypes.cast(pointer, ctypes.c_void_p).value or 0
