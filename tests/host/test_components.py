"""Components as guests: the world as data, classification, bytes across the boundary, the cache, kill and threads.

The behaviours a fixture file can state (outcomes, typed values, denials, reads)
are in guests/fixtures/component-*.toml; these are the rest.
"""

from __future__ import annotations

import dataclasses
import json
import marshal
import re
import threading
from pathlib import Path

import pytest
import wasmtime
import wasmtime.component
from blake3 import blake3
from hostkit import ALL_CAPS, ROOT, component, make_fs, make_session
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.errors import LoadError
from kuro_wasm.host.api import run, start
from kuro_wasm.host.cache import COMPONENT, MODULE, ModuleCache, cache_for
from kuro_wasm.host.component_core import PlainLink, StaleProgram, compile_modules, link_program
from kuro_wasm.host.engine import EngineConfig, engine_for, engine_key
from kuro_wasm.host.kinds import KINDS, classify
from kuro_wasm.host.kinds.component import (
    HOST_FUNCTIONS,
    KIND,
    WORLD_PACKAGE,
    _plain_host_functions,
    error_name,
    trap_code_of,
)
from kuro_wasm.host.kinds.kuro_v1 import KIND as KURO_ABI_V1
from kuro_wasm.host.loader import (
    Prepared,
    _describe_with,
    add_guest,
    check_imports,
    compiled_guest,
    forget_prepared,
    prepare,
)
from kuro_wasm.model.abi import ErrorCode
from kuro_wasm.model.component_binary import read_plan
from kuro_wasm.model.sessions import guest
from kuro_wasm.model.wasm_shape import PACKED, Import, WasmShape, with_module_imports

WIT = (ROOT / "wit" / "host.wit").read_text(encoding="utf-8")


def _interface(name: str) -> str:
    found = re.search(rf"^interface {name} \{{(.*?)^\}}", WIT, re.S | re.M)
    assert found is not None, name
    return found.group(1)


# ---- the world as data


def test_the_wit_error_code_enum_is_the_abi_v1_error_table_in_order() -> None:
    enum = re.search(r"enum error-code \{(.*?)\}", _interface("types"), re.S)
    assert enum is not None
    cases = [line.strip().rstrip(",") for line in enum.group(1).splitlines() if line.strip() and "//" not in line]
    assert cases == [error_name(code) for code in ErrorCode]


def test_the_host_provides_exactly_the_functions_the_wit_world_declares() -> None:
    for instance, funcs in HOST_FUNCTIONS.items():
        iface = instance.removeprefix("kuro:host/").removesuffix("@1.0.0")
        declared = re.findall(r"^\s+([a-z][a-z-]*): func\(", _interface(iface), re.M)
        assert sorted(declared) == sorted(funcs), iface
    assert f"package {WORLD_PACKAGE};" in WIT


def test_the_world_compiled_into_a_guest_imports_what_the_host_provides() -> None:
    engine = engine_for(EngineConfig())
    wasm = component("typed")
    shape = WasmShape.from_bytes(_describe_with(engine)(wasm, wasmtime.component.Component(engine, wasm)))
    assert shape.import_modules() <= KIND.import_modules
    run_func = shape.typed_export("run")
    assert run_func is not None and run_func.text() == "func(args: list<string>) -> u32"


# ---- classification


def test_each_kind_claims_only_its_own_layer() -> None:
    assert KURO_ABI_V1.claim(WasmShape(component=True)) is not None
    assert KIND.claim(WasmShape()) is not None
    assert classify(WasmShape(component=True, imports=(Import("kuro:host/fs@1.0.0", "read", "func"),))) is KIND
    assert KIND in KINDS


def test_a_component_importing_outside_the_world_is_refused_naming_every_such_import() -> None:
    shape = WasmShape(
        component=True,
        imports=(
            Import("kuro:host/fs@1.0.0", "read", "func"),
            Import("wasi:http/types@0.2.0", "new-fields", "func"),
            Import("wasi:cli/stdout@0.2.3", "get-stdout", "func"),
            Import("acme:db/query@1.0.0", "run", "func"),
        ),
    )
    reason = classify(shape)
    assert isinstance(reason, str)
    assert reason.startswith("imports acme:db/query@1.0.0, wasi:http/types@0.2.0: outside what this host provides")
    assert "wasi:cli/stdout" not in reason.split(":", 1)[0]


