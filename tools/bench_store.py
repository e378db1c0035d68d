#!/usr/bin/env python3
"""Block-store measurements for ``tools/bench.py``: import, read-back, CAR import and memory, each beside its anchor.

Every figure is measured **interleaved** with its anchor (A B A B …, best of each),
with the load average before and after recorded, and compares like with like:

* import of a file into the memory store and into the disk store ÷ ``hashlib.sha256`` of the same
  256 KiB chunks ``pread`` on the **same number of threads** (1 vs 1 and 2 vs 2); the memory store also
  ÷ the same ``pread`` + ``sha256`` keeping every chunk, as the store must (fresh pages: the floor of holding them),
  and the same import into a store that keeps nothing (:class:`HashOnlyStore`: kuro's pipeline alone);
* import into the disk store (``FileBlockStore``) ÷ ``cp`` of the file + one fsync of the copy, and beside both
  the same block files in their shards written through the page cache on the same threads (no hashing, staging
  or renames) + one ``syncfs`` — what the store's ``O_DIRECT`` writes of large blocks skip (the rows say
  whether they did: ``FileBlockStore.wrote_direct``, False where the filesystem refused ``O_DIRECT``);
* import of a tree of 10,000 small files into the disk store ÷ ``cp -r`` of the tree + ``sync``, and the
  same import into a store that keeps nothing (what kuro does besides writing blocks) ÷ the same, and the floor
  of any serial Python import of the tree (:func:`import_floor`: a bare loop reading, hashing and writing the
  same blocks, staged per shard, two ``syncfs``) ÷ the same;
* reading the file back with verification from the disk store into one buffer (``read_file``)
  ÷ a plain ``read()`` of the file into one buffer, and streaming it through a reused window
  (``read_into``) ÷ ``readinto`` of the file through the same window, and ÷ ``pread`` + ``sha256`` of the same
  blocks on the same threads (the floor of reading every byte verified: 1× is hashing at ``hashlib``'s speed);
* ``import_car`` of a CAR of many four-byte blocks into the disk store, in blocks/s ÷ the floor of one file
  per block (the same number of four-byte files written with ``os.open``/``write``/``close`` + one ``syncfs``);
* peak RSS growth of ``Fs.read`` of a large file (in a fresh subprocess, from ``/proc/self/status``
  after resetting the high-water mark) ÷ the file size, with ``b"".join(iter_file(…))`` beside it.

Each disk sample starts after an ``os.sync()`` (not timed), in a directory of its own, so no sample
pays for the previous one's writeback; samples are deleted only at the end of their section (creating
files right after deleting thousands made ext4 spend several times the CPU per creation here).
The functions return plain dicts (``figure``, ``value``, ``unit``, ``anchor``, ``anchor_value``,
``goal``, ``note``, ``extra``) that ``tools/bench.py`` turns into rows. One part of the section can be
run alone, e.g. ``tools/bench_store.py small_files`` (the parts: import, small_files, read_back, car, memory).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kuro_fs.atomic import sync_filesystem  # noqa: E402
from kuro_fs.blocks import MemoryBlockStore  # noqa: E402
from kuro_fs.car import import_car, write_car  # noqa: E402
from kuro_fs.cid import cid_for, parse  # noqa: E402
from kuro_fs.fileread import read_file, read_into  # noqa: E402
from kuro_fs.filestore import READ_HELPERS, FileBlockStore  # noqa: E402
from kuro_fs.importer import import_path  # noqa: E402
from kuro_fs.unixfs import DEFAULT_CHUNK_SIZE  # noqa: E402

MiB = 1 << 20
Sample = Callable[[], float]  # runs once, returns the seconds of the part it measures


def load() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages (zeros where the OS has none)."""
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)


def interleaved(a: Sample, b: Sample, repeat: int) -> tuple[float, float]:
    """Run ``a`` and ``b`` alternately ``repeat`` times each; return the best seconds of each."""
    best_a = best_b = float("inf")
    for _ in range(repeat):
        best_a = min(best_a, a())
        best_b = min(best_b, b())
    return best_a, best_b


