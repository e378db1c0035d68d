"""Guest kind ``kuro-component``: components of the ``kuro:host@1.0.0`` world — typed calls, the same gate.

## The one decision
A component gets exactly what a kuro ABI v1 module gets, in the component
model's types: the imports of ``wit/host.wit`` (output, stdin, kuro.fs) and
nothing else, each checked against the session's grant at every call,
answering ``result<_, error-code>`` where ABI v1 answers a negative ``i32``
(the same :class:`~kuro_wasm.model.abi.ErrorCode` table, by name), recording
refusals in ``kuro/denials`` and reads in ``kuro/reads`` through the same
:class:`~kuro_wasm.host.context.RunContext` and :mod:`~kuro_wasm.host.fsgate`.
WASI 0.2 imports get the virtual WASI of :mod:`kuro_wasm.host.wasi_p2`; a
component importing anything else is not claimed — the ``load-error`` names
every such import.

The world's functions are :mod:`kuro_wasm.host.kuro_world`'s; this module
links them (and :mod:`kuro_wasm.host.wasi_p2`'s) and calls the entry. Host
functions are raw C callbacks (``wasmtime_component_func_callback_t``),
for the reasons :mod:`kuro_wasm.host.calls` gives for core modules: no
process-global exception slot, no per-call type reflection. A callback finds
its run by the store context it is called with; once the run has a stop
reason every call traps before doing anything. Values cross in bulk
(:mod:`kuro_wasm.host.component_values`).

The entry is any exported function (``run`` or ``interface#func``); the spec's
args are converted by its WIT type (:func:`kuro_wasm.model.wit.lower`) before
anything runs — a function whose only parameter is ``list<string>`` (the
world's ``run``) takes the spec's args as that list. The exit code is
``run``'s ``u32``; for any other export it is 0, or 1 when its result is a
``result`` whose case is ``err`` (or what ``wasi:cli/exit`` said); the typed
result goes to ``kuro/result``. A component that imports ``wasi:cli/environment``
takes the spec's ``kuro/env`` and ``kuro/argv0`` (:attr:`Entry.takes`): its
environment is the env, its arguments ``argv0`` (by default the guest's CID) and
the spec's args when every one is a string (as a WASI command's argv); one that
does not import it refuses them.

Nothing larger than the run's ``max_value_bytes`` crosses
(:meth:`~kuro_wasm.model.limits.Limits.value_bound`; wasmtime's C API costs the
host ~80 bytes per ``list<u8>`` byte): spec args past it are a ``load-error``
(:attr:`Entry.arg_bytes`), and so are an env and argv past it; the world's
functions answer ``err(too-large)`` (:mod:`kuro_wasm.host.kuro_world`); a result
past it is counted as it is read (:class:`~kuro_wasm.host.component_values.Budget`),
never built, and ends the run as a trap saying so.

Two paths, one kind: a *plain* component of the world (its shape read from its
bytes, :mod:`kuro_wasm.model.component_binary`, and no WASI import) runs as its
core modules, with the host's own canonical ABI (:mod:`kuro_wasm.host.component_core`:
a ``list<u8>`` is one ``realloc`` and one copy); every other component runs
through wasmtime's component C API. :attr:`ComponentKind.plain` (True) is the
switch the differential tests turn off to run a plain component the engine's way.

## Effects
wasmtime's component C API: one linker per engine, or per component for one
importing WASI (instantiated per run — the C API has no component
``InstancePre``), calls and value vectors; blocks in ``stdin.read`` as ABI
v1's ``read`` does.

## Not done here
No resources of the kuro world, no async component functions.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import wasmtime
from wasmtime import _ffi as ffi

from kuro_wasm.host import wasi_p2
from kuro_wasm.host.calls import run_of
from kuro_wasm.host.canonical_abi import CanonicalTrap, TooLarge
from kuro_wasm.host.component_core import HostFunction, PlainInstance, PlainLink, StaleProgram
from kuro_wasm.host.component_values import Budget, ValueTooLarge, delete, fits, read, write
from kuro_wasm.host.context import RunContext, Stopped
from kuro_wasm.host.engine import CallOutcome, TrapInfo
from kuro_wasm.host.kind import Entry, GuestParts
from kuro_wasm.host.kuro_world import (
    CAPABILITIES,
    HOST_FUNCTIONS,
    SIGNATURES,
    WORLD_FUNCTIONS,
    WORLD_PACKAGE,
    Handler,
    WorldHandler,
    error_name,
)
from kuro_wasm.model import wit
from kuro_wasm.model.component_binary import NotPlain, Plan, read_plan
from kuro_wasm.model.wasm_shape import FuncSig, ShapeError, WasmShape, with_module_imports
from kuro_wasm.model.wit import WitType

if TYPE_CHECKING:  # wasmtime.component (~5 ms) loads with the first component linked, not with the kind table
    import wasmtime.component as wc

__all__ = ["CAPABILITIES", "HOST_FUNCTIONS", "KIND", "WORLD_PACKAGE", "ComponentKind", "error_name", "trap_code_of"]

_LIST_STRING: Final = WitType("list", (WitType("string"),))
_RUN_RESULT: Final = WitType("u32")
_ENVIRONMENT: Final = "wasi:cli/environment"
_ENV: Final = WitType("list", (WitType("tuple", (WitType("string"), WitType("string"))),))
#: The optional spec keys a component reads when it imports wasi:cli/environment (its env and argv[0]).
_CLI_KEYS: Final = frozenset({"kuro/env", "kuro/argv0"})


# ---- the trampoline


def _error_ptr(message: str) -> int:
    err = ffi.wasmtime_error_new(message.encode("utf-8", "replace"))
    return int(ctypes.cast(err, ctypes.c_void_p).value or 0)


_Signature = tuple[tuple[WitType, ...], WitType | None]


def _trampoline(name: str, handler: Handler, signature: _Signature) -> Any:
    params, result = signature
    n_results = 0 if result is None else 1

    @ffi.wasmtime_component_func_callback_t  # type: ignore[untyped-decorator]
    def trampoline(_env: Any, cctx: Any, _ty: Any, args: Any, n: int, results: Any, nr: int) -> int:
        run: RunContext | None = None
        try:
            run = run_of(cctx)
            if run is None:
                return _error_ptr(f"kuro: {name} called outside a run")
            if run.should_stop() is not None:  # stopped, or past the deadline: no further effect
                return _error_ptr(f"kuro: stopped ({run.stop_reason})")
            # linked untyped: the guest chose the import's type, so nothing is read or written unless it is ours
            # (compared whole when the guest was linked, :func:`_mistyped`; checked again here, where it matters)
            if n != len(params) or nr != n_results or not all(fits(t, args[i]) for i, t in enumerate(params)):
                wasi_p2.fault(run, f"kuro: {name} is imported with another type than the host's")
                return _error_ptr(run.kind_state["fault"])
            if handler(run, cctx, args, results) is None:
                fault = run.kind_state.get("fault")
                if run.stop_reason is None and fault is not None:
                    return _error_ptr(fault)
                if run.stop_reason is None:  # wasi:cli/exit: the guest ends (the kind reads its exit code)
                    return _error_ptr(f"kuro: {name} ended the guest")
                return _error_ptr(f"kuro: stopped ({run.stop_reason})")
            return 0
        except Stopped as stop:  # the deadline or a kill, found between two blocks of a long host call
            return _error_ptr(f"kuro: stopped ({stop.reason})")
        except BaseException as exc:
            if run is not None:
                run.stop("host-error", f"{name}: {type(exc).__name__}: {exc}")
            return _error_ptr(f"kuro: host error in {name}")

    return trampoline


_NULL_FINALIZER: Final = ctypes.CFUNCTYPE(None, ctypes.c_void_p)()
# Every thunk handed to wasmtime stays alive for the process (a linker may outlive any caller's reference).
_THUNKS: dict[str, Any] = {}
_THUNKS_LOCK = threading.RLock()  # (every lock a run takes is re-entrant: a signal handler may run another run)


def _thunk(key: str, handler: Handler, signature: _Signature) -> Any:
    with _THUNKS_LOCK:
        thunk = _THUNKS.get(key)
        if thunk is None:
            thunk = _THUNKS[key] = _trampoline(key, handler, signature)
        return thunk


def _check(err: Any) -> None:
    if err:
        raise wasmtime.WasmtimeError._from_ptr(err)


@ffi.wasmtime_component_resource_destructor_t  # type: ignore[untyped-decorator]
def _drop_resource(_env: Any, cctx: Any, rep: int) -> int:
    run = run_of(cctx)
    if run is not None:
        wasi_p2.dropped(run, int(rep))
    return 0


def _signatures(wasi: frozenset[str]) -> dict[str, _Signature]:
    """``instance#func`` → its host signature: the kuro world's, and the virtual WASI's under the names in ``wasi``."""
    signatures = dict(SIGNATURES)
    for instance in wasi:
        iface = instance.partition("@")[0]
        signatures.update({f"{instance}#{f}": sig for f, sig in wasi_p2.SIGNATURES.get(iface, {}).items()})
    return signatures


