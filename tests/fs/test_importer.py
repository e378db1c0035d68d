"""The importer: same CIDs as the serial layout, hashed once on two threads, streamed from disk."""

from __future__ import annotations

import errno
import io
import os
import signal
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from fshelpers import LateSecondPut, ctrl_c_at_second_pool_thread, main_thread_in
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore, active_batch
from kuro_fs.cid import cid_for
from kuro_fs.errors import KuroFsError
from kuro_fs.fileread import read_file
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_fs.fsdir import MAX_FLAT_ENTRIES, Entry, write_dir
from kuro_fs.importer import file_cid, import_bytes, import_file, import_path, import_stream
from kuro_fs.paths import has_control
from kuro_fs.unixfs import write_file


class RecordingStream(io.RawIOBase):
    """A readable stream of ``size`` pattern bytes that records the largest read asked of it."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.pos = 0
        self.largest = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer)
        self.largest = max(self.largest, len(view))
        n = min(len(view), self.left, 777)  # short reads on purpose
        view[:n] = bytes((self.pos + i) % 253 for i in range(n))
        self.pos += n
        self.left -= n
        return n


class DiscardingStore(MemoryBlockStore):
    """Mints CIDs and keeps only the non-leaf blocks: what is left in memory is the importer's own."""

    def put(self, data: bytes, codec: str = "raw") -> str:
        if codec == "raw":
            return cid_for(data, codec)
        return super().put(data, codec)


def pattern(size: int) -> bytes:
    return bytes(i % 253 for i in range(size))


# ---- bad input first


@pytest.mark.parametrize("kwargs", [{"chunk_size": 0}, {"width": 1}, {"workers": 0}])
def test_bad_parameters_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        import_bytes(MemoryBlockStore(), b"x", **kwargs)
    with pytest.raises(ValueError):
        file_cid(b"x", **kwargs)


def test_a_stream_needs_readinto() -> None:
    with pytest.raises(TypeError, match="readinto"):
        import_stream(MemoryBlockStore(), object())


def test_a_non_blocking_stream_with_no_data_ready_is_refused_not_imported_as_its_prefix() -> None:
    # readinto answers None when a non-blocking stream has no data yet (not at its end); that None was
    # taken for the end of the stream, so the import returned the CID of a prefix (here: the empty file).
    class NotYet(io.RawIOBase):
        def __init__(self) -> None:
            self.calls = 0

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int | None:
            self.calls += 1
            if self.calls == 2:
                return None
            if self.calls > 3:
                return 0
            buffer[:3] = b"abc"
            return 3

    with pytest.raises(BlockingIOError, match="no data ready"):
        import_stream(MemoryBlockStore(), NotYet())


def test_a_missing_path_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        import_path(MemoryBlockStore(), tmp_path / "nope")


def test_symlinks_are_refused_not_followed(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "target").write_bytes(b"x")
    (tmp_path / "d" / "link").symlink_to(tmp_path / "d" / "target")
    with pytest.raises(KuroFsError, match="symlinks"):
        import_path(MemoryBlockStore(), tmp_path / "d")
    with pytest.raises(KuroFsError, match="symlinks"):
        import_path(MemoryBlockStore(), tmp_path / "d" / "link")


def test_a_name_kuro_fs_cannot_hold_is_refused(tmp_path: Path) -> None:
    os.makedirs(tmp_path / "d")
    with open(os.path.join(os.fsencode(tmp_path / "d"), b"bad\xffname"), "wb") as f:
        f.write(b"x")
    with pytest.raises(KuroFsError, match=r"cannot be a kuro\.fs entry"):
        import_path(MemoryBlockStore(), tmp_path / "d")


