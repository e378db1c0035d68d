"""A plain component run as its core modules: linked once, instantiated per run; the host lifts and lowers.

## The one decision
A component of the shape :mod:`kuro_wasm.model.component_binary` accepts is
instantiated step by step in the run's own store with wasmtime's *core* API —
each core module compiled once, each core instance made with the imports the
plan wires to it — and its imported functions (``canon lower``) are host
functions doing the canonical ABI themselves (:mod:`kuro_wasm.host.canonical_abi`):
the guest's ``list<u8>`` is one copy out of its memory, the host's one
``realloc`` and one copy into it. The component's exported functions are
called the same way (``canon lift``: lower the args, call, lift the result,
``post-return``). The engine still compiled and validated the whole component
first (the loader does, as for every component), so only a valid component's
parts are run; being one store, fuel, epoch deadlines and memory limits cover
every core instance as they cover the component's.

The plan is *linked* once per component (:func:`link_program`): each core
module's imports wired (the plan holds them, read from the module's bytes with
it: no question to the engine), each alias's name encoded, each ``canon
lower``'s core type flattened, and the whole plan compiled to a short program
over one array of ``wasmtime_extern_t`` slots (:class:`LinkProgram`). The
program is plain data, made when the component is described and kept in its
cached shape in place of the plan's steps, so a new process reads it (one
``marshal`` load) rather than decoding and linking the plan again (the
17.5 MiB componentize-py guest, a new process's CPU time at load ~9: the
shape's JSON 6–11 ms and linking 2.6–5.9 ms before; the packed shape 0.6 ms
and binding 0.5–0.6 ms after). :class:`PlainLink` binds it (per compiled component and
engine) to the compiled core modules' addresses and the host functions, each
lowered function's core type checked against the host's. A run then only
makes the store's items — one ``wasmtime_instance_new`` per core instance,
one ``export_get`` per item an instantiation imports, one
``func_new_unchecked`` per lowered function — in a tight loop of C calls
(wasmtime-py's ``Instance`` and ``exports()`` wrapped every export of every
instance in Python objects: about half of a 64 KiB ``fs.read`` run). Exports
nothing instantiates with are looked up when they are called. The lowered
functions' C callbacks are shared, one per core signature, each finding its
instance through the ``env`` the store gives it
(:mod:`kuro_wasm.host.component_lowered`): nothing is made per run but the
store's items. The guest's own functions (an export, its ``post-return``, a
``realloc``) are called without wasmtime's check of their arguments
(``wasmtime_func_call_unchecked``) once wasmtime has said, for the link and the
slot, that the function there has the call's core type.

## Effects
wasmtime core instantiation and calls in the caller's store; host functions
are raw C callbacks.

## Not done here
Which components take this path (the kind decides, from the plan and the
imports); what the host functions do (the caller's ``host`` mapping).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import wasmtime
from wasmtime import _ffi as ffi

from kuro_wasm.host.calls import ADDRESS_SPACE
from kuro_wasm.host.canonical_abi import (
    MAX_FLAT_PARAMS,
    MAX_FLAT_RESULTS,
    CanonicalTrap,
    flatten_func,
    lift_values,
    lower_values,
)
from kuro_wasm.host.component_lowered import LOWERS, HostFunction, Lowered, Unchecked, callback, register
from kuro_wasm.host.engine import address, call_raw, call_unchecked, context_address, foreign, func_signature
from kuro_wasm.model.component_binary import (
    AliasCore,
    CanonOptions,
    InlineInstance,
    Instantiate,
    Lower,
    Plan,
)
from kuro_wasm.model.wit import WitFunc

__all__ = [
    "HostFunction",
    "LinkProgram",
    "PlainInstance",
    "PlainLink",
    "StaleProgram",
    "compile_modules",
    "instantiate_plan",
    "link_program",
]

_VALTYPES: Final[dict[str, Callable[[], wasmtime.ValType]]] = {
    "i32": wasmtime.ValType.i32,
    "i64": wasmtime.ValType.i64,
    "f32": wasmtime.ValType.f32,
    "f64": wasmtime.ValType.f64,
}
_EMPTY: Final = memoryview(b"")
_P = ctypes.c_void_p
_Finalizer = ctypes.CFUNCTYPE(None, _P)
_NULL_FINALIZER: Final = _Finalizer()
_memory_data = foreign("wasmtime_memory_data", _P, _P, _P, keep_gil=True)
_memory_data_size = foreign("wasmtime_memory_data_size", ctypes.c_size_t, _P, _P, keep_gil=True)
_func_new_unchecked = foreign(
    "wasmtime_func_new_unchecked", None, _P, _P, Unchecked, _P, _Finalizer, _P, keep_gil=True
)  # makes a func in the store: runs no wasm
_export_get = foreign(
    "wasmtime_instance_export_get", ctypes.c_bool, _P, _P, ctypes.c_char_p, ctypes.c_size_t, _P, keep_gil=True
)
_instance_new = foreign("wasmtime_instance_new", _P, _P, _P, _P, ctypes.c_size_t, _P, _P)  # may run a start function

#: A ``wasmtime_extern_t``: a kind byte, then the item (``of``) at offset 8.
_EXTERN: Final = ctypes.sizeof(ffi.wasmtime_extern_t)
_OF: Final = int(ffi.wasmtime_extern_t.of.offset)
_INSTANCE: Final = ctypes.sizeof(ffi.wasmtime_instance_t)
_KINDS: Final[dict[str, int]] = {
    "func": int(ffi.WASMTIME_EXTERN_FUNC.value),
    "global": int(ffi.WASMTIME_EXTERN_GLOBAL.value),
    "table": int(ffi.WASMTIME_EXTERN_TABLE.value),
    "memory": int(ffi.WASMTIME_EXTERN_MEMORY.value),
}
_FUNC: Final = _KINDS["func"]


def compile_modules(engine: wasmtime.Engine, plan: Plan) -> tuple[wasmtime.Module, ...]:
    """The plan's core modules compiled for ``engine``."""
    return tuple(wasmtime.Module(engine, m) for m in plan.modules)


