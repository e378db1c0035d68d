"""The durable block store: one file per block under fan-out directories.

## The one decision
A block file exists under its CID's name only once all of its bytes are on disk.
A single ``put`` writes a private temp file in the block's own fan-out directory,
fsyncs it, ``os.replace``-s it onto ``<root>/<shard>/<cid>`` and fsyncs the
directory. Inside ``with store.batch():`` puts are staged whole in a private
batch directory and made visible together by one sync–rename–sync commit
(:mod:`kuro_fs.filebatch`): the same rule, paid once per batch instead of twice
per block. A crash can leave a torn *temp* or *staged* file behind, never a torn
block under a valid name, and neither is seen by ``get``, ``has``, ``stats`` or
``iter_cids``. Because the final rename is atomic and every writer of one CID
writes the same bytes, any number of threads and processes may put the same and
different blocks at once without a lock.

``get`` re-hashes what it read (``verify=True``, the default) and raises
:class:`~kuro_fs.errors.CorruptBlock` naming the CID on a mismatch: disks rot
and people edit files, and a reader must never be handed bytes that do not match
the name it asked for. There is no "verified once" memo: nothing here can prove
a file's bytes unchanged since they were hashed. Bit rot changes no metadata; a
write through a shared writable ``mmap`` made before the check, or to the raw
device, changes bytes without touching mtime or ctime; and this store cannot rely
on fs-verity (not on every filesystem, and absent on the ext4 it was measured on).
So reads are made cheap instead: :meth:`FileBlockStore.get_into` reads a block
straight into the caller's buffer and hashes it there (no copy; the hash is the
CID's own, by :func:`~kuro_fs.cid.matches`, whose sha2-256 branch comes first),
and :meth:`FileBlockStore.get_many_into` spreads a read of many blocks over the
calling thread and a process-wide pool (one thread per further core), because
``hashlib`` releases the GIL and hashing is the cost: a verified read runs at
about the cores' combined sha2-256 rate, the floor for checking every byte.

A CIDv0 is filed under its CIDv1 (:attr:`~kuro_fs.cid.ParsedCID.key`), so both names reach one
file; an identity CID is never a file (its bytes are inline in the name). ``put(data, cid=c)`` files
bytes of any hash :mod:`kuro_fs.cid` reads under ``c``, only after :func:`~kuro_fs.cid.matches` says
they are that block. Inside a batch both rules hold unchanged: a block is staged under its key, and
an identity CID is neither stored nor staged.

The shard is the next-to-last two characters of the CID (go-ipfs flatfs's
``next-to-last/2``): the leading characters are the fixed ``bafkrei`` /
``bafybei`` / ``bafyrei`` prefix and the last one carries only 3 bits, so these
two spread blocks over up to 1024 directories. A CID is parsed before it
becomes a path, so no name can escape the root.

## What an import leaves, returned or crashed
An import (:mod:`kuro_fs.importer`, ``import_car``) runs in one batch, so the
batch commit is its durability point. When ``import_path`` returns, every block
of the tree is a file under its final name, and both the bytes and the names are
on stable storage: the commit ran ``syncfs`` (or fsynced each file) *before* the
first rename and ``syncfs`` (or fsynced each touched shard and the root) *after*
the last, and ``import_path`` returns only after that second sync. A crash at
any point before the first rename leaves no new name at all — only staged files
in a ``.batch-`` directory that no read consults and the next batch sweeps. A
crash between the renames leaves some blocks under their names and the rest
staged: every name that survives points at bytes that were durable before the
name existed, so it is complete. The renames run in no particular order, so the
root's block may be among the survivors while some of its children are not: an
import that did not return is not done, whatever ``has(root)`` says, and is run
again (blocks already in place are skipped, not rewritten). Beyond the protocol, no block is
ever *believed* on the strength of its name: ``get``/``get_into`` re-hash what
they read (``verify``), and ``put`` of a block whose file is damaged replaces it.
The protocol costs two device flushes per import, not two per block; what is
left per block is an ``access`` (skipped for a shard the batch saw absent when it made its
directory or last committed — every shard of a new store: nothing can be filed there), a create,
a write and a close, and a rename only into a shard that already existed (a new shard's staging
directory is renamed whole: one ``mkdir`` and one rename per shard). Past the first 1,024 small
blocks of a batch the create, write and close are a child process's (:mod:`kuro_fs.filewriter`),
so they run beside the hashing instead of trading the GIL with it. Beside ``cp -r`` + ``sync``
of a tree of 10,000 small files in directories of 1,000 (``tools/bench_store.py small_files``),
an import creates ~24 % more inodes (1,413 HashMap node blocks for its ten directories, 1,024
shards) and syncs twice, and CPython spends ~40 µs of GIL-held work per file where ``cp`` spends
~3; a bare Python loop doing only the per-file reads, hashes and creates, with one ``syncfs``,
already measured 1.5–1.8× ``cp -r`` + ``sync`` here. The bench now times that loop as a row of
its own (``import_floor``: staged per shard, two ``syncfs``, no kuro code but the CID's name). Its
system calls are the import's, call for call (``strace -c -f``: per block a create, a write and a
close; per source file an open, an ``fstat``, a read and a close; 1,024 ``mkdir`` and 1,024
renames; two ``syncfs``, ~0.1 s of the import's wall time): what the import spent beyond it before
the writer process was Python (listing, names, directory blocks, the batch's bookkeeping) and two
workers trading the GIL — CPU time, medians of 5 interleaved rounds at load ~10: import 1.47 s,
floor 0.83 s, ``cp -r`` + ``sync`` 0.54 s, the import into a store that keeps nothing 0.41 s. With
the writer the import's creates overlap its Python (figures in :mod:`kuro_fs.filewriter`); the
loop's floor is a single process's, so the import may now come in under it where a core is free.

## Effects
Disk, threads and, for a batch of many small blocks, one writer process (:mod:`kuro_fs.filewriter`):
creates, reads, renames and unlinks files under ``root``. OS errors are translated to
:class:`~kuro_fs.errors.BlockStoreError` (``from`` the OSError).

## Not done here
No cross-process lock, no garbage collection of leftover single-put temp files
(they are ignored, not swept: sweeping could race a live writer in another
process; orphaned batch directories *are* swept, see :mod:`kuro_fs.filebatch`),
no durability fsync on ``delete``/``drop_cache``, no network.
"""

