"""WIT value types as data, and the two conversions a component run needs: spec args in, typed results out.

## The one decision
A component export is called with the invocation spec's plain args (JSON /
dag-cbor data: ints, floats, strings, bools, bytes, lists, maps, null), and
its result is written into the receipt as plain data, so both directions are
decided here, once, from the function's WIT type — never by the engine
binding's own conventions (wasmtime-py wants ``set``s, ``Record`` objects and
``Variant`` instances; jco wants ``{tag, val}``; a receipt wants neither).

Spec value → WIT type (:func:`lower`; anything else is a ``load-error`` text
naming the parameter and the path inside it):

==========================  =================================================
WIT type                    spec value
==========================  =================================================
bool                        ``true`` / ``false``
s8 … u64                    an integer in the type's range
f32, f64                    an integer or a float (f32: within its range)
char                        a one-character string
string                      a string
list<u8>                    bytes, or a list of integers 0–255
list<T>                     a list
record                      a map with exactly the field names, or a list in field order
tuple                       a list of the tuple's length
variant                     ``"case"`` (no payload) or ``{"case": payload}``
enum                        the case name
option<T>                   ``null`` for none, else the value of T
result<T, E>                ``{"ok": …}`` / ``{"err": …}`` (or ``"ok"``/``"err"`` without a payload)
flags                       a list of flag names
resources, futures, …       refused: a spec cannot hold one
==========================  =================================================

The lowered form (what the host writes into the engine's values) is: records
and tuples as tuples in field order, variants and results as ``(case, payload
or None)``, options as ``None`` or a 1-tuple, enums as the name, flags as a
tuple of names, ``list<u8>`` as bytes. :func:`plain` turns that same form,
read back from a result, into receipt data: records → maps, tuples → lists,
variants/results → ``{case: payload}`` (``"case"`` without one), options →
``null`` or the value, flags → the list of set names in declaration order,
``list<u8>`` → bytes, and non-finite floats → the strings ``"NaN"``,
``"Infinity"``, ``"-Infinity"`` (dag-cbor has no NaN).

:func:`value_bytes` is the size a value is bounded by when it crosses
(``max_value_bytes``, :mod:`kuro_wasm.model.limits`): as it lies in the guest's
memory under the canonical ABI, without alignment padding — a scalar its size
(:data:`SCALAR_BYTES`), a string its UTF-8 bytes, a list its elements (each at
least 1 byte), a record or tuple its fields, a variant, result or option 1 byte
and its payload, an enum 1, flags 1 byte per 8.

## Pure
Values in, values out; the types are built by the host from the engine's view
of a compiled component and kept as JSON beside the artifact.

## Not done here
No resources (a spec cannot name a host object), no async types.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "INT_RANGES",
    "PRIMITIVES",
    "SCALAR_BYTES",
    "WitFunc",
    "WitType",
    "from_words",
    "func_from_data",
    "lower",
    "plain",
    "type_from_data",
    "value_bytes",
]

#: Integer types and their ranges.
INT_RANGES: Final[dict[str, tuple[int, int]]] = {
    "s8": (-(2**7), 2**7 - 1),
    "u8": (0, 2**8 - 1),
    "s16": (-(2**15), 2**15 - 1),
    "u16": (0, 2**16 - 1),
    "s32": (-(2**31), 2**31 - 1),
    "u32": (0, 2**32 - 1),
    "s64": (-(2**63), 2**63 - 1),
    "u64": (0, 2**64 - 1),
}
#: The size of each fixed-size type in the guest's memory (canonical ABI).
SCALAR_BYTES: Final[dict[str, int]] = {
    "bool": 1,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "char": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "enum": 1,
}
#: The types without parameters.
PRIMITIVES: Final = frozenset({"bool", "f32", "f64", "char", "string", "error-context", *INT_RANGES})
_COMPOUND: Final = frozenset(
    {"list", "record", "tuple", "variant", "enum", "option", "result", "flags", "own", "borrow", "future", "stream"}
)
_F32_MAX: Final = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
_MAX_DEPTH: Final = 64


@dataclass(frozen=True, slots=True)
class WitType:
    """One WIT value type: ``kind`` and its parts.

    ``list``/``option``/``future``/``stream``: ``items = (T,)`` (future/stream may be empty);
    ``tuple``: the element types; ``record``: ``names`` (fields) and ``items`` (their types);
    ``variant``: ``names`` (cases) and ``items`` (payload types, None for none);
    ``result``: ``items = (ok, err)`` (either None); ``enum``/``flags``: ``names``;
    ``own``/``borrow``: ``names = (resource,)``.
    """

    kind: str
    items: tuple[WitType | None, ...] = ()
    names: tuple[str, ...] = ()

    def text(self) -> str:
        """The type in WIT syntax (records, variants, enums and flags by their shape)."""
        k = self.kind
        if k in PRIMITIVES:
            return k
        if k in ("list", "option", "future", "stream"):
            inner = self.items[0] if self.items else None
            return k if inner is None else f"{k}<{inner.text()}>"
        if k == "tuple":
            return f"tuple<{', '.join(_text(t) for t in self.items)}>"
        if k == "result":
            ok, err = self.items
            if ok is None and err is None:
                return "result"
            return f"result<{_text(ok) if ok is not None else '_'}, {_text(err) if err is not None else '_'}>"
        if k == "record":
            return (
                "record { " + ", ".join(f"{n}: {_text(t)}" for n, t in zip(self.names, self.items, strict=True)) + " }"
            )
        if k == "variant":
            cases = (n if t is None else f"{n}({t.text()})" for n, t in zip(self.names, self.items, strict=True))
            return "variant { " + ", ".join(cases) + " }"
        if k in ("enum", "flags"):
            return f"{k} {{ {', '.join(self.names)} }}"
        return f"{k}<{self.names[0] if self.names else '?'}>"

    def to_data(self) -> Any:
        """A JSON-able form (:func:`type_from_data` reads it back)."""
        if self.kind in PRIMITIVES:
            return self.kind
        data: dict[str, Any] = {"kind": self.kind}
        if self.items:
            data["items"] = [None if t is None else t.to_data() for t in self.items]
        if self.names:
            data["names"] = list(self.names)
        return data


def _text(t: WitType | None) -> str:
    return "_" if t is None else t.text()


def type_from_data(data: Any) -> WitType:
    """The :class:`WitType` that :meth:`WitType.to_data` wrote. Raises ValueError for anything else."""
    if isinstance(data, str):
        if data not in PRIMITIVES:
            raise ValueError(f"unknown WIT type {data!r}")
        return WitType(data)
    if not isinstance(data, dict) or data.get("kind") not in _COMPOUND:
        raise ValueError(f"not a WIT type: {data!r}")
    items = tuple(None if t is None else type_from_data(t) for t in data.get("items", []))
    names = tuple(str(n) for n in data.get("names", []))
    return WitType(str(data["kind"]), items, names)


@dataclass(frozen=True, slots=True)
class WitFunc:
    """An exported (or imported) component function: its name, named parameters and result."""

    name: str
    params: tuple[tuple[str, WitType], ...]
    result: WitType | None

    def text(self) -> str:
        """``func(a: u32, b: string) -> u32``."""
        ps = ", ".join(f"{n}: {t.text()}" for n, t in self.params)
        return f"func({ps})" + ("" if self.result is None else f" -> {self.result.text()}")

    def to_data(self) -> Any:
        return {
            "name": self.name,
            "params": [[n, t.to_data()] for n, t in self.params],
            "result": None if self.result is None else self.result.to_data(),
        }


def func_from_data(data: Any) -> WitFunc:
    """The :class:`WitFunc` that :meth:`WitFunc.to_data` wrote. Raises ValueError for anything else."""
    try:
        params = tuple((str(n), type_from_data(t)) for n, t in data["params"])
        result = None if data["result"] is None else type_from_data(data["result"])
        return WitFunc(str(data["name"]), params, result)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a WIT function: {json.dumps(data)[:200]}") from exc


# ---- spec value → lowered value


class _Refused(Exception):
    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _lower(t: WitType, v: object, where: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise _Refused(where, "nested too deeply")
    k = t.kind
    if k == "bool":
        if not isinstance(v, bool):
            raise _Refused(where, f"{_show(v)} is not a bool")
        return v
    if k in INT_RANGES:
        if isinstance(v, bool) or not isinstance(v, int):
            raise _Refused(where, f"{_show(v)} is not an integer, the type is {k}")
        low, high = INT_RANGES[k]
        if not low <= v <= high:
            raise _Refused(where, f"{v} does not fit {k}")
        return v
    if k in ("f32", "f64"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _Refused(where, f"{_show(v)} is not a number, the type is {k}")
        f = float(v)
        if k == "f32" and math.isfinite(f) and abs(f) > _F32_MAX:
            raise _Refused(where, f"{v} does not fit f32")
        return f
    if k == "char":
        if not isinstance(v, str) or len(v) != 1 or 0xD800 <= ord(v) <= 0xDFFF:
            raise _Refused(where, f"{_show(v)} is not one character")
        return v
    if k == "string":
        if not isinstance(v, str):
            raise _Refused(where, f"{_show(v)} is not a string")
        return v
    if k == "list":
        elem = t.items[0]
        assert elem is not None
        if elem.kind == "u8":
            if isinstance(v, (bytes, bytearray)):
                return bytes(v)
            if isinstance(v, list) and all(type(b) is int and 0 <= b <= 255 for b in v):
                return bytes(v)
            raise _Refused(where, f"{_show(v)} is not bytes or a list of integers 0-255")
        if not isinstance(v, list):
            raise _Refused(where, f"{_show(v)} is not a list, the type is {t.text()}")
        return [_lower(elem, item, f"{where}[{i}]", depth + 1) for i, item in enumerate(v)]
    if k == "record":
        if isinstance(v, dict):
            extra = sorted(set(v) - set(t.names))
            missing = [n for n in t.names if n not in v]
            if extra or missing:
                parts = ([f"unknown field(s) {extra}"] if extra else []) + (
                    [f"missing field(s) {missing}"] if missing else []
                )
                raise _Refused(where, f"{'; '.join(parts)} for {t.text()}")
            values = [v[n] for n in t.names]
        elif isinstance(v, list) and len(v) == len(t.names):
            values = list(v)
        else:
            raise _Refused(where, f"{_show(v)} is not a map or a {len(t.names)}-list for {t.text()}")
        return tuple(
            _lower(ft, fv, f"{where}.{n}", depth + 1)
            for n, ft, fv in zip(t.names, t.items, values, strict=True)
            if ft is not None
        )
    if k == "tuple":
        if not isinstance(v, list) or len(v) != len(t.items):
            raise _Refused(where, f"{_show(v)} is not a list of {len(t.items)} for {t.text()}")
        return tuple(
            _lower(et, ev, f"{where}[{i}]", depth + 1)
            for i, (et, ev) in enumerate(zip(t.items, v, strict=True))
            if et is not None
        )
    if k in ("variant", "result"):
        names = t.names if k == "variant" else ("ok", "err")
        if isinstance(v, str) and v in names:
            case, payload, given = v, None, False
        elif isinstance(v, dict) and len(v) == 1 and next(iter(v)) in names:
            case, payload = next(iter(v.items()))
            given = True
        else:
            raise _Refused(where, f"{_show(v)} is not a case of {t.text()} (one of {list(names)})")
        pt = t.items[names.index(case)]
        if pt is None:
            if given and payload is not None:
                raise _Refused(where, f"case {case!r} of {t.text()} has no payload")
            return (case, None)
        if not given:
            raise _Refused(where, f"case {case!r} of {t.text()} needs a payload ({{{case!r}: …}})")
        return (case, _lower(pt, payload, f"{where}.{case}", depth + 1))
    if k == "enum":
        if not isinstance(v, str) or v not in t.names:
            raise _Refused(where, f"{_show(v)} is not one of {list(t.names)}")
        return v
    if k == "option":
        if v is None:
            return None
        inner = t.items[0]
        assert inner is not None
        return (_lower(inner, v, where, depth + 1),)
    if k == "flags":
        if not isinstance(v, list) or not all(isinstance(n, str) for n in v):
            raise _Refused(where, f"{_show(v)} is not a list of flag names {list(t.names)}")
        unknown = sorted(set(v) - set(t.names))
        if unknown:
            raise _Refused(where, f"unknown flag(s) {unknown}; known: {list(t.names)}")
        return tuple(n for n in t.names if n in v)
    raise _Refused(where, f"a {t.text()} cannot be passed from an invocation spec")


def lower(func: WitFunc, args: list[object] | tuple[object, ...]) -> tuple[Any, ...] | str:
    """The spec's ``args`` converted for ``func``'s parameters, or a load-error text naming the parameter.

    >>> f = WitFunc("add", (("a", WitType("u32")), ("b", WitType("u32"))), WitType("u32"))
    >>> lower(f, [40, 2])
    (40, 2)
    >>> lower(f, [40, -2])
    'parameter b (u32): -2 does not fit u32'
    >>> lower(f, [1])
    'func(a: u32, b: u32) -> u32 takes 2 argument(s), 1 given'
    """
    if len(args) != len(func.params):
        return f"{func.text()} takes {len(func.params)} argument(s), {len(args)} given"
    out = []
    for (name, t), arg in zip(func.params, args, strict=True):
        try:
            out.append(_lower(t, arg, f"parameter {name} ({t.text()})", 0))
        except _Refused as exc:
            return str(exc)
    return tuple(out)


# ---- command-line words → spec args


class _NotAWord(Exception):
    """A word that spells no value of its parameter's type; the message says why."""