def _mistyped(engine: wasmtime.Engine, compiled: Any, wasi: frozenset[str]) -> str | None:
    """Which host functions the component imports with another type than the host's (None: none).

    The C API links a host function untyped, so the guest's type for it is compared here, once, whole — its
    parameters and its result — before anything runs: a host function must not act (write a file) and only
    then find it cannot answer in the type the guest declared.
    """
    from kuro_wasm.host.component_types import imported_funcs

    instances = frozenset(HOST_FUNCTIONS) | wasi
    try:
        imported = imported_funcs(engine, compiled, instances)
    except ValueError as exc:
        return str(exc)
    return _mistyped_funcs(imported, wasi)


def _mistyped_funcs(imported: dict[str, wit.WitFunc], wasi: frozenset[str]) -> str | None:
    """:func:`_mistyped` over the imported functions ``imported`` (``instance#func`` → the guest's type)."""
    signatures = _signatures(wasi)
    wrong = [
        f"{name} as {func.text()}"
        for name, func in sorted(imported.items())
        if name in signatures and signatures[name] != (tuple(t for _, t in func.params), func.result)
    ]
    return "imported with another type than the host's: " + "; ".join(wrong) if wrong else None


def _define(linker: wc.Linker, wasi: frozenset[str] = frozenset()) -> None:
    """Define the world's host functions in ``linker``, and the virtual WASI 0.2 instances named in ``wasi``.

    WASI instances are defined under the exact names (versions) the component imports.
    """
    instances: dict[str, dict[str, Handler]] = dict(HOST_FUNCTIONS)
    signatures = _signatures(wasi)
    resources: dict[str, list[tuple[str, int]]] = {}
    for instance in sorted(wasi):
        iface = instance.partition("@")[0]
        instances[instance] = dict(wasi_p2.FUNCTIONS.get(iface, {}))
        resources[instance] = [(n, tid) for n, (owner, tid) in wasi_p2.RESOURCES.items() if owner == iface]
    root = ffi.wasmtime_component_linker_root(linker.ptr())
    try:
        for instance, funcs in instances.items():
            raw = instance.encode("utf-8")
            inst = ctypes.POINTER(ffi.wasmtime_component_linker_instance_t)()
            _check(ffi.wasmtime_component_linker_instance_add_instance(root, raw, len(raw), ctypes.byref(inst)))
            try:
                for rname, type_id in resources.get(instance, []):
                    rawr = rname.encode("utf-8")
                    rtype = ffi.wasmtime_component_resource_type_new_host(type_id)
                    try:
                        _check(
                            ffi.wasmtime_component_linker_instance_add_resource(
                                inst, rawr, len(rawr), rtype, _drop_resource, None, _NULL_FINALIZER
                            )
                        )
                    finally:
                        ffi.wasmtime_component_resource_type_delete(rtype)
                for fname, handler in funcs.items():
                    rawf = fname.encode("utf-8")
                    thunk = _thunk(f"{instance}#{fname}", handler, signatures[f"{instance}#{fname}"])
                    _check(
                        ffi.wasmtime_component_linker_instance_add_func(
                            inst, rawf, len(rawf), thunk, None, _NULL_FINALIZER
                        )
                    )
            finally:
                ffi.wasmtime_component_linker_instance_delete(inst)
    finally:
        ffi.wasmtime_component_linker_instance_delete(root)