def test_a_function_the_world_lacks_is_named() -> None:
    reason = KIND.claim(WasmShape(component=True, imports=(Import("kuro:host/fs@1.0.0", "exec", "func"),)))
    assert reason == "imports kuro:host/fs@1.0.0#exec: not in the kuro:host@1.0.0 world"


def test_check_imports_reads_a_components_imports_by_compiling_it() -> None:
    assert check_imports(component("typed")) is None
    assert "wasi:keyvalue/store@0.2.0-draft" in (check_imports(component("outside")) or "")
    assert check_imports(component("exiting")) is None  # WASI 0.2 is provided (virtually)


def test_bytes_that_claim_to_be_a_component_but_are_not_are_refused_when_added() -> None:
    with pytest.raises(LoadError, match="not a valid component"):
        add_guest(MemoryBlockStore(), b"\0asm\r\0\1\0\xff\xff")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("error while executing\nCaused by:\n    wasm trap: call stack exhausted", "STACK_OVERFLOW"),
        ("wasm trap: wasm `unreachable` instruction executed", "UNREACHABLE"),
        ("wasm trap: all fuel consumed by WebAssembly", "OUT_OF_FUEL"),
        ("realloc return: beyond end of memory", None),
    ],
)
def test_a_component_traps_kind_is_read_from_wasmtimes_text(text: str, code: str | None) -> None:
    found = trap_code_of(text)
    assert (found.name if found else None) == code


# ---- bytes across the boundary (the bulk path), against the engine itself


@settings(max_examples=12, deadline=None)
@given(st.binary(max_size=3000) | st.sampled_from([b"", b"\x00", bytes(range(256)) * 300]))
def test_bytes_cross_both_ways_unchanged(data: bytes) -> None:
    store = MemoryBlockStore()
    fs = make_fs(store, {"data.bin": data})
    cid = add_guest(store, component("typed"))
    receipt = run(make_session(fs), guest(cid, "run", ["read", "data.bin"]), store=store, fs=fs, home=False)
    assert receipt["kuro/exit-code"] == 0, receipt
    assert receipt["kuro/stdout"] == data
    summed = run(make_session(fs), guest(cid, "sum-bytes", [data]), store=store, fs=fs, home=False)
    assert summed["kuro/result"] == sum(data)


# ---- the module cache holds components under the same rules


