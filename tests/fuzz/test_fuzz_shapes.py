"""Module shapes: every value type in every signature position, tables/memories/globals in any number.

A module that validates must end in a receipt, never in a dead host: wasmtime-py's
``FuncType.params``/``results`` cannot represent ``v128`` or the GC proposal's reference
types and abort the process when asked, so the host reads shapes from the bytes
(:mod:`kuro_wasm.model.wasm_shape`). These tests run in the test process on purpose: if a
shape still reached the abort, pytest itself would die.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import wasmtime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.errors import LoadError
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model.sessions import guest, session
from kuro_wasm.model.wasm_shape import read_shape

_HOME = Path(tempfile.mkdtemp(prefix="kuro-shape-home-"))
_TYPES = "(type $s (struct (field i32))) (type $a (array i8)) (type $f (func))"
#: value type (WAT) → the name the shape reader gives it
VALUE_TYPES = {
    "i32": "i32",
    "i64": "i64",
    "f32": "f32",
    "f64": "f64",
    "v128": "v128",
    "funcref": "funcref",
    "externref": "externref",
    "anyref": "anyref",
    "eqref": "eqref",
    "i31ref": "i31ref",
    "structref": "structref",
    "arrayref": "arrayref",
    "nullref": "nullref",
    "nullfuncref": "nullfuncref",
    "nullexternref": "nullexternref",
    "(ref null $s)": "(ref null $0)",
    "(ref $a)": "(ref $1)",
    "(ref null $f)": "(ref null $2)",
    "(ref func)": "(ref func)",
    "(ref null any)": "anyref",
}
NUMBERS = {"i32", "i64", "f32", "f64"}
POSITIONS = ("export-param", "export-result", "import-param", "import-result")


def _module(position: str, wat_type: str) -> str:
    sig = f"(param {wat_type})" if position.endswith("param") else f"(result {wat_type})"
    if position.startswith("import"):
        return f'(module {_TYPES} (import "kuro" "write" (func {sig})) (func (export "run")))'
    return f'(module {_TYPES} (func (export "run") {sig} unreachable))'


def _run(source: str, args: list[int] | None = None) -> dict[str, object]:
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    cid = add_guest(store, source)
    return run(session("s", fs.root, grant=["guest/invoke"]), guest(cid, "run", args or []), store=store, home=_HOME)


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("wat_type", sorted(set(VALUE_TYPES) - NUMBERS))
def test_a_type_no_kind_can_pass_is_a_load_error_naming_it(position: str, wat_type: str) -> None:
    source = _module(position, wat_type)
    shape = read_shape(bytes(wasmtime.wat2wasm(source)))
    named = VALUE_TYPES[wat_type]
    sig = shape.imports[0].sig if position.startswith("import") else shape.functions()["run"]
    assert sig is not None and named in (*sig.params, *sig.results)
    r = _run(source)
    assert (r["kuro/exit-code"], r["kuro/outcome"]) == (126, "load-error")
    assert named in str(r["kuro/error"])


@pytest.mark.parametrize("wat_type", sorted(NUMBERS))
def test_numbers_still_pass(wat_type: str) -> None:
    r = _run(f'(module (func (export "run") (param {wat_type})))', [1])
    assert (r["kuro/exit-code"], r["kuro/outcome"]) == (0, "ok")


_global_types = st.sampled_from(["i32", "i64", "f32", "f64", "v128", "funcref", "externref", "anyref", "(ref null $s)"])
_INIT = {
    "i32": "(i32.const 0)",
    "i64": "(i64.const 0)",
    "f32": "(f32.const 0)",
    "f64": "(f64.const 0)",
    "v128": "(v128.const i64x2 0 0)",
    "funcref": "(ref.null func)",
    "externref": "(ref.null extern)",
    "anyref": "(ref.null any)",
    "(ref null $s)": "(ref.null $s)",
}


@st.composite
def modules(draw: st.DrawFn) -> str:
    """A module with random signatures on an export and an import, and random tables, memories and globals."""
    types = st.sampled_from(sorted(VALUE_TYPES))
    params = draw(st.lists(types, max_size=3))
    results = draw(st.lists(types, max_size=2))
    parts = [_TYPES]
    if draw(st.booleans()):
        imp_params = draw(st.lists(types, max_size=3))
        module = draw(st.sampled_from(["kuro", "env", "wasi_snapshot_preview1"]))
        parts.append(f'(import "{module}" "write" (func (param {" ".join(imp_params)}) (result i32)))')
    for _ in range(draw(st.integers(0, 3))):
        parts.append(f"(table {draw(st.integers(0, 4))} {draw(st.sampled_from(['funcref', 'externref']))})")
    memories = draw(st.integers(0, 3))
    parts.extend(f"(memory {draw(st.integers(0, 2))})" for _ in range(memories))
    for i in range(draw(st.integers(0, 3))):
        kind = draw(_global_types)
        parts.append(f'(global (export "g{i}") {kind} {_INIT[kind]})')
    body = "unreachable" if results else ""
    sig = f"(param {' '.join(params)}) (result {' '.join(results)})"
    parts.append(f'(func (export "run") {sig} {body})')
    return "(module " + " ".join(parts) + ")"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules(), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3))
def test_any_module_that_validates_ends_in_a_receipt(source: str, args: list[int]) -> None:
    try:
        data = bytes(wasmtime.wat2wasm(source))
    except wasmtime.WasmtimeError:
        return  # not even text the WAT parser takes (e.g. a limit above what it accepts)
    read_shape(data)  # a validating module always has a readable shape
    try:
        r = _run(source, args)
    except LoadError:
        return  # refused on the way in, as invalid wasm (nothing stored, nothing run)
    assert r["kuro/type"] == "kuro/receipt"
    assert r["kuro/outcome"] in {"ok", "exit", "trap", "load-error"}
    if r["kuro/outcome"] == "load-error":
        assert r["kuro/error"]