# ---- errors from a component call: traps are reported as errors, known by their text

_TRAP_TEXT: Final[tuple[tuple[str, wasmtime.TrapCode], ...]] = (
    ("call stack exhausted", wasmtime.TrapCode.STACK_OVERFLOW),
    ("out of bounds memory access", wasmtime.TrapCode.MEMORY_OUT_OF_BOUNDS),
    ("undefined element", wasmtime.TrapCode.TABLE_OUT_OF_BOUNDS),
    ("uninitialized element", wasmtime.TrapCode.INDIRECT_CALL_TO_NULL),
    ("indirect call type mismatch", wasmtime.TrapCode.BAD_SIGNATURE),
    ("integer overflow", wasmtime.TrapCode.INTEGER_OVERFLOW),
    ("integer divide by zero", wasmtime.TrapCode.INTEGER_DIVISION_BY_ZERO),
    ("invalid conversion to integer", wasmtime.TrapCode.BAD_CONVERSION_TO_INTEGER),
    ("`unreachable` instruction executed", wasmtime.TrapCode.UNREACHABLE),
    ("all fuel consumed", wasmtime.TrapCode.OUT_OF_FUEL),
    ("wasm trap: interrupt", wasmtime.TrapCode.INTERRUPT),
    ("cannot enter component instance", wasmtime.TrapCode.CANNOT_ENTER_COMPONENT),
)


