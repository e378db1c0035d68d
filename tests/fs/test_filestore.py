"""kuro_fs.filestore: the durable store's own rules (the shared contract is in test_blocks.py).

Corruption is detected, torn temp files are invisible, OS failures are typed,
concurrent threads and processes leave only whole blocks, closed means closed.
Bad input and failure paths first.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kuro_fs.cid import parse, raw_cid
from kuro_fs.errors import BlockStoreError, CorruptBlock, InvalidCID
from kuro_fs.filestore import FileBlockStore, default_store, shard_of
from kuro_fs.home import blocks_dir

HELLO = "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq"


def _block_file(store: FileBlockStore, cid: str) -> Path:
    return store.root / shard_of(cid) / cid


def _every_file(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _audit(root: Path) -> tuple[int, int]:
    """Re-hash every block file under ``root`` by hand; return (blocks, bytes). Fails on any mismatch."""
    blocks = total = 0
    for path in _every_file(root):
        assert not path.name.startswith(".tmp-"), f"temp file left behind: {path}"
        data = path.read_bytes()
        assert hashlib.sha256(data).digest() == parse(path.name).digest, f"corrupt block {path.name}"
        assert path.parent.name == shard_of(path.name)
        blocks += 1
        total += len(data)
    return blocks, total


# ---- corruption


def test_a_block_whose_bytes_were_changed_raises_corrupt_block_naming_the_cid(file_store: FileBlockStore) -> None:
    cid = file_store.put(b"hello")
    _block_file(file_store, cid).write_bytes(b"jello")
    with pytest.raises(CorruptBlock) as info:
        file_store.get(cid)
    assert info.value.cid == cid
    assert cid in str(info.value)
    assert isinstance(info.value, BlockStoreError)


def test_a_truncated_block_raises_corrupt_block(file_store: FileBlockStore) -> None:
    cid = file_store.put(b"x" * 1000)
    _block_file(file_store, cid).write_bytes(b"x" * 999)
    with pytest.raises(CorruptBlock, match=cid):
        file_store.get(cid)


def test_bytes_of_another_block_under_this_name_raise_corrupt_block(file_store: FileBlockStore) -> None:
    cid = file_store.put(b"mine")
    _block_file(file_store, cid).write_bytes(b"")
    with pytest.raises(CorruptBlock):
        file_store.get(cid)


def test_publish_reports_a_corrupt_block_as_corrupt(file_store: FileBlockStore) -> None:
    cid = file_store.put(b"hello")
    _block_file(file_store, cid).write_bytes(b"jello")
    assert file_store.publish([cid]) == {"published": 0, "rejected": [cid], "reasons": {cid: "corrupt"}}


def test_with_verify_off_get_skips_the_hash_but_publish_still_checks(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path, verify=False)
    cid = store.put(b"hello")
    _block_file(store, cid).write_bytes(b"jello")
    assert store.verify is False
    assert store.get(cid) == b"jello"
    assert store.publish([cid])["reasons"] == {cid: "corrupt"}


@pytest.mark.parametrize("damage", [b"jello", b"hell", b""], ids=["same-length", "shorter", "empty"])
def test_putting_the_right_bytes_again_heals_a_damaged_block(file_store: FileBlockStore, damage: bytes) -> None:
    cid = file_store.put(b"hello")
    _block_file(file_store, cid).write_bytes(damage)
    assert file_store.put(b"hello") == cid
    assert file_store.get(cid) == b"hello"


def _plant(store: FileBlockStore, cid: str, what: str) -> None:
    """Put something other than a regular file under ``cid``'s block name."""
    path = _block_file(store, cid)
    path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    if what == "fifo":
        os.mkfifo(path)
    elif what == "device":
        path.symlink_to("/dev/zero")  # reading it would never end
    else:
        path.mkdir()


EMPTY_RAW = raw_cid(b"")


@pytest.mark.parametrize("what", ["fifo", "device", "directory"])
@pytest.mark.parametrize("cid", [HELLO, EMPTY_RAW], ids=["hello", "empty-block"])
def test_a_block_name_that_is_no_regular_file_is_refused_at_once_and_put_replaces_it(
    file_store: FileBlockStore, what: str, cid: str
) -> None:
    # A FIFO would block the open (or the read) forever and /dev/zero would never end: each is refused
    # before any read, as a store failure (has() already says no block is there), and a put heals it.
    data = b"hello" if cid == HELLO else b""
    _plant(file_store, cid, what)
    assert file_store.has(cid) is False
    for read in (lambda: file_store.get(cid), lambda: file_store.get_into(cid, memoryview(bytearray(len(data))))):
        with pytest.raises(BlockStoreError, match=cid):
            read()
    if what != "directory":  # a directory squatting on the name stays a failure (see the delete test below)
        assert file_store.put(data) == cid
        assert file_store.get(cid) == data


