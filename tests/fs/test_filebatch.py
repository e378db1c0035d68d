"""Store batches: many puts, one commit — visible together after it, never torn, none on an error.

The file store's batch (kuro_fs.filebatch) stages whole blocks in a private directory and
commits them with sync → rename → sync; the memory store stages in a dict. Both are scoped to
the context that opened them. Crash and orphan rules are checked with real processes.
"""

from __future__ import annotations

import contextvars
import errno
import fcntl
import hashlib
import mmap
import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fshelpers import PlainStore

from kuro_fs import filebatch, filewriter
from kuro_fs.blocks import BlockStore, MemoryBlockStore, StoreBatch, active_batch, open_batch
from kuro_fs.cid import parse, raw_cid
from kuro_fs.errors import BlockStoreError
from kuro_fs.filebatch import BATCH_PREFIX, sweep_orphans
from kuro_fs.filestore import FileBlockStore, shard_of
from kuro_fs.filewriter import SPAWN_AFTER

REPO = Path(__file__).resolve().parents[2]


def _batch_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.startswith(BATCH_PREFIX)) if root.exists() else []


def _in_other_context(fn: Any) -> Any:
    """Run ``fn`` in a thread that did not inherit this context (what an unrelated thread sees)."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(fn()))
    thread.start()
    thread.join()
    return box[0]


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest) -> BlockStore:
    name = "memory_store" if request.param == "memory" else "file_store"
    result: BlockStore = request.getfixturevalue(name)
    return result


# ---- bad use


def test_a_batch_object_is_entered_once(store: BlockStore) -> None:
    batch = store.batch()  # type: ignore[attr-defined]
    with batch:
        pass
    with pytest.raises(BlockStoreError, match="entered once"):
        with batch:
            pass


def test_a_closed_file_store_refuses_to_open_a_batch(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path)
    store.close()
    with pytest.raises(BlockStoreError, match="closed"):
        store.batch()


def test_a_store_without_batch_gets_plain_puts_from_open_batch() -> None:
    plain = PlainStore()
    with open_batch(plain) as batched:
        cid = plain.put(b"now")
        assert plain.inner.has(cid)  # not held back: there is no batch to hold it
    assert batched is False


# ---- visibility


def test_blocks_put_in_a_batch_appear_to_other_contexts_only_after_it(store: BlockStore) -> None:
    with store.batch():  # type: ignore[attr-defined]
        cid = store.put(b"staged")
        assert store.get(cid) == b"staged" and store.has(cid)  # this context sees its own puts
        assert _in_other_context(lambda: store.get(cid)) is None
        assert _in_other_context(lambda: store.has(cid)) is False
        assert store.stats()["blocks"] == 0
    assert _in_other_context(lambda: store.get(cid)) == b"staged"
    assert store.stats() == {"blocks": 1, "bytes": 6}


def test_a_batch_that_raises_leaves_none_of_its_blocks(store: BlockStore, tmp_path: Path) -> None:
    kept = store.put(b"before")
    with pytest.raises(RuntimeError, match="half-way"):
        with store.batch():  # type: ignore[attr-defined]
            store.put(b"one")
            store.put(b"two")
            raise RuntimeError("half-way")
    assert store.stats() == {"blocks": 1, "bytes": 6}
    assert store.get(kept) == b"before"
    assert store.get(raw_cid(b"one")) is None
    if isinstance(store, FileBlockStore):
        assert _batch_dirs(store.root) == []  # the staged files are gone too


def test_flush_commits_early_and_the_batch_stays_open(store: BlockStore) -> None:
    with store.batch() as batch:  # type: ignore[attr-defined]
        first = store.put(b"first")
        assert batch.flush() == 1
        assert _in_other_context(lambda: store.get(first)) == b"first"
        second = store.put(b"second")
        assert _in_other_context(lambda: store.get(second)) is None
    assert store.get(second) == b"second"


def test_a_nested_batch_of_the_same_store_joins_the_outer_one(store: BlockStore) -> None:
    with store.batch():  # type: ignore[attr-defined]
        with store.batch() as inner:  # type: ignore[attr-defined]
            cid = store.put(b"inner")
            assert inner.open is False  # it joined: the outer batch decides
        assert _in_other_context(lambda: store.get(cid)) is None
    assert store.get(cid) == b"inner"


def test_worker_threads_join_the_batch_only_through_a_copied_context(store: BlockStore) -> None:
    unrelated: list[str] = []
    with store.batch():  # type: ignore[attr-defined]
        context = contextvars.copy_context()
        worker = threading.Thread(target=lambda: context.run(store.put, b"worker"))
        worker.start()
        worker.join()
        stranger = threading.Thread(target=lambda: unrelated.append(store.put(b"stranger")))
        stranger.start()
        stranger.join()
        # the stranger's put is an ordinary one: visible (and, on disk, durable) at once
        assert _in_other_context(lambda: store.get(unrelated[0])) == b"stranger"
        assert _in_other_context(lambda: store.get(raw_cid(b"worker"))) is None
    assert store.get(raw_cid(b"worker")) == b"worker"


def test_a_put_from_a_stale_context_after_the_batch_is_an_ordinary_put(store: BlockStore) -> None:
    with store.batch():  # type: ignore[attr-defined]
        context = contextvars.copy_context()
    cid = context.run(store.put, b"late")
    assert _in_other_context(lambda: store.get(cid)) == b"late"
    assert active_batch(store) is None


def test_two_stores_batch_independently(tmp_path: Path) -> None:
    a, b = FileBlockStore(tmp_path / "a"), FileBlockStore(tmp_path / "b")
    with a.batch():
        with pytest.raises(RuntimeError):
            with b.batch():
                b.put(b"b")
                a.put(b"a")
                raise RuntimeError("b fails")
    assert a.get(raw_cid(b"a")) == b"a"
    assert b.get(raw_cid(b"b")) is None


# ---- the file store's commit


def test_a_block_already_stored_is_not_staged_again(file_store: FileBlockStore) -> None:
    cid = file_store.put(b"there")
    with file_store.batch():
        assert file_store.put(b"there") == cid
        assert _batch_dirs(file_store.root) == []  # nothing to stage, so no batch directory at all


def _blocks_in_distinct_shards(count: int, taken: set[str]) -> list[bytes]:
    found: list[bytes] = []
    for i in range(100_000):
        data = b"shard probe %d" % i
        shard = shard_of(raw_cid(data))
        if shard not in taken:
            taken.add(shard)
            found.append(data)
            if len(found) == count:
                return found
    raise AssertionError("not enough distinct shards")


def test_a_batch_asks_for_present_blocks_only_in_shards_that_existed_at_its_look(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, first, fresh = _blocks_in_distinct_shards(3, set())
    file_store.put(old)  # its shard exists before the batch
    asked: list[str] = []
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: asked.append(os.fspath(path)) or real_access(path, mode))
    with file_store.batch():
        file_store.put(first)  # before the batch's first look: asked, as an ordinary put
        file_store.put(fresh)  # a shard the look saw absent: nothing under it to ask about
        file_store.put(old)  # a shard that existed: asked, found, not staged again
    assert [Path(path).name for path in asked] == [raw_cid(first), raw_cid(old)]
    assert [file_store.get(raw_cid(data)) for data in (old, first, fresh)] == [old, first, fresh]


def test_a_block_filed_by_another_writer_in_a_shard_new_to_the_batch_stays_whole(
    file_store: FileBlockStore,
) -> None:
    first, late = _blocks_in_distinct_shards(2, set())
    other = FileBlockStore(file_store.root)
    with file_store.batch():
        file_store.put(first)  # the batch looks at the root: the shard of ``late`` is absent
        other.put(late)  # another writer files ``late`` (shard and block) meanwhile
        file_store.put(late)  # staged again without asking; the commit renames the same bytes over it
    assert file_store.get(raw_cid(late)) == late
    assert sorted(file_store.cids()) == sorted([raw_cid(first), raw_cid(late)])


def test_a_commit_renews_the_look_so_a_block_it_filed_is_not_staged_again(file_store: FileBlockStore) -> None:
    first, second = _blocks_in_distinct_shards(2, set())
    with file_store.batch() as batch:
        file_store.put(first)
        file_store.put(second)  # its shard is new to the batch's look
        batch.flush()
        inode = (file_store.root / shard_of(raw_cid(second)) / raw_cid(second)).stat().st_ino
        file_store.put(second)  # the commit made the shard: asked, found, skipped
    assert (file_store.root / shard_of(raw_cid(second)) / raw_cid(second)).stat().st_ino == inode


def test_a_batch_heals_a_damaged_block(file_store: FileBlockStore) -> None:
    cid = file_store.put(b"hello")
    (file_store.root / shard_of(cid) / cid).write_bytes(b"jello")
    with file_store.batch():
        file_store.put(b"hello")
    assert file_store.get(cid) == b"hello"


def test_the_commit_syncs_before_any_block_is_visible_and_again_after(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    visible_at_sync: list[int] = []

    def recording_sync(fd: int) -> bool:
        visible_at_sync.append(file_store.stats()["blocks"])
        return True

    monkeypatch.setattr(filebatch, "sync_filesystem", recording_sync)
    with file_store.batch():
        for i in range(20):
            file_store.put(bytes([i]) * 10)
    assert visible_at_sync == [0, 20]


def test_without_syncfs_each_staged_file_is_fsynced_before_its_rename_and_each_shard_after(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def rename(src: str, dst: str, **kw: Any) -> None:
        events.append(("rename", src))
        real_rename(src, dst, **kw)

    monkeypatch.setattr(filebatch, "sync_filesystem", lambda fd: False)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    blobs = [bytes([i]) * 7 for i in range(12)]
    with file_store.batch():
        for blob in blobs:
            file_store.put(blob)
    monkeypatch.undo()
    for blob in blobs:
        cid = raw_cid(blob)
        synced = next(i for i, (kind, what) in enumerate(events) if kind == "fsync" and what.endswith(cid))
        # renamed alone, or with its whole staging directory when the shard was new
        renamed = next(i for i, (kind, what) in enumerate(events) if kind == "rename" and what in (cid, shard_of(cid)))
        shard = str(file_store.root / shard_of(cid))
        dir_synced = max(i for i, (kind, what) in enumerate(events) if kind == "fsync" and what == shard)
        root_synced = max(
            i for i, (kind, what) in enumerate(events) if kind == "fsync" and what == str(file_store.root)
        )
        assert synced < renamed < dir_synced
        assert renamed < root_synced  # a new shard's own name is durable too
    assert file_store.publish([raw_cid(b) for b in blobs])["published"] == 12


def _renames(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real_rename = os.rename

    def rename(src: str, dst: str, **kw: Any) -> None:
        if "src_dir_fd" in kw:  # a commit's move (the batch directory's own rename names a path)
            seen.append(src)
        real_rename(src, dst, **kw)

    monkeypatch.setattr(os, "rename", rename)
    return seen


def test_a_new_shard_is_renamed_into_place_whole_and_an_existing_one_block_by_block(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = [b"%d" % i for i in range(3000)]  # ~3 blocks a shard over the 1,024 shards
    renames = _renames(monkeypatch)
    with file_store.batch():
        for blob in blobs[:2000]:
            file_store.put(blob)
    shards = {shard_of(raw_cid(b)) for b in blobs[:2000]}
    assert sorted(renames) == sorted(shards)  # one rename a shard, none a block
    renames.clear()
    with file_store.batch():
        for blob in blobs[2000:]:
            file_store.put(blob)
    old = [raw_cid(b) for b in blobs[2000:] if shard_of(raw_cid(b)) in shards]
    assert old and set(old) <= set(renames)  # into a shard that exists: block by block
    monkeypatch.undo()
    assert file_store.publish([raw_cid(b) for b in blobs])["published"] == 3000
    made = os.stat(file_store.root / next(iter(shards))).st_mode & 0o777
    os.mkdir(file_store.root / "zz-probe")
    assert made == os.stat(file_store.root / "zz-probe").st_mode & 0o777  # a shard's usual mode, not 0o700
    os.rmdir(file_store.root / "zz-probe")


def test_a_commit_with_syncfs_renames_new_shards_whole_without_listing_them(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The batch counts what it stages per staging directory, so a shard new to the root is renamed
    # into place unlisted; the count it reports is still one a distinct block.
    blobs = [b"%d" % i for i in range(300)]
    listed: list[object] = []
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        listed.append(path)
        return real_scandir(path)

    with file_store.batch() as batch:
        for blob in blobs + blobs[:50]:  # a block put twice is staged (and counted) once
            file_store.put(blob)
        monkeypatch.setattr(os, "scandir", scandir)
        assert batch.flush() == 300
        monkeypatch.undo()
    assert listed == []
    assert file_store.publish([raw_cid(b) for b in blobs])["published"] == 300


def test_a_commit_that_fails_midway_leaves_the_rest_to_the_next_commit(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = _blocks_in_distinct_shards(6, set())
    real_take = filebatch._take_shard
    taken: list[str] = []

    def take(batch_fd: int, root_fd: int, shard: str) -> bool:
        if len(taken) == 3:
            raise OSError(28, "No space left on device")
        taken.append(shard)
        return real_take(batch_fd, root_fd, shard)

    with file_store.batch() as batch:
        for blob in blobs:
            file_store.put(blob)
        monkeypatch.setattr(filebatch, "_take_shard", take)
        with pytest.raises(BlockStoreError, match="No space left on device"):
            batch.flush()
        monkeypatch.undo()
        assert sorted(file_store.cids()) == sorted(raw_cid(b) for b in blobs if shard_of(raw_cid(b)) in taken)
        assert batch.flush() == 3  # the three it had not reached, each once
    assert sorted(file_store.cids()) == sorted(raw_cid(b) for b in blobs)
    assert _batch_dirs(file_store.root) == []


@pytest.mark.parametrize("meanwhile", ["a block", "nothing"])
def test_a_shard_another_writer_made_meanwhile_loses_nothing(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch, meanwhile: str
) -> None:
    # Between the batch's look at the root and its rename, another writer makes the shard (and maybe
    # files a block in it): the whole-directory rename must neither replace that block nor lose its own.
    other, mine = b"the other writer's block", b"my block"
    target = shard_of(raw_cid(mine))
    real_take = filebatch._take_shard

    def take(batch_fd: int, root_fd: int, shard: str) -> bool:
        if shard == target:
            os.mkdir(shard, dir_fd=root_fd)
            if meanwhile == "a block":
                (file_store.root / shard / "b").write_bytes(b"")  # a file, so the directory is not empty
        return real_take(batch_fd, root_fd, shard)

    monkeypatch.setattr(filebatch, "_take_shard", take)
    with file_store.batch():
        file_store.put(mine)
    monkeypatch.undo()
    assert file_store.get(raw_cid(mine)) == mine
    if meanwhile == "a block":
        assert (file_store.root / target / "b").exists()
    assert file_store.put(other) and file_store.get(raw_cid(other)) == other


def test_a_failed_commit_raises_block_store_error_naming_the_reason(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_sync(fd: int) -> bool:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(filebatch, "sync_filesystem", failing_sync)
    with pytest.raises(BlockStoreError, match=r"Input/output error$"):
        with file_store.batch():
            file_store.put(b"doomed")
    monkeypatch.undo()
    assert file_store.stats()["blocks"] == 0  # not synced, so never renamed into view
    assert _batch_dirs(file_store.root) == []


# ---- large blocks: the writeback thread


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _writeback_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kuro-fs-writeback"]


def _large_blobs(n: int) -> list[bytes]:
    return [bytes([i % 256]) * (filebatch.EARLY_WRITEBACK + i) for i in range(n)]


def _need_o_direct(tmp_path: Path) -> None:
    """Skip, naming why, unless a file under ``tmp_path`` takes an ``O_DIRECT`` write as the batch makes one
    (tmpfs before Linux 6.6 refuses it with EINVAL; ext4 takes it)."""
    if not hasattr(os, "O_DIRECT"):
        pytest.skip("O_DIRECT is Linux's")
    probe = tmp_path / "o-direct-probe"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    buffer = mmap.mmap(-1, filebatch.DIRECT_ALIGN)  # page-aligned, as the batch's buffer
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, os.O_DIRECT)
        os.pwrite(fd, buffer, 0)
    except OSError as exc:
        pytest.skip(f"the filesystem under {tmp_path} refuses O_DIRECT ({exc.strerror})")
    finally:
        buffer.close()
        os.close(fd)
        probe.unlink()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
def test_large_staged_blocks_are_hinted_off_the_writers_and_every_file_is_closed_when_the_batch_ends(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    hinted: list[str] = []
    writers = set()

    def hint(fd: int) -> None:
        hinted.append(threading.current_thread().name)

    real_stage = filebatch.FileBatch.stage

    def stage(self: filebatch.FileBatch, cid: str, data: bytes | memoryview) -> bool:
        writers.add(threading.current_thread().name)
        return real_stage(self, cid, data)

    monkeypatch.setattr(filebatch, "start_writeback", hint)
    monkeypatch.setattr(filebatch.FileBatch, "stage", stage)
    before = _open_fds()
    blobs = _large_blobs(12)
    with file_store.batch():
        cids = [file_store.put(blob) for blob in blobs]
        small = file_store.put(b"small")  # below EARLY_WRITEBACK: closed by its writer, never hinted
    assert [file_store.get(cid) for cid in cids] == blobs and file_store.get(small) == b"small"
    assert _open_fds() == before and _writeback_threads() == []
    assert 0 < len(hinted) <= len(blobs) and set(hinted) == {"kuro-fs-writeback"} and not writers & set(hinted)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
def test_a_stuck_writeback_never_holds_a_writer_and_holds_at_most_its_backlog_open(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    monkeypatch.setattr(filebatch, "start_writeback", lambda fd: release.wait())
    before = _open_fds()
    blobs = _large_blobs(2 * filebatch.WRITEBACK_BACKLOG + 5)
    with file_store.batch():
        cids = [file_store.put(blob) for blob in blobs]  # the disk "stuck": every put still returns
        assert _open_fds() - before <= filebatch.WRITEBACK_BACKLOG + 2  # the backlog, the one in hand, the batch dir
        release.set()
    assert [file_store.get(cid) for cid in cids] == blobs
    assert _open_fds() == before and _writeback_threads() == []


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
def test_a_writeback_thread_that_cannot_start_leaves_each_writer_closing_its_own_file(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_start = threading.Thread.start
    tries: list[str] = []

    def start(self: threading.Thread) -> None:
        if self.name == "kuro-fs-writeback":  # a container's pids limit
            tries.append(self.name)
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    before = _open_fds()
    blobs = [bytes([i]) * (filebatch.EARLY_WRITEBACK + 1) for i in range(3)]  # unaligned: never O_DIRECT
    with file_store.batch():
        cids = [file_store.put(blob) for blob in blobs]
    assert tries == ["kuro-fs-writeback"]  # tried once, not again for each later block
    assert [file_store.get(cid) for cid in cids] == blobs
    assert _batch_dirs(file_store.root) == [] and _open_fds() == before and _writeback_threads() == []


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
def test_a_direct_writer_pool_that_cannot_start_leaves_each_writer_writing_its_own_block(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _need_o_direct(tmp_path)
    real_start = threading.Thread.start
    tries: list[str] = []

    def start(self: threading.Thread) -> None:
        if self.name.startswith("kuro-fs-direct"):  # a container's pids limit
            tries.append(self.name)
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    before = _open_fds()
    blobs = [bytes([i]) * filebatch.DIRECT_ALIGN * 16 for i in range(4)]  # aligned: O_DIRECT
    with file_store.batch():
        cids = [file_store.put(blob) for blob in blobs]
    assert len(tries) == 1  # tried once, not again for each later block
    assert [file_store.get(cid) for cid in cids] == blobs and file_store.wrote_direct
    assert _batch_dirs(file_store.root) == [] and _open_fds() == before


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
def test_a_writeback_stop_that_raises_still_empties_and_unlocks_the_batch_directory(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_stop(self: Any) -> None:
        raise RuntimeError("cannot join thread before it is started")

    monkeypatch.setattr(filebatch._Writeback, "stop", broken_stop)
    before = _open_fds()
    with pytest.raises(RuntimeError, match="cannot join"):
        with file_store.batch():
            file_store.put(b"doomed")
            raise ValueError("the import failed")  # the batch ends with an error: its block is discarded
    assert file_store.stats()["blocks"] == 0
    assert _batch_dirs(file_store.root) == [] and _open_fds() == before


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
@pytest.mark.parametrize("path", ["O_DIRECT", "page cache"])
def test_an_import_failing_mid_file_leaves_no_block_and_no_open_file_whatever_waits_for_writeback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    from kuro_fs.importer import import_path

    src = tmp_path / "big.bin"
    src.write_bytes(random.Random(3).randbytes(40 * 256 * 1024))
    real_write, real_pwrite = filebatch._write_all, os.pwrite
    writes: list[int] = []

    def torn_then_failed(write: Any, fd: int, data: Any, *rest: int) -> int:
        writes.append(len(data))
        if len(writes) == 25:
            write(fd, memoryview(data)[: len(data) // 2], *rest)  # a torn file on disk, then the failure
            raise OSError(28, "No space left on device")
        return int(write(fd, data, *rest) or len(data))

    if path == "O_DIRECT":
        _need_o_direct(tmp_path)
        monkeypatch.setattr(os, "pwrite", lambda fd, data, at: torn_then_failed(real_pwrite, fd, data, at))
    else:
        monkeypatch.setattr(filebatch, "_O_DIRECT", 0)
        monkeypatch.setattr(filebatch, "_write_all", lambda fd, data: torn_then_failed(real_write, fd, data))
    monkeypatch.setattr(filebatch, "start_writeback", lambda fd: threading.Event().wait(0.01))  # a slow disk
    before = _open_fds()
    with FileBlockStore(tmp_path / "blocks") as store:
        with pytest.raises(BlockStoreError, match="No space left on device"):
            import_path(store, src, workers=2)
        assert len(writes) >= 25  # the failure came from the path under test
        assert store.stats() == {"blocks": 0, "bytes": 0}  # no name at all, so none at torn bytes
        assert _batch_dirs(store.root) == []
    assert _open_fds() == before and _writeback_threads() == []


def test_large_aligned_blocks_are_staged_with_o_direct_and_others_through_the_page_cache(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _need_o_direct(tmp_path)
    direct: list[tuple[int, bool]] = []
    real = filebatch._DirectWrite.write

    def spy(self: Any, out: int, data: bytes | memoryview, done: Any) -> str | None:
        how = real(self, out, data, done)
        direct.append((len(data), how is not None))
        return how

    monkeypatch.setattr(filebatch._DirectWrite, "write", spy)
    aligned, odd = b"a" * (4 * filebatch.EARLY_WRITEBACK), b"o" * (filebatch.EARLY_WRITEBACK + 1)
    huge = b"h" * (filebatch.DIRECT_MAX + filebatch.DIRECT_ALIGN)
    blobs = [aligned, odd, huge, b"small"]
    with file_store.batch():
        cids = [file_store.put(blob) for blob in blobs]
        assert [file_store.get(cid) for cid in cids] == blobs  # staged, read in the batch
    assert [file_store.get(cid) for cid in cids] == blobs
    assert direct == [(len(aligned), True), (len(odd), False), (len(huge), False)]  # the small block never asks


@pytest.mark.parametrize("first", ["half written", "written whole"])
def test_a_filesystem_refusing_o_direct_part_way_gets_each_block_whole_through_the_page_cache(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, first: str
) -> None:
    _need_o_direct(tmp_path)  # the refusal is faked at the write: the flag itself must be taken
    real_pwrite = os.pwrite
    calls: list[int] = []

    def refusing(fd: int, data: Any, at: int) -> int:
        calls.append(at)
        if len(calls) == 1:  # the first block: half lands then EINVAL, or it goes direct and the next is refused
            return real_pwrite(fd, memoryview(data)[: len(data) // 2] if first == "half written" else data, at)
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(os, "pwrite", refusing)
    blobs = [bytes([i]) * (2 * filebatch.EARLY_WRITEBACK) for i in range(3)]
    with file_store.batch():
        cids = [file_store.put(blob) for blob in blobs[:2]]
        # Written whole, the first proves O_DIRECT and the second is queued to the writer pool: the read waits
        # for that write, so the refusal is known before the third block is put (a block queued before the
        # refusal is still tried with O_DIRECT by the pool, so without the wait the count was 2 or 3).
        assert file_store.get(cids[1]) == blobs[1]
        cids.append(file_store.put(blobs[2]))
    monkeypatch.undo()
    assert [file_store.get(cid) for cid in cids] == blobs
    assert len(calls) == 2  # refused once: the later blocks were not tried again
    assert file_store.wrote_direct is False  # refused: whatever went direct before, the store says so


def test_a_store_says_it_wrote_direct_only_once_a_large_aligned_block_went_direct(
    file_store: FileBlockStore, tmp_path: Path
) -> None:
    _need_o_direct(tmp_path)
    assert file_store.wrote_direct is False  # no batch yet
    with file_store.batch():
        file_store.put(b"s" * 100)
        file_store.put(b"o" * (filebatch.EARLY_WRITEBACK + 1))  # unaligned: through the page cache
    assert file_store.wrote_direct is False
    with file_store.batch():
        file_store.put(b"a" * (2 * filebatch.EARLY_WRITEBACK))
    assert file_store.wrote_direct is True
    with file_store.batch():  # a later batch of small blocks changes nothing
        file_store.put(b"t" * 100)
    assert file_store.wrote_direct is True


def test_a_stores_wrote_direct_is_read_only(file_store: FileBlockStore) -> None:
    with pytest.raises(AttributeError):
        file_store.wrote_direct = True  # type: ignore[misc]


_DIRECT_AND_PROC = pytest.mark.skipif(
    not hasattr(os, "O_DIRECT") or not os.path.isdir("/proc/self/fd"), reason="O_DIRECT, /proc/self/fd (Linux)"
)


def _direct_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kuro-fs-direct")]


def _aligned_blobs(n: int) -> list[bytes]:
    return [bytes([i % 256]) * (2 * filebatch.EARLY_WRITEBACK) for i in range(n)]


def _hold_direct_writes(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[int]]:
    # Writes made by the direct writers wait for the event returned; the list gets each one's file.
    real_pwrite = os.pwrite
    release = threading.Event()
    stuck: list[int] = []

    def held(fd: int, data: Any, at: int) -> int:
        if threading.current_thread().name.startswith("kuro-fs-direct"):
            stuck.append(fd)
            release.wait()
        return real_pwrite(fd, data, at)

    monkeypatch.setattr(os, "pwrite", held)
    return release, stuck


@_DIRECT_AND_PROC
def test_aligned_blocks_past_the_first_are_written_by_the_direct_writers_and_every_file_is_closed(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_pwrite = os.pwrite
    writers: list[str] = []

    def spy(fd: int, data: Any, at: int) -> int:
        writers.append(threading.current_thread().name)
        return real_pwrite(fd, data, at)

    monkeypatch.setattr(os, "pwrite", spy)
    before = _open_fds()
    blobs = _aligned_blobs(24)
    with file_store.batch():
        cids = [file_store.put(blob) for blob in blobs]
        assert [file_store.get(cid) for cid in cids[-3:]] == blobs[-3:]  # a staged read waits for its write
    monkeypatch.undo()
    assert [file_store.get(cid) for cid in cids] == blobs
    assert writers[0] == threading.current_thread().name  # the first proves O_DIRECT here...
    assert set(writers[1:]) <= {f"kuro-fs-direct-{i}" for i in range(filebatch.DIRECT_WRITERS)}  # ...the rest
    assert _open_fds() == before and _direct_threads() == []


@_DIRECT_AND_PROC
def test_a_queued_write_that_fails_fails_the_commit_with_its_reason_and_leaves_no_block(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_pwrite = os.pwrite
    failed: list[str] = []

    def failing(fd: int, data: Any, at: int) -> int:
        if len(failed) == 0 and threading.current_thread().name.startswith("kuro-fs-direct"):
            failed.append(threading.current_thread().name)
            real_pwrite(fd, memoryview(data)[: len(data) // 2], at)  # torn on disk, then the failure
            raise OSError(5, "Input/output error")
        return real_pwrite(fd, data, at)

    monkeypatch.setattr(os, "pwrite", failing)
    before = _open_fds()
    blobs = _aligned_blobs(4)
    with pytest.raises(BlockStoreError, match="Input/output error"):
        with file_store.batch():
            for blob in blobs:
                file_store.put(blob)  # the put of the failing block has returned: its write was queued
    monkeypatch.undo()
    assert failed  # the failure came from a queued write
    assert file_store.stats() == {"blocks": 0, "bytes": 0} and _batch_dirs(file_store.root) == []
    assert _open_fds() == before and _direct_threads() == []
    with file_store.batch():  # the next batch is not affected
        cids = [file_store.put(blob) for blob in blobs]
    assert [file_store.get(cid) for cid in cids] == blobs


@_DIRECT_AND_PROC
def test_a_writer_waits_for_a_free_buffer_so_a_stuck_disk_holds_at_most_direct_buffers(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_mmap = filebatch.mmap.mmap
    release, stuck = _hold_direct_writes(monkeypatch)
    made: list[int] = []

    def mmap(*args: Any) -> Any:
        made.append(args[1])
        return real_mmap(*args)

    monkeypatch.setattr(filebatch.mmap, "mmap", mmap)
    before = _open_fds()
    blobs = _aligned_blobs(3 * filebatch.DIRECT_BUFFERS)
    returned: list[str] = []
    with file_store.batch():
        ctx = contextvars.copy_context()
        putter = threading.Thread(target=lambda: ctx.run(lambda: [returned.append(file_store.put(b)) for b in blobs]))
        putter.start()
        while len(stuck) < filebatch.DIRECT_WRITERS:
            threading.Event().wait(0.01)
        putter.join(0.3)  # it would finish here if nothing held it
        assert putter.is_alive()
        assert len(made) == filebatch.DIRECT_BUFFERS  # 4 being written, 4 queued, the putter waiting for one
        assert len(returned) == 1 + filebatch.DIRECT_BUFFERS  # the first, written here, then one per buffer
        assert _open_fds() - before <= filebatch.DIRECT_BUFFERS + 2  # their files, the one in hand, the batch dir
        release.set()
        putter.join()
    monkeypatch.undo()
    assert len(made) == filebatch.DIRECT_BUFFERS
    assert [file_store.get(cid) for cid in returned] == blobs
    assert _open_fds() == before and _direct_threads() == []


@_DIRECT_AND_PROC
@pytest.mark.parametrize("ending", ["error", "ctrl-c while waiting"])
def test_a_batch_ending_with_writes_queued_leaves_no_block_and_no_open_file(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    # A batch ending with an error waits for its queued writes; a Ctrl-C during that wait has the end cancel
    # those not started and wait for those being made. Either way every file is closed before the
    # directory is emptied.
    release, stuck = _hold_direct_writes(monkeypatch)

    def interrupted(self: filebatch.FileBatch) -> None:
        raise KeyboardInterrupt

    if ending != "error":
        monkeypatch.setattr(filebatch.FileBatch, "_close", interrupted)
    before = _open_fds()
    threading.Timer(0.3, release.set).start()
    with pytest.raises(KeyboardInterrupt if ending != "error" else ValueError):
        with file_store.batch():
            for blob in _aligned_blobs(filebatch.DIRECT_BUFFERS):
                file_store.put(blob)
            assert len(stuck) <= filebatch.DIRECT_WRITERS and not release.is_set()  # writes still queued
            raise ValueError("the batch's work failed")
    monkeypatch.undo()
    assert file_store.stats() == {"blocks": 0, "bytes": 0} and _batch_dirs(file_store.root) == []
    assert _open_fds() == before and _direct_threads() == []


# ---- concurrency and crashes


def test_eight_workers_in_one_batch_and_readers_outside_it_see_only_whole_blocks(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path)
    shared = [bytes([i]) * (i * 97 % 5000) for i in range(60)]
    own = [[f"{t}-{i}".encode() * 50 for i in range(10)] for t in range(8)]
    errors: list[BaseException] = []
    writing = threading.Event()
    writing.set()

    def read() -> None:
        try:
            while writing.is_set():
                for blob in shared[::7]:
                    assert store.get(raw_cid(blob)) in (None, blob)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    with store.batch():
        workers = []
        for t in range(8):
            context = contextvars.copy_context()
            blobs = shared + own[t]

            def write(blobs: list[bytes] = blobs) -> None:
                try:
                    for blob in blobs:
                        assert store.get(store.put(blob)) == blob
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            workers.append(threading.Thread(target=context.run, args=(write,)))
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    writing.clear()
    reader.join()
    assert errors == []
    expected = {raw_cid(b): b for b in shared + [b for group in own for b in group]}
    assert store.publish(list(expected)) == {"published": len(expected), "rejected": [], "reasons": {}}
    assert store.stats()["blocks"] == len(expected)
    assert _batch_dirs(tmp_path) == []


_HOLD = """
import sys
from kuro_fs.filestore import FileBlockStore
store = FileBlockStore(sys.argv[1])
with store.batch():
    for i in range(int(sys.argv[2])):
        store.put(b"held-%d" % i)
    print("staged", flush=True)
    sys.stdin.readline()  # the parent decides: a line commits, a SIGKILL is a crash
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[str]] = []

    def start(count: int) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path / "blocks"), str(count)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "staged\n"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def test_a_killed_batch_leaves_no_block_and_its_orphan_is_swept_by_the_next_batch(tmp_path: Path, holder: Any) -> None:
    proc = holder(50)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = FileBlockStore(tmp_path / "blocks")
    orphan = _batch_dirs(store.root)
    assert len(orphan) == 1 and len(list(orphan[0].glob("*/*"))) == 50
    torn = raw_cid(b"torn")
    (orphan[0] / torn[-3]).mkdir(exist_ok=True)
    (orphan[0] / torn[-3] / torn).write_bytes(b"to")  # a torn staged file, named like a block
    assert store.stats() == {"blocks": 0, "bytes": 0}
    assert store.get(raw_cid(b"held-1")) is None and store.get(raw_cid(b"torn")) is None
    with store.batch():
        store.put(b"next")
    assert not orphan[0].exists()
    assert store.cids() == [raw_cid(b"next")]


