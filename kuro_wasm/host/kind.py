"""The guest-kind seam: what a kind of guest decides, binds and calls — and nothing else.

## The one decision
Everything that differs between kinds of guest (kuro ABI v1 modules, WASI
programs, components, the original kuro's browser guests) sits behind one
small protocol, :class:`GuestKind`; everything that does not — fetching and
verifying the bytes, compiling and caching, the store and its limits, the
epoch deadline, kill, the output stream, the receipt — is the run's
(:mod:`kuro_wasm.host.job`) and is the same for every kind. A kind:

1. **claims** a guest from its verified shape (:class:`~kuro_wasm.model.wasm_shape.WasmShape`:
   imports, exports, component or not), or says why not;
2. **links** the compiled guest once (per engine) against its host functions
   (raw callbacks, :mod:`kuro_wasm.host.calls`), which reach the run through its
   :class:`~kuro_wasm.host.context.RunContext`, and **instantiates** it in each
   run's store;
3. resolves the **entry** from the guest spec: the export and the args (and the
   optional fields, ``env`` and ``argv0``), checked and converted, or a load-error
   text — a kind refuses an optional field it has no use for rather than ignore it;
4. **calls** it and reports how the call ended (:class:`~kuro_wasm.host.engine.CallOutcome`).

:class:`CoreModuleKind` does the linking and instantiating of core modules
(one shared ``wasmtime.Linker`` per engine, an ``InstancePre`` per guest); a
core-module kind only says which host functions its linker holds.

A new kind is one module under :mod:`kuro_wasm.host.kinds` plus one line in
its ``KINDS`` table; the run loop, the receipt and the limits do not change.

## Not done here
Which kind runs a guest is decided by :func:`kuro_wasm.host.kinds.classify`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import wasmtime

from kuro_wasm.host import engine as _engine
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.engine import CallOutcome
from kuro_wasm.model.wasm_shape import FuncSig, WasmShape

__all__ = ["CoreModuleKind", "Entry", "GuestKind"]


@dataclass(frozen=True, slots=True)
class Entry:
    """A resolved entry point: the export's name and signature, and the spec's args converted for it."""

    export: str
    sig: FuncSig
    args: tuple[Any, ...] = ()


class GuestKind(Protocol):
    """One kind of guest (see the module docstring for the four duties)."""

    #: The kind's name, e.g. ``"kuro-abi-v1"``.
    name: str
    #: The import modules whose functions this kind provides (a guest importing any other is not this kind's).
    import_modules: frozenset[str]
    #: True if this kind runs component-model binaries (False: core modules).
    components: bool

    def claim(self, shape: WasmShape) -> str | None:
        """None if this kind runs a guest of this shape; otherwise why not (a load-error text)."""
        ...

    def link(self, engine: wasmtime.Engine, compiled: Any) -> Any:
        """The compiled guest pre-linked against this kind's host functions (kept per guest and engine).

        Raises wasmtime.WasmtimeError: the guest cannot be linked (the loader makes it a load-error).
        """
        ...

    def instantiate(self, store: wasmtime.Store, linked: Any) -> tuple[Any, CallOutcome | None]:
        """``(instance, None)``, or ``(None, how instantiation failed)`` (a start-function trap, a limit)."""
        ...

    def entry(self, shape: WasmShape, spec: Mapping[str, Any]) -> Entry | str:
        """The entry point the guest spec asks for (:func:`kuro_wasm.model.sessions.guest`), or why it cannot be.

        ``spec`` holds ``kuro/guest``, ``kuro/export`` and ``kuro/args``, and the optional fields
        (``kuro/env``, ``kuro/argv0``) when given; the answer is an :class:`Entry` or a load-error text.
        """
        ...

    def call(self, store: wasmtime.Store, instance: Any, entry: Entry, run: RunContext) -> CallOutcome:
        """Call ``entry`` in the instantiated ``instance`` and report how the call ended."""
        ...


class CoreModuleKind:
    """Linking and instantiating for kinds of *core module*: one shared linker per engine, an InstancePre per guest.

    A subclass defines :meth:`define_functions` (its host functions), ``claim``,
    ``entry`` and ``call``.
    """

    components = False

    def __init__(self) -> None:
        self._linkers: dict[int, wasmtime.Linker] = {}
        self._lock = threading.Lock()

    def define_functions(self, linker: wasmtime.Linker) -> None:
        """Define this kind's host functions in a new ``linker``."""
        raise NotImplementedError

    def linker(self, engine: wasmtime.Engine) -> wasmtime.Linker:
        """The shared linker of ``engine`` holding this kind's host functions (created once per engine)."""
        key = id(engine)
        with self._lock:
            linker = self._linkers.get(key)
            if linker is None:
                linker = wasmtime.Linker(engine)
                self.define_functions(linker)
                self._linkers[key] = linker
            return linker

    def link(self, engine: wasmtime.Engine, compiled: Any) -> Any:
        return self.linker(engine).instantiate_pre(compiled)

    def instantiate(self, store: wasmtime.Store, linked: Any) -> tuple[Any, CallOutcome | None]:
        return _engine.instantiate(linked, store)
