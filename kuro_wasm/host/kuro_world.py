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

Each function reads its arguments through :class:`Args` (a size before the value) and answers a
value, so one implementation serves both ways into a component: :data:`WORLD_FUNCTIONS` for the host's
own canonical ABI (:mod:`kuro_wasm.host.component_core`), and :data:`HOST_FUNCTIONS`, the same functions
over wasmtime's C value vectors (:mod:`kuro_wasm.host.component_values`).

## Effects
The run's stream, stdin (blocking on its condition variable), and kuro.fs value;
C-path results are written into wasmtime's C value vectors.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from kuro_fs.paths import MAX_PATH_BYTES
from kuro_wasm.host import fsgate as _fsgate
from kuro_wasm.host.component_values import bytes_of, name_of, read, write
from kuro_wasm.host.context import RunContext
from kuro_wasm.model import abi
from kuro_wasm.model.abi import ErrorCode
from kuro_wasm.model.wit import WitType, value_bytes

__all__ = [
    "CAPABILITIES",
    "HOST_FUNCTIONS",
    "SIGNATURES",
    "WORLD_FUNCTIONS",
    "WORLD_PACKAGE",
    "Args",
    "Handler",
    "WorldHandler",
    "error_name",
]

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


# ---- arguments and answers, whichever way the values cross


class Args(Protocol):
    """A host function's arguments, read only as far as the function needs them.

    Two paths implement it: wasmtime's C value vectors (:class:`_CArgs`) and the host's own canonical ABI over
    the guest's memory (:mod:`kuro_wasm.host.component_core`). ``size`` is known before a value is built, so a
    path or ``list<u8>`` past the run's bound is refused without being copied.
    """

    def size(self, i: int) -> int:
        """The byte length of the string or ``list<u8>`` argument ``i``."""
        ...

    def value(self, i: int) -> Any:
        """Argument ``i`` in the lowered form (:mod:`kuro_wasm.model.wit`)."""
        ...


#: (run, args) → the answer (``("ok", payload)`` / ``("err", error name)``), or None to trap (the run's stop
#: reason says why).
WorldHandler = Callable[[RunContext, Args], Any]

_OK: Final = ("ok", None)


def _err(code: ErrorCode | int) -> tuple[str, str]:
    return ("err", error_name(code))


def _answer_value(run: RunContext, t: WitType, payload: Any) -> tuple[str, Any]:
    """``ok(payload)``, or ``err(too-large)`` when the payload is past the run's ``max_value_bytes``."""
    if value_bytes(t, payload) > run.max_value_bytes:
        return _err(ErrorCode.TOO_LARGE)
    return ("ok", payload)


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


# ---- host functions: (run, args) → the answer, or None to trap (run.stop_reason says why)


def _write(run: RunContext, args: Args) -> Any:
    stream = args.value(0)
    if args.size(1) > run.max_value_bytes:
        return _err(ErrorCode.TOO_LARGE)
    if not run.emit(stream, args.value(1)):
        run.stop("output-capped")
        return None
    return _OK


def _stdin_read(run: RunContext, args: Args) -> Any:
    capability = CAPABILITIES[f"{_STDIN}#read"]
    if capability not in run.grant:
        return _err(run.deny(f"{_STDIN}#read", capability, None))
    cap = int(args.value(0))
    if cap == 0:
        return ("ok", b"")
    if run.max_value_bytes == 0:
        return _err(ErrorCode.TOO_LARGE)
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
    return ("ok", chunk)


def _gate(run: RunContext, func: str, args: Args) -> str | tuple[str, str]:
    """The call's path if the grant allows it and the path is not empty; otherwise the answer."""
    capability = CAPABILITIES[f"{_FS}#{func}"]
    size = args.size(0)
    path = args.value(0) if size <= max(MAX_PATH_BYTES, run.max_value_bytes) else None
    if capability not in run.grant:
        shown = path if size <= MAX_PATH_BYTES else None
        return _err(run.deny(f"{_FS}#{func}", capability, shown))
    if path is None or size > run.max_value_bytes:
        return _err(ErrorCode.TOO_LARGE)
    if path == "":
        return _err(ErrorCode.BAD_PATH)
    assert isinstance(path, str)
    return path


def _answer(run: RunContext, func: str, op: str, path: str, *rest: Any) -> _fsgate.Answer:
    answer = _fsgate.call_in_run(run, op, path, *rest)
    if answer.reason is not None and abi.error_for_reason(answer.reason) == ErrorCode.DENIED:
        run.deny(f"{_FS}#{func}", CAPABILITIES[f"{_FS}#{func}"], path)  # the Fs value's own grant refused it
    return answer