def test_a_live_batch_of_another_process_is_never_swept(tmp_path: Path, holder: Any) -> None:
    proc = holder(30)
    store = FileBlockStore(tmp_path / "blocks")
    with store.batch():
        store.put(b"mine")
    assert sweep_orphans(str(store.root)) == 0
    assert len(_batch_dirs(store.root)) == 1  # still the other process's, still locked
    proc.communicate("commit\n", timeout=60)
    assert proc.returncode == 0
    assert store.stats()["blocks"] == 31
    assert _batch_dirs(store.root) == []


_WRITER = """
import random, sys
from kuro_fs.cid import raw_cid
from kuro_fs.filestore import FileBlockStore
root, proc = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
shared = [rng.randbytes(rng.choice([0, 1, 100, 4096, 70_000])) for _ in range(120)]
mine = shared + [b"proc-%d-%d" % (proc, i) for i in range(20)]
random.Random(proc).shuffle(mine)
store = FileBlockStore(root)
for start in range(0, len(mine), 35):
    with store.batch():
        for blob in mine[start : start + 35]:
            assert store.get(store.put(blob)) == blob
for blob in shared:
    assert store.get(raw_cid(blob)) == blob
print(len(mine))
"""


def test_four_processes_batching_overlapping_blocks_leave_only_whole_blocks(tmp_path: Path) -> None:
    root = tmp_path / "blocks"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(root), str(p)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for p in range(4)]  # fmt: skip
    results = [proc.communicate(timeout=120) for proc in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert out.strip() == "140"
    rng = random.Random(1)
    shared = [rng.randbytes(rng.choice([0, 1, 100, 4096, 70_000])) for _ in range(120)]
    expected = {raw_cid(b) for b in shared} | {raw_cid(b"proc-%d-%d" % (p, i)) for p in range(4) for i in range(20)}
    with FileBlockStore(root) as store:
        assert set(store.cids()) == expected
    for cid in expected:
        data = (root / shard_of(cid) / cid).read_bytes()
        assert hashlib.sha256(data).digest() == parse(cid).digest
    assert _batch_dirs(root) == []


# ---- the writer process (kuro_fs.filewriter): small blocks past SPAWN_AFTER


def _small_blocks(n: int, salt: bytes = b"") -> list[bytes]:
    return [salt + i.to_bytes(4, "big") * 25 for i in range(n)]


def _writer(batch: StoreBatch) -> Any:
    writer = batch._writer  # type: ignore[attr-defined]  # the one way to reach the child in a test
    assert writer is not None, "the batch did not start its writer"
    return writer


def test_small_blocks_past_the_threshold_go_to_a_writer_and_each_is_committed_once(
    file_store: FileBlockStore,
) -> None:
    blocks = _small_blocks(SPAWN_AFTER + 700)
    with file_store.batch() as batch:
        cids = [file_store.put(block) for block in blocks]
        cids += [file_store.put(block) for block in blocks[SPAWN_AFTER - 5 :]]  # again: the writer skips them
        _writer(batch)
        assert file_store.get(cids[-1]) == blocks[-1]  # sent to the writer, read before the commit
        assert file_store.has(cids[SPAWN_AFTER + 1])
        assert _in_other_context(lambda: file_store.has(cids[-1])) is False
        assert batch.flush() == len(blocks)
    assert file_store.stats() == {"blocks": len(blocks), "bytes": sum(map(len, blocks))}
    assert all(file_store.get(cid) == block for cid, block in zip(cids, blocks, strict=False))
    assert _batch_dirs(file_store.root) == []


def test_the_writers_files_exist_before_the_commits_first_sync(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    staged_at_sync: list[int] = []

    def recording_sync(fd: int) -> bool:
        staged_at_sync.append(sum(len(files) for _, _, files in os.walk(_batch_dirs(file_store.root)[0])))
        return True

    monkeypatch.setattr(filebatch, "sync_filesystem", recording_sync)
    blocks = _small_blocks(SPAWN_AFTER + 300)
    with file_store.batch():
        for block in blocks:
            file_store.put(block)
    assert staged_at_sync[0] == len(blocks)
    assert file_store.stats()["blocks"] == len(blocks)


@pytest.mark.parametrize(
    ("ending", "raised", "message"),
    [("the writer is killed", BlockStoreError, "block writer process ended"), ("an error", RuntimeError, "stop")],
)
def test_a_batch_whose_writer_dies_or_that_ends_with_an_error_ends_its_writer_and_leaves_nothing(
    file_store: FileBlockStore, ending: str, raised: type[Exception], message: str
) -> None:
    with pytest.raises(raised, match=message):
        with file_store.batch() as batch:
            for block in _small_blocks(SPAWN_AFTER + 300):
                file_store.put(block)
            writer = _writer(batch)
            if ending == "an error":
                raise RuntimeError("stop")
            assert writer._look(wait=True)  # it said ready: from here the blocks sent are its own to write
            writer._child.kill()
            writer._child.wait()
    assert writer._child.returncode is not None
    assert file_store.stats()["blocks"] == 0
    assert _batch_dirs(file_store.root) == []


def test_a_write_the_writer_cannot_make_fails_the_commit_with_its_reason(file_store: FileBlockStore) -> None:
    with pytest.raises(BlockStoreError, match=r"Not a directory$"):
        with file_store.batch() as batch:
            for block in _small_blocks(SPAWN_AFTER + 10):
                file_store.put(block)
            staging = _batch_dirs(file_store.root)[0]
            doomed = next(b for b in _small_blocks(4000, b"x") if not (staging / shard_of(raw_cid(b))).exists())
            (staging / shard_of(raw_cid(doomed))).write_bytes(b"")  # its staging directory is a file: ENOTDIR
            _writer(batch)
            file_store.put(doomed)
    assert file_store.stats()["blocks"] == 0
    with file_store.batch():
        file_store.put(doomed)  # a new batch, a new writer (or none): the store is unharmed
    assert file_store.get(raw_cid(doomed)) == doomed


def test_a_terminals_ctrl_c_does_not_reach_the_writer_its_parent_decides(file_store: FileBlockStore) -> None:
    blocks = _small_blocks(SPAWN_AFTER + 300)
    with file_store.batch() as batch:
        for block in blocks:
            file_store.put(block)
        child = _writer(batch)._child
        assert os.getsid(child.pid) != os.getsid(0)  # a session of its own: not in the terminal's process group
        assert batch.flush() == len(blocks)  # started and settled: its SIGINT is ignored from here
        os.kill(child.pid, signal.SIGINT)
        file_store.put(b"after the signal")
    assert file_store.stats()["blocks"] == len(blocks) + 1


def test_threads_staging_overlapping_small_blocks_through_one_writer_commit_each_once(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path / "blocks")
    blocks = _small_blocks(2 * SPAWN_AFTER)
    with store.batch():
        threads = [
            threading.Thread(
                target=contextvars.copy_context().run,
                args=(lambda part=part: [store.put(block) for block in part],),
            )
            for part in (blocks[: SPAWN_AFTER + 500], blocks[SPAWN_AFTER - 500 :])
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert store.stats() == {"blocks": len(blocks), "bytes": sum(map(len, blocks))}


def test_where_no_writer_can_be_started_the_batch_writes_its_small_blocks_itself(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filebatch, "start", lambda path: None)
    blocks = _small_blocks(SPAWN_AFTER + 50)
    with file_store.batch() as batch:
        for block in blocks:
            file_store.put(block)
        assert batch._writer is None  # type: ignore[attr-defined]
    assert file_store.stats()["blocks"] == len(blocks)


def test_after_the_writer_fails_every_flush_stage_and_staged_read_fails_and_nothing_it_held_is_visible(
    file_store: FileBlockStore,
) -> None:
    blocks = _small_blocks(SPAWN_AFTER + 10)
    with pytest.raises(BlockStoreError, match=r"Not a directory$"):
        with file_store.batch() as batch:
            for block in blocks:
                file_store.put(block)
            staging = _batch_dirs(file_store.root)[0]
            fresh = [b for b in _small_blocks(4000, b"y") if not (staging / shard_of(raw_cid(b))).exists()]
            doomed = fresh[0]
            (staging / shard_of(raw_cid(doomed))).write_bytes(b"")  # its staging directory is a file: ENOTDIR
            others = [b for b in fresh if shard_of(raw_cid(b)) != shard_of(raw_cid(doomed))][:50]
            for block in [doomed, *others]:  # after ``doomed`` the child has failed: these are never files
                file_store.put(block)
            with pytest.raises(BlockStoreError, match=r"Not a directory$"):
                batch.flush()
            with pytest.raises(BlockStoreError, match=r"Not a directory$"):
                batch.flush()  # sticky: the writer's files and counts are lost, so nothing may commit
            with pytest.raises(BlockStoreError, match=r"Not a directory$"):
                file_store.put(b"after the failure")
            with pytest.raises(BlockStoreError, match=r"Not a directory$"):
                file_store.get(raw_cid(blocks[-1]))
    assert file_store.stats()["blocks"] == 0
    assert _batch_dirs(file_store.root) == []


def test_a_process_forked_while_a_writer_lives_does_not_hold_it_past_the_batch(file_store: FileBlockStore) -> None:
    blocks = _small_blocks(SPAWN_AFTER + 300)
    with file_store.batch() as batch:
        for block in blocks:
            file_store.put(block)
        writer = _writer(batch)
        pid = os.fork()
        if pid == 0:  # holds every inherited descriptor for a while, as a worker pool's process might
            time.sleep(60)
            os._exit(0)
        started = time.monotonic()
    ended = time.monotonic() - started
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert writer._child.returncode == 0  # it ended on the end record, not killed
    assert ended < 5
    assert file_store.stats()["blocks"] == len(blocks)


def test_blocks_staged_while_the_writer_is_busy_are_made_by_the_batch_and_each_is_committed_once(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = iter(range(10**6))
    monkeypatch.setattr(filewriter.Writer, "busy", property(lambda self: next(calls) % 3 == 0))
    blocks = _small_blocks(SPAWN_AFTER + 600)
    with file_store.batch() as batch:
        cids = [file_store.put(block) for block in blocks]
        cids += [file_store.put(block) for block in blocks[SPAWN_AFTER:]]  # again: whoever made them, once
        _writer(batch)
        assert file_store.get(cids[-1]) == blocks[-1]
        assert batch.flush() == len(blocks)
    assert file_store.stats() == {"blocks": len(blocks), "bytes": sum(map(len, blocks))}
    assert all(file_store.get(cid) == block for cid, block in zip(cids, blocks, strict=False))


def test_a_writer_whose_pipes_get_descriptors_past_1024_works_as_any_other(file_store: FileBlockStore) -> None:
    # A host with many files and sockets open: the pipes of a writer started then get high numbers, which
    # select() refuses (FD_SETSIZE); the writer waits with poll().
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit ({hard}) is too low to open 1,100 descriptors")
    if soft != resource.RLIM_INFINITY and soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1030:
            held.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        blocks = _small_blocks(SPAWN_AFTER + 3000)
        with file_store.batch() as batch:
            cids = [file_store.put(block) for block in blocks]
            writer = _writer(batch)
            assert writer._in.fileno() >= 1024 and writer._out.fileno() >= 1024
            assert batch.flush() == len(blocks)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert all(file_store.get(cid) == block for cid, block in zip(cids, blocks, strict=True))


def test_a_small_block_the_batch_fails_to_write_after_a_block_went_to_the_writer_fails_the_batch_for_good(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same block may already be a record for the child: had the batch's own file been there when the
    # child reached it, the child skipped it, and the put that returned its CID first would be lost.
    busy = False
    monkeypatch.setattr(filewriter.Writer, "busy", property(lambda self: busy))
    twice = b"the block put twice".ljust(100, b".")
    real = filebatch._write_all

    def full_disk(fd: int, data: bytes | memoryview) -> None:
        if bytes(data) == twice:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(filebatch, "_write_all", full_disk)
    with pytest.raises(BlockStoreError, match="No space left"):
        with file_store.batch() as batch:
            for block in _small_blocks(SPAWN_AFTER):
                file_store.put(block)
            cid = file_store.put(twice)  # a record for the writer
            _writer(batch)
            busy = True
            with pytest.raises(BlockStoreError, match="No space left"):
                file_store.put(twice)  # made by the batch itself, which fails
            with pytest.raises(BlockStoreError, match="No space left"):
                batch.flush()
    assert file_store.get(cid) is None
    assert file_store.stats()["blocks"] == 0
    assert _batch_dirs(file_store.root) == []


def test_a_writer_killed_before_it_said_ready_hands_every_block_back_to_the_batch(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Until the ready line, nothing goes down the pipe: a child that ends first has made none of the files.
    monkeypatch.setattr(filewriter, "_CHILD", "import time; time.sleep(60)")  # a child that never gets ready
    blocks = _small_blocks(SPAWN_AFTER + 300)
    with file_store.batch() as batch:
        for block in blocks[: SPAWN_AFTER + 1]:
            file_store.put(block)
        writer = _writer(batch)
        writer._child.kill()
        writer._child.wait()
        for block in blocks[SPAWN_AFTER + 1 :]:
            file_store.put(block)
        assert batch.flush() == len(blocks)
        assert batch._writer is None  # type: ignore[attr-defined]
        file_store.put(b"after the hand-back")  # written by the batch itself: no other writer is started
        assert batch._writer is None  # type: ignore[attr-defined]
    assert file_store.stats()["blocks"] == len(blocks) + 1
    assert all(file_store.get(raw_cid(block)) == block for block in blocks)


@pytest.mark.parametrize("executable", ["/bin/false", "frozen"])
def test_a_writer_that_cannot_run_leaves_the_batch_to_write_its_files_itself(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch, executable: str
) -> None:
    if executable == "frozen":
        monkeypatch.setattr(sys, "frozen", True, raising=False)
    else:
        monkeypatch.setattr(sys, "executable", executable)
    blocks = _small_blocks(SPAWN_AFTER + 300)
    with file_store.batch() as batch:
        for block in blocks:
            file_store.put(block)
        assert file_store.get(raw_cid(blocks[-1])) == blocks[-1]  # handed back by the writer, staged by the batch
        assert batch._writer is None  # type: ignore[attr-defined]
    assert file_store.stats() == {"blocks": len(blocks), "bytes": sum(map(len, blocks))}


@pytest.mark.parametrize(
    "name", ["../escape", "b" + "a" * 57 + "/x", "B" + "a" * 58, "b" + "a" * 59, "b" + "a" * 50 + "/../../x"]
)
def test_the_writer_refuses_a_record_whose_name_is_not_a_block_name(file_store: FileBlockStore, name: str) -> None:
    with pytest.raises(BlockStoreError, match="malformed record"):
        with file_store.batch() as batch:
            for block in _small_blocks(SPAWN_AFTER + 10):
                file_store.put(block)
            writer = _writer(batch)
            writer._pending.append(struct.pack("<BHI", 0, len(name), 3) + name.encode() + b"abc")
            writer._unsettled = True
            with pytest.raises(BlockStoreError, match="malformed record"):
                batch.flush()
            staging = _batch_dirs(file_store.root)[0]
            assert not [p for p in staging.rglob("*") if p.name in ("escape", "x") or len(p.name) not in (2, 59)]
    assert file_store.stats()["blocks"] == 0


def test_an_interrupt_while_the_held_blocks_become_records_fails_the_batch_for_good(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = filewriter._HEAD

    class Head:  # a KeyboardInterrupt landing on the third record header made from the held blocks
        size = real.size
        armed = 0

        def pack(self, *args: int) -> bytes:
            if self.armed:
                self.armed -= 1
                if not self.armed:
                    raise KeyboardInterrupt
            return real.pack(*args)

    head = Head()
    monkeypatch.setattr(filewriter, "_HEAD", head)
    with pytest.raises(BlockStoreError, match="interrupted"):
        with file_store.batch() as batch:
            for block in _small_blocks(SPAWN_AFTER + 10):  # the last ten held: the child has not said ready
                file_store.put(block)
            head.armed = 3
            with pytest.raises(KeyboardInterrupt):
                batch.flush()
            with pytest.raises(BlockStoreError, match="interrupted"):
                batch.flush()
    assert file_store.stats()["blocks"] == 0
    assert _batch_dirs(file_store.root) == []


def test_an_interrupt_partway_through_a_write_to_the_writer_fails_the_batch_for_good(
    file_store: FileBlockStore,
) -> None:
    class Interrupted:  # the pipe to the child, interrupted once partway through a write
        def __init__(self, pipe: Any) -> None:
            self.pipe, self.armed = pipe, True

        def write(self, data: bytes) -> int:
            if self.armed:
                self.armed = False
                self.pipe.write(data[: len(data) // 2])
                raise KeyboardInterrupt
            return int(self.pipe.write(data))

        def __getattr__(self, name: str) -> Any:
            return getattr(self.pipe, name)

    with pytest.raises(BlockStoreError, match="interrupted"):
        with file_store.batch() as batch:
            for block in _small_blocks(SPAWN_AFTER + 300):
                file_store.put(block)
            writer = _writer(batch)
            writer._in = Interrupted(writer._in)
            with pytest.raises(KeyboardInterrupt):
                batch.flush()
            with pytest.raises(BlockStoreError, match="interrupted"):
                batch.flush()
    assert writer._child.returncode == 1  # the record cut short ended it, unwritten
    assert file_store.stats()["blocks"] == 0
    assert _batch_dirs(file_store.root) == []


# ---- the memory store


def test_a_memory_batch_keeps_the_bytes_object_it_was_given() -> None:
    store = MemoryBlockStore()
    data = b"kept as is" * 10
    with store.batch():
        cid = store.put(data)
    assert store.get(cid) is data


def test_store_batch_is_the_base_of_both_stores_batches(tmp_path: Path) -> None:
    assert isinstance(MemoryBlockStore().batch(), StoreBatch)
    assert isinstance(FileBlockStore(tmp_path).batch(), StoreBatch)