def _word_value(t: WitType, word: str) -> object:
    """The spec value one word spells for type ``t``. Raises _NotAWord."""
    k = t.kind
    if k in ("string", "char", "enum"):
        if word.startswith('"'):  # a JSON string: quotes, escapes, an empty string
            got = _json_word(word)
            if not isinstance(got, str):
                raise _NotAWord("is not a JSON string")
            return got
        return word  # as written; lower() checks a char's length and an enum's case
    if k == "bool":
        if word not in ("true", "false"):
            raise _NotAWord(f"is not a {t.text()} (true or false)")
        return word == "true"
    if k in INT_RANGES:
        try:
            return int(word, 0) if word.lower().lstrip("-+").startswith("0x") else int(word)
        except ValueError:
            raise _NotAWord(f"is not a {t.text()}") from None
    if k in ("f32", "f64"):
        try:
            return float(word)
        except ValueError:
            raise _NotAWord(f"is not a {t.text()}") from None
    return _json_word(word)  # lists, records, tuples, options, results, variants, flags …: lower() checks


def _json_word(word: str) -> object:
    from kuro_wasm.model.receipt import from_json  # DAG-JSON: bytes as {"/": {"bytes": …}}

    try:
        return from_json(word)
    except ValueError as exc:
        raise _NotAWord(f"is not JSON ({exc})") from None