class _Guest:
    """The memory and ``realloc`` named by one ``canon`` option set (:class:`canonical_abi.GuestMemory`), by the
    addresses of their ``wasmtime_memory_t`` and ``wasmtime_func_t`` (0: none); ``typed``: the realloc's core type
    is known to be ``_REALLOC → i32`` (:meth:`PlainInstance._func`)."""

    __slots__ = ("cctx", "memory_ref", "realloc_func", "typed")

    def __init__(self, cctx: int, memory_ref: int, realloc_func: int, typed: bool = False) -> None:
        self.cctx = cctx
        self.memory_ref = memory_ref
        self.realloc_func = realloc_func
        self.typed = typed

    def view(self) -> memoryview:
        """The memory now: its base and size asked of wasmtime each time (two C calls; ``realloc`` and the guest
        may have grown — and moved — it since)."""
        if not self.memory_ref:
            return _EMPTY
        base = _memory_data(self.cctx, self.memory_ref) or 0
        n = _memory_data_size(self.cctx, self.memory_ref)
        return ADDRESS_SPACE[base : base + n] if n else _EMPTY

    def realloc(self, old: int, old_size: int, align: int, new_size: int) -> int:
        if not self.realloc_func:
            raise CanonicalTrap("the component gave no realloc for a value that needs one")
        args = (old, old_size, align, new_size)
        (answer,) = _call(self.cctx, self.realloc_func, _REALLOC, args, _I32, self.typed)
        return int(answer) % 2**32


_REALLOC: Final = ("i32", "i32", "i32", "i32")
_I32: Final = ("i32",)