def interleaved_all(samples: list[Sample], repeat: int) -> list[float]:
    """:func:`interleaved` of any number: A B C … A B C …; the best seconds of each."""
    best = [float("inf")] * len(samples)
    for _ in range(repeat):
        for i, sample in enumerate(samples):
            best[i] = min(best[i], sample())
    return best


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


class Faulting:
    """A sample that remembers the minor page faults (the whole process's) of its fastest run.

    A memory store keeps every chunk in fresh memory: one fault per 4 KiB kept (65,536 for 256 MiB), unless
    the allocator hands back pages an earlier sample freed — glibc's main arena (the calling thread's)
    sometimes keeps a third of them across samples, pool threads' arenas gave theirs back here — so a row
    says how many its figure paid.
    """

    def __init__(self, sample: Sample) -> None:
        self.sample = sample
        self.best = float("inf")
        self.faults = 0

    def __call__(self) -> float:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        took = self.sample()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        if took < self.best:
            self.best, self.faults = took, faults
        return took


class Dirs:
    """New sample directories under one base, each used once, all deleted by :meth:`clean`."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.count = 0

    def new(self) -> Path:
        self.count += 1
        path = self.base / f"sample-{self.count}"
        os.sync()  # the previous sample's writeback is not this one's cost
        return path

    def clean(self) -> None:
        _discard(self.base)


#: Paths whose deletion waits for the end of :func:`bench_all` (None: delete at once, as a part run alone does).
_DEFERRED: list[Path] | None = None


def _discard(path: Path) -> None:
    """Delete a sample file or tree — at the end of :func:`bench_all` when it runs the parts: ext4 skips recently
    freed inodes for minutes after a large delete (``recently_deleted``: a create then cost 0.4–1.3 ms instead of
    30–60 µs), so a part that deleted its samples slowed the file creation of every part after it (measured: the
    disk import took 0.74 s right after the small files' clean-up, 0.37 s in the run before)."""
    if _DEFERRED is not None:
        _DEFERRED.append(path)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _row(figure: str, value: float, unit: str, anchor: str, anchor_value: float, **kw: Any) -> dict[str, Any]:
    return {"figure": figure, "value": value, "unit": unit, "anchor": anchor, "anchor_value": anchor_value, **kw}


def _with_load(rows: list[dict[str, Any]], before: tuple[float, ...]) -> list[dict[str, Any]]:
    # Record the load around the section, and say each figure on stderr as soon as it exists (the
    # clean-up of a million-file sample can take minutes on a busy disk; the table comes at the end).
    after = load()
    for row in rows:
        row.setdefault("extra", {}).update({"load_before": before, "load_after": after})
        row["note"] = (row.get("note", "") + f" load {before[0]:.2f}→{after[0]:.2f}").strip()
        print(f"  {row['figure']}: {row['value']:.4g} {row['unit']} vs {row['anchor_value']:.4g}", file=sys.stderr)
    return rows


# ---- anchors


class HashOnlyStore:
    """A sink with a store's ``put``: it mints the CID and keeps nothing (``import_path`` through it is kuro's
    import pipeline without the price of holding the bytes: one fresh page fault per 4 KiB kept)."""

    def put(self, data: bytes, codec: str = "raw") -> str:
        return cid_for(data, codec)


def hash_chunks(path: Path, threads: int, chunk: int = DEFAULT_CHUNK_SIZE) -> None:
    """The floor of an import: ``pread`` + ``sha256`` of every chunk, split in contiguous runs over ``threads``."""
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        offsets = range(0, os.fstat(fd).st_size, chunk)

        def run(part: range) -> None:
            for offset in part:
                hashlib.sha256(os.pread(fd, chunk, offset)).digest()

        step = -(-len(offsets) // threads)
        parts = [offsets[i : i + step] for i in range(0, len(offsets), step)]
        if threads == 1:
            run(offsets)
            return
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(run, parts))


def hash_and_keep_chunks(path: Path, threads: int, chunk: int = DEFAULT_CHUNK_SIZE) -> list[bytes]:
    """:func:`hash_chunks`, keeping every chunk read (as a memory store must): the floor of a memory-store import.

    Each chunk is then a fresh allocation whose pages the kernel faults in and zeroes, where
    :func:`hash_chunks` reuses one freed buffer; the difference is the price of holding the bytes.
    """
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        offsets = range(0, os.fstat(fd).st_size, chunk)

        def run(part: range) -> list[bytes]:
            kept = []
            for offset in part:
                data = os.pread(fd, chunk, offset)
                hashlib.sha256(data).digest()
                kept.append(data)
            return kept

        step = -(-len(offsets) // threads)
        parts = [offsets[i : i + step] for i in range(0, len(offsets), step)]
        if threads == 1:
            return run(offsets)
        with ThreadPoolExecutor(threads) as pool:
            return [data for kept in pool.map(run, parts) for data in kept]


def cp_and_fsync(src: Path, dirs: Dirs) -> float:
    """Seconds for ``cp src dst`` plus one fsync of the copy."""
    folder = dirs.new()
    folder.mkdir(parents=True)
    dst = folder / src.name

    def go() -> None:
        subprocess.run(["cp", str(src), str(dst)], check=True)
        fd = os.open(dst, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    return _timed(go)


def cp_tree_and_sync(src: Path, dirs: Dirs) -> float:
    """Seconds for ``cp -r src dst`` plus ``sync``."""
    dst = dirs.new()

    def go() -> None:
        subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
        os.sync()

    return _timed(go)


def block_names(path: Path, chunk: int = DEFAULT_CHUNK_SIZE) -> list[str]:
    """The CID of every ``chunk`` of ``path``: the block files an import of it leaves (hashed once, untimed)."""
    with open(path, "rb", buffering=0) as f:
        return [cid_for(piece) for piece in iter(lambda: f.read(chunk), b"")]


def write_blocks_buffered(
    src: Path, dirs: Dirs, names: list[str], threads: int, chunk: int = DEFAULT_CHUNK_SIZE
) -> float:
    """Seconds to write each ``chunk`` of ``src`` (``pread``) as the file the import leaves for it, in its
    shard directory (made on first use), on ``threads`` threads in contiguous runs, then ``syncfs`` once.

    The import's files, directories and bytes written as ``cp`` writes its one file (through the page
    cache; no hashing, staging, rename or early writeback): what the page cache costs for 1,024 files.
    """
    root = dirs.new()
    root.mkdir(parents=True)

    def run(part: range, sfd: int, dfd: int) -> None:
        for i in part:
            name = names[i]
            shard = name[-3:-1]
            try:
                fd = os.open(f"{shard}/{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd)
            except FileNotFoundError:
                try:
                    os.mkdir(shard, dir_fd=dfd)
                except FileExistsError:
                    pass
                fd = os.open(f"{shard}/{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd)
            try:
                os.write(fd, os.pread(sfd, chunk, i * chunk))
            finally:
                os.close(fd)

    def go() -> None:
        dfd = os.open(root, os.O_RDONLY)
        sfd = os.open(src, os.O_RDONLY)
        try:
            step = -(-len(names) // threads)
            parts = [range(i, min(i + step, len(names))) for i in range(0, len(names), step)]
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda part: run(part, sfd, dfd), parts))
            if not sync_filesystem(dfd):
                os.sync()
        finally:
            os.close(sfd)
            os.close(dfd)

    return _timed(go)


def write_files_floor(dirs: Dirs, blobs: list[bytes]) -> float:
    """Seconds to write each blob as its own file (``os.open``/``write``/``close``) and ``syncfs`` once."""
    root = dirs.new()
    root.mkdir(parents=True)

    def go() -> None:
        dfd = os.open(root, os.O_RDONLY)
        try:
            for i, blob in enumerate(blobs):
                fd = os.open(str(i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd)
                os.write(fd, blob)
                os.close(fd)
            if not sync_filesystem(dfd):
                os.sync()
        finally:
            os.close(dfd)

    return _timed(go)


def import_floor(tree: Path, nodes: list[bytes], dirs: Dirs) -> float:
    """Seconds for the least a serial Python import of ``tree`` into a new disk store does, with nothing of kuro's.

    Each file is opened, ``fstat``-ed, read and hashed (its name: :func:`~kuro_fs.cid.cid_for`) and written as a
    block file (``os.open``/``write``/``close``) into a staging directory per shard, as are the directories'
    ``nodes`` (built beforehand: the HashMap blocks the import makes); then one ``syncfs``, a rename of each
    staging directory into place and a second ``syncfs`` (the batch commit). No listing sort, no name check,
    no directory building, no lock: what is left is the system calls and the hashing a block file per block needs.
    """
    root = dirs.new()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC

    def go() -> None:
        root.mkdir(parents=True)
        stage = root / ".stage"
        stage.mkdir()
        sfd = os.open(stage, os.O_RDONLY)
        made: set[str] = set()

        def write(data: bytes, codec: str) -> None:
            name = cid_for(data, codec)
            shard = name[-3:-1]
            if shard not in made:
                os.mkdir(shard, dir_fd=sfd)
                made.add(shard)
            out = os.open(f"{shard}/{name}", flags, 0o644, dir_fd=sfd)
            os.write(out, data)
            os.close(out)

        try:
            folders = [str(tree)]
            while folders:
                with os.scandir(folders.pop()) as listing:
                    for entry in listing:
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(entry.path)
                            continue
                        fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
                        data = os.read(fd, os.fstat(fd).st_size)
                        os.close(fd)
                        write(data, "raw")
            for node in nodes:
                write(node, "dag-cbor")
            rfd = os.open(root, os.O_RDONLY)
            try:
                if not sync_filesystem(sfd):
                    os.sync()
                for shard in made:
                    os.rename(shard, shard, src_dir_fd=sfd, dst_dir_fd=rfd)
                if not sync_filesystem(rfd):
                    os.sync()
            finally:
                os.close(rfd)
        finally:
            os.close(sfd)

    return _timed(go)


# ---- data


def make_file(path: Path, size: int) -> Path:
    """A file of ``size`` random bytes."""
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(os.urandom(MiB))
        f.write(os.urandom(size % MiB))
    return path


def make_tree(path: Path, files: int, seed: int = 7) -> Path:
    """``files`` small files (100 B – 3 KiB) in directories of 1,000."""
    rng = random.Random(seed)
    for i in range(files):
        folder = path / f"d{i // 1000:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:06d}.txt").write_bytes(rng.randbytes(rng.randrange(100, 3100)))
    return path


def dir_blocks(tree: Path) -> list[bytes]:
    """The blocks an import of ``tree`` makes besides its files' own: its directories' (HashMap nodes)."""
    store = MemoryBlockStore()
    import_path(store, tree)
    return [block for cid in store.cids() if parse(cid).codec != "raw" and (block := store.get(cid)) is not None]


def make_car(path: Path, blocks: int) -> list[bytes]:
    """A CARv1 of ``blocks`` distinct four-byte raw blocks (root: the first); return the blocks."""
    blobs = [i.to_bytes(4, "little") for i in range(blocks)]
    pairs = [(cid_for(blob), blob) for blob in blobs]
    with open(path, "wb") as f:
        for piece in write_car([pairs[0][0]], pairs):
            f.write(piece)
    return blobs


# ---- the sections


def bench_import(tmp: Path, quick: bool) -> list[dict[str, Any]]:
    """Import of one large file: memory and disk store vs same-thread hashing, disk store vs ``cp`` + fsync."""
    before = load()
    size = (16 if quick else 256) * MiB
    repeat = 1 if quick else 3
    src = make_file(tmp / "store-import.bin", size)
    label = f"{size // MiB} MiB"
    rows = []
    for threads in (1, 2):
        into_memory = Faulting(lambda t=threads: _timed(lambda: import_path(MemoryBlockStore(), src, workers=t)))  # type: ignore[misc]
        keeping = Faulting(lambda t=threads: _timed(lambda: hash_and_keep_chunks(src, t)))  # type: ignore[misc]
        ours, anchor, kept, sink = interleaved_all(
            [
                into_memory,
                lambda t=threads: _timed(lambda: hash_chunks(src, t)),  # type: ignore[misc]
                keeping,
                lambda t=threads: _timed(lambda: import_path(HashOnlyStore(), src, workers=t)),  # type: ignore[misc,arg-type]
            ],
            repeat,
        )
        faults = {"import_minor_faults": into_memory.faults, "keeping_floor_minor_faults": keeping.faults}
        paid = f"page faults of the fastest samples: {into_memory.faults:,} and {keeping.faults:,}"
        rows.append(_row(f"import {label} into the memory store, {threads} thread(s)", ours, "s",
                         f"pread + sha256 of the same chunks, {threads} thread(s)", anchor, goal="≤ 1.3×",
                         note=f"{into_memory.faults:,} page faults (fresh memory kept; the anchor keeps none)",
                         extra=dict(faults)))  # fmt: skip
        rows.append(_row(f"import {label} into the memory store, {threads} thread(s)", ours, "s",
                         f"pread + sha256 of the same chunks, keeping each (fresh memory), {threads} thread(s)",
                         kept, note=f"the floor of holding the bytes; {paid}", extra=dict(faults)))  # fmt: skip
        rows.append(_row(f"import {label} into a store that keeps nothing, {threads} thread(s)", sink, "s",
                         f"pread + sha256 of the same chunks, {threads} thread(s)", anchor,
                         note="kuro's import pipeline alone: read, hash, mint, lay out, order"))  # fmt: skip
    dirs = Dirs(tmp / "store-import")
    direct: list[bool] = []  # each disk import's FileBlockStore.wrote_direct: its full blocks went O_DIRECT

    def disk_import(threads: int) -> float:
        with FileBlockStore(dirs.new()) as store:
            took = _timed(lambda: import_path(store, src, workers=threads))
            direct.append(store.wrote_direct)
            return took

    for threads in (1, 2):
        ours, anchor = interleaved(
            lambda t=threads: disk_import(t),  # type: ignore[misc]
            lambda t=threads: _timed(lambda: hash_chunks(src, t)),  # type: ignore[misc]
            repeat,
        )
        rows.append(_row(f"import {label} into the disk store, {threads} thread(s)", ours, "s",
                         f"pread + sha256 of the same chunks, {threads} thread(s)", anchor))  # fmt: skip
    names = block_names(src)
    ours, anchor, buffered = interleaved_all(
        [lambda: disk_import(2), lambda: cp_and_fsync(src, dirs), lambda: write_blocks_buffered(src, dirs, names, 2)],
        repeat,
    )
    went_direct = all(direct)
    skipped = "skips (O_DIRECT)" if went_direct else "pays too (this filesystem refused O_DIRECT)"
    rows.append(_row(f"import {label} into the disk store (2 threads)", ours, "s", "cp + one fsync of the copy",
                     anchor, goal="≤ 1.5×",
                     note="full blocks written O_DIRECT: unlike cp's copy, they are not left in the page cache, so "
                          "the first read after the import comes from the disk" if went_direct else
                          "full blocks written through the page cache: this filesystem refused O_DIRECT"))  # fmt: skip
    rows.append(_row(f"{len(names):,} block files of {label} in their shards, through the page cache, + one syncfs",
                     buffered, "s", "cp + one fsync of the copy", anchor,
                     note="the import's files written on 2 threads as cp writes its one file (buffered; no hashing, "
                          f"staging or renames): the page cache's price here, which the import {skipped}"))  # fmt: skip
    rows.append(_row(f"import {label} into the disk store (2 threads)", ours, "s",
                     f"the same {len(names):,} block files through the page cache + one syncfs, 2 threads", buffered,
                     note="the import, hashing and staging included, beside the plain buffered writes"))  # fmt: skip
    dirs.clean()
    _discard(src)
    return _with_load(rows, before)


def bench_small_files(tmp: Path, quick: bool) -> list[dict[str, Any]]:
    """Import of a tree of small files into the disk store vs ``cp -r`` + ``sync``."""
    before = load()
    files = 200 if quick else 10_000
    tree = make_tree(tmp / "store-tree", files)
    dirs = Dirs(tmp / "store-tree-samples")

    def ours() -> float:
        with FileBlockStore(dirs.new()) as store:
            return _timed(lambda: import_path(store, tree))

    def nothing_kept() -> float:
        return _timed(lambda: import_path(HashOnlyStore(), tree))  # type: ignore[arg-type]

    nodes = dir_blocks(tree)
    mine, anchor, alone, floor = interleaved_all(
        [ours, lambda: cp_tree_and_sync(tree, dirs), nothing_kept, lambda: import_floor(tree, nodes, dirs)],
        1 if quick else 3,
    )
    rows = [_row(f"import {files:,} small files into the disk store", mine, "s", "cp -r + sync", anchor,
                 goal="≤ 1.5×"),
            _row(f"import {files:,} small files into a store that keeps nothing", alone, "s", "cp -r + sync", anchor,
                 note="kuro's side alone: list, read, hash, mint, build directories; no block written"),
            _row(f"floor: a bare serial Python loop writing the same {files + len(nodes):,} blocks", floor, "s",
                 "cp -r + sync", anchor,
                 note="read, sha256 and write a file per block, staged per shard, two syncfs (import_floor): "
                      "no kuro code but the CID's name")]  # fmt: skip
    dirs.clean()
    _discard(tree)
    return _with_load(rows, before)


def bench_read_back(tmp: Path, quick: bool) -> list[dict[str, Any]]:
    """Verified reads from the disk store vs plain reads of the same bytes from a file."""
    before = load()
    size = (16 if quick else 256) * MiB
    repeat = 1 if quick else 5
    src = make_file(tmp / "store-read.bin", size)
    disk = tmp / "store-read-disk"
    store = FileBlockStore(disk)
    cid = import_path(store, src)
    read_file(store, cid)  # untimed, so both sides read cached bytes: the import wrote past the page cache (O_DIRECT)
    label = f"{size // MiB} MiB"

    def whole() -> float:
        return _timed(lambda: read_file(store, cid))

    def plain_whole() -> float:
        def go() -> None:
            with open(src, "rb", buffering=0) as f:
                f.read()

        return _timed(go)

    window = bytearray(16 * MiB)

    def streamed() -> float:
        def go() -> None:
            offset = 0
            while n := read_into(store, cid, window, offset):
                offset += n

        return _timed(go)

    def plain_streamed() -> float:
        def go() -> None:
            with open(src, "rb", buffering=0) as f:
                while f.readinto(window):
                    pass

        return _timed(go)

    ours, anchor = interleaved(whole, plain_whole, repeat)
    rows = [_row(f"read {label} back verified into one buffer (disk store)", size / ours / 1e9, "GB/s",
                 "plain read() of the file into one buffer", size / anchor / 1e9, goal="≥ 0.5×")]  # fmt: skip
    threads = READ_HELPERS + 1  # the store's readers: the calling thread and its read pool
    ours, anchor, floor = interleaved_all([streamed, plain_streamed, lambda: _timed(lambda: hash_chunks(src, threads))],
                                          repeat)  # fmt: skip
    figure = f"stream {label} back verified via a reused 16 MiB window (disk store)"
    ceiling = f"every byte hashed on {threads} thread(s) caps this at {anchor / floor:.3f}× here"
    rows.append(_row(figure, size / ours / 1e9, "GB/s", "plain readinto() of the file through the same window",
                     size / anchor / 1e9, goal="≥ 0.5×",
                     note=f"sha256 on one core here: {sha256_rate(window) / 1e9:.2f} GB/s; {ceiling}"))  # fmt: skip
    rows.append(_row(figure, size / ours / 1e9, "GB/s",
                     f"pread + sha256 of the same blocks, {threads} thread(s) (the verification floor)",
                     size / floor / 1e9, note="GB/s ÷ GB/s: 1× is hashing at hashlib's speed"))  # fmt: skip
    store.close()
    _discard(disk)
    _discard(src)
    return _with_load(rows, before)


def sha256_rate(buffer: bytearray) -> float:
    """Bytes per second ``hashlib.sha256`` hashes on one thread (best of 3)."""
    best = min(_timed(lambda: hashlib.sha256(buffer).digest()) for _ in range(3))
    return len(buffer) / best


def bench_car(tmp: Path, quick: bool, blocks: int | None = None) -> list[dict[str, Any]]:
    """``import_car`` of many four-byte blocks into the disk store, blocks/s, vs one plain file per block."""
    before = load()
    count = blocks or (2_000 if quick else 1_000_000)
    car = tmp / "store-many.car"
    blobs = make_car(car, count)
    dirs = Dirs(tmp / "store-car-samples")
    stores: list[Path] = []

    def ours() -> float:
        stores.append(dirs.new())
        with FileBlockStore(stores[-1]) as store:
            return _timed(lambda: import_car(store, car))

    mine, floor = interleaved(ours, lambda: write_files_floor(dirs, blobs), 1)
    with FileBlockStore(stores[-1]) as store:
        assert store.stats()["blocks"] == count, "the CAR import lost blocks"
    rows = _with_load([_row(f"import_car of {count:,} four-byte blocks (disk store)", count / mine, "blocks/s",
                            "one plain file per block + one syncfs (the floor)", count / floor, goal="≥ 20,000/s",
                            extra={"blocks": count, "seconds": mine})], before)  # fmt: skip
    dirs.clean()
    _discard(car)
    return rows


_PEAK_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_fs.unixfs import iter_file

def status(key):  # kB figures of /proc/self/status, in bytes
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

store = FileBlockStore(sys.argv[2])
fs = Fs.empty(store).link("big.bin", sys.argv[3]).fs
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the high-water mark to the current RSS (ru_maxrss would carry the parent's across exec)
before = status("VmRSS")
if sys.argv[4] == "join":
    data = b"".join(iter_file(store.get, sys.argv[3]))
else:
    data = fs.read("big.bin").value
print(json.dumps({"before": before, "after": status("VmHWM"), "size": len(data)}))
"""


def bench_memory(tmp: Path, quick: bool) -> list[dict[str, Any]]:
    """Peak RSS growth of ``Fs.read`` of a large file from the disk store, in a fresh process."""
    before = load()
    size = (32 if quick else 1024) * MiB
    src = make_file(tmp / "store-peak.bin", size)
    disk = tmp / "store-peak-disk"
    with FileBlockStore(disk) as store:
        cid = import_path(store, src)
    _discard(src)

    def peak(how: str) -> int:
        out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, str(ROOT), str(disk), cid, how],
                             capture_output=True, text=True, check=True)  # fmt: skip
        facts = json.loads(out.stdout)
        assert facts["size"] == size
        return int(facts["after"]) - int(facts["before"])

    ours = peak("fs.read")
    joined = peak("join")
    _discard(disk)
    rows = [_row(f"peak memory of Fs.read of a {size // MiB} MiB file (disk store)", ours / size, "× size",
                 "the file size", 1.0, goal="≤ 1.1×",
                 note=f"b''.join(iter_file) peaks at {joined / size:.2f}× size",
                 extra={"peak_growth_bytes": ours, "join_peak_growth_bytes": joined, "size": size})]  # fmt: skip
    return _with_load(rows, before)


def bench_all(tmp: Path, quick: bool, car_blocks: int | None = None) -> list[dict[str, Any]]:
    """Every block-store section, the small files first, and no sample deleted before the last part ends
    (:func:`_discard`): a file-creation figure measured after a large delete reads that clean-up, not the store
    (both sides of a round pay it, but unevenly as it fades). The rows keep their order."""
    global _DEFERRED
    _DEFERRED = []
    try:
        small = bench_small_files(tmp, quick)
        return (
            bench_import(tmp, quick)
            + small
            + bench_read_back(tmp, quick)
            + bench_car(tmp, quick, car_blocks)
            + bench_memory(tmp, quick)
        )
    finally:
        deferred, _DEFERRED = _DEFERRED, None
        for path in deferred:
            _discard(path)


_PARTS: dict[str, Callable[[Path, bool], list[dict[str, Any]]]] = {
    "import": bench_import,
    "small_files": bench_small_files,
    "read_back": bench_read_back,
    "car": bench_car,
    "memory": bench_memory,
}


def main(argv: list[str] | None = None) -> int:
    """``tools/bench_store.py [--quick] PART…``: some rows of the ``store`` section alone, each beside its anchor."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes and few samples (a smoke run)")
    parser.add_argument("parts", nargs="+", choices=sorted(_PARTS), metavar="PART", help=", ".join(_PARTS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kuro-bench-store-") as tmp:
        for part in args.parts:
            for row in _PARTS[part](Path(tmp), args.quick):
                ratio = row["value"] / row["anchor_value"]
                ours = f"{row['figure']}: {row['value']:.4g} {row['unit']}"
                anchor = f"{row['anchor']}: {row['anchor_value']:.4g}"
                print(f"{ours} | {anchor} | {ratio:.2f}× | goal {row.get('goal', '—')} | {row['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