def from_words(func: WitFunc, words: list[str] | tuple[str, ...]) -> list[object] | str:
    """The spec's args for ``func`` from command-line words, by its parameter types, or why they cannot be.

    A function whose only parameter is ``list<string>`` (the world's ``run``) takes the words as they
    are; otherwise each word is one parameter: integers (decimal or ``0x`` hex), floats, ``true`` or
    ``false`` for a bool, strings, chars and enum cases as written (or as a JSON string: ``'"-x"'``),
    and every other type as one JSON (DAG-JSON) value — ``'[1, 2]'`` for a ``list<u32>``,
    ``'{"x": 1}'`` for a record. What the words spell is then checked as any spec's args are
    (:func:`lower`); JSON nested too deeply is refused, never a RecursionError.

    >>> f = WitFunc("f", (("n", WitType("u32")), ("s", WitType("string")), ("b", WitType("bool"))), None)
    >>> from_words(f, ["0x10", "cat", "true"]), from_words(f, ["1", '"two words"', "false"])
    ([16, 'cat', True], [1, 'two words', False])
    >>> from_words(f, ["ten", "cat", "true"])
    "argument 0 'ten' is not a u32 (parameter n of func(n: u32, s: string, b: bool))"
    >>> from_words(WitFunc("g", (("l", WitType("list", (WitType("u8"),))),), None), ["[1, 2"])  # doctest: +ELLIPSIS
    "argument 0 '[1, 2' is not JSON (Expecting ',' delimiter...) (parameter l of func(l: list<u8>))"
    """
    if len(func.params) == 1 and func.params[0][1] == WitType("list", (WitType("string"),)):
        return list(words)
    if len(words) != len(func.params):
        return f"{func.text()} takes {len(func.params)} argument(s), {len(words)} given"
    out: list[object] = []
    for index, ((name, t), word) in enumerate(zip(func.params, words, strict=True)):
        try:
            out.append(_word_value(t, word))
        except _NotAWord as exc:
            shown = word if len(word) <= 40 else word[:37] + "..."
            return f"argument {index} {shown!r} {exc} (parameter {name} of {func.text()})"
    lowered = lower(func, out)
    return lowered if isinstance(lowered, str) else out


