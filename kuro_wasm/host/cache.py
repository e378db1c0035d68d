"""Compiled guests (core modules and components), cached by (guest CID, wasmtime version, engine config).

## The one decision
Deserializing a wasmtime artifact runs native code that wasmtime produced, so
an artifact is *never* trusted because of where it lies. Every disk entry is the
artifact (``<sha256 of cache key>.cwasm``) plus a tag file beside it holding
``MAGIC ‖ FORMAT ‖ BLAKE3-keyed(mac-key, cache-key ‖ 0 ‖ artifact)``, where
``mac-key`` is derived (BLAKE3 ``derive_key``) from a random per-cache-directory
secret (``.hmac-key``, mode 0600) and the cache key names the guest CID and
:func:`kuro_wasm.host.engine.engine_key` (wasmtime version + config). An entry whose
tag does not verify, whose tag is of another format (an older kuro's
HMAC-SHA256 tag has no FORMAT byte), whose bytes are truncated, or that
wasmtime refuses to deserialize is deleted and the module is recompiled from
verified guest bytes and written again. Files are named by a SHA-256 of the
cache key (never by anything the guest chose) and written atomically (temp
file, fsync, rename), so a crash leaves the old entry or none.

Why keyed BLAKE3 (format 2) and not HMAC-SHA256 (format 1): a warm load of a
~1 MB guest verifies a ~3.3 MB artifact on every process start. Measured side
by side on this 2-core machine (SHA-NI, AVX-512): HMAC-SHA256 1.8–1.9 ms,
keyed BLAKE2b 5–8 ms, SHA-256 as a tree on 2 threads 1.0–1.3 ms quiet but
2–4 ms whenever the other core is busy, keyed BLAKE3 on one thread 0.55–0.6 ms.
An artifact past 8 MiB is hashed on every core only while the load average
leaves a core free (a split hash waits for its slowest thread), through a map
populated as it is made (no page faults for the threads to queue on).
The tag is still a MAC over every byte wasmtime will map.

The MAC defends against corrupt, truncated, stale or swapped entries and
artifacts copied from another machine; it does **not** defend against someone
who can write the home directory (they can read the key too) — the home is
trusted like the block store it holds.

What is compiled is an :class:`Artifact` kind — :data:`MODULE` (``wasmtime.Module``)
or :data:`COMPONENT` (``wasmtime.component.Component``), chosen by the verified
bytes' header — and every rule above holds for both: one tag format, one key
(a component's cache key also names the artifact kind), one memory layer.

A component the host runs as its core modules (:mod:`kuro_wasm.host.kinds.component`) is cached as several entries,
each under every rule above: the component (``COMPONENT``) with its shape beside it (``.meta``: the shape, its plan
as a link program and its imported functions' types, packed, under its own keyed tag, bound to the same cache key),
and each core module as a ``MODULE`` entry named ``CID#core-module-N``. A new process reads the shape alone
(:meth:`ModuleCache.stored_meta`) and the core modules; the component's artifact only if asked for.

## Effects
Process-wide memory layer (a dict, under a lock) in front of the disk layer
under :func:`kuro_fs.home.module_cache_dir`. Compiles with ``wasmtime.Module``
or ``wasmtime.component.Component``.

## Not done here
No eviction of disk entries; no sharing between users.
"""

from __future__ import annotations

import hashlib
import hmac
import mmap
import os
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import wasmtime
from blake3 import blake3

from kuro_fs.atomic import write_atomic
from kuro_fs.home import module_cache_dir
from kuro_wasm.model.wasm_shape import is_component

__all__ = ["ARTIFACTS", "COMPONENT", "MODULE", "Artifact", "CacheStats", "ModuleCache", "cache_for"]


@dataclass(frozen=True, slots=True)
class Artifact:
    """One kind of compiled guest: which bytes it accepts and how it is compiled, serialized and read back."""

    name: str
    accepts: Callable[[bytes], bool]
    compile: Callable[[wasmtime.Engine, bytes], Any]
    serialize: Callable[[Any], bytes]
    deserialize: Callable[[wasmtime.Engine, bytes], Any]
    deserialize_file: Callable[[wasmtime.Engine, str], Any]


#: Core modules (the key format of every entry written before components existed).
MODULE: Final = Artifact(
    "module",
    lambda data: not is_component(data),
    wasmtime.Module,
    lambda m: bytes(m.serialize()),
    wasmtime.Module.deserialize,
    wasmtime.Module.deserialize_file,
)


