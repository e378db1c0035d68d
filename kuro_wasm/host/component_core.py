"""A plain component run as its core modules: instantiated with the core API, lifted and lowered by the host.

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

## Effects
wasmtime core instantiation and calls in the caller's store; host functions
are wasmtime-py ``Func`` callbacks.

## Not done here
Which components take this path (the kind decides, from the plan and the
imports); what the host functions do (the caller's ``host`` mapping).
"""

from __future__ import annotations

import ctypes
import struct
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
    EagerArgs,
    FlatArgs,
    flat_iter,
    flatten,
    flatten_func,
    lift_values,
    lower_values,
    store_result,
)
from kuro_wasm.host.engine import call_export, context_address, foreign
from kuro_wasm.model.component_binary import (
    AliasCore,
    CanonOptions,
    InlineInstance,
    Instantiate,
    Lift,
    Lower,
    Plan,
)
from kuro_wasm.model.wit import WitFunc

__all__ = ["HostFunction", "PlainInstance", "compile_modules", "instantiate_plan"]

#: A host function for the plain path: its WIT type, and (its args, lifted when asked: :class:`FlatArgs` or
#: :class:`EagerArgs`) → its lowered result; raises CanonicalTrap or wasmtime.Trap to trap the guest.
HostFunction = tuple[WitFunc, Callable[[Any], Any]]

_VALTYPES: Final[dict[str, Callable[[], wasmtime.ValType]]] = {
    "i32": wasmtime.ValType.i32,
    "i64": wasmtime.ValType.i64,
    "f32": wasmtime.ValType.f32,
    "f64": wasmtime.ValType.f64,
}
_EMPTY: Final = memoryview(b"")
#: How each core value sits in a 16-byte ``wasmtime_val_raw_t`` (little-endian, at offset 0).
_RAW: Final[dict[str, str]] = {"i32": "i12x", "i64": "q8x", "f32": "f12x", "f64": "d8x"}
_P = ctypes.c_void_p
_Unchecked = ctypes.CFUNCTYPE(_P, _P, _P, _P, ctypes.c_size_t)
_Finalizer = ctypes.CFUNCTYPE(None, _P)
_NULL_FINALIZER: Final = _Finalizer()
_memory_data = foreign("wasmtime_memory_data", _P, _P, _P, keep_gil=True)
_memory_data_size = foreign("wasmtime_memory_data_size", ctypes.c_size_t, _P, _P, keep_gil=True)
_func_new_unchecked = foreign("wasmtime_func_new_unchecked", None, _P, _P, _Unchecked, _P, _Finalizer, _P)


def _trap(message: str) -> int:
    raw = message.encode("utf-8", "replace")
    return int(ctypes.cast(ffi.wasmtime_trap_new(raw, len(raw)), ctypes.c_void_p).value or 0)


def compile_modules(engine: wasmtime.Engine, plan: Plan) -> tuple[wasmtime.Module, ...]:
    """The plan's core modules compiled for ``engine``."""
    return tuple(wasmtime.Module(engine, m) for m in plan.modules)


class _Guest:
    """The memory and ``realloc`` named by one ``canon`` option set (:class:`canonical_abi.GuestMemory`)."""

    __slots__ = ("cctx", "memory", "memory_ref", "realloc_func", "store")

    def __init__(self, store: wasmtime.Store, memory: wasmtime.Memory | None, realloc: wasmtime.Func | None) -> None:
        self.store = store
        self.memory = memory
        self.realloc_func = realloc
        self.cctx = context_address(store)
        self.memory_ref = 0 if memory is None else ctypes.addressof(memory._memory)

    def view(self) -> memoryview:
        """The memory now: its base and size asked of wasmtime each time (two C calls; ``realloc`` and the guest
        may have grown — and moved — it since)."""
        if not self.memory_ref:
            return _EMPTY
        base = _memory_data(self.cctx, self.memory_ref) or 0
        n = _memory_data_size(self.cctx, self.memory_ref)
        return ADDRESS_SPACE[base : base + n] if n else _EMPTY

    def realloc(self, old: int, old_size: int, align: int, new_size: int) -> int:
        if self.realloc_func is None:
            raise CanonicalTrap("the component gave no realloc for a value that needs one")
        (answer,) = _call(self.store, self.realloc_func, _REALLOC, (old, old_size, align, new_size), ("i32",))
        return int(answer) % 2**32


_REALLOC: Final = ("i32", "i32", "i32", "i32")


def _call(
    store: wasmtime.Store, func: wasmtime.Func, params: Sequence[str], args: Sequence[Any], results: Sequence[str]
) -> tuple[Any, ...]:
    """Call a core function through the raw C call (:func:`kuro_wasm.host.engine.call_export`: no per-call type
    reflection). Raises wasmtime.Trap / WasmtimeError as wasmtime-py's ``Func.__call__`` would."""
    outcome = call_export(store, func._func, params, args, results)
    if outcome.trap is not None:
        assert isinstance(outcome.trap, wasmtime.Trap)
        raise outcome.trap
    if outcome.error is not None:
        raise wasmtime.WasmtimeError(outcome.error)
    return tuple(outcome.values)


@dataclass(frozen=True, slots=True)
class _Export:
    func: wasmtime.Func
    guest: _Guest
    post_return: wasmtime.Func | None