def trap_code_of(text: str) -> wasmtime.TrapCode | None:
    """The trap code named by a wasmtime error text, or None."""
    return next((code for phrase, code in _TRAP_TEXT if phrase in text), None)


def _failed(err: Any) -> CallOutcome:
    return _failed_text(str(wasmtime.WasmtimeError._from_ptr(err)))


def _failed_text(text: str) -> CallOutcome:
    code = trap_code_of(text)
    if code is not None or "wasm trap" in text or "wasm backtrace" in text:
        return CallOutcome(trap=TrapInfo(code, text))
    return CallOutcome(error=text)


def _ended(err: Any, run: RunContext) -> CallOutcome:
    """What a failed instantiation or call (``err``, consumed) means: the guest's exit code when it called
    ``wasi:cli/exit``, its trap when it broke a call's rule (:func:`~kuro_wasm.host.wasi_p2.fault`), else the
    engine's error — unless the run was stopped, which the run's stop reason says."""
    exited, fault = run.kind_state.get("exit-code"), run.kind_state.get("fault")
    if fault is not None and run.stop_reason is None:  # the guest broke a call's rule (wasi_p2.fault)
        ffi.wasmtime_error_delete(err)
        return CallOutcome(trap=TrapInfo(None, str(fault)))
    if exited is not None and run.stop_reason is None:  # wasi:cli/exit: the guest chose its code
        ffi.wasmtime_error_delete(err)
        return CallOutcome(values=(exited,))
    return _failed(err)


# ---- the kind


