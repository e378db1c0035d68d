"""Guest loading: bytes by CID, verified, compiled (cached), checked against the ABI, pre-linked.

## The one decision
A guest is named by its CID and nothing else, and bytes that do not hash to
that CID are never compiled: every block on the way (a raw block, or each
block of a UnixFS file DAG for a large module) is re-hashed here, whatever the
store promises. A module already compiled (in memory, or on disk under a keyed
BLAKE3 tag bound to the CID and engine, see :mod:`.cache`) is not fetched again:
it was verified when it was compiled. Then the module must be a wasm *binary* (text is compiled only
on the way in, by :func:`add_guest`), and one guest kind must claim it
(:func:`kuro_wasm.host.kinds.classify`, deciding from the module's shape as read
from its verified bytes — :mod:`kuro_wasm.model.wasm_shape` — and kept beside the
compiled artifact, so wasmtime-py is never asked for a type it cannot represent);
the kind then checks the requested export and the args.
Failures are values (:class:`LoadFailure`), with the receipt outcome they
imply: ``guest-not-found`` (127) when the store lacks the CID, ``load-error``
(126) for everything else — including a store that could not answer (a gateway
store's typed network errors), whose reference the failure names.

## Effects
Reads the block store; compiles through :mod:`kuro_wasm.host.cache`; pre-links with
the kind's shared linker for the engine and keeps the ``InstancePre`` per
(CID, engine) in memory so a warm run only instantiates.

## Not done here
No network code: a store behind a gateway (:class:`kuro_fs.gateway.client.GatewayBlockStore`)
fetches and verifies; the loader re-hashes what it is given all the same.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import wasmtime

from kuro_fs.blocks import BlockStore
from kuro_fs.cid import cid_for, matches
from kuro_fs.cid import parse as parse_cid
from kuro_fs.errors import BlockStoreError, DagPbError, InvalidCID, KuroFsError
from kuro_fs.fileread import read_bytes
from kuro_fs.unixfs import MissingBlock, file_root_info, write_file
from kuro_wasm.errors import LoadError
from kuro_wasm.host.cache import COMPONENT, ModuleCache, cache_for
from kuro_wasm.host.engine import EngineConfig, engine_for, engine_key
from kuro_wasm.host.kind import Entry, GuestKind, GuestParts
from kuro_wasm.host.kinds import classify
from kuro_wasm.model.sessions import GUEST_OPTIONAL_KEYS
from kuro_wasm.model.wasm_shape import ShapeError, WasmShape, is_component, read_shape

__all__ = [
    "LoadFailure",
    "MAX_GUEST_BYTES",
    "unreadable",
    "Prepared",
    "add_guest",
    "args_from_words",
    "check_imports",
    "compiled_guest",
    "fetch_guest",
    "forget_prepared",
    "kind_name",
    "prepare",
    "resolve",
]

_WASM_MAGIC: Final = b"\0asm"
_PREPARED_ENTRIES: Final = 256
#: The most string and bytes args a resolved entry is remembered with (its key and its lowered args hold them).
_ENTRY_ARG_BYTES: Final = 4096


@dataclass(frozen=True, slots=True)
class LoadFailure:
    """Why a guest could not be loaded, and the receipt outcome that implies."""

    outcome: str  # "load-error" | "guest-not-found"
    error: str


@dataclass(frozen=True, eq=False)
class Prepared:
    """A verified, compiled, pre-linked guest, with its shape and the kind that runs it."""

    cid: str
    module: Any  # the compiled guest (a wasmtime.Module for core-module kinds)
    pre: Any  # the kind's pre-linked form of it (a wasmtime.InstancePre for core-module kinds)
    shape: WasmShape
    kind: GuestKind
    #: the core modules the kind linked the guest from (:class:`~kuro_wasm.host.kind.GuestParts`), by name, in the
    #: order it asked for them (empty: it linked the compiled guest): what a worker is sent instead of the whole
    parts: tuple[tuple[str, wasmtime.Module], ...] = ()
    #: resolved entries by (export, args with their types): a warm run of the same call resolves nothing
    entries: dict[tuple[Any, ...], Entry | LoadFailure] = field(default_factory=dict, repr=False)


# ---- bytes by CID


class _Corrupt(Exception):
    pass


def _verified_get(store: BlockStore) -> Any:
    def get(cid: str) -> bytes | None:
        block = store.get(cid)
        if block is not None and not matches(parse_cid(cid), block):
            raise _Corrupt(cid)
        return block

    return get


#: The most bytes a guest module or component may be (a DAG of a few blocks can claim terabytes; the largest real
#: guests here are ~20 MB components). Checked from the file's root block, before a leaf is read.
MAX_GUEST_BYTES: Final = 1 << 30


class _Verified:
    """A store whose ``get`` is the loader's re-hashing one (what kuro_fs.fileread reads through)."""

    __slots__ = ("get",)

    def __init__(self, get: Any) -> None:
        self.get = get


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
        size = file_root_info(get, cid).size  # what the DAG claims, from its root: checked before any leaf
        if size > MAX_GUEST_BYTES:
            return LoadFailure(
                "load-error", f"guest {cid} claims {size} bytes, more than a guest may be ({MAX_GUEST_BYTES})"
            )
        return read_bytes(_Verified(get), cid, size=size)  # one buffer; the DAG must yield exactly the size claimed
    except _Corrupt as exc:
        return LoadFailure("load-error", f"guest {cid}: block {exc} does not hash to its CID; not compiled")
    except MissingBlock as exc:
        return LoadFailure("load-error", f"guest {cid} is incomplete: {exc}")
    except BlockStoreError as exc:  # corrupt on disk, a gateway that lied, was down, slow or refusing
        return LoadFailure("load-error", unreadable(cid, exc))
    except (DagPbError, KuroFsError, ValueError) as exc:
        return LoadFailure("load-error", f"guest {cid} is not a UnixFS file: {exc}")