def _component() -> Any:
    # wasmtime.component (~5 ms to import) loads with the first component, not with every run of a core module
    from wasmtime.component import Component

    return Component


#: Component-model binaries.
COMPONENT: Final = Artifact(
    "component",
    is_component,
    lambda engine, data: _component()(engine, data),
    lambda c: bytes(c.serialize()),
    lambda engine, data: _component().deserialize(engine, data),
    lambda engine, path: _component().deserialize_file(engine, path),
)
#: Every artifact kind, in the order a disk lookup tries them.
ARTIFACTS: Final = (MODULE, COMPONENT)

_MAGIC: Final = b"KUROMOD1"
#: The tag format after the magic: 2 = keyed BLAKE3. (Format 1, HMAC-SHA256, had no format byte.)
_FORMAT: Final = b"\x02"
_HEADER: Final = _MAGIC + _FORMAT
_TAG_LEN: Final = 32
_MAC_CONTEXT: Final = "kuro-wasm module cache 2026-11 artifact tag v2"
#: v2: a component's shape holds its plan; v3: and its imported functions' types (a v2 shape lacks them: not read);
#: v4: and its core modules' imports (a v3 plan lacks them: described again from the verified bytes);
#: v5: packed (:meth:`~kuro_wasm.model.wasm_shape.WasmShape.to_bytes`), a plan as its link program (a v4 shape is JSON)
_META_CONTEXT: Final = "kuro-wasm module cache 2026-12 metadata tag v5"
_MEMORY_ENTRIES: Final = 256
#: Artifacts above this size are tagged with BLAKE3 on every core (a componentize-py guest compiles to ~35 MB) —
#: when the cores are free (:func:`_hash_threads`).
_THREADED: Final = 8 << 20
_CPUS: Final = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _hash_threads(size: int, load: float | None, cpus: int) -> int:
    """How many threads hash ``size`` bytes: every core (``blake3.AUTO``) for an artifact past :data:`_THREADED`
    while the 1-minute load average (None: unknown) leaves a core free beside this one; else one.

    A thread's share of a split hash waits for a core: on a busy machine it is the last to finish, and the
    caller waits for it. A 10.5 MiB artifact, 2 cores, interleaved: on every core 1.1 ms best when the
    other core is idle, but 7–8 ms median at load 8 against 1.7 ms on one thread.

    >>> _hash_threads(9 << 20, 0.4, 2) == blake3.AUTO, _hash_threads(9 << 20, 1.5, 2), _hash_threads(1 << 20, 0.0, 2)
    (True, 1, 1)
    """
    if size > _THREADED and cpus > 1 and load is not None and load + 1 <= cpus:
        return int(blake3.AUTO)
    return 1


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):  # (no load average on this system)
        return None


class CacheStats:
    """Counters for tests and benchmarks: how each module was obtained."""

    def __init__(self) -> None:
        self.memory_hits = 0
        self.disk_hits = 0
        self.compiles = 0
        self.discarded = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "memory_hits": self.memory_hits,
            "disk_hits": self.disk_hits,
            "compiles": self.compiles,
            "discarded": self.discarded,
        }


#: A shared read-only map of an artifact, populated at once where the system can (Linux's ``MAP_POPULATE``).
_MAP_FLAGS: Final = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
_PROC_FD: Final = Path("/proc/self/fd")
_HAS_PROC_FD: Final = _PROC_FD.is_dir()
_PROC_FD_PREFIX: Final = f"{_PROC_FD}/"


# (cid, engine key) → (compiled guest, its metadata or None when no caller has described it yet)
_MEMORY: OrderedDict[tuple[str, str], tuple[Any, bytes | None]] = OrderedDict()
_MEMORY_LOCK = threading.RLock()  # (every lock a run takes is re-entrant: a signal handler may run another run)


def _cache_key(cid: str, engine_key: str, artifact: Artifact = MODULE) -> bytes:
    if artifact is MODULE:
        return f"{cid}\n{engine_key}".encode()
    return f"{cid}\n{engine_key}\n{artifact.name}".encode()