class PlainInstance:
    """A plain component instantiated in one store: its exported functions, callable with lowered values."""

    def __init__(self, store: wasmtime.Store, exports: dict[str, _Export], keep: list[Any]) -> None:
        self.store = store
        self._exports = exports
        self._keep = keep

    def has(self, name: str) -> bool:
        return name in self._exports

    def call(self, name: str, func: WitFunc, args: Sequence[Any], bound: int | None = None) -> Any:
        """Call export ``name`` of type ``func`` with lowered ``args``; its lowered result (None without one).

        Raises CanonicalTrap: an ABI rule broken while lifting or lowering; TooLarge: the result is past
        ``bound`` (:func:`kuro_wasm.model.wit.value_bytes`; it was not built, and post-return was not called);
        wasmtime.Trap / WasmtimeError: the guest trapped.
        """
        export = self._exports[name]
        params, results = flatten_func(func, lift=True)
        flat = lower_values(export.guest, args, [t for _, t in func.params], MAX_FLAT_PARAMS)
        core = _call(self.store, export.func, params, flat, results)
        value = (
            None if func.result is None else lift_values(export.guest, core, [func.result], MAX_FLAT_RESULTS, bound)[0]
        )
        if export.post_return is not None:
            _call(self.store, export.post_return, results, core, ())
        return value


def instantiate_plan(
    store: wasmtime.Store,
    plan: Plan,
    modules: Sequence[wasmtime.Module],
    host: Mapping[str, HostFunction],
) -> PlainInstance:
    """Instantiate ``plan`` (its ``modules`` compiled) in ``store``, its imports answered by ``host``.

    Raises wasmtime.Trap / WasmtimeError: a core start function trapped, or a core instantiation failed;
    KeyError: an import ``host`` lacks (the kind checked the imports before).
    """
    space: dict[str, list[Any]] = {"func": [], "table": [], "memory": [], "global": []}
    instances: list[Mapping[str, Any]] = []
    keep: list[Any] = []  # the host functions' C callbacks, alive as long as the instance
    for step in plan.steps:
        if isinstance(step, Instantiate):
            module = modules[step.module]
            args = dict(step.args)
            imports = [instances[args[imp.module]][imp.name or ""] for imp in module.imports]
            instances.append(wasmtime.Instance(store, module, imports).exports(store))
        elif isinstance(step, InlineInstance):
            instances.append({name: space[item.sort][item.index] for name, item in step.exports})
        elif isinstance(step, AliasCore):
            space[step.sort].append(instances[step.instance][step.name])
        elif isinstance(step, Lower):
            space["func"].append(_lowered(store, step, host[step.import_name], space, keep))
    exports = {name: _export(store, lift, space) for name, lift in plan.exports}
    return PlainInstance(store, exports, keep)


def _guest(store: wasmtime.Store, options: CanonOptions, space: dict[str, list[Any]]) -> _Guest:
    memory = None if options.memory is None else space["memory"][options.memory]
    realloc = None if options.realloc is None else space["func"][options.realloc]
    return _Guest(store, memory, realloc)


def _export(store: wasmtime.Store, lift: Lift, space: dict[str, list[Any]]) -> _Export:
    post = None if lift.options.post_return is None else space["func"][lift.options.post_return]
    return _Export(space["func"][lift.core_func], _guest(store, lift.options, space), post)


def _lowered(
    store: wasmtime.Store, step: Lower, function: HostFunction, space: dict[str, list[Any]], keep: list[Any]
) -> wasmtime.Func:
    """The core function a ``canon lower`` of a host function makes (memory and realloc looked up when called:
    ``canon lower`` may name a memory of an instance made after it, as the fixup module's table does)."""
    func, handler = function
    params, results = flatten_func(func, lift=False)
    types = [t for _, t in func.params]
    direct = sum(len(flatten(t)) for t in types) <= MAX_FLAT_PARAMS
    ty = wasmtime.FuncType([_VALTYPES[p]() for p in params], [_VALTYPES[r]() for r in results])
    guest_box: list[_Guest] = []

    def call(*core: Any) -> Any:
        if not guest_box:
            guest_box.append(_guest(store, step.options, space))
        guest = guest_box[0]
        try:
            retptr = func.result is not None and not results  # the result goes to the return area (last param)
            flat = core[:-1] if retptr else core
            args: Any = FlatArgs(guest, flat, types) if direct else EagerArgs(lift_values(guest, flat, types, 0), types)
            value = handler(args)
            if retptr:
                assert func.result is not None
                store_result(guest, int(core[-1]), func.result, value)
                return None
            if func.result is None:
                return None
            out = lower_values(guest, [value], [func.result], MAX_FLAT_RESULTS)
            return next(iter(flat_iter(results, out)))
        except CanonicalTrap as exc:
            raise wasmtime.Trap(f"kuro: {step.import_name}: {exc}") from None

    unpack = struct.Struct("<" + "".join(_RAW[p] for p in params)).unpack_from if params else None
    pack = struct.Struct("<" + _RAW[results[0]]).pack_into if results else None

    @_Unchecked  # type: ignore[untyped-decorator]
    def raw(_env: Any, _caller: Any, vals: int, _n: int) -> int | None:
        try:
            answer = call(*(unpack(ADDRESS_SPACE, vals) if unpack is not None else ()))
            if pack is not None:
                pack(ADDRESS_SPACE, vals, answer)
            return None
        except wasmtime.Trap as trap:
            return _trap(trap.message)
        except BaseException as exc:  # never an exception through C: the guest traps, saying what
            return _trap(f"kuro: {step.import_name}: {type(exc).__name__}: {exc}")

    keep.append(raw)
    func_t = ffi.wasmtime_func_t()
    ty_address = ctypes.cast(ty.ptr(), _P).value
    _func_new_unchecked(context_address(store), ty_address, raw, None, _NULL_FINALIZER, ctypes.addressof(func_t))
    return wasmtime.Func._from_raw(func_t)