def _call(
    cctx: int, func: int, params: tuple[str, ...], args: Sequence[Any], results: tuple[str, ...], typed: bool
) -> tuple[Any, ...]:
    """Call the core function at address ``func`` through the raw C call (:func:`kuro_wasm.host.engine.call_raw`:
    no per-call type reflection); ``typed``: its type is known to be ``params → results``, so without wasmtime's
    check of the args either (:func:`kuro_wasm.host.engine.call_unchecked`). Raises wasmtime.Trap / WasmtimeError
    as wasmtime-py's ``Func.__call__`` would."""
    if typed:
        return call_unchecked(cctx, func, params, args, results)
    outcome = call_raw(cctx, func, params, args, results)
    if outcome.trap is not None:
        assert isinstance(outcome.trap, wasmtime.Trap)
        raise outcome.trap
    if outcome.error is not None:
        raise wasmtime.WasmtimeError(outcome.error)
    return tuple(outcome.values)


# ---- the linked plan


@dataclass(frozen=True, slots=True)
class _Export:
    """An exported function: the slots of its core func, its memory and realloc, and its post-return."""

    func: int
    memory: int | None
    realloc: int | None
    post_return: int | None


# The program's operations: (code, …) tuples, every slot as its byte offset in the run's slot array.
# (_LOWER, slot, functype address, callback, lower index): a lowered host function.
_LOWER: Final = 2
# (_NEW, first slot, import count, module address, instance offset, aliases, copies): a core instance, made after
# its imports are filled in: ``aliases`` = (slots, instance offsets, names, kinds), four tuples, each export
# ``name`` of a core instance put into a slot (an import, or an item a copy takes); ``copies`` = (slots, source
# slots), two tuples, each an item put into another slot (an inline instance's item into an import). Each
# instantiation's aliases and copies are one op's few tuples, not one tuple each: 3,885 ops of the componentize-py
# guest were as many tuples for a new process to read back (and for the collector to count) — now 46.
_NEW: Final = 3
#: The version of :meth:`LinkProgram.to_data`'s form, and the C API's layout it holds offsets and kind codes of.
_PROGRAM_FORMAT: Final = 1
_LAYOUT: Final = (_EXTERN, _INSTANCE, _OF, tuple(sorted(_KINDS.items())))


class StaleProgram(wasmtime.WasmtimeError):
    """A stored link program of another format or C API layout (never bound: the plan is linked again)."""


@dataclass(frozen=True, slots=True)
class LinkProgram:
    """A plan linked without its compiled modules: the program :class:`PlainLink` binds to them and runs.

    Its operations are :class:`PlainLink`'s, except that a ``_NEW`` holds its core module's *index* and a
    ``_LOWER`` only its lower's index: binding puts in the module's address, and the lowered function's core type
    and callback. Plain data (tuples, ints, strings, bytes), so the module cache keeps it beside the component's
    shape (:meth:`to_data`) and a new process plans nothing.
    """

    ops: tuple[tuple[Any, ...], ...]
    #: each lowered function: its import name, its core params and results, the slots of its memory and realloc
    lowers: tuple[tuple[str, tuple[str, ...], tuple[str, ...], int | None, int | None], ...]
    #: each exported function: name, the slots of its core func, memory, realloc and post-return
    exports: tuple[tuple[str, int, int | None, int | None, int | None], ...]
    #: an alias nothing instantiates with: (slot, core instance, name, kind), looked up when first used
    lazy: tuple[tuple[int, int, bytes, int], ...]
    slots: int
    instances: int
    modules: int

    def to_data(self) -> tuple[Any, ...]:
        """A marshal-able form (:meth:`from_data` reads it back): the format and layout, then the fields."""
        return (
            _PROGRAM_FORMAT,
            _LAYOUT,
            self.ops,
            self.lowers,
            self.exports,
            self.lazy,
            self.slots,
            self.instances,
            self.modules,
        )

    @classmethod
    def from_data(cls, data: Any) -> LinkProgram:
        """The program :meth:`to_data` wrote. Raises StaleProgram: another format or C API layout, or not one."""
        try:
            form, layout, ops, lowers, exports, lazy, slots, instances, modules = data
        except (TypeError, ValueError) as exc:
            raise StaleProgram(f"not a stored link program: {exc}") from exc
        if form != _PROGRAM_FORMAT or layout != _LAYOUT:
            raise StaleProgram(f"a link program of format {form!r} for another C API layout")
        return cls(ops, lowers, exports, lazy, slots, instances, modules)


