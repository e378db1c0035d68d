"""Hostile components: what a guest declares about the host's functions is checked before the host believes it.

The guests are component text under guests/components/text/ (no WIT world can state them).
"""

from __future__ import annotations

import ctypes
import dataclasses
from pathlib import Path

import pytest
import wasmtime
from hostkit import GUESTS, component, make_fs, make_session
from wasmtime import _ffi as ffi

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.errors import LoadError
from kuro_wasm.host import component_values, kuro_world, wasi_p2
from kuro_wasm.host.api import run
from kuro_wasm.host.cache import COMPONENT, ModuleCache, cache_for
from kuro_wasm.host.engine import EngineConfig, engine_key
from kuro_wasm.host.loader import Prepared, add_guest, forget_prepared, prepare, resolve
from kuro_wasm.model.sessions import guest
from kuro_wasm.model.wit import WitType


def _text(name: str) -> bytes:
    return bytes(wasmtime.wat2wasm((GUESTS / "components" / "text" / f"{name}.wat").read_text(encoding="utf-8")))


#: The prefix of the load-error of a component importing a host function with another type than the host's.
_MISTYPED = "cannot be linked: imported with another type than the host's: "


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_a_host_function_imported_with_another_type_is_a_load_error_naming_it(isolation: str) -> None:
    store = MemoryBlockStore()
    fs = make_fs(store, {"a.txt": "secret"})
    cid = add_guest(store, _text("mistyped-imports"))
    receipt = run(make_session(fs), guest(cid, "write", []), store=store, fs=fs, home=False, isolation=isolation)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("load-error", 126), receipt
    assert receipt[
        "kuro/error"
    ].endswith(
        _MISTYPED + "kuro:host/fs@1.0.0#read as func(path: u64) -> u32"  # a u64 where the path is
        "; kuro:host/fs@1.0.0#stat as func(path: string)"  # no result where the host writes one
        "; kuro:host/output@1.0.0#write as func(s: u64, data: u64)"  # a u64 where the list<u8> is: a wild pointer
        "; wasi:io/poll@0.2.0#poll as func(in: list<u64>) -> list<u32>"  # u64s where borrow<pollable>s are
    )


def test_an_enum_with_other_cases_than_the_hosts_is_another_type() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, _text("mistyped-stream"))  # writes "hello" to its stream "bogus"
    receipt = run(make_session(fs), guest(cid, "f", []), store=store, fs=fs, home=False)
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"], receipt["kuro/stderr"]) == ("load-error", b"", b"")
    assert _MISTYPED + "kuro:host/output@1.0.0#write as func(s: enum { stdin, bogus }" in receipt["kuro/error"]


def test_a_mistyped_plain_component_is_a_load_error_when_a_new_process_finds_it_cached(tmp_path: Path) -> None:
    """The plain path types the imports from the cached shape (it loads no compiled component): the same check."""
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, _text("mistyped-stream"))
    for _ in range(2):  # compiled and cached; then as a new process finds it (nothing in memory)
        ModuleCache.forget_memory()
        forget_prepared()
        receipt = run(make_session(fs), guest(cid, "f", []), store=store, fs=fs, home=str(tmp_path))
        assert (receipt["kuro/outcome"], receipt["kuro/stdout"]) == ("load-error", b"")
        assert _MISTYPED + "kuro:host/output@1.0.0#write as func(s: enum { stdin, bogus }" in receipt["kuro/error"]
    ModuleCache.forget_memory()
    assert cache_for(str(tmp_path)).stored_meta(engine_key(EngineConfig()), cid, COMPONENT) is not None  # was read


def test_the_real_guests_import_the_host_functions_with_the_hosts_types() -> None:
    store = MemoryBlockStore()
    for name in ("py-tool", "py-wasi"):  # built from wit/host.wit and WASI 0.2's WIT
        cid = add_guest(store, component(name))
        assert isinstance(prepare(store, cid, EngineConfig(), home=False), Prepared), name


def test_every_host_function_has_the_signature_its_arguments_are_checked_against() -> None:
    linked = {f"{i}#{f}" for i, funcs in kuro_world.HOST_FUNCTIONS.items() for f in funcs}
    assert linked == set(kuro_world.SIGNATURES)
    assert {i: set(f) for i, f in wasi_p2.FUNCTIONS.items()} == {i: set(f) for i, f in wasi_p2.SIGNATURES.items()}


