"""The shape of a wasm binary — its imports, exports and their signatures — read from the bytes.

## The one decision
What a guest imports and exports is read from the module's **bytes**, never
asked of wasmtime-py: its ``FuncType.params``/``results`` cannot represent
``v128`` or the GC proposal's reference types (``(ref null $struct)``, ``anyref``,
``i31ref`` …), and asking for one aborts the whole process inside wasmtime's
C API. This reader knows every value type of wasm 3.0 (numbers, ``v128``, the
abstract and concrete reference types, shared heap types), so a module that
validates always yields a shape, and the guest kinds decide from it —
a signature with a type they cannot pass is then a ``load-error`` naming that
type, not a host crash.

It reads only the sections that decide a kind (type, import, function, table,
memory, export) and skips the others by their size. It is run on bytes that
wasmtime has already validated; a shape it still cannot read (a proposal newer
than this reader) is :class:`ShapeError`, which the loader turns into a
``load-error``.

A **component** (component-model binary: the same ``\\0asm`` magic with layer 1
in the version field) is recognised by its header, and :func:`read_shape`
says only that. Its imports (instance names, e.g. ``kuro:host/fs@1.0.0``, and
their functions) and its exported functions with their WIT types
(:class:`~kuro_wasm.model.wit.WitFunc`) are filled in by the host from the
compiled component (:mod:`kuro_wasm.host.component_types`): resolving a
component's types from its bytes is a type checker (aliases, outer aliases,
nested components instantiated with type substitution), and wasmtime's
component type API, unlike its core ``FuncType``, represents every type there
is. The shape is still plain data, kept beside the compiled artifact.

## Pure
Bytes in, a frozen value out. No wasmtime.
"""

from __future__ import annotations

import dataclasses
import marshal
from dataclasses import dataclass
from typing import Final

from kuro_wasm.model.component_binary import Plan, plan_from_data
from kuro_wasm.model.wit import WitFunc, func_from_data

__all__ = [
    "NUMBER_TYPES",
    "PACKED",
    "Export",
    "FuncSig",
    "Import",
    "ShapeError",
    "WasmShape",
    "is_component",
    "read_shape",
    "with_module_imports",
]

MAGIC: Final = b"\0asm"
#: The first bytes of a shape's packed form (:meth:`WasmShape.to_bytes`): its name and ``marshal``'s format.
PACKED: Final = b"kuro-shape\x04"
#: The value types every guest kind can pass as scalars.
NUMBER_TYPES: Final = frozenset({"i32", "i64", "f32", "f64"})

_NUMERIC: Final[dict[int, str]] = {0x7F: "i32", 0x7E: "i64", 0x7D: "f32", 0x7C: "f64", 0x7B: "v128"}
# Abstract heap types (one byte each; as s33 they are the negative one-byte values).
_HEAP: Final[dict[int, str]] = {
    0x73: "nofunc",
    0x72: "noextern",
    0x71: "none",
    0x70: "func",
    0x6F: "extern",
    0x6E: "any",
    0x6D: "eq",
    0x6C: "i31",
    0x6B: "struct",
    0x6A: "array",
    0x69: "exn",
    0x74: "noexn",
    0x68: "cont",
    0x75: "nocont",
}
_SHORTHAND: Final[dict[int, str]] = {
    0x70: "funcref",
    0x6F: "externref",
    0x6E: "anyref",
    0x6D: "eqref",
    0x6C: "i31ref",
    0x6B: "structref",
    0x6A: "arrayref",
    0x71: "nullref",
    0x72: "nullexternref",
    0x73: "nullfuncref",
    0x69: "exnref",
    0x74: "nullexnref",
    0x68: "contref",
    0x75: "nullcontref",
}
_SHARED: Final = 0x65
_EXTERN_KINDS: Final[dict[int, str]] = {0x00: "func", 0x01: "table", 0x02: "memory", 0x03: "global", 0x04: "tag"}


class ShapeError(ValueError):
    """The bytes are not a module whose shape this reader can read (truncated, or a newer proposal)."""


@dataclass(frozen=True, slots=True)
class FuncSig:
    """A function signature as type names (``"i32"``, ``"v128"``, ``"(ref null $2)"`` …)."""

    params: tuple[str, ...]
    results: tuple[str, ...]

    def text(self) -> str:
        """``(i32 i32) -> (i32)``."""
        return f"({' '.join(self.params)}) -> ({' '.join(self.results)})"

    def unpassable(self) -> str | None:
        """The first parameter or result type that is not a plain number (i32/i64/f32/f64), or None."""
        return next((t for t in (*self.params, *self.results) if t not in NUMBER_TYPES), None)


