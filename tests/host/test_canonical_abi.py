"""The host's own canonical ABI (a plain component's core modules run by the host) against the engine's.

A differential specification: the same typed values through the ``typed`` fixture's exports, once through
wasmtime's component implementation (the kind's C-API path) and once through
:mod:`kuro_wasm.host.component_core` / :mod:`kuro_wasm.host.canonical_abi`, must give the same results; and
what the canonical ABI says traps, traps.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import wasmtime
import wasmtime.component as wc
from hostkit import GUESTS, component, make_fs, make_session
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.api import run
from kuro_wasm.host.calls import register_run, unregister_run
from kuro_wasm.host.canonical_abi import CanonicalTrap, alignment, flatten, load, size
from kuro_wasm.host.component_core import compile_modules, instantiate_plan
from kuro_wasm.host.component_types import component_shape
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.kinds.component import KIND
from kuro_wasm.host.kuro_world import SIGNATURES
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model import wit
from kuro_wasm.model.component_binary import NotPlain, plan_from_data, read_plan
from kuro_wasm.model.sessions import guest
from kuro_wasm.model.wasm_shape import ShapeError, with_module_imports
from kuro_wasm.model.wit import WitFunc, WitType

_ENGINE = wasmtime.Engine()


class _Both:
    """The typed fixture instantiated both ways, each in its own store."""

    def __init__(self) -> None:
        wasm = component("typed")
        compiled = wc.Component(_ENGINE, wasm)
        self.shape = component_shape(_ENGINE, compiled)
        self.store = wasmtime.Store(_ENGINE)
        self.store.set_epoch_deadline(2**62)
        self.ctx = RunContext(grant=frozenset(), emit=lambda _s, _d: True)
        register_run(self.store, self.ctx)
        self.instance, failed = KIND.instantiate(self.store, KIND.link(_ENGINE, compiled))
        assert failed is None, failed
        plan = with_module_imports(read_plan(wasm))
        self.pstore = wasmtime.Store(_ENGINE)
        host = {
            name: (WitFunc(name, tuple((f"p{i}", t) for i, t in enumerate(ps)), r), lambda _c, _a: ("ok", None))
            for name, (ps, r) in SIGNATURES.items()
        }
        self.plain = instantiate_plan(self.pstore, plan, compile_modules(_ENGINE, plan), host)

    def engine(self, export: str, args: list[Any]) -> Any:
        entry = KIND.entry(self.shape, export, args)
        assert not isinstance(entry, str), entry
        outcome = KIND.call(self.store, self.instance, entry, self.ctx)
        assert outcome.trap is None and outcome.error is None, outcome
        return None if outcome.result is None else outcome.result[0]

    def ours(self, export: str, args: list[Any]) -> Any:
        func = self.shape.typed_export(export)
        assert func is not None
        lowered = wit.lower(func, args)
        assert not isinstance(lowered, str), lowered
        value = self.plain.call(export, func, lowered)
        return None if func.result is None else wit.plain(func.result, value)


@pytest.fixture(scope="module")
def both() -> Any:
    b = _Both()
    yield b
    unregister_run(b.store)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


_S32 = st.integers(-(2**31), 2**31 - 1)
_U32 = st.integers(0, 2**32 - 1)
_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
_CALLS = st.one_of(
    st.tuples(st.just("add"), st.tuples(_S32, _S32).filter(lambda p: -(2**31) <= p[0] + p[1] < 2**31).map(list)),
    st.tuples(st.just("echo-point"), st.fixed_dictionaries({"x": _S32, "y": _S32, "label": _TEXT}).map(lambda d: [d])),
    st.tuples(
        st.just("echo-shape"),
        st.one_of(
            st.just("empty"),
            st.builds(lambda c, f: {c: f}, st.sampled_from(["circle", "square"]), st.floats(allow_nan=False)),
        ).map(lambda v: [v]),
    ),
    st.tuples(st.just("echo-opt"), st.one_of(st.none(), _U32).map(lambda v: [v])),
    st.tuples(
        st.just("echo-perms"), st.lists(st.sampled_from(["read", "write", "exec"]), unique=True).map(lambda v: [v])
    ),
    st.tuples(st.just("echo-color"), st.sampled_from(["red", "green", "blue"]).map(lambda v: [v])),
    st.tuples(st.just("echo-list"), st.lists(_U32, max_size=50).map(lambda v: [v])),
    st.tuples(st.just("halve"), _U32.map(lambda v: [v])),
    st.tuples(st.just("sum-bytes"), st.binary(max_size=300).map(lambda v: [v])),
    st.tuples(st.just("nothing"), st.just([])),
    st.tuples(st.just("fill"), st.integers(0, 300).map(lambda v: [v])),
    st.tuples(st.just("empties"), st.integers(0, 20).map(lambda v: [v])),
    st.tuples(st.just("kuro:fixtures/calc@1.0.0#double"), st.integers(0, 2**31 - 1).map(lambda v: [v])),
    st.tuples(st.just("kuro:fixtures/calc@1.0.0#length"), _TEXT.map(lambda v: [v])),
)


@settings(max_examples=150, deadline=None)
@given(call=_CALLS)
def test_typed_values_cross_the_same_on_both_paths(both: Any, call: tuple[str, list[Any]]) -> None:
    export, args = call
    assert _same(both.ours(export, args), both.engine(export, args)), (export, args)


def test_an_export_called_as_another_core_type_than_its_own_is_refused_by_wasmtime(both: Any) -> None:
    # Calls skip wasmtime's check of the args only once wasmtime has said the function has the call's core type
    # (per slot and signature): a call of another type is still checked, before and after a typed call of it.
    wrong = WitFunc("add", (("a", WitType("s64")), ("b", WitType("s64"))), WitType("s32"))
    for _ in range(2):
        with pytest.raises(wasmtime.WasmtimeError):
            both.plain.call("add", wrong, [1, 2])
        assert both.ours("add", [1, 2]) == 3


def test_every_built_component_of_the_kuro_world_has_a_plan_and_a_wasi_resource_user_does_not() -> None:
    for name in ("typed", "py-tool"):
        plan = read_plan(component(name))
        assert "run" in dict(plan.exports)
    with pytest.raises(NotPlain, match="canonical built-in"):  # WASI 0.2's resources
        read_plan(component("py-wasi"))


def test_a_plans_core_module_imports_are_the_engines_view_of_each_module_in_order() -> None:
    """The plan reads them from the modules' bytes (linking asks the engine for none): they must be the same."""
    for name in ("typed", "py-tool"):
        plan = with_module_imports(read_plan(component(name)))
        assert len(plan.module_imports) == plan.module_count == len(plan.modules)
        for index, (module, imports) in enumerate(zip(plan.modules, plan.module_imports, strict=True)):
            compiled = wasmtime.Module(_ENGINE, module)
            engines = [(i.module, i.name or "", _KIND_NAMES[type(i.type)]) for i in compiled.imports]
            assert list(imports) == engines, (name, index)