def test_a_resource_the_world_lacks_is_a_load_error_naming_it() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, _text("world-resource"))
    receipt = run(make_session(fs), guest(cid, "f", []), store=store, fs=fs, home=False)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("load-error", 126), receipt
    assert receipt["kuro/error"].endswith("imports kuro:host/fs@1.0.0#handle: not in the kuro:host@1.0.0 world")


def test_a_call_with_large_args_is_resolved_again_not_remembered_with_its_args() -> None:
    store = MemoryBlockStore()
    cid = add_guest(store, component("typed"))
    shared = prepare(store, cid, EngineConfig(), home=False)
    assert isinstance(shared, Prepared)
    ready = dataclasses.replace(shared, entries={})  # the process's prepared guest holds other tests' calls
    small = resolve(ready, "sum-bytes", [b"abc"])
    assert resolve(ready, "sum-bytes", [b"abc"]) is small  # a warm call of the same small args resolves nothing
    for i in range(3):  # each a different 1 MiB arg: kept by the prepared guest, they would add up to 64 MiB
        resolve(ready, "sum-bytes", [bytes([i]) * (1 << 20)])
        resolve(ready, "kuro:fixtures/calc@1.0.0#length", [chr(65 + i) * (1 << 20)])
    assert len(ready.entries) == 1


def _nested(depth: int) -> bytes:
    """A component whose export returns option<option<…u32…>> nested ``depth`` deep (wasmparser refuses 100)."""
    types = ["(type $t0 (option u32))", *(f"(type $t{i} (option $t{i - 1}))" for i in range(1, depth))]
    return bytes(
        wasmtime.wat2wasm(
            f"""(component
  (core module $m (memory (export "memory") 1) (func (export "f") (result i32) (i32.const 64)))
  (core instance $i (instantiate $m))
  {" ".join(types)}
  (func (export "f") (result $t{depth - 1}) (canon lift (core func $i "f") (memory (core memory $i "memory")))))"""
        )
    )


def test_a_malformed_component_is_refused_saying_what_is_wrong_with_it() -> None:
    with pytest.raises(LoadError, match=r"not a valid component: failed to parse .*: type nesting is too deep"):
        add_guest(MemoryBlockStore(), _nested(100))
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = store.put(_nested(100), "raw")  # stored as a block, never checked: the run finds it
    receipt = run(make_session(fs), guest(cid, "f", []), store=store, fs=fs, home=False)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("load-error", 126)
    assert "does not compile: failed to parse WebAssembly module: type nesting is too deep" in receipt["kuro/error"]
    deep = add_guest(store, _nested(90))  # nearly as deep as a component may nest: read, run, answered
    assert run(make_session(fs), guest(deep, "f", []), store=store, fs=fs, home=False)["kuro/outcome"] == "ok"


def test_a_wasi_handle_made_after_a_drop_does_not_take_a_live_handles_place() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, _text("handles-after-a-drop"))
    receipt = run(make_session(fs), guest(cid, "f", []), store=store, fs=fs, home=False)
    assert (receipt["kuro/outcome"], receipt["kuro/result"], receipt["kuro/stderr"]) == ("ok", 0, b"to stderr\n")


def test_polling_no_pollable_is_the_guests_trap_not_a_wait_until_the_deadline() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, _text("poll-nothing"))
    receipt = run(make_session(fs), guest(cid, "f", []), store=store, fs=fs, home=False, timeout_ms=60_000)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("trap", 134), receipt
    assert receipt["kuro/trap"]["message"] == "kuro: wasi:io/poll poll of no pollable would never return"


def test_a_deterministic_sleep_to_the_end_of_time_leaves_the_monotonic_clock_there() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, _text("sleep-forever-then-now"))
    receipt = run(make_session(fs), guest(cid, "f", []), store=store, fs=fs, home=False, deterministic=True)
    assert (receipt["kuro/outcome"], receipt["kuro/result"]) == ("ok", 2**64 - 1), receipt  # not wrapped to ~1 s