# ---- same DAG as the serial layout


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 5000), st.integers(1, 300), st.integers(2, 5), st.integers(1, 3))
def test_parallel_import_equals_the_serial_layout(size: int, chunk: int, width: int, workers: int) -> None:
    data = pattern(size)
    serial, parallel = MemoryBlockStore(), MemoryBlockStore()
    expected = write_file(serial.put, data, chunk_size=chunk, width=width)
    got = import_file(parallel, data, chunk_size=chunk, width=width, workers=workers)
    assert got == expected
    assert parallel.cids() == serial.cids()
    assert file_cid(data, chunk_size=chunk, width=width, workers=workers) == expected.cid


def test_file_cid_stores_nothing_and_accepts_bytearrays() -> None:
    data = bytearray(pattern(3000))
    assert file_cid(data, chunk_size=256) == import_bytes(MemoryBlockStore(), bytes(data), chunk_size=256)


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 2999, 3000, 3001, 10_000])
def test_streaming_in_batches_gives_the_same_cid(size: int) -> None:
    store = MemoryBlockStore()
    stream = RecordingStream(size)
    root = import_stream(store, stream, chunk_size=100, width=3, batch_bytes=1000)
    assert root.cid == import_bytes(MemoryBlockStore(), pattern(size), chunk_size=100, width=3)
    assert read_file(store, root.cid) == pattern(size)
    assert stream.largest <= 1000


@pytest.mark.parametrize("size", [0, 1, 4096, 4097, 70_000])
@pytest.mark.parametrize("workers", [1, 2])
def test_import_path_of_a_file_is_its_unixfs_cid(tmp_path: Path, size: int, workers: int) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(pattern(size))
    store = MemoryBlockStore()
    cid = import_path(store, path, chunk_size=4096, width=4, workers=workers, batch_bytes=3 * 4096)
    assert cid == import_bytes(MemoryBlockStore(), pattern(size), chunk_size=4096, width=4)
    assert read_file(store, cid) == pattern(size)


class Rendezvous(MemoryBlockStore):
    """Holds the first raw put of each of the first two threads until both are in one, and records them."""

    def __init__(self) -> None:
        super().__init__()
        self.met = threading.Barrier(2)
        self.threads: set[int] = set()
        self.lock = threading.Lock()

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        with self.lock:
            first = codec == "raw" and threading.get_ident() not in self.threads and len(self.threads) < 2
            if first:
                self.threads.add(threading.get_ident())
        if first:
            self.met.wait(10)  # broken (BrokenBarrierError) if no second thread ever puts
        return super().put(data, codec, cid=cid)


def test_a_files_chunks_are_put_on_the_calling_thread_and_one_pool_thread_at_once(tmp_path: Path) -> None:
    # Two workers are the caller and one pool thread (the caller would otherwise only wait), both claiming
    # the next chunk from one cursor: a large file's two puts in flight at once include the caller's.
    path = tmp_path / "f.bin"
    path.write_bytes(pattern(64 * 4096))
    store = Rendezvous()
    cid = import_path(store, path, chunk_size=4096, workers=2)
    assert cid == import_bytes(MemoryBlockStore(), pattern(64 * 4096), chunk_size=4096)
    assert threading.get_ident() in store.threads and len(store.threads) == 2


def test_the_first_failing_chunk_of_a_file_is_the_error_whichever_thread_fails_first(tmp_path: Path) -> None:
    chunks = [bytes([i]) * 4096 for i in range(16)]
    path = tmp_path / "f.bin"
    path.write_bytes(b"".join(chunks))
    later_failed = threading.Event()

    class Failing(MemoryBlockStore):
        def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
            if bytes(data) == chunks[9]:
                later_failed.set()
                raise KuroFsError("chunk 9 failed")
            if bytes(data) == chunks[2]:
                later_failed.wait(10)  # chunk 9 (claimed after chunk 2, on the other thread) fails first
                raise KuroFsError("chunk 2 failed")
            return super().put(data, codec, cid=cid)

    store = Failing()
    with pytest.raises(KuroFsError, match="chunk 2 failed"):
        import_path(store, path, chunk_size=4096, workers=2)
    assert store.cids() == []  # the import's batch was discarded whole