_KIND_NAMES = {
    wasmtime.FuncType: "func",
    wasmtime.TableType: "table",
    wasmtime.MemoryType: "memory",
    wasmtime.GlobalType: "global",
}


def test_a_plan_without_its_core_modules_imports_is_not_linked_and_an_unreadable_module_is_named() -> None:
    plan = read_plan(component("typed"))  # read_plan alone leaves them out
    with pytest.raises(wasmtime.WasmtimeError, match="the imports of 0 core modules"):
        instantiate_plan(wasmtime.Store(_ENGINE), plan, compile_modules(_ENGINE, plan), {})
    broken = dataclasses.replace(plan, modules=(*plan.modules[:-1], b"\0asm\x01\0\0\0\x02\x05"))
    with pytest.raises(ShapeError, match=f"core module {plan.module_count - 1}: "):
        with_module_imports(broken)


def test_a_stored_plan_reads_back_whole_and_one_without_its_module_imports_is_refused() -> None:
    plan = with_module_imports(read_plan(component("typed")))
    data = plan.to_data()
    assert plan_from_data(data) == dataclasses.replace(plan, modules=())
    for broken in (
        {k: v for k, v in data.items() if k != "module-imports"},  # a plan stored before they were kept
        {**data, "module-imports": data["module-imports"][:-1]},  # one core module's missing
        {**data, "module-imports": [[["m", "n"]]] * data["modules"]},  # an import without its kind
    ):
        with pytest.raises(ValueError):  # (WasmShape.from_bytes: a ShapeError, the shape described again)
            plan_from_data(broken)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_any_bytes_are_a_plan_or_a_refusal(data: bytes) -> None:
    for blob in (data, b"\x00asm\x0d\x00\x01\x00" + data):
        try:
            read_plan(blob)
        except NotPlain:
            pass


# ---- layout and traps, by the canonical ABI's own rules

_U8, _U16, _U64, _STR = WitType("u8"), WitType("u16"), WitType("u64"), WitType("string")