def test_a_component_is_compiled_once_then_loaded_from_the_verified_disk_cache(tmp_path: Path) -> None:
    engine, key = engine_for(EngineConfig()), engine_key(EngineConfig())
    wasm = component("typed")
    cache = ModuleCache(tmp_path / "cache")
    describe = _describe_with(engine)
    cid = "bafkreitestcomponentcache"
    ModuleCache.forget_memory()
    first, meta = cache.load(engine, key, cid, lambda: wasm, describe)
    ModuleCache.forget_memory()
    second, meta2 = cache.load(engine, key, cid, lambda: wasm, describe)
    assert isinstance(first, wasmtime.component.Component) and isinstance(second, wasmtime.component.Component)
    assert (cache.stats.compiles, cache.stats.disk_hits, meta2) == (1, 1, meta)
    assert cache.path_for(cid, key, COMPONENT) != cache.path_for(cid, key, MODULE)
    artifact = cache.path_for(cid, key, COMPONENT)
    assert artifact is not None
    raw = bytearray(artifact.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    artifact.write_bytes(bytes(raw))
    ModuleCache.forget_memory()
    third, _ = cache.load(engine, key, cid, lambda: wasm, describe)
    assert isinstance(third, wasmtime.component.Component)
    assert (cache.stats.discarded, cache.stats.compiles) == (1, 2)  # tampered: deleted and compiled again
    ModuleCache.forget_memory()


def _typed_cached(home: Path) -> tuple[MemoryBlockStore, object, str, ModuleCache]:
    """The typed fixture (a plain component) stored, run once with a disk cache under ``home``, every layer of
    memory then dropped: what a new process finds."""
    store = MemoryBlockStore()
    fs = make_fs(store, {"data.bin": b"abc"})
    cid = add_guest(store, component("typed"))
    ModuleCache.forget_memory()  # (add_guest kept the compiled component in memory only)
    forget_prepared()
    first = run(make_session(fs), guest(cid, "run", ["read", "data.bin"]), store=store, fs=fs, home=str(home))
    assert first["kuro/stdout"] == b"abc", first
    ModuleCache.forget_memory()
    forget_prepared()
    return store, fs, cid, cache_for(str(home))


def _typed_modules() -> int:
    plan = read_plan(component("typed"))
    return plan.module_count


def test_a_cached_plain_components_first_run_loads_its_shape_and_core_modules_not_the_compiled_component(
    tmp_path: Path,
) -> None:
    store, fs, cid, cache = _typed_cached(tmp_path)
    before = cache.stats.as_dict()
    again = run(make_session(fs), guest(cid, "run", ["read", "data.bin"]), store=store, fs=fs, home=str(tmp_path))
    assert again["kuro/stdout"] == b"abc", again
    after = cache.stats.as_dict()
    assert after["compiles"] == before["compiles"]
    assert after["disk_hits"] - before["disk_hits"] == _typed_modules()  # the core modules; no component artifact


def test_the_compiled_component_a_plain_path_load_deferred_is_loaded_when_asked_for(tmp_path: Path) -> None:
    """A worker process is handed the compiled component (``kuro_wasm.host.worker.pool``): loaded then, verified."""
    store, _fs, cid, cache = _typed_cached(tmp_path)
    ready = prepare(store, cid, EngineConfig(), cache)
    assert isinstance(ready, Prepared)
    hits, compiles = cache.stats.disk_hits, cache.stats.compiles
    assert not isinstance(ready.module, wasmtime.component.Component)  # not loaded by the plain path
    assert isinstance(compiled_guest(ready), wasmtime.component.Component)
    assert (cache.stats.disk_hits, cache.stats.compiles) == (hits + 1, compiles)  # from its tagged disk entry


@pytest.mark.parametrize("damage", ["core-module", "meta", "meta-of-another-guest"])
def test_a_damaged_core_module_or_shape_entry_of_a_component_is_detected_not_trusted(
    tmp_path: Path, damage: str
) -> None:
    store, fs, cid, cache = _typed_cached(tmp_path)
    key = engine_key(EngineConfig())
    meta = cache.path_for(cid, key, COMPONENT)
    assert meta is not None
    meta = meta.with_suffix(".meta")
    if damage == "core-module":
        victim = cache.path_for(f"{cid}#core-module-0", key)
        assert victim is not None
        raw = bytearray(victim.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        victim.write_bytes(bytes(raw))
    elif damage == "meta":
        raw = bytearray(meta.read_bytes())
        raw[-2] ^= 0x01  # inside the shape's JSON: still JSON, but not what was tagged
        meta.write_bytes(bytes(raw))
    else:  # another guest's (valid) shape under this guest's name: its tag binds the other CID
        other = cache.path_for("bafkreianotherguest", key, COMPONENT)
        assert other is not None
        cache.load(engine_for(EngineConfig()), key, "bafkreianotherguest", lambda: component("typed"), _describe)
        meta.write_bytes(other.with_suffix(".meta").read_bytes())
        ModuleCache.forget_memory()
    before = cache.stats.as_dict()
    again = run(make_session(fs), guest(cid, "run", ["read", "data.bin"]), store=store, fs=fs, home=str(tmp_path))
    assert again["kuro/stdout"] == b"abc", again
    after = cache.stats.as_dict()
    if damage == "core-module":  # deleted and compiled again from the verified guest bytes
        assert (after["discarded"] - before["discarded"], after["compiles"] - before["compiles"]) == (1, 1)
    else:  # the shape is not read: the component is loaded whole (its tagged artifact) and described again
        assert after["disk_hits"] - before["disk_hits"] == _typed_modules() + 1
        assert after["compiles"] == before["compiles"]
        ModuleCache.forget_memory()
        forget_prepared()
        # the shape was written again, tagged for this guest: the next load reads it, and only the core modules
        before = cache.stats.as_dict()
        third = run(make_session(fs), guest(cid, "run", ["read", "data.bin"]), store=store, fs=fs, home=str(tmp_path))
        assert third["kuro/stdout"] == b"abc", third
        after = cache.stats.as_dict()
        assert after["disk_hits"] - before["disk_hits"] == _typed_modules()
        assert (after["compiles"], after["discarded"]) == (before["compiles"], before["discarded"])


@pytest.mark.parametrize("version", ["v3", "v4"])
def test_a_shape_stored_by_an_older_kuro_is_described_again_never_linked_from(tmp_path: Path, version: str) -> None:
    """An older kuro's shape — JSON, its plan as steps (v4; v3: without its core modules' imports) — validly
    tagged under its own context, must not verify under v5 (packed, the plan as its link program): the component
    is loaded whole (its tagged artifact) and described again, never linked from it, and the record is rewritten
    in the packed form."""
    store, fs, cid, cache = _typed_cached(tmp_path)
    key = engine_key(EngineConfig())
    path = cache.path_for(cid, key, COMPONENT)
    assert path is not None and cache.directory is not None
    meta = path.with_suffix(".meta")
    raw = meta.read_bytes()
    assert raw[41:].startswith(PACKED)
    shape = marshal.loads(raw[41 + len(PACKED) :])
    assert "program" in shape["plan"] and "steps" not in shape["plan"]  # linked: what a new process reads
    shape["plan"] = with_module_imports(read_plan(component("typed"))).to_data()  # the steps, as v4 kept them
    if version == "v3":
        del shape["plan"]["module-imports"]
    old = json.dumps(shape, separators=(",", ":")).encode()
    secret = (cache.directory / ".hmac-key").read_bytes()
    tag = blake3(secret, derive_key_context=f"kuro-wasm module cache 2026-12 metadata tag {version}").digest()
    meta.write_bytes(raw[:9] + blake3(f"{cid}\n{key}\ncomponent".encode() + b"\0" + old, key=tag).digest() + old)
    ModuleCache.forget_memory()
    forget_prepared()
    before = cache.stats.as_dict()
    again = run(make_session(fs), guest(cid, "run", ["read", "data.bin"]), store=store, fs=fs, home=str(tmp_path))
    assert again["kuro/stdout"] == b"abc", again
    after = cache.stats.as_dict()
    assert after["disk_hits"] - before["disk_hits"] == _typed_modules() + 1
    assert after["compiles"] == before["compiles"]
    assert meta.read_bytes()[41:].startswith(PACKED)  # rewritten in the current format
    ModuleCache.forget_memory()


def test_a_cached_link_program_of_another_format_is_linked_again_from_the_verified_bytes(tmp_path: Path) -> None:
    """A shape validly tagged (v5) whose link program is of another format — a format changed without a new
    metadata tag — is never bound: the plan is read again from the guest's verified bytes and linked, the
    compiled component still untouched."""
    store, fs, cid, cache = _typed_cached(tmp_path)
    key = engine_key(EngineConfig())
    meta = cache.stored_meta(key, cid, COMPONENT)
    assert meta is not None
    shape = WasmShape.from_bytes(meta)
    assert shape.plan is not None and shape.plan.program is not None
    stale = dataclasses.replace(shape.plan, program=(shape.plan.program[0] + 1, *shape.plan.program[1:]))
    cache._store_meta(cid, key, COMPONENT, dataclasses.replace(shape, plan=stale).to_bytes())
    ModuleCache.forget_memory()
    before = cache.stats.as_dict()
    again = run(make_session(fs), guest(cid, "run", ["read", "data.bin"]), store=store, fs=fs, home=str(tmp_path))
    assert again["kuro/stdout"] == b"abc", again
    after = cache.stats.as_dict()
    assert after["disk_hits"] - before["disk_hits"] == _typed_modules()  # the core modules, not the component
    assert after["compiles"] == before["compiles"]
    ModuleCache.forget_memory()
    forget_prepared()


def test_a_stored_link_program_of_another_format_is_refused_not_bound() -> None:
    """A program is bound only in the format and C API layout it was made for (its addresses and kind codes)."""
    plan = with_module_imports(read_plan(component("typed")))
    types = {name: func for name, (func, _handler) in _plain_host_functions().items()}
    data = link_program(plan, types).to_data()
    engine = engine_for(EngineConfig())
    modules = compile_modules(engine, plan)
    PlainLink(dataclasses.replace(plan, program=data), modules, _plain_host_functions())  # binds
    for stale in ((data[0] + 1, *data[1:]), (data[0], (1, 2, 3, ()), *data[2:]), data[:-1], None):
        linked = dataclasses.replace(plan, program=stale if stale is not None else "not a program")
        with pytest.raises(StaleProgram):
            PlainLink(linked, modules, _plain_host_functions())


def _describe(data: bytes, compiled: object) -> bytes:
    return _describe_with(engine_for(EngineConfig()))(data, compiled)


# ---- kill, threads


def test_kill_stops_a_spinning_component_as_cancelled() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, component("typed"))
    handle = start(make_session(fs), guest(cid, "run", ["spin"]), store=store, fs=fs, home=False)
    handle.kill()
    receipt = handle.wait(timeout=30)
    assert (receipt["kuro/exit-code"], receipt["kuro/outcome"]) == (130, "cancelled")


def test_concurrent_component_runs_keep_their_own_output_and_reads() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store, {f"f{i}.txt": f"file {i}" for i in range(4)})
    cid = add_guest(store, component("typed"))
    forget_prepared()
    receipts: dict[int, dict[str, object]] = {}

    def one(i: int) -> None:
        receipts[i] = run(make_session(fs, ALL_CAPS), guest(cid, "run", ["read", f"f{i}.txt"]), store=store, fs=fs)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, receipt in receipts.items():
        assert receipt["kuro/stdout"] == f"file {i}".encode()
        assert len(receipt["kuro/reads"]) == 1  # type: ignore[arg-type]