def unreadable(cid: str, exc: KuroFsError) -> str:
    """The one line a ``load-error`` receipt gives when the store failed to hand over a block of guest ``cid``.

    It names the guest, the block and what failed (the store error's own text, which names the
    block, and its reference: ``corrupt-block``, ``gateway-lied``, ``gateway-unreachable`` …).

    >>> from kuro_fs.errors import CorruptBlock
    >>> unreadable("g", CorruptBlock("b"))
    'guest g could not be read: corrupt block b: stored bytes do not hash to this CID [corrupt-block]; not compiled'
    """
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"guest {cid} could not be read: {text} [{exc.reference}]; not compiled"


# ---- the shape, kept beside the compiled artifact


def _describe_with(engine: wasmtime.Engine) -> Any:
    def describe(data: bytes, compiled: Any) -> bytes:
        try:
            if is_component(data):
                from kuro_wasm.host.component_types import component_shape

                return component_shape(engine, compiled, data).to_bytes()
            return read_shape(data).to_bytes()
        except (ShapeError, ValueError) as exc:
            raise _Unreadable(str(exc)) from exc

    return describe


class _Unreadable(Exception):
    pass


def check_imports(wasm: bytes) -> str | None:
    """None if a guest kind of this host provides every import of the module ``wasm``; else why not.

    The text names the first offending import (the ``load-error`` a run of it would get).
    A component is compiled to read its imports (wasmtime knows their types).
    Raises ShapeError: ``wasm`` is not a readable wasm binary; wasmtime.WasmtimeError:
    a component that does not compile.
    """
    if is_component(wasm):
        from wasmtime.component import Component

        from kuro_wasm.host.component_types import component_shape

        engine = engine_for(EngineConfig())
        kind = classify(component_shape(engine, Component(engine, wasm)))
        return kind if isinstance(kind, str) else None
    kind = classify(read_shape(wasm))
    return kind if isinstance(kind, str) else None


# ---- prepare (cached)

_PREPARED: OrderedDict[tuple[str, str], Prepared] = OrderedDict()
_PREPARED_LOCK = threading.RLock()  # (re-entrant: a signal handler may make a run on a thread inside it)