def test_layout_follows_the_canonical_abi() -> None:
    rec = WitType("record", (_U8, _U64, _U16), ("a", "b", "c"))
    assert (alignment(rec), size(rec)) == (8, 24)
    res = WitType("result", (None, WitType("enum", (), tuple("abc"))))
    assert (size(res), flatten(res)) == (2, ("i32", "i32"))
    var = WitType("variant", (WitType("f32"), WitType("u64"), None), ("f", "u", "n"))
    assert flatten(var) == ("i32", "i64")  # f32 and u64 join to i64
    flags = WitType("flags", (), tuple(f"f{i}" for i in range(40)))
    assert (size(flags), flatten(flags)) == (8, ("i32", "i32"))


@pytest.mark.parametrize(
    ("t", "memory", "why"),
    [
        (WitType("variant", (None, None), ("a", "b")), b"\x02", "discriminant 2"),
        (WitType("char"), b"\x00\xd8\x00\x00", "not a Unicode scalar"),
        (WitType("char"), b"\x00\x00\x11\x00", "not a Unicode scalar"),
        (_STR, b"\x08\x00\x00\x00\x02\x00\x00\x00\xff\xfe", "not UTF-8"),
        (_STR, b"\x08\x00\x00\x00\x09\x00\x00\x00\xff\xfe", "outside the guest's memory"),
        (WitType("list", (WitType("u32"),)), b"\x01\x00\x00\x00\x01\x00\x00\x00", "not aligned"),
        (WitType("list", (_U64,)), b"\x08\x00\x00\x00\x00\x00\x00\x20", "outside the guest's memory"),
    ],
)
def test_what_the_canonical_abi_traps_on_traps(t: WitType, memory: bytes, why: str) -> None:
    with pytest.raises(CanonicalTrap, match=why):
        load(memoryview(memory), 0, t)


def test_a_bool_is_any_non_zero_byte_and_unknown_flag_bits_are_ignored() -> None:
    assert load(memoryview(b"\x07"), 0, WitType("bool")) is True
    assert load(memoryview(b"\xff"), 0, WitType("flags", (), ("a", "b"))) == ("a", "b")


# ---- hostile guests: the same outcome on both paths


def _hostile_run(export: str, args: list[Any], plain: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(KIND, "plain", plain)
    wasm = bytes(wasmtime.wat2wasm((GUESTS / "components" / "text" / "hostile-abi.wat").read_text(encoding="utf-8")))
    store = MemoryBlockStore()
    fs = make_fs(store, {"a.txt": "secret"})
    cid = add_guest(store, wasm)
    receipt: dict[str, Any] = run(make_session(fs), guest(cid, export, args), store=store, fs=fs, home=False)
    return receipt


@pytest.mark.parametrize(
    ("export", "args"),
    [
        ("oob-realloc", ["x"]),
        ("odd-realloc", [[1, 2]]),
        ("trap-realloc", ["x"]),
        ("bad-utf8", []),
        ("huge-list", []),
        ("bad-char", []),
        ("bad-option", []),
        ("read-oob", []),
        ("read-wild", []),
    ],
)
def test_a_guest_breaking_a_canonical_abi_rule_traps_on_both_paths(
    export: str, args: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, engine = (_hostile_run(export, args, plain, monkeypatch) for plain in (True, False))
    for receipt in (ours, engine):
        assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("trap", 134), receipt
        assert "kuro/result" not in receipt
    assert ours["kuro/trap"]["kind"] == engine["kuro/trap"]["kind"]
    assert ours.get("kuro/reads") == engine.get("kuro/reads")


def test_a_bool_of_seven_is_true_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    for plain in (True, False):
        receipt = _hostile_run("bool-seven", [], plain, monkeypatch)
        assert (receipt["kuro/outcome"], receipt["kuro/result"]) == ("ok", True), receipt


def test_a_core_module_importing_a_tag_makes_the_component_not_plain_naming_the_import() -> None:
    # The plain path's link wires functions, globals, tables and memories; a tag import would reach instantiation
    # as an unknown kind and fail there with a message about exports. It is refused while the plan is read.
    plan = read_plan(component("typed"))
    tagged = wasmtime.wat2wasm('(module (import "m" "t" (tag (param i32))))')
    with pytest.raises(ShapeError, match=r"core module 0 imports m\.t, a tag: not linked on the plain path"):
        with_module_imports(dataclasses.replace(plan, modules=(bytes(tagged), *plan.modules[1:])))
