"""Guest loading: bytes by CID, verified, compiled (cached), checked against the ABI, pre-linked.

## The one decision
A guest is named by its CID and nothing else, and bytes that do not hash to
that CID are never compiled: every block on the way (a raw block, or each
block of a UnixFS file DAG for a large module) is re-hashed here, whatever the
store promises. A module already compiled (in memory, or on disk under a keyed
BLAKE3 tag bound to the CID and engine, see :mod:`.cache`) is not fetched again:
it was verified when it was compiled. Then the module must be a wasm *binary* (text is compiled only
on the way in, by :func:`add_guest`), may import only what
:data:`kuro_wasm.model.abi.IMPORTS` declares (the load error names the offending
import), and must export the requested function with a signature the args fit.
Failures are values (:class:`LoadFailure`), with the receipt outcome they
imply: ``guest-not-found`` (127) when the store lacks the CID, ``load-error``
(126) for everything else.

## Effects
Reads the block store; compiles through :mod:`kuro_wasm.host.cache`; pre-links with
the engine's shared linker (:func:`kuro_wasm.host.kinds.kuro_v1.linker_for`) and keeps the
``InstancePre`` per (CID, engine) in memory so a warm run only instantiates.

## Not done here
No fetching from a network; no WASI; no string arguments.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import wasmtime

from kuro_fs.blocks import BlockStore
from kuro_fs.cid import parse as parse_cid
from kuro_fs.errors import CorruptBlock, DagPbError, InvalidCID, KuroFsError
from kuro_fs.unixfs import MissingBlock, iter_file, write_file
from kuro_wasm.errors import LoadError
from kuro_wasm.host.cache import ModuleCache
from kuro_wasm.host.engine import EngineConfig, engine_for, engine_key
from kuro_wasm.host.kinds.kuro_v1 import linker_for
from kuro_wasm.model import abi

__all__ = [
    "Export",
    "LoadFailure",
    "Prepared",
    "add_guest",
    "check_imports",
    "fetch_guest",
    "forget_prepared",
    "prepare",
    "resolve",
]

_WASM_MAGIC: Final = b"\0asm"
_PREPARED_ENTRIES: Final = 256


@dataclass(frozen=True, slots=True)
class LoadFailure:
    """Why a guest could not be loaded, and the receipt outcome that implies."""

    outcome: str  # "load-error" | "guest-not-found"
    error: str


@dataclass(frozen=True, slots=True)
class Export:
    """A function export's wasm signature."""

    params: tuple[str, ...]
    results: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class Prepared:
    """A verified, compiled, import-checked, pre-linked guest."""

    cid: str
    module: wasmtime.Module
    pre: wasmtime.InstancePre
    exports: dict[str, Export]


def _valtypes(types: Sequence[Any]) -> tuple[str, ...]:
    return tuple(str(t) for t in types)


# ---- bytes by CID


class _Corrupt(Exception):
    pass


def _verified_get(store: BlockStore) -> Any:
    def get(cid: str) -> bytes | None:
        block = store.get(cid)
        if block is not None and hashlib.sha256(block).digest() != parse_cid(cid).digest:
            raise _Corrupt(cid)
        return block

    return get


def fetch_guest(store: BlockStore, cid: str) -> bytes | LoadFailure:
    """The guest bytes named by ``cid``, each block re-hashed, or the failure.

    A raw CID is one block; a dag-pb CID is a UnixFS file DAG. The root block
    missing → ``guest-not-found``; any other problem (a bad CID, a dag-cbor CID,
    an inner block missing, a block that does not hash to its CID) → ``load-error``.
    """
    try:
        parsed = parse_cid(cid)
    except InvalidCID as exc:
        return LoadFailure("load-error", f"guest is not a CID: {exc}")
    get = _verified_get(store)
    try:
        if get(cid) is None:
            return LoadFailure("guest-not-found", f"guest {cid} is not in the block store")
        if parsed.codec == "raw":
            block = get(cid)
            assert block is not None
            return bytes(block)
        if parsed.codec != "dag-pb":
            return LoadFailure("load-error", f"guest {cid} is {parsed.codec}, not a raw block or a UnixFS file")
        return b"".join(bytes(piece) for piece in iter_file(get, cid))
    except (_Corrupt, CorruptBlock) as exc:
        return LoadFailure("load-error", f"guest block {exc} does not hash to its CID; not compiled")
    except MissingBlock as exc:
        return LoadFailure("load-error", f"guest {cid} is incomplete: {exc}")
    except (DagPbError, KuroFsError, ValueError) as exc:
        return LoadFailure("load-error", f"guest {cid} is not a UnixFS file: {exc}")


# ---- checks


def check_imports(module: wasmtime.Module) -> str | None:
    """None if every import of ``module`` is in the ABI; else a message naming the first offender."""
    for imp in module.imports:
        ty = imp.type
        if isinstance(ty, wasmtime.FuncType):
            kind, params, results = "func", _valtypes(ty.params), _valtypes(ty.results)
        else:
            kind = type(ty).__name__.removesuffix("Type").lower()
            params, results = (), ()
        reason = abi.check_import(imp.module, imp.name or "", params, results, kind)
        if reason is not None:
            return reason
    return None


def _exports(module: wasmtime.Module) -> dict[str, Export]:
    out: dict[str, Export] = {}
    for exp in module.exports:
        if isinstance(exp.type, wasmtime.FuncType):
            out[exp.name] = Export(_valtypes(exp.type.params), _valtypes(exp.type.results))
    return out


