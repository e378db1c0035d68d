"""Component values across wasmtime's C API: the lowered Python form ↔ ``wasmtime_component_val_t``, bytes in bulk.

## The one decision
Values cross the component boundary as wasmtime's C value vectors, written and
read here directly — not through wasmtime-py's public ``ValType.convert_*``,
which turns a ``list<u8>`` into one Python call per byte (~1 MiB/s). A
``list<u8>`` is one 32-byte ``wasmtime_component_val_t`` per byte (kind at
offset 0, the byte at offset 8), so bytes go in and out with two strided
memory copies over the vector (``memoryview`` slices with step 32), and the
rest of a value is converted by its :class:`~kuro_wasm.model.wit.WitType`
(the lowered form is described in :mod:`kuro_wasm.model.wit`).

Ownership follows the C API: a value written here is owned by whoever
receives it (wasmtime, for a host function's results) or deleted by the
caller after the call (:func:`delete`, for an export's arguments); reading
never frees.

## Effects
ctypes reads and writes of C memory, and the C API's allocators.

## Not done here
No type checks: values were checked when they were lowered
(:func:`kuro_wasm.model.wit.lower`), and values read back are of the type the
engine checked.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, Final

from wasmtime import _ffi as ffi

from kuro_wasm.model.wit import INT_RANGES, SCALAR_BYTES, WitType

__all__ = [
    "VAL_SIZE",
    "Budget",
    "ValueTooLarge",
    "bytes_of",
    "delete",
    "fits",
    "name_of",
    "new_name",
    "read",
    "write",
    "write_bytes",
]

#: sizeof(wasmtime_component_val_t); the byte of a ``u8`` value sits at offset 8.
VAL_SIZE: Final = ctypes.sizeof(ffi.wasmtime_component_val_t)
_OF: Final = ffi.wasmtime_component_val_t.of.offset

_KIND: Final[dict[str, int]] = {
    "bool": ffi.WASMTIME_COMPONENT_BOOL.value,
    "s8": ffi.WASMTIME_COMPONENT_S8.value,
    "u8": ffi.WASMTIME_COMPONENT_U8.value,
    "s16": ffi.WASMTIME_COMPONENT_S16.value,
    "u16": ffi.WASMTIME_COMPONENT_U16.value,
    "s32": ffi.WASMTIME_COMPONENT_S32.value,
    "u32": ffi.WASMTIME_COMPONENT_U32.value,
    "s64": ffi.WASMTIME_COMPONENT_S64.value,
    "u64": ffi.WASMTIME_COMPONENT_U64.value,
    "f32": ffi.WASMTIME_COMPONENT_F32.value,
    "f64": ffi.WASMTIME_COMPONENT_F64.value,
    "char": ffi.WASMTIME_COMPONENT_CHAR.value,
    "string": ffi.WASMTIME_COMPONENT_STRING.value,
    "list": ffi.WASMTIME_COMPONENT_LIST.value,
    "record": ffi.WASMTIME_COMPONENT_RECORD.value,
    "tuple": ffi.WASMTIME_COMPONENT_TUPLE.value,
    "variant": ffi.WASMTIME_COMPONENT_VARIANT.value,
    "enum": ffi.WASMTIME_COMPONENT_ENUM.value,
    "option": ffi.WASMTIME_COMPONENT_OPTION.value,
    "result": ffi.WASMTIME_COMPONENT_RESULT.value,
    "flags": ffi.WASMTIME_COMPONENT_FLAGS.value,
}
_U8: Final = _KIND["u8"]
#: The C kind of each WIT kind a host function may take (a resource handle for ``own`` and ``borrow``).
_TAG: Final[dict[str, int]] = {
    **_KIND,
    "own": ffi.WASMTIME_COMPONENT_RESOURCE.value,
    "borrow": ffi.WASMTIME_COMPONENT_RESOURCE.value,
}
_ValPtr = Any  # ctypes pointer to a wasmtime_component_val_t


def _address(ptr: Any) -> int:
    return int(ctypes.cast(ptr, ctypes.c_void_p).value or 0)


# ---- names (wasm_name_t: a byte vector owned by whoever holds the value)


def new_name(text: str | bytes) -> Any:
    """A new ``wasm_name_t`` holding ``text`` (UTF-8), allocated by the C API."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    vec = ffi.wasm_byte_vec_t()
    if raw:
        ffi.wasm_byte_vec_new(
            ctypes.byref(vec), len(raw), ctypes.cast(ctypes.c_char_p(raw), ctypes.POINTER(ffi.wasm_byte_t))
        )
    else:
        ffi.wasm_byte_vec_new_empty(ctypes.byref(vec))
    return vec


