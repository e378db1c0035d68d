"""WIT values: spec args are converted by the parameter's type or refused naming it; results become receipt data."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.dagcbor import cid_of
from kuro_wasm.model.wit import (
    INT_RANGES,
    WitFunc,
    WitType,
    from_words,
    func_from_data,
    lower,
    plain,
    type_from_data,
)

U32 = WitType("u32")
STRING = WitType("string")
POINT = WitType("record", (WitType("s32"), WitType("s32"), STRING), ("x", "y", "label"))
SHAPE = WitType("variant", (WitType("f64"), None), ("circle", "empty"))
COLOR = WitType("enum", (), ("red", "green"))
PERMS = WitType("flags", (), ("read", "write", "exec"))
BYTES = WitType("list", (WitType("u8"),))
RESULT = WitType("result", (U32, STRING))
OPTION = WitType("option", (U32,))
TUPLE = WitType("tuple", (U32, STRING))


def one(t: WitType) -> WitFunc:
    return WitFunc("f", (("p", t),), None)


# ---- refusals first: each names the parameter and says why


@pytest.mark.parametrize(
    ("t", "arg", "why"),
    [
        (U32, -1, "parameter p (u32): -1 does not fit u32"),
        (U32, True, "parameter p (u32): True is not an integer, the type is u32"),
        (U32, 1.5, "parameter p (u32): 1.5 is not an integer, the type is u32"),
        (WitType("s8"), 128, "parameter p (s8): 128 does not fit s8"),
        (WitType("f32"), 1e39, "parameter p (f32): 1e+39 does not fit f32"),
        (WitType("f64"), "1", "parameter p (f64): '1' is not a number, the type is f64"),
        (WitType("bool"), 1, "parameter p (bool): 1 is not a bool"),
        (WitType("char"), "ab", "parameter p (char): 'ab' is not one character"),
        (STRING, b"x", "parameter p (string): b'x' is not a string"),
        (BYTES, [256], "parameter p (list<u8>): [256] is not bytes or a list of integers 0-255"),
        (WitType("list", (U32,)), [1, "2"], "parameter p (list<u32>)[1]: '2' is not an integer, the type is u32"),
        (POINT, {"x": 1, "y": 2}, "missing field(s) ['label']"),
        (POINT, {"x": 1, "y": 2, "label": "l", "z": 3}, "unknown field(s) ['z']"),
        (POINT, [1, 2], "is not a map or a 3-list"),
        (POINT, {"x": 1, "y": "2", "label": "l"}, "parameter p (record { x: s32, y: s32, label: string }).y: '2'"),
        (SHAPE, "circle", "case 'circle' of variant { circle(f64), empty } needs a payload"),
        (SHAPE, {"empty": 1}, "case 'empty' of variant { circle(f64), empty } has no payload"),
        (SHAPE, {"square": 1.0}, "is not a case of variant { circle(f64), empty }"),
        (SHAPE, {"circle": 1.0, "empty": None}, "is not a case of"),
        (COLOR, "blue", "'blue' is not one of ['red', 'green']"),
        (PERMS, ["read", "fly"], "unknown flag(s) ['fly']"),
        (PERMS, "read", "is not a list of flag names"),
        (RESULT, {"ok": "x"}, "parameter p (result<u32, string>).ok: 'x' is not an integer"),
        (TUPLE, [1], "is not a list of 2 for tuple<u32, string>"),
        (WitType("own", (), ("resource",)), 1, "a own<resource> cannot be passed from an invocation spec"),
    ],
)
def test_a_value_that_does_not_fit_is_refused_naming_the_parameter(t: WitType, arg: Any, why: str) -> None:
    got = lower(one(t), [arg])
    assert isinstance(got, str) and why in got, got


def test_a_wrong_number_of_args_shows_the_function() -> None:
    f = WitFunc("add", (("a", U32), ("b", U32)), U32)
    assert lower(f, [1, 2, 3]) == "func(a: u32, b: u32) -> u32 takes 2 argument(s), 3 given"


def test_nesting_past_the_bound_is_refused_not_a_recursion_error() -> None:
    t: WitType = U32
    value: Any = 1
    for _ in range(80):
        t, value = WitType("list", (t,)), [value]
    got = lower(one(t), [value])
    assert isinstance(got, str) and "nested too deeply" in got


# ---- conversions


@pytest.mark.parametrize(
    ("t", "arg", "lowered", "data"),
    [
        (U32, 7, 7, 7),
        (WitType("f32"), 2, 2.0, 2.0),
        (WitType("char"), "é", "é", "é"),
        (BYTES, [1, 2], b"\x01\x02", b"\x01\x02"),
        (BYTES, b"ab", b"ab", b"ab"),
        (POINT, {"label": "l", "y": 2, "x": 1}, (1, 2, "l"), {"x": 1, "y": 2, "label": "l"}),
        (POINT, [1, 2, "l"], (1, 2, "l"), {"x": 1, "y": 2, "label": "l"}),
        (SHAPE, {"circle": 0.5}, ("circle", 0.5), {"circle": 0.5}),
        (SHAPE, "empty", ("empty", None), "empty"),
        (SHAPE, {"empty": None}, ("empty", None), "empty"),
        (COLOR, "green", "green", "green"),
        (PERMS, ["exec", "read"], ("read", "exec"), ["read", "exec"]),
        (OPTION, None, None, None),
        (OPTION, 3, (3,), 3),
        (RESULT, {"err": "no"}, ("err", "no"), {"err": "no"}),
        (WitType("result", (None, None)), "ok", ("ok", None), {"ok": None}),
        (TUPLE, [1, "a"], (1, "a"), [1, "a"]),
    ],
)
def test_spec_values_lower_and_come_back_as_receipt_data(t: WitType, arg: Any, lowered: Any, data: Any) -> None:
    assert lower(one(t), [arg]) == (lowered,)
    assert plain(t, lowered) == data


@pytest.mark.parametrize(("f", "text"), [(math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity")])
def test_non_finite_floats_are_named_in_the_receipt(f: float, text: str) -> None:
    assert plain(WitType("f64"), f) == text
    cid_of({"r": plain(WitType("list", (WitType("f32"),)), [f, 1.5])})  # dag-cbor can hold it


def test_types_and_functions_survive_their_data_form() -> None:
    f = WitFunc("iface#f", (("p", POINT), ("s", SHAPE), ("o", OPTION)), RESULT)
    assert func_from_data(f.to_data()) == f
    for bad in ("u128", {"kind": "pointer"}, 3):
        with pytest.raises(ValueError):
            type_from_data(bad)
    with pytest.raises(ValueError):
        func_from_data({"name": "f"})


# ---- properties


def _types(depth: int = 3) -> st.SearchStrategy[WitType]:
    leaves = st.sampled_from([WitType(k) for k in (*INT_RANGES, "bool", "f64", "string", "char")])
    if depth == 0:
        return leaves
    inner = _types(depth - 1)
    names = st.lists(st.from_regex(r"[a-z][a-z0-9]{0,4}", fullmatch=True), min_size=1, max_size=3, unique=True)
    return st.one_of(
        leaves,
        inner.map(lambda t: WitType("list", (t,))),
        inner.map(lambda t: WitType("option", (t,))),
        st.lists(inner, min_size=1, max_size=3).map(lambda ts: WitType("tuple", tuple(ts))),
        names.flatmap(lambda ns: st.lists(inner, min_size=len(ns), max_size=len(ns)).map(
            lambda ts: WitType("record", tuple(ts), tuple(ns)))),
        names.map(lambda ns: WitType("enum", (), tuple(ns))),
        names.map(lambda ns: WitType("flags", (), tuple(ns))),
        st.tuples(st.none() | inner, st.none() | inner).map(lambda p: WitType("result", p)),
    )  # fmt: skip


def _values(t: WitType) -> st.SearchStrategy[Any]:
    k = t.kind
    if k in INT_RANGES:
        return st.integers(*INT_RANGES[k])
    simple: dict[str, st.SearchStrategy[Any]] = {
        "bool": st.booleans(),
        "f64": st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
        "string": st.text(st.characters(exclude_categories=["Cs"]), max_size=5),
        "char": st.characters(exclude_categories=["Cs"]),
    }
    if k in simple:
        return simple[k]
    items = [i for i in t.items if i is not None]
    if k == "list":
        return st.binary(max_size=3) if items[0].kind == "u8" else st.lists(_values(items[0]), max_size=3)
    if k == "option":
        return st.none() | _values(items[0])
    if k == "tuple":
        return st.tuples(*(_values(i) for i in items)).map(list)
    if k == "record":
        return st.tuples(*(_values(i) for i in items)).map(lambda vs: dict(zip(t.names, vs, strict=True)))
    if k == "enum":
        return st.sampled_from(t.names)
    if k == "flags":
        return st.lists(st.sampled_from(t.names), unique=True).map(lambda ns: [n for n in t.names if n in ns])
    ok, err = t.items
    return st.one_of(
        st.just({"ok": None}) if ok is None else _values(ok).map(lambda v: {"ok": v}),
        st.just({"err": None}) if err is None else _values(err).map(lambda v: {"err": v}),
    )


@settings(max_examples=200, deadline=None)
@given(_types().flatmap(lambda t: st.tuples(st.just(t), _values(t))))
def test_a_value_of_the_type_lowers_and_its_receipt_data_is_the_value_again(tv: tuple[WitType, Any]) -> None:
    t, value = tv
    if t.kind == "option" and t.items[0] is not None and t.items[0].kind == "option":
        return  # option<option<T>> has two nones; receipt data writes both as null
    lowered = lower(one(t), [value])
    assert isinstance(lowered, tuple), lowered
    back = plain(t, lowered[0])
    assert back == value
    cid_of({"r": back})  # always dag-cbor


# ---- command-line words (kuro run CID EXPORT WORDS…)

_WORD_TYPES = [U32, WitType("s64"), WitType("f64"), WitType("bool"), STRING, WitType("char"), COLOR, POINT, SHAPE,
               PERMS, BYTES, RESULT, OPTION, TUPLE, WitType("list", (POINT,))]  # fmt: skip


@pytest.mark.parametrize(
    ("t", "word", "value"),
    [
        (U32, "0x10", 16), (WitType("s64"), "-7", -7), (WitType("f64"), "2.5", 2.5), (WitType("bool"), "false", False),
        (STRING, "two words", "two words"), (STRING, '"-x"', "-x"), (STRING, '""', ""), (COLOR, "green", "green"),
        (POINT, '{"x": 1, "y": 2, "label": "l"}', {"x": 1, "y": 2, "label": "l"}), (SHAPE, '"empty"', "empty"),
        (BYTES, '{"/": {"bytes": "AAE"}}', b"\x00\x01"), (OPTION, "null", None), (PERMS, '["read"]', ["read"]),
    ],
)  # fmt: skip
def test_a_word_is_read_by_its_parameters_type(t: WitType, word: str, value: Any) -> None:
    assert from_words(one(t), [word]) == [value]


def test_the_words_of_run_are_its_list_of_strings_as_they_are() -> None:
    run = WitFunc("run", (("args", WitType("list", (STRING,))),), U32)
    assert from_words(run, ["-n", "1", '"q"']) == ["-n", "1", '"q"']


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_WORD_TYPES), max_size=3),
    st.lists(st.text(max_size=12) | st.sampled_from(["[" * 5000, "{" * 3000, '"\\ud800"', "1e400", "NaN"]), max_size=3),
)
def test_any_words_give_args_that_lower_or_one_reason_never_an_exception(
    types: list[WitType], words: list[str]
) -> None:
    func = WitFunc("f", tuple((f"p{i}", t) for i, t in enumerate(types)), None)
    got = from_words(func, words)
    if isinstance(got, str):
        assert got and "\n" not in got
    else:
        assert not isinstance(lower(func, got), str)