def prepare(
    store: BlockStore, cid: str, config: EngineConfig, cache: ModuleCache | None = None, *, home: Any = None
) -> Prepared | LoadFailure:
    """The guest ``cid`` ready to instantiate in an engine of ``config``, or why not.

    A warm call (same CID and engine) only checks that the store still holds
    the guest; the compiled, checked, pre-linked module is reused. A cold one
    loads it through ``cache``, by default the cache of ``home``
    (:func:`~kuro_wasm.host.cache.cache_for`, looked up only then: it reads the
    environment).
    """
    key = (cid, engine_key(config))
    with _PREPARED_LOCK:
        ready = _PREPARED.get(key)
    if ready is not None:
        try:
            present = store.has(cid)
        except KuroFsError as exc:
            return LoadFailure("load-error", f"guest {cid} could not be looked up: {exc} [{exc.reference}]")
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
    held = _present(store, cid)
    if isinstance(held, LoadFailure):
        return held
    if not held:
        return LoadFailure("guest-not-found", f"guest {cid} is not in the block store")
    if cache is None:
        cache = cache_for(home)
    describe = _describe_with(engine)
    try:
        deferred = _deferred(cache, engine, key[1], cid, wasm, describe)
        if deferred is not None:
            module, shape = deferred
        else:
            module, meta = cache.load(engine, key[1], cid, wasm, describe)
            shape = WasmShape.from_bytes(meta)
    except _Refused:
        failure = fetched[-1]
        assert isinstance(failure, LoadFailure)
        return failure
    except wasmtime.WasmtimeError as exc:
        return LoadFailure("load-error", f"guest {cid} does not compile: {_first_line(exc)}")
    except (_Unreadable, ShapeError) as exc:
        return LoadFailure("load-error", f"guest {cid}: cannot read its imports and exports: {exc}")
    kind = classify(shape)
    if isinstance(kind, str):
        return LoadFailure("load-error", kind)
    parts: list[tuple[str, wasmtime.Module]] = []
    data = _once(wasm)
    try:
        pre = kind.link(engine, module, GuestParts(shape, _parts(cache, engine, key, data, parts), data))
    except wasmtime.WasmtimeError as exc:  # an import the kind cannot link (a component's mistyped host function)
        return LoadFailure("load-error", f"guest {cid} cannot be linked: {_first_line(exc)}")
    except _Refused:  # the guest's bytes, needed for a part of it not cached, could not be fetched
        failure = fetched[-1]
        assert isinstance(failure, LoadFailure)
        return failure
    ready = Prepared(cid, module, pre, shape, kind, tuple(parts))
    with _PREPARED_LOCK:
        _PREPARED[key] = ready
        while len(_PREPARED) > _PREPARED_ENTRIES:
            _PREPARED.popitem(last=False)
    return ready


class _Refused(Exception):
    pass


def _deferred(
    cache: ModuleCache,
    engine: wasmtime.Engine,
    engine_key: str,
    cid: str,
    wasm: Callable[[], bytes],
    describe: Callable[[bytes, Any], bytes],
) -> tuple[Any, WasmShape] | None:
    """For a cached component whose kind links it from its shape and parts alone
    (:meth:`~kuro_wasm.host.kind.GuestKind.links_from_parts`): the compiled component deferred, and the shape;
    else None (loaded whole). The shape is the cache's, verified under its keyed tag; one that does not read is
    loaded whole (and described again)."""
    meta = cache.stored_meta(engine_key, cid, COMPONENT)
    if meta is None:
        return None
    try:
        shape = WasmShape.from_bytes(meta)
    except ShapeError:
        return None
    kind = classify(shape)
    if isinstance(kind, str) or not kind.links_from_parts(shape):
        return None

    def load() -> Any:
        try:
            return cache.load(engine, engine_key, cid, wasm, describe)[0]
        except _Refused:
            why = "its compiled component must be compiled again and its bytes cannot be read"
            raise LoadError(f"guest {cid}: {why}") from None

    return _Deferred(load), shape


