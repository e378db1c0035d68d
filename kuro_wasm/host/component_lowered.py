"""A plain component's imported functions, lowered: one C callback per core signature, for the process.

## The one decision
A ``canon lower`` of a host function is made in each run's store as a raw
C callback of wasmtime's *unchecked* kind (as :mod:`kuro_wasm.host.calls`
makes a core module's imports), but the callback is not a closure made per
run or per function: there is one per core signature, made once and kept for
the process (a store made with it may outlive anything that made it), and it
finds what to call through the ``env`` the store hands it — a live instance's
key (:func:`register`: a weak registry, so a callback reaching an instance
that is gone traps instead of touching it) times :data:`LOWERS`, plus the
lower's index in its link. Making a run's lowered functions is then one
``func_new_unchecked`` each. The callback lifts the arguments (a
:class:`~kuro_wasm.host.canonical_abi.FlatArgs`, each argument read only when
the host function asks), calls the host function with the instance's context,
lowers its result, and never lets an exception through C: a broken ABI rule or
a host function's trap is the guest's trap, saying which function.

## Effects
Guest memory through :class:`~kuro_wasm.host.canonical_abi.GuestMemory`; traps
made with wasmtime's C API.

## Not done here
Linking the plan, instantiating (:mod:`kuro_wasm.host.component_core`); what
the host functions do (the kind's).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import struct
import threading
import weakref
from collections.abc import Callable
from typing import Any, Final, Protocol

import wasmtime

from kuro_wasm.host.calls import ADDRESS_SPACE, RAW_LAYOUT, Unchecked, new_trap
from kuro_wasm.host.canonical_abi import (
    MAX_FLAT_PARAMS,
    MAX_FLAT_RESULTS,
    CanonicalTrap,
    EagerArgs,
    FlatArgs,
    GuestMemory,
    flat_iter,
    flatten,
    flatten_func,
    lift_values,
    lower_values,
    store_result,
)
from kuro_wasm.model.wit import WitFunc

__all__ = ["LOWERS", "HostFunction", "Lowered", "Unchecked", "callback", "register"]

#: A host function for the plain path: its WIT type, and (the run's context — what the instance was made
#: with —, its args, lifted when asked: :class:`FlatArgs` or :class:`EagerArgs`) → its lowered result; raises
#: CanonicalTrap or wasmtime.Trap to trap the guest.
HostFunction = tuple[WitFunc, Callable[[Any, Any], Any]]

#: A callback's ``env``: instance key × ``LOWERS`` + the lower's index in its link.
LOWERS: Final = 1 << 20
_P = ctypes.c_void_p


class Lowered:
    """One ``canon lower`` of a host function: its types and handler, and the slots of its memory and realloc
    (set once the whole plan is linked: a lower may name a memory of an instance made after it)."""

    __slots__ = ("direct", "handler", "memory", "name", "realloc", "result", "results", "retptr", "types")

    def __init__(self, name: str, function: HostFunction) -> None:
        func, self.handler = function
        self.name = name
        self.memory: int | None = None
        self.realloc: int | None = None
        _params, self.results = flatten_func(func, lift=False)
        self.types = tuple(t for _, t in func.params)
        self.result = func.result
        self.direct = sum(len(flatten(t)) for t in self.types) <= MAX_FLAT_PARAMS
        self.retptr = func.result is not None and not self.results  # the result goes to the return area

    def call(self, guest: GuestMemory, context: Any, core: tuple[Any, ...]) -> Any:
        """Lift ``core`` (the core args), call the handler with ``context``, lower its answer. Raises
        wasmtime.Trap (a broken ABI rule, named after this function, or the handler's)."""
        try:
            flat = core[:-1] if self.retptr else core
            args: Any = (
                FlatArgs(guest, flat, self.types)
                if self.direct
                else EagerArgs(lift_values(guest, flat, self.types, 0), self.types)
            )
            value = self.handler(context, args)
            if self.retptr:
                assert self.result is not None
                store_result(guest, int(core[-1]), self.result, value)
                return None
            if self.result is None:
                return None
            out = lower_values(guest, [value], [self.result], MAX_FLAT_RESULTS)
            return next(iter(flat_iter(self.results, out)))
        except CanonicalTrap as exc:
            raise wasmtime.Trap(f"kuro: {self.name}: {exc}") from None


class _Instance(Protocol):
    """What a callback asks of the instance its ``env`` names."""

    def lowered(self, index: int, core: tuple[Any, ...]) -> Any: ...

    def name_of(self, index: int) -> str: ...


_KEYS = itertools.count(1)
#: Live instances by key (weakly: an instance is gone once its run drops it; a callback then traps).
_LIVE: dict[int, weakref.ref[Any]] = {}


def _forget(key: int, _ref: Any) -> None:
    _LIVE.pop(key, None)


def register(instance: _Instance) -> int:
    """A new key for ``instance`` (its callbacks' ``env`` is key × :data:`LOWERS` + index), until it is gone."""
    key = next(_KEYS)
    _LIVE[key] = weakref.ref(instance, functools.partial(_forget, key))
    return key


_CALLBACKS: dict[tuple[tuple[str, ...], tuple[str, ...]], Any] = {}
_CALLBACKS_LOCK = threading.RLock()


def callback(params: tuple[str, ...], results: tuple[str, ...]) -> Any:
    """The C callback of every lowered function of core type ``params → results`` (made once, never freed)."""
    key = (params, results)
    with _CALLBACKS_LOCK:
        made = _CALLBACKS.get(key)
        if made is None:
            made = _CALLBACKS[key] = _make_callback(params, results)
        return made


def _make_callback(params: tuple[str, ...], results: tuple[str, ...]) -> Any:
    unpack = struct.Struct("<" + "".join(RAW_LAYOUT[p] for p in params)).unpack_from if params else None
    pack = struct.Struct("<" + RAW_LAYOUT[results[0]]).pack_into if results else None
    live, view = _LIVE, ADDRESS_SPACE

    @Unchecked  # type: ignore[untyped-decorator]
    def raw(env: int | None, _caller: Any, vals: int, _n: int) -> int | None:
        key, index = divmod(env or 0, LOWERS)
        ref = live.get(key)
        instance: _Instance | None = None if ref is None else ref()
        if instance is None:
            return new_trap("kuro: a component's host function called after its instance was dropped")
        try:
            answer = instance.lowered(index, unpack(view, vals) if unpack is not None else ())
            if pack is not None:
                pack(view, vals, answer)
            return None
        except wasmtime.Trap as trap:
            return new_trap(trap.message)
        except BaseException as exc:  # never an exception through C: the guest traps, saying what
            return new_trap(f"kuro: {instance.name_of(index)}: {type(exc).__name__}: {exc}")

    return raw
