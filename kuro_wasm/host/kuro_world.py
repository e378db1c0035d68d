"""The ``kuro:host@1.0.0`` world's host functions: the kuro ABI v1's effects, answered in WIT types.

## The one decision
Each function of ``wit/host.wit`` does exactly what its ABI v1 import does —
the same capability, checked at every call; the same kuro.fs operation through
:mod:`~kuro_wasm.host.fsgate`; the same :class:`~kuro_wasm.model.abi.ErrorCode`
table, by name, as ``err(error-code)``; the same records in ``kuro/denials``
and ``kuro/reads`` through the run's :class:`~kuro_wasm.host.context.RunContext`
— so a component and a core module see one host. A refused call names the
function as ``interface#function`` (``kuro:host/fs@1.0.0#read``).

What crosses is bounded by the run's ``max_value_bytes``
(:meth:`~kuro_wasm.model.limits.Limits.value_bound`), counted by
:func:`~kuro_wasm.model.wit.value_bytes` *before* any engine value is built: a
path or ``list<u8>`` from the guest past it, or an answer past it (a file, a
range, a listing), is ``err(too-large)``; ``stdin.read`` returns at most that
many bytes (a short read, as always allowed). Core modules need no such bound:
their bytes are copied into guest memory directly.

## Effects
The run's stream, stdin (blocking on its condition variable), and kuro.fs value;
results are written into wasmtime's C value vectors
(:mod:`kuro_wasm.host.component_values`).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any, Final

from wasmtime import _ffi as ffi

from kuro_fs.paths import MAX_PATH_BYTES
from kuro_wasm.host import fsgate as _fsgate
from kuro_wasm.host.component_values import bytes_of, name_of, write
from kuro_wasm.host.context import RunContext
from kuro_wasm.model import abi
from kuro_wasm.model.abi import ErrorCode
from kuro_wasm.model.wit import WitType, value_bytes

__all__ = ["CAPABILITIES", "HOST_FUNCTIONS", "SIGNATURES", "WORLD_PACKAGE", "Handler", "error_name"]

#: (run, store context, args, results) → True (answered), or None to trap (the run's stop reason says why).
Handler = Callable[[RunContext, Any, Any, Any], "bool | None"]

#: The WIT package (``wit/host.wit``) these functions implement.
WORLD_PACKAGE: Final = "kuro:host@1.0.0"
_VERSION: Final = "@1.0.0"
_TYPES: Final = f"kuro:host/types{_VERSION}"
_OUTPUT: Final = f"kuro:host/output{_VERSION}"
_STDIN: Final = f"kuro:host/stdin{_VERSION}"
_FS: Final = f"kuro:host/fs{_VERSION}"
#: The largest list a 32-bit guest can be handed.
_MAX_LIST: Final = 2**32 - 1

_BYTES: Final = WitType("list", (WitType("u8"),))
_KINDS_ENUM: Final = WitType("enum", (), ("file", "dir"))
_ENTRY: Final = WitType(
    "record", (WitType("string"), _KINDS_ENUM, WitType("u64"), WitType("string")), ("name", "kind", "size", "cid")
)
_ENTRIES: Final = WitType("list", (_ENTRY,))
_METADATA: Final = WitType("record", (_KINDS_ENUM, WitType("u64"), WitType("string")), ("kind", "size", "cid"))
_ERROR: Final = WitType("enum", (), tuple(c.name.lower().replace("_", "-") for c in ErrorCode))
_STREAM: Final = WitType("enum", (), ("stdout", "stderr"))
_PATH: Final = WitType("string")


def _answers(t: WitType | None) -> WitType:
    """``result<t, error-code>``: a host function's answer."""
    return WitType("result", (t, _ERROR))


_ANSWER: Final = _answers(None)


def error_name(code: ErrorCode | int) -> str:
    """The WIT ``error-code`` case of an ABI v1 error code.

    >>> error_name(ErrorCode.NOT_FOUND)
    'not-found'
    """
    return ErrorCode(code).name.lower().replace("_", "-")


# ---- answers (a host function's one result: result<T, error-code>)

_Val = Any


def _ok(results: _Val, t: WitType | None = None, payload: Any = None) -> bool:
    c = results[0]
    c.kind = ffi.WASMTIME_COMPONENT_RESULT.value
    c.of.result.is_ok = True
    if t is None:
        c.of.result.val = None
    else:
        raw = ffi.wasmtime_component_val_t()
        write(t, payload, ctypes.pointer(raw))
        c.of.result.val = ffi.wasmtime_component_val_new(ctypes.byref(raw))
    return True