class _Deferred:
    """A compiled guest loaded (from the module cache, under its rules) the first time anything touches it."""

    __slots__ = ("_load", "_loaded")

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load
        self._loaded: list[Any] = []

    def loaded(self) -> Any:
        if not self._loaded:
            self._loaded.append(self._load())
        return self._loaded[0]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loaded(), name)


def compiled_guest(ready: Prepared) -> Any:
    """The compiled guest of ``ready`` itself (a ``wasmtime.Module`` or ``wasmtime.component.Component``): one
    the loader deferred (:meth:`~kuro_wasm.host.kind.GuestKind.links_from_parts`) is loaded now.

    Raises wasmtime.WasmtimeError or LoadError: a deferred component that must be compiled again (its cache entry
    damaged) and whose bytes do not compile or cannot be fetched.
    """
    return ready.module.loaded() if isinstance(ready.module, _Deferred) else ready.module


def _once(wasm: Callable[[], bytes]) -> Callable[[], bytes]:
    """``wasm`` (the guest's bytes, fetched and verified) called at most once."""
    got: list[bytes] = []

    def data() -> bytes:
        if not got:
            got.append(wasm())
        return got[0]

    return data


def _parts(
    cache: ModuleCache,
    engine: wasmtime.Engine,
    key: tuple[str, str],
    data: Callable[[], bytes],
    used: list[tuple[str, wasmtime.Module]],
) -> Callable[[str, Callable[[bytes], bytes]], wasmtime.Module]:
    """``GuestParts.core_module`` for guest ``key[0]``: cached under ``CID#name``, and appended to ``used``; the
    guest's bytes from ``data`` (:func:`_once`)."""

    def core_module(name: str, piece: Callable[[bytes], bytes]) -> wasmtime.Module:
        module = cache.get_or_compile(engine, key[1], f"{key[0]}#{name}", lambda: piece(data()))
        used.append((name, module))
        return module

    return core_module


def _cid_only(block: bytes, codec: str = "raw") -> str:
    """A ``put`` that stores nothing: the CID a block would get."""
    return cid_for(block, codec)


def _present(store: BlockStore, cid: str) -> bool | LoadFailure:
    try:
        return store.has(cid)
    except InvalidCID:
        return False
    except KuroFsError as exc:  # the store could not say (a gateway unreachable …): that is no "not found"
        return LoadFailure("load-error", f"guest {cid} could not be looked up: {exc} [{exc.reference}]")