# ---- prepare (cached)

_PREPARED: OrderedDict[tuple[str, str], Prepared] = OrderedDict()
_PREPARED_LOCK = threading.Lock()


def prepare(store: BlockStore, cid: str, config: EngineConfig, cache: ModuleCache) -> Prepared | LoadFailure:
    """The guest ``cid`` ready to instantiate in an engine of ``config``, or why not.

    A warm call (same CID and engine) only checks that the store still holds
    the guest; the compiled, checked, pre-linked module is reused.
    """
    key = (cid, engine_key(config))
    with _PREPARED_LOCK:
        ready = _PREPARED.get(key)
    if ready is not None:
        try:
            present = store.has(cid)
        except KuroFsError as exc:
            return LoadFailure("load-error", f"guest {cid}: {exc}")
        if not present:
            return LoadFailure("guest-not-found", f"guest {cid} is not in the block store")
        return ready
    engine = engine_for(config)
    fetched: list[bytes | LoadFailure] = []

    def wasm() -> bytes:
        got = fetch_guest(store, cid)
        fetched.append(got)
        if isinstance(got, LoadFailure):
            raise _Refused
        if not got.startswith(_WASM_MAGIC):
            fetched[-1] = LoadFailure("load-error", f"guest {cid} is not a wasm binary (no \\0asm header)")
            raise _Refused
        return got

    # A disk or memory hit skips the fetch, but the guest must still be in the store.
    if not _present(store, cid):
        return LoadFailure("guest-not-found", f"guest {cid} is not in the block store")
    try:
        module = cache.get_or_compile(engine, key[1], cid, wasm)
    except _Refused:
        failure = fetched[-1]
        assert isinstance(failure, LoadFailure)
        return failure
    except wasmtime.WasmtimeError as exc:
        return LoadFailure("load-error", f"guest {cid} does not compile: {_first_line(exc)}")
    reason = check_imports(module)
    if reason is not None:
        return LoadFailure("load-error", reason)
    try:
        pre = linker_for(engine).instantiate_pre(module)
    except wasmtime.WasmtimeError as exc:  # pragma: no cover - imports were checked above
        return LoadFailure("load-error", f"guest {cid} cannot be linked: {_first_line(exc)}")
    ready = Prepared(cid, module, pre, _exports(module))
    with _PREPARED_LOCK:
        _PREPARED[key] = ready
        while len(_PREPARED) > _PREPARED_ENTRIES:
            _PREPARED.popitem(last=False)
    return ready


class _Refused(Exception):
    pass


def _present(store: BlockStore, cid: str) -> bool:
    try:
        return store.has(cid)
    except KuroFsError:
        return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def resolve(ready: Prepared, export: str, args: Sequence[object]) -> Export | LoadFailure:
    """The export ``export`` of ``ready`` if it is a function the ``args`` fit, else a load-error."""
    found = ready.exports.get(export)
    if found is None:
        return LoadFailure("load-error", f"guest {ready.cid} has no function export {export!r}")
    if len(found.results) > 1 or any(r != "i32" for r in found.results):
        return LoadFailure(
            "load-error", f"export {export!r} returns ({' '.join(found.results)}); an exit code is one i32 or nothing"
        )
    reason = abi.check_args(found.params, list(args))
    if reason is not None:
        return LoadFailure("load-error", f"export {export!r}: {reason}")
    return found


def forget_prepared() -> None:
    """Drop every pre-linked guest (tests use this to exercise the cache layers)."""
    with _PREPARED_LOCK:
        _PREPARED.clear()


# ---- adding guests


def add_guest(store: BlockStore, wasm_or_wat: bytes | str) -> str:
    """Store a guest module and return its CID (WAT text is compiled to a binary first).

    A module of up to one chunk (262144 bytes) is one raw block; a larger one
    is a UnixFS file DAG (dag-pb root). The module is validated first, so a
    stored guest at least compiles.

    Raises LoadError: if the text is not WAT, the bytes are not a valid wasm module, or
    ``wasm_or_wat`` is neither bytes-like nor text.
    """
    if isinstance(wasm_or_wat, str):
        try:
            wasm_or_wat = wasm_or_wat.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: not text any compiler reads
            raise LoadError(f"WAT text is not valid Unicode: {exc}") from exc
    if not isinstance(wasm_or_wat, (bytes, bytearray, memoryview)):  # bytes(int) would be that many zero bytes
        raise LoadError(f"a guest is wasm bytes or WAT text, got {type(wasm_or_wat).__name__}")
    try:
        data = bytes(wasm_or_wat)
    except ValueError as exc:  # a released memoryview
        raise LoadError(f"guest bytes are unreadable: {exc}") from exc
    if not data.startswith(_WASM_MAGIC):
        try:
            data = bytes(wasmtime.wat2wasm(data.decode("utf-8")))
        except (UnicodeDecodeError, wasmtime.WasmtimeError) as exc:
            raise LoadError(f"not a wasm binary and not WAT text: {_first_line(exc)}") from exc
    try:
        wasmtime.Module.validate(engine_for(EngineConfig()), data)
    except wasmtime.WasmtimeError as exc:
        raise LoadError(f"not a valid wasm module: {_first_line(exc)}") from exc
    return write_file(store.put, data).cid