def test_a_ctrl_c_on_a_later_chunk_is_not_traded_for_an_earlier_chunks_failure(tmp_path: Path) -> None:
    chunks = [bytes([i]) * 4096 for i in range(16)]
    path = tmp_path / "f.bin"
    path.write_bytes(b"".join(chunks))
    interrupted = threading.Event()

    class Interrupted(MemoryBlockStore):
        def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
            if bytes(data) == chunks[9]:
                interrupted.set()
                raise KeyboardInterrupt  # as a Ctrl-C landing in this put
            if bytes(data) == chunks[2]:
                interrupted.wait(10)
                raise KuroFsError("chunk 2 failed")
            return super().put(data, codec, cid=cid)

    store = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        import_path(store, path, chunk_size=4096, workers=2)
    assert store.cids() == []


def test_import_path_of_a_directory_is_a_kuro_fs_root(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "docs" / "empty").mkdir(parents=True)
    (root / "docs" / "a.txt").write_bytes(b"hello")
    (root / "z.bin").write_bytes(pattern(5000))
    (root / "e").write_bytes(b"")
    store = MemoryBlockStore()
    fs = Fs(store, import_path(store, root, chunk_size=1024))
    assert [(e["path"], e["kind"], e["size"]) for e in fs.walk().value] == [
        ("docs", "dir", 0),
        ("docs/a.txt", "file", 5),
        ("docs/empty", "dir", 0),
        ("e", "file", 0),
        ("z.bin", "file", 5000),
    ]
    assert fs.read("z.bin").value == pattern(5000)
    other = MemoryBlockStore()
    built = Fs(other, Fs.empty(other).root, chunk_size=1024)
    for path, data in [("docs/a.txt", b"hello"), ("z.bin", pattern(5000)), ("e", b"")]:
        built = built.write(path, data).fs
    built = built.mkdir("docs/empty").fs
    assert built.root == fs.root  # the same tree written through Fs gives the same root


def test_import_path_streams_a_file_in_bounded_memory(tmp_path: Path) -> None:
    size, batch = 48 << 20, 2 << 20
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        for i in range(size >> 20):
            f.write(bytes([i]) * (1 << 20))
    expected = import_path(DiscardingStore(), path, batch_bytes=batch)
    tracemalloc.start()
    try:
        cid = import_path(DiscardingStore(), path, batch_bytes=batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cid == expected == file_cid(path.read_bytes())
    assert peak < 2 * batch + (1 << 20), f"peak {peak} bytes while importing {size}"  # far below the file size


def test_import_bytes_keeps_a_one_chunk_bytes_object_without_copying_it() -> None:
    store = MemoryBlockStore()
    data = pattern(1000)
    assert store.get(import_bytes(store, data)) is data
    copied = bytearray(data)
    assert store.get(import_bytes(MemoryBlockStore(), copied)) == data  # a mutable buffer is copied


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_import_bytes_on_several_threads_stores_every_leaf_in_order(workers: int) -> None:
    data = pattern(40_000)
    store = MemoryBlockStore()
    root = import_file(store, data, chunk_size=100, width=7, workers=workers)
    serial = MemoryBlockStore()
    assert root == write_file(serial.put, data, chunk_size=100, width=7)
    assert store.cids() == serial.cids()
    assert read_file(store, root.cid) == data


# ---- trees: small files on the workers, the outcome of a serial import


def _twelve_files(root: Path) -> Path:
    """A directory of ``f00`` … ``f11`` holding ``file 0`` … ``file 11``: two threads' runs of six each."""
    root.mkdir()
    for i in range(12):
        (root / f"f{i:02d}").write_bytes(b"file %d" % i)
    return root


def _mixed_tree(root: Path) -> Path:
    # Small files (one chunk each), larger ones (several chunks) and sub-directories, interleaved by name.
    for i in range(24):
        folder = root / f"d{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:02d}").write_bytes(pattern(100 + 997 * i)[i:])
        if i % 7 == 0:
            (folder / f"f{i:02d}-sub").mkdir(exist_ok=True)
            (folder / f"f{i:02d}-sub" / "x").write_bytes(bytes([i]) * i)
    return root