# ---- torn writes


def test_a_torn_temp_file_is_never_returned_by_get_has_or_stats(file_store: FileBlockStore) -> None:
    cid = raw_cid(b"hello")
    shard = file_store.root / shard_of(cid)
    shard.mkdir(parents=True)
    # A writer died mid-write. The name ends like a block of this shard, so only the temp-name
    # rule (not the shard check) keeps it out of stats and listings.
    (shard / f".tmp-999-1-{'ab' * 7}{shard_of(cid)}x").write_bytes(b"hel")
    (shard / f".tmp-999-2-{cid[9:]}").write_bytes(b"hello")
    assert file_store.get(cid) is None
    assert file_store.has(cid) is False
    assert file_store.stats() == {"blocks": 0, "bytes": 0}
    assert file_store.cids() == []
    assert file_store.publish([cid])["reasons"] == {cid: "missing"}


def test_a_block_written_after_a_torn_write_is_whole(file_store: FileBlockStore) -> None:
    cid = raw_cid(b"hello")
    shard = file_store.root / shard_of(cid)
    shard.mkdir(parents=True)
    (shard / f".tmp-999-1-{'ab' * 8}").write_bytes(b"hel")
    assert file_store.put(b"hello") == cid
    assert file_store.get(cid) == b"hello"
    assert file_store.stats() == {"blocks": 1, "bytes": 5}
    assert file_store.drop_cache() == {"removed": 1}


def test_files_that_are_not_blocks_in_their_shard_are_ignored(file_store: FileBlockStore) -> None:
    cid = file_store.put(b"hello")
    (file_store.root / "README").write_text("not a block")
    (file_store.root / shard_of(cid) / "notes.txt").write_text("not a block")
    other = raw_cid(b"elsewhere")
    wrong_shard = file_store.root / ("aa" if shard_of(other) != "aa" else "bb")
    wrong_shard.mkdir()
    (wrong_shard / other).write_bytes(b"elsewhere")  # a block in the wrong shard is not found by get
    (file_store.root / shard_of(cid) / raw_cid(b"dir")).mkdir()
    assert file_store.cids() == [cid]
    assert file_store.stats() == {"blocks": 1, "bytes": 5}
    assert file_store.get(other) is None
    assert file_store.drop_cache() == {"removed": 1}


def test_a_successful_put_leaves_one_file_under_the_cid_in_its_shard(file_store: FileBlockStore) -> None:
    cid = file_store.put(b"hello")
    assert cid == HELLO
    assert _every_file(file_store.root) == [file_store.root / shard_of(cid) / cid]
    assert shard_of(cid) == cid[-3:-1]


# ---- OS failures become BlockStoreError


@pytest.fixture
def blocked(file_store: FileBlockStore) -> FileBlockStore:
    """A store where a plain file sits where HELLO's fan-out directory should be."""
    (file_store.root / shard_of(HELLO)).write_bytes(b"in the way")
    return file_store


def test_put_that_cannot_create_its_directory_raises_block_store_error(blocked: FileBlockStore) -> None:
    with pytest.raises(BlockStoreError, match=HELLO) as info:
        blocked.put(b"hello")
    assert isinstance(info.value.__cause__, OSError)
    assert not isinstance(info.value, CorruptBlock)


@pytest.mark.parametrize("op", ["get", "has", "delete"])
def test_a_real_os_failure_is_raised_not_answered(blocked: FileBlockStore, op: str) -> None:
    with pytest.raises(BlockStoreError) as info:
        getattr(blocked, op)(HELLO)
    assert isinstance(info.value.__cause__, OSError)


def test_deleting_a_directory_squatting_on_a_block_name_raises(file_store: FileBlockStore) -> None:
    path = _block_file(file_store, HELLO)
    path.mkdir(parents=True)
    with pytest.raises(BlockStoreError):
        file_store.delete(HELLO)
    with pytest.raises(BlockStoreError):
        file_store.get(HELLO)
    with pytest.raises(BlockStoreError):
        file_store.put(b"hello")
    assert file_store.has(HELLO) is False