def _answer_value(run: RunContext, results: _Val, t: WitType, payload: Any) -> bool:
    """``ok(payload)``, or ``err(too-large)`` when the payload is past the run's ``max_value_bytes``."""
    if value_bytes(t, payload) > run.max_value_bytes:
        return _err(results, ErrorCode.TOO_LARGE)
    return _ok(results, t, payload)


def _err(results: _Val, code: ErrorCode | int) -> bool:
    raw = ffi.wasmtime_component_val_t()
    write(_ERROR, error_name(code), ctypes.pointer(raw))
    c = results[0]
    c.kind = ffi.WASMTIME_COMPONENT_RESULT.value
    c.of.result.is_ok = False
    c.of.result.val = ffi.wasmtime_component_val_new(ctypes.byref(raw))
    return True


#: ``instance#function`` → the capability it needs (absent: none, as ``output.write``).
CAPABILITIES: Final[dict[str, str]] = {
    f"{_STDIN}#read": "stdin/read",
    f"{_FS}#read": "fs/read",
    f"{_FS}#read-at": "fs/read",
    f"{_FS}#write": "fs/write",
    f"{_FS}#ls": "fs/ls",
    f"{_FS}#rm": "fs/rm",
    f"{_FS}#stat": "fs/ls",
}


# ---- host functions: (run, args, results) → True (answered), or None to trap (run.stop_reason says why)


def _write(run: RunContext, _cctx: Any, args: _Val, results: _Val) -> bool | None:
    stream = name_of(args[0].of.enumeration)
    if int(args[1].of.list.size) > run.max_value_bytes:
        return _err(results, ErrorCode.TOO_LARGE)
    if not run.emit(stream, bytes_of(args[1].of.list)):
        run.stop("output-capped")
        return None
    return _ok(results)


def _stdin_read(run: RunContext, _cctx: Any, args: _Val, results: _Val) -> bool | None:
    capability = CAPABILITIES[f"{_STDIN}#read"]
    if capability not in run.grant:
        return _err(results, run.deny(f"{_STDIN}#read", capability, None))
    cap = int(args[0].of.u32)
    if cap == 0:
        return _ok(results, _BYTES, b"")
    if run.max_value_bytes == 0:
        return _err(results, ErrorCode.TOO_LARGE)
    cap = min(cap, run.max_value_bytes)  # a short read: the guest asks again
    assert run.stdin is not None
    with run.cond:
        while True:
            if run.should_stop() is not None:
                return None
            chunk = run.stdin.take(cap)
            if chunk is not None:
                break
            run.cond.wait(timeout=max(0.0, min(run.deadline - time.monotonic(), 0.05)))
    run.stdin.report()
    return _ok(results, _BYTES, chunk)


def _gate(run: RunContext, func: str, args: _Val, results: _Val) -> str | None:
    """The call's path if the grant allows it and the path is not empty; otherwise answers and returns None."""
    capability = CAPABILITIES[f"{_FS}#{func}"]
    size = int(args[0].of.string.size)
    path = name_of(args[0].of.string) if size <= max(MAX_PATH_BYTES, run.max_value_bytes) else None
    if capability not in run.grant:
        shown = path if size <= MAX_PATH_BYTES else None
        _err(results, run.deny(f"{_FS}#{func}", capability, shown))
        return None
    if path is None or size > run.max_value_bytes:
        _err(results, ErrorCode.TOO_LARGE)
        return None
    if path == "":
        _err(results, ErrorCode.BAD_PATH)
        return None
    return path


def _answer(run: RunContext, func: str, op: str, path: str, *rest: Any) -> _fsgate.Answer:
    answer = _fsgate.call_in_run(run, op, path, *rest)
    if answer.reason is not None and abi.error_for_reason(answer.reason) == ErrorCode.DENIED:
        run.deny(f"{_FS}#{func}", CAPABILITIES[f"{_FS}#{func}"], path)  # the Fs value's own grant refused it
    return answer


def _read_file(run: RunContext, _cctx: Any, args: _Val, results: _Val) -> bool | None:
    path = _gate(run, "read", args, results)
    if path is None:
        return True
    pieces: list[bytes] = []
    # ``whole``: a file longer than one call may carry (``max_value_bytes``, and never more than a list can
    # hold) is refused (over-budget → too-large) from its root block, before a byte is copied.
    cap = min(_MAX_LIST, run.max_value_bytes)
    answer = _answer(run, "read", "read_into", path, cap, lambda _at, piece: pieces.append(bytes(piece)), True)
    if answer.reason is not None:
        return _err(results, abi.error_for_reason(answer.reason))
    _size, cid = answer.value
    if cid not in run.reads:
        run.reads.append(cid)
    return _ok(results, _BYTES, b"".join(pieces))


