"""Raw host functions: how a guest's call reaches Python, finds its run, and comes back — never with an exception.

## The one decision
Every host function of every guest kind is a raw C callback
(``wasmtime_func_callback_t``), not wasmtime-py's public ``Func`` trampoline
(which parks a raised exception in a process-global slot that another thread
can pick up, and costs ~13 µs a call before doing any work). The callback finds
its run by the calling store's context address (:func:`register_run`), calls a
handler ``(run, caller, context, params) → int | None``, and answers with an
``i32`` (or nothing, for a function without a result) — or, when the handler
returns None (the run must stop: killed, deadline, output cap, exit, a host
bug), with a trap whose text nobody reads: *why* is recorded in the run's
context. A handler's :class:`Fault` (a pointer/length outside guest memory)
becomes the kind's fault code. Once a run has a stop reason, every further call
traps before doing anything, so nothing takes effect after ``kill()``.

Guest memory is read and written through ``ctypes`` at the memory's *current*
base address and size, bounds-checked by :func:`kuro_wasm.model.abi.checked_range`
before a byte moves.

## Effects
ctypes calls into wasmtime's C API; a process-wide registry (dict under a lock)
of live runs by store address.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

import wasmtime
from wasmtime import _ffi as ffi

from kuro_wasm.host.context import RunContext
from kuro_wasm.model import abi

__all__ = [
    "Fault",
    "Handler",
    "Memory",
    "define",
    "exported_memory",
    "guest_memory",
    "load",
    "register_run",
    "span",
    "store_bytes",
    "unregister_run",
]

_RUNS: dict[int, RunContext] = {}
_RUNS_LOCK = threading.Lock()


def _address(ptr: Any) -> int:
    return int(ctypes.cast(ptr, ctypes.c_void_p).value or 0)


def register_run(store: wasmtime.Store, run: RunContext) -> None:
    """Make ``run`` the context of every import call made from ``store``."""
    with _RUNS_LOCK:
        _RUNS[_address(store._context())] = run


def unregister_run(store: wasmtime.Store) -> None:
    """Forget ``store``'s run (call before the store is closed)."""
    with _RUNS_LOCK:
        _RUNS.pop(_address(store._context()), None)


# ---- guest memory

#: (base address, size in bytes) of a guest memory at one moment (it moves on ``memory.grow``).
Memory = tuple[int, int]


class Fault(Exception):
    """A pointer/length outside guest memory (answered with the kind's fault code, never raised to wasm)."""


def guest_memory(run: RunContext, caller: Any, cctx: Any) -> Memory:
    """(base address, size) of the guest's exported ``memory`` now; size 0 if it has none."""
    if run.memory is None:
        item: Any = ffi.wasmtime_extern_t()
        if ffi.wasmtime_caller_export_get(caller, b"memory", 6, ctypes.byref(item)) and (
            item.kind == ffi.WASMTIME_EXTERN_MEMORY.value
        ):
            run.memory = item.of.memory
        else:
            return 0, 0
    mem = ctypes.byref(run.memory)
    base = _address(ffi.wasmtime_memory_data(cctx, mem))
    return base, int(ffi.wasmtime_memory_data_size(cctx, mem))


def exported_memory(store: wasmtime.Store, memory: Any) -> Memory:
    """(base address, size) now of the raw ``wasmtime_memory_t`` of ``store``, between calls; (0, 0) for None."""
    if memory is None:
        return 0, 0
    cctx = store._context()
    mem = ctypes.byref(memory)
    return _address(ffi.wasmtime_memory_data(cctx, mem)), int(ffi.wasmtime_memory_data_size(cctx, mem))


def span(mem: Memory, ptr: int, length: int) -> tuple[int, int]:
    """(address, length) of guest range ``[ptr, ptr+length)`` (both read as u32). Raises Fault."""
    found = abi.checked_range(mem[1], ptr, length)
    if found is None or (mem[0] == 0 and found[1] > found[0]):
        raise Fault
    return mem[0] + found[0], found[1] - found[0]


def load(mem: Memory, ptr: int, length: int) -> bytes:
    """A copy of guest bytes ``[ptr, ptr+length)``. Raises Fault."""
    address, n = span(mem, ptr, length)
    return ctypes.string_at(address, n) if n else b""