from __future__ import annotations

import contextvars
import errno
import os
import stat
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final

from kuro_fs.atomic import fsync_dir, write_atomic
from kuro_fs.blocks import (
    DeleteResult,
    DropResult,
    PublishResult,
    StatsResult,
    StoreBatch,
    active_batch,
    block_bytes,
    publish_blocks,
)
from kuro_fs.cid import ParsedCID, cid_for, matches, parse
from kuro_fs.errors import BlockStoreError, CorruptBlock, MissingBlock
from kuro_fs.filebatch import BLOCK_NAME, SHARD_NAME, DirectTally, FileBatch, os_failure, shard_of
from kuro_fs.home import blocks_dir

if TYPE_CHECKING:  # concurrent.futures (and logging under it) loads with the first parallel read
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["PARALLEL_READ_BYTES", "READ_HELPERS", "FileBlockStore", "ReadRequest", "default_store", "shard_of"]

#: O_NONBLOCK: opening a FIFO planted where a block should be must not wait for a writer (on a regular
#: file the flag changes nothing); what is open is then checked to be a regular file before any read.
_READ_FLAGS: Final = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
#: A :meth:`FileBlockStore.get_many_into` call spreads over threads from this many bytes on.
PARALLEL_READ_BYTES: Final = 4 << 20

#: Threads of the process-wide read pool: with the calling thread, one reader per core, at most 4.
READ_HELPERS: Final = min(4, os.cpu_count() or 1) - 1

_POOL_LOCK = threading.Lock()
_POOL: ThreadPoolExecutor | None = None


def _read_pool() -> ThreadPoolExecutor:
    # One pool for the process, made on first use (starting threads per call cost ~0.1 ms a call).
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max(READ_HELPERS, 1), thread_name_prefix="kuro-fs-read")
        return _POOL


def _forget_pool() -> None:
    # A forked child has the pool object but not its threads: it makes its own on first use.
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)

#: One block read into a buffer: ``(cid, out, offset)`` — copy block bytes ``[offset, offset+len(out))`` to ``out``.
ReadRequest = tuple[str, memoryview, int]