@pytest.mark.parametrize("workers", [2, 3])
def test_a_tree_imported_on_threads_equals_the_serial_import_block_for_block(tmp_path: Path, workers: int) -> None:
    tree = _mixed_tree(tmp_path / "tree")
    serial, threaded = MemoryBlockStore(), MemoryBlockStore()
    expected = import_path(serial, tree, chunk_size=4096, width=3, workers=1)
    assert import_path(threaded, tree, chunk_size=4096, width=3, workers=workers) == expected
    assert threaded.cids() == serial.cids()


def test_a_sharded_directory_imported_on_two_threads_into_the_disk_store_is_the_serial_one(tmp_path: Path) -> None:
    # A directory past the flat limit is many HashMap nodes, stored on the import's threads too.
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(MAX_FLAT_ENTRIES + 40):
        (tree / f"f{i:05d}").write_bytes(b"%d" % i)
    serial = MemoryBlockStore()
    expected = import_path(serial, tree, workers=1)
    assert len(serial.cids()) > MAX_FLAT_ENTRIES + 41  # more than the files and one flat directory block
    with FileBlockStore(tmp_path / "disk") as disk:
        assert import_path(disk, tree, workers=2) == expected
        assert disk.cids() == serial.cids()
        assert disk.publish(serial.cids())["published"] == len(serial.cids())


def test_write_dir_hands_its_new_blocks_to_put_blocks_instead_of_putting_each(tmp_path: Path) -> None:
    entries = {f"e{i}": Entry(cid_for(b"%d" % i), i) for i in range(MAX_FLAT_ENTRIES + 1)}
    plain = MemoryBlockStore()
    expected = write_dir(plain, entries)
    given: list[bytes] = []
    untouched = MemoryBlockStore()
    assert write_dir(untouched, entries, put_blocks=given.extend) == expected
    assert untouched.cids() == []
    assert sorted(cid_for(b, "dag-cbor") for b in given) == plain.cids()


class FailingStore(MemoryBlockStore):
    """Refuses to put the blocks named in ``bad`` (after minting nothing)."""

    def __init__(self, bad: dict[bytes, str]) -> None:
        super().__init__()
        self.bad = bad

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        if bytes(data) in self.bad:
            raise KuroFsError(self.bad[bytes(data)])
        return super().put(data, codec, cid=cid)


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_the_first_failing_file_by_name_is_the_error_and_nothing_is_kept(tmp_path: Path, workers: int) -> None:
    tree = _twelve_files(tmp_path / "tree")
    store = FailingStore({b"file 3": "f03 failed", b"file 9": "f09 failed"})
    with pytest.raises(KuroFsError, match="f03 failed"):
        import_path(store, tree, workers=workers)
    assert store.cids() == []  # the import's batch was discarded whole


