"""The component model's canonical ABI, done by the host over a guest's core memory: bytes cross as one memmove.

## The one decision
A value crosses between the host and a component's core code the way the
canonical ABI (component-model ``design/mvp/CanonicalABI.md``) says — as
flat core values, or stored in the guest's linear memory at the ABI's sizes
and alignments, with ``realloc`` asked for every list or string handed *to*
the guest — and it is done here, by the host, instead of by the engine's
component implementation (whose C API holds a ``list<u8>`` as one 32-byte value
per byte: 5–20 MB/s). A ``list<u8>`` is then one ``realloc`` and one copy
into guest memory, or one copy out of it.

Every rule the ABI traps on is a :class:`CanonicalTrap` here: a range outside
memory, a misaligned pointer (a list's by its element's alignment, a
return area's or parameter area's by its tuple's), a string that is not UTF-8,
a discriminant past the cases, a ``char`` that is a surrogate or past
``0x10ffff``, a list whose byte length overflows 32 bits, a ``realloc``
answering a pointer outside memory or misaligned. A ``bool`` is true for any
non-zero value, an integer from a wider core value is truncated, bits of a
``flags`` past its labels are ignored (all as the ABI says).

Values are the lowered Python form of :mod:`kuro_wasm.model.wit` (records and
tuples as tuples, variants as ``(case, payload)``, options as ``None`` or a
1-tuple, enums by name, flags as the tuple of set names, ``list<u8>`` as
bytes). The layout (alignment, size, flattening) is computed from
:class:`~kuro_wasm.model.wit.WitType` values and memoised.

Why our own code and not a library: no Python library implements the
canonical ABI over a live wasmtime memory (the spec's ``definitions.py`` is a
reference, not a package, and works per element). The differential tests
(``tests/host/test_canonical_abi.py``) run the same values through the
engine's component path and this one.

## Effects
Reads and writes the guest's memory (:class:`GuestMemory`) and calls the
guest's ``realloc``.

## Not done here
Resources, async, strings in UTF-16 or latin1+UTF-16 (components using them
keep the engine's component path, :mod:`kuro_wasm.model.component_binary`).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, Protocol

from kuro_wasm.model.wit import WitFunc, WitType

__all__ = [
    "MAX_FLAT_PARAMS",
    "MAX_FLAT_RESULTS",
    "CanonicalTrap",
    "TooLarge",
    "EagerArgs",
    "FlatArgs",
    "GuestMemory",
    "alignment",
    "flatten",
    "flatten_func",
    "lift_flat",
    "lift_values",
    "load",
    "lower_flat",
    "lower_values",
    "measure",
    "size",
    "store",
]

MAX_FLAT_PARAMS: Final = 16
MAX_FLAT_RESULTS: Final = 1
_U32: Final = 2**32


class CanonicalTrap(Exception):
    """A rule of the canonical ABI is broken: the call traps (the message says which rule)."""


class GuestMemory(Protocol):
    """One guest memory and its ``realloc``, as a call sees them."""

    def view(self) -> memoryview:
        """The memory now (valid until the guest runs again: ``realloc`` may grow it)."""
        ...

    def realloc(self, old: int, old_size: int, align: int, new_size: int) -> int:
        """Call the guest's ``realloc``; its answer (u32). Raises CanonicalTrap: it has none."""
        ...


# ---- layout

_SCALARS: Final[dict[str, tuple[int, str]]] = {  # kind → (size = alignment, struct code)
    "bool": (1, "B"),
    "u8": (1, "B"),
    "s8": (1, "b"),
    "u16": (2, "H"),
    "s16": (2, "h"),
    "u32": (4, "I"),
    "s32": (4, "i"),
    "char": (4, "I"),
    "u64": (8, "Q"),
    "s64": (8, "q"),
    "f32": (4, "f"),
    "f64": (8, "d"),
}
_STRUCTS: Final[dict[str, struct.Struct]] = {k: struct.Struct("<" + code) for k, (_, code) in _SCALARS.items()}
_PAIR: Final = struct.Struct("<II")