# ---- lowered value → receipt data


def _float(f: float) -> float | str:
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def plain(t: WitType, v: Any) -> Any:
    """The lowered value ``v`` of type ``t`` as receipt data (see the module docstring).

    >>> plain(WitType("record", (WitType("u8"), WitType("string")), ("n", "s")), (1, "x"))
    {'n': 1, 's': 'x'}
    >>> plain(WitType("result", (None, WitType("enum", (), ("denied",)))), ("err", "denied"))
    {'err': 'denied'}
    """
    k = t.kind
    if k in ("f32", "f64"):
        return _float(v)
    if k in PRIMITIVES:
        return v
    if k == "list":
        elem = t.items[0]
        assert elem is not None
        return bytes(v) if elem.kind == "u8" else [plain(elem, x) for x in v]
    if k == "record":
        return {n: plain(ft, fv) for n, ft, fv in zip(t.names, t.items, v, strict=True) if ft is not None}
    if k == "tuple":
        return [plain(et, ev) for et, ev in zip(t.items, v, strict=True) if et is not None]
    if k in ("variant", "result"):
        case, payload = v
        names = t.names if k == "variant" else ("ok", "err")
        pt = t.items[names.index(case)]
        if k == "result":
            return {case: None if pt is None else plain(pt, payload)}
        return case if pt is None else {case: plain(pt, payload)}
    if k == "enum":
        return v
    if k == "option":
        inner = t.items[0]
        assert inner is not None
        return None if v is None else plain(inner, v[0])
    if k == "flags":
        return [n for n in t.names if n in v]
    return None