class ComponentKind:
    """Components whose every import is in the ``kuro:host@1.0.0`` world (``wit/host.wit``)."""

    name = "kuro-component"
    #: The kuro world's instances, and the virtual WASI's at every 0.2.x version (0.2.0 … 0.2.31).
    import_modules = frozenset(HOST_FUNCTIONS) | frozenset(
        f"{iface}@0.2.{patch}" for iface in wasi_p2.INTERFACES for patch in range(32)
    )
    components = True

    def __init__(self) -> None:
        #: Run plain components of the kuro world through the host's own canonical ABI (False: every component
        #: through the engine's component path — the differential tests' switch).
        self.plain = True
        self._linkers: dict[int, wc.Linker] = {}
        self._lock = threading.RLock()

    def linker(self, engine: wasmtime.Engine) -> wc.Linker:
        """The shared component linker of ``engine`` holding the world's host functions (one per engine)."""
        with self._lock:
            linker = self._linkers.get(id(engine))
            if linker is None:
                import wasmtime.component as wc

                linker = wc.Linker(engine)
                _define(linker)
                self._linkers[id(engine)] = linker
            return linker

    def claim(self, shape: WasmShape) -> str | None:
        if not shape.component:
            return "the guest is a core module, not a component"
        for imp in shape.imports:
            if wasi_p2.provides(imp.module):
                continue  # the virtual WASI: implemented functions, the rest linked as traps
            funcs = HOST_FUNCTIONS.get(imp.module)
            if funcs is None:
                return f"imports {imp.module}: outside the {WORLD_PACKAGE} world"
            if imp.kind in ("func", "resource") and imp.name not in funcs:  # the world defines no resource
                return f"imports {imp.module}#{imp.name}: not in the {WORLD_PACKAGE} world"
        return None

    def links_from_parts(self, shape: WasmShape) -> bool:
        """True for a component the host runs through its own canonical ABI (:func:`_is_plain`): linked from its
        shape (its imported functions' types included) and its core modules, the compiled component untouched."""
        return self.plain and _is_plain(shape)

    def link(self, engine: wasmtime.Engine, compiled: Any, parts: GuestParts | None = None) -> Any:
        """The shared linker, or for a component importing WASI its own (WASI + the rest of it as traps); and for
        a plain component of the kuro world (:func:`_plain_parts`) its core modules, compiled and cached.

        Raises wasmtime.WasmtimeError: the component imports a host function with another type than the host's
        (naming each such function).
        """
        if parts is not None and self.plain and _is_plain(parts.shape):
            # typed from the shape: the compiled component (the loader may not have loaded it) is not touched
            mistyped = _mistyped_funcs({f.name: f for f in parts.shape.imported}, frozenset())
            if mistyped is not None:
                raise wasmtime.WasmtimeError(mistyped)
            plan, modules = _plain_parts(parts)
            try:
                link = PlainLink(plan, modules, _plain_host_functions())
            except StaleProgram:
                plan = _plan_again(parts)
                link = PlainLink(plan, modules, _plain_host_functions())
            return _Plain(plan, link, lambda: (self.linker(engine), compiled, False))
        wasi = frozenset(name for name in compiled.type.imports(engine) if wasi_p2.provides(name))
        mistyped = _mistyped(engine, compiled, wasi)
        if mistyped is not None:
            raise wasmtime.WasmtimeError(mistyped)
        if not wasi:
            return (self.linker(engine), compiled, False)
        import wasmtime.component as wc

        linker = wc.Linker(engine)
        _define(linker, wasi)
        _check(ffi.wasmtime_component_linker_define_unknown_imports_as_traps(linker.ptr(), compiled.ptr()))
        return (linker, compiled, any(name.partition("@")[0] == _ENVIRONMENT for name in wasi))

    def instantiate(self, store: wasmtime.Store, linked: Any) -> tuple[Any, CallOutcome | None]:
        if isinstance(linked, _Plain):
            if self.plain:
                return _instantiate_plain(store, linked)
            linked = linked.engine_path()
        linker, component, environment = linked
        run = run_of(store._context())
        if run is not None and environment:  # the virtual wasi:cli/environment, before any of the guest's code runs
            env, argv = run.kind_state["wasi-cli"] = _cli(run.command)
            size = wit.value_bytes(_ENV, env) + wit.value_bytes(_LIST_STRING, argv)
            if size > run.max_value_bytes:
                why = f"more than max_value_bytes ({run.max_value_bytes}) lets one call carry"
                return None, CallOutcome(error=f"the spec's env and argv are {size} bytes, {why}")
        instance = ffi.wasmtime_component_instance_t()
        if run is not None:
            run.kind_state.pop("exit-code", None)
            run.kind_state.pop("fault", None)
        err = ffi.wasmtime_component_linker_instantiate(
            linker.ptr(), store._context(), component.ptr(), ctypes.byref(instance)
        )
        if err:  # a core start function may call the host (wasi:cli/exit, a call's rule broken) as an export may
            return None, _failed(err) if run is None else _ended(err, run)
        return instance, None

    def entry(self, shape: WasmShape, export: str, args: Sequence[object]) -> Entry | str:
        func = shape.typed_export(export)
        if func is None:
            known = ", ".join(f.name for f in shape.typed) or "none"
            return f"guest has no function export {export!r} (exports: {known})"
        unpassable = _unpassable(func.result)
        if unpassable is not None:
            return f"export {export!r} returns a {unpassable}, which a receipt cannot hold"
        given = list(args)
        if len(func.params) == 1 and func.params[0][1] == _LIST_STRING:
            given = [given]
        lowered = wit.lower(func, given)
        if isinstance(lowered, str):
            return f"export {export!r}: {lowered}"
        takes = _CLI_KEYS if any(i.module.partition("@")[0] == _ENVIRONMENT for i in shape.imports) else frozenset()
        sizes = tuple(
            (f"parameter {name} ({t.text()})", wit.value_bytes(t, v))
            for (name, t), v in zip(func.params, lowered, strict=True)
        )
        return Entry(export, FuncSig((), ()), lowered, typed=func, takes=takes, arg_bytes=sizes)

    def args_from_words(self, shape: WasmShape, export: str, words: Sequence[str]) -> list[object] | str:
        """By the export's WIT parameter types (:func:`kuro_wasm.model.wit.from_words`)."""
        func = shape.typed_export(export)
        if func is None:
            return list(words)  # no such export: the run's load-error will say so
        return wit.from_words(func, list(words))

    def call(self, store: wasmtime.Store, instance: Any, entry: Entry, run: RunContext) -> CallOutcome:
        if isinstance(instance, PlainInstance):
            return _call_plain(instance, entry, run)
        func: wit.WitFunc = entry.typed
        ctx = store._context()
        raw = _lookup(ctx, instance, entry.export)
        if raw is None:  # pragma: no cover - the shape named it
            return CallOutcome(error=f"export {entry.export!r} not found in the instance")
        params: Any = (ffi.wasmtime_component_val_t * max(1, len(func.params)))()
        written = 0
        result = ffi.wasmtime_component_val_t()
        try:
            for i, ((_name, t), arg) in enumerate(zip(func.params, entry.args, strict=True)):
                write(t, arg, ctypes.pointer(params[i]))
                written += 1
            has_result = func.result is not None
            run.kind_state.pop("exit-code", None)
            run.kind_state.pop("fault", None)
            err = ffi.wasmtime_component_func_call(
                ctypes.byref(raw),
                ctx,
                params,
                len(func.params),
                ctypes.byref(result) if has_result else None,
                int(has_result),
            )
            if err:
                return _ended(err, run)
            try:
                value: Any = None if func.result is None else read(func.result, result, Budget(run.max_value_bytes))
            except ValueTooLarge:
                too_large = f"export {entry.export!r} returned more than max_value_bytes ({run.max_value_bytes})"
                return CallOutcome(trap=TrapInfo(None, f"kuro: {too_large} lets one call carry"))
            finally:
                if has_result:
                    delete(ctypes.byref(result))
            err = ffi.wasmtime_component_func_post_return(ctypes.byref(raw), ctx)
            if err:
                return _failed(err)
        finally:
            for i in range(written):
                delete(ctypes.byref(params[i]))
        if func.result is None:
            return CallOutcome(values=(0,))
        return _outcome(entry, func, value)


