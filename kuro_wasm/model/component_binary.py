"""A component binary read as a *plan*: its core modules, how they are instantiated and wired, what is lifted.

## The one decision
A component whose shape is what ``wasm-tools component new`` produces (core
modules main/shim/fixup, core instances, aliases, ``canon lower`` of imported
functions, ``canon lift`` of exports, instance and type imports, exports,
and the trivial nested "shim" component that re-exports an interface's
functions) can be run without the component model implementation: its core
modules instantiated with the *core* API and the canonical ABI done by the
host (:mod:`kuro_wasm.host.canonical_abi`). This module decides, from the
bytes alone, whether a component has that shape, and if so describes it as a
:class:`Plan` — an ordered list of steps over the component's index spaces —
or says why not (the component then keeps the engine's component path).

Types are not read here: a component's function types are the engine's
(``Component.type``, :mod:`kuro_wasm.host.component_types`), reflected
after the engine has compiled and validated the whole component; this module
only resolves indices (core funcs, tables, memories, globals, modules, core
instances, component funcs and instances), so type sections are skipped by
their size. The binary is trusted to be valid (the engine validated it) but
is still read defensively: a truncated or unknown construct is a refusal
(:class:`NotPlain`), never an exception of another type.

## Pure
Bytes in, a frozen plan out.

## Not done here
Instantiating (:mod:`kuro_wasm.host.component_core`), types, the canonical ABI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "CanonOptions",
    "CoreExport",
    "Plan",
    "Lift",
    "NotPlain",
    "plan_from_data",
    "read_plan",
]

_PREAMBLE: Final = b"\x00asm\x0d\x00\x01\x00"
#: core:sort bytes → names (the index spaces of core items)
_CORE_SORTS: Final[dict[int, str]] = {
    0x00: "func",
    0x01: "table",
    0x02: "memory",
    0x03: "global",
    0x10: "type",
    0x11: "module",
    0x12: "instance",
}
#: component sort bytes (after 0x00, which prefixes a core sort)
_SORTS: Final[dict[int, str]] = {0x01: "func", 0x02: "value", 0x03: "type", 0x04: "component", 0x05: "instance"}


class NotPlain(Exception):
    """The component is not of the shape this host runs itself; the message says what."""


@dataclass(frozen=True, slots=True)
class CanonOptions:
    """The options of a ``canon lift`` or ``canon lower``: indices into the core index spaces (None: absent)."""

    memory: int | None = None
    realloc: int | None = None
    post_return: int | None = None


@dataclass(frozen=True, slots=True)
class CoreExport:
    """One core item: ``sort`` (func, table, memory, global) and its index in that core index space."""

    sort: str
    index: int


@dataclass(frozen=True, slots=True)
class Lift:
    """An exported function: the core func lifted, and its options."""

    core_func: int
    options: CanonOptions


# ---- steps of a plan, in the component's order. Each defines the next index of one index space.


@dataclass(frozen=True, slots=True)
class Instantiate:
    """A new core instance: module ``module`` instantiated with ``args`` (import module name → core instance)."""

    module: int
    args: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class InlineInstance:
    """A new core instance made of other core items (name → item)."""

    exports: tuple[tuple[str, CoreExport], ...]


@dataclass(frozen=True, slots=True)
class AliasCore:
    """A new core item (of ``sort``): export ``name`` of core instance ``instance``."""

    sort: str
    instance: int
    name: str


@dataclass(frozen=True, slots=True)
class Lower:
    """A new core func: the imported component function ``import_name`` (``instance#func``), lowered."""

    import_name: str
    options: CanonOptions


Step = Instantiate | InlineInstance | AliasCore | Lower


@dataclass(frozen=True, slots=True)
class Plan:
    """How to instantiate a plain component: its core modules (bytes), the steps, and its exported functions."""

    #: the core modules' bytes (empty in a plan read back by :func:`plan_from_data`: they are cached compiled)
    modules: tuple[bytes, ...]
    steps: tuple[Step, ...]
    #: exported function name (``run`` or ``interface#func``) → its lift
    exports: tuple[tuple[str, Lift], ...]
    #: the component's imported instances
    imports: tuple[str, ...]
    #: how many core modules there are
    module_count: int = 0
    #: each core module's imports in its order, as (module, name, extern kind), read from its bytes
    #: (:func:`kuro_wasm.model.wasm_shape.with_module_imports`; empty until then), so linking the plan
    #: (:class:`kuro_wasm.host.component_core.PlainLink`) asks the engine for none of them
    module_imports: tuple[tuple[tuple[str, str, str], ...], ...] = ()
    #: the plan linked by the host, as plain data (:class:`kuro_wasm.host.component_core.LinkProgram`), or None.
    #: A plan stored with its program (:meth:`to_data`) keeps neither its steps nor its core modules' imports:
    #: the program is what they were linked to, and a new process links nothing again
    program: Any = None

    def export(self, name: str) -> Lift | None:
        return next((lift for n, lift in self.exports if n == name), None)

    def to_data(self) -> Any:
        """A plain form (dicts, lists, strings, numbers) without the modules' bytes (:func:`plan_from_data` reads it
        back); with a program, that in place of the steps and the core modules' imports."""
        data: dict[str, Any] = {
            "modules": self.module_count,
            "exports": [[n, lift.core_func, _options_data(lift.options)] for n, lift in self.exports],
            "imports": list(self.imports),
        }
        if self.program is not None:
            data["program"] = self.program
        else:
            data["steps"] = [_step_data(s) for s in self.steps]
            data["module-imports"] = [[list(i) for i in imports] for imports in self.module_imports]
        return data


def _options_data(o: CanonOptions) -> list[int | None]:
    return [o.memory, o.realloc, o.post_return]


def _step_data(s: Step) -> list[Any]:
    if isinstance(s, Instantiate):
        return ["instantiate", s.module, [list(a) for a in s.args]]
    if isinstance(s, InlineInstance):
        return ["inline", [[n, e.sort, e.index] for n, e in s.exports]]
    if isinstance(s, AliasCore):
        return ["alias", s.sort, s.instance, s.name]
    return ["lower", s.import_name, _options_data(s.options)]


def plan_from_data(data: Any) -> Plan:
    """The plan :meth:`Plan.to_data` wrote (no module bytes). Raises ValueError for anything else."""
    try:
        exports = tuple((str(n), Lift(int(f), CanonOptions(*o))) for n, f, o in data["exports"])
        count = int(data["modules"])
        imports = tuple(map(str, data["imports"]))
        if "program" in data:  # linked: no steps (the host checks the program when it binds it)
            return Plan((), (), exports, imports, count, (), data["program"])
        steps: list[Step] = []
        for s in data["steps"]:
            if s[0] == "instantiate":
                steps.append(Instantiate(int(s[1]), tuple((str(n), int(i)) for n, i in s[2])))
            elif s[0] == "inline":
                steps.append(InlineInstance(tuple((str(n), CoreExport(str(k), int(i))) for n, k, i in s[1])))
            elif s[0] == "alias":
                steps.append(AliasCore(str(s[1]), int(s[2]), str(s[3])))
            elif s[0] == "lower":
                steps.append(Lower(str(s[1]), CanonOptions(*s[2])))
            else:
                raise ValueError(f"unknown step {s[0]!r}")
        module_imports = tuple(tuple((str(m), str(n), str(k)) for m, n, k in these) for these in data["module-imports"])
        if len(module_imports) != count:
            raise ValueError(f"imports of {len(module_imports)} core modules for {count}")
        return Plan((), tuple(steps), exports, imports, count, module_imports)
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"not a stored component plan: {exc}") from exc