def store_bytes(mem: Memory, ptr: int, data: bytes | bytearray | memoryview) -> None:
    """Copy ``data`` into guest memory at ``ptr``. Raises Fault (and copies nothing) if it does not fit."""
    address, n = span(mem, ptr, len(data))
    if n:
        ctypes.memmove(address, data if isinstance(data, bytes) else bytes(data), n)


# ---- trampolines

#: (run, caller, context, params) → the i32 answer, or None to stop the run (its stop reason says why).
Handler = Callable[[RunContext, Any, Any, Any], "int | None"]


def _trap_ptr(message: str) -> int:
    raw = message.encode("utf-8", "replace")
    return _address(ffi.wasmtime_trap_new(raw, len(raw)))


def _trampoline(name: str, handler: Handler, fault: int, has_result: bool) -> Any:
    @ffi.wasmtime_func_callback_t  # type: ignore[untyped-decorator]
    def trampoline(_env: Any, caller: Any, params: Any, _n: int, results: Any, _nr: int) -> int:
        run: RunContext | None = None
        try:
            cctx = ffi.wasmtime_caller_context(caller)
            run = _RUNS.get(_address(cctx))
            if run is None:
                return _trap_ptr(f"kuro: {name} called outside a run")
            run.calls += 1
            if run.stop_reason is not None:  # stopped (kill, cap, deadline): no further effect, not even one
                return _trap_ptr(f"kuro: stopped ({run.stop_reason})")
            try:
                value = handler(run, caller, cctx, params)
            except Fault:
                value = fault
            if value is None:
                return _trap_ptr(f"kuro: stopped ({run.stop_reason})")
            if has_result:
                results[0].kind = ffi.WASMTIME_I32.value
                results[0].of.i32 = abi.clamp_i32(value)  # a count past 2 GiB must not wrap into an error code
            return 0
        except BaseException as exc:
            if run is not None:
                run.stop("host-error", f"{name}: {type(exc).__name__}: {exc}")
            return _trap_ptr(f"kuro: host error in {name}")

    return trampoline


# A NULL finalizer, not a Python one: at interpreter exit the ctypes thunk of a Python finalizer
# can be freed before the linker that would call it, and deleting the linker then crashes.
_NULL_FINALIZER: Final = ctypes.CFUNCTYPE(None, ctypes.c_void_p)()  # calling the type with no address: NULL

_VALTYPES: Final[dict[str, Callable[[], wasmtime.ValType]]] = {
    "i32": wasmtime.ValType.i32,
    "i64": wasmtime.ValType.i64,
    "f32": wasmtime.ValType.f32,
    "f64": wasmtime.ValType.f64,
}
# Every thunk handed to wasmtime stays alive for the process (a linker may outlive any caller's reference).
_THUNKS: dict[tuple[str, str, int], Any] = {}
_THUNKS_LOCK = threading.Lock()


def define(
    linker: wasmtime.Linker,
    module: str,
    name: str,
    params: Sequence[str],
    results: Sequence[str],
    handler: Handler,
    *,
    fault: int,
) -> None:
    """Define ``module.name`` in ``linker`` as a raw host function calling ``handler``.

    ``results`` is ``("i32",)`` or ``()``; ``fault`` is the i32 answered when
    the handler raises :class:`Fault`. Raises wasmtime.WasmtimeError if the
    linker refuses the definition (a duplicate).
    """
    if tuple(results) not in (("i32",), ()):
        raise ValueError(f"{module}.{name}: a host function returns one i32 or nothing")
    key = (module, name, id(handler))
    with _THUNKS_LOCK:
        thunk = _THUNKS.get(key)
        if thunk is None:
            thunk = _THUNKS[key] = _trampoline(name, handler, fault, bool(results))
    ty = wasmtime.FuncType([_VALTYPES[t]() for t in params], [_VALTYPES[t]() for t in results])
    raw_module, raw_name = module.encode("utf-8"), name.encode("utf-8")
    err = ffi.wasmtime_linker_define_func(
        linker.ptr(), raw_module, len(raw_module), raw_name, len(raw_name), ty.ptr(), thunk, None, _NULL_FINALIZER
    )
    if err:
        raise wasmtime.WasmtimeError._from_ptr(err)