@dataclass(frozen=True, slots=True)
class Import:
    """One import: ``module.name``, its extern kind, and (for a function) its signature."""

    module: str
    name: str
    kind: str  # func | table | memory | global | tag
    sig: FuncSig | None = None

    @property
    def where(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(frozen=True, slots=True)
class Export:
    """One export: its name, extern kind and (for a function) signature."""

    name: str
    kind: str
    sig: FuncSig | None = None


@dataclass(frozen=True, slots=True)
class WasmShape:
    """What a guest kind decides from: is it a component; its imports and exports; memory and table counts."""

    component: bool = False
    imports: tuple[Import, ...] = ()
    exports: tuple[Export, ...] = ()
    memories: int = 0
    tables: int = 0
    #: A component's exported functions with their WIT types (``run``, ``iface#func``); empty for a core module.
    typed: tuple[WitFunc, ...] = ()
    #: A component's plan when the host can run its core modules itself
    #: (:func:`kuro_wasm.model.component_binary.read_plan`); None for a core module or another component.
    plan: Plan | None = None
    #: Why a component has no plan ("" when it has one, or for a core module).
    not_plain: str = ""
    #: With a plan: the functions the component imports from the instances the plan names, as it types them
    #: (``instance#func``), so the host checks them against its own without the compiled component's types.
    imported: tuple[WitFunc, ...] = ()

    def typed_export(self, name: str) -> WitFunc | None:
        """The component function exported as ``name`` (``run`` or ``interface#func``), or None."""
        return next((f for f in self.typed if f.name == name), None)

    def export(self, name: str) -> Export | None:
        """The export called ``name``, or None."""
        return next((e for e in self.exports if e.name == name), None)

    def functions(self) -> dict[str, FuncSig]:
        """Every function export's signature by name."""
        return {e.name: e.sig for e in self.exports if e.kind == "func" and e.sig is not None}

    def import_modules(self) -> frozenset[str]:
        """The module names imported from."""
        return frozenset(i.module for i in self.imports)

    # ---- a packed byte form (kept beside the compiled artifact in the module cache, sent to a worker)

    def to_bytes(self) -> bytes:
        """A packed form: :data:`PACKED` then the shape's plain data in ``marshal``'s format 4 (dicts, lists,
        tuples, strings, numbers — read back several times faster than JSON); :meth:`from_bytes` reads it."""

        def sig(s: FuncSig | None) -> list[list[str]] | None:
            return None if s is None else [list(s.params), list(s.results)]

        data: dict[str, object] = {
            "component": self.component,
            "imports": [[i.module, i.name, i.kind, sig(i.sig)] for i in self.imports],
            "exports": [[e.name, e.kind, sig(e.sig)] for e in self.exports],
            "memories": self.memories,
            "tables": self.tables,
        }
        if self.typed:
            data["typed"] = [f.to_data() for f in self.typed]
        if self.plan is not None:
            data["plan"] = self.plan.to_data()
        if self.not_plain:
            data["not-plain"] = self.not_plain
        if self.imported:
            data["imported"] = [f.to_data() for f in self.imported]
        return PACKED + marshal.dumps(data, 4)

    @classmethod
    def from_bytes(cls, raw: bytes) -> WasmShape:
        """The shape :meth:`to_bytes` wrote. Raises ShapeError for anything else (an older kuro's JSON form too).

        ``marshal`` reads any bytes into *some* value, but is no parser for bytes of unknown origin: what is read
        here is what this host packed — a module cache entry verified under its keyed tag, or the host's answer
        to its own worker.
        """
        if not raw.startswith(PACKED):
            raise ShapeError("not a stored module shape: another format")
        try:
            data = marshal.loads(memoryview(raw)[len(PACKED) :])

            def sig(s: list[list[str]] | None) -> FuncSig | None:
                return None if s is None else FuncSig(tuple(map(str, s[0])), tuple(map(str, s[1])))

            return cls(
                component=bool(data["component"]),
                imports=tuple(Import(str(m), str(n), str(k), sig(s)) for m, n, k, s in data["imports"]),
                exports=tuple(Export(str(n), str(k), sig(s)) for n, k, s in data["exports"]),
                memories=int(data["memories"]),
                tables=int(data["tables"]),
                typed=tuple(func_from_data(f) for f in data.get("typed", [])),
                plan=None if data.get("plan") is None else plan_from_data(data["plan"]),
                not_plain=str(data.get("not-plain", "")),
                imported=tuple(func_from_data(f) for f in data.get("imported", [])),
            )
        except (EOFError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise ShapeError(f"not a stored module shape: {exc}") from exc


def with_module_imports(plan: Plan) -> Plan:
    """``plan`` (read from a component's bytes, its core modules' bytes with it) with each core module's imports,
    as :func:`read_shape` reads them: (module, name, extern kind) in the module's order.

    Raises ShapeError: a core module whose imports this reader cannot read, or one importing a kind the plain
    path's link does not wire (a ``tag``): such a component is not plain, and takes the engine's path.
    """
    imports = []
    for index, module in enumerate(plan.modules):
        try:
            these = tuple((i.module, i.name, i.kind) for i in read_shape(module).imports)
        except ShapeError as exc:
            raise ShapeError(f"core module {index}: {exc}") from exc
        for name, item, kind in these:
            if kind not in _LINKED_KINDS:
                raise ShapeError(f"core module {index} imports {name}.{item}, a {kind}: not linked on the plain path")
        imports.append(these)
    return dataclasses.replace(plan, module_imports=tuple(imports))


#: The import kinds a plain component's link wires (:class:`kuro_wasm.host.component_core.PlainLink`).
_LINKED_KINDS: Final = frozenset({"func", "global", "table", "memory"})


def is_component(data: bytes | bytearray | memoryview) -> bool:
    """True for a component-model binary (``\\0asm``, version field with layer 1).

    >>> is_component(b"\\0asm\\x0d\\x00\\x01\\x00"), is_component(b"\\0asm\\x01\\x00\\x00\\x00")
    (True, False)
    """
    head = bytes(data[:8])
    return len(head) == 8 and head[:4] == MAGIC and head[6:8] == b"\x01\x00"


class _Reader:
    __slots__ = ("data", "end", "pos")

    def __init__(self, data: memoryview, pos: int, end: int) -> None:
        self.data, self.pos, self.end = data, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ShapeError("unexpected end of section")
        b = self.data[self.pos]
        self.pos += 1
        return int(b)

    def peek(self) -> int:
        if self.pos >= self.end:
            raise ShapeError("unexpected end of section")
        return int(self.data[self.pos])

    def uleb(self, bits: int = 32) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result
            if shift >= bits + 7:
                raise ShapeError("integer too long")

    def sleb(self, bits: int = 33) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if b & 0x40:
                    result -= 1 << shift
                return result
            if shift >= bits + 7:
                raise ShapeError("integer too long")

    def name(self) -> str:
        n = self.uleb()
        if self.pos + n > self.end:
            raise ShapeError("name runs past its section")
        raw = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return raw.decode("utf-8", "replace")

    # ---- types

    def heap_type(self) -> str:
        b = self.peek()
        if b == _SHARED:
            self.pos += 1
            return "shared " + self.heap_type()
        if 0x40 <= b < 0x80:  # a negative one-byte s33: an abstract heap type
            self.pos += 1
            if b not in _HEAP:
                raise ShapeError(f"unknown heap type 0x{b:02x}")
            return _HEAP[b]
        index = self.sleb()
        if index < 0:
            raise ShapeError(f"unknown heap type {index}")
        return f"${index}"

    def value_type(self) -> str:
        b = self.byte()
        if b in _NUMERIC:
            return _NUMERIC[b]
        if b in _SHORTHAND:
            return _SHORTHAND[b]
        if b in (0x63, 0x64):
            heap = self.heap_type()
            return f"(ref {'null ' if b == 0x63 else ''}{heap})"
        if b == _SHARED:
            inner = self.byte()
            if inner not in _SHORTHAND:
                raise ShapeError(f"unknown shared value type 0x{inner:02x}")
            return f"(shared {_SHORTHAND[inner]})"
        raise ShapeError(f"unknown value type 0x{b:02x}")

    def storage_type(self) -> str:
        b = self.peek()
        if b in (0x78, 0x77):
            self.pos += 1
            return "i8" if b == 0x78 else "i16"
        return self.value_type()

    def limits(self) -> None:
        flags = self.byte()
        if flags & ~0x0F:
            raise ShapeError(f"unknown limits flags 0x{flags:02x}")
        self.uleb(64)
        if flags & 0x01:
            self.uleb(64)
        if flags & 0x08:  # custom page sizes: log2 of the page size
            self.uleb()


def _comp_type(r: _Reader) -> FuncSig | str:
    form = r.byte()
    if form == 0x60:
        params = tuple(r.value_type() for _ in range(r.uleb()))
        results = tuple(r.value_type() for _ in range(r.uleb()))
        return FuncSig(params, results)
    if form == 0x5F:
        for _ in range(r.uleb()):
            r.storage_type()
            r.byte()  # mutability
        return "struct"
    if form == 0x5E:
        r.storage_type()
        r.byte()
        return "array"
    if form == 0x5D:  # stack switching: cont $f
        r.sleb()
        return "cont"
    raise ShapeError(f"unknown composite type 0x{form:02x}")


def _sub_type(r: _Reader) -> FuncSig | str:
    b = r.peek()
    if b in (0x50, 0x4F):
        r.pos += 1
        for _ in range(r.uleb()):
            r.uleb()
        return _comp_type(r)
    if b == 0x65:  # shared composite type
        r.pos += 1
        return _comp_type(r)
    return _comp_type(r)


def _type_section(r: _Reader) -> list[FuncSig | str]:
    types: list[FuncSig | str] = []
    for _ in range(r.uleb()):
        if r.peek() == 0x4E:  # a recursion group: every member takes a type index
            r.pos += 1
            types.extend(_sub_type(r) for _ in range(r.uleb()))
        else:
            types.append(_sub_type(r))
    return types


def _func_type(types: list[FuncSig | str], index: int) -> FuncSig:
    if not 0 <= index < len(types):
        raise ShapeError(f"type index {index} out of range")
    found = types[index]
    if not isinstance(found, FuncSig):
        raise ShapeError(f"type {index} is a {found} type, not a function type")
    return found


def read_shape(data: bytes | bytearray | memoryview) -> WasmShape:
    """The shape of the wasm binary ``data`` (a core module or a component).

    Raises ShapeError: not a wasm binary, or a section this reader cannot read.

    >>> shape = read_shape(bytes.fromhex("0061736d01000000010501600001"
    ...     "7f03020100070701037275" "6e00000a06010400412a0b"))
    >>> shape.functions()["run"].text()
    '() -> (i32)'
    """
    view = memoryview(bytes(data) if not isinstance(data, bytes) else data)
    if len(view) < 8 or bytes(view[:4]) != MAGIC:
        raise ShapeError("not a wasm binary (no \\0asm header)")
    if is_component(view):
        return WasmShape(component=True)
    if bytes(view[4:8]) != b"\x01\x00\x00\x00":
        raise ShapeError(f"unknown wasm binary version {bytes(view[4:8]).hex()}")
    types: list[FuncSig | str] = []
    imports: list[Import] = []
    func_types: list[int] = []  # type index of every function, imported ones first
    exports_raw: list[tuple[str, int, int]] = []
    memories = tables = 0
    pos, total = 8, len(view)
    while pos < total:
        header = _Reader(view, pos, total)
        section_id = header.byte()
        size = header.uleb()
        start, end = header.pos, header.pos + size
        if end > total:
            raise ShapeError(f"section {section_id} runs past the end of the module")
        r = _Reader(view, start, end)
        if section_id == 1:
            types = _type_section(r)
        elif section_id == 2:
            for _ in range(r.uleb()):
                module, name = r.name(), r.name()
                kind_byte = r.byte()
                kind = _EXTERN_KINDS.get(kind_byte)
                if kind is None:
                    raise ShapeError(f"import {module}.{name}: unknown kind 0x{kind_byte:02x}")
                sig = None
                if kind == "func":
                    index = r.uleb()
                    sig = _func_type(types, index)
                    func_types.append(index)
                elif kind == "table":
                    r.value_type()
                    r.limits()
                    tables += 1
                elif kind == "memory":
                    r.limits()
                    memories += 1
                elif kind == "global":
                    r.value_type()
                    r.byte()
                else:  # tag: attribute, type index
                    r.byte()
                    r.uleb()
                imports.append(Import(module, name, kind, sig))
        elif section_id == 3:
            func_types.extend(r.uleb() for _ in range(r.uleb()))
        elif section_id == 4:
            tables += r.uleb()
        elif section_id == 5:
            memories += r.uleb()
        elif section_id == 7:
            for _ in range(r.uleb()):
                name = r.name()
                kind_byte = r.byte()
                exports_raw.append((name, kind_byte, r.uleb()))
        pos = end
    exports: list[Export] = []
    for name, kind_byte, index in exports_raw:
        kind = _EXTERN_KINDS.get(kind_byte)
        if kind is None:
            raise ShapeError(f"export {name!r}: unknown kind 0x{kind_byte:02x}")
        sig = None
        if kind == "func":
            if not 0 <= index < len(func_types):
                raise ShapeError(f"export {name!r}: function index {index} out of range")
            sig = _func_type(types, func_types[index])
        exports.append(Export(name, kind, sig))
    return WasmShape(False, tuple(imports), tuple(exports), memories, tables)