def _first_line(exc: BaseException) -> str:
    """The error's first line, and the first line of its cause (wasmtime's ``Caused by:``: what is wrong, where)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if "Caused by:" in lines[1:-1]:
        return f"{lines[0]}: {lines[lines.index('Caused by:') + 1]}"
    return lines[0]


def resolve(
    ready: Prepared,
    export: str,
    args: Sequence[object],
    spec: Mapping[str, Any] | None = None,
    max_value_bytes: int | None = None,
) -> Entry | LoadFailure:
    """The entry point ``export`` of ``ready`` called with ``args``, as its kind resolves it, else a load-error.

    ``spec`` is the guest spec being run: a key the entry needs (:attr:`Entry.needs`)
    that it lacks is a load-error too, and so is an optional key (``kuro/env`` …) the
    entry neither needs nor takes (:attr:`Entry.takes`) — decided before anything is instantiated;
    and so is an arg that would carry more than ``max_value_bytes`` across the guest's boundary
    (:attr:`Entry.arg_bytes`, the run's :meth:`~kuro_wasm.model.limits.Limits.value_bound`).
    The kind's answer is remembered per prepared guest (at most 64 distinct calls) when
    every arg is hashable and their strings and bytes are at most 4 KiB: it depends only on the
    guest's shape, the export and the args (types included, so ``True`` is never taken for ``1``).
    """
    try:
        key: tuple[Any, ...] | None = (export, *((type(a), a) for a in args))
        known = ready.entries.get(key)  # type: ignore[arg-type]
    except TypeError:  # an unhashable arg (a list for a component, say): resolve every time
        key, known = None, None
    if key is not None and sum(len(a) for a in args if isinstance(a, (str, bytes))) > _ENTRY_ARG_BYTES:
        key = None  # not kept: 64 calls with a component's 4 MiB args would pin 256 MiB per prepared guest
    if known is None:
        found = ready.kind.entry(ready.shape, export, args)
        known = LoadFailure("load-error", f"guest {ready.cid}: {found}") if isinstance(found, str) else found
        if key is not None and len(ready.entries) < 64:
            ready.entries[key] = known
    entry = known
    if isinstance(entry, LoadFailure):
        return entry
    if max_value_bytes is not None:
        for where, size in entry.arg_bytes:
            if size > max_value_bytes:
                why = f"{size} bytes, more than max_value_bytes ({max_value_bytes}) lets one call carry"
                return LoadFailure("load-error", f"guest {ready.cid}: export {export!r}: {where}: {why}")
    for need, why in entry.needs:
        if spec is None or need not in spec:
            return LoadFailure("load-error", f"guest {ready.cid}: the spec has no {need}: {why}")
    for optional in GUEST_OPTIONAL_KEYS:
        if spec is not None and optional in spec and optional not in entry.takes:
            if all(optional != need for need, _ in entry.needs):
                why = f"a {ready.kind.name} guest's export {export!r} does not use it"
                return LoadFailure("load-error", f"guest {ready.cid}: the spec's {optional} is not for it: {why}")
    return entry


def args_from_words(
    store: BlockStore, cid: str, export: str, words: Sequence[str], *, fuel: bool = False, home: Any = None
) -> list[object] | str | None:
    """The spec's args for ``export`` of ``cid`` from command-line words, as the guest's kind reads them
    (:meth:`~kuro_wasm.host.kind.GuestKind.args_from_words`); a text saying why they cannot be; or None if
    the guest cannot be loaded. Prepares it as a run would (cached), so the run that follows finds it ready."""
    ready = prepare(store, cid, EngineConfig(fuel=fuel), home=home)
    if isinstance(ready, LoadFailure):
        return None
    return ready.kind.args_from_words(ready.shape, export, words)


def kind_name(store: BlockStore, cid: str, *, fuel: bool = False, home: Any = None) -> str | None:
    """The name of the guest kind that runs ``cid`` (``"kuro-abi-v1"``, ``"wasi-preview1"`` …), or None if it
    cannot be loaded. Prepares it as a run would (cached), so the run that follows finds it ready."""
    ready = prepare(store, cid, EngineConfig(fuel=fuel), home=home)
    return None if isinstance(ready, LoadFailure) else ready.kind.name


def forget_prepared() -> None:
    """Drop every pre-linked guest (tests use this to exercise the cache layers)."""
    with _PREPARED_LOCK:
        _PREPARED.clear()


# ---- adding guests


def add_guest(store: BlockStore, wasm_or_wat: bytes | str) -> str:
    """Store a guest module and return its CID (WAT text is compiled to a binary first).

    A module of up to one chunk (262144 bytes) is one raw block; a larger one
    is a UnixFS file DAG (dag-pb root). The module is validated first, so a
    stored guest at least compiles; a component (which wasmtime can only
    validate by compiling it) is compiled, and the compiled form is kept in the
    process's memory cache for its first run.

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
    if is_component(data):
        engine, key = engine_for(EngineConfig()), engine_key(EngineConfig())
        cid = write_file(_cid_only, data).cid
        if not ModuleCache.holds(cid, key):  # compiled in this process already: valid
            from wasmtime.component import Component

            try:
                compiled = Component(engine, data)
                meta = _describe_with(engine)(data, compiled)
            except wasmtime.WasmtimeError as exc:
                raise LoadError(f"not a valid component: {_first_line(exc)}") from exc
            except _Unreadable as exc:
                raise LoadError(f"component types cannot be read: {exc}") from exc
            ModuleCache.seed(cid, key, compiled, meta)
        return write_file(store.put, data).cid
    try:
        wasmtime.Module.validate(engine_for(EngineConfig()), data)
    except wasmtime.WasmtimeError as exc:
        raise LoadError(f"not a valid wasm module: {_first_line(exc)}") from exc
    return write_file(store.put, data).cid
