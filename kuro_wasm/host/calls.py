"""Raw host functions: how a guest's call reaches Python, finds its run, and comes back — never with an exception.

## The one decision
Every host function of every guest kind is a raw C callback of wasmtime's
*unchecked* kind (``wasmtime_func_unchecked_callback_t``: arguments and result
as one array of raw 16-byte values), not wasmtime-py's public ``Func``
trampoline (which parks a raised exception in a process-global slot that
another thread can pick up, and costs ~13 µs a call before doing any work). The
callback finds its run as its thread's current run (:func:`register_run`: a
run's wasm runs on the thread that registered it), unpacks every argument with one precompiled
``struct.Struct`` (:func:`define` checks the signature once), calls a handler
``(run, caller, context, args) → int | None``, and answers with an ``i32`` (or
nothing, for a function without a result) — or, when the handler returns None
(the run must stop: killed, deadline, output cap, exit, a host bug), with a
trap whose text nobody reads: *why* is recorded in the run's context. A kind's
hottest import may instead be one raw callback doing the same steps with its
work inline (:func:`define_raw`, from the pieces exported here: ``kuro.write``),
one Python frame a call instead of two.

Why below wasmtime-py's own bindings: each of its C functions is a Python
wrapper around a ``ctypes`` function returning ``ctypes`` pointer objects; a
gated call makes four or five such calls, so the host keeps its own foreign
functions, bound to the same library, that take and return plain addresses.
And bytes move through one ``memoryview`` over the process's address space
(:data:`_MEMORY`): unpacking the arguments from it is one ``struct`` call with
no allocation (measured 0.19 µs, against 1.07 µs for ``ctypes.string_at`` plus
unpacking), and so is copying guest bytes; the ``i32`` answer is one index store
into the same bytes seen as 32-bit words (:data:`RESULTS`). The view is
only ever indexed at addresses wasmtime handed out — the callback's value array
and a guest memory's base plus an offset bounds-checked against that memory's
current size (:func:`span`) — never at an address a guest chose. Together these
took the zero-length ``kuro.write`` from ~15.7 µs to the figure in
``tools/bench.py``. A handler's :class:`Fault` (a pointer/length outside guest memory)
becomes the kind's fault code. Once a run has a stop reason — or its deadline has
passed (one ``time.monotonic()`` compare per call) — every further call traps before
doing anything, so nothing takes effect after ``kill()`` or the deadline; a long call
checks again between chunks of its work (:meth:`RunContext.check_stop`).

Guest memory is read and written through ``ctypes`` at the memory's *current*
base address, bounds-checked by :func:`kuro_wasm.model.abi.checked_range`
before a byte moves — against the size last read first (a memory only grows, so a
range within it is within the memory now), asking wasmtime again only when it does
not fit (:func:`memory_size`).

## Effects
ctypes calls into wasmtime's C API; a process-wide registry (dict under a lock)
of live runs by store address (a component's host calls look runs up there), and
each thread's current run (a context variable).
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, Final

import wasmtime
from wasmtime import _ffi as ffi

from kuro_wasm.host.context import RunContext, Stopped
from kuro_wasm.host.engine import context_address, foreign, memory_base_fixed

__all__ = [
    "ADDRESS_SPACE",
    "COPY_SMALL",
    "Fault",
    "Handler",
    "Memory",
    "RAW_LAYOUT",
    "RESULTS",
    "Unchecked",
    "current_run",
    "define",
    "define_raw",
    "exported_memory",
    "failed",
    "guest_base",
    "guest_memory",
    "guest_view",
    "in_guest",
    "load",
    "load_array",
    "memory_size",
    "new_trap",
    "outside_run",
    "pack",
    "register_run",
    "run_of",
    "span",
    "span_array",
    "stopped",
    "store_bytes",
    "unpack",
    "unregister_run",
]

_P = ctypes.c_void_p


_caller_export_get = foreign("wasmtime_caller_export_get", ctypes.c_bool, _P, ctypes.c_char_p, ctypes.c_size_t, _P)
_memory_data = foreign("wasmtime_memory_data", _P, _P, _P, keep_gil=True)
_memory_data_size = foreign("wasmtime_memory_data_size", ctypes.c_size_t, _P, _P, keep_gil=True)
_trap_new = foreign("wasmtime_trap_new", _P, ctypes.c_char_p, ctypes.c_size_t)
#: (env, caller, args and results as wasmtime_val_raw_t[n], n) → a wasm_trap_t* or NULL
Unchecked = ctypes.CFUNCTYPE(_P, _P, _P, _P, ctypes.c_size_t)
_Finalizer = ctypes.CFUNCTYPE(None, _P)
_define_unchecked = foreign(
    "wasmtime_linker_define_func_unchecked",
    _P,
    _P,
    ctypes.c_char_p,
    ctypes.c_size_t,
    ctypes.c_char_p,
    ctypes.c_size_t,
    _P,
    Unchecked,
    _P,
    _Finalizer,
)

#: Every byte of this process's address space, as one flat view (nothing is mapped or copied by creating it).
#: 2**48: the user half of a 48-bit virtual address space (x86-64, and aarch64 with 4 KiB pages).
#: Index it only at addresses wasmtime handed out, bounds-checked (:func:`guest_base`, :func:`span`).
ADDRESS_SPACE: Final = memoryview((ctypes.c_char * (1 << 48)).from_address(0)).cast("B")
_MEMORY: Final = ADDRESS_SPACE
#: ``COPY_SMALL[n](ADDRESS_SPACE, address)[0]``: the n bytes at ``address`` (n < ``len(COPY_SMALL)``), copied by
#: one ``struct`` call without building a memoryview slice first (measured ~50 ns against ~85 ns: a guest's short
#: writes are most writes). Larger copies slice :data:`ADDRESS_SPACE` (the copy itself dominates).
COPY_SMALL: Final = tuple(struct.Struct(f"{n}s").unpack_from for n in range(257))
_COPY_SMALL_N: Final = len(COPY_SMALL)

# ---- the run registry (store context address → run), and each thread's current run

_RUNS: dict[int, RunContext] = {}
_RUNS_LOCK = threading.RLock()  # (re-entrant: a signal handler on a thread inside it may make a run)


def _after_fork_in_child() -> None:
    global _RUNS_LOCK, _THUNKS_LOCK  # another thread may have held one as the process forked
    _RUNS_LOCK = threading.RLock()
    _THUNKS_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)


#: This thread's current run (None: none): a context variable, read by every host call in one C call (half the
#: cost of a ``threading.local`` attribute). A thread starts with an empty context, so with no current run; a run
#: is registered and unregistered in the context its wasm is called in (the same function, :mod:`job`).
_CURRENT: Final[ContextVar[RunContext | None]] = ContextVar("kuro_current_run", default=None)
#: The runs the current one hides (registrations nest), innermost last.
_HIDDEN: Final[ContextVar[tuple[RunContext | None, ...]]] = ContextVar("kuro_hidden_runs", default=())


def _address(ptr: Any) -> int:
    return int(ctypes.cast(ptr, ctypes.c_void_p).value or 0)


def register_run(store: wasmtime.Store, run: RunContext) -> None:
    """Make ``run`` the context of every import call made from ``store``, on this thread, until unregistered.

    A run's wasm is called on the thread that registered it, and a host function is called on the
    thread that called into wasm, so a trampoline finds its run as this thread's current run — one
    context-variable read, not a C call for the caller's store plus a dict lookup. Call it (and
    :func:`unregister_run`) in the context the wasm is called in: the current run is a context
    variable. Registrations nest (a run started on a thread that is inside another run's host call
    hides it until unregistered), and the store's context address is kept in ``run.context`` for the
    handlers' memory accesses.
    """
    key = run.context = context_address(store)
    with _RUNS_LOCK:
        _RUNS[key] = run
    _HIDDEN.set((*_HIDDEN.get(), _CURRENT.get()))
    _CURRENT.set(run)


def run_of(context: Any) -> RunContext | None:
    """The run registered for the store whose ``wasmtime_context_t*`` is ``context`` (a component host call's)."""
    return _RUNS.get(_address(context))


def unregister_run(store: wasmtime.Store, context: int = 0) -> None:
    """Forget ``store``'s run (call before the store is closed, on the thread that registered it); ``context``:
    ``store``'s context address if the caller holds it (the ``run.context`` :func:`register_run` set), else 0."""
    key = context or context_address(store)
    with _RUNS_LOCK:
        run = _RUNS.pop(key, None)
    if run is not None and _CURRENT.get() is run:
        hidden = _HIDDEN.get()
        _CURRENT.set(hidden[-1])
        _HIDDEN.set(hidden[:-1])


# ---- guest memory

#: (base address, size in bytes) of a guest memory at one moment. Under a narrowed memory profile it may move on
#: ``memory.grow`` (never while the guest is inside a host call, so one host call reads it once); under the default
#: one the engine never moves it, and the run keeps the base it first read (``RunContext.memory_base``).
Memory = tuple[int, int]
_U32: Final = 2**32
_EXTERN_MEMORY: Final = int(ffi.WASMTIME_EXTERN_MEMORY.value)


class Fault(Exception):
    """A pointer/length outside guest memory (answered with the kind's fault code, never raised to wasm)."""


def guest_memory(run: RunContext, caller: int, cctx: int) -> Memory:
    """(base address, size) of the guest's exported ``memory`` now; size 0 if it has none."""
    ref = run.memory_ref
    if ref == 0:
        if run.memory is None:
            item: Any = ffi.wasmtime_extern_t()
            if not _caller_export_get(caller, b"memory", 6, ctypes.addressof(item)) or item.kind != _EXTERN_MEMORY:
                return 0, 0
            run.memory = item.of.memory
        ref = run.memory_ref = ctypes.addressof(run.memory)
    size = run.memory_size = _memory_data_size(cctx, ref)
    base = run.memory_base or _memory_data(cctx, ref) or 0
    if memory_base_fixed():  # (asked at run time: the profile is fixed once an engine exists)
        run.memory_base = base
    return base, size


def exported_memory(store: wasmtime.Store, memory: Any) -> Memory:
    """(base address, size) now of the raw ``wasmtime_memory_t`` of ``store``, between calls; (0, 0) for None."""
    if memory is None:
        return 0, 0
    cctx = store._context()
    mem = ctypes.byref(memory)
    return _address(ffi.wasmtime_memory_data(cctx, mem)), int(ffi.wasmtime_memory_data_size(cctx, mem))


def guest_view(run: RunContext, caller: int, cctx: int) -> memoryview:
    """The guest's exported ``memory`` now, as one byte view (empty if it has none).

    The view reaches exactly the guest's memory, so an index or struct access outside it raises
    (``IndexError``/``struct.error``) instead of touching anything else; a slice past its end is
    short, so a caller still checks a range's end before copying. Valid for one host call (the
    memory may move on ``memory.grow``, never during a call).
    """
    base, size = guest_memory(run, caller, cctx)
    return _MEMORY[base : base + size] if size else _NO_MEMORY


_NO_MEMORY: Final = memoryview(b"")


def span(mem: Memory, ptr: int, length: int) -> tuple[int, int]:
    """(address, length) of guest range ``[ptr, ptr+length)`` (both read as u32). Raises Fault.

    The rule of :func:`kuro_wasm.model.abi.checked_range`, inlined: this is every import's hot path.
    """
    start = ptr % _U32
    n = length % _U32
    if start + n > mem[1] or (mem[0] == 0 and n):
        raise Fault
    return mem[0] + start, n


def span_array(mem: Memory, ptr: int, count: int, size: int) -> tuple[int, int]:
    """(address, byte length) of an array of ``count`` (read as u32) items of ``size`` bytes at ``ptr``. Raises Fault.

    The byte length is ``count * size`` as it is, never reduced mod 2**32 as :func:`span` reduces a
    length: an iovec count of ``2**29 + 1`` is 4 GiB + 8 bytes, outside any guest memory, not 8 bytes.
    """
    start = ptr % _U32
    n = (count % _U32) * size
    if start + n > mem[1] or (mem[0] == 0 and n):
        raise Fault
    return mem[0] + start, n


def load_array(mem: Memory, ptr: int, count: int, size: int) -> bytes:
    """A copy of the array of ``count`` items of ``size`` bytes at ``ptr`` (:func:`span_array`). Raises Fault."""
    address, n = span_array(mem, ptr, count, size)
    return _MEMORY[address : address + n].tobytes()


def load(mem: Memory, ptr: int, length: int) -> bytes:
    """A copy of guest bytes ``[ptr, ptr+length)``. Raises Fault."""
    address, n = span(mem, ptr, length)
    if n == 0:
        return b""
    return COPY_SMALL[n](_MEMORY, address)[0] if n < _COPY_SMALL_N else _MEMORY[address : address + n].tobytes()


def in_guest(run: RunContext, caller: int, cctx: int, ptr: int, length: int) -> tuple[int, int]:
    """(offset, length) of guest range ``[ptr, ptr+length)`` (both read as u32) if it is inside the guest's
    memory now, checked without asking wasmtime when it fits the size last read. Raises Fault."""
    start = ptr % _U32
    n = length % _U32
    if start + n > run.memory_size and start + n > _size_now(run, caller, cctx):
        raise Fault
    return start, n


def guest_base(run: RunContext, caller: int, cctx: int, end: int) -> int:
    """The base address now of the guest's memory, once offsets below ``end`` (> 0) are known to be inside it:
    one C call when they fit the size last read. Raises Fault (no memory, or smaller than ``end``)."""
    if (end > run.memory_size or run.memory_ref == 0) and (end > _size_now(run, caller, cctx) or run.memory_ref == 0):
        raise Fault
    base: int = run.memory_base or _memory_data(cctx, run.memory_ref)
    if memory_base_fixed():
        run.memory_base = base
    return base


def _size_now(run: RunContext, caller: int, cctx: int) -> int:
    """The memory's size now, looking the memory up first if this run has not yet (0 if it has none)."""
    if run.memory_ref == 0:
        return guest_memory(run, caller, cctx)[1]
    return memory_size(run, cctx)


def memory_size(run: RunContext, cctx: int) -> int:
    """The size now of the run's memory (looked up already: ``run.memory_ref`` set), remembered in the run.

    A range that fits ``run.memory_size`` (the size when last read) fits now: a memory only grows.
    So a host call checks a range against that first, and asks wasmtime only when it does not fit.
    """
    size = run.memory_size = int(_memory_data_size(cctx, run.memory_ref))
    return size


def store_bytes(mem: Memory, ptr: int, data: bytes | bytearray | memoryview) -> None:
    """Copy ``data`` into guest memory at ``ptr``. Raises Fault (and copies nothing) if it does not fit."""
    address, n = span(mem, ptr, len(data))
    if n:
        _MEMORY[address : address + n] = data


def unpack(mem: Memory, ptr: int, layout: struct.Struct) -> tuple[Any, ...]:
    """The struct ``layout`` read from guest memory at ``ptr``, without copying the bytes first. Raises Fault."""
    address, _ = span(mem, ptr, layout.size)
    return layout.unpack_from(_MEMORY, address)


def pack(mem: Memory, ptr: int, layout: struct.Struct, *values: Any) -> None:
    """Write ``values`` as the struct ``layout`` into guest memory at ``ptr``. Raises Fault (nothing written)."""
    address, _ = span(mem, ptr, layout.size)
    layout.pack_into(_MEMORY, address, *values)


# ---- trampolines

#: (run, caller address, context address, args) → the i32 answer, or None to stop the run (its stop reason says why).
Handler = Callable[[RunContext, int, int, tuple[Any, ...]], "int | None"]

#: How each value kind sits in a 16-byte ``wasmtime_val_raw_t`` (little-endian, at offset 0).
RAW_LAYOUT: Final[dict[str, str]] = {"i32": "i12x", "i64": "q8x", "f32": "f12x", "f64": "d8x"}
_RAW_SIZE: Final = 16
_I32_OUT: Final = struct.Struct("<i")
_I32_MAX: Final = 2**31 - 1


def new_trap(message: str) -> int:
    """A new ``wasm_trap_t*`` saying ``message``, as a raw callback returns it to trap its caller."""
    raw = message.encode("utf-8", "replace")
    return int(_trap_new(raw, len(raw)) or 0)


class _LittleEndianWords:
    """:data:`RESULTS` where native words are big-endian: each store packs the value little-endian."""

    def __setitem__(self, index: int, value: int) -> None:
        _I32_OUT.pack_into(_MEMORY, index << 2, value)


#: The address space as 32-bit words, for a raw callback's i32 answer: ``RESULTS[vals >> 2] = value`` (one index
#: store, measured ~20 ns a call under ``struct.pack_into``'s). A ``wasmtime_val_raw_t`` array is 16-byte aligned
#: and always little-endian, so on a little-endian machine that word is the first value's i32.
RESULTS: Final[Any] = ADDRESS_SPACE.cast("i") if sys.byteorder == "little" else _LittleEndianWords()
#: This thread's current run, or None (one C call: a raw callback's first step).
current_run: Final = _CURRENT.get


def outside_run(name: str) -> int:
    """The trap for a host function called on a thread with no current run."""
    return new_trap(f"kuro: {name} called outside a run")


def stopped(run: RunContext) -> int:
    """The trap for a call that found its run stopped, or past its deadline (recorded now as ``timeout``)."""
    return new_trap(f"kuro: stopped ({run.should_stop()})")


def failed(run: RunContext, name: str, exc: BaseException) -> int:
    """The trap for a handler of ``name`` that raised ``exc``: :class:`Stopped` (the deadline or a kill, found
    between two blocks of a long host call) stops the run as it says; anything else is a ``host-error``."""
    if isinstance(exc, Stopped):
        return new_trap(f"kuro: stopped ({exc.reason})")
    run.stop("host-error", f"{name}: {type(exc).__name__}: {exc}")
    return new_trap(f"kuro: host error in {name}")


def _trampoline(name: str, handler: Handler, fault: int, params: Sequence[str], has_result: bool) -> Any:
    unpack = struct.Struct("<" + "".join(RAW_LAYOUT[p] for p in params)).unpack_from
    size = _RAW_SIZE * len(params)
    view, words = _MEMORY, RESULTS
    current, most, now = current_run, _I32_MAX, time.monotonic

    @Unchecked  # type: ignore[untyped-decorator]
    def trampoline(_env: Any, caller: int, vals: int, _n: int) -> int | None:
        run = current()
        if run is None:
            return outside_run(name)
        try:
            # stopped (kill, cap), or past the deadline (only the epoch tick would notice it otherwise, and a
            # guest making host calls back to back runs little wasm): no further effect, not even one
            if run.stop_reason is not None or now() >= run.deadline:
                return stopped(run)
            try:
                value = handler(run, caller, run.context, unpack(view, vals) if size else ())
            except Fault:
                value = fault
            if value is None:
                return new_trap(f"kuro: stopped ({run.stop_reason})")
            if has_result:  # a count past 2 GiB must not wrap into an error code
                words[vals >> 2] = value if value <= most else most
            return None
        except BaseException as exc:
            return failed(run, name, exc)

    return trampoline


# A NULL finalizer, not a Python one: at interpreter exit the ctypes thunk of a Python finalizer
# can be freed before the linker that would call it, and deleting the linker then crashes.
_NULL_FINALIZER: Final = _Finalizer()  # calling the type with no address: NULL

_VALTYPES: Final[dict[str, Callable[[], wasmtime.ValType]]] = {
    "i32": wasmtime.ValType.i32,
    "i64": wasmtime.ValType.i64,
    "f32": wasmtime.ValType.f32,
    "f64": wasmtime.ValType.f64,
}
# Every thunk handed to wasmtime stays alive for the process (a linker may outlive any caller's reference).
_THUNKS: dict[tuple[str, str, int], Any] = {}
_THUNKS_LOCK = threading.RLock()


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

    ``params`` are i32/i64/f32/f64; ``results`` is ``("i32",)`` or ``()``; ``fault``
    is the i32 answered when the handler raises :class:`Fault`. Raises
    wasmtime.WasmtimeError if the linker refuses the definition (a duplicate).
    """
    _check_signature(module, name, params, results)
    key = (module, name, id(handler))
    with _THUNKS_LOCK:
        thunk = _THUNKS.get(key)
        if thunk is None:
            thunk = _THUNKS[key] = _trampoline(name, handler, fault, tuple(params), bool(results))
    _define_thunk(linker, module, name, params, results, thunk)


def define_raw(
    linker: wasmtime.Linker, module: str, name: str, params: Sequence[str], results: Sequence[str], thunk: Any
) -> None:
    """Define ``module.name`` in ``linker`` as ``thunk``, an :data:`Unchecked` callback a kind built itself.

    For a kind's hottest import only (``kuro.write``): the thunk does what :func:`define`'s trampoline
    does — :func:`current_run`, :func:`stopped` on a stopped run or a passed deadline, :func:`failed` for
    whatever its work raises, the i32 answer through :data:`RESULTS` — with the handler's work written
    inline (one Python frame a call, not two). The thunk is kept alive for the process.
    """
    _check_signature(module, name, params, results)
    with _THUNKS_LOCK:
        _THUNKS.setdefault((module, name, id(thunk)), thunk)
    _define_thunk(linker, module, name, params, results, thunk)


def _check_signature(module: str, name: str, params: Sequence[str], results: Sequence[str]) -> None:
    if tuple(results) not in (("i32",), ()):
        raise ValueError(f"{module}.{name}: a host function returns one i32 or nothing")
    if any(p not in RAW_LAYOUT for p in params):
        raise ValueError(f"{module}.{name}: parameters are i32, i64, f32 or f64")


def _define_thunk(
    linker: wasmtime.Linker, module: str, name: str, params: Sequence[str], results: Sequence[str], thunk: Any
) -> None:
    ty = wasmtime.FuncType([_VALTYPES[t]() for t in params], [_VALTYPES[t]() for t in results])
    raw_module, raw_name = module.encode("utf-8"), name.encode("utf-8")
    err = _define_unchecked(
        _address(linker.ptr()), raw_module, len(raw_module), raw_name, len(raw_name), _address(ty.ptr()), thunk, None,
        _NULL_FINALIZER,
    )  # fmt: skip
    if err:
        raise wasmtime.WasmtimeError._from_ptr(ctypes.cast(err, ctypes.POINTER(ffi.wasmtime_error_t)))