# ---- size


def value_bytes(t: WitType, v: Any) -> int:
    """The size of the lowered value ``v`` of type ``t`` as ``max_value_bytes`` counts it (module docstring).

    >>> value_bytes(WitType("list", (WitType("u8"),)), b"abc"), value_bytes(WitType("string"), "héllo")
    (3, 6)
    >>> value_bytes(WitType("list", (WitType("record", (WitType("u32"), WitType("string")), ("n", "s")),)),
    ...             [(1, ""), (2, "ab")])
    10
    """
    k = t.kind
    fixed = SCALAR_BYTES.get(k)
    if fixed is not None:
        return fixed
    if k == "string":
        return len(v.encode("utf-8", "surrogatepass"))
    if k == "list":
        elem = t.items[0]
        assert elem is not None
        size = SCALAR_BYTES.get(elem.kind)
        if size is not None:
            return size * len(v)
        return sum(max(1, value_bytes(elem, x)) for x in v)
    if k in ("record", "tuple"):
        return sum(value_bytes(ft, fv) for ft, fv in zip((i for i in t.items if i is not None), v, strict=True))
    if k in ("variant", "result"):
        case, payload = v
        pt = t.items[(t.names if k == "variant" else ("ok", "err")).index(case)]
        return 1 + (0 if pt is None else value_bytes(pt, payload))
    if k == "option":
        inner = t.items[0]
        assert inner is not None
        return 1 + (0 if v is None else value_bytes(inner, v[0]))
    if k == "flags":
        return max(1, (len(t.names) + 7) // 8)
    return 1