def link_program(plan: Plan, types: Mapping[str, WitFunc]) -> LinkProgram:
    """Link ``plan`` (with its core modules' imports) as a program, each lowered import typed by ``types``
    (``instance#func`` → its WIT type). The host's own functions for those imports must have the same types
    (the kind checks it before linking).

    Raises wasmtime.WasmtimeError: the plan wires an import or option to nothing (the engine validated the
    component, so only a plan misread); KeyError: an import ``types`` lacks.
    """
    if len(plan.module_imports) != plan.module_count:  # a plan without them (model.wasm_shape.with_module_imports)
        raise wasmtime.WasmtimeError(f"the plan has the imports of {len(plan.module_imports)} core modules")
    ops: list[tuple[Any, ...]] = []
    aliases: tuple[list[int], list[int], list[bytes], list[int]] = ([], [], [], [])  # (the instantiation's own)
    lowers: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
    options: list[CanonOptions] = []
    slots = 0
    space: dict[str, list[int]] = {"func": [], "table": [], "memory": [], "global": []}
    instances: list[int | dict[str, int]] = []  # a core instance: made (its number), or inline (name → slot)
    made = 0
    lazy: dict[int, tuple[int, bytes, int]] = {}  # an alias not yet needed: slot → (instance, name, kind)
    names: dict[str, bytes] = {}  # each name encoded once (and stored once: marshal refers to a repeated object)

    def encoded(name: str) -> bytes:
        raw = names.get(name)
        if raw is None:
            raw = names[name] = name.encode("utf-8")
        return raw

    def alias(slot: int, instance: int, name: bytes, kind: int) -> None:
        for column, value in zip(aliases, (slot * _EXTERN, instance * _INSTANCE, name, kind), strict=True):
            column.append(value)  # type: ignore[attr-defined]

    def need(slot: int) -> int:
        got = lazy.pop(slot, None)
        if got is not None:
            alias(slot, *got)
        return slot

    for step in plan.steps:
        if isinstance(step, Instantiate):
            if not 0 <= step.module < plan.module_count:
                raise wasmtime.WasmtimeError(f"the plan instantiates core module {step.module}, which it lacks")
            args = dict(step.args)
            first = slots
            imports = plan.module_imports[step.module]
            slots += len(imports)
            aliases = ([], [], [], [])
            copies: tuple[list[int], list[int]] = ([], [])
            for j, (imp_module, name, kind) in enumerate(imports):
                source = instances[args[imp_module]] if imp_module in args else None
                if source is None:
                    raise wasmtime.WasmtimeError(f"core module {step.module} imports {imp_module!r}: not given")
                if isinstance(source, dict):
                    if name not in source:
                        raise wasmtime.WasmtimeError(f"core module {step.module} imports {imp_module}.{name}")
                    copies[0].append((first + j) * _EXTERN)
                    copies[1].append(need(source[name]) * _EXTERN)
                else:
                    alias(first + j, source, encoded(name), _KINDS.get(kind, -1))
            grouped = (tuple(aliases[0]), tuple(aliases[1]), tuple(aliases[2]), tuple(aliases[3]))
            new = (_NEW, first * _EXTERN, len(imports), step.module, made * _INSTANCE, grouped)
            ops.append((*new, (tuple(copies[0]), tuple(copies[1]))))
            instances.append(made)
            made += 1
        elif isinstance(step, InlineInstance):
            instances.append({name: _index(space, item.sort, item.index) for name, item in step.exports})
        elif isinstance(step, AliasCore):
            source = instances[step.instance]
            if isinstance(source, dict):  # an item of an inline instance: that item
                if step.name not in source:
                    raise wasmtime.WasmtimeError(f"core instance {step.instance} has no export {step.name!r}")
                space[step.sort].append(source[step.name])
            else:
                lazy[slots] = (source, encoded(step.name), _KINDS[step.sort])
                space[step.sort].append(slots)
                slots += 1
        elif isinstance(step, Lower):
            params, results = flatten_func(types[step.import_name], lift=False)
            ops.append((_LOWER, slots * _EXTERN, len(lowers)))
            lowers.append((step.import_name, params, results))
            options.append(step.options)
            space["func"].append(slots)
            slots += 1
    if len(lowers) >= LOWERS:
        raise wasmtime.WasmtimeError(f"{len(lowers)} lowered functions: more than this host links")
    # options are resolved against the whole plan (a lower may name a memory of an instance made after it)
    return LinkProgram(
        tuple(ops),
        tuple(
            (name, params, results, _option(space, "memory", opts.memory), _option(space, "func", opts.realloc))
            for (name, params, results), opts in zip(lowers, options, strict=True)
        ),
        tuple(
            (
                name,
                _index(space, "func", lift.core_func),
                _option(space, "memory", lift.options.memory),
                _option(space, "func", lift.options.realloc),
                _option(space, "func", lift.options.post_return),
            )
            for name, lift in plan.exports
        ),
        tuple((slot, *got) for slot, got in lazy.items()),
        slots,
        made,
        plan.module_count,
    )