def _read_at(run: RunContext, _cctx: Any, args: _Val, results: _Val) -> bool | None:
    path = _gate(run, "read-at", args, results)
    if path is None:
        return True
    offset, length = int(args[1].of.u64), int(args[2].of.u32)
    # at most one byte past the bound is read: enough to know the answer is too large
    answer = _answer(run, "read-at", "read_at", path, offset, min(length, run.max_value_bytes + 1))
    if answer.reason is not None:
        return _err(results, abi.error_for_reason(answer.reason))
    data, cid = answer.value
    if len(data) > run.max_value_bytes:
        return _err(results, ErrorCode.TOO_LARGE)
    if cid not in run.reads:
        run.reads.append(cid)
    return _ok(results, _BYTES, data)


def _fs_write(run: RunContext, _cctx: Any, args: _Val, results: _Val) -> bool | None:
    path = _gate(run, "write", args, results)
    if path is None:
        return True
    if int(args[1].of.list.size) > run.max_value_bytes:
        return _err(results, ErrorCode.TOO_LARGE)
    answer = _answer(run, "write", "write", path, bytes_of(args[1].of.list))
    if answer.reason is not None:
        return _err(results, abi.error_for_reason(answer.reason))
    run.fs = answer.fs
    run.wrote = True
    return _ok(results)


def _ls(run: RunContext, _cctx: Any, args: _Val, results: _Val) -> bool | None:
    path = _gate(run, "ls", args, results)
    if path is None:
        return True
    answer = _answer(run, "ls", "entries", path)
    if answer.reason is not None:
        return _err(results, abi.error_for_reason(answer.reason))
    entries = [(e["name"], e["kind"], e["size"], e["cid"]) for e in answer.value]
    return _answer_value(run, results, _ENTRIES, entries)


def _rm(run: RunContext, _cctx: Any, args: _Val, results: _Val) -> bool | None:
    path = _gate(run, "rm", args, results)
    if path is None:
        return True
    answer = _answer(run, "rm", "rm", path)
    if answer.reason is not None:
        return _err(results, abi.error_for_reason(answer.reason))
    run.fs = answer.fs
    run.wrote = True
    return _ok(results)


def _stat(run: RunContext, _cctx: Any, args: _Val, results: _Val) -> bool | None:
    path = _gate(run, "stat", args, results)
    if path is None:
        return True
    answer = _answer(run, "stat", "stat", path)
    if answer.reason is not None:
        return _err(results, abi.error_for_reason(answer.reason))
    meta = answer.value
    return _answer_value(run, results, _METADATA, (meta["kind"], meta["size"], meta["cid"]))


#: instance → function → handler: everything a component of the world may import.
HOST_FUNCTIONS: Final[dict[str, dict[str, Handler]]] = {
    _TYPES: {},
    _OUTPUT: {"write": _write},
    _STDIN: {"read": _stdin_read},
    _FS: {"read": _read_file, "read-at": _read_at, "write": _fs_write, "ls": _ls, "rm": _rm, "stat": _stat},
}

#: ``instance#function`` → (its parameter types, its result type) as ``wit/host.wit`` declares them: what a
#: guest's import of it is compared with when it is linked, and each call's arguments are checked against before
#: a handler reads them (:func:`~kuro_wasm.host.component_values.fits`; the C API links a host function untyped).
SIGNATURES: Final[dict[str, tuple[tuple[WitType, ...], WitType | None]]] = {
    f"{_OUTPUT}#write": ((_STREAM, _BYTES), _ANSWER),
    f"{_STDIN}#read": ((WitType("u32"),), _answers(_BYTES)),
    f"{_FS}#read": ((_PATH,), _answers(_BYTES)),
    f"{_FS}#read-at": ((_PATH, WitType("u64"), WitType("u32")), _answers(_BYTES)),
    f"{_FS}#write": ((_PATH, _BYTES), _ANSWER),
    f"{_FS}#ls": ((_PATH,), _answers(_ENTRIES)),
    f"{_FS}#rm": ((_PATH,), _ANSWER),
    f"{_FS}#stat": ((_PATH,), _answers(_METADATA)),
}