# ---- helpers


def _fail(what: str, cid: str, exc: OSError) -> BlockStoreError:
    return os_failure(f"{what} {cid}", exc)


def _read_whole(fd: int, size: int) -> bytes:
    # The file's bytes: one read when it holds the ``size`` bytes fstat said, more if that read
    # came back short (a huge block, or the file shrank) or the file grew since.
    data = os.read(fd, size + 1)
    if len(data) == size:
        return data
    rest = [data]
    while piece := os.read(fd, 1 << 20):
        rest.append(piece)
    return b"".join(rest)


def _read_into(fd: int, out: memoryview) -> int:
    done = 0
    while done < len(out):
        n = os.readv(fd, [out[done:]])
        if n == 0:
            break
        done += n
    return done


# ---- the store


class FileBlockStore:
    """A :class:`~kuro_fs.blocks.BlockStore` on disk under ``root_dir`` (created if missing).

    ``verify`` (default True) makes ``get`` re-hash every block it returns.
    Threads and processes may use one root concurrently. ``close()`` is idempotent,
    ``with`` works, and any operation after close raises ``BlockStoreError``.

    Raises BlockStoreError: if ``root_dir`` cannot be created or is not a directory.
    """

    def __init__(self, root_dir: str | os.PathLike[str], *, verify: bool = True) -> None:
        self._root = Path(root_dir)
        self._root_str = os.fspath(self._root)
        self._verify = verify
        self._closed = False
        self._direct = DirectTally()  # what this store's batches did with O_DIRECT (wrote_direct)
        try:
            self._root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BlockStoreError(f"cannot open block store at {self._root}: {exc.strerror or exc}") from exc

    # ---- lifecycle

    @property
    def root(self) -> Path:
        """The directory this store keeps its blocks under."""
        return self._root

    @property
    def verify(self) -> bool:
        """Whether ``get`` re-hashes blocks before returning them."""
        return self._verify

    @property
    def wrote_direct(self) -> bool:
        """True once a batch of this store has written a large block with ``O_DIRECT`` (past the page cache)
        and the filesystem has never refused it one; False before any did, and from the first refusal on
        (the refused block, and that batch's later ones, went through the page cache). What a benchmark of
        this store reads to say which of the two it measured (see :mod:`kuro_fs.filebatch`)."""
        return self._direct.wrote and not self._direct.refused

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._closed

    def close(self) -> None:
        """Close the store. Idempotent; later operations raise ``BlockStoreError``."""
        self._closed = True

    def __enter__(self) -> FileBlockStore:
        self._check_open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"FileBlockStore({str(self._root)!r}, verify={self._verify}) [{state}]"

    def _check_open(self) -> None:
        if self._closed:
            raise BlockStoreError(f"block store at {self._root} is closed")

    def _locate(self, cid: str) -> tuple[str, str, ParsedCID]:
        # The key the block is filed (and staged) under, its path, and the parsed CID. Raises
        # InvalidCID; after parsing the key is base32 (a CIDv0 maps to its CIDv1).
        parsed = parse(cid)
        key = cid if parsed.version == 1 else parsed.key
        return key, f"{self._root_str}/{shard_of(key)}/{key}", parsed

    def _open(self, cid: str, path: str) -> tuple[int, int] | None:
        # The open block file and its size; None if absent. Anything but a regular file under a block's
        # name (a directory, a FIFO, a device such as /dev/zero through a symlink) is refused as has()
        # refuses it, before a read could wait forever or never end.
        try:
            fd = os.open(path, _READ_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _fail("get", cid, exc) from exc
        try:
            st = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            raise _fail("get", cid, exc) from exc
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise BlockStoreError(f"get {cid}: the store holds no regular file under this block's name")
        return fd, st.st_size

    def _read_checked(self, cid: str, path: str, parsed: ParsedCID, opened: tuple[int, int]) -> bytes:
        # Read the open block file whole, close it, and (with verify) check it against its CID.
        fd, size = opened
        try:
            data = _read_whole(fd, size)
        except OSError as exc:
            raise _fail("get", cid, exc) from exc
        finally:
            os.close(fd)
        if self._verify and not matches(parsed, data):
            raise CorruptBlock(cid, f"{len(data)} stored bytes at {path} do not hash to this CID")
        return data

    def _staged(self, cid: str, key: str, path: str, parsed: ParsedCID) -> bytes | None:
        # A block put in this context's open batch is readable before its commit (checked like any other).
        batch = active_batch(self)
        if not isinstance(batch, FileBatch):
            return None
        try:
            data = batch.read_staged(key)
        except OSError as exc:
            raise _fail("get", cid, exc) from exc
        if data is None:  # a commit may have moved it into place since the first look
            opened = self._open(cid, path)
            return None if opened is None else self._read_checked(cid, path, parsed, opened)
        if self._verify and not matches(parsed, data):
            raise CorruptBlock(cid, f"{len(data)} bytes staged in a batch do not hash to this CID")
        return data

    # ---- batches

    def batch(self) -> StoreBatch:
        """A batch of this store: ``with store.batch(): …`` (see :class:`~kuro_fs.blocks.StoreBatch`).

        Puts in it are staged and become visible and durable together when the
        ``with`` block ends — one sync–rename–sync commit instead of two fsyncs per
        block — or are deleted if it ends with an error. ``get`` and ``has`` in the
        batch's context see staged blocks; other contexts see them after the commit.
        A ``put(data, cid=…)`` is staged the same way (under the CID's key); an
        identity CID is never staged, as it is never stored.
        """
        self._check_open()
        return FileBatch(self, self._root_str, self._direct)

    # ---- the seven operations

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        """Store ``data`` as a block of ``codec`` and return its CID.

        With ``cid``, file the bytes under that name instead (any hash :mod:`kuro_fs.cid` reads;
        nothing for an identity CID), only if they hash to it: else CorruptBlock, nothing stored.

        An already-present block with the same bytes is not rewritten. A block
        file of the wrong length, or (with ``verify``) the wrong content, is
        replaced atomically, so ``put`` heals a damaged block.

        Raises InvalidCID: for an unknown codec. Raises TypeError: if ``data`` is not
        bytes-like. Raises BlockStoreError: on an OS failure.
        """
        self._check_open()
        data = block_bytes(data)  # the same object for ``bytes``: a copy only of mutable input
        if cid is None:
            cid = key = cid_for(data, codec)
            path = ""  # made below only where it is used
        else:
            key, path, parsed = self._locate(cid)
            if not matches(parsed, data):
                raise CorruptBlock(cid, f"{len(data)} given bytes do not hash to this CID; nothing stored")
            if parsed.hash == "identity":
                return cid
        try:
            batch = active_batch(self)
            if not isinstance(batch, FileBatch):
                path = path or f"{self._root_str}/{shard_of(key)}/{key}"
                if not self._present_and_equal(path, data):
                    self._atomic_write(Path(path), data)
                return cid
            # A shard the batch saw absent holds no block: not asked (a lookup per block of a new store).
            shard = shard_of(key)
            if not batch.shard_is_new(shard):
                path = path or f"{self._root_str}/{shard}/{key}"
                if self._present_and_equal(path, data):
                    return cid
            if not batch.stage(key, data):
                self._atomic_write(Path(path or f"{self._root_str}/{shard}/{key}"), data)
        except OSError as exc:
            raise _fail("put", cid, exc) from exc
        return cid

    def get(self, cid: str) -> bytes | None:
        """The bytes stored under ``cid``, or ``None`` if absent.

        Raises InvalidCID: if ``cid`` is malformed. Raises CorruptBlock: if
        ``verify`` is on and the stored bytes do not hash to ``cid``. Raises
        BlockStoreError: on an OS failure other than "no such file".
        """
        self._check_open()
        key, path, parsed = self._locate(cid)
        if parsed.hash == "identity":
            return parsed.digest
        opened = self._open(cid, path)
        if opened is None:
            return self._staged(cid, key, path, parsed)
        return self._read_checked(cid, path, parsed, opened)

    def get_into(self, cid: str, out: memoryview, offset: int = 0) -> int | None:
        """Copy bytes ``[offset, offset+len(out))`` of block ``cid`` into ``out``; return the block's size.

        ``None`` if the block is absent. When the whole block is asked for
        (``offset == 0`` and ``len(out)`` is its size) it is read straight into
        ``out`` and hashed there, under the CID's own hash function
        (:func:`~kuro_fs.cid.matches`); otherwise it is read whole, checked, and the
        range copied (a block shorter than the range fills only what it has —
        compare the returned size). With ``verify`` the bytes are always checked
        before this returns; ``out`` may hold unchecked bytes when it raises.

        Raises CorruptBlock, InvalidCID, BlockStoreError: as :meth:`get`.
        """
        self._check_open()
        key, path, parsed = self._locate(cid)
        opened = None if parsed.hash == "identity" else self._open(cid, path)
        if parsed.hash == "identity":
            block: bytes | None = parsed.digest
        elif opened is None:
            block = self._staged(cid, key, path, parsed)
        elif offset == 0 and opened[1] == len(out):
            fd = opened[0]
            try:
                got = _read_into(fd, out)
            except OSError as exc:
                raise _fail("get", cid, exc) from exc
            finally:
                os.close(fd)
            if got != len(out) or (self._verify and not matches(parsed, out)):
                raise CorruptBlock(cid, f"stored bytes at {path} changed or do not hash to this CID")
            return got
        else:
            block = self._read_checked(cid, path, parsed, opened)
        if block is None:
            return None
        piece = memoryview(block)[offset : offset + len(out)]
        out[: len(piece)] = piece
        return len(block)

    def get_many_into(self, requests: Sequence[ReadRequest]) -> list[int]:
        """:meth:`get_into` for each request, in order; return each block's size. Every block must exist.

        From :data:`PARALLEL_READ_BYTES` of output on, the calling thread and up to
        :data:`READ_HELPERS` threads of one process-wide pool take the requests one at
        a time, in order, from a shared counter (hashing releases the GIL; a thread
        that is slow or busy elsewhere takes fewer), each helper in a copy of the
        caller's context so a batch stays visible. The caller reads too, so a pool busy
        with other calls delays nothing: a helper that has not started when the caller
        runs out of work is cancelled. No request is started after a failure, every
        request before it was, and the failure of the earliest request is the one
        raised, so the outcome is the one a serial loop would have.

        Raises MissingBlock: a block is absent (the earliest). Raises CorruptBlock,
        InvalidCID, BlockStoreError: as :meth:`get_into`.
        """
        self._check_open()
        n = len(requests)
        helpers = min(READ_HELPERS, n - 1)
        results: list[int | BaseException | None] = [None] * n
        if helpers < 1 or sum(len(out) for _, out, _ in requests) < PARALLEL_READ_BYTES:
            self._read_from(iter(range(n)), requests, results, [])
        else:
            order = iter(range(n))  # next() on a range iterator is atomic under the GIL
            failed: list[bool] = []
            pool = _read_pool()
            futures = [
                pool.submit(contextvars.copy_context().run, self._read_from, order, requests, results, failed)
                for _ in range(helpers)
            ]
            try:
                self._read_from(order, requests, results, failed)
            finally:
                for future in futures:
                    if not future.cancel():
                        future.result()  # a helper mid-request still writes into the caller's buffers
        sizes: list[int] = []
        for item in results:
            if not isinstance(item, int):
                assert item is not None  # a request not started lies after a failure, which is met first
                raise item
            sizes.append(item)
        return sizes

    def _read_from(
        self,
        order: Iterator[int],
        requests: Sequence[ReadRequest],
        results: list[int | BaseException | None],
        failed: list[bool],
    ) -> None:
        # Read the requests whose indices ``order`` hands out until it runs dry or any reader failed.
        for i in order:
            cid, out, offset = requests[i]
            try:
                size = self.get_into(cid, out, offset)
                results[i] = MissingBlock(cid) if size is None else size
            except Exception as exc:  # handed back in order; the caller raises the earliest
                results[i] = exc
            if not isinstance(results[i], int):
                failed.append(True)
            if failed:
                return

    def has(self, cid: str) -> bool:
        """True if a regular block file exists under ``cid`` (its content is not re-hashed).

        Raises InvalidCID: if ``cid`` is malformed. Raises BlockStoreError: on an OS failure.
        """
        self._check_open()
        key, path, parsed = self._locate(cid)
        if parsed.hash == "identity":
            return True
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            batch = active_batch(self)
            try:
                return isinstance(batch, FileBatch) and (batch.has_staged(key) or os.path.isfile(path))
            except OSError as exc:
                raise _fail("has", cid, exc) from exc
        except OSError as exc:
            raise _fail("has", cid, exc) from exc
        return stat.S_ISREG(mode)

    def delete(self, cid: str) -> DeleteResult:
        """Remove the block; ``{"removed": False}`` if it was absent (idempotent).

        Raises InvalidCID: if ``cid`` is malformed. Raises BlockStoreError: on a real OS failure.
        """
        self._check_open()
        _, path, _ = self._locate(cid)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return {"removed": False}
        except OSError as exc:
            raise _fail("delete", cid, exc) from exc
        return {"removed": True}

    def stats(self) -> StatsResult:
        """``{"blocks": n, "bytes": n}`` over block files; temp files are not counted."""
        self._check_open()
        blocks = 0
        total = 0
        for path in self._block_paths():
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:  # deleted by another writer mid-scan
                continue
            except OSError as exc:
                raise _fail("stats", path.name, exc) from exc
            blocks += 1
            total += size
        return {"blocks": blocks, "bytes": total}

    def publish(self, cids: Iterable[str]) -> PublishResult:
        """Re-hash each named block (whatever ``verify`` says); see :func:`~kuro_fs.blocks.publish_blocks`."""
        self._check_open()
        return publish_blocks(self, cids)

    def drop_cache(self) -> DropResult:
        """Remove every block file; ``{"removed": n}`` counts the files this call removed.

        Raises BlockStoreError: on an OS failure (the message says how many were removed first).
        """
        self._check_open()
        removed = 0
        for path in self._block_paths():
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise BlockStoreError(
                    f"drop_cache failed after removing {removed} blocks: {exc.strerror or exc} ({path})"
                ) from exc
            removed += 1
        return {"removed": removed}

    def iter_cids(self) -> Iterator[str]:
        """Every CID with a block file, in no particular order (for audits)."""
        self._check_open()
        return (path.name for path in self._block_paths())

    def cids(self) -> list[str]:
        """Every CID held, sorted (for tests and audits)."""
        return sorted(self.iter_cids())

    # ---- private effects

    def _present_and_equal(self, path: str, data: bytes) -> bool:
        if not os.access(path, os.F_OK):  # a new block: asked without raising (a raise costs more than the call)
            return False
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False  # not this block (a FIFO is never opened): the put renames over it (a directory stays)
        if not self._verify:
            return True
        try:
            with open(path, "rb", buffering=0) as f:
                return f.read() == data
        except FileNotFoundError:
            return False

    def _atomic_write(self, path: Path, data: bytes) -> None:
        shard = path.parent
        if not shard.is_dir():
            shard.mkdir(parents=True, exist_ok=True)
            fsync_dir(self._root)
        write_atomic(path, data)

    def _block_paths(self) -> Iterator[Path]:
        try:
            shards = sorted(os.scandir(self._root), key=lambda e: e.name)
        except FileNotFoundError:  # the whole store was removed from outside: it is empty
            return
        except OSError as exc:
            raise BlockStoreError(f"cannot list block store at {self._root}: {exc.strerror or exc}") from exc
        for shard in shards:
            if not SHARD_NAME.fullmatch(shard.name) or not shard.is_dir(follow_symlinks=False):
                continue
            try:
                entries = list(os.scandir(shard.path))
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno == errno.ENOTDIR:
                    continue
                raise BlockStoreError(f"cannot list {shard.path}: {exc.strerror or exc}") from exc
            for entry in entries:
                if (
                    BLOCK_NAME.fullmatch(entry.name)
                    and shard_of(entry.name) == shard.name
                    and entry.is_file(follow_symlinks=False)
                ):
                    yield Path(entry.path)


def default_store(home: str | os.PathLike[str] | None = None, *, verify: bool = True) -> FileBlockStore:
    """Open the durable store of the embedded home: ``<home>/blocks`` (see :mod:`kuro_fs.home`)."""
    return FileBlockStore(blocks_dir(home), verify=verify)