# ---- the plain path: the component's core modules, the canonical ABI done here


@dataclass(frozen=True, slots=True)
class _Plain:
    """A plain component linked: its plan, linked once with its core modules compiled, and the engine's linkage
    (the switch)."""

    plan: Plan
    link: PlainLink
    #: the engine's linkage, made when first asked (the shared linker imports and defines the component API)
    engine_path: Callable[[], Any]


def _is_plain(shape: WasmShape) -> bool:
    """True for a component the host runs itself: one with a plan (:mod:`kuro_wasm.model.component_binary`: the
    shape ``wasm-tools component new`` gives, without resources, async, UTF-16 strings or other nested
    components) whose every import is an instance of the kuro world — no WASI 0.2, whose resources the plan has
    no place for."""
    plan = shape.plan
    return plan is not None and all(name in WORLD_FUNCTIONS for name in plan.imports)


def _plain_parts(parts: GuestParts) -> tuple[Plan, tuple[wasmtime.Module, ...]]:
    """The plan and compiled core modules of a component :func:`_is_plain` accepts."""
    plan = parts.shape.plan
    assert plan is not None
    whole: list[Plan] = []

    def module_bytes(index: int) -> Any:
        def piece(data: bytes) -> bytes:
            if not whole:
                whole.append(read_plan(data))
            return whole[0].modules[index]

        return piece

    modules = tuple(parts.core_module(f"core-module-{i}", module_bytes(i)) for i in range(plan.module_count))
    return plan, modules


