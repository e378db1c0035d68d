"""The guest-kind seam: what a kind of guest decides, binds and calls — and nothing else.

## The one decision
Everything that differs between kinds of guest (kuro ABI v1 modules, WASI
programs, components, the original kuro's browser guests) sits behind one
small protocol, :class:`GuestKind`; everything that does not — fetching and
verifying the bytes, compiling and caching, the store and its limits, the
epoch deadline, kill, the output stream, the receipt — is the run's
(:mod:`kuro_wasm.host.job`) and is the same for every kind. A kind:

1. **claims** a guest from its verified shape (:class:`~kuro_wasm.model.wasm_shape.WasmShape`:
   imports, exports, component or not), or says why not — or, with an empty
   reason, that the guest is simply not of its shape and another kind explains
   (a narrow *profile* asked before a general kind of the same import module);
2. **links** the compiled guest once (per engine) against its host functions
   (raw callbacks, :mod:`kuro_wasm.host.calls`), which reach the run through its
   :class:`~kuro_wasm.host.context.RunContext`, and **instantiates** it in each
   run's store;
3. resolves the **entry**: the export and the spec's args, checked and converted,
   or a load-error text; an entry may name guest-spec keys it cannot run
   without (:attr:`Entry.needs`) and the optional ones it uses
   (:attr:`Entry.takes`), checked before anything is instantiated — a spec
   with an optional key its entry does not use is refused, never ignored — and
   the size of each arg the engine must build as a value (:attr:`Entry.arg_bytes`),
   refused past the run's ``max_value_bytes``;
4. **calls** it and reports how the call ended (:class:`~kuro_wasm.host.engine.CallOutcome`).

A kind also says how command-line words become its entry's args
(:meth:`GuestKind.args_from_words`: ``kuro run CID EXPORT WORDS…``): numbers for
a core export (the default of :class:`CoreModuleKind`), argv strings for a WASI
command, a component export's WIT parameter types.

:class:`CoreModuleKind` does the linking and instantiating of core modules
(one shared ``wasmtime.Linker`` per engine, an ``InstancePre`` per guest); a
core-module kind only says which host functions its linker holds.

A new kind is one module under :mod:`kuro_wasm.host.kinds` plus one line in
its ``KINDS`` table; the run loop, the receipt and the limits do not change.
:func:`core_entry` is the entry rule every core-module kind so far shares
(numbers in, one ``i32`` or nothing out).

## Not done here
Which kind runs a guest is decided by :func:`kuro_wasm.host.kinds.classify`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import wasmtime

from kuro_wasm.host import engine as _engine
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.engine import CallOutcome
from kuro_wasm.model import abi
from kuro_wasm.model.wasm_shape import NUMBER_TYPES, FuncSig, WasmShape

__all__ = ["CoreModuleKind", "Entry", "GuestKind", "GuestParts", "core_entry"]


@dataclass(frozen=True, slots=True)
class GuestParts:
    """What a kind may use, beside the compiled guest, to link it: the guest's shape, and parts of its bytes
    compiled once as core modules through the run's keyed, integrity-checked module cache.

    ``core_module(name, piece)`` is the core module ``piece(guest bytes)`` compiled, cached under the guest's CID
    and ``name``; the guest's bytes are fetched (and verified) only on a cache miss. (A component whose core
    modules the host instantiates itself: :mod:`kuro_wasm.host.kinds.component`.)
    """

    shape: WasmShape
    core_module: Callable[[str, Callable[[bytes], bytes]], wasmtime.Module]
    #: the guest's bytes, fetched and verified when asked (None: not to be had) — for what the shape held in a
    #: form this host no longer reads (a component's stored link program of another format)
    data: Callable[[], bytes] | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """A resolved entry point: the export's name and signature, and the spec's args converted for it.

    ``typed`` is a kind's own description of the entry where a core signature
    cannot say it (a component export's :class:`~kuro_wasm.model.wit.WitFunc`).

    ``needs`` lists guest-spec keys this entry cannot run without, each with the
    reason (``(("kuro/fs-read-path", "…"),)``); a spec that lacks one is a
    ``load-error`` decided before the guest is instantiated. ``takes`` names the
    optional guest-spec keys the entry uses when given (a WASI command's
    ``kuro/env`` and ``kuro/argv0``); a spec holding an optional key that is in
    neither is a ``load-error`` too. The kind reads their values from the spec
    being run (:attr:`RunContext.command`).

    ``arg_bytes`` is, for each arg that crosses the guest's boundary as a value the
    engine must build (a component's), where it is and its size as
    :meth:`~kuro_wasm.model.limits.Limits.value_bound` counts it
    (``(("parameter data (list<u8>)", 1001),)``); an arg above the run's bound
    is a ``load-error`` decided before anything is instantiated. Numbers passed
    to a core module are not counted.
    """

    export: str
    sig: FuncSig
    args: tuple[Any, ...] = ()
    typed: Any = None
    needs: tuple[tuple[str, str], ...] = ()
    takes: frozenset[str] = frozenset()
    arg_bytes: tuple[tuple[str, int], ...] = ()


def core_entry(shape: WasmShape, export: str, args: Sequence[object]) -> Entry | str:
    """The entry ``export`` of a core module called with ``args``, or why not (a load-error text).

    The export must be a function whose parameters are numbers (i32, i64, f32,
    f64) that ``args`` fit (:func:`kuro_wasm.model.abi.check_args`), returning
    one ``i32`` (the exit code) or nothing.
    """
    found = shape.export(export)
    if found is None or found.kind != "func" or found.sig is None:
        return f"guest has no function export {export!r}"
    sig = found.sig
    if len(sig.results) > 1 or any(r != "i32" for r in sig.results):
        return f"export {export!r} returns ({' '.join(sig.results)}); an exit code is one i32 or nothing"
    odd = next((p for p in sig.params if p not in NUMBER_TYPES), None)
    if odd is not None:
        return f"export {export!r} takes a parameter of type {odd}; only i32, i64, f32 and f64 can be passed"
    if any(isinstance(a, str) for a in args):
        return f"export {export!r} takes numbers; string args are for WASI commands (argv)"
    reason = abi.check_args(sig.params, list(args))
    if reason is not None:
        return f"export {export!r}: {reason}"
    return Entry(export, sig, tuple(args))


class GuestKind(Protocol):
    """One kind of guest (see the module docstring for the four duties)."""

    #: The kind's name, e.g. ``"kuro-abi-v1"``.
    name: str
    #: The import modules whose functions this kind provides (a guest importing any other is not this kind's).
    import_modules: frozenset[str]
    #: True if this kind runs component-model binaries (False: core modules).
    components: bool

    def claim(self, shape: WasmShape) -> str | None:
        """None if this kind runs a guest of this shape; otherwise why not (a load-error text).

        ``""`` means "not of this kind's shape; no opinion": the load error, if no
        kind claims the guest, is another kind's reason.
        """
        ...

    def links_from_parts(self, shape: WasmShape) -> bool:
        """True if :meth:`link` needs only the guest's shape and its :class:`GuestParts` for a guest of ``shape``:
        the loader then hands it the compiled guest *deferred* (loaded from the module cache, under its rules, only
        if something touches it) — a component run as its core modules needs no compiled component."""
        ...

    def link(self, engine: wasmtime.Engine, compiled: Any, parts: GuestParts | None = None) -> Any:
        """The compiled guest pre-linked against this kind's host functions (kept per guest and engine).

        Raises wasmtime.WasmtimeError: the guest cannot be linked (the loader makes it a load-error).
        """
        ...

    def instantiate(self, store: wasmtime.Store, linked: Any) -> tuple[Any, CallOutcome | None]:
        """``(instance, None)``, or ``(None, how instantiation failed)`` (a start-function trap, a limit)."""
        ...

    def entry(self, shape: WasmShape, export: str, args: Sequence[object]) -> Entry | str:
        """The entry point ``export`` called with ``args``, or why it cannot be (a load-error text)."""
        ...

    def call(self, store: wasmtime.Store, instance: Any, entry: Entry, run: RunContext) -> CallOutcome:
        """Call ``entry`` in the instantiated ``instance`` and report how the call ended."""
        ...

    def args_from_words(self, shape: WasmShape, export: str, words: Sequence[str]) -> list[object] | str:
        """The spec's args for ``export`` from command-line words, or why they cannot be (a usage error text)."""
        ...


class CoreModuleKind:
    """Linking and instantiating for kinds of *core module*: one shared linker per engine, an InstancePre per guest.

    A subclass defines :meth:`define_functions` (its host functions), ``claim``,
    ``entry`` and ``call``.
    """

    components = False

    def links_from_parts(self, shape: WasmShape) -> bool:
        """Never: a core module is linked whole."""
        return False

    def __init__(self) -> None:
        self._linkers: dict[int, wasmtime.Linker] = {}
        self._lock = threading.RLock()  # (re-entrant: a signal handler may make a run on a thread inside it)

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

    def link(self, engine: wasmtime.Engine, compiled: Any, parts: GuestParts | None = None) -> Any:
        return self.linker(engine).instantiate_pre(compiled)

    def instantiate(self, store: wasmtime.Store, linked: Any) -> tuple[Any, CallOutcome | None]:
        return _engine.instantiate(linked, store)

    def args_from_words(self, shape: WasmShape, export: str, words: Sequence[str]) -> list[object] | str:
        """Numbers: a core export takes ints and floats (:func:`kuro_wasm.model.abi.numbers_from_words`)."""
        numbers = abi.numbers_from_words(list(words))
        return numbers if isinstance(numbers, str) else list(numbers)
