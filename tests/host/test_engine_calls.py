"""The host's own call path (:mod:`kuro_wasm.host.engine`) agrees with wasmtime-py's public one.

The run's instantiate/lookup/call bind wasmtime's C functions with address-only types and move
values through one ``struct``-laid-out array; these tests call the same exports both ways and
compare every argument and result kind, the edges of each range included.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import pytest
import wasmtime
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_wasm.host import engine as _engine

ECHO = """(module
  (memory (export "memory") 1)
  (global (export "g") i32 (i32.const 1))
  (func (export "echo") (param i32 i64 f32 f64) (result i32 i64 f32 f64)
    local.get 0 local.get 1 local.get 2 local.get 3)
  (func (export "swap") (param f64 i32) (result i32 f64) local.get 1 local.get 0)
  (func (export "ref") (result i32 externref i64) i32.const 7 ref.null extern i64.const -1)
  (func (export "boom") (result i32) unreachable)
  (func (export "none")))"""

PARAMS = ("i32", "i64", "f32", "f64")
#: An argument of each of PARAMS, the edges of each range included.
NUMBERS = (
    st.integers(-(2**31), 2**32 - 1),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(width=32) | st.floats(),
    st.floats(),
)


@pytest.fixture(scope="module")
def world() -> tuple[wasmtime.Store, Any, Any]:
    engine = _engine.engine_for(_engine.EngineConfig())
    store = wasmtime.Store(engine)
    store.set_epoch_deadline(1 << 40)
    pre = wasmtime.Linker(engine).instantiate_pre(wasmtime.Module(engine, ECHO))
    raw, failed = _engine.instantiate(pre, store)
    assert failed is None
    public = pre.instantiate(store)
    return store, raw, public


def _same(a: float | int, b: float | int) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


@settings(max_examples=200, deadline=None)
@given(*NUMBERS)
def test_every_number_kind_round_trips_as_the_public_call_does(
    world: tuple[wasmtime.Store, Any, Any], a: int, b: int, c: float, d: float
) -> None:
    store, raw, public = world
    func = _engine.lookup_func(store, raw, "echo")
    ours = _engine.call_export(store, func, PARAMS, (a, b, c, d), PARAMS)
    theirs = public.exports(store)["echo"](store, a, b, c, d)
    assert ours.trap is None and ours.error is None
    assert len(ours.values) == 4 and all(_same(x, y) for x, y in zip(ours.values, theirs, strict=True))


def test_an_f32_argument_too_large_for_a_float_becomes_infinity(world: tuple[wasmtime.Store, Any, Any]) -> None:
    store, raw, _ = world
    func = _engine.lookup_func(store, raw, "echo")
    got = _engine.call_export(store, func, PARAMS, (0, 0, 1e300, 0.0), PARAMS)
    assert got.values[2] == math.inf


def test_mixed_order_and_a_result_of_another_kind(world: tuple[wasmtime.Store, Any, Any]) -> None:
    store, raw, _ = world
    swap = _engine.lookup_func(store, raw, "swap")
    assert _engine.call_export(store, swap, ("f64", "i32"), (2.5, -3), ("i32", "f64")).values == (-3, 2.5)
    ref = _engine.lookup_func(store, raw, "ref")
    assert _engine.call_export(store, ref, (), (), ("i32", "externref", "i64")).values == (7, 0, -1)
    none = _engine.lookup_func(store, raw, "none")
    assert _engine.call_export(store, none, (), (), ()).values == ()


def test_a_trap_and_lookups_of_what_is_not_there(world: tuple[wasmtime.Store, Any, Any]) -> None:
    store, raw, _ = world
    boom = _engine.call_export(store, _engine.lookup_func(store, raw, "boom"), (), (), ("i32",))
    assert isinstance(boom.trap, wasmtime.Trap) and boom.trap.trap_code == wasmtime.TrapCode.UNREACHABLE
    assert _engine.lookup_func(store, raw, "missing") is None
    assert _engine.lookup_func(store, raw, "memory") is None  # not a function
    assert _engine.lookup_memory(store, raw, "g") is None  # not a memory
    assert _engine.lookup_memory(store, raw) is not None


@settings(max_examples=200, deadline=None)
@given(*NUMBERS)
def test_a_call_of_a_function_of_known_type_round_trips_as_the_checked_call_does(
    world: tuple[wasmtime.Store, Any, Any], a: int, b: int, c: float, d: float
) -> None:
    store, raw, _ = world
    echo = _engine.lookup_func(store, raw, "echo")  # kept: the calls take its address
    cctx, func = _engine.context_address(store), ctypes.addressof(echo)
    checked = _engine.call_raw(cctx, func, PARAMS, (a, b, c, d), PARAMS)
    unchecked = _engine.call_unchecked(cctx, func, PARAMS, (a, b, c, d), PARAMS)
    assert checked.trap is None and checked.error is None
    assert len(unchecked) == 4 and all(_same(x, y) for x, y in zip(unchecked, checked.values, strict=True))


def test_an_unchecked_call_traps_and_returns_nothing_as_the_checked_one_does(
    world: tuple[wasmtime.Store, Any, Any],
) -> None:
    store, raw, _ = world
    cctx = _engine.context_address(store)
    kept = {name: _engine.lookup_func(store, raw, name) for name in ("boom", "none", "swap", "echo")}

    def func(name: str) -> int:
        return ctypes.addressof(kept[name])

    with pytest.raises(wasmtime.Trap) as boom:
        _engine.call_unchecked(cctx, func("boom"), (), (), ("i32",))
    assert boom.value.trap_code == wasmtime.TrapCode.UNREACHABLE
    assert _engine.call_unchecked(cctx, func("none"), (), (), ()) == ()
    assert _engine.call_unchecked(cctx, func("swap"), ("f64", "i32"), (2.5, -3), ("i32", "f64")) == (-3, 2.5)
    assert _engine.call_unchecked(cctx, func("swap"), ("f64", "i32"), (1, 2**32 + 5), ("i32", "f64")) == (5, 1.0)
    assert _engine.call_unchecked(cctx, func("echo"), PARAMS, (0, 0, 1e300, 0.0), PARAMS)[2] == math.inf
    assert _engine.call_unchecked(cctx, func("echo"), PARAMS, (0, 0, 2, 0.5), PARAMS) == (0, 0, 2.0, 0.5)


def test_a_functions_signature_is_its_core_type_as_the_public_api_names_it(
    world: tuple[wasmtime.Store, Any, Any],
) -> None:
    store, raw, public = world
    cctx = _engine.context_address(store)
    for name in ("echo", "swap", "ref", "boom", "none"):
        func = _engine.lookup_func(store, raw, name)  # kept while its address is used
        ty = public.exports(store)[name].type(store)
        want = tuple(str(t) for t in ty.params), tuple(str(t) for t in ty.results)
        assert _engine.func_signature(cctx, ctypes.addressof(func)) == want, name
        if name == "swap":
            assert want == (("f64", "i32"), ("i32", "f64"))


def test_a_store_made_below_the_constructor_is_the_constructors_store() -> None:
    # new_store skips wasmtime.Store.__init__'s wrappers: it must leave exactly the attributes the
    # constructor leaves (a wasmtime-py that renames them fails here), and work with the public API.
    engine = _engine.engine_for(_engine.EngineConfig(fuel=True))
    public, ours = wasmtime.Store(engine), _engine.new_store(engine)
    assert type(ours) is wasmtime.Store
    assert sorted(vars(ours)) == sorted(vars(public)) and ours.engine is engine
    assert type(ours.ptr()) is type(public.ptr()) and type(ours._context()) is type(public._context())
    ours.set_fuel(1000)
    ours.set_epoch_deadline(1 << 40)
    instance = wasmtime.Linker(engine).instantiate(ours, wasmtime.Module(engine, ECHO))
    swap = instance.exports(ours)["swap"]
    assert isinstance(swap, wasmtime.Func) and swap(ours, 1.5, 7) == [7, 1.5]
    assert ours.get_fuel() < 1000
    ours.close()
    ours.close()  # idempotent, as the constructor's
    with pytest.raises(ValueError):
        ours._context()