def _plan_again(parts: GuestParts) -> Plan:
    """The plan of a plain component whose cached shape holds a link program of another format
    (:class:`~kuro_wasm.host.component_core.StaleProgram`): read again from its verified bytes, to be linked here.

    Raises wasmtime.WasmtimeError: the bytes cannot be had here, or no longer read as a plan (a load-error).
    """
    if parts.data is None:
        raise wasmtime.WasmtimeError("its cached link program is of another format, and its bytes are not at hand")
    try:
        return dataclasses.replace(with_module_imports(read_plan(parts.data())), modules=())
    except (NotPlain, ShapeError) as exc:
        raise wasmtime.WasmtimeError(f"its plan, read again from its bytes, is not plain: {exc}") from exc


def _instantiate_plain(store: wasmtime.Store, linked: _Plain) -> tuple[Any, CallOutcome | None]:
    try:
        return linked.link.instantiate(store, run_of(store._context())), None
    except wasmtime.Trap as trap:
        return None, CallOutcome(trap=trap)
    except wasmtime.WasmtimeError as exc:
        return None, CallOutcome(error=str(exc))


@functools.cache
def _plain_host_functions() -> dict[str, HostFunction]:
    """The kuro world's functions for the plain path (``instance#func`` → its type and handler), made once."""
    host: dict[str, HostFunction] = {}
    for name, (params, result) in SIGNATURES.items():
        instance, _, func = name.partition("#")
        typed = wit.WitFunc(func, tuple((f"p{i}", t) for i, t in enumerate(params)), result)
        host[name] = (typed, _plain_host(name, WORLD_FUNCTIONS[instance][func]))
    return host


def _plain_host(name: str, handler: WorldHandler) -> Callable[[RunContext | None, Any], Any]:
    """A kuro world function for the plain path: the same checks as the engine path's trampoline (its run is
    the context its instance was made with: the run registered for the store)."""

    def call(run: RunContext | None, args: Any) -> Any:
        if run is None:
            raise wasmtime.Trap(f"kuro: {name} called outside a run")
        try:
            if run.should_stop() is not None:  # stopped, or past the deadline: no further effect
                raise wasmtime.Trap(f"kuro: stopped ({run.stop_reason})")
            answer = handler(run, args)
        except wasmtime.Trap:
            raise
        except CanonicalTrap:
            raise
        except Stopped as stop:  # the deadline or a kill, found between two blocks of a long host call
            raise wasmtime.Trap(f"kuro: stopped ({stop.reason})") from None
        except BaseException as exc:
            run.stop("host-error", f"{name}: {type(exc).__name__}: {exc}")
            raise wasmtime.Trap(f"kuro: host error in {name}") from None
        if answer is None:
            raise wasmtime.Trap(f"kuro: stopped ({run.stop_reason})")
        return answer

    return call