class RacingStore(FileBlockStore):
    """Fails the put of ``b"file 3"`` once the put of ``b"file 9"`` (another thread's run) has begun; that one
    then waits for the batch to end."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.failed = threading.Event()
        self.landed = threading.Event()
        self.in_flight = threading.Event()

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        if bytes(data) == b"file 3":
            assert self.in_flight.wait(10)  # the other thread's run has begun: it is not cancelled, it is waited for
            self.failed.set()
            raise KuroFsError("f03 failed")
        if bytes(data) == b"file 9":
            self.in_flight.set()
            self.failed.wait(10)
            batch = active_batch(self)
            for _ in range(100):  # until the failed import's batch has ended (never, if the import waits for this put)
                if batch is None or not batch.open:
                    break
                time.sleep(0.01)
            try:
                return super().put(data, codec, cid=cid)
            finally:
                self.landed.set()
        return super().put(data, codec, cid=cid)


def test_a_file_import_still_in_flight_when_another_fails_is_not_kept_either(tmp_path: Path) -> None:
    tree = _twelve_files(tmp_path / "tree")
    store = RacingStore(tmp_path / "store")
    with pytest.raises(KuroFsError, match="f03 failed"):
        import_path(store, tree, workers=2)
    assert store.landed.wait(10)
    assert store.stats()["blocks"] == 0  # the import waited for the other thread's put before discarding its batch


class InterruptedStore(FileBlockStore):
    """Ctrl-C at the put of ``b"file 3"``, and a second one while the import waits for its threads (the put of
    ``b"file 6"``, in flight on the other thread, sends it, then waits for the batch to end before it lands)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.in_flight = threading.Event()
        self.sent = 0

    def _ctrl_c(self) -> None:
        self.sent += 1
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)  # to the main thread, as a tty's

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        if bytes(data) == b"file 3":
            assert self.in_flight.wait(10)
            self._ctrl_c()
        elif bytes(data) == b"file 6":
            self.in_flight.set()
            for _ in range(1000):
                if main_thread_in("_join"):
                    self._ctrl_c()
                    break
                time.sleep(0.01)
            batch = active_batch(self)
            for _ in range(100):  # until the import's batch has ended (never, if the import waits for this put)
                if batch is None or not batch.open:
                    break
                time.sleep(0.01)
        return super().put(data, codec, cid=cid)


def test_a_second_ctrl_c_while_the_import_waits_for_its_threads_keeps_nothing_and_stops_the_rest(
    tmp_path: Path,
) -> None:
    tree = _twelve_files(tmp_path / "tree")
    store = InterruptedStore(tmp_path / "store")
    handled: list[int] = []

    def ctrl_c(_signum: int, _frame: object) -> None:
        handled.append(1)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, ctrl_c)
    try:
        with pytest.raises(KeyboardInterrupt):
            import_path(store, tree, workers=2)
        for _ in range(500):  # every Ctrl-C sent is handled here, none after the test
            if len(handled) >= store.sent:
                break
            try:
                time.sleep(0.01)
            except KeyboardInterrupt:
                pass
    finally:
        signal.signal(signal.SIGINT, previous)
    assert store.sent == len(handled) == 2
    assert store.stats()["blocks"] == 0  # every put ended inside the batch, which was then discarded


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("later", ["b/link", "z"])
def test_a_file_that_fails_is_the_error_before_a_later_entry_that_is_refused(
    tmp_path: Path, workers: int, later: str
) -> None:
    class Full(MemoryBlockStore):  # fails one put, as a full disk would
        def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
            if bytes(data) == b"A":
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().put(data, codec, cid=cid)

    (tmp_path / "a").write_bytes(b"A")
    (tmp_path / later).parent.mkdir(exist_ok=True)
    (tmp_path / later).symlink_to("/etc/passwd")
    with pytest.raises(OSError) as raised:
        import_path(Full(), tmp_path, workers=workers)
    assert raised.value.errno == errno.ENOSPC  # as a serial walk meets them: `a` before `b/…` or `z`


def test_a_file_that_grows_while_it_is_imported_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a").write_bytes(b"short")
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: real_pread(fd, n, at) + b"!")  # one more byte than fstat said
    with pytest.raises(KuroFsError, match="changed size"):
        import_path(MemoryBlockStore(), tree)


def test_an_import_into_the_disk_store_returns_after_its_blocks_are_visible_and_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kuro_fs import filebatch
    from kuro_fs.filestore import FileBlockStore

    tree = _mixed_tree(tmp_path / "tree")
    store = FileBlockStore(tmp_path / "store")
    visible_at_sync: list[int] = []
    real_sync = filebatch.sync_filesystem

    def recording_sync(fd: int) -> bool:
        visible_at_sync.append(store.stats()["blocks"])
        return real_sync(fd)

    monkeypatch.setattr(filebatch, "sync_filesystem", recording_sync)
    root = import_path(store, tree, chunk_size=4096, width=3)
    expected = MemoryBlockStore()
    assert import_path(expected, tree, chunk_size=4096, width=3) == root
    # one sync before any block had a name, one after every block had its name, and nothing after
    assert visible_at_sync == [0, len(expected.cids())] == [0, store.stats()["blocks"]]
    assert store.publish(expected.cids())["published"] == len(expected.cids())


