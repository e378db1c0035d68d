"""The importer: bytes and local files/trees into the block store, as UnixFS files and kuro.fs directories.

## The one decision
Importing is hashing-bound, so the importer hashes each raw leaf **exactly
once** — inside ``store.put``, which mints the CID — and runs those puts on
``workers`` threads (default 2), because ``hashlib`` releases the GIL on
large buffers: over contiguous runs of chunks, or, for a file on disk, the
calling thread and ``workers - 1`` pool threads each claiming the next chunk
from one cursor (the caller works instead of waiting, and within a batch no thread idles while
another finishes a longer run: the two pool threads' halves of each batch left
their threads blocked 42–60 ms per 256 MiB at load 4, the cursor 13–16 ms). Chunks are zero-copy
``memoryview`` slices of the input; a store keeps immutable ``bytes``, so each
leaf is copied once, inside ``put`` (a one-chunk ``bytes`` input is kept as
is). That copy holds the GIL and, for fresh memory, costs about as much as the
hashing; :func:`file_cid` (CID only, ``--only-hash``) hashes the views in place
and copies nothing. Leaf CIDs are fed in order to
:class:`~kuro_fs.unixfs.BalancedLayout`, so the DAG (and every CID) is the one
:func:`kuro_fs.unixfs.write_file` makes serially.
Files on disk are read with ``os.pread`` by the thread that puts each chunk, just
before its put (the kernel's copy runs without the GIL, and the store keeps the bytes
object it is given), and dropped after it unless the store keeps it: at most ``workers``
chunks are read and not yet stored at any moment, whatever the file's size. Batches of
:data:`BATCH_BYTES` only bound how many leaf CIDs wait to be laid out, and are where the
threads meet; :func:`import_stream` reads any binary stream
through one reused buffer of that size. What a memory store adds beyond bare hashing is the
memory itself: each kept chunk is fresh pages the kernel faults in and zeroes (65,536
minor faults for 256 MiB, ~0.2 s of system time here), where ``pread`` + ``sha256``
dropping each chunk reuses one buffer and takes none. ``tools/bench_store.py`` shows
both sides: through a store that keeps nothing, the import measured 1.03–1.06× bare
``pread`` + ``sha256`` on 1 and 2 threads (best of 5, interleaved, load 5.5; medians 1.07–1.12×); into the
memory store, it sits at ``pread`` + ``sha256`` keeping every chunk (1.04–1.06× in the
last full run). A fault costs about the same CPU on 1 and 2 threads (2.15–2.19 and 2.19–2.63 µs of system time,
no lock contention in ``perf``): work 2 threads share, as they share the hashing (with both CPUs free,
keeping took 0.289 s on 1 thread and 0.175 s on 2, bare ``pread`` + ``sha256`` 0.170 s and 0.092 s, so a
store that holds the bytes sits near 1.9× the bare anchor whatever kuro does); where a 1-thread
figure seemed to gain as much as 2, its samples had reused a third of the pages an earlier sample freed in
glibc's main arena (20,452 faults instead of 65,484), which pool threads' arenas hand back: the bench's rows
say the faults their samples paid. Neither huge pages nor pre-faulting lowers
that price here (measured, 256 MiB in 32 MiB ``MAP_PRIVATE`` arenas): the cost is allocating and
zeroing the pages, not the 65,536 traps (``MADV_POPULATE_WRITE`` and ``MAP_POPULATE`` took the same
~0.11 s of system time as touching each page), and on this VM a huge page freed for more than a second
is handed back to the host (virtio-balloon free page reporting), so a fresh ``MADV_HUGEPAGE`` arena
cost 0.36–1.1 s of faults against 0.11–0.26 s for 4 KiB pages (0.014 s only when reused at once).
In a tree, each directory's files are imported on the
``workers`` threads too, in contiguous runs of files, and so are the HashMap node blocks of
a large directory (reading a file and creating a block file are kernel work that runs without the
GIL; past its first 1,024 small blocks a disk store's batch creates them in a writer process,
:mod:`kuro_fs.filewriter`, and two workers still measured faster than one beside it: medians 1.19×
and 1.37× ``cp -r`` + ``sync``, 5 rounds interleaved at load ~11; ``tools/bench.py`` measures it).
A directory's block is built here, between
its files and the next directory's: building it on a thread of its own while the walk went on was
tried and measured no faster (10,000 files into a store that keeps nothing, load 2: medians 0.30 s
serial, 0.31 s overlapped, 7 rounds interleaved; the build is ~20 ms of GIL-held Python a directory
of 1,000, likely keeping the workers, back from each file's system calls, waiting). A failed import
waits for every file in flight before its batch is discarded, so no put outlives the batch.

Every import runs inside the store's batch (:func:`~kuro_fs.blocks.open_batch`),
with the workers in copies of that context: a durable store then syncs once for
the whole import instead of twice per block, and an import that fails (a file
that shrank, a symlink met half-way through a tree) leaves none of its blocks
visible. A store without ``batch()`` gets ordinary puts.

``store.put`` must tolerate calls from several threads at once; both in-tree stores
(:class:`~kuro_fs.blocks.MemoryBlockStore`, :class:`~kuro_fs.filestore.FileBlockStore`)
are. Pass ``workers=1`` for a store that is not.

## Effects
Threads (hashing), reading local files and directories.

## Not done here
No symlinks or special files (refused with :class:`~kuro_fs.errors.KuroFsError`),
no mode/mtime, no rabin chunking.
"""

