"""The file store's batch: many blocks made visible and durable with one sync, or none of them.

## The one decision
A batch never writes under a shard. Each new block goes, whole, into the batch's private
directory ``<root>/.batch-<random>/<shard>/<cid>`` (a file creation locks its directory, and
spreading over the shards' names lets threads create files at once), which no listing, ``get``
or ``has`` outside the batch's context looks into, so nothing staged is ever taken for a block.
A commit makes the staged blocks visible in the order that keeps the single-put rule (a name
appears only once its bytes are on disk): **sync** the staged files, **rename** each onto
``<root>/<shard>/<cid>``, **sync** again so the renames are durable. A shard the store does not
have yet is renamed into place whole — its staging directory becomes the shard, one rename for
all its blocks (a young store or a large import: a million-block CAR into a new store pays
~1,000 renames, not a million); a shard that appeared meanwhile (another writer) makes the
rename fail, and its blocks are then renamed one by one, as into any existing shard. The batch
counts what it stages in each staging directory and keeps the names of those it has made, so a
block costs one create (no failed lookup of a missing directory first) and, with ``syncfs``, a
new shard's staging directory is renamed without being listed. Past :data:`~kuro_fs.filewriter.SPAWN_AFTER`
small blocks, a batch has a child process create their staged files (:mod:`kuro_fs.filewriter`)
— any it would send while the child is behind, it creates itself, and every block sent to a child
that never ran is handed back to it to create; once a block went to a child, a small block it fails
to create itself fails the batch for good, since the same block may be a record the child skipped
on finding the batch's file — and waits for the child to have created every
one before the commit's first sync. The sync is
one ``syncfs(2)`` of the store's filesystem where the kernel offers it
(:func:`kuro_fs.atomic.sync_filesystem`), else an fsync of every staged file and of every
directory the renames touched. On the disk this was measured on, every fsync is a device cache
flush (~0.5 ms), so a put per block paid two flushes per block (a million-block CAR: ~740
blocks/s); a batch pays two.

A batch that ends with an error deletes its directory, so nothing it staged since
its last commit becomes visible (``import_car`` is all-or-nothing through this).
A process that dies mid-batch leaves its directory behind, but its ``flock`` on it
dies with it: the next batch of any process that can take that lock knows the
owner is gone and deletes the directory (it is created under a ``.tmp-`` name,
locked, and only then renamed to ``.batch-…``, so no sweeper ever sees a live
batch unlocked). A crash *during* a commit can leave some blocks renamed — whole,
exactly as a crashed single put leaves them — and the rest in the orphan
directory, swept later.

## Effects
Creates, writes, renames and deletes files under the store root; takes ``flock``
locks; syncs the filesystem; starts a writer process for a batch of many small blocks. A large
block of an aligned length is written with
``O_DIRECT``, past the page cache (:class:`_DirectWrite`: on the VM measured, filling fresh
page-cache pages cost more than the disk), by a pool of :data:`DIRECT_WRITERS` threads so the
disk has a queue while the writers hash on; any other large block goes through the page cache
and one thread per batch starts the disk on it as soon as it is staged (:class:`_Writeback`:
the writers go back to hashing, the commit's sync finds less left). Either way the commit's
first sync is what makes a staged block durable. Used only by :mod:`kuro_fs.filestore`.

## Not done here
POSIX only (``flock``, ``dir_fd``), as the rest of kuro's durable state. No size
limit: staged files take the disk space their blocks will take anyway, and memory
holds only the CIDs being written at this moment, a count per staging directory (≤ 1,024),
at most :data:`DIRECT_BUFFERS` aligned buffers (each ≤ :data:`DIRECT_MAX`) and at most
:data:`WRITEBACK_BACKLOG` open files waiting for their writeback hint. An empty ``.tmp-``
batch directory left by a crash between its ``mkdir`` and its rename is ignored, not
swept, like the temp files of crashed single puts.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import re
import secrets
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, NamedTuple

from kuro_fs.atomic import TMP_PREFIX, fsync_dir, start_writeback, sync_filesystem
from kuro_fs.blocks import StoreBatch
from kuro_fs.errors import BlockStoreError
from kuro_fs.filewriter import SPAWN_AFTER, Unsent, Writer, start

__all__ = [
    "BATCH_PREFIX",
    "BLOCK_NAME",
    "SHARD_NAME",
    "DirectTally",
    "FileBatch",
    "os_failure",
    "shard_of",
    "sweep_orphans",
]

#: Name prefix of a live or orphaned batch directory in a store root.
BATCH_PREFIX: Final = ".batch-"
#: The file name of a block: its CIDv1 base32 string — 32-byte digests (sha2-256, blake3) or 64 (sha2-512).
BLOCK_NAME: Final = re.compile(r"b[a-z2-7]{58}|b[a-z2-7]{109}")
#: The name of a fan-out directory.
SHARD_NAME: Final = re.compile(r"[a-z2-7]{2}")
#: A staged block this large has its writeback started by the batch's writeback thread (smaller ones wait
#: for the commit's sync).
EARLY_WRITEBACK = 1 << 16
#: Staged files waiting for that thread at most; one staged beyond this is closed at once, its hint dropped.
WRITEBACK_BACKLOG = 32
#: A large block whose length is a multiple of this is staged with ``O_DIRECT`` (from a buffer so aligned)...
DIRECT_ALIGN = 4096
#: ...up to this size (the aligned buffers live as long as the batch).
DIRECT_MAX = 4 << 20
#: Aligned buffers a batch holds at most: blocks copied and waiting for, or in, an O_DIRECT write (a
#: writing thread waits for a free one)...
DIRECT_BUFFERS = 8
#: ...and the threads that make those writes (the GIL released during each), so the disk has a queue.
DIRECT_WRITERS = 4


def shard_of(cid: str) -> str:
    """The fan-out directory name of ``cid``: its next-to-last two characters.

    >>> shard_of("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
    'yk'
    """
    return cid[-3:-1]


_DIR_FLAGS: Final = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_O_DIRECT: Final = getattr(os, "O_DIRECT", 0)
_NEW_FILE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def os_failure(what: str, exc: OSError) -> BlockStoreError:
    """``"<what> failed: <reason>"``, plus ``" (<file>)"`` only when the OS named a file — never ``()``.

    >>> str(os_failure("put x", OSError(5, "Input/output error")))
    'put x failed: Input/output error'
    """
    reason = exc.strerror or str(exc) or type(exc).__name__
    where = f" ({exc.filename})" if exc.filename else ""
    return BlockStoreError(f"{what} failed: {reason}{where}")


def _write_all(fd: int, data: bytes | memoryview) -> None:
    done = os.write(fd, data)
    if done < len(data):
        view = memoryview(data)[done:]
        while view:
            view = view[os.write(fd, view) :]


def _empty_dir(fd: int, depth: int = 1) -> None:
    # Best effort: remove everything in the directory open as ``fd``, sub-directories ``depth`` deep.
    with os.scandir(fd) as listing:
        entries = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in listing]
    for name, is_dir in entries:
        try:
            if is_dir and depth > 0:
                sub = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                try:
                    _empty_dir(sub, depth - 1)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
        except OSError:
            pass


def sweep_orphans(root: str) -> int:
    """Delete the batch directories under ``root`` whose owner has died; return how many.

    An owner holds an exclusive ``flock`` on its directory for the batch's life, so
    a directory this call can lock has none. Never raises: a directory that cannot be
    examined or emptied is left for a later sweep.
    """
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    return _sweep(root, names)


def _sweep(root: str, names: list[str]) -> int:
    # sweep_orphans over ``names``, a listing of ``root`` the caller has just made.
    swept = 0
    for name in names:
        if not name.startswith(BATCH_PREFIX):
            continue
        path = os.path.join(root, name)
        try:
            fd = os.open(path, _DIR_FLAGS | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _empty_dir(fd)
            os.rmdir(path)
            swept += 1
        except OSError:  # locked by a live batch (BlockingIOError), or not removable now
            pass
        finally:
            os.close(fd)
    return swept


class FileBatch(StoreBatch):
    """The batch of a :class:`~kuro_fs.filestore.FileBlockStore` (see the module docstring).

    Thread-safe: workers in copies of the batch's context stage blocks at once.
    The store calls :meth:`stage` from ``put`` and :meth:`read_staged` from ``get``.
    """

    def __init__(self, store: object, root: str, direct: DirectTally | None = None) -> None:
        super().__init__(store)
        self._root = root
        self._lock = threading.Lock()  # what ``with`` takes on the hot path: the Condition's own lock, without
        self._cond = threading.Condition(self._lock)  # the Python-level call Condition.__enter__ costs per block
        self._waiters = 0  # threads in _wait: a writer that finds none skips the (Python-level) notify
        self._writing: set[str] = set()  # CIDs being written right now (the only per-block memory)
        self._staged: dict[str, int] = {}  # blocks staged per staging directory since its last commit
        self._made: set[str] = set()  # the staging directories this batch has made and not yet renamed away
        self._shards: frozenset[str] | None = None  # the shard directories the root held at the last look
        self._readers = 0  # reads of staged blocks in flight
        self._flushing = False
        self._fd: int | None = None  # the batch directory, holding the flock
        self._path: str | None = None
        self._writer: Writer | None = None  # the child creating small staged files (kuro_fs.filewriter)
        self._small = SPAWN_AFTER  # small blocks this batch may still stage itself before it starts a writer
        self._sent = False  # a block went to a writer: a small block this batch fails to write fails it (stage)
        self._writeback = _Writeback()  # starts the disk on large staged blocks off the writers' threads
        self._direct = _DirectWrite(direct or DirectTally())  # writes large aligned blocks past the page cache
        self._failed: OSError | None = None  # the first queued O_DIRECT write that failed: the batch cannot commit

    def _raise_failed(self) -> None:
        # Under the lock: raise (a copy of) the error of a queued write that failed, if one did.
        failed = self._failed
        if failed is not None:
            raise OSError(failed.errno, failed.strerror, failed.filename)

    # ---- staging (called by the store)

    def stage(self, cid: str, data: bytes | memoryview) -> bool:
        """Write ``data`` whole into the batch directory as ``cid``; False if the batch no longer accepts puts.

        Raises OSError: the write failed (the partial file is removed first).
        """
        with self._lock:
            while self._flushing or cid in self._writing:
                self._wait()
            if not self.open:
                return False
            if self._writer is not None and (failure := self._writer.failure) is not None:
                raise failure  # see _settle
            self._raise_failed()
            if self._fd is None:
                self._make_dir()
            fd = self._fd
            assert fd is not None
            if len(data) < EARLY_WRITEBACK and self._hand_over(cid, data):
                return True
            shared = self._sent and len(data) < EARLY_WRITEBACK
            self._writing.add(cid)
        group = shard_of(cid)
        staged = f"{group}/{cid}"  # the staging directory is named as the block's shard
        created = queued = False
        failed: OSError | None = None
        try:
            try:
                out = self._create(group, staged, fd)
            except FileExistsError:
                return True  # staged earlier in this batch, and whole: writers finish before unregistering
            large = len(data) >= EARLY_WRITEBACK
            try:
                how = self._direct.write(out, data, lambda error: self._written(cid, fd, error)) if large else None
                if how is None:
                    _write_all(out, data)
            except BaseException as exc:
                os.close(out)
                os.unlink(staged, dir_fd=fd)
                if shared:  # the writer may have found this file and skipped the block: its put() returned the CID
                    failed = (
                        exc
                        if isinstance(exc, OSError)
                        else OSError(errno.EINTR, f"writing a block the writer may skip was interrupted ({exc!r})")
                    )
                raise
            if how == "queued":
                queued = True  # ``out`` is the writer pool's now; :meth:`_written` ends this block
                return True
            if how or not large or not self._writeback.take(out):
                os.close(out)
            created = True
        finally:
            if not queued:
                self._end_write(cid, created, failed)
        return True

    def _written(self, cid: str, fd: int, error: OSError | None) -> None:
        # A queued O_DIRECT write of ``cid`` ended, its file closed: the block is staged, or its file is
        # unlinked and the error kept for the commit (and the next stage) to raise.
        if error is not None:
            try:
                os.unlink(_staged_name(cid), dir_fd=fd)
            except OSError:
                pass  # the batch's end empties the directory anyway
        self._end_write(cid, error is None, error)

    def _end_write(self, cid: str, created: bool, error: OSError | None) -> None:
        with self._lock:
            self._writing.discard(cid)
            if created:
                group = shard_of(cid)
                self._staged[group] = self._staged.get(group, 0) + 1
            elif error is not None and self._failed is None:
                self._failed = error
            if self._waiters:
                self._cond.notify_all()

    def _hand_over(self, cid: str, data: bytes | memoryview) -> bool:
        # Under the lock: send a small block to the writer (started after SPAWN_AFTER small blocks);
        # False if this batch writes it itself (too few yet, or no writer could be started or run).
        if self._small > 0:
            self._small -= 1
            return False
        if self._small < 0:
            return False
        if self._writer is None:
            assert self._path is not None
            self._writer = start(self._path)
            if self._writer is None:
                self._small = -1  # never again for this batch
                return False
        if self._writer.busy:
            return False  # the child is behind: this block is made here meanwhile, beside its files
        self._sent = True
        if unsent := self._writer.send(cid, data):
            self._take_back(unsent)
        return True

    def _settle(self) -> None:
        # Under the lock: wait until every block sent to the writer is a closed file, and count them as staged.
        # A writer that failed fails every later call: its files and counts are unknown, so the batch can
        # only be discarded (a commit of the rest would delete files whose put() returned their CID).
        writer = self._writer
        if writer is not None:
            if (failure := writer.failure) is not None:
                raise failure
            if writer.unsettled:
                counts, unsent = writer.settle()
                for group, count in counts.items():
                    self._staged[group] = self._staged.get(group, 0) + count
                if unsent:
                    self._take_back(unsent)

    def _take_back(self, unsent: Unsent) -> None:
        # Under the lock: the writer never ran (its child made none of these files), so the batch writes
        # every block it was sent itself, and starts no other writer. A block not written fails the batch
        # for good, as a failed writer does: put() has returned its CID.
        self._writer = None
        self._small = -1
        fd = self._fd
        assert fd is not None
        try:
            for cid, block in unsent:
                group = shard_of(cid)
                staged = f"{group}/{cid}"
                try:
                    out = self._create(group, staged, fd)
                except FileExistsError:
                    continue  # staged earlier, or by a thread staging it itself now (whole before any commit)
                try:
                    _write_all(out, block)
                except BaseException:
                    os.unlink(staged, dir_fd=fd)
                    raise
                finally:
                    os.close(out)
                self._staged[group] = self._staged.get(group, 0) + 1
        except BaseException as exc:
            if self._failed is None:
                self._failed = (
                    exc
                    if isinstance(exc, OSError)
                    else OSError(errno.EINTR, f"writing the blocks the writer never wrote was interrupted ({exc!r})")
                )
            raise

    def _create(self, group: str, staged: str, fd: int) -> int:
        # Create ``<group>/<cid>`` under the batch directory, making the staging directory on first use
        # with the mode a shard gets (it may become one whole; the batch directory itself is 0o700).
        if group not in self._made:
            try:
                os.mkdir(group, dir_fd=fd)
            except FileExistsError:
                pass
            self._made.add(group)
        return os.open(staged, _NEW_FILE, 0o644, dir_fd=fd)

    def shard_is_new(self, shard: str) -> bool:
        """True if directory ``shard`` was absent from the root at this batch's last look (no block can be in it).

        The look is the root listing the batch makes anyway when it creates its directory,
        renewed by each commit; before the first, nothing is known and this says False. A
        shard another writer creates later may hold a block this batch then stages again:
        the commit's rename puts the same bytes over it, so this only ever saves a lookup.
        """
        shards = self._shards
        return shards is not None and shard not in shards

    def read_staged(self, cid: str) -> bytes | None:
        """The bytes staged as ``cid`` in this batch (waiting for a write in flight), or None.

        Raises OSError: the staged file exists but cannot be read.
        """
        with self._settled(cid) as fd:
            if fd is None:
                return None
            try:
                block = os.open(_staged_name(cid), os.O_RDONLY | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                return None
            try:
                chunks = []
                while piece := os.read(block, 1 << 20):
                    chunks.append(piece)
                return b"".join(chunks)
            finally:
                os.close(block)

    def has_staged(self, cid: str) -> bool:
        """True if ``cid`` is staged, whole, in this batch."""
        with self._settled(cid) as fd:
            if fd is None:
                return False
            try:
                os.stat(_staged_name(cid), dir_fd=fd)
            except FileNotFoundError:
                return False
            return True

    def _wait(self) -> None:
        # Condition.wait, counted, with ``self._cond`` held.
        self._waiters += 1
        try:
            self._cond.wait()
        finally:
            self._waiters -= 1

    @contextmanager
    def _settled(self, cid: str) -> Iterator[int | None]:
        # The batch directory once no commit runs and no writer of ``cid`` is in flight (None: none yet),
        # held open until the block ends (the batch's end waits for readers before closing it).
        with self._cond:
            while self._flushing or cid in self._writing:
                self._wait()
            self._settle()  # a block sent to the writer is read once it is a file
            self._readers += 1
            fd = self._fd
        try:
            yield fd
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    # ---- commit

    def flush(self) -> int:
        """Sync, rename and sync every staged block; return how many became visible.

        Raises BlockStoreError: a sync or a rename failed (blocks renamed before it stay, whole).
        """
        with self._cond:
            while self._flushing:
                self._wait()
            self._flushing = True
            while self._writing:  # queued O_DIRECT writes included: every staged file is whole, or failed
                self._wait()
            fd = self._fd
        try:
            with self._lock:
                self._raise_failed()  # a block that failed to be written: nothing of the batch becomes visible
            if fd is not None:
                with self._lock:
                    self._settle()  # the writer's files exist before the first sync: it covers them
            return 0 if fd is None else self._commit(fd)
        except OSError as exc:
            raise os_failure(f"committing the batch in {self._path}", exc) from exc
        finally:
            with self._cond:
                self._flushing = False
                self._cond.notify_all()

    def _commit(self, fd: int) -> int:
        # With syncfs, a staging directory whose shard the root lacks is renamed into place whole
        # without being listed: the batch counted what it staged there, and nothing else writes in
        # its private directory. Any other is listed and its blocks moved one by one. A group leaves
        # ``_staged`` once handled, so a commit that fails midway leaves the rest to the next one.
        synced = sync_filesystem(fd)
        root_fd = os.open(self._root, _DIR_FLAGS)
        moved = 0
        touched: set[str] = set()
        made_shard = False
        try:
            present = set(os.listdir(root_fd))
            for group, count in sorted(self._staged.items()):
                if synced and group not in present and _take_shard(fd, root_fd, group):
                    made_shard = True
                    self._made.discard(group)
                    moved += count
                else:
                    n, made = self._move_listed(fd, root_fd, group, synced, new=group not in present)
                    made_shard |= made
                    moved += n
                del self._staged[group]
                present.add(group)
                touched.add(group)
            if moved and not sync_filesystem(fd):
                for shard in touched:
                    fsync_dir(os.path.join(self._root, shard))
                if made_shard:
                    fsync_dir(self._root)
            self._shards = frozenset(present)
        finally:
            os.close(root_fd)
        return moved

    def _move_listed(self, fd: int, root_fd: int, group: str, synced: bool, new: bool) -> tuple[int, bool]:
        """Make the blocks listed in staging directory ``group`` visible (each fsynced first unless ``synced``):
        the directory whole if the shard is ``new`` to the root and it holds only its blocks (not tried again
        when ``synced``: the caller tried), else block by block; return how many, and whether a shard was made."""
        src = os.open(group, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        made_shard = False
        try:
            with os.scandir(src) as listing:
                every = [e.name for e in listing]
            names = [n for n in every if BLOCK_NAME.fullmatch(n) and shard_of(n) == group]
            if not synced:
                for name in names:
                    _fsync_at(src, name)
            if new and not synced and len(names) == len(every) and _take_shard(fd, root_fd, group):
                self._made.discard(group)
                return len(names), True
            if new:  # made before the renames: a rename that fails costs a raise
                made_shard |= _make_shards(root_fd, {group})
            for name in names:
                made_shard |= _move(src, root_fd, name)
            return len(names), made_shard
        finally:
            os.close(src)

    # ---- lifecycle

    def _close(self) -> None:
        with self._cond:  # no new writer gets past ``open`` now; wait for those already writing
            while self._writing:
                self._wait()

    def _discard(self) -> None:
        try:
            try:
                self._direct.stop()  # after an interrupted _close: queued writes end or are cancelled, files closed
            finally:
                self._writeback.stop()
        finally:  # the directory is emptied and its lock released whatever stop() raised
            self._release()

    def _release(self) -> None:
        with self._cond:
            while self._readers:
                self._wait()
            fd, path = self._fd, self._path
            self._fd = self._path = None
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()  # no file is created in the directory once it is being emptied
        if fd is None or path is None:
            return
        try:
            _empty_dir(fd)
            os.rmdir(path)
        except OSError:
            pass  # left behind unlocked: the next batch's sweep removes it
        finally:
            os.close(fd)

    def _make_dir(self) -> None:
        # Create the directory under a temp name, lock it, then give it the batch name: a sweeper
        # only ever sees ``.batch-`` directories that are locked by their living owner, or orphaned.
        os.makedirs(self._root, exist_ok=True)
        names = os.listdir(self._root)
        _sweep(self._root, names)
        self._shards = frozenset(names)
        token = secrets.token_hex(8)
        temp = os.path.join(self._root, f"{TMP_PREFIX}{os.getpid()}-{token}")
        os.mkdir(temp, 0o700)
        fd = os.open(temp, _DIR_FLAGS)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path = os.path.join(self._root, f"{BATCH_PREFIX}{token}")
            os.rename(temp, path)
        except BaseException:
            os.close(fd)
            os.rmdir(temp)
            raise
        self._fd, self._path = fd, path


class _Writeback:
    """The batch's writeback thread: it starts the disk on each staged file handed to it, then closes it.

    ``sync_file_range(SYNC_FILE_RANGE_WRITE)`` (:func:`~kuro_fs.atomic.start_writeback`) submits the
    file's pages to the disk from the calling thread and can wait there for room in the device's
    queue; called by the writers, it held them off the hashing of the next block. 256 MiB into the
    disk store, 2 writers, interleaved at load 10–12: medians 3.9 s with the hint on the writers,
    3.4 s with none, 1.9 s with it here (6 rounds each); 3.8 s before this thread, 3.4 s after
    (8 rounds, 6 won). Only a hint: a file is handed over once wholly written, the
    commit's sync is what makes it durable and reports any write error (``syncfs``, or an fsync of
    each staged file), so a close error here loses nothing and is not raised. At most
    :data:`WRITEBACK_BACKLOG` files wait: past that the writer closes its file itself, so a slow
    disk never holds many descriptors open. Started on the first file, stopped when the batch ends;
    where no thread can be started (a container's pids limit), every writer closes its own file, unhinted.
    Large blocks written with ``O_DIRECT`` (:class:`_DirectWrite`) have no dirty pages to start, so it
    serves large blocks of an unaligned length (a file's last chunk) and filesystems that refuse it.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._fds: deque[int] = deque()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def take(self, fd: int) -> bool:
        """Start ``fd``'s writeback and close it later; False (``fd`` left open) if the backlog is full, the
        batch is ending, or no thread could be started (a pids limit: every later file gets False too)."""
        with self._cond:
            if self._stopping or len(self._fds) >= WRITEBACK_BACKLOG:
                return False
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="kuro-fs-writeback", daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # "can't start new thread": only a hint is lost
                    self._stopping = True
                    return False
                self._thread = thread  # only a started thread: stop() joins it
            self._fds.append(fd)
            self._cond.notify()
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._fds and not self._stopping:
                    self._cond.wait()
                if not self._fds:
                    return
                fd = self._fds.popleft()
                hint = not self._stopping  # once stopping, what is left is only closed
            try:
                if hint:
                    start_writeback(fd)
            finally:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def stop(self) -> None:
        """Close every file still waiting (without its hint) and wait for the thread to end."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()


class DirectTally:
    """What a store's batches have done with ``O_DIRECT``, for the store to report (:class:`_DirectWrite`).

    ``wrote``: at least one large block was written with it; ``refused``: the filesystem refused it at
    least once (that block and the batch's later ones went through the page cache). Each only ever turns
    True, so writers on many threads set them without a lock.
    """

    __slots__ = ("refused", "wrote")

    def __init__(self) -> None:
        self.wrote = False
        self.refused = False


class _DirectWrite:
    """Writes a large staged block with ``O_DIRECT``: from an aligned buffer to the disk, past the page cache.

    Each buffered byte lands in a page-cache page the kernel must allocate and fill, and on the VM
    this was measured on that copy into fresh pages was ~40 % of an import's CPU (perf:
    ``copy_folio_from_iter_atomic``; reading the same bytes out of the cache cost ~2 %), likely the
    host faulting in each fresh page. The same 1,024 block files of a 256 MiB file + one ``syncfs``,
    2 threads: 0.40 s with ``O_DIRECT``, 2.6 s buffered, ``cp`` + fsync 2.2 s (medians of 6,
    interleaved, load 10–12); the import of that file, 2 threads: 1.2 s, against 3.2 s buffered and
    1.6 s for ``cp`` + fsync (medians of 8, load 8–11; CPU 0.49 s against 1.21 s).

    Durability is unchanged, and still the commit's: the write returns once the device has acknowledged the
    bytes — perhaps only into its volatile cache — with the file's new size and allocation not yet durable;
    the commit's ``syncfs`` (or fsync of the file), before any rename, writes that metadata and flushes the
    device's cache, as for a buffered block. The block is copied into a page-aligned buffer (``O_DIRECT``
    wants address, length and offset aligned) taken from at most :data:`DIRECT_BUFFERS` (a writer waits for
    a free one), and the write is handed to :data:`DIRECT_WRITERS` threads: a writer that wrote its own
    block kept at most 2 writes in flight on 2 import threads, and the disk wanted more (1,024 files of 256
    KiB + one ``syncfs``, load ~2: 0.42–0.44 s on 2 threads, 0.31–0.40 on 4, 0.29–0.33 on 8). The first
    write is made by its writer, so a filesystem refusing ``O_DIRECT`` is found on it; one that refuses a
    queued write later gets that block written buffered by the pool. A queued write that fails has its file
    unlinked and its error raised by the commit (nothing of the batch becomes visible) and by any later
    stage; the batch's end waits for every queued write, or, interrupted, cancels those not started, so
    every file is closed before its directory is emptied. A block of another length, or larger than
    :data:`DIRECT_MAX`, goes through the page cache, and so does every block once the filesystem refused
    ``O_DIRECT`` (``EINVAL``: tmpfs before Linux 6.6, some network filesystems). Staged blocks are then not
    in the page cache: the first read of one goes to the disk.
    """

    def __init__(self, tally: DirectTally) -> None:
        self._usable = _O_DIRECT != 0
        self._tally = tally
        self._proven = False  # a write here has succeeded with O_DIRECT: later ones may be queued
        self._cond = threading.Condition()
        self._free: list[mmap.mmap] = []  # aligned buffers not in use
        self._buffers = 0  # aligned buffers made (≤ DIRECT_BUFFERS)
        self._jobs: deque[_Job] = deque()
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._unstartable = False  # no writer thread could start: each write is made by its writer

    def write(self, out: int, data: bytes | memoryview, done: Callable[[OSError | None], None]) -> str | None:
        """Write ``data`` whole into the new, empty file ``out`` with ``O_DIRECT``.

        ``"written"``: done here (``out`` still the caller's to close); ``"queued"``: copied into an
        aligned buffer and handed to the writer pool, which closes ``out`` and then calls ``done``
        with None or the write's error; None: not done (the length is not aligned, or the filesystem
        refused: ``out`` is then empty again). Until one write has succeeded, writes are made here,
        so a filesystem refusing ``O_DIRECT`` is found on its first block.
        """
        size = len(data)
        if not self._usable or size % DIRECT_ALIGN or size > DIRECT_MAX:
            return None
        buffer = self._buffer(size)
        queued = False
        try:
            view = memoryview(buffer)[:size]
            try:
                view[:] = data
            finally:
                view.release()
            fcntl.fcntl(out, fcntl.F_SETFL, _O_DIRECT)
            if self._proven:
                with self._cond:
                    if not self._stopping and (self._threads or self._start()):
                        self._jobs.append(_Job(out, buffer, size, done))
                        self._cond.notify()
                        queued = True
                        return "queued"
            if not self._pwrite(out, buffer, size):
                return None
            self._proven = True
            return "written"
        finally:
            if not queued:
                self._give_back(buffer)

    def _buffer(self, size: int) -> mmap.mmap:
        # A free aligned buffer of at least ``size`` bytes, waiting for one when DIRECT_BUFFERS are in use.
        with self._cond:
            while not self._free and self._buffers >= DIRECT_BUFFERS:
                self._cond.wait()
            if self._free:
                buffer = self._free.pop()
                if len(buffer) >= size:
                    return buffer
                buffer.close()
            else:
                self._buffers += 1
        try:
            return mmap.mmap(-1, size)  # anonymous: page-aligned
        except BaseException:
            with self._cond:
                self._buffers -= 1
                self._cond.notify_all()
            raise

    def _give_back(self, buffer: mmap.mmap) -> None:
        with self._cond:
            self._free.append(buffer)
            self._cond.notify_all()

    def _pwrite(self, out: int, buffer: mmap.mmap, size: int) -> bool:
        # Write the buffer's first ``size`` bytes at 0 in ``out`` (O_DIRECT set); False if the filesystem
        # refused O_DIRECT (``out`` then emptied and set back to buffered, every later block buffered).
        view = memoryview(buffer)[:size]
        try:
            done = 0
            while done < size:
                done += os.pwrite(out, view[done:], done)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            self._usable = False  # this filesystem takes no O_DIRECT: every later block is buffered
            self._tally.refused = True
            fcntl.fcntl(out, fcntl.F_SETFL, 0)
            os.ftruncate(out, 0)
            return False
        finally:
            view.release()
        self._tally.wrote = True
        return True

    def _start(self) -> bool:
        # With ``_cond`` held: start the writer pool; False once no thread of it could start ("can't start new
        # thread": a pids limit), and writes are then made by their writers, as the first one is.
        if self._unstartable:
            return False
        for i in range(DIRECT_WRITERS):
            thread = threading.Thread(target=self._run, name=f"kuro-fs-direct-{i}", daemon=True)
            try:
                thread.start()
            except RuntimeError:
                break
            self._threads.append(thread)  # only a started thread: stop() joins it
        self._unstartable = not self._threads
        return not self._unstartable

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._stopping:
                    self._cond.wait()
                if not self._jobs:
                    return
                job = self._jobs.popleft()
                cancelled = self._stopping
            error: OSError | None = None
            try:
                if cancelled:
                    error = OSError(errno.ECANCELED, "the batch ended before this block was written")
                elif not self._pwrite(job.out, job.buffer, job.size):  # refused after all: written buffered
                    view = memoryview(job.buffer)[: job.size]
                    try:
                        _write_all(job.out, view)
                    finally:
                        view.release()
            except OSError as exc:  # kept without its traceback, whose frames hold views of the buffer
                error = OSError(exc.errno, exc.strerror, exc.filename)
            finally:
                try:
                    os.close(job.out)
                except OSError as exc:
                    error = error or exc
                self._give_back(job.buffer)
                job.done(error)

    def stop(self) -> None:
        """Cancel the queued writes not yet started, wait for those being made, free the buffers.

        Every queued file is closed and its ``done`` called before this returns; the pool then stops
        taking writes (a later one is made by the calling thread).
        """
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join()
        with self._cond:
            for buffer in self._free:
                try:
                    buffer.close()
                except BufferError:
                    pass  # a view of it still lives (an error's traceback): freed with the last one
            self._free.clear()
            self._buffers = 0


class _Job(NamedTuple):
    """A block's queued O_DIRECT write: its open file, the aligned buffer holding it, its length, and what to
    call once the file is closed (with the write's error, or None)."""

    out: int
    buffer: mmap.mmap
    size: int
    done: Callable[[OSError | None], None]


def _staged_name(cid: str) -> str:
    return f"{shard_of(cid)}/{cid}"  # the staging directory is named as the block's shard


def _take_shard(batch_fd: int, root_fd: int, shard: str) -> bool:
    """Rename the staging directory ``shard`` into the root as that shard; False if the root has one now.

    ``rename(2)`` of a directory replaces only an absent or *empty* directory, so a shard another
    writer made meanwhile is never lost: if it holds a block the rename fails and the caller moves
    the blocks one by one; if it is still empty it is replaced, and that writer's later renames
    into ``<root>/<shard>/`` land in this directory.
    """
    try:
        os.rename(shard, shard, src_dir_fd=batch_fd, dst_dir_fd=root_fd)
        return True
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR):
            return False
        raise


def _fsync_at(dir_fd: int, name: str) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_shards(root_fd: int, shards: set[str]) -> bool:
    """Create the shard directories in ``shards`` that do not exist yet; True if any was created."""
    made = False
    for shard in shards:
        try:
            os.mkdir(shard, dir_fd=root_fd)
            made = True
        except FileExistsError:
            pass
    return made


def _move(src_fd: int, root_fd: int, name: str) -> bool:
    """Rename a staged block onto its shard; True if the shard directory had to be created."""
    shard = shard_of(name)
    target = f"{shard}/{name}"
    try:
        os.rename(name, target, src_dir_fd=src_fd, dst_dir_fd=root_fd)
        return False
    except FileNotFoundError:
        try:
            os.mkdir(shard, dir_fd=root_fd)
        except FileExistsError:
            pass
        os.rename(name, target, src_dir_fd=src_fd, dst_dir_fd=root_fd)
        return True
