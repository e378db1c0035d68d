"""The import layer: run contexts, stdin, the shared linker, and calls from outside a run."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import wasmtime
from hostkit import make_fs, make_session, wat
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm import abi
from kuro_wasm.engine import EngineConfig, engine_for, install_interrupt, live_run
from kuro_wasm.host import run
from kuro_wasm.imports import RunContext, StdinPipe, linker_for, register_run, unregister_run
from kuro_wasm.loader import add_guest
from kuro_wasm.model import guest


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
    install_interrupt(store, ctx)
    register_run(store, ctx)
    try:
        with live_run():
            instance = linker_for(engine).instantiate(store, module)
            run = instance.exports(store)["run"]
            assert isinstance(run, wasmtime.Func)
            assert run(store) == 0
    finally:
        unregister_run(store)
    assert written == [("stdout", b"hello, kuro\n"), ("stderr", b"note: stderr works\n")]
    assert ctx.calls == 2


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