class ModuleCache:
    """Memory + disk cache of compiled modules under ``directory`` (None: memory only)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.stats = CacheStats()
        self._key: bytes | None = None
        self._mac_key: bytes | None = None
        self._meta_key: bytes | None = None
        self._prefix = None if directory is None else os.path.join(directory, "")
        self._lock = threading.RLock()

    # ---- disk layer

    def _hmac_key(self) -> bytes:
        assert self.directory is not None
        if self._key is not None:
            return self._key
        path = self.directory / ".hmac-key"
        try:
            key = path.read_bytes()
            if len(key) == 32:
                self._key = key
                return key
        except FileNotFoundError:
            pass
        import tempfile  # once per home: a run that finds its key loads no tempfile

        key = secrets.token_bytes(32)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".key-")
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # first writer wins; a racing writer reads the winner's key
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        won = path.read_bytes()
        self._key = won if len(won) == 32 else key
        return self._key

    def path_for(self, cid: str, engine_key: str, kind: Artifact = MODULE) -> Path | None:
        """Where the artifact for (cid, engine_key) lives on disk (None: no disk layer); its tag is beside it."""
        stem = self._stem(cid, engine_key, kind)
        return None if stem is None else Path(stem + ".cwasm")

    def _stem(self, cid: str, engine_key: str, kind: Artifact) -> str | None:
        """:meth:`path_for` without its suffix, as text (a new process loading a component opens ~40 entries)."""
        if self._prefix is None:
            return None
        return self._prefix + hashlib.sha256(_cache_key(cid, engine_key, kind)).hexdigest()

    def _tag(self, key: bytes, artifact: bytes | memoryview | mmap.mmap) -> bytes:
        """Keyed BLAKE3 of ``cache-key ‖ 0 ‖ artifact`` (the key derived from the directory's secret)."""
        if self._mac_key is None:
            self._mac_key = blake3(self._hmac_key(), derive_key_context=_MAC_CONTEXT).digest()
        size = len(artifact)
        threads = _hash_threads(size, _load_average() if size > _THREADED else None, _CPUS)  # (None: not asked)
        mac = blake3(key + b"\0", key=self._mac_key, max_threads=threads)
        mac.update(artifact)
        return mac.digest()

    def _load_disk(self, engine: wasmtime.Engine, cid: str, engine_key: str, kind: Artifact) -> Any:
        stem = self._stem(cid, engine_key, kind)
        if stem is None:
            return None
        try:
            fd = os.open(stem + ".cwasm", os.O_RDONLY)
        except OSError:
            return None
        try:
            module = self._verify_and_load(engine, fd, stem + ".tag", _cache_key(cid, engine_key, kind), kind)
        finally:
            os.close(fd)
        if module is None:
            self.stats.discarded += 1
            for suffix in (".cwasm", ".tag", ".meta"):
                try:
                    os.unlink(stem + suffix)
                except OSError:
                    pass
        return module

    def _verify_and_load(self, engine: wasmtime.Engine, fd: int, tag_path: str, key: bytes, kind: Artifact) -> Any:
        """Check the tag over the bytes mapped through ``fd``, then deserialize *that* open file.

        Entries are only ever replaced by rename, never rewritten in place, so the
        inode behind ``fd`` keeps the bytes just verified (a size that changed
        since is refused all the same); on Linux wasmtime maps it through
        ``/proc/self/fd`` (no second copy), elsewhere the verified bytes are
        handed over.
        """
        try:
            tag = _read_tag(tag_path)
            if len(tag) != len(_HEADER) + _TAG_LEN or not tag.startswith(_HEADER):
                return None  # another format (an older kuro's) or damaged: never read further
            size = os.fstat(fd).st_size
            if size == 0:
                return None
            # Hashed through a read-only map of the open file (no 3 MB copy); wasmtime maps the same inode.
            # Populated as it is mapped: one pass through the page cache in the kernel, not a fault every few
            # pages as the hash walks it — and no faults for BLAKE3's threads to queue on (a 10.5 MiB artifact:
            # hashed on 2 threads in 1.14 ms best, 2.1 ms median at load 5, against 1.88 and 4.3 ms faulting).
            with mmap.mmap(fd, size, flags=_MAP_FLAGS, prot=mmap.PROT_READ) as view:
                ok = hmac.compare_digest(tag[len(_HEADER) :], self._tag(key, view))
                artifact = b"" if _HAS_PROC_FD else view[:]
            if not ok or os.fstat(fd).st_size != size:
                return None
        except (OSError, ValueError):
            return None
        try:
            if _HAS_PROC_FD:
                return kind.deserialize_file(engine, f"{_PROC_FD_PREFIX}{fd}")
            return kind.deserialize(engine, artifact)  # pragma: no cover - not Linux
        except Exception:
            return None

    def _store_disk(self, module: Any, cid: str, engine_key: str, kind: Artifact) -> None:
        path = self.path_for(cid, engine_key, kind)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            artifact = kind.serialize(module)
            # Artifact first, tag second: a crash in between leaves a tag that does not verify (rebuilt).
            write_atomic(path, artifact)
            write_atomic(path.with_suffix(".tag"), _HEADER + self._tag(_cache_key(cid, engine_key, kind), artifact))
        except OSError:
            return  # a cache that cannot be written is only slower

    # ---- metadata beside the artifact: what was read from the verified bytes (e.g. the module's shape)

    def _meta_tag(self, cid: str, engine_key: str, kind: Artifact, meta: bytes) -> bytes:
        if self._meta_key is None:
            self._meta_key = blake3(self._hmac_key(), derive_key_context=_META_CONTEXT).digest()
        return blake3(_cache_key(cid, engine_key, kind) + b"\0" + meta, key=self._meta_key).digest()

    def _load_meta(self, cid: str, engine_key: str, kind: Artifact) -> bytes | None:
        path = self.path_for(cid, engine_key, kind)
        if path is None:
            return None
        try:
            raw = path.with_suffix(".meta").read_bytes()
        except OSError:
            return None
        head, tag, meta = (
            raw[: len(_HEADER)],
            raw[len(_HEADER) : len(_HEADER) + _TAG_LEN],
            raw[len(_HEADER) + _TAG_LEN :],
        )
        if (
            head != _HEADER
            or len(tag) != _TAG_LEN
            or not hmac.compare_digest(tag, self._meta_tag(cid, engine_key, kind, meta))
        ):
            return None  # damaged, foreign or stale: described again from verified bytes
        return meta

    def _store_meta(self, cid: str, engine_key: str, kind: Artifact, meta: bytes) -> None:
        path = self.path_for(cid, engine_key, kind)
        if path is None:
            return
        try:
            write_atomic(path.with_suffix(".meta"), _HEADER + self._meta_tag(cid, engine_key, kind, meta) + meta)
        except OSError:
            return

    # ---- both layers

    def get_or_compile(
        self, engine: wasmtime.Engine, engine_key: str, cid: str, wasm: Callable[[], bytes]
    ) -> wasmtime.Module:
        """The compiled module of guest ``cid``: memory, else a verified disk entry, else compile ``wasm()``.

        ``wasm`` is only called on a miss; it must return bytes already
        verified against ``cid`` (the loader's job). Raises whatever ``wasm``
        raises, and ``wasmtime.WasmtimeError`` if the bytes do not compile.
        """
        module: wasmtime.Module = self._get(engine, engine_key, cid, wasm, None, (MODULE,))[0]
        return module

    def load(
        self,
        engine: wasmtime.Engine,
        engine_key: str,
        cid: str,
        wasm: Callable[[], bytes],
        describe: Callable[[bytes, Any], bytes],
        kinds: tuple[Artifact, ...] = ARTIFACTS,
    ) -> tuple[Any, bytes]:
        """The compiled guest (of one of ``kinds``), plus ``describe(bytes, compiled)``, kept beside the artifact.

        The metadata (the guest's shape, for the loader) is computed once from
        the verified bytes (and, for a component, the compiled form's types) and
        stored under its own keyed BLAKE3 tag, so a warm load needs neither the
        bytes nor wasmtime's view of the guest's types. An entry whose metadata
        is missing or does not verify gets it again from ``wasm()`` (the
        compiled artifact is still reused). On a miss the bytes' header picks
        the artifact kind.
        Raises ValueError: the verified bytes are of none of ``kinds``.
        """
        module, meta = self._get(engine, engine_key, cid, wasm, describe, kinds)
        assert meta is not None
        return module, meta

    def _get(
        self,
        engine: wasmtime.Engine,
        engine_key: str,
        cid: str,
        wasm: Callable[[], bytes],
        describe: Callable[[bytes, Any], bytes] | None,
        kinds: tuple[Artifact, ...],
    ) -> tuple[Any, bytes | None]:
        key = (cid, engine_key)
        module: Any = None
        meta: bytes | None = None
        kind: Artifact | None = None
        with _MEMORY_LOCK:
            found = _MEMORY.get(key)
            if found is not None:
                _MEMORY.move_to_end(key)
                module, meta = found
        if module is not None:
            self.stats.memory_hits += 1
        elif self.directory is not None:
            with self._lock:
                for kind in kinds:
                    module = self._load_disk(engine, cid, engine_key, kind)
                    if module is not None:
                        if describe is not None:
                            meta = self._load_meta(cid, engine_key, kind)
                        break
            if module is not None:
                self.stats.disk_hits += 1
        if module is None:
            data = wasm()
            kind = next((k for k in kinds if k.accepts(data)), None)
            if kind is None:
                raise ValueError(f"guest {cid} is none of {[k.name for k in kinds]}")
            module = kind.compile(engine, data)
            self.stats.compiles += 1
            meta = describe(data, module) if describe is not None else None
            if self.directory is not None:
                with self._lock:
                    self._store_disk(module, cid, engine_key, kind)
                    if meta is not None:
                        self._store_meta(cid, engine_key, kind, meta)
        elif meta is None and describe is not None:
            meta = describe(wasm(), module)
            if self.directory is not None and kind is not None:
                with self._lock:
                    self._store_meta(cid, engine_key, kind, meta)
        self._remember(key, module, meta)
        return module, meta

    def stored_meta(self, engine_key: str, cid: str, kind: Artifact) -> bytes | None:
        """The metadata kept for guest ``cid`` as a ``kind`` artifact — from the memory layer, else from disk under
        its keyed tag (damaged, foreign or stale: None) — without touching the artifact itself; None if there is none.

        For a caller that may not need the compiled guest at all
        (:meth:`~kuro_wasm.host.kind.GuestKind.links_from_parts`); the artifact, if it is needed after all, is
        loaded by :meth:`load` under every rule above.
        """
        with _MEMORY_LOCK:
            found = _MEMORY.get((cid, engine_key))
        if found is not None and found[1] is not None:
            return found[1]
        if self.directory is None:
            return None
        with self._lock:
            return self._load_meta(cid, engine_key, kind)

    @staticmethod
    def _remember(key: tuple[str, str], module: Any, meta: bytes | None) -> None:
        with _MEMORY_LOCK:
            _MEMORY[key] = (module, meta)
            _MEMORY.move_to_end(key)
            while len(_MEMORY) > _MEMORY_ENTRIES:
                _MEMORY.popitem(last=False)

    @classmethod
    def seed(cls, cid: str, engine_key: str, compiled: Any, meta: bytes | None) -> None:
        """Put a guest just compiled from verified bytes (``add_guest``'s check) into the memory layer (``compiled``
        None: only its metadata — a guest linked from its parts, compiled whole only if that is asked for)."""
        cls._remember((cid, engine_key), compiled, meta)

    @staticmethod
    def holds(cid: str, engine_key: str) -> bool:
        """True if the memory layer holds guest ``cid`` compiled for ``engine_key``."""
        with _MEMORY_LOCK:
            return (cid, engine_key) in _MEMORY

    @staticmethod
    def forget_memory() -> None:
        """Empty the process-wide memory layer (tests and benchmarks measure the disk layer this way)."""
        with _MEMORY_LOCK:
            _MEMORY.clear()


def _read_tag(path: str) -> bytes:
    """A tag file's bytes, one more than a tag at most (a longer file is no tag either)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, len(_HEADER) + _TAG_LEN + 1)
    finally:
        os.close(fd)


_CACHES: dict[Path | None, ModuleCache] = {}
_BY_ARGUMENT: dict[tuple[object, str | None], ModuleCache] = {}
_CACHES_LOCK = threading.RLock()


def cache_for(home: str | os.PathLike[str] | bool | None = None) -> ModuleCache:
    """The cache for ``home`` (see :func:`kuro_fs.home.resolve_home`); ``home=False``: memory only.

    Memoized on the argument and ``$KURO_HOME`` (resolving ``~`` on every run is measurable).
    """
    key = (home if home is None or isinstance(home, bool) else os.fspath(home), os.environ.get("KURO_HOME"))
    cache = _BY_ARGUMENT.get(key)
    if cache is not None:
        return cache
    directory = None if home is False else module_cache_dir(None if home is True else home)
    with _CACHES_LOCK:
        cache = _CACHES.get(directory)
        if cache is None:
            cache = ModuleCache(directory)
            _CACHES[directory] = cache
        _BY_ARGUMENT[key] = cache
        return cache