def _read_file(run: RunContext, args: Args) -> Any:
    path = _gate(run, "read", args)
    if not isinstance(path, str):
        return path
    pieces: list[bytes] = []
    # ``whole``: a file longer than one call may carry (``max_value_bytes``, and never more than a list can
    # hold) is refused (over-budget → too-large) from its root block, before a byte is copied.
    cap = min(_MAX_LIST, run.max_value_bytes)
    answer = _answer(run, "read", "read_into", path, cap, lambda _at, piece: pieces.append(bytes(piece)), True)
    if answer.reason is not None:
        return _err(abi.error_for_reason(answer.reason))
    _size, cid = answer.value
    if cid not in run.reads:
        run.reads.append(cid)
    return ("ok", pieces[0] if len(pieces) == 1 else b"".join(pieces))


def _read_at(run: RunContext, args: Args) -> Any:
    path = _gate(run, "read-at", args)
    if not isinstance(path, str):
        return path
    offset, length = int(args.value(1)), int(args.value(2))
    # at most one byte past the bound is read: enough to know the answer is too large
    answer = _answer(run, "read-at", "read_at", path, offset, min(length, run.max_value_bytes + 1))
    if answer.reason is not None:
        return _err(abi.error_for_reason(answer.reason))
    data, cid = answer.value
    if len(data) > run.max_value_bytes:
        return _err(ErrorCode.TOO_LARGE)
    if cid not in run.reads:
        run.reads.append(cid)
    return ("ok", data)


def _fs_write(run: RunContext, args: Args) -> Any:
    path = _gate(run, "write", args)
    if not isinstance(path, str):
        return path
    if args.size(1) > run.max_value_bytes:
        return _err(ErrorCode.TOO_LARGE)
    answer = _answer(run, "write", "write", path, args.value(1))
    if answer.reason is not None:
        return _err(abi.error_for_reason(answer.reason))
    run.fs = answer.fs
    run.wrote = True
    return _OK


def _ls(run: RunContext, args: Args) -> Any:
    path = _gate(run, "ls", args)
    if not isinstance(path, str):
        return path
    answer = _answer(run, "ls", "entries", path)
    if answer.reason is not None:
        return _err(abi.error_for_reason(answer.reason))
    entries = [(e["name"], e["kind"], e["size"], e["cid"]) for e in answer.value]
    return _answer_value(run, _ENTRIES, entries)


def _rm(run: RunContext, args: Args) -> Any:
    path = _gate(run, "rm", args)
    if not isinstance(path, str):
        return path
    answer = _answer(run, "rm", "rm", path)
    if answer.reason is not None:
        return _err(abi.error_for_reason(answer.reason))
    run.fs = answer.fs
    run.wrote = True
    return _OK


def _stat(run: RunContext, args: Args) -> Any:
    path = _gate(run, "stat", args)
    if not isinstance(path, str):
        return path
    answer = _answer(run, "stat", "stat", path)
    if answer.reason is not None:
        return _err(abi.error_for_reason(answer.reason))
    meta = answer.value
    return _answer_value(run, _METADATA, (meta["kind"], meta["size"], meta["cid"]))


#: instance → function → handler, over values: what the host's own canonical ABI calls.
WORLD_FUNCTIONS: Final[dict[str, dict[str, WorldHandler]]] = {
    _TYPES: {},
    _OUTPUT: {"write": _write},
    _STDIN: {"read": _stdin_read},
    _FS: {"read": _read_file, "read-at": _read_at, "write": _fs_write, "ls": _ls, "rm": _rm, "stat": _stat},
}


# ---- the same functions over wasmtime's C value vectors


class _CArgs:
    """:class:`Args` over a ``wasmtime_component_val_t`` vector (already checked to be of the host's types)."""

    __slots__ = ("args", "types")

    def __init__(self, args: Any, types: tuple[WitType, ...]) -> None:
        self.args = args
        self.types = types

    def size(self, i: int) -> int:
        c = self.args[i]
        return int(c.of.string.size if self.types[i].kind == "string" else c.of.list.size)

    def value(self, i: int) -> Any:
        t = self.types[i]
        c = self.args[i]
        if t.kind == "enum":
            return name_of(c.of.enumeration)
        if t.kind == "string":
            return name_of(c.of.string)
        if t == _BYTES:
            return bytes_of(c.of.list)
        return read(t, c)


def _c_handler(name: str, handler: WorldHandler) -> Handler:
    params, result = SIGNATURES[name]
    assert result is not None

    def c_handler(run: RunContext, _cctx: Any, args: Any, results: Any) -> bool | None:
        answer = handler(run, _CArgs(args, params))
        if answer is None:
            return None
        write(result, answer, ctypes.pointer(results[0]))
        return True

    return c_handler


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


#: instance → function → handler over C values: everything a component of the world may import, for the engine's
#: component path.
HOST_FUNCTIONS: Final[dict[str, dict[str, Handler]]] = {
    instance: {f: _c_handler(f"{instance}#{f}", h) for f, h in funcs.items()}
    for instance, funcs in WORLD_FUNCTIONS.items()
}