def test_a_refused_call_with_an_overlong_path_records_no_path() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, component("typed"))
    receipt = run(make_session(fs, ["guest/invoke"]), guest(cid, "run", ["read", "x" * 5000]), store=store, fs=fs)
    assert receipt["kuro/exit-code"] == 1
    assert receipt["kuro/denials"] == [{"kuro/import": "kuro:host/fs@1.0.0#read", "kuro/capability": "fs/read"}]


def test_a_block_the_store_lacks_is_err_io_for_the_component_and_a_store_fault_in_the_receipt() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store, {"f.txt": "file"})
    store.delete(fs.stat("f.txt").value["cid"])
    cid = add_guest(store, component("typed"))
    receipt = run(make_session(fs, ALL_CAPS), guest(cid, "run", ["read", "f.txt"]), store=store, fs=fs)
    assert receipt["kuro/exit-code"] == 1 and receipt["kuro/denials"] == []
    assert receipt["kuro/store-faults"] == [{"kuro/cid": fs.stat("f.txt").value["cid"], "kuro/fault": "missing"}]


def test_a_trapping_typed_export_has_no_result_in_its_receipt() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, component("typed"))
    receipt = run(make_session(fs), guest(cid, "run", ["trap"]), store=store, fs=fs)
    assert receipt["kuro/outcome"] == "trap" and "kuro/result" not in receipt


def test_a_wasi_guests_clock_and_random_reads_are_its_recorded_nondeterminism() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    wasi = run(make_session(fs), guest(add_guest(store, component("py-wasi")), "run", []), store=store, fs=fs)
    assert wasi["kuro/exit-code"] == 0, wasi
    seen = wasi["kuro/nondeterminism"]
    assert seen["random-bytes"] >= 8 and seen["wall-clock"] >= 2 and seen["monotonic-clock"] >= 2
    plain = run(make_session(fs), guest(add_guest(store, component("typed")), "run", []), store=store, fs=fs)
    assert "kuro/nondeterminism" not in plain  # read neither: says so by its absence