def name_of(vec: Any) -> str:
    """The text of a ``wasm_name_t`` (not freed)."""
    n = int(vec.size)
    return ctypes.string_at(_address(vec.data), n).decode("utf-8") if n else ""


# ---- bytes in bulk


def write_bytes(val: _ValPtr, data: bytes | bytearray | memoryview) -> None:
    """Make ``*val`` a ``list<u8>`` holding ``data``: one allocation, two strided copies."""
    n = len(data)
    lst = ffi.wasmtime_component_vallist_t()
    ffi.wasmtime_component_vallist_new_uninit(ctypes.byref(lst), n)
    if n:
        area = (ctypes.c_ubyte * (n * VAL_SIZE)).from_address(_address(lst.data))
        view = memoryview(area).cast("B")
        view[0::VAL_SIZE] = bytes((_U8,)) * n
        view[_OF::VAL_SIZE] = data
        del view
    val.contents.kind = _KIND["list"]
    val.contents.of.list = lst


def bytes_of(lst: Any) -> bytes:
    """The bytes of a ``list<u8>`` value's vector (one strided copy; the vector is not freed)."""
    n = int(lst.size)
    if not n:
        return b""
    area = (ctypes.c_ubyte * (n * VAL_SIZE)).from_address(_address(lst.data))
    view = memoryview(area).cast("B")
    try:
        return view[_OF::VAL_SIZE].tobytes()
    finally:
        del view


# ---- write (lowered form → C)


def _boxed(t: WitType, v: Any) -> _ValPtr:
    raw = ffi.wasmtime_component_val_t()
    write(t, v, ctypes.pointer(raw))
    return ffi.wasmtime_component_val_new(ctypes.byref(raw))  # moves raw's contents to the heap


def write(t: WitType, v: Any, val: _ValPtr) -> None:
    """Write the lowered value ``v`` of type ``t`` into ``*val`` (allocating what it holds)."""
    k = t.kind
    c = val.contents
    if k in INT_RANGES:
        c.kind = _KIND[k]
        setattr(c.of, k, v)
        return
    writer = _WRITERS.get(k)
    if writer is None:
        raise ValueError(f"cannot write a {t.text()}")
    writer(t, v, val)


def _w_bool(t: WitType, v: Any, val: _ValPtr) -> None:
    val.contents.kind = _KIND["bool"]
    val.contents.of.boolean = bool(v)


def _w_float(t: WitType, v: Any, val: _ValPtr) -> None:
    val.contents.kind = _KIND[t.kind]
    setattr(val.contents.of, t.kind, float(v))


def _w_char(t: WitType, v: Any, val: _ValPtr) -> None:
    val.contents.kind = _KIND["char"]
    val.contents.of.character = ord(v)


def _w_string(t: WitType, v: Any, val: _ValPtr) -> None:
    val.contents.kind = _KIND["string"]
    val.contents.of.string = new_name(v)


def _w_list(t: WitType, v: Any, val: _ValPtr) -> None:
    elem = t.items[0]
    assert elem is not None
    if elem.kind == "u8":
        write_bytes(val, v)
        return
    lst = ffi.wasmtime_component_vallist_t()
    ffi.wasmtime_component_vallist_new_uninit(ctypes.byref(lst), len(v))
    base = _address(lst.data)
    for i, item in enumerate(v):
        write(elem, item, ctypes.cast(base + i * VAL_SIZE, ctypes.POINTER(ffi.wasmtime_component_val_t)))
    val.contents.kind = _KIND["list"]
    val.contents.of.list = lst