def _call_plain(instance: PlainInstance, entry: Entry, run: RunContext) -> CallOutcome:
    func: wit.WitFunc = entry.typed
    too_large = f"export {entry.export!r} returned more than max_value_bytes ({run.max_value_bytes})"
    try:
        value = instance.call(entry.export, func, entry.args, run.max_value_bytes)
    except TooLarge:
        return CallOutcome(trap=TrapInfo(None, f"kuro: {too_large} lets one call carry"))
    except CanonicalTrap as exc:  # lifting or lowering broke an ABI rule: the engine's path reports it as an error
        return CallOutcome(error=f"kuro: export {entry.export!r}: {exc}")
    except wasmtime.Trap as trap:
        return CallOutcome(trap=trap)
    except wasmtime.WasmtimeError as exc:
        return _failed_text(str(exc))
    if func.result is None:
        return CallOutcome(values=(0,))
    if wit.value_bytes(func.result, value) > run.max_value_bytes:  # a flat result (a scalar)
        return CallOutcome(trap=TrapInfo(None, f"kuro: {too_large} lets one call carry"))
    return _outcome(entry, func, value)


def _outcome(entry: Entry, func: wit.WitFunc, value: Any) -> CallOutcome:
    """How a call that returned ``value`` ends: ``run``'s u32 is the exit code, else 0 or 1 and the result."""
    assert func.result is not None
    if func.result == _RUN_RESULT and entry.export == "run":
        return CallOutcome(values=(int(value),))
    code = 1 if func.result.kind == "result" and value[0] == "err" else 0
    return CallOutcome(values=(code,), result=(wit.plain(func.result, value),))


def _cli(spec: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """The virtual ``wasi:cli/environment`` of a run: the spec's env sorted by name (as WASI preview 1's), and
    the arguments ``argv0`` (the spec's ``kuro/argv0``, else the guest's CID) then the spec's args when every
    one is a string (a WASI command's argv)."""
    env = sorted(spec.get("kuro/env", {}).items(), key=lambda kv: kv[0].encode("utf-8", "surrogatepass"))
    argv = [spec.get("kuro/argv0", spec.get("kuro/guest", ""))]
    args = spec.get("kuro/args", [])
    if all(isinstance(a, str) for a in args):
        argv.extend(args)
    return env, argv


def _unpassable(t: WitType | None) -> str | None:
    if t is None:
        return None
    if t.kind in ("own", "borrow", "future", "stream", "error-context"):
        return t.text()
    return next((u for u in (_unpassable(i) for i in t.items) if u is not None), None)


def _lookup(ctx: Any, instance: Any, export: str) -> Any:
    """The raw ``wasmtime_component_func_t`` exported as ``export`` (``name`` or ``interface#name``), or None."""
    parent = None
    indexes = []
    try:
        for part in export.split("#", 1) if "#" in export else [export]:
            raw = part.encode("utf-8")
            index = ffi.wasmtime_component_instance_get_export_index(ctypes.byref(instance), ctx, parent, raw, len(raw))
            if not index:
                return None
            indexes.append(index)
            parent = index
        func = ffi.wasmtime_component_func_t()
        if not ffi.wasmtime_component_instance_get_func(ctypes.byref(instance), ctx, parent, ctypes.byref(func)):
            return None
        return func
    finally:
        for index in indexes:
            ffi.wasmtime_component_export_index_delete(index)


KIND: Final = ComponentKind()
