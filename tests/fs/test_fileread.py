"""Reading files into one buffer: the same bytes and errors as iter_file, verified, the file held once.

kuro_fs.fileread plans the leaf reads and fills one output; FileBlockStore.get_into /
get_many_into read each leaf into its slot and verify it there; kuro_fs.fillbytes makes the
``bytes`` that Fs.read returns without a second copy. Bad input first.
"""

from __future__ import annotations

import os
import sys
import threading
import tracemalloc
from pathlib import Path

import pytest
from dagkit import diamond_file
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs import filestore
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import raw_cid
from kuro_fs.errors import CorruptBlock, DagPbError, InvalidCID, MissingBlock
from kuro_fs.fileread import read_bytes, read_file, read_into, read_range
from kuro_fs.filestore import PARALLEL_READ_BYTES, READ_HELPERS, FileBlockStore, shard_of
from kuro_fs.fillbytes import IN_PLACE_MIN, fill_bytes
from kuro_fs.fs import Fs
from kuro_fs.unixfs import NodeType, UnixFSData, encode_data, iter_file, write_file


def pattern(n: int) -> bytes:
    return bytes((i * 31 + i // 251) & 0xFF for i in range(n))


def _leaf_path(store: FileBlockStore, cid: str) -> Path:
    return store.root / shard_of(cid) / cid


# ---- bad input


@pytest.mark.parametrize("offset, length", [(-1, 3), (0, -1), (1.5, 2), (True, 2), ("0", 1)])
def test_a_bad_offset_or_length_is_a_value_error(offset: object, length: object) -> None:
    store = MemoryBlockStore()
    cid = write_file(store.put, pattern(3000), chunk_size=1000).cid
    with pytest.raises(ValueError):
        read_bytes(store, cid, offset, length)  # type: ignore[arg-type]


def test_read_into_needs_a_writable_buffer() -> None:
    store = MemoryBlockStore()
    cid = write_file(store.put, pattern(3000), chunk_size=1000).cid
    with pytest.raises(ValueError, match="writable"):
        read_into(store, cid, memoryview(bytes(10)))


def test_a_malformed_cid_is_invalid_cid() -> None:
    with pytest.raises(InvalidCID):
        read_bytes(MemoryBlockStore(), "bafkrei-not-a-cid")


def test_fill_bytes_never_returns_a_partly_filled_object() -> None:
    for n in (10, IN_PLACE_MIN + 10):
        with pytest.raises(ValueError, match="wrote 3 of"):
            fill_bytes(n, lambda view: 3)
        with pytest.raises(RuntimeError, match="filler failed"):
            fill_bytes(n, lambda view: (_ for _ in ()).throw(RuntimeError("filler failed")))
    with pytest.raises(ValueError, match="non-negative"):
        fill_bytes(-1, lambda view: 0)


@pytest.mark.parametrize("n", [sys.maxsize + 1, 2**64 - 1])
def test_fill_bytes_of_more_than_any_buffer_holds_is_a_memory_error(n: int) -> None:
    # A File node may claim 2^63 bytes or more; CPython's C size type wrapped negative (SystemError).
    with pytest.raises(MemoryError, match=str(n)):
        fill_bytes(n, lambda view: 0)


@pytest.mark.parametrize("n", [0, 1, 2, IN_PLACE_MIN - 1, IN_PLACE_MIN, IN_PLACE_MIN * 3 + 7])
def test_fill_bytes_equals_a_copied_bytearray_and_behaves_as_bytes(n: int) -> None:
    expected = pattern(n)

    def fill(view: memoryview) -> int:
        view[:] = expected
        return n

    made = fill_bytes(n, fill)
    assert type(made) is bytes and made == expected == bytes(bytearray(expected))
    assert hash(made) == hash(expected) and {made: 1}[expected] == 1
    assert made[1:3] == expected[1:3] and made.hex() == expected.hex()


# ---- same answers as iter_file


def _both_stores(tmp_path: Path) -> list[MemoryBlockStore | FileBlockStore]:
    return [MemoryBlockStore(), FileBlockStore(tmp_path / "blocks")]


@pytest.fixture(scope="module")
def shared_stores(tmp_path_factory: pytest.TempPathFactory) -> list[MemoryBlockStore | FileBlockStore]:
    """One store of each kind for every example (equal chunks dedupe, so examples stay cheap)."""
    return _both_stores(tmp_path_factory.mktemp("fileread"))


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(0, 6000),
    offset=st.integers(0, 6500),
    length=st.one_of(st.none(), st.integers(0, 6500)),
    chunk=st.sampled_from([7, 100, 1000, 4096]),
    width=st.sampled_from([2, 3, 174]),
)
def test_read_bytes_and_read_into_give_what_iter_file_gives(
    shared_stores: list[MemoryBlockStore | FileBlockStore],
    size: int,
    offset: int,
    length: int | None,
    chunk: int,
    width: int,
) -> None:
    data = pattern(size)
    for store in shared_stores:
        with store.batch():
            cid = write_file(store.put, data, chunk_size=chunk, width=width).cid
        expected = b"".join(iter_file(store.get, cid, offset, length))
        assert expected == data[offset : None if length is None else offset + length]
        assert read_bytes(store, cid, offset, length) == expected
        window = bytearray(7 if length is None else length)
        got = read_into(store, cid, window, offset)
        assert window[:got] == data[offset : offset + len(window)]


def test_a_whole_file_read_is_the_file_and_read_range_is_its_slice(tmp_path: Path) -> None:
    data = pattern(1_000_000)
    for store in _both_stores(tmp_path):
        with store.batch():
            cid = write_file(store.put, data, chunk_size=4096, width=5).cid
        assert read_file(store, cid) == data
        assert read_range(store, cid, 123_456, 300_000) == data[123_456:423_456]
        assert read_range(store, cid, 999_990, 100) == data[999_990:]


def test_file_nodes_that_carry_their_own_data_are_read(tmp_path: Path) -> None:
    from kuro_fs.dagpb import PBLink, PBNode, encode

    store = FileBlockStore(tmp_path)
    leaf = store.put(b"tail-bytes")
    meta = UnixFSData(NodeType.FILE, data=b"head-", filesize=15, blocksizes=(10,))
    node = store.put(encode(PBNode((PBLink.to(leaf, "", 10),), encode_data(meta))), "dag-pb")
    assert read_bytes(store, node) == b"head-tail-bytes"
    assert read_bytes(store, node, 3, 5) == b"d-tai"


# ---- errors, and no memo


def test_a_missing_leaf_is_missing_block_naming_it(tmp_path: Path) -> None:
    data = pattern(50_000)
    for store in _both_stores(tmp_path):
        cid = write_file(store.put, data, chunk_size=1000).cid
        gone = raw_cid(data[7000:8000])
        store.delete(gone)
        with pytest.raises(MissingBlock) as info:
            read_bytes(store, cid)
        assert info.value.cid == gone
        assert read_bytes(store, cid, 0, 7000) == data[:7000]  # a range that avoids it still reads


def test_a_leaf_longer_than_its_parent_says_is_a_dag_pb_error(tmp_path: Path) -> None:
    from kuro_fs.dagpb import PBLink, PBNode, encode

    store = FileBlockStore(tmp_path)
    leaf = store.put(b"eleven char")
    meta = UnixFSData(NodeType.FILE, filesize=5, blocksizes=(5,))
    node = store.put(encode(PBNode((PBLink.to(leaf, "", 11),), encode_data(meta))), "dag-pb")
    with pytest.raises(DagPbError, match="11 bytes, its parent says 5"):
        read_bytes(store, node)


def test_bytes_changed_on_disk_after_a_good_read_are_refused_on_the_next_read(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path)
    data = pattern(PARALLEL_READ_BYTES + 300_000)  # the threaded path
    cid = write_file(store.put, data).cid
    assert read_bytes(store, cid) == data
    leaf = raw_cid(data[262144 : 2 * 262144])
    damaged = bytearray(data[262144 : 2 * 262144])
    damaged[100] ^= 1
    _leaf_path(store, leaf).write_bytes(bytes(damaged))  # same size, same name: only the hash can tell
    with pytest.raises(CorruptBlock) as info:
        read_bytes(store, cid)
    assert info.value.cid == leaf
    with pytest.raises(CorruptBlock):
        read_range(store, cid, 262144 + 50, 10)


def test_the_threaded_read_raises_the_earliest_failure(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path)
    data = pattern(PARALLEL_READ_BYTES * 2)
    cid = write_file(store.put, data).cid
    first, late = raw_cid(data[262144 * 3 : 262144 * 4]), raw_cid(data[-262144:])
    _leaf_path(store, late).write_bytes(b"x" * 262144)
    store.delete(first)
    with pytest.raises(MissingBlock) as info:
        read_bytes(store, cid)
    assert info.value.cid == first


def test_a_read_needs_no_free_pool_thread_the_caller_reads_what_no_helper_takes(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path)
    data = pattern(PARALLEL_READ_BYTES * 2)
    cid = write_file(store.put, data).cid
    release, started = threading.Event(), threading.Semaphore(0)

    def occupy() -> None:
        started.release()
        release.wait(120)

    blockers = [filestore._read_pool().submit(occupy) for _ in range(max(READ_HELPERS, 1))]
    try:
        for _ in blockers:
            started.acquire()
        assert read_bytes(store, cid) == data
        assert not any(b.done() for b in blockers)  # the read did not wait for the busy pool to drain
    finally:
        release.set()
    for b in blockers:
        b.result()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_reads_through_its_own_pool(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path)
    data = pattern(PARALLEL_READ_BYTES * 2)
    cid = write_file(store.put, data).cid
    assert read_bytes(store, cid) == data  # the parent's pool exists now
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the threaded read gives the same bytes
        try:
            os._exit(0 if read_bytes(store, cid) == data and (filestore._POOL is not None) == (READ_HELPERS > 0) else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_get_into_reads_a_whole_block_in_place_and_a_range_through_a_check(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path)
    cid = store.put(b"0123456789")
    whole = bytearray(10)
    assert store.get_into(cid, memoryview(whole)) == 10 and whole == b"0123456789"
    part = bytearray(4)
    assert store.get_into(cid, memoryview(part), 3) == 10 and part == b"3456"
    long = bytearray(15)
    assert store.get_into(cid, memoryview(long)) == 10 and long[:10] == b"0123456789"
    assert store.get_into(raw_cid(b"absent"), memoryview(bytearray(3))) is None
    _leaf_path(store, cid).write_bytes(b"0123456780")
    with pytest.raises(CorruptBlock):
        store.get_into(cid, memoryview(whole))
    with pytest.raises(CorruptBlock):
        store.get_into(cid, memoryview(part), 3)


def test_a_block_staged_in_a_batch_is_readable_in_place_within_it(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path)
    data = pattern(PARALLEL_READ_BYTES + 1000)
    with store.batch():
        cid = write_file(store.put, data).cid
        assert read_bytes(store, cid) == data  # worker threads read in a copy of this context


# ---- memory: the file is held once


def test_fs_read_holds_the_file_once(tmp_path: Path) -> None:
    size = 16 << 20
    store = FileBlockStore(tmp_path)
    cid = write_file(store.put, pattern(1 << 20) * 16).cid
    fs = Fs.empty(store).link("big.bin", cid).fs
    tracemalloc.start()
    try:
        result = fs.read("big.bin")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok and len(result.value) == size and type(result.value) is bytes
    assert peak <= 1.1 * size, f"Fs.read of {size} bytes peaked at {peak} traced bytes"


@pytest.mark.parametrize("many", [False, True], ids=["get", "get_many_into"])
def test_a_read_of_many_small_leaves_holds_a_bounded_plan_not_one_entry_per_leaf(tmp_path: Path, many: bool) -> None:
    # A diamond of 3 blocks (every node links one child 174 times) is a file of 30 276 one-byte leaves.
    # The read planned every leaf before reading any (a tuple and a memoryview each, ~300 bytes): 10 MB
    # for these 30 KB; a 4-block diamond of 5.3 MB took 2.6 GB, a 900 MB one (within the Fs budget) ~450 GB.
    store = FileBlockStore(tmp_path) if many else MemoryBlockStore()
    cid, size = diamond_file(store, 2, leaf=1)  # type: ignore[arg-type]
    tracemalloc.start()
    try:
        data = read_file(store, cid)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data == bytes(size)
    assert peak < 2 << 20, f"a read of {size} bytes peaked at {peak} traced bytes"
    out = bytearray(size - 1)
    assert read_into(store, cid, out, 1) == size - 1 and out == bytes(size - 1)
