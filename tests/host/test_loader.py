"""Loading guests by CID: verification before compiling, import checks, exports and args, large guests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import wasmtime
from dagkit import diamond_file
from hostkit import make_fs, make_session, wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import cid_for, raw_cid
from kuro_fs.dagcbor import cid_of
from kuro_wasm.errors import LoadError
from kuro_wasm.host.api import run
from kuro_wasm.host.cache import ModuleCache, cache_for
from kuro_wasm.host.engine import EngineConfig
from kuro_wasm.host.kind import Entry
from kuro_wasm.host.loader import (
    MAX_GUEST_BYTES,
    LoadFailure,
    Prepared,
    add_guest,
    check_imports,
    fetch_guest,
    forget_prepared,
    prepare,
    resolve,
)
from kuro_wasm.model.sessions import guest


class LyingStore(MemoryBlockStore):
    """A store that hands back other bytes than the CID names (a corrupt disk, a bad peer)."""

    def __init__(self) -> None:
        super().__init__()
        self.swap: dict[str, bytes] = {}

    def get(self, cid: str) -> bytes | None:
        return self.swap.get(cid, super().get(cid))


def _big_guest(size: int) -> str:
    pages = size // 65536 + 2
    return (
        f'(module (memory (export "memory") {pages}) (data (i32.const 0) "{"k" * size}")'
        ' (func (export "run") (result i32) (i32.load8_u (i32.const 7))))'
    )


def test_bytes_that_do_not_hash_to_the_cid_are_never_compiled() -> None:
    store = LyingStore()
    cid = add_guest(store, wat("hello"))
    store.swap[cid] = wasmtime.wat2wasm(wat("trap"))
    got = fetch_guest(store, cid)
    assert isinstance(got, LoadFailure) and got.outcome == "load-error"
    assert "does not hash" in got.error


def test_a_tampered_guest_runs_as_a_load_error(home: Path) -> None:
    ModuleCache.forget_memory()  # cold: a warm module was compiled from verified bytes and may be reused
    forget_prepared()
    store = LyingStore()
    cid = add_guest(store, wat("spin"))
    store.swap[cid] = wasmtime.wat2wasm(wat("hello"))
    sess = make_session(make_fs(store))
    compiles = cache_for(home).stats.compiles
    receipt = run(sess, guest(cid, "run"), store=store, home=home)
    assert (receipt["kuro/exit-code"], receipt["kuro/outcome"]) == (126, "load-error")
    assert "does not hash" in receipt["kuro/error"]
    assert cache_for(home).stats.compiles == compiles  # refused before wasmtime saw the bytes


def test_a_small_guest_is_one_raw_block(store: MemoryBlockStore) -> None:
    binary = wasmtime.wat2wasm(wat("hello"))
    cid = add_guest(store, binary)
    assert cid == raw_cid(bytes(binary))
    assert add_guest(store, wat("hello")) == cid  # WAT compiles to the same bytes


def test_a_large_guest_is_a_unixfs_file_dag_and_runs(store: MemoryBlockStore, home: Path) -> None:
    cid = add_guest(store, _big_guest(300_000))
    assert cid.startswith("bafybei")  # dag-pb root: more than one chunk
    sess = make_session(make_fs(store))
    receipt = run(sess, guest(cid, "run"), store=store, home=home)
    assert receipt["kuro/exit-code"] == ord("k")


def test_a_large_guest_with_a_tampered_leaf_is_a_load_error(home: Path) -> None:
    store = LyingStore()
    cid = add_guest(store, _big_guest(300_000))
    leaf = next(c for c in store.cids() if c.startswith("bafkrei"))
    store.swap[leaf] = b"\0" * len(store.get(leaf) or b"")
    got = fetch_guest(store, cid)
    assert isinstance(got, LoadFailure) and got.outcome == "load-error"


def test_a_guest_dag_that_claims_more_than_a_guest_may_be_is_refused_from_its_root(home: Path) -> None:
    # 3 blocks naming one 64 KiB leaf 174^2 times: a "guest" of 2 GB, refused before a leaf is read.
    store = LyingStore()
    cid, size = diamond_file(store, 2, leaf=65536)
    leaf = next(c for c in store.cids() if c.startswith("bafkrei"))
    assert size > MAX_GUEST_BYTES
    store.swap[leaf] = b"never read"  # a read leaf would fail its hash: the refusal must come first
    got = fetch_guest(store, cid)
    assert got == LoadFailure("load-error", f"guest {cid} claims {size} bytes, more than a guest may be ({1 << 30})")


def test_a_guest_missing_from_the_store_is_not_found(store: MemoryBlockStore) -> None:
    got = fetch_guest(store, raw_cid(b"nobody stored this"))
    assert got == LoadFailure("guest-not-found", f"guest {raw_cid(b'nobody stored this')} is not in the block store")


def test_a_dag_cbor_cid_is_not_a_guest(store: MemoryBlockStore) -> None:
    cid = store.put(bytes.fromhex("a0"), "dag-cbor")
    assert cid == cid_of({})
    got = fetch_guest(store, cid)
    assert isinstance(got, LoadFailure) and "dag-cbor" in got.error


def test_add_guest_refuses_what_is_not_wasm(store: MemoryBlockStore) -> None:
    with pytest.raises(LoadError):
        add_guest(store, "this is not WAT")
    with pytest.raises(LoadError):
        add_guest(store, b"\0asm\x01\0\0\0garbage")
    assert store.cids() == []


def test_check_imports_names_the_first_offender() -> None:
    module = wasmtime.wat2wasm(wat("wasi"))
    assert "wasi_unstable.fd_write" in (check_imports(module) or "")
    assert check_imports(wasmtime.wat2wasm(wat("bad-pointer"))) is None
    memory_import = wasmtime.wat2wasm('(module (import "kuro" "memory" (memory 1)))')
    assert "kuro.memory" in (check_imports(memory_import) or "")


def _prepared(store: MemoryBlockStore, name: str) -> Prepared:
    ready = prepare(store, add_guest(store, wat(name)), EngineConfig(), ModuleCache(None))
    assert isinstance(ready, Prepared)
    return ready


def test_an_export_must_be_a_function_returning_one_i32_or_nothing(store: MemoryBlockStore) -> None:
    ready = _prepared(store, "hello")
    assert isinstance(resolve(ready, "memory", []), LoadFailure)  # a memory, not a function
    assert isinstance(resolve(ready, "add", [1, 2]), Entry)
    f64 = add_guest(store, '(module (func (export "half") (param f64) (result f64) (local.get 0)))')
    ready_f = prepare(store, f64, EngineConfig(), ModuleCache(None))
    assert isinstance(ready_f, Prepared)
    failure = resolve(ready_f, "half", [1.5])
    assert isinstance(failure, LoadFailure) and "exit code" in failure.error


def test_float_args_reach_a_float_export(store: MemoryBlockStore, home: Path) -> None:
    cid = add_guest(store, '(module (func (export "trunc") (param f64) (result i32) (i32.trunc_f64_s (local.get 0))))')
    sess = make_session(make_fs(store))
    assert run(sess, guest(cid, "trunc", [41.75]), store=store, home=home)["kuro/exit-code"] == 41


def test_a_warm_guest_deleted_from_the_store_is_not_found(
    store: MemoryBlockStore, guest_cid: Callable[[str], str], home: Path
) -> None:
    cid = guest_cid("hello")
    sess = make_session(make_fs(store))
    assert run(sess, guest(cid, "run"), store=store, home=home)["kuro/outcome"] == "ok"
    store.delete(cid)
    receipt = run(sess, guest(cid, "run"), store=store, home=home)
    assert (receipt["kuro/exit-code"], receipt["kuro/outcome"]) == (127, "guest-not-found")


def test_a_raw_block_with_wat_text_is_not_compiled_as_text(store: MemoryBlockStore) -> None:
    cid = store.put(wat("hello").encode("utf-8"))
    ready = prepare(store, cid, EngineConfig(), ModuleCache(None))
    assert isinstance(ready, LoadFailure) and "not a wasm binary" in ready.error
    assert cid == cid_for(wat("hello").encode("utf-8"))