# ---- reading


class _Reader:
    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise NotPlain("truncated component")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def u32(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise NotPlain("malformed LEB128 integer")
        if result >= 2**32:
            raise NotPlain("malformed LEB128 integer")
        return result

    def take(self, n: int) -> bytes:
        if n > self.end - self.pos:
            raise NotPlain("truncated component")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def name(self) -> str:
        raw = self.take(self.u32())
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise NotPlain("a name is not UTF-8") from None

    def extern_name(self) -> str:
        """An import or export name (``importname'`` / ``exportname'``)."""
        tag = self.byte()
        if tag not in (0x00, 0x01):
            raise NotPlain(f"an extern name of form {tag:#x}")
        return self.name()


def _core_sort(r: _Reader) -> str:
    b = r.byte()
    sort = _CORE_SORTS.get(b)
    if sort is None:
        raise NotPlain(f"core sort {b:#x}")
    return sort


def _sort(r: _Reader) -> str:
    """A component sort: ``core <sort>`` for core items, else the component sort's name."""
    b = r.byte()
    if b == 0x00:
        return "core " + _core_sort(r)
    sort = _SORTS.get(b)
    if sort is None:
        raise NotPlain(f"sort {b:#x}")
    return sort


def _options(r: _Reader, lift: bool) -> CanonOptions:
    memory = realloc = post = None
    for _ in range(r.u32()):
        b = r.byte()
        if b == 0x00:
            continue  # string-encoding=utf8
        if b in (0x01, 0x02):
            raise NotPlain("a string encoding other than utf8")
        if b == 0x03:
            memory = r.u32()
        elif b == 0x04:
            realloc = r.u32()
        elif b == 0x05 and lift:
            post = r.u32()
        else:
            raise NotPlain(f"canonical option {b:#x}")
    return CanonOptions(memory, realloc, post)


def _extern_desc(r: _Reader) -> str:
    """Skip an ``externdesc``; its sort."""
    b = r.byte()
    if b == 0x00:
        if r.byte() != 0x11:
            raise NotPlain("a core import other than a module")
        r.u32()
        return "core module"
    if b == 0x03:  # type: eq i | sub resource
        bound = r.byte()
        if bound == 0x00:
            r.u32()
        elif bound == 0x01:
            raise NotPlain("a resource type")
        else:
            raise NotPlain(f"type bound {bound:#x}")
        return "type"
    if b == 0x02:
        raise NotPlain("a value import or export")
    sort = {0x01: "func", 0x04: "component", 0x05: "instance"}.get(b)
    if sort is None:
        raise NotPlain(f"extern kind {b:#x}")
    r.u32()
    return sort


_SectionReader = Callable[["_Component", _Reader], None]

# component-level items, as the evaluator tracks them
_Func = tuple[str, object]  # ("import", "inst#name") | ("lift", Lift)
_Instance = dict[str, _Func]  # component instance: export name → func (only funcs are tracked)


class _Component:
    """One component's index spaces while it is read (the outer one, or a nested shim)."""

    def __init__(self, imports: dict[str, object] | None = None) -> None:
        #: given to a nested component: its import name → the func or instance passed
        self.given = imports
        self.funcs: list[_Func | None] = []
        self.instances: list[_Instance | None] = []
        self.components: list[_Nested] = []
        self.exports: list[tuple[str, str, int]] = []  # (name, sort, index)
        self.import_names: list[str] = []
        # core index spaces: only counted here (the plan's steps define them)
        self.core: dict[str, int] = {s: 0 for s in _CORE_SORTS.values()}
        self.modules: list[bytes] = []
        self.steps: list[Step] = []
        self.lifts: list[Lift] = []


@dataclass(frozen=True, slots=True)
class _Nested:
    """A nested component: only the re-export shim shape (imports funcs, exports them) is allowed."""

    imports: tuple[str, ...]  # its func imports, in order
    exports: tuple[tuple[str, int], ...]  # export name → its func index


def _read_nested(data: bytes) -> _Nested:
    r = _Reader(data)
    if r.take(8) != _PREAMBLE:
        raise NotPlain("a nested component of another version")
    funcs: list[str] = []
    exports: list[tuple[str, int]] = []
    while r.pos < r.end:
        section, size = r.byte(), r.u32()
        body = _Reader(data, r.pos, r.pos + size)
        r.pos += size
        if section in (0x00, 0x07):
            continue  # custom, types
        if section == 0x0A:
            for _ in range(body.u32()):
                name = body.extern_name()
                sort = _extern_desc(body)
                if sort == "func":
                    funcs.append(name)
                elif sort != "type":
                    raise NotPlain(f"a nested component importing a {sort}")
        elif section == 0x0B:
            for _ in range(body.u32()):
                name = body.extern_name()
                sort = _sort(body)
                index = body.u32()
                if body.byte() == 0x01:
                    _extern_desc(body)
                if sort == "func":
                    if index >= len(funcs):
                        raise NotPlain("a nested component exporting a function it does not import")
                    exports.append((name, index))
                    funcs.append(funcs[index])  # an export defines a new index
                elif sort != "type":
                    raise NotPlain(f"a nested component exporting a {sort}")
        else:
            raise NotPlain(f"a nested component with section {section}")
    return _Nested(tuple(funcs), tuple(exports))


def read_plan(data: bytes) -> Plan:
    """The plan of a plain component (module docstring). Raises NotPlain: anything else, with what it is."""
    r = _Reader(data)
    if r.take(8) != _PREAMBLE:
        raise NotPlain("not a component of this binary version")
    c = _Component()
    while r.pos < r.end:
        section, size = r.byte(), r.u32()
        body = _Reader(data, r.pos, r.pos + size)
        if size > r.end - r.pos:
            raise NotPlain("truncated component")
        r.pos += size
        _SECTIONS.get(section, _unknown(section))(c, body)
        if section not in (0x00, 0x01, 0x04) and body.pos != body.end:
            raise NotPlain(f"section {section} has trailing bytes")
    exports: list[tuple[str, Lift]] = []
    for name, sort, index in c.exports:
        if sort == "func":
            exports.append((name, _lift_of(c, index)))
        elif sort == "instance":
            inst = c.instances[index]
            if inst is None:
                raise NotPlain(f"export {name}: an instance this host cannot see into")
            exports.extend((f"{name}#{fname}", _lift_of_func(func, name)) for fname, func in inst.items())
        elif sort != "type":
            raise NotPlain(f"exports a {sort}")
    return Plan(tuple(c.modules), tuple(c.steps), tuple(exports), tuple(c.import_names), len(c.modules))


def _lift_of(c: _Component, index: int) -> Lift:
    if index >= len(c.funcs) or c.funcs[index] is None:
        raise NotPlain("an export of an unknown function")
    func = c.funcs[index]
    assert func is not None
    return _lift_of_func(func, str(index))


def _lift_of_func(func: _Func, where: str) -> Lift:
    kind, what = func
    if kind != "lift" or not isinstance(what, Lift):
        raise NotPlain(f"export {where}: re-exports an imported function")
    return what


def _unknown(section: int) -> _SectionReader:
    def refuse(_c: _Component, _r: _Reader) -> None:
        raise NotPlain(f"section {section}" + (" (start)" if section == 9 else " (values)" if section == 12 else ""))

    return refuse


def _custom(_c: _Component, _r: _Reader) -> None:
    pass


def _core_module(c: _Component, r: _Reader) -> None:
    c.modules.append(r.data[r.pos : r.end])
    c.core["module"] += 1


def _core_instances(c: _Component, r: _Reader) -> None:
    for _ in range(r.u32()):
        tag = r.byte()
        if tag == 0x00:
            module = r.u32()
            if module >= c.core["module"]:
                raise NotPlain("instantiates an unknown core module")
            args = []
            for _ in range(r.u32()):
                name = r.name()
                if r.byte() != 0x12:
                    raise NotPlain("a core instantiation argument that is not an instance")
                args.append((name, r.u32()))
            c.steps.append(Instantiate(module, tuple(args)))
        elif tag == 0x01:
            exports = []
            for _ in range(r.u32()):
                name = r.name()
                sort = _core_sort(r)
                exports.append((name, CoreExport(sort, r.u32())))
            c.steps.append(InlineInstance(tuple(exports)))
        else:
            raise NotPlain(f"core instance form {tag:#x}")
        c.core["instance"] += 1


def _core_types(c: _Component, r: _Reader) -> None:
    raise NotPlain("a core type section")


def _components(c: _Component, r: _Reader) -> None:
    c.components.append(_read_nested(r.data[r.pos : r.end]))


def _instances(c: _Component, r: _Reader) -> None:
    for _ in range(r.u32()):
        tag = r.byte()
        if tag == 0x00:
            index = r.u32()
            if index >= len(c.components):
                raise NotPlain("instantiates an unknown component")
            nested = c.components[index]
            given: dict[str, _Func] = {}
            for _ in range(r.u32()):
                name = r.name()
                sort = _sort(r)
                i = r.u32()
                if sort == "func":
                    if i >= len(c.funcs) or c.funcs[i] is None:
                        raise NotPlain("passes an unknown function")
                    func = c.funcs[i]
                    assert func is not None
                    given[name] = func
                elif sort != "type":
                    raise NotPlain(f"passes a {sort} to a nested component")
            inst: _Instance = {}
            for ename, fi in nested.exports:
                iname = nested.imports[fi]
                if iname not in given:
                    raise NotPlain("a nested component's import is not given")
                inst[ename] = given[iname]
            c.instances.append(inst)
        elif tag == 0x01:
            inst = {}
            for _ in range(r.u32()):
                name = r.extern_name()
                sort = _sort(r)
                i = r.u32()
                if sort == "func":
                    func = c.funcs[i] if i < len(c.funcs) else None
                    if func is None:
                        raise NotPlain("an instance of an unknown function")
                    inst[name] = func
                elif sort != "type":
                    raise NotPlain(f"an instance exporting a {sort}")
            c.instances.append(inst)
        else:
            raise NotPlain(f"instance form {tag:#x}")


def _aliases(c: _Component, r: _Reader) -> None:
    for _ in range(r.u32()):
        sort = _sort(r)
        target = r.byte()
        if target == 0x00:  # export of a component instance
            i, name = r.u32(), r.name()
            if sort == "func":
                inst = c.instances[i] if i < len(c.instances) else None
                if inst is None or name not in inst:
                    raise NotPlain(f"aliases function {name!r} of an unknown instance")
                c.funcs.append(inst[name])
            elif sort == "instance":
                raise NotPlain("aliases an instance")
            elif sort != "type":
                raise NotPlain(f"aliases a {sort}")
        elif target == 0x01:  # export of a core instance
            i, name = r.u32(), r.name()
            if not sort.startswith("core ") or i >= c.core["instance"]:
                raise NotPlain("a core alias of an unknown instance")
            core_sort = sort[5:]
            if core_sort not in ("func", "table", "memory", "global"):
                raise NotPlain(f"aliases a core {core_sort}")
            c.steps.append(AliasCore(core_sort, i, name))
            c.core[core_sort] += 1
        elif target == 0x02:  # outer
            r.u32()
            r.u32()
            if sort not in ("type", "core type"):
                raise NotPlain(f"an outer alias of a {sort}")
        else:
            raise NotPlain(f"alias target {target:#x}")


def _canons(c: _Component, r: _Reader) -> None:
    for _ in range(r.u32()):
        op = r.byte()
        if op == 0x00:
            if r.byte() != 0x00:
                raise NotPlain("canon lift of a non-function")
            core_func = r.u32()
            options = _options(r, lift=True)
            r.u32()  # its type: the engine's reflection types it
            c.funcs.append(("lift", Lift(core_func, options)))
        elif op == 0x01:
            if r.byte() != 0x00:
                raise NotPlain("canon lower of a non-function")
            func_index = r.u32()
            options = _options(r, lift=False)
            func = c.funcs[func_index] if func_index < len(c.funcs) else None
            if func is None or func[0] != "import":
                raise NotPlain("lowers a function that is not imported")
            c.steps.append(Lower(str(func[1]), options))
            c.core["func"] += 1
        else:
            raise NotPlain(f"canonical built-in {op:#x} (resources, async, threads)")


def _imports(c: _Component, r: _Reader) -> None:
    for _ in range(r.u32()):
        name = r.extern_name()
        tag = r.byte()
        if tag == 0x05:  # an instance: any function aliased from it is the import ``name#func``
            r.u32()
            c.instances.append(_ImportedInstance(name))
            c.import_names.append(name)
        elif tag == 0x03:
            r.pos -= 1
            _extern_desc(r)
        elif tag == 0x01:
            raise NotPlain(f"imports a bare function {name!r}")
        else:
            r.pos -= 1
            raise NotPlain(f"imports a {_extern_desc(r)} {name!r}")


class _ImportedInstance(dict[str, _Func]):
    """An imported instance: any function aliased from it is the import ``instance#name``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str)

    def __missing__(self, key: str) -> _Func:
        return ("import", f"{self.name}#{key}")


def _exports(c: _Component, r: _Reader) -> None:
    for _ in range(r.u32()):
        name = r.extern_name()
        sort = _sort(r)
        index = r.u32()
        if r.byte() == 0x01:
            _extern_desc(r)
        c.exports.append((name, sort, index))
        if sort == "func":
            if index >= len(c.funcs):
                raise NotPlain("exports an unknown function")
            c.funcs.append(c.funcs[index])
        elif sort == "instance":
            if index >= len(c.instances):
                raise NotPlain("exports an unknown instance")
            c.instances.append(c.instances[index])
        elif sort != "type":
            raise NotPlain(f"exports a {sort}")


def _types(_c: _Component, r: _Reader) -> None:
    r.pos = r.end  # types are the engine's (module docstring)


_SECTIONS: Final[dict[int, _SectionReader]] = {
    0x00: _custom,
    0x01: _core_module,
    0x02: _core_instances,
    0x03: _core_types,
    0x04: _components,
    0x05: _instances,
    0x06: _aliases,
    0x07: _types,
    0x08: _canons,
    0x0A: _imports,
    0x0B: _exports,
}
