"""Guest kinds: which kind runs a guest is decided from its shape, and a new kind is one table line.

The run loop, the receipt and the limits are the same for every kind; these
tests add a kind the host does not have (a guest importing ``env.log``) by
putting one object in ``kuro_wasm.host.kinds.KINDS``, and run it through the
public :func:`run` unchanged.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import wasmtime
from hostkit import ROOT, component, make_fs, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host import engine as _engine
from kuro_wasm.host import kinds
from kuro_wasm.host.api import run
from kuro_wasm.host.calls import define, guest_memory, load
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.engine import CallOutcome
from kuro_wasm.host.kind import CoreModuleKind, Entry
from kuro_wasm.host.kinds import KURO_ABI_V1, classify
from kuro_wasm.host.loader import add_guest, forget_prepared
from kuro_wasm.model.sessions import guest
from kuro_wasm.model.wasm_shape import PACKED, Export, FuncSig, Import, ShapeError, WasmShape, read_shape


def _shape(source: str) -> WasmShape:
    return read_shape(bytes(wasmtime.wat2wasm(source)))


# ---- classify: from the shape alone


def test_a_module_without_imports_and_one_on_the_kuro_abi_are_kuro_abi_v1() -> None:
    assert classify(_shape('(module (func (export "run") (result i32) i32.const 0))')) is KURO_ABI_V1
    hello = _shape('(module (import "kuro" "write" (func (param i32 i32 i32) (result i32))))')
    assert classify(hello) is KURO_ABI_V1


def test_a_wasi_import_names_itself_and_says_the_host_has_no_wasi() -> None:
    shape = _shape('(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32))))')
    assert classify(shape, (KURO_ABI_V1,)) == "imports wasi_snapshot_preview1.fd_write: no WASI support in this host"


def test_an_unknown_import_module_is_named_with_what_the_host_provides() -> None:
    reason = classify(_shape('(module (import "spooky" "f" (func)))'), (KURO_ABI_V1,))
    assert isinstance(reason, str) and "spooky.f" in reason and "'kuro'" in reason


def test_a_kuro_import_the_abi_lacks_gets_the_kinds_own_reason() -> None:
    reason = classify(_shape('(module (import "kuro" "exec" (func)))'))
    assert isinstance(reason, str) and "kuro.exec" in reason and "ABI v1" in reason


def test_a_component_is_recognised_by_its_header() -> None:
    reason = classify(WasmShape(component=True), (KURO_ABI_V1,))
    assert isinstance(reason, str) and "component" in reason


def test_imports_from_two_kinds_at_once_are_refused() -> None:
    shape = WasmShape(
        imports=(Import("kuro", "write", "func", FuncSig(("i32",) * 3, ("i32",))), Import("env", "log", "func"))
    )
    reason = classify(shape, (KURO_ABI_V1, _EnvLog()))
    assert isinstance(reason, str) and "no one guest kind" in reason


# ---- a new kind is one module and one table line


def _log(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    data = load(guest_memory(run, caller, cctx), p[0], p[1])
    if not run.emit("stdout", b"log: " + data):
        run.stop("output-capped")
        return None
    return 0


class _EnvLog(CoreModuleKind):
    """A toy kind: modules importing only ``env.log(ptr, len) -> i32``, entered by ``main() -> i32``."""

    name = "test-env-log"
    import_modules = frozenset({"env"})

    def define_functions(self, linker: wasmtime.Linker) -> None:
        define(linker, "env", "log", ("i32", "i32"), ("i32",), _log, fault=-1)

    def claim(self, shape: WasmShape) -> str | None:
        bad = [i.where for i in shape.imports if i.where != "env.log"]
        return f"imports {bad[0]}: not env.log" if bad else None

    def entry(self, shape: WasmShape, export: str, args: Sequence[object]) -> Entry | str:
        found = shape.export(export)
        if found is None or found.sig != FuncSig((), ("i32",)):
            return f"no export {export!r} of type () -> (i32)"
        return Entry(export, found.sig, ())

    def call(self, store: wasmtime.Store, instance: Any, entry: Entry, run: RunContext) -> CallOutcome:
        func = _engine.lookup_func(store, instance, entry.export)
        return _engine.call_export(store, func, (), (), ("i32",))


LOGGER = """(module
  (import "env" "log" (func $log (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "hi")
  (func (export "main") (result i32) (drop (call $log (i32.const 0) (i32.const 2))) (i32.const 7)))"""


@pytest.fixture
def with_env_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    forget_prepared()
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, _EnvLog()))
    yield
    forget_prepared()


def test_a_kind_added_to_the_table_runs_through_the_unchanged_run_loop(with_env_log: None) -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    r = run(make_session(fs), guest(add_guest(store, LOGGER), "main"), store=store, fs=fs, home=False)
    assert (r["kuro/exit-code"], r["kuro/outcome"], r["kuro/stdout"]) == (7, "exit", b"log: hi")
    assert r["kuro/isolation"] == "wasmtime" and r["kuro/limits"]["timeout-ms"] > 0


def test_the_same_guest_without_that_kind_is_a_load_error_naming_the_import() -> None:
    forget_prepared()
    store = MemoryBlockStore()
    fs = make_fs(store)
    r = run(make_session(fs), guest(add_guest(store, LOGGER), "main"), store=store, fs=fs, home=False)
    assert (r["kuro/exit-code"], r["kuro/outcome"]) == (126, "load-error")
    assert "env.log" in r["kuro/error"]


def test_the_shape_round_trips_through_its_byte_form() -> None:
    shape = WasmShape(
        imports=(Import("kuro", "write", "func", FuncSig(("i32", "i32", "i32"), ("i32",))), Import("m", "t", "table")),
        exports=(Export("run", "func", FuncSig(("v128",), ("(ref null $0)",))), Export("memory", "memory")),
        memories=1,
        tables=2,
    )
    assert WasmShape.from_bytes(shape.to_bytes()) == shape


@pytest.mark.parametrize(
    "raw",
    [
        b'{"component":false,"imports":[],"exports":[],"memories":0,"tables":0}',  # an older kuro's JSON form
        PACKED,  # nothing after the header
        PACKED + b"\xff\x00garbage",  # not marshal's
        PACKED + marshal.dumps({"component": False}, 4),  # a packed value that is no shape
        PACKED + marshal.dumps([1, 2, 3], 4),
    ],
)
def test_bytes_that_are_not_a_packed_shape_are_a_shape_error(raw: bytes) -> None:
    with pytest.raises(ShapeError):
        WasmShape.from_bytes(raw)


@pytest.mark.parametrize(
    ("source", "export", "args", "kind"),
    [
        ("hello.wat", "run", [], "kuro-abi-v1"),
        ("stream.wat", "run", [0, 0], "kuro-browser-v0"),
        ("c/hello.wasm", "_start", [], "wasi-preview1"),
        ("components/exiting.wat", "run", [], "kuro-component"),
    ],
)
@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_the_receipt_names_the_kind_that_ran_the_guest(
    source: str, export: str, args: list[int], kind: str, isolation: str
) -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    path = ROOT / "guests" / source
    data = component(path.stem) if source.startswith("components/") else path.read_bytes()
    receipt = run(
        make_session(fs), guest(add_guest(store, data), export, args), store=store, fs=fs, isolation=isolation
    )
    assert receipt["kuro/guest-kind"] == kind and kind in {k.name for k in kinds.KINDS}
    assert receipt["kuro/outcome"] in ("ok", "exit"), receipt.get("kuro/error")


def test_a_guest_that_did_not_load_names_no_kind() -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, (ROOT / "guests" / "unknown-import.wat").read_text())
    receipt = run(make_session(fs), guest(cid, "run"), store=store, fs=fs)
    assert receipt["kuro/outcome"] == "load-error" and "kuro/guest-kind" not in receipt