def _w_record(t: WitType, v: Any, val: _ValPtr) -> None:
    rec = ffi.wasmtime_component_valrecord_t()
    ffi.wasmtime_component_valrecord_new_uninit(ctypes.byref(rec), len(t.names))
    for i, (name, ft, fv) in enumerate(zip(t.names, t.items, v, strict=True)):
        assert ft is not None
        entry = rec.data[i]
        entry.name = new_name(name)
        write(ft, fv, ctypes.pointer(entry.val))
    val.contents.kind = _KIND["record"]
    val.contents.of.record = rec


def _w_tuple(t: WitType, v: Any, val: _ValPtr) -> None:
    tup = ffi.wasmtime_component_valtuple_t()
    ffi.wasmtime_component_valtuple_new_uninit(ctypes.byref(tup), len(t.items))
    base = _address(tup.data)
    for i, (et, ev) in enumerate(zip(t.items, v, strict=True)):
        assert et is not None
        write(et, ev, ctypes.cast(base + i * VAL_SIZE, ctypes.POINTER(ffi.wasmtime_component_val_t)))
    val.contents.kind = _KIND["tuple"]
    val.contents.of.tuple = tup


def _w_variant(t: WitType, v: Any, val: _ValPtr) -> None:
    case, payload = v
    if t.kind == "result":
        pt = t.items[0 if case == "ok" else 1]
        val.contents.kind = _KIND["result"]
        val.contents.of.result.is_ok = case == "ok"
        val.contents.of.result.val = None if pt is None else _boxed(pt, payload)
        return
    pt = t.items[t.names.index(case)]
    val.contents.kind = _KIND["variant"]
    val.contents.of.variant.discriminant = new_name(case)
    val.contents.of.variant.val = None if pt is None else _boxed(pt, payload)


def _w_enum(t: WitType, v: Any, val: _ValPtr) -> None:
    val.contents.kind = _KIND["enum"]
    val.contents.of.enumeration = new_name(v)


def _w_option(t: WitType, v: Any, val: _ValPtr) -> None:
    inner = t.items[0]
    assert inner is not None
    val.contents.kind = _KIND["option"]
    val.contents.of.option = None if v is None else _boxed(inner, v[0])


def _w_flags(t: WitType, v: Any, val: _ValPtr) -> None:
    flags = ffi.wasmtime_component_valflags_t()
    ffi.wasmtime_component_valflags_new_uninit(ctypes.byref(flags), len(v))
    for i, name in enumerate(v):
        flags.data[i] = new_name(name)
    val.contents.kind = _KIND["flags"]
    val.contents.of.flags = flags


_WRITERS: Final[dict[str, Callable[[WitType, Any, _ValPtr], None]]] = {
    "bool": _w_bool,
    "f32": _w_float,
    "f64": _w_float,
    "char": _w_char,
    "string": _w_string,
    "list": _w_list,
    "record": _w_record,
    "tuple": _w_tuple,
    "variant": _w_variant,
    "result": _w_variant,
    "enum": _w_enum,
    "option": _w_option,
    "flags": _w_flags,
}


# ---- shape check (a host function's arguments, before any union member is read)


def fits(t: WitType, c: Any) -> bool:
    """Whether the engine's value ``c`` is of ``t``'s kind — an enum one of its cases, a list's elements its element's.

    A host function is linked untyped (the C API checks an import's type against nothing): a guest may
    import it under its name with any type, and its arguments then hold other union members than the
    function reads — a ``u64`` read as a ``list<u8>`` is a wild pointer. So the trampoline checks the
    arguments first. A ``list<u8>``'s elements are checked by their kind bytes in one strided copy: any
    other element (an ``option<u8>``) holds a host pointer where :func:`bytes_of` reads the byte.
    """
    if c.kind != _TAG.get(t.kind):
        return False
    if t.kind == "enum":  # the guest's enum may have other cases than the host's (an output stream "stdin")
        return name_of(c.of.enumeration) in t.names
    if t.kind != "list":
        return True
    elem = t.items[0]
    assert elem is not None
    if elem.kind == "u8":
        return _all_u8(c.of.list)
    base = _address(c.of.list.data)
    at = ffi.wasmtime_component_val_t.from_address
    return all(fits(elem, at(base + i * VAL_SIZE)) for i in range(c.of.list.size))


