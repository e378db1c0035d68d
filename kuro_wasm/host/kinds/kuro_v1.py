"""Guest kind ``kuro-abi-v1``: modules on the seven ``kuro`` imports — decode arguments → kuro.fs → encode results.

## The one decision
No Python exception ever crosses the wasm boundary, and nothing about a run
lives outside that run's :class:`RunContext`. Each import is a raw C callback
(not wasmtime-py's public ``Func`` trampoline, which parks a raised exception
in a process-global slot that another thread can pick up): it finds its run as
its thread's current run (:func:`kuro_wasm.host.calls.register_run`), answers with an ``i32`` — a value or an
:class:`~kuro_wasm.model.abi.ErrorCode` — or, when the run must stop (killed,
deadline, output cap, a host bug), records *why* in the context and returns a
trap. The host builds the receipt from the context, never from the trap text.

Capability checks happen here, at call time: a call outside the grant returns
``DENIED`` (-1), is recorded in ``kuro/denials`` (one counted entry per distinct
call, bounded: :meth:`RunContext.deny`), and the guest keeps running. Once a
run has a stop reason, every further import call traps before doing anything,
so nothing takes effect after ``kill()`` or the output cap.
With ``fs/scratch`` granted, a path under ``tmp/`` is the run's scratch
directory (:mod:`kuro_wasm.host.fsgate`) and needs that capability alone; the
path is then read before the capability check, since it decides which applies.
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
import struct
import time
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import wasmtime

from kuro_fs.paths import MAX_PATH_BYTES
from kuro_wasm.host import engine as _engine
from kuro_wasm.host import fsgate as _fsgate
from kuro_wasm.host.calls import (
    ADDRESS_SPACE,
    COPY_SMALL,
    RESULTS,
    Fault,
    Handler,
    Memory,
    Unchecked,
    current_run,
    define,
    define_raw,
    failed,
    guest_base,
    guest_memory,
    in_guest,
    load,
    outside_run,
    span,
    stopped,
    store_bytes,
)
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.engine import CallOutcome
from kuro_wasm.host.kind import CoreModuleKind, Entry, core_entry
from kuro_wasm.model import abi
from kuro_wasm.model.abi import ErrorCode
from kuro_wasm.model.wasm_shape import WasmShape

__all__ = ["HANDLERS", "KIND", "WRITE", "KuroAbiV1", "linker_for"]


def _path(mem: Memory, ptr: int, length: int) -> str | None:
    """The UTF-8 path at (ptr, len), or None if it is not UTF-8. Raises Fault."""
    try:
        return load(mem, ptr, length).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _path_for_record(mem: Memory, ptr: int, length: int) -> str | None:
    """The path of a refused call for its denial record; None if unreadable or too long to name anything."""
    if length % 2**32 > MAX_PATH_BYTES:  # kuro.fs refuses it as a bad path anyway; never copy it
        return None
    try:
        return _path(mem, ptr, length)
    except Fault:
        return None


# ---- handlers: (run, caller, context, params) → i32, or None to trap (run.stop_reason says why)


FAULT: Final = int(ErrorCode.FAULT)
_U32: Final = 2**32
_WRITE: Final = next(spec for spec in abi.IMPORTS if spec.name == "write")
_WRITE_ARGS: Final = struct.Struct("<i12xI12xI12x")  # (three raw i32 values: see calls.RAW_LAYOUT)
assert _WRITE.params == ("i32", "i32", "i32") and _WRITE_ARGS.size == 16 * 3


def _write_thunk() -> Any:
    """``kuro.write`` as one raw callback (:func:`~kuro_wasm.host.calls.define_raw`), its work inline.

    Most guests' hottest import, so it is one Python frame a call, not a trampoline plus a handler:
    the run and its stop/deadline check as every trampoline does them; fd → stream (else ``BAD_FD``);
    the range checked against the size last read, asking wasmtime only if it does not fit (a
    zero-length range needs only the size, not the base; outside the memory: ``FAULT``); the bytes
    copied; the run's ``emit`` (the stream's byte and chunk bounds: a dropped write stops the run,
    ``output-capped``); the length answered, clamped as every i32 answer.
    """
    current, now, results, view = current_run, time.monotonic, RESULTS, ADDRESS_SPACE
    # (fd, ptr, len): the fd as an i32, ptr and len as the u32s the ABI reads them as (no ``% 2**32`` a call)
    args = _WRITE_ARGS.unpack_from
    copy_small, small_n, most = COPY_SMALL, len(COPY_SMALL), 2**31 - 1
    stdout, stderr, bad_fd, fault = abi.FD_STDOUT, abi.FD_STDERR, int(ErrorCode.BAD_FD), FAULT

    @Unchecked  # type: ignore[untyped-decorator]
    def write(_env: Any, caller: int, vals: int, _n: int) -> int | None:
        run = current()
        if run is None:
            return outside_run("write")
        try:
            if run.stop_reason is not None or now() >= run.deadline:
                return stopped(run)
            fd, ptr, n = args(view, vals)
            if fd == stdout:
                name = "stdout"
            elif fd == stderr:
                name = "stderr"
            else:
                results[vals >> 2] = bad_fd
                return None
            try:
                if ptr + n > run.memory_size:
                    ptr, n = in_guest(run, caller, run.context, ptr, n)
                if n == 0:
                    data = b""
                else:
                    address = (run.memory_base or guest_base(run, caller, run.context, ptr + n)) + ptr
                    data = copy_small[n](view, address)[0] if n < small_n else view[address : address + n].tobytes()
            except Fault:
                results[vals >> 2] = fault
                return None
            emit = run.emit  # (an instance attribute: read, then called — a method lookup on it is never specialized)
            if not emit(name, data):
                run.stop("output-capped")
                return stopped(run)
            results[vals >> 2] = n if n <= most else most
            return None
        except BaseException as exc:
            return failed(run, "write", exc)

    return write


def _read(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    ptr, cap = p
    if "stdin/read" not in run.grant:
        return run.deny("read", "stdin/read", None)
    if ptr % _U32 + cap % _U32 > run.memory_size:  # (the size last read; wasmtime is asked only if it does not fit)
        in_guest(run, caller, cctx, ptr, cap)
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
    run.stdin.report()
    mem = guest_memory(run, caller, cctx)  # memory cannot move while we wait, but re-reading is cheap
    address, _ = span(mem, ptr, len(chunk))
    ctypes.memmove(address, chunk, len(chunk))
    return len(chunk)


_CAPABILITY: Final[dict[str, str]] = {s.name: s.capability for s in abi.IMPORTS if s.capability is not None}


class _Target(NamedTuple):
    """Where an fs import acts: the path (inside the scratch directory when ``scratch``), or an answer now."""

    path: str | None
    code: int | None = None
    scratch: bool = False


def _gate(run: RunContext, name: str, mem: Memory, ptr: int, length: int) -> _Target:
    """Capability, then path: a target to act on, or the code to answer now.

    With ``fs/scratch`` in the grant the path is read first, since it decides
    which capability applies (``tmp/…`` needs only ``fs/scratch``).
    """
    if _fsgate.SCRATCH_CAPABILITY in run.grant:
        path = _path(mem, ptr, length)
        inner = None if path is None else _fsgate.scratch_path(run, path)
        if inner is not None:
            return _Target(inner, scratch=True)
    if _CAPABILITY[name] not in run.grant:
        return _Target(None, run.deny(name, _CAPABILITY[name], _path_for_record(mem, ptr, length)))
    path = _path(mem, ptr, length)
    if path is None or path == "":
        return _Target(None, int(ErrorCode.BAD_PATH))
    return _Target(path)


def _fs_call(run: RunContext, name: str, at: _Target, op: str, *args: Any) -> _fsgate.Answer:
    return _fsgate.call_in(run, name, _CAPABILITY[name], op, at.path, *args, scratch=at.scratch)


def _advance(run: RunContext, at: _Target, answer: _fsgate.Answer) -> int:
    """A write or rm was accepted: the run's fs root (or its scratch directory) moves on; answers 0."""
    if at.scratch:
        run.scratch = answer.fs
    else:
        run.fs = answer.fs
        run.wrote = True
    return 0