class PlainLink:
    """A plan linked once (per compiled component and engine): its program, ready to instantiate in any store.

    The program is the plan's stored one (:attr:`~kuro_wasm.model.component_binary.Plan.program`, kept in the
    module cache beside the shape) or, for a plan without one, made from its steps (:func:`link_program`); it is
    bound here to the compiled ``modules`` and the ``host`` functions.

    Raises wasmtime.WasmtimeError: the plan wires an import or option to nothing (the engine validated the
    component, so only a plan misread), or a lowered import's core type is not the host function's;
    StaleProgram: a stored program of another format; KeyError: an import ``host`` lacks (the kind checked the
    imports before).
    """

    def __init__(self, plan: Plan, modules: Sequence[wasmtime.Module], host: Mapping[str, HostFunction]) -> None:
        if plan.program is not None:
            program = LinkProgram.from_data(plan.program)
        else:
            program = link_program(plan, {name: func for name, (func, _handler) in host.items()})
        if program.modules != len(modules):
            raise wasmtime.WasmtimeError(f"the plan has {program.modules} core modules, not {len(modules)}")
        self._modules = tuple(modules)  # kept: the program holds their addresses
        self._types: list[wasmtime.FuncType] = []  # kept likewise
        ops: list[tuple[Any, ...]] = []
        for op in program.ops:
            if op[0] == _NEW:
                ops.append((_NEW, op[1], op[2], address(self._modules[op[3]].ptr()), *op[4:]))
                continue
            name, params, results = program.lowers[op[2]][:3]
            if _flat(host[name][0]) != (params, results):
                raise wasmtime.WasmtimeError(f"{name} is lowered as {params} -> {results}, not as the host's type")
            ty = wasmtime.FuncType([_VALTYPES[p]() for p in params], [_VALTYPES[r]() for r in results])
            self._types.append(ty)
            ops.append((_LOWER, op[1], ctypes.cast(ty.ptr(), _P).value, callback(params, results), op[2]))
        lowers: list[Lowered] = []
        for name, _params, _results, memory, realloc in program.lowers:
            lowered = Lowered(name, host[name])
            lowered.memory, lowered.realloc = memory, realloc
            lowers.append(lowered)
        self._exports = {
            name: _Export(func, memory, realloc, after) for name, func, memory, realloc, after in program.exports
        }
        self._ops = tuple(ops)
        self._lowers = tuple(lowers)
        self._lazy = {slot: (instance, name, kind) for slot, instance, name, kind in program.lazy}
        self._slots = program.slots
        self._instances = program.instances
        self._typed: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # see PlainInstance._func

    def has(self, name: str) -> bool:
        return name in self._exports

    def instantiate(self, store: wasmtime.Store, context: Any = None) -> PlainInstance:
        """Instantiate the plan in ``store``; each host function is called with ``context`` and its args.

        Raises wasmtime.Trap / WasmtimeError: a core start function trapped, or a core instantiation failed.
        """
        instance = PlainInstance(self, store, context)
        cctx = instance.cctx
        base, ibase = instance.slots, instance.instances
        slots = instance.slot_array
        env = instance.key * LOWERS
        trap = ctypes.c_void_p()
        trap_at = ctypes.addressof(trap)
        memmove = ctypes.memmove
        for op in self._ops:
            if op[0] == _LOWER:
                slots[op[1]] = _FUNC
                _func_new_unchecked(cctx, op[2], op[3], env + op[4], _NULL_FINALIZER, base + op[1] + _OF)
            else:
                for at, source, name, kind in zip(*op[5], strict=True):
                    if not _export_get(cctx, ibase + source, name, len(name), base + at) or slots[at] != kind:
                        raise wasmtime.WasmtimeError(f"a core instance has no such export: {name.decode()!r}")
                for at, source in zip(*op[6], strict=True):
                    memmove(base + at, base + source, _EXTERN)
                error = _instance_new(cctx, op[3], base + op[1], op[2], ibase + op[4], trap_at)
                if error:
                    raise wasmtime.WasmtimeError._from_ptr(ctypes.cast(error, ctypes.POINTER(ffi.wasmtime_error_t)))
                if trap.value:
                    raise wasmtime.Trap._from_ptr(ctypes.cast(trap.value, ctypes.POINTER(ffi.wasm_trap_t)))
                instance.made += 1
        return instance