def _all_u8(lst: Any) -> bool:
    """Whether every element of the value vector ``lst`` is a ``u8`` (its kind bytes, one strided copy)."""
    n = int(lst.size)
    if not n:
        return True
    area = (ctypes.c_ubyte * (n * VAL_SIZE)).from_address(_address(lst.data))
    view = memoryview(area).cast("B")
    try:
        return view[0::VAL_SIZE].tobytes().count(_U8) == n
    finally:
        del view


# ---- read (C → lowered form); never frees


class ValueTooLarge(Exception):
    """A value read from the engine is larger than the :class:`Budget` it was read under (nothing more was read)."""


class Budget:
    """How many more bytes (:func:`kuro_wasm.model.wit.value_bytes`) a value being read may have."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left

    def spend(self, n: int) -> None:
        """Count ``n`` bytes. Raises ValueTooLarge: past the budget."""
        self.left -= n
        if self.left < 0:
            raise ValueTooLarge


def read(t: WitType, c: Any, budget: Budget | None = None) -> Any:
    """The lowered value of type ``t`` held by the ``wasmtime_component_val_t`` ``c``.

    With a ``budget`` each part is counted as :func:`~kuro_wasm.model.wit.value_bytes` counts it
    *before* it is converted, so a value past the budget is never built. Raises ValueTooLarge.
    """
    k = t.kind
    if budget is not None:
        fixed = SCALAR_BYTES.get(k)
        if fixed is not None:
            budget.spend(fixed)
    if k in INT_RANGES:
        return int(getattr(c.of, k))
    if k == "bool":
        return bool(c.of.boolean)
    if k in ("f32", "f64"):
        return float(getattr(c.of, k))
    if k == "char":
        return chr(c.of.character)
    if k == "string":
        if budget is not None:
            budget.spend(int(c.of.string.size))
        return name_of(c.of.string)
    if k == "list":
        return _read_list(t, c.of.list, budget)
    if k == "record":
        rec = c.of.record
        return tuple(read(ft, rec.data[i].val, budget) for i, ft in enumerate(t.items) if ft is not None)
    if k == "tuple":
        base = _address(c.of.tuple.data)
        return tuple(
            read(et, ffi.wasmtime_component_val_t.from_address(base + i * VAL_SIZE), budget)
            for i, et in enumerate(t.items)
            if et is not None
        )
    if budget is not None and k in ("result", "variant", "option"):
        budget.spend(1)
    if k == "result":
        ok = bool(c.of.result.is_ok)
        pt = t.items[0 if ok else 1]
        payload = None if pt is None or not c.of.result.val else read(pt, c.of.result.val.contents, budget)
        return ("ok" if ok else "err", payload)
    if k == "variant":
        case = name_of(c.of.variant.discriminant)
        pt = t.items[t.names.index(case)]
        return (case, None if pt is None or not c.of.variant.val else read(pt, c.of.variant.val.contents, budget))
    if k == "enum":
        return name_of(c.of.enumeration)
    if k == "option":
        inner = t.items[0]
        assert inner is not None
        return None if not c.of.option else (read(inner, c.of.option.contents, budget),)
    if k == "flags":
        if budget is not None:
            budget.spend(max(1, (len(t.names) + 7) // 8))
        got = {name_of(c.of.flags.data[i]) for i in range(c.of.flags.size)}
        return tuple(n for n in t.names if n in got)
    raise ValueError(f"cannot read a {t.text()}")


def _read_list(t: WitType, lst: Any, budget: Budget | None) -> Any:
    elem = t.items[0]
    assert elem is not None
    n = int(lst.size)
    fixed = SCALAR_BYTES.get(elem.kind)
    if budget is not None and fixed is not None:
        budget.spend(fixed * n)  # the whole list at once; its elements are then read uncounted
        budget = None
    if elem.kind == "u8":
        return bytes_of(lst)
    base = _address(lst.data)
    out = []
    for i in range(n):
        before = 0 if budget is None else budget.left
        out.append(read(elem, ffi.wasmtime_component_val_t.from_address(base + i * VAL_SIZE), budget))
        if budget is not None and before - budget.left < 1:
            budget.spend(1 - (before - budget.left))  # every element counts at least 1 byte
    return out


def delete(val: _ValPtr) -> None:
    """Free everything ``*val`` holds (the value itself stays, as an empty bool)."""
    ffi.wasmtime_component_val_delete(val)