def test_publish_raises_a_store_failure_instead_of_counting_it_as_a_rejection(blocked: FileBlockStore) -> None:
    with pytest.raises(BlockStoreError) as info:
        blocked.publish([HELLO])
    assert isinstance(info.value.__cause__, OSError)
    assert not isinstance(info.value, CorruptBlock)


def test_drop_cache_that_fails_midway_raises_and_says_how_many_it_removed(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    cids = [file_store.put(bytes([i]) * 3) for i in range(5)]
    real_unlink = os.unlink
    calls: list[str] = []

    def failing_third_unlink(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        calls.append(str(path))
        if len(calls) == 3:
            raise PermissionError(13, "Permission denied", str(path))
        real_unlink(path)

    monkeypatch.setattr(os, "unlink", failing_third_unlink)
    with pytest.raises(BlockStoreError, match="after removing 2 blocks") as info:
        file_store.drop_cache()
    monkeypatch.undo()
    assert isinstance(info.value.__cause__, PermissionError)
    assert not isinstance(info.value, CorruptBlock)
    assert file_store.stats() == {"blocks": 3, "bytes": 9}
    assert sorted(file_store.cids()) == sorted(set(cids) - {Path(c).name for c in calls[:2]})


def test_stats_and_drop_cache_skip_a_file_in_place_of_a_shard(blocked: FileBlockStore) -> None:
    cid = blocked.put(b"other")
    assert shard_of(cid) != shard_of(HELLO)
    assert blocked.stats() == {"blocks": 1, "bytes": 5}
    assert blocked.drop_cache() == {"removed": 1}


def test_a_store_cannot_be_opened_on_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"")
    with pytest.raises(BlockStoreError, match="cannot open") as info:
        FileBlockStore(target / "blocks")
    assert isinstance(info.value.__cause__, OSError)


def test_a_path_like_cid_never_touches_the_filesystem(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path / "blocks")
    (tmp_path / "secret").write_bytes(b"secret")
    for bad in ["../secret", "bafkrei/../../secret", "/etc/passwd"]:
        with pytest.raises(InvalidCID):
            store.get(bad)
        with pytest.raises(InvalidCID):
            store.delete(bad)
    assert (tmp_path / "secret").exists()


# ---- lifecycle


def test_every_operation_after_close_raises_block_store_error(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path)
    cid = store.put(b"hello")
    store.close()
    assert store.closed
    calls = [
        lambda: store.put(b"x"),
        lambda: store.get(cid),
        lambda: store.has(cid),
        lambda: store.delete(cid),
        store.stats,
        lambda: store.publish([cid]),
        store.drop_cache,
        store.cids,
        store.iter_cids,
    ]
    for call in calls:
        with pytest.raises(BlockStoreError, match="closed"):
            call()
    assert _audit(tmp_path) == (1, 5)  # closing removes nothing


def test_close_is_idempotent_and_with_closes(tmp_path: Path) -> None:
    with FileBlockStore(tmp_path) as store:
        store.put(b"x")
    assert store.closed
    store.close()
    store.close()
    with pytest.raises(BlockStoreError):
        with store:
            pass


def test_a_store_whose_directory_was_removed_from_outside_is_empty_and_recovers(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path / "blocks")
    cid = store.put(b"hello")
    shutil.rmtree(tmp_path / "blocks")
    assert store.stats() == {"blocks": 0, "bytes": 0}
    assert store.get(cid) is None
    assert store.put(b"hello") == cid
    assert store.get(cid) == b"hello"


def test_a_reopened_store_sees_the_blocks_written_before(tmp_path: Path) -> None:
    with FileBlockStore(tmp_path) as first:
        cid = first.put(b"durable")
    with FileBlockStore(tmp_path) as second:
        assert second.get(cid) == b"durable"
        assert "open" in repr(second)


def test_the_default_store_lives_under_the_home_blocks_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with default_store(tmp_path / "home") as store:
        assert store.root == tmp_path / "home" / "blocks" == blocks_dir(tmp_path / "home")
    monkeypatch.setenv("KURO_HOME", str(tmp_path / "env-home"))
    with default_store() as store:
        assert store.root == tmp_path / "env-home" / "blocks"
        store.put(b"x")
    assert (tmp_path / "env-home" / "blocks").is_dir()


def test_iter_cids_lists_every_block_once(file_store: FileBlockStore) -> None:
    cids = {file_store.put(bytes([i])) for i in range(50)}
    assert sorted(file_store.iter_cids()) == file_store.cids() == sorted(cids)


# ---- concurrency


def _blobs(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.choice([0, 1, 100, 4096, 70_000])) for _ in range(n)]