@functools.lru_cache(maxsize=256)
def _flat(func: WitFunc) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The core type a host function of type ``func`` is lowered to (asked once per type)."""
    return flatten_func(func, lift=False)


def _index(space: dict[str, list[int]], sort: str, index: int) -> int:
    items = space.get(sort)
    if items is None or index >= len(items):
        raise wasmtime.WasmtimeError(f"the plan names core {sort} {index}, which it does not define")
    return items[index]


def _option(space: dict[str, list[int]], sort: str, index: int | None) -> int | None:
    return None if index is None else _index(space, sort, index)


# ---- an instance


class PlainInstance:
    """A plain component instantiated in one store: its exported functions, callable with lowered values."""

    __slots__ = (
        "__weakref__",
        "cctx",
        "context",
        "guests",
        "instance_array",
        "instances",
        "key",
        "link",
        "made",
        "ready",
        "slot_array",
        "slots",
        "store",
    )

    def __init__(self, link: PlainLink, store: wasmtime.Store, context: Any) -> None:
        self.link = link
        self.store = store
        self.context = context
        self.cctx = context_address(store)
        self.slot_array = (ctypes.c_ubyte * max(1, link._slots * _EXTERN))()
        self.slots = ctypes.addressof(self.slot_array)
        self.instance_array = (ctypes.c_ubyte * max(1, link._instances * _INSTANCE))()
        self.instances = ctypes.addressof(self.instance_array)
        self.made = 0  # core instances made so far
        self.ready: set[int] = set()  # lazy aliases resolved
        self.guests: list[_Guest | None] = [None] * len(link._lowers)
        self.key = register(self)

    def has(self, name: str) -> bool:
        return self.link.has(name)

    def _item(self, slot: int) -> int:
        """The address of the item in ``slot`` (a ``wasmtime_func_t`` or ``wasmtime_memory_t``), looking up an
        alias nothing instantiated with when first asked."""
        at = slot * _EXTERN
        lazy = self.link._lazy.get(slot)
        if lazy is not None and slot not in self.ready:
            instance, name, kind = lazy
            if instance >= self.made:
                raise CanonicalTrap(f"core instance {instance}'s {name.decode()!r} is used before it exists")
            if not _export_get(self.cctx, self.instances + instance * _INSTANCE, name, len(name), self.slots + at):
                raise wasmtime.WasmtimeError(f"core instance {instance} has no export {name.decode()!r}")
            if self.slot_array[at] != kind:
                raise wasmtime.WasmtimeError(f"core instance {instance}'s export {name.decode()!r} is of another kind")
            self.ready.add(slot)
        return self.slots + at + _OF

    def _func(self, slot: int, params: tuple[str, ...], results: tuple[str, ...]) -> tuple[int, bool]:
        """The address of the function in ``slot`` (:meth:`_item`), and whether its core type is ``params →
        results``: asked of wasmtime once per link and slot (a slot holds the same export of the same core module,
        or the same lowered function, in every store the link instantiates), so that later calls skip wasmtime's
        check of their args (:func:`_call`). A function of another type is called checked: wasmtime refuses it."""
        func = self._item(slot)
        typed = self.link._typed
        signature = (params, results)
        if typed.get(slot) == signature:
            return func, True
        if func_signature(self.cctx, func) == signature:
            typed[slot] = signature
            return func, True
        return func, False

    def _guest(self, memory: int | None, realloc: int | None) -> _Guest:
        if realloc is None:
            return _Guest(self.cctx, 0 if memory is None else self._item(memory), 0)
        func, typed = self._func(realloc, _REALLOC, _I32)
        return _Guest(self.cctx, 0 if memory is None else self._item(memory), func, typed)

    def name_of(self, index: int) -> str:
        """The import name of lowered host function ``index``."""
        lowers = self.link._lowers
        return lowers[index].name if 0 <= index < len(lowers) else f"lowered function {index}"

    def lowered(self, index: int, core: tuple[Any, ...]) -> Any:
        """Call lowered host function ``index`` with its core args; its core result (None without one)."""
        lowered = self.link._lowers[index]
        guest = self.guests[index]
        if guest is None:  # memory and realloc looked up when first called (they may be made after the lower)
            guest = self.guests[index] = self._guest(lowered.memory, lowered.realloc)
        return lowered.call(guest, self.context, core)

    def call(self, name: str, func: WitFunc, args: Sequence[Any], bound: int | None = None) -> Any:
        """Call export ``name`` of type ``func`` with lowered ``args``; its lowered result (None without one).

        Raises CanonicalTrap: an ABI rule broken while lifting or lowering; TooLarge: the result is past
        ``bound`` (:func:`kuro_wasm.model.wit.value_bytes`; it was not built, and post-return was not called);
        wasmtime.Trap / WasmtimeError: the guest trapped.
        """
        export = self.link._exports[name]
        guest = self._guest(export.memory, export.realloc)
        params, results = flatten_func(func, lift=True)
        flat = lower_values(guest, args, [t for _, t in func.params], MAX_FLAT_PARAMS)
        entry, typed = self._func(export.func, params, results)
        core = _call(self.cctx, entry, params, flat, results, typed)
        value = None if func.result is None else lift_values(guest, core, [func.result], MAX_FLAT_RESULTS, bound)[0]
        if export.post_return is not None:
            after, typed = self._func(export.post_return, results, ())
            _call(self.cctx, after, results, core, (), typed)
        return value


def instantiate_plan(
    store: wasmtime.Store,
    plan: Plan,
    modules: Sequence[wasmtime.Module],
    host: Mapping[str, HostFunction],
    context: Any = None,
) -> PlainInstance:
    """Link ``plan`` (its ``modules`` compiled) and instantiate it in ``store`` (:class:`PlainLink`)."""
    return PlainLink(plan, modules, host).instantiate(store, context)