def _cases(t: WitType) -> tuple[WitType | None, ...]:
    """The payload types of a variant-like type (variant, enum, option, result) in case order."""
    k = t.kind
    if k == "variant":
        return t.items
    if k == "enum":
        return (None,) * len(t.names)
    if k == "option":
        return (None, t.items[0])
    if k == "result":
        return t.items
    raise ValueError(k)


def _disc_size(n: int) -> int:
    return 1 if n <= 2**8 else 2 if n <= 2**16 else 4


def _align_to(ptr: int, align: int) -> int:
    return -(-ptr // align) * align


def _flag_words(n: int) -> int:
    return -(-n // 32)


@functools.lru_cache(maxsize=4096)
def alignment(t: WitType) -> int:
    """The canonical ABI alignment of ``t``."""
    k = t.kind
    if k in _SCALARS:
        return _SCALARS[k][0]
    if k in ("string", "list"):
        return 4
    if k in ("record", "tuple"):
        return max((alignment(f) for f in t.items if f is not None), default=1)
    if k in ("variant", "enum", "option", "result"):
        cases = _cases(t)
        return max(_disc_size(len(cases)), _max_case_alignment(cases))
    if k == "flags":
        n = len(t.names)
        return 1 if n <= 8 else 2 if n <= 16 else 4
    raise CanonicalTrap(f"a {t.text()} has no canonical layout here")


def _max_case_alignment(cases: tuple[WitType | None, ...]) -> int:
    return max((alignment(c) for c in cases if c is not None), default=1)


@functools.lru_cache(maxsize=4096)
def size(t: WitType) -> int:
    """The canonical ABI size of ``t`` in memory."""
    k = t.kind
    if k in _SCALARS:
        return _SCALARS[k][0]
    if k in ("string", "list"):
        return 8
    if k in ("record", "tuple"):
        s = 0
        for f in t.items:
            if f is not None:
                s = _align_to(s, alignment(f)) + size(f)
        return _align_to(s, alignment(t))
    if k in ("variant", "enum", "option", "result"):
        cases = _cases(t)
        s = _align_to(_disc_size(len(cases)), _max_case_alignment(cases))
        s += max((size(c) for c in cases if c is not None), default=0)
        return _align_to(s, alignment(t))
    if k == "flags":
        n = len(t.names)
        return 1 if n <= 8 else 2 if n <= 16 else 4 * _flag_words(n)
    raise CanonicalTrap(f"a {t.text()} has no canonical layout here")


def _fields(t: WitType) -> tuple[tuple[WitType, int], ...]:
    """(type, offset) of each field of a record or tuple."""
    out = []
    s = 0
    for f in t.items:
        if f is not None:
            s = _align_to(s, alignment(f))
            out.append((f, s))
            s += size(f)
    return tuple(out)


_FIELDS = functools.lru_cache(maxsize=4096)(_fields)


def _join(a: str, b: str) -> str:
    if a == b:
        return a
    if {a, b} == {"i32", "f32"}:
        return "i32"
    return "i64"


@functools.lru_cache(maxsize=4096)
def flatten(t: WitType) -> tuple[str, ...]:
    """The core value types ``t`` flattens to."""
    k = t.kind
    if k in ("s64", "u64"):
        return ("i64",)
    if k in ("f32", "f64"):
        return (k,)
    if k in _SCALARS:
        return ("i32",)
    if k in ("string", "list"):
        return ("i32", "i32")
    if k in ("record", "tuple"):
        return tuple(v for f in t.items if f is not None for v in flatten(f))
    if k in ("variant", "enum", "option", "result"):
        flat: list[str] = []
        for c in _cases(t):
            if c is not None:
                for i, ft in enumerate(flatten(c)):
                    if i < len(flat):
                        flat[i] = _join(flat[i], ft)
                    else:
                        flat.append(ft)
        return ("i32", *flat)
    if k == "flags":
        return ("i32",) * _flag_words(len(t.names))
    raise CanonicalTrap(f"a {t.text()} has no canonical layout here")


@functools.lru_cache(maxsize=1024)
def flatten_func(func: WitFunc, lift: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(params, results) of the core function that ``func`` lifts (``lift``: an export) or lowers to (an import)."""
    params = tuple(v for _, t in func.params for v in flatten(t))
    if len(params) > MAX_FLAT_PARAMS:
        params = ("i32",)
    results = () if func.result is None else flatten(func.result)
    if len(results) > MAX_FLAT_RESULTS:
        if lift:
            results = ("i32",)
        else:
            params, results = (*params, "i32"), ()
    return params, results


def params_tuple(func: WitFunc) -> WitType:
    """The parameters of ``func`` as one tuple type (how they lie in memory past ``MAX_FLAT_PARAMS``)."""
    return WitType("tuple", tuple(t for _, t in func.params))


# ---- memory checks


def _check(mem: memoryview, ptr: int, length: int, align: int, what: str) -> None:
    if ptr % align:
        raise CanonicalTrap(f"{what}: pointer {ptr} is not aligned to {align}")
    if ptr + length > len(mem):
        raise CanonicalTrap(f"{what}: {length} bytes at {ptr} are outside the guest's memory ({len(mem)} bytes)")


# ---- load (memory → value)


def load(mem: memoryview, ptr: int, t: WitType) -> Any:
    """The value of type ``t`` at ``ptr`` (already checked to lie inside ``mem``, aligned). Raises CanonicalTrap."""
    k = t.kind
    st = _STRUCTS.get(k)
    if st is not None:
        v = st.unpack_from(mem, ptr)[0]
        if k == "bool":
            return v != 0
        if k == "char":
            return _char(v)
        return v
    if k == "string":
        p, n = _PAIR.unpack_from(mem, ptr)
        return _load_string(mem, p, n)
    if k == "list":
        p, n = _PAIR.unpack_from(mem, ptr)
        return _load_list(mem, p, n, t)
    if k in ("record", "tuple"):
        return tuple(load(mem, ptr + off, f) for f, off in _FIELDS(t))
    if k in ("variant", "enum", "option", "result"):
        cases = _cases(t)
        ds = _disc_size(len(cases))
        index = int.from_bytes(mem[ptr : ptr + ds], "little")
        if index >= len(cases):
            raise CanonicalTrap(f"discriminant {index} of a {t.text()} is past its {len(cases)} cases")
        payload_at = ptr + _align_to(ds, _max_case_alignment(cases))
        pt = cases[index]
        value = None if pt is None else load(mem, payload_at, pt)
        return _variant_value(t, index, value)
    if k == "flags":
        n = size(t)
        bits = int.from_bytes(mem[ptr : ptr + n], "little")
        return tuple(name for i, name in enumerate(t.names) if bits >> i & 1)
    raise CanonicalTrap(f"a {t.text()} cannot cross here")


_COUNTED: Final[dict[str, int]] = {k: n for k, (n, _) in _SCALARS.items()}


def measure(mem: memoryview, ptr: int, t: WitType, left: int) -> int:
    """The size of the value of type ``t`` at ``ptr`` as :func:`kuro_wasm.model.wit.value_bytes` counts it,
    read without building it — or, once past ``left``, some count above ``left`` (the walk stops there: a list's
    elements count at least one byte each, so it is never longer than ``left`` steps). Raises CanonicalTrap."""
    k = t.kind
    fixed = _COUNTED.get(k)
    if fixed is not None:
        return fixed
    if k == "enum":
        return 1
    if k in ("string", "list"):
        p, n = _PAIR.unpack_from(mem, ptr)
        if k == "string":
            _check(mem, p, n, 1, "string")
            return int(n)
        elem = t.items[0]
        assert elem is not None
        es = size(elem)
        _check(mem, p, n * es, alignment(elem), f"list<{elem.text()}>")  # as loading it would
        each = _COUNTED.get(elem.kind, 1 if elem.kind == "enum" else 0)
        if each:
            return each * int(n)
        total = 0
        for i in range(n):
            total += max(1, measure(mem, p + i * es, elem, left - total))
            if total > left:
                break
        return total
    if k in ("record", "tuple"):
        total = 0
        for f, off in _FIELDS(t):
            total += measure(mem, ptr + off, f, left - total)
            if total > left:
                break
        return total
    if k in ("variant", "option", "result"):
        cases = _cases(t)
        ds = _disc_size(len(cases))
        index = int.from_bytes(mem[ptr : ptr + ds], "little")
        if index >= len(cases):
            raise CanonicalTrap(f"discriminant {index} of a {t.text()} is past its {len(cases)} cases")
        pt = cases[index]
        return 1 + (0 if pt is None else measure(mem, ptr + _align_to(ds, _max_case_alignment(cases)), pt, left - 1))
    if k == "flags":
        return max(1, (len(t.names) + 7) // 8)
    raise CanonicalTrap(f"a {t.text()} cannot cross here")


def _char(v: int) -> str:
    if v >= 0x110000 or 0xD800 <= v <= 0xDFFF:
        raise CanonicalTrap(f"{v:#x} is not a Unicode scalar value (char)")
    return chr(v)


def _load_string(mem: memoryview, ptr: int, n: int) -> str:
    _check(mem, ptr, n, 1, "string")
    try:
        return str(mem[ptr : ptr + n], "utf-8")
    except UnicodeDecodeError as exc:
        raise CanonicalTrap(f"string is not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _load_list(mem: memoryview, ptr: int, n: int, t: WitType) -> Any:
    elem = t.items[0]
    assert elem is not None
    es = size(elem)
    _check(mem, ptr, n * es, alignment(elem), f"list<{elem.text()}>")
    if elem.kind == "u8":
        return mem[ptr : ptr + n].tobytes()
    st = _STRUCTS.get(elem.kind)
    if st is not None and elem.kind not in ("bool", "char"):
        return list(struct.unpack_from(f"<{n}{_SCALARS[elem.kind][1]}", mem, ptr))
    return [load(mem, ptr + i * es, elem) for i in range(n)]


def _variant_value(t: WitType, index: int, payload: Any) -> Any:
    k = t.kind
    if k == "enum":
        return t.names[index]
    if k == "option":
        return None if index == 0 else (payload,)
    if k == "result":
        return ("ok" if index == 0 else "err", payload)
    return (t.names[index], payload)


def _case_of(t: WitType, v: Any) -> tuple[int, Any]:
    """(case index, payload) of the lowered value ``v`` of a variant-like type."""
    k = t.kind
    if k == "enum":
        return t.names.index(v), None
    if k == "option":
        return (0, None) if v is None else (1, v[0])
    if k == "result":
        return (0 if v[0] == "ok" else 1), v[1]
    return t.names.index(v[0]), v[1]


# ---- store (value → memory)


def store(guest: GuestMemory, ptr: int, t: WitType, v: Any) -> None:
    """Store ``v`` of type ``t`` at ``ptr`` (checked by the caller), allocating its lists and strings."""
    k = t.kind
    st = _STRUCTS.get(k)
    if st is not None:
        if k == "char":
            v = ord(v)
        elif k == "bool":
            v = 1 if v else 0
        st.pack_into(guest.view(), ptr, v)
        return
    if k == "string":
        data = v.encode("utf-8", "surrogatepass")
        p = _allocate(guest, len(data), 1, "string", 2**31 - 1)
        guest.view()[p : p + len(data)] = data
        _PAIR.pack_into(guest.view(), ptr, p, len(data))
        return
    if k == "list":
        p, n = _store_list(guest, t, v)
        _PAIR.pack_into(guest.view(), ptr, p, n)
        return
    if k in ("record", "tuple"):
        for (f, off), fv in zip(_FIELDS(t), v, strict=True):
            store(guest, ptr + off, f, fv)
        return
    if k in ("variant", "enum", "option", "result"):
        cases = _cases(t)
        index, payload = _case_of(t, v)
        ds = _disc_size(len(cases))
        guest.view()[ptr : ptr + ds] = index.to_bytes(ds, "little")
        pt = cases[index]
        if pt is not None:
            store(guest, ptr + _align_to(ds, _max_case_alignment(cases)), pt, payload)
        return
    if k == "flags":
        bits = sum(1 << i for i, name in enumerate(t.names) if name in v)
        n = size(t)
        guest.view()[ptr : ptr + n] = bits.to_bytes(n, "little")
        return
    raise CanonicalTrap(f"a {t.text()} cannot cross here")


def _allocate(guest: GuestMemory, length: int, align: int, what: str, most: int = _U32 - 1) -> int:
    if length > most:
        raise CanonicalTrap(f"{what}: {length} bytes are more than the canonical ABI allows")
    ptr = guest.realloc(0, 0, align, length) % _U32
    _check(guest.view(), ptr, length, align, f"{what} from realloc")
    return ptr


def _store_list(guest: GuestMemory, t: WitType, v: Any) -> tuple[int, int]:
    elem = t.items[0]
    assert elem is not None
    es = size(elem)
    n = len(v)
    p = _allocate(guest, n * es, alignment(elem), f"list<{elem.text()}>")
    if elem.kind == "u8":
        guest.view()[p : p + n] = v
    elif elem.kind in _SCALARS and elem.kind not in ("bool", "char"):
        struct.pack_into(f"<{n}{_SCALARS[elem.kind][1]}", guest.view(), p, *v)
    else:
        for i, item in enumerate(v):
            store(guest, p + i * es, elem, item)
    return p, n


# ---- flat values (core values ↔ values)

_F32: Final = struct.Struct("<f")
_I32: Final = struct.Struct("<I")
_F64: Final = struct.Struct("<d")
_I64: Final = struct.Struct("<Q")


def _normal(v: Any, core: str) -> Any:
    """A core value as the ABI reads it: integers unsigned (wasmtime-py hands them signed)."""
    if core == "i32":
        return int(v) % _U32
    if core == "i64":
        return int(v) % 2**64
    return float(v)


def _coerce_in(v: Any, have: str, want: str) -> Any:
    """A flat value of a variant's joined type ``have`` read as the case's type ``want``."""
    if have == want:
        return v
    if want == "f32":
        bits = v % _U32
        return _F32.unpack(_I32.pack(bits))[0]
    if want == "i32":
        return v % _U32
    if want == "f64":
        return _F64.unpack(_I64.pack(v % 2**64))[0]
    return v


def _coerce_out(v: Any, have: str, want: str) -> Any:
    """A flat value of the case's type ``have`` as the variant's joined type ``want``."""
    if have == want:
        return v
    if have == "f32":
        bits = _I32.unpack(_F32.pack(v))[0]
        return bits
    if have == "f64":
        return _I64.unpack(_F64.pack(v))[0]
    return v  # i32 → i64: zero-extended (the value is already non-negative)


class _Flat:
    """Flat core values being read one by one, each as the type it was flattened to."""

    __slots__ = ("at", "types", "values")

    def __init__(self, values: Sequence[Any], types: Sequence[str]) -> None:
        self.values = values
        self.types = types
        self.at = 0

    def next(self, want: str) -> Any:
        have = self.types[self.at]
        v = _normal(self.values[self.at], have)
        self.at += 1
        return _coerce_in(v, have, want)


def lift_flat(mem: Callable[[], memoryview], flat: _Flat, t: WitType) -> Any:
    """The value of type ``t`` read from flat core values (lists and strings from memory)."""
    k = t.kind
    if k in ("s64", "u64"):
        v = flat.next("i64")
        return v - 2**64 if k == "s64" and v >= 2**63 else v
    if k in ("f32", "f64"):
        return flat.next(k)
    if k in _SCALARS:
        v = flat.next("i32")
        if k == "bool":
            return v != 0
        if k == "char":
            return _char(v)
        width = _SCALARS[k][0] * 8
        v %= 2**width
        return v - 2**width if k.startswith("s") and v >= 2 ** (width - 1) else v
    if k == "string":
        p, n = flat.next("i32"), flat.next("i32")
        return _load_string(mem(), p, n)
    if k == "list":
        p, n = flat.next("i32"), flat.next("i32")
        return _load_list(mem(), p, n, t)
    if k in ("record", "tuple"):
        return tuple(lift_flat(mem, flat, f) for f in t.items if f is not None)
    if k in ("variant", "enum", "option", "result"):
        cases = _cases(t)
        joined = flatten(t)[1:]
        index = flat.next("i32")
        if index >= len(cases):
            raise CanonicalTrap(f"discriminant {index} of a {t.text()} is past its {len(cases)} cases")
        pt = cases[index]
        start = flat.at
        value = None
        if pt is not None:
            case_flat = flatten(pt)
            sub = _Flat(
                [
                    _coerce_in(_normal(flat.values[start + i], joined[i]), joined[i], ct)
                    for i, ct in enumerate(case_flat)
                ],
                case_flat,
            )
            value = lift_flat(mem, sub, pt)
        flat.at = start + len(joined)
        return _variant_value(t, index, value)
    if k == "flags":
        bits = 0
        for w in range(_flag_words(len(t.names))):
            bits |= flat.next("i32") << (32 * w)
        return tuple(name for i, name in enumerate(t.names) if bits >> i & 1)
    raise CanonicalTrap(f"a {t.text()} cannot cross here")


def lower_flat(guest: GuestMemory, t: WitType, v: Any) -> list[Any]:
    """The flat core values of ``v`` of type ``t`` (lists and strings stored through ``realloc``)."""
    k = t.kind
    if k in ("s64", "u64"):
        return [v % 2**64]
    if k in ("f32", "f64"):
        return [float(v)]
    if k == "bool":
        return [1 if v else 0]
    if k == "char":
        return [ord(v)]
    if k in _SCALARS:
        return [v % _U32]
    if k == "string":
        data = v.encode("utf-8", "surrogatepass")
        p = _allocate(guest, len(data), 1, "string", 2**31 - 1)
        guest.view()[p : p + len(data)] = data
        return [p, len(data)]
    if k == "list":
        return list(_store_list(guest, t, v))
    if k in ("record", "tuple"):
        return [
            x for f, fv in zip((f for f in t.items if f is not None), v, strict=True) for x in lower_flat(guest, f, fv)
        ]
    if k in ("variant", "enum", "option", "result"):
        cases = _cases(t)
        joined = flatten(t)[1:]
        index, payload = _case_of(t, v)
        pt = cases[index]
        out: list[Any] = [index]
        if pt is not None:
            out.extend(
                _coerce_out(x, ft, joined[i])
                for i, (x, ft) in enumerate(zip(lower_flat(guest, pt, payload), flatten(pt), strict=True))
            )
        out.extend(0.0 if joined[i] in ("f32", "f64") else 0 for i in range(len(out) - 1, len(joined)))
        return out
    if k == "flags":
        bits = sum(1 << i for i, name in enumerate(t.names) if name in v)
        return [(bits >> (32 * w)) % _U32 for w in range(_flag_words(len(t.names)))]
    raise CanonicalTrap(f"a {t.text()} cannot cross here")


# ---- whole parameter lists and results


class TooLarge(Exception):
    """A value read from the guest is larger than the bound it was read under (it was not built)."""


def lift_values(
    guest: GuestMemory, values: Sequence[Any], types: Sequence[WitType], max_flat: int, bound: int | None = None
) -> tuple[Any, ...]:
    """The values of ``types`` from core values: flat, or past ``max_flat`` from the tuple the one i32 points at.

    With a ``bound``, a value in memory is measured first (:func:`measure`) and not built past it: raises
    TooLarge. (Flat values hold no list or string: past one flat result they lie in memory.)
    """
    flat_types = [x for t in types for x in flatten(t)]
    if len(flat_types) > max_flat:
        tup = WitType("tuple", tuple(types))
        ptr = int(values[0]) % _U32
        mem = guest.view()
        _check(mem, ptr, size(tup), alignment(tup), "parameter or result area")
        if bound is not None and measure(mem, ptr, tup, bound) > bound:
            raise TooLarge
        return tuple(load(mem, ptr, tup))
    flat = _Flat(values, flat_types)
    return tuple(lift_flat(guest.view, flat, t) for t in types)


def lower_values(guest: GuestMemory, values: Sequence[Any], types: Sequence[WitType], max_flat: int) -> list[Any]:
    """Core values for ``values`` of ``types``: flat, or past ``max_flat`` one i32 pointing at a tuple in memory
    allocated through ``realloc``."""
    flat_types = [x for t in types for x in flatten(t)]
    if len(flat_types) > max_flat:
        tup = WitType("tuple", tuple(types))
        ptr = _allocate(guest, size(tup), alignment(tup), "parameter area")
        store(guest, ptr, tup, tuple(values))
        return [ptr]
    return [x for t, v in zip(types, values, strict=True) for x in lower_flat(guest, t, v)]


class FlatArgs:
    """An imported function's flat arguments, each lifted only when asked (``size`` of a string or list without
    copying it), so a host function can refuse a value past its bound before it is built."""

    __slots__ = ("guest", "starts", "types", "values")

    def __init__(self, guest: GuestMemory, values: Sequence[Any], types: Sequence[WitType]) -> None:
        self.guest = guest
        self.values = values
        self.types = types
        starts, at = [], 0
        for t in types:
            starts.append(at)
            at += len(flatten(t))
        self.starts = starts
        mem = guest.view()
        for i, t in enumerate(types):  # the ABI lifts every argument before the callee runs: ranges trap now
            if t.kind in ("string", "list"):
                elem = t.items[0] if t.items else None
                align = 1 if elem is None else alignment(elem)
                ptr = int(values[starts[i]]) % _U32
                _check(mem, ptr, self.size(i), align, t.text())

    def size(self, i: int) -> int:
        """The byte length of the string or list argument ``i`` (its elements' bytes)."""
        t = self.types[i]
        n = int(self.values[self.starts[i] + 1]) % _U32
        if t.kind == "string":
            return n
        elem = t.items[0]
        assert elem is not None
        return n * size(elem)

    def value(self, i: int) -> Any:
        t = self.types[i]
        start = self.starts[i]
        flat_types = flatten(t)
        return lift_flat(self.guest.view, _Flat(self.values[start : start + len(flat_types)], flat_types), t)


class EagerArgs:
    """Arguments already lifted (from a parameter area in memory)."""

    __slots__ = ("types", "values")

    def __init__(self, values: Sequence[Any], types: Sequence[WitType]) -> None:
        self.values = values
        self.types = types

    def size(self, i: int) -> int:
        v = self.values[i]
        return len(v.encode("utf-8", "surrogatepass")) if isinstance(v, str) else len(v)

    def value(self, i: int) -> Any:
        return self.values[i]


def store_result(guest: GuestMemory, retptr: int, t: WitType, v: Any) -> None:
    """Store an import's result at the guest's return area ``retptr`` (checked: inside memory, aligned)."""
    ptr = retptr % _U32
    _check(guest.view(), ptr, size(t), alignment(t), "return area")
    store(guest, ptr, t, v)


def flat_iter(types: Sequence[str], values: Sequence[Any]) -> Iterator[Any]:
    """Core values as wasmtime-py's ``Func`` call wants them (signed integers, as it passes them)."""
    for t, v in zip(types, values, strict=True):
        if t == "i32":
            yield v - _U32 if v >= 2**31 else v
        elif t == "i64":
            yield v - 2**64 if v >= 2**63 else v
        else:
            yield v