@pytest.mark.parametrize(
    ("name", "why"), [("a\x1b]0;title\x07", "control character"), ("   ", "whitespace"), (b"\xff", "not UTF-8")]
)
def test_a_local_name_no_path_can_hold_is_refused_saying_why(tmp_path: Path, name: str | bytes, why: str) -> None:
    # The message names the rule, and shows the name escaped: it is printed, and must not retitle the terminal.
    (tmp_path / "t").mkdir()
    with open(os.path.join(os.fsencode(tmp_path / "t"), os.fsencode(name)), "wb") as f:
        f.write(b"x")
    with pytest.raises(KuroFsError, match=why) as refused:
        import_path(MemoryBlockStore(), tmp_path / "t")
    assert not has_control(str(refused.value))


def test_a_tree_nested_deeper_than_the_recursion_limit_imports(tmp_path: Path) -> None:
    # 1100 levels of one-letter names: a 2.2 KB path, well within kuro.fs's 4096 bytes (and Linux's).
    depth = 1100
    assert depth > sys.getrecursionlimit()
    levels = [tmp_path / "t"]
    for _ in range(depth):  # not os.makedirs: it recurses once a level too
        levels.append(levels[-1] / "d")
    try:
        for level in levels:
            level.mkdir()
        (levels[-1] / "f").write_bytes(b"bottom")
        store = MemoryBlockStore()
        fs = Fs(store, import_path(store, levels[0]))
        assert fs.read("/".join(["d"] * depth) + "/f").value == b"bottom"
    finally:  # removed here, bottom up: pytest's own cleanup (shutil.rmtree) recurses once a level
        (levels[-1] / "f").unlink(missing_ok=True)
        for level in reversed(levels):
            if level.exists():
                level.rmdir()


def _until_the_import_joins_and_half_a_second_more() -> None:
    # An import that does not wait for the put in flight returns before it ends.
    for _ in range(500):
        if main_thread_in("_join"):
            break
        time.sleep(0.01)
    time.sleep(0.5)


def test_a_ctrl_c_while_a_thread_starts_still_waits_for_that_threads_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ThreadPoolExecutor adds a thread to the threads it joins only after its start returns; a Ctrl-C landing
    # in that start left the thread's run (already queued) going, and its put outlived the import's batch.
    tree = _twelve_files(tmp_path / "tree")
    store = LateSecondPut(tmp_path / "store", b"file 0", b"file 6", _until_the_import_joins_and_half_a_second_more)
    starts = ctrl_c_at_second_pool_thread(monkeypatch, lambda: store.in_second.wait(10))  # the thread is in a put
    with pytest.raises(KeyboardInterrupt):
        import_path(store, tree, workers=2)
    assert len(starts) == 2
    assert store.ended.is_set()  # the import waited for the put in flight on the second thread
    assert store.stats()["blocks"] == 0


def test_a_claimed_run_that_is_abandoned_raises_rather_than_leaving_holes() -> None:
    """Threads told to stop (the import is abandoned) leave items unput: that is an error, never a result list
    with gaps a layout would take for CIDs."""
    from concurrent.futures import ThreadPoolExecutor

    from kuro_fs.importer import _put_claimed, _Stopped

    abandoned = threading.Event()
    abandoned.set()
    with ThreadPoolExecutor(2) as pool, pytest.raises(_Stopped):
        _put_claimed(lambda item: item, list(range(8)), 2, pool, abandoned)