def _fs_read(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    mem = guest_memory(run, caller, cctx)
    at = _gate(run, "fs_read", mem, p[0], p[1])
    if at.path is None:
        return at.code
    return _fsgate.read_into_guest(run, "fs_read", at.path, mem, p[2], p[3], scratch=at.scratch)


def _fs_read_at(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    mem = guest_memory(run, caller, cctx)
    at = _gate(run, "fs_read_at", mem, p[0], p[1])
    if at.path is None:
        return at.code
    offset, buf_ptr, cap = p[2], p[3], p[4]
    span(mem, buf_ptr, cap)
    if offset < 0:
        return int(ErrorCode.FAULT)
    answer = _fs_call(run, "fs_read_at", at, "read_at", offset, cap % 2**32)
    if answer.reason is not None:
        return int(abi.error_for_reason(answer.reason))
    data, _ = answer.value
    store_bytes(mem, buf_ptr, data)
    _fsgate.record_read(run, answer, scratch=at.scratch)
    return len(data)


def _fs_write(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    mem = guest_memory(run, caller, cctx)
    at = _gate(run, "fs_write", mem, p[0], p[1])
    if at.path is None:
        return at.code
    data = load(mem, p[2], p[3])
    answer = _fs_call(run, "fs_write", at, "write", data)
    if answer.reason is not None:
        return int(abi.error_for_reason(answer.reason))
    return _advance(run, at, answer)


def _fs_ls(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    mem = guest_memory(run, caller, cctx)
    at = _gate(run, "fs_ls", mem, p[0], p[1])
    if at.path is None:
        return at.code
    buf_ptr, cap = p[2], p[3]
    span(mem, buf_ptr, cap)
    answer = _fs_call(run, "fs_ls", at, "ls")
    if answer.reason is not None:
        return int(abi.error_for_reason(answer.reason))
    listing: bytes = answer.value
    store_bytes(mem, buf_ptr, listing[: cap % 2**32])
    return abi.clamp_i32(len(listing))


def _fs_rm(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    mem = guest_memory(run, caller, cctx)
    at = _gate(run, "fs_rm", mem, p[0], p[1])
    if at.path is None:
        return at.code
    answer = _fs_call(run, "fs_rm", at, "rm")
    if answer.reason is not None:
        return int(abi.error_for_reason(answer.reason))
    return _advance(run, at, answer)


#: The handler of every import but ``write`` (:data:`WRITE`, a raw callback of its own).
HANDLERS: Final[dict[str, Handler]] = {
    "read": _read,
    "fs_read": _fs_read,
    "fs_read_at": _fs_read_at,
    "fs_write": _fs_write,
    "fs_ls": _fs_ls,
    "fs_rm": _fs_rm,
}


#: ``kuro.write``'s raw callback (one for the process: it finds its run as the calling thread's current run).
WRITE: Final = _write_thunk()


# ---- the kind


class KuroAbiV1(CoreModuleKind):
    """Modules whose imports are all in the kuro ABI v1 table (:data:`kuro_wasm.model.abi.IMPORTS`), or none."""

    name = "kuro-abi-v1"
    import_modules = frozenset({abi.IMPORT_MODULE})

    def define_functions(self, linker: wasmtime.Linker) -> None:
        module = abi.IMPORT_MODULE
        for spec in abi.IMPORTS:
            if spec.name == _WRITE.name:
                define_raw(linker, module, spec.name, spec.params, spec.results, WRITE)
            else:
                define(linker, module, spec.name, spec.params, spec.results, HANDLERS[spec.name], fault=FAULT)

    def claim(self, shape: WasmShape) -> str | None:
        if shape.component:
            return "the guest is a component, not a core module"
        for imp in shape.imports:
            sig = imp.sig
            params, results = (sig.params, sig.results) if sig is not None else ((), ())
            reason = abi.check_import(imp.module, imp.name, params, results, imp.kind)
            if reason is not None:
                return reason
        return None

    def entry(self, shape: WasmShape, export: str, args: Sequence[object]) -> Entry | str:
        return core_entry(shape, export, args)

    def call(self, store: wasmtime.Store, instance: Any, entry: Entry, run: RunContext) -> CallOutcome:
        # The memory is looked up by the first import call that needs it (calls.guest_memory), not here:
        # most runs of most guests never ask.
        func = _engine.lookup_func(store, instance, entry.export, run.context)
        return _engine.call_export(store, func, entry.sig.params, entry.args, entry.sig.results, run.context)


KIND: Final = KuroAbiV1()


def linker_for(engine: wasmtime.Engine) -> wasmtime.Linker:
    """The shared linker of ``engine`` with every ABI v1 import defined (created once per engine)."""
    return KIND.linker(engine)
