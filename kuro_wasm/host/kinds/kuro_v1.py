"""The ABI v1 imports bound to wasmtime: decode arguments → kuro.fs → encode results.

## The one decision
No Python exception ever crosses the wasm boundary, and nothing about a run
lives outside that run's :class:`RunContext`. Each import is a raw C callback
(not wasmtime-py's public ``Func`` trampoline, which parks a raised exception
in a process-global slot that another thread can pick up): it finds its run by
the calling store's context address, answers with an ``i32`` — a value or an
:class:`~kuro_wasm.model.abi.ErrorCode` — or, when the run must stop (killed,
deadline, output cap, a host bug), records *why* in the context and returns a
trap. The host builds the receipt from the context, never from the trap text.

Capability checks happen here, at call time: a call outside the grant returns
``DENIED`` (-1), is recorded in ``kuro/denials`` (one counted entry per distinct
call, bounded: :meth:`RunContext.deny`), and the guest keeps running. Once a
run has a stop reason, every further import call traps before doing anything,
so nothing takes effect after ``kill()`` or the output cap.
Every pointer/length pair is bounds-checked against the memory's current size
(:func:`kuro_wasm.model.abi.checked_range`) before a byte is read or written.

## Effects
Reads and writes guest memory through ``ctypes``; blocks in ``read`` on the
run's condition variable (woken by stdin, ``close_stdin``, ``kill`` and the
deadline); calls the kuro.fs operations of the run's ``Fs`` value. One linker
per engine is shared by all runs (the imports are store-independent), which
lets the loader pre-link each module once (``InstancePre``).

## Not done here
No WASI, no clock, no randomness, no network. No partial writes: ``write``
hands the whole range to the stream as one chunk or traps.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import wasmtime
from wasmtime import _ffi as ffi

from kuro_fs.paths import MAX_PATH_BYTES
from kuro_wasm.host import fsgate as _fsgate
from kuro_wasm.model import abi
from kuro_wasm.model.abi import ErrorCode

__all__ = ["MAX_DENIAL_ENTRIES", "RunContext", "StdinPipe", "linker_for", "register_run", "unregister_run"]

#: At most this many distinct (import, capability, path) entries in ``kuro/denials`` (plus one per import).
MAX_DENIAL_ENTRIES: Final = 256

#: Emit one output chunk: (stream name, bytes) → False when the output cap is reached.
Emit = Callable[[str, bytes], bool]


class StdinPipe:
    """Bytes written by the caller, read by the guest; closing ends input (``read`` then returns 0)."""

    def __init__(self, cond: threading.Condition, data: bytes | None = None, *, closed: bool = False) -> None:
        self._cond = cond
        self._buf = bytearray(data or b"")
        self._closed = closed

    def write(self, data: bytes) -> None:
        """Append ``data``; ignored after :meth:`close` (the reader has seen end of input)."""
        with self._cond:
            if not self._closed and data:
                self._buf += data
                self._cond.notify_all()

    def close(self) -> None:
        """End of input: a blocked ``read`` wakes and returns what is left, then 0."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def take(self, cap: int) -> bytes | None:
        """Up to ``cap`` buffered bytes; ``b""`` at end of input; None if nothing yet (caller waits)."""
        if self._buf:
            out = bytes(self._buf[:cap])
            del self._buf[:cap]
            return out
        return b"" if self._closed else None