def test_a_guest_holding_more_handles_than_its_store_allows_traps_it_is_no_host_error() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, _text("many-handles"))
    few = run(make_session(fs), guest(cid, "f", [1000]), store=store, fs=fs, home=False)
    assert (few["kuro/outcome"], few["kuro/result"]) == ("ok", 0), few
    receipt = run(make_session(fs), guest(cid, "f", [200_000]), store=store, fs=fs, home=False)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("trap", 134), receipt
    assert receipt["kuro/trap"]["message"] == (
        "kuro: a new pollable handle: cannot allocate another handle: store handle limit exceeded"
    )


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_a_list_of_other_elements_where_bytes_belong_is_another_type(isolation: str) -> None:
    # each element of a list<option<u8>> is an engine value whose byte 8 is part of a host heap pointer
    store = MemoryBlockStore()
    fs = make_fs(store, {"a.txt": "secret"})
    cid = add_guest(store, _text("list-of-options"))
    receipt = run(make_session(fs), guest(cid, "write", []), store=store, fs=fs, home=False, isolation=isolation)
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"], receipt["kuro/stderr"]) == ("load-error", b"", b"")
    assert receipt["kuro/error"].endswith(
        _MISTYPED + "kuro:host/fs@1.0.0#write as func(path: string, data: list<option<u8>>) -> result<_, u32>"
        "; kuro:host/output@1.0.0#write as func(s: enum { stdout, stderr }, data: list<option<u8>>) -> result<_, u32>"
    )


def test_a_list_is_bytes_only_when_every_element_is_a_u8() -> None:
    # the check at every call (behind the one at link time): a list<option<u8>> is not a list<u8>
    ok, other = WitType("list", (WitType("u8"),)), WitType("list", (WitType("option", (WitType("u8"),)),))
    for t, value in ((ok, b"AB"), (other, [(0x41,), None, (0x42,)])):
        raw = ffi.wasmtime_component_val_t()
        component_values.write(t, value, ctypes.pointer(raw))
        try:
            assert component_values.fits(ok, raw) is (t is ok)
            assert component_values.fits(other, raw) is (t is other)
        finally:
            component_values.delete(ctypes.byref(raw))


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_a_host_function_imported_with_another_result_is_a_load_error_before_anything_runs(isolation: str) -> None:
    store = MemoryBlockStore()
    fs = make_fs(store, {"a.txt": "secret"})
    cid = add_guest(store, _text("mistyped-result"))  # fs.write -> result<u64, u32>: the host answers result<_, …>
    receipt = run(make_session(fs), guest(cid, "f", []), store=store, fs=fs, home=False, isolation=isolation)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("load-error", 126), receipt
    assert receipt["kuro/error"].endswith(
        _MISTYPED + "kuro:host/fs@1.0.0#write as func(path: string, data: list<u8>) -> result<u64, u32>"
    )
    assert receipt.get("kuro/fs-root-after") is None and receipt.get("kuro/denials", []) == []


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_wasi_exit_while_the_component_is_instantiated_ends_the_run_with_its_code(isolation: str) -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, _text("exit-at-start"))  # its core start function calls exit(err)
    receipt = run(make_session(fs), guest(cid, "f", []), store=store, fs=fs, home=False, isolation=isolation)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("exit", 1), receipt
    assert "kuro/result" not in receipt and "kuro/trap" not in receipt


def test_a_wasi_fault_while_the_component_is_instantiated_is_the_guests_trap_saying_why() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, _text("fault-at-start"))  # its core start function calls get-random-bytes(2^40)
    receipt = run(make_session(fs), guest(cid, "f", []), store=store, fs=fs, home=False)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("trap", 134), receipt
    message = "kuro: wasi:random get-random-bytes(1099511627776): more than 1048576 bytes (max_value_bytes, 1 MiB)"
    assert receipt["kuro/trap"]["message"] == message


@pytest.mark.parametrize(
    ("export", "n", "stdout", "trap"),
    [
        ("write", 1000, 1000, None),  # check-write permits max_value_bytes (1000 here)
        ("write", 1001, 0, "write of 1001 bytes: more than check-write permitted (1000)"),
        ("write-twice", 600, 600, "write of 600 bytes: more than check-write permitted (400)"),
        ("write-unchecked", 5, 0, "write of 5 bytes: more than check-write permitted (0)"),
        ("blocking", 1000, 1000, None),
        ("blocking", 4097, 0, "blocking-write-and-flush of 4097 bytes: more than 4096"),
    ],
)
def test_a_wasi_write_past_its_permit_is_the_guests_trap(export: str, n: int, stdout: int, trap: str | None) -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, _text("stream-permits"))
    spec = guest(cid, export, [n])
    receipt = run(make_session(fs), spec, store=store, fs=fs, home=False, max_value_bytes=1000 if n < 4096 else 8192)
    assert receipt["kuro/stdout"] == b"x" * stdout, receipt
    if trap is None:
        assert (receipt["kuro/outcome"], receipt["kuro/result"]) == ("ok", 0), receipt
    else:
        assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("trap", 134), receipt
        assert receipt["kuro/trap"]["message"] == f"kuro: wasi:io/streams {trap}"