from __future__ import annotations

import contextvars
import errno
import hashlib
import itertools
import os
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Final, TypeVar

from kuro_fs.blocks import BlockStore, open_batch
from kuro_fs.cid import cid_for, cid_from_digest
from kuro_fs.errors import KuroFsError
from kuro_fs.fsdir import Entry, write_dir
from kuro_fs.paths import MAX_NAME_BYTES, clean_path, escape_name, has_control
from kuro_fs.unixfs import DEFAULT_CHUNK_SIZE, DEFAULT_WIDTH, BalancedLayout, FileRoot

__all__ = ["BATCH_BYTES", "file_cid", "import_bytes", "import_file", "import_path", "import_stream"]

#: Bytes read from disk per batch when streaming a file (rounded to whole chunks).
BATCH_BYTES: Final = 16 << 20


_T = TypeVar("_T")
_R = TypeVar("_R")
#: The threads a directory's files are imported on (None: this thread).
Pool = ThreadPoolExecutor | None


class _Stopped(Exception):
    """A run of puts gave up because an earlier item failed or the import was abandoned (never seen outside)."""


def _put_all(
    put: Callable[[_T], _R],
    items: Sequence[_T],
    workers: int,
    pool: ThreadPoolExecutor | None,
    abandoned: threading.Event | None = None,
) -> list[_R]:
    # ``put`` over contiguous runs of ``items`` on the pool; each run in a copy of this context,
    # so the workers' puts join the store batch the caller opened. A run stops before any item
    # after one that failed (its result could not be used: the earliest failure is the one
    # raised, as a serial loop's) and before any item once ``abandoned`` is set.
    if pool is None or workers <= 1 or len(items) < 2:
        return [put(item) for item in items]
    step = -(-len(items) // workers)
    failed = [len(items)]  # the lowest failed index so far (a lost race only leaves a run going longer)
    futures = [
        pool.submit(contextvars.copy_context().run, _put_run, put, items, lo, step, failed, abandoned)
        for lo in range(0, len(items), step)
    ]
    # In order: every run before the earliest failure finished whole, so the first to raise holds it.
    return [cid for future in futures for cid in future.result()]


def _put_run(
    put: Callable[[_T], _R],
    items: Sequence[_T],
    lo: int,
    step: int,
    failed: list[int],
    abandoned: threading.Event | None,
) -> list[_R]:
    out = []
    for i in range(lo, min(lo + step, len(items))):
        if failed[0] < i or (abandoned is not None and abandoned.is_set()):
            raise _Stopped
        try:
            out.append(put(items[i]))
        except BaseException:
            failed[0] = min(failed[0], i)
            raise
    return out


def _put_claimed(
    put: Callable[[_T], _R],
    items: Sequence[_T],
    workers: int,
    pool: ThreadPoolExecutor | None,
    abandoned: threading.Event | None = None,
) -> list[_R]:
    # ``put`` over ``items`` on the calling thread and ``workers - 1`` of the pool's, each claiming the
    # next item from one shared cursor: no thread idles at the batch's end while another finishes a longer run,
    # and the caller, which would only wait, needs no wake-up. A thread stops before any item after
    # one that failed and once ``abandoned`` is set; the earliest failure is the one raised, as a
    # serial loop's (every item before it was claimed earlier, and is finished when the threads are), but a
    # KeyboardInterrupt met on the way comes first.
    if pool is None or workers <= 1 or len(items) < 2:
        return [put(item) for item in items]
    count = len(items)
    results: list[_R | None] = [None] * count
    errors: dict[int, BaseException] = {}
    cursor = itertools.count()  # next() on it is atomic under the GIL
    failed = [count]  # the lowest failed index so far (a lost race only leaves a thread going one item longer)

    def claim() -> None:
        while (i := next(cursor)) < count and i < failed[0]:
            if abandoned is not None and abandoned.is_set():  # recorded: a hole in results is never a CID
                errors[i] = _Stopped()
                failed[0] = min(failed[0], i)
                return
            try:
                results[i] = put(items[i])
            except BaseException as exc:  # a Ctrl-C in the caller's put too: raised once the helpers are done
                errors[i] = exc
                failed[0] = min(failed[0], i)
                return

    helpers = [pool.submit(contextvars.copy_context().run, claim) for _ in range(workers - 1)]
    claim()
    for helper in helpers:
        helper.result()
    if errors:
        stops = [errors[i] for i in sorted(errors) if not isinstance(errors[i], Exception)]
        raise stops[0] if stops else errors[min(errors)]  # a Ctrl-C is never traded for another failure
    return results  # type: ignore[return-value]  # every item was put: none failed


class _Pool(ThreadPoolExecutor):
    """A thread pool that counts the tasks it is running, so that :func:`_join` can wait for each one.

    The executor's own list of threads is not enough: ``submit`` starts a thread, then adds it to
    that list, so a Ctrl-C landing while the thread starts leaves it running a task (its work item
    was queued first) that ``shutdown(wait=True)`` does not wait for, and its put would outlive the
    import's batch. Counted here, such a task is waited for; one that begins after :meth:`close`
    does nothing.
    """

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self._tasks = threading.Condition()
        self._running = 0
        self._closed = False

    def submit(self, fn: Callable[..., _R], /, *args: object, **kwargs: object) -> Future[_R]:
        return super().submit(self._task, fn, *args, **kwargs)

    def _task(self, fn: Callable[..., _R], /, *args: object, **kwargs: object) -> _R:
        with self._tasks:
            if self._closed:
                raise _Stopped
            self._running += 1
        try:
            return fn(*args, **kwargs)
        finally:
            with self._tasks:
                self._running -= 1
                self._tasks.notify_all()

    def close(self) -> None:
        """Let no task begin from now on, and wait for every task that has begun."""
        with self._tasks:
            self._closed = True
            while self._running:
                self._tasks.wait()


def _join(pool: _Pool) -> None:
    """Wait for every task of ``pool`` (cancelling those not started), even through further Ctrl-Cs.

    A put that outlived its import's batch would be an ordinary put, and a failed import's
    block would become visible; the wait is short, since the runs stop at their next item.
    """
    interrupted = False
    while True:
        try:
            pool.shutdown(wait=True, cancel_futures=True)
            pool.close()
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


def _store_put(store: BlockStore) -> Callable[[memoryview], str]:
    return lambda view: store.put(view, "raw")  # type: ignore[arg-type]  # stores copy what they keep


def _hash_only(view: memoryview) -> str:
    return cid_from_digest(hashlib.sha256(view).digest(), "raw")


def _cid_only_put(block: bytes, codec: str) -> str:
    return cid_for(block, codec)


def _check(chunk_size: int, width: int, workers: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    if width < 2:
        raise ValueError(f"width must be at least 2, got {width}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")


def import_file(
    store: BlockStore,
    data: bytes | bytearray | memoryview,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    width: int = DEFAULT_WIDTH,
    workers: int = 2,
) -> FileRoot:
    """Import ``data`` as a UnixFS file; return its :class:`~kuro_fs.unixfs.FileRoot` (cid, size, tsize)."""
    _check(chunk_size, width, workers)
    view = memoryview(data).cast("B")
    with open_batch(store):
        if len(view) <= chunk_size:
            cid = store.put(data if type(data) is bytes else bytes(view), "raw")  # an exact bytes is kept
            return FileRoot(cid, len(view), len(view))
        views = [view[i : i + chunk_size] for i in range(0, len(view), chunk_size)]
        layout = BalancedLayout(store.put, width)
        with _threads(workers) as (pool, abandoned):
            cids = _put_all(_store_put(store), views, workers, pool, abandoned)
        for cid, chunk in zip(cids, views, strict=True):
            layout.add_leaf(cid, len(chunk))
        return layout.finish()


def import_bytes(
    store: BlockStore,
    data: bytes | bytearray | memoryview,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    width: int = DEFAULT_WIDTH,
    workers: int = 2,
) -> str:
    """Import ``data`` as a UnixFS file (raw leaves, balanced); return the file CID.

    >>> from kuro_fs.blocks import MemoryBlockStore
    >>> import_bytes(MemoryBlockStore(), b"")
    'bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku'

    Raises ValueError: chunk_size < 1, width < 2 or workers < 1.
    """
    return import_file(store, data, chunk_size=chunk_size, width=width, workers=workers).cid


def file_cid(
    data: bytes | bytearray | memoryview,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    width: int = DEFAULT_WIDTH,
    workers: int = 2,
) -> str:
    """The UnixFS file CID :func:`import_bytes` would return, computed without storing anything.

    This is the "CID only" import (``ipfs add --only-hash``): leaves are hashed in
    place on ``workers`` threads, with no copy of the input.

    >>> from kuro_fs.blocks import MemoryBlockStore
    >>> file_cid(b"abc" * 100000) == import_bytes(MemoryBlockStore(), b"abc" * 100000)
    True
    """
    _check(chunk_size, width, workers)
    view = memoryview(data).cast("B")
    if len(view) <= chunk_size:
        return _hash_only(view)
    views = [view[i : i + chunk_size] for i in range(0, len(view), chunk_size)]
    layout = BalancedLayout(_cid_only_put, width)
    with _threads(workers) as (pool, abandoned):
        cids = _put_all(_hash_only, views, workers, pool, abandoned)
    for cid, chunk in zip(cids, views, strict=True):
        layout.add_leaf(cid, len(chunk))
    return layout.finish().cid


@contextmanager
def _threads(workers: int) -> Iterator[tuple[ThreadPoolExecutor | None, threading.Event]]:
    """A pool of ``workers`` threads (None for one: the caller's) and the event that abandons its runs;
    on the way out, whatever ends the block, the runs are abandoned and every thread's task has ended."""
    abandoned = threading.Event()
    if workers <= 1:
        yield None, abandoned
        return
    pool = _Pool(workers)
    try:
        yield pool, abandoned
    finally:
        abandoned.set()
        _join(pool)


def import_stream(
    store: BlockStore,
    stream: object,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    width: int = DEFAULT_WIDTH,
    workers: int = 2,
    batch_bytes: int = BATCH_BYTES,
) -> FileRoot:
    """Import everything readable from a binary ``stream`` (with ``readinto``), batch by batch.

    At most ``batch_bytes`` (rounded up to a whole chunk) are held at once; the buffer is reused.
    Raises TypeError: ``stream`` has no ``readinto``. Raises BlockingIOError: a non-blocking stream had
    no data ready (``readinto`` answered None); nothing of it is visible (the batch is discarded).
    """
    _check(chunk_size, width, workers)
    readinto = getattr(stream, "readinto", None)
    if readinto is None:
        raise TypeError("import_stream needs a binary stream with readinto()")
    per_batch = max(1, batch_bytes // chunk_size) * chunk_size
    buf = bytearray(per_batch)
    whole = memoryview(buf)
    layout = BalancedLayout(store.put, width)
    total = 0
    with open_batch(store), _threads(workers) as (pool, abandoned):
        while True:
            filled = 0
            while filled < per_batch:
                n = readinto(whole[filled:])
                if n is None:  # a non-blocking stream with nothing to read yet: not its end
                    raise BlockingIOError(errno.EAGAIN, "the stream is non-blocking and had no data ready")
                if not n:
                    break
                filled += n
            if filled == 0 and total > 0:
                break
            views = [whole[i : min(i + chunk_size, filled)] for i in range(0, filled, chunk_size)] or [whole[:0]]
            for cid, chunk in zip(_put_all(_store_put(store), views, workers, pool, abandoned), views, strict=True):
                layout.add_leaf(cid, len(chunk))
            total += filled
            if filled < per_batch:
                break
    return layout.finish()


_OPEN_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _import_regular_file(
    store: BlockStore, path: str, chunk_size: int, width: int, workers: int, batch_bytes: int = BATCH_BYTES
) -> FileRoot:
    # Each worker ``pread``s its own chunks: the read copies into a fresh bytes object with the GIL
    # released, and the store keeps that object as is, so no chunk is copied under the GIL.
    # Opened without following a symlink and without blocking on a FIFO; what was opened is checked
    # with fstat, so a file swapped for something else after the listing is refused, not read.
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, "symlinks and special files are not imported") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(path, "symlinks and special files are not imported")
        size = info.st_size
        if size <= chunk_size:
            data = os.pread(fd, size + 1, 0)  # one byte more shows a file that grew
            if len(data) != size:
                raise _refuse(path, f"the file changed size while importing ({size} -> {len(data)} bytes)")
            return FileRoot(store.put(data, "raw"), size, size)
        per_batch = max(1, batch_bytes // chunk_size)
        offsets = range(0, size, chunk_size)
        layout = BalancedLayout(store.put, width)

        def put_chunk(offset: int) -> str:
            want = min(chunk_size, size - offset)
            data = os.pread(fd, want, offset)
            if len(data) != want:
                raise _refuse(path, f"the file shrank while importing (short read at offset {offset})")
            return store.put(data, "raw")

        with _threads(workers) as (pool, abandoned):  # joined before the fd its threads read is closed
            for start in range(0, len(offsets), per_batch):
                batch = offsets[start : start + per_batch]
                for cid, offset in zip(_put_claimed(put_chunk, batch, workers, pool, abandoned), batch, strict=True):
                    layout.add_leaf(cid, min(chunk_size, size - offset))
        return layout.finish()
    finally:
        os.close(fd)


def _refuse(path: str | os.PathLike[str], why: str) -> KuroFsError:
    # The path escaped (a local name may hold a terminal escape or a newline; bytes that are not
    # UTF-8 show as \udcXX): the message is printed, and must not act on the terminal that shows it.
    return KuroFsError(f"cannot import {escape_name(os.fspath(path))}: {why}")


def _unholdable(name: str) -> str:
    # Why clean_path refuses a local name as one entry.
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "the name cannot be a kuro.fs entry: it is not UTF-8"
    if has_control(name):
        return "the name cannot be a kuro.fs entry: it holds a control character"
    if name.strip() == "":
        return "the name cannot be a kuro.fs entry: it is whitespace only"
    if size > MAX_NAME_BYTES:
        return f"the name cannot be a kuro.fs entry: it is {size} bytes, more than {MAX_NAME_BYTES}"
    return "the name cannot be a kuro.fs entry"


class _Listing:
    """One directory of a tree being imported: its sorted listing, how far it got, what it found."""

    __slots__ = ("at", "entries", "error", "files", "items", "path", "pending")

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[os.DirEntry[str]] | None = None
        self.at = 0
        self.entries: dict[str, Entry] = {}
        self.files: list[tuple[str, str]] = []
        self.error: KuroFsError | OSError | None = None
        self.pending = ""  # the name of the subdirectory being imported

    def next_dir(self) -> str | None:
        """The next subdirectory to import (its name kept in ``pending``); None once the listing is
        done or failed (``error``: raised after the files named before the failing entry, whose
        failure comes first)."""
        try:
            if self.items is None:
                with os.scandir(self.path) as listing:
                    self.items = sorted(listing, key=lambda e: e.name)
            while self.error is None and self.at < len(self.items):
                item = self.items[self.at]
                self.at += 1
                name = item.name
                if clean_path(name) != (name,):
                    raise _refuse(item.path, _unholdable(name))
                if item.is_dir(follow_symlinks=False):
                    self.pending = name
                    return item.path
                if not item.is_file(follow_symlinks=False):
                    raise _refuse(item.path, "symlinks and special files are not imported")
                self.files.append((name, item.path))
        except (KuroFsError, OSError) as exc:
            self.error = exc
        return None


def _import_dir(
    store: BlockStore,
    path: str,
    chunk_size: int,
    width: int,
    workers: int,
    batch_bytes: int,
    pool: Pool,
    abandoned: threading.Event | None,
) -> str:
    # The directory's files are imported on the pool, in contiguous runs, one file at a time per
    # run (a large file's chunks then go on its thread and one helper claiming from one cursor, as a lone
    # file's do): reading a file
    # and writing a block file are kernel work that runs without the GIL (most small block files
    # are a writer process's, kuro_fs.filewriter). Subdirectories are walked here, one after
    # another, as they come — in a loop over an explicit stack, not by recursion: a local tree
    # may be nested deeper than Python's recursion limit (kuro.fs takes a path of thousands of
    # segments).
    def one(file: tuple[str, str]) -> FileRoot:
        return _import_regular_file(store, file[1], chunk_size, width, workers, batch_bytes)

    def put_node(block: bytes) -> str:
        return store.put(block, "dag-cbor")

    def put_nodes(blocks: Sequence[bytes]) -> None:  # a large directory is many HashMap nodes: on the threads too
        _put_all(put_node, blocks, workers, pool, abandoned)

    stack = [_Listing(path)]
    while True:
        top = stack[-1]
        below = top.next_dir()
        if below is not None:
            stack.append(_Listing(below))
            continue
        stack.pop()
        try:
            for (name, _), froot in zip(top.files, _put_all(one, top.files, workers, pool, abandoned), strict=True):
                top.entries[name] = Entry(froot.cid, froot.size)
            if top.error is not None:
                raise top.error
            root = write_dir(store, top.entries, put_blocks=put_nodes)
        except (KuroFsError, OSError) as exc:
            if not stack:
                raise
            stack[-1].error = exc  # the parent stops listing here, as at any entry it cannot import
            continue
        if not stack:
            return root
        stack[-1].entries[stack[-1].pending] = Entry(root, 0)


def import_path(
    store: BlockStore,
    path: str | os.PathLike[str],
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    width: int = DEFAULT_WIDTH,
    workers: int = 2,
    batch_bytes: int = BATCH_BYTES,
) -> str:
    """Import a local file (→ its UnixFS file CID) or directory tree (→ a kuro.fs root CID), streaming.

    Raises KuroFsError: a symlink, special file or unnameable entry; OSError from the filesystem.
    """
    _check(chunk_size, width, workers)
    where = os.fspath(path)
    mode = os.stat(where, follow_symlinks=False).st_mode
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise _refuse(where, "symlinks and special files are not imported")
    with open_batch(store):
        if stat.S_ISREG(mode):
            return _import_regular_file(store, where, chunk_size, width, workers, batch_bytes).cid
        # Every file import ends before the batch does, also after a failure or a Ctrl-C (_threads):
        # a put that outlived the batch would make a block of a failed import visible.
        with _threads(workers) as (pool, abandoned):
            return _import_dir(store, where, chunk_size, width, workers, batch_bytes, pool, abandoned)