@dataclass
class RunContext:
    """Everything one run's imports may touch, and everything they report back.

    ``fs`` is the run's current kuro.fs value (replaced on every write; opened
    by ``open_fs`` on the first fs import);
    ``stop_reason`` is the first reason the run had to stop (``cancelled``,
    ``timeout``, ``output-capped``, ``host-error``) and is never overwritten.
    """

    grant: frozenset[str]
    emit: Emit
    fs: Any = None
    open_fs: Callable[[], Any] | None = None
    deadline: float = float("inf")
    cond: threading.Condition = field(default_factory=threading.Condition)
    stdin: StdinPipe | None = None
    reads: list[str] = field(default_factory=list)
    denials: list[dict[str, Any]] = field(default_factory=list)
    wrote: bool = False
    stop_reason: str | None = None
    host_error: str | None = None
    memory: Any = None
    calls: int = 0
    _denial_index: dict[tuple[str, str, str | None], int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.stdin is None:
            self.stdin = StdinPipe(self.cond, closed=True)

    def stop(self, reason: str, detail: str | None = None) -> None:
        """Record the first reason to stop (later ones are ignored) and wake a blocked ``read``."""
        with self.cond:
            if self.stop_reason is None:
                self.stop_reason = reason
                if detail is not None:
                    self.host_error = detail
            self.cond.notify_all()

    def should_stop(self) -> str | None:
        """The epoch-tick check: the stop reason, with the deadline turned into ``timeout`` when due."""
        if self.stop_reason is None and time.monotonic() >= self.deadline:
            self.stop("timeout")
        return self.stop_reason

    def deny(self, name: str, capability: str, path: str | None) -> int:
        """Record one refused call and return ``DENIED``; the record stays bounded whatever the guest does.

        Each distinct (import, capability, path) is one entry, in first-seen
        order; a repeat adds to its ``kuro/count`` (present when above 1), so
        the counts add up to the refused calls. After :data:`MAX_DENIAL_ENTRIES`
        distinct entries, a new one is folded into a path-less entry for its
        import. Without the bound, a guest looping on a refused call with a long
        path grows the host's memory and the receipt without limit (measured:
        ~85 000 entries and +360 MB in one second).
        """
        key = (name, capability, path)
        index = self._denial_index.get(key)
        if index is None and len(self.denials) >= MAX_DENIAL_ENTRIES:
            key = (name, capability, None)
            index = self._denial_index.get(key)
        if index is None:
            entry: dict[str, Any] = {"kuro/import": name, "kuro/capability": capability}
            if key[2] is not None:
                entry["kuro/path"] = key[2]
            self._denial_index[key] = len(self.denials)
            self.denials.append(entry)
        else:
            entry = self.denials[index]
            entry["kuro/count"] = entry.get("kuro/count", 1) + 1
        return int(ErrorCode.DENIED)


# ---- the run registry (store context address → run)

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


class _Fault(Exception):
    """Internal: a pointer/length outside guest memory (turned into FAULT, never raised to wasm)."""


def _memory(run: RunContext, caller: Any, cctx: Any) -> tuple[int, int]:
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


def _span(mem: tuple[int, int], ptr: int, length: int) -> tuple[int, int]:
    found = abi.checked_range(mem[1], ptr, length)
    if found is None or (mem[0] == 0 and found[1] > found[0]):
        raise _Fault
    return mem[0] + found[0], found[1] - found[0]


def _load(mem: tuple[int, int], ptr: int, length: int) -> bytes:
    address, n = _span(mem, ptr, length)
    return ctypes.string_at(address, n) if n else b""


def _path(mem: tuple[int, int], ptr: int, length: int) -> str | None:
    """The UTF-8 path at (ptr, len), or None if it is not UTF-8. Raises _Fault."""
    try:
        return _load(mem, ptr, length).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _path_for_record(mem: tuple[int, int], ptr: int, length: int) -> str | None:
    """The path of a refused call for its denial record; None if unreadable or too long to name anything."""
    if length % 2**32 > MAX_PATH_BYTES:  # kuro.fs refuses it as a bad path anyway; never copy it
        return None
    try:
        return _path(mem, ptr, length)
    except _Fault:
        return None


# ---- handlers: (run, caller, context, params) → i32, or None to trap (run.stop_reason says why)

Handler = Callable[[RunContext, Any, Any, Any], "int | None"]


def _write(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    fd, ptr, length = p[0].of.i32, p[1].of.i32, p[2].of.i32
    if fd not in (abi.FD_STDOUT, abi.FD_STDERR):
        return int(ErrorCode.BAD_FD)
    mem = _memory(run, caller, cctx)
    data = _load(mem, ptr, length)
    if not run.emit("stdout" if fd == abi.FD_STDOUT else "stderr", data):
        run.stop("output-capped")
        return None
    return len(data)


def _read(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    ptr, cap = p[0].of.i32, p[1].of.i32
    if "stdin/read" not in run.grant:
        return run.deny("read", "stdin/read", None)
    mem = _memory(run, caller, cctx)
    _span(mem, ptr, cap)
    if cap == 0:
        return 0  # as POSIX read(fd, buf, 0): nothing asked, nothing consumed, no waiting
    assert run.stdin is not None
    with run.cond:
        while True:
            if run.should_stop() is not None:
                return None
            chunk = run.stdin.take(cap % 2**32)
            if chunk is not None:
                break
            run.cond.wait(timeout=max(0.0, min(run.deadline - time.monotonic(), 0.05)))
    mem = _memory(run, caller, cctx)  # memory cannot move while we wait, but re-reading is cheap
    address, _ = _span(mem, ptr, len(chunk))
    ctypes.memmove(address, chunk, len(chunk))
    return len(chunk)


def _fs_call(run: RunContext, name: str, op: str, *args: Any) -> _fsgate.Answer:
    """Call ``op`` on the run's Fs; a denial reason becomes an error code (``missing-capability`` recorded)."""
    if run.fs is None and run.open_fs is not None:
        run.fs, run.open_fs = run.open_fs(), None
    answer = _fsgate.call(run.fs, op, *args)
    if answer.reason is not None and abi.error_for_reason(answer.reason) == ErrorCode.DENIED:
        run.deny(name, _CAPABILITY[name], args[0] if args and isinstance(args[0], str) else None)
    return answer


_CAPABILITY: Final[dict[str, str]] = {s.name: s.capability for s in abi.IMPORTS if s.capability is not None}


def _gate(run: RunContext, name: str, mem: tuple[int, int], ptr: int, length: int) -> tuple[str | None, int | None]:
    """Capability, then path: (path, None) to go on, or (None, code) to answer now."""
    if _CAPABILITY[name] not in run.grant:
        return None, run.deny(name, _CAPABILITY[name], _path_for_record(mem, ptr, length))
    path = _path(mem, ptr, length)
    if path is None or path == "":
        return None, int(ErrorCode.BAD_PATH)
    return path, None


def _copy_out(mem: tuple[int, int], buf_ptr: int, data: bytes | memoryview) -> None:
    address, n = _span(mem, buf_ptr, len(data))
    if n:
        ctypes.memmove(address, bytes(data) if isinstance(data, memoryview) else data, n)  # slices only at edges


def _fs_read(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    mem = _memory(run, caller, cctx)
    path, code = _gate(run, "fs_read", mem, p[0].of.i32, p[1].of.i32)
    if path is None:
        return code
    buf_ptr, cap = p[2].of.i32, p[3].of.i32
    _span(mem, buf_ptr, cap)
    answer = _fs_call(
        run, "fs_read", "read_into", path, cap % 2**32, lambda at, data: _copy_out(mem, buf_ptr + at, data)
    )
    if answer.reason is not None:
        return int(abi.error_for_reason(answer.reason))
    size, cid = answer.value
    if cid not in run.reads:
        run.reads.append(cid)
    return abi.clamp_i32(size)


def _fs_read_at(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    mem = _memory(run, caller, cctx)
    path, code = _gate(run, "fs_read_at", mem, p[0].of.i32, p[1].of.i32)
    if path is None:
        return code
    offset, buf_ptr, cap = p[2].of.i64, p[3].of.i32, p[4].of.i32
    _span(mem, buf_ptr, cap)
    if offset < 0:
        return int(ErrorCode.FAULT)
    answer = _fs_call(run, "fs_read_at", "read_at", path, offset, cap % 2**32)
    if answer.reason is not None:
        return int(abi.error_for_reason(answer.reason))
    data, cid = answer.value
    _copy_out(mem, buf_ptr, data)
    if cid not in run.reads:
        run.reads.append(cid)
    return len(data)


def _fs_write(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    mem = _memory(run, caller, cctx)
    path, code = _gate(run, "fs_write", mem, p[0].of.i32, p[1].of.i32)
    if path is None:
        return code
    data = _load(mem, p[2].of.i32, p[3].of.i32)
    answer = _fs_call(run, "fs_write", "write", path, data)
    if answer.reason is not None:
        return int(abi.error_for_reason(answer.reason))
    run.fs = answer.fs
    run.wrote = True
    return 0


def _fs_ls(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    mem = _memory(run, caller, cctx)
    path, code = _gate(run, "fs_ls", mem, p[0].of.i32, p[1].of.i32)
    if path is None:
        return code
    buf_ptr, cap = p[2].of.i32, p[3].of.i32
    _span(mem, buf_ptr, cap)
    answer = _fs_call(run, "fs_ls", "ls", path)
    if answer.reason is not None:
        return int(abi.error_for_reason(answer.reason))
    listing: bytes = answer.value
    _copy_out(mem, buf_ptr, listing[: cap % 2**32])
    return abi.clamp_i32(len(listing))


def _fs_rm(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    mem = _memory(run, caller, cctx)
    path, code = _gate(run, "fs_rm", mem, p[0].of.i32, p[1].of.i32)
    if path is None:
        return code
    answer = _fs_call(run, "fs_rm", "rm", path)
    if answer.reason is not None:
        return int(abi.error_for_reason(answer.reason))
    run.fs = answer.fs
    run.wrote = True
    return 0


HANDLERS: Final[dict[str, Handler]] = {
    "write": _write,
    "read": _read,
    "fs_read": _fs_read,
    "fs_read_at": _fs_read_at,
    "fs_write": _fs_write,
    "fs_ls": _fs_ls,
    "fs_rm": _fs_rm,
}


# ---- trampolines and the linker


def _trap_ptr(message: str) -> int:
    raw = message.encode("utf-8", "replace")
    return _address(ffi.wasmtime_trap_new(raw, len(raw)))


def _trampoline(name: str, handler: Handler) -> Any:
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
            except _Fault:
                value = int(ErrorCode.FAULT)
            if value is None:
                return _trap_ptr(f"kuro: stopped ({run.stop_reason})")
            results[0].kind = ffi.WASMTIME_I32.value
            results[0].of.i32 = abi.clamp_i32(value)  # a count past 2 GiB must not wrap into an error code
            return 0
        except BaseException as exc:
            if run is not None:
                run.stop("host-error", f"{name}: {type(exc).__name__}: {exc}")
            return _trap_ptr(f"kuro: host error in {name}")

    return trampoline


_TRAMPOLINES: Final[dict[str, Any]] = {spec.name: _trampoline(spec.name, HANDLERS[spec.name]) for spec in abi.IMPORTS}


# A NULL finalizer, not a Python one: at interpreter exit the ctypes thunk of a Python finalizer
# can be freed before the linker that would call it, and deleting the linker then crashes.
_NULL_FINALIZER: Final = ctypes.CFUNCTYPE(None, ctypes.c_void_p)()  # calling the type with no address: NULL

_VALTYPES: Final[dict[str, Callable[[], wasmtime.ValType]]] = {
    "i32": wasmtime.ValType.i32,
    "i64": wasmtime.ValType.i64,
}
_LINKERS: dict[int, wasmtime.Linker] = {}
_LINKERS_LOCK = threading.Lock()


def linker_for(engine: wasmtime.Engine) -> wasmtime.Linker:
    """The shared linker of ``engine`` with every ABI v1 import defined (created once per engine)."""
    key = id(engine)
    with _LINKERS_LOCK:
        linker = _LINKERS.get(key)
        if linker is not None:
            return linker
        linker = wasmtime.Linker(engine)
        module = abi.IMPORT_MODULE.encode("utf-8")
        for spec in abi.IMPORTS:
            ty = wasmtime.FuncType([_VALTYPES[t]() for t in spec.params], [_VALTYPES[t]() for t in spec.results])
            name = spec.name.encode("utf-8")
            err = ffi.wasmtime_linker_define_func(
                linker.ptr(),
                module,
                len(module),
                name,
                len(name),
                ty.ptr(),
                _TRAMPOLINES[spec.name],
                None,
                _NULL_FINALIZER,
            )
            if err:
                raise wasmtime.WasmtimeError._from_ptr(err)
        _LINKERS[key] = linker
        return linker