def test_eight_threads_writing_overlapping_blocks_leave_only_whole_blocks(tmp_path: Path) -> None:
    shared = _blobs(1, 60)
    own = [_blobs(100 + t, 10) for t in range(8)]
    store = FileBlockStore(tmp_path)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8 + 2)
    writing = threading.Event()
    writing.set()

    def write(t: int) -> None:
        try:
            mine = shared + own[t]
            random.Random(t).shuffle(mine)
            barrier.wait()
            for blob in mine:
                cid = store.put(blob)
                assert store.get(cid) == blob
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def read(r: int) -> None:
        # Readers poll while the writers run: a block is either absent or whole, never torn.
        rng = random.Random(1000 + r)
        try:
            barrier.wait()
            while writing.is_set():
                blob = shared[rng.randrange(len(shared))]
                assert store.get(raw_cid(blob)) in (None, blob)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    readers = [threading.Thread(target=read, args=(r,)) for r in range(2)]
    for thread in writers + readers:
        thread.start()
    for thread in writers:
        thread.join()
    writing.clear()
    for thread in readers:
        thread.join()
    assert errors == []
    expected = {raw_cid(b): b for b in shared + [b for group in own for b in group]}
    assert _audit(tmp_path) == (len(expected), sum(map(len, expected.values())))
    assert store.stats() == {"blocks": len(expected), "bytes": sum(map(len, expected.values()))}
    assert store.publish(list(expected))["published"] == len(expected)


_WRITER = """
import os, random, sys, time
from kuro_fs.cid import raw_cid
from kuro_fs.filestore import FileBlockStore
root, proc, gate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def blobs(seed, n):
    rng = random.Random(seed)
    return [rng.randbytes(rng.choice([0, 1, 100, 4096, 70_000])) for _ in range(n)]
shared = blobs(1, 150)
mine = shared + blobs(100 + proc, 20)
random.Random(proc).shuffle(mine)
store = FileBlockStore(root)
open(f"{gate}.ready{proc}", "w").close()
while not os.path.exists(gate):  # start together, so the writes really overlap
    time.sleep(0.002)
for blob in mine:
    cid = store.put(blob)
    assert cid == raw_cid(blob)
    assert store.get(cid) == blob
    peek = shared[random.randrange(len(shared))]
    assert store.get(raw_cid(peek)) in (None, peek)
for blob in shared:
    assert store.get(raw_cid(blob)) == blob
print(len(mine))
"""


def test_four_processes_writing_overlapping_blocks_leave_only_whole_blocks(tmp_path: Path) -> None:
    root = tmp_path / "blocks"
    gate = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(root), str(p), str(gate)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for p in range(4)
    ]
    try:
        while not all((tmp_path / f"go.ready{p}").exists() for p in range(4)):
            if any(proc.poll() is not None for proc in procs):
                break  # a writer died before the start line; its stderr is reported below
            time.sleep(0.005)
        gate.touch()
        results = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert out.strip() == "170"
    expected = {raw_cid(b): b for b in _blobs(1, 150) + [b for p in range(4) for b in _blobs(100 + p, 20)]}
    assert _audit(root) == (len(expected), sum(map(len, expected.values())))
    with FileBlockStore(root) as store:
        assert store.stats() == {"blocks": len(expected), "bytes": sum(map(len, expected.values()))}
        assert store.publish(list(expected)) == {"published": len(expected), "rejected": [], "reasons": {}}


# ---- error messages


def test_an_os_error_that_names_no_file_leaves_no_empty_brackets(
    file_store: FileBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")  # as the kernel reports a failed flush: no file name

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(BlockStoreError) as info:
        file_store.put(b"hello")
    monkeypatch.undo()
    assert str(info.value) == f"put {HELLO} failed: Input/output error"
    assert file_store.get(HELLO) is None


def test_an_os_error_that_names_a_file_says_which(blocked: FileBlockStore) -> None:
    with pytest.raises(BlockStoreError, match=rf"^put {HELLO} failed: \w[^(]* \({blocked.root}/\S+\)$"):
        blocked.put(b"hello")
