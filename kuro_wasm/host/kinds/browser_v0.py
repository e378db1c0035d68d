"""Guest kind ``kuro-browser-v0``: the original kuro's browser guests, run unchanged.

## The one decision
A module is this kind's only when it has **exactly** the original browser
host's shape (``kuro.host.stream-browser`` + ``stream_worker.js``, and the
``fs_read`` capability demo), because ``kuro-abi-v1`` also runs import-free
modules and the two must never disagree about a guest:

* it exports its memory as ``memory``, and
* either it has **no imports** and exports ``run(i32, i32) -> i32`` (the
  stream guest), or its **only** import is the two-parameter
  ``kuro.fs_read(buf_ptr, len) -> i32`` and it exports ``run`` taking ``i32``
  parameters and returning one ``i32`` (the checksum guest's ``run(len)``).
  That import cannot be ABI v1's (whose ``fs_read`` has four parameters), so
  such a module is unmistakably a browser guest, and a wrong ``run`` or a
  missing ``memory`` is this kind's load error; any other shape is not this
  kind's (``claim`` answers ``""``) and ``kuro-abi-v1`` decides.

The protocol, as the original's worker ran it: the export's ``i32`` result is
the exit code; when it returns, the bytes at **offset 2048** of ``memory`` up
to the first NUL (or the end of memory) are the guest's output, delivered as
**one stdout chunk** (none if empty) through the same stream and output cap as
every run — text that does not fit ends the run ``output-capped`` (125), its
exit code lost, as when an ABI v1 guest writes past the cap. A trap produces no
chunk. The bytes are kept as written; the original decoded them as UTF-8 text
(``"あこsum=42"`` is the same either way; invalid UTF-8 is not replaced here).

``fs_read(buf_ptr, len)`` reads the one file the guest spec names
(``kuro/fs-read-path``; a spec without it is a ``load-error`` before anything
runs — the original demo's file was fixed in its page, here it is never
implied). It needs ``fs/read``: without it the call returns ``-1``, copies
nothing and is recorded in ``kuro/denials`` (the original recorded nothing).
With it, min(size, len) bytes are copied to ``buf_ptr`` and the file's full
size is returned (the original copied the whole file whatever ``len`` said,
and returned ``len``); other failures are ABI v1's error codes (``-2`` not
found, ``-3`` a directory, ``-5`` a range outside memory, ``-7`` a missing block).

## Effects
Reads guest memory after the export returns; the fs import reads kuro.fs
through :mod:`kuro_wasm.host.fsgate` (the run's scratch directory too, when the
named file is under ``tmp/`` and ``fs/scratch`` is granted).

## Not done here
The original's ``stdin``/``cancel`` worker messages (acknowledged no-ops there)
have no import here; kill and the deadline work as for every guest. The
original always called ``run`` whatever the spec's export said; here the spec's
export is called (the receipt says which), with ABI v1's argument rules.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any, Final

import wasmtime

from kuro_wasm.host import engine as _engine
from kuro_wasm.host import fsgate as _fsgate
from kuro_wasm.host.calls import define, exported_memory, guest_memory
from kuro_wasm.host.context import RunContext
from kuro_wasm.host.engine import CallOutcome
from kuro_wasm.host.kind import CoreModuleKind, Entry, core_entry
from kuro_wasm.model import abi
from kuro_wasm.model.abi import ErrorCode
from kuro_wasm.model.wasm_shape import FuncSig, WasmShape

__all__ = ["FS_READ", "KIND", "PATH_KEY", "RUN", "TEXT_OFFSET", "BrowserV0"]

#: Where the guest leaves its output text (NUL-terminated), as the original's worker read it.
TEXT_OFFSET: Final = 2048
#: The two-parameter ``kuro.fs_read(buf_ptr, len) -> i32`` of the original's capability demo.
FS_READ: Final = FuncSig(("i32", "i32"), ("i32",))
#: The stream guest's entry: ``run(a, b) -> exit code``.
RUN: Final = FuncSig(("i32", "i32"), ("i32",))
#: The guest-spec key naming the file ``fs_read`` reads.
PATH_KEY: Final = "kuro/fs-read-path"
_SCAN: Final = 65536  # bytes of memory examined per step while looking for the NUL


def _fs_read(run: RunContext, caller: Any, cctx: Any, p: Any) -> int | None:
    path = run.command.get(PATH_KEY)
    if not isinstance(path, str):  # the entry needs the key, so this is a host bug if it happens
        raise RuntimeError(f"kuro-browser-v0 fs_read without {PATH_KEY} in the spec")
    inner = _fsgate.scratch_path(run, path)
    if inner is None and "fs/read" not in run.grant:
        return run.deny("fs_read", "fs/read", path)
    mem = guest_memory(run, caller, cctx)
    target = path if inner is None else inner
    return _fsgate.read_into_guest(run, "fs_read", target, mem, p[0], p[1], scratch=inner is not None)


def _text_span(store: wasmtime.Store, memory: Any) -> tuple[int, int]:
    """(address, length) of the bytes at :data:`TEXT_OFFSET` up to the first NUL or the end of memory (length 0
    if memory is smaller). Measured a piece at a time, none kept: text longer than the output cap is never
    copied whole (it may be all of a 4 GiB memory)."""
    base, size = exported_memory(store, memory)
    at = TEXT_OFFSET
    while at < size:
        end = ctypes.string_at(base + at, min(_SCAN, size - at)).find(b"\0")
        if end >= 0:
            return base + TEXT_OFFSET, at + end - TEXT_OFFSET
        at += _SCAN
    return base + TEXT_OFFSET, max(0, size - TEXT_OFFSET)


def _is_run(shape: WasmShape, exact: FuncSig | None) -> bool:
    found = shape.export("run")
    if found is None or found.kind != "func" or found.sig is None:
        return False
    if exact is not None:
        return found.sig == exact
    return found.sig.results == ("i32",) and all(t == "i32" for t in found.sig.params)


class BrowserV0(CoreModuleKind):
    """The original kuro's browser guests (see the module docstring for the exact shape)."""

    name = "kuro-browser-v0"
    import_modules = frozenset({abi.IMPORT_MODULE})

    def define_functions(self, linker: wasmtime.Linker) -> None:
        define(linker, abi.IMPORT_MODULE, "fs_read", FS_READ.params, FS_READ.results, _fs_read, fault=FAULT)

    def claim(self, shape: WasmShape) -> str | None:
        if shape.component:
            return ""
        for imp in shape.imports:
            if (imp.module, imp.name, imp.kind, imp.sig) != (abi.IMPORT_MODULE, "fs_read", "func", FS_READ):
                return ""  # not the original's shape: kuro-abi-v1 (or no kind) explains
        memory = shape.export("memory")
        has_memory = memory is not None and memory.kind == "memory"
        if not shape.imports:
            return None if has_memory and _is_run(shape, RUN) else ""
        if not has_memory:
            return 'kuro-browser-v0 guest (imports kuro.fs_read(buf_ptr, len)) must export its memory as "memory"'
        if not _is_run(shape, None):
            return "kuro-browser-v0 guest (imports kuro.fs_read(buf_ptr, len)) must export run(i32 ...) -> i32"
        return None

    def entry(self, shape: WasmShape, export: str, args: Sequence[object]) -> Entry | str:
        entry = core_entry(shape, export, args)
        if isinstance(entry, str) or not shape.imports:
            return entry
        why = "this kuro-browser-v0 guest imports fs_read(buf_ptr, len), which reads the file the spec names"
        return Entry(entry.export, entry.sig, entry.args, needs=((PATH_KEY, why),))

    def call(self, store: wasmtime.Store, instance: Any, entry: Entry, run: RunContext) -> CallOutcome:
        run.memory = _engine.lookup_memory(store, instance)
        func = _engine.lookup_func(store, instance, entry.export, run.context)
        outcome = _engine.call_export(store, func, entry.sig.params, entry.args, entry.sig.results, run.context)
        if outcome.trap is not None or outcome.error is not None:
            return outcome
        address, length = _text_span(store, run.memory)
        if length and not (run.admit(length) and run.emit("stdout", ctypes.string_at(address, length))):
            run.stop("output-capped")
            return CallOutcome(error="the guest's text does not fit the output cap")
        return outcome


FAULT: Final = int(ErrorCode.FAULT)
KIND: Final = BrowserV0()
