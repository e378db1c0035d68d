"""LeafReader: a stored file read in pieces gives its bytes, fetching and verifying each leaf once.

A run of reads smaller than a leaf (a C program's 64 KiB ``read()``\\s of 256 KiB leaves) used to fetch
and re-verify the whole leaf for every read: 64 KiB reads of a 16 MiB file made 259 block gets
for its 64 leaves. These tests count the fetches through the overlay a WASI guest reads with.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.errors import CorruptBlock, DagPbError, MissingBlock
from kuro_fs.filestore import FileBlockStore, ReadRequest
from kuro_fs.fs import Fs
from kuro_fs.leafread import LeafReader
from kuro_fs.overlay import Errno, Overlay
from kuro_fs.unixfs import NodeType, UnixFSData, encode_data, iter_leaves, write_file

KiB = 1 << 10
MiB = 1 << 20


class CountingMemory(MemoryBlockStore):
    """A memory store (``get`` only) that counts the gets of each CID."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: Counter[str] = Counter()

    def get(self, cid: str) -> bytes | None:
        self.gets[cid] += 1
        return super().get(cid)


class CountingMany(CountingMemory):
    """The same with ``get_many_into`` (FileBlockStore's contract, served in order), counting each call's bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def get_many_into(self, requests: Sequence[ReadRequest]) -> list[int]:
        self.calls.append(sum(len(out) for _, out, _ in requests))
        sizes = []
        for cid, out, offset in requests:
            block = self.get(cid)
            if block is None:
                raise MissingBlock(cid)
            out[:] = block[offset : offset + len(out)]
            sizes.append(len(block))
        return sizes


class CountingDisk(FileBlockStore):
    """A FileBlockStore (verifying every block it reads) that counts the block reads of each CID."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gets: Counter[str] = Counter()

    def get(self, cid: str) -> bytes | None:
        self.gets[cid] += 1
        return super().get(cid)

    def get_into(self, cid: str, out: memoryview, offset: int = 0) -> int | None:
        self.gets[cid] += 1
        return super().get_into(cid, out, offset)


def stored(store: MemoryBlockStore | FileBlockStore, data: bytes, chunk: int = 256 * KiB) -> LeafReader:
    root = write_file(store.put, data, chunk_size=chunk, width=174)
    reader = LeafReader.of(store, root.cid, root.size)
    assert reader is not None
    return reader


def reader_cid(store: MemoryBlockStore | FileBlockStore, data: bytes) -> str:
    """The root CID ``stored`` gave ``data`` (the same layout again: nothing new is stored)."""
    return write_file(store.put, data, chunk_size=256 * KiB, width=174).cid


def read(reader: LeafReader, start: int, length: int) -> bytes:
    out = bytearray(length)
    reader.read_into(start, memoryview(out))
    return bytes(out)


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(min_size=1, max_size=300),
    chunk=st.integers(1, 40),
    many=st.booleans(),
    reads=st.lists(st.tuples(st.integers(0, 300), st.integers(0, 120)), max_size=12),
    sequential=st.integers(1, 50),
)
def test_any_reads_in_any_order_give_the_files_bytes(
    data: bytes, chunk: int, many: bool, reads: list[tuple[int, int]], sequential: int
) -> None:
    reader = stored(CountingMany() if many else CountingMemory(), data, chunk)
    for start, length in reads:
        start = min(start, len(data))
        length = min(length, len(data) - start)
        assert read(reader, start, length) == data[start : start + length]
    pieces = [read(reader, at, min(sequential, len(data) - at)) for at in range(0, len(data), sequential)]
    assert b"".join(pieces) == data


@pytest.mark.parametrize("store", [CountingMemory, CountingMany], ids=["get", "get_many_into"])
def test_64k_reads_in_order_fetch_each_leaf_once(store: type[CountingMemory]) -> None:
    data = os.urandom(16 * MiB)
    s = store()
    reader = stored(s, data)
    s.gets.clear()
    got = b"".join(read(reader, at, 64 * KiB) for at in range(0, len(data), 64 * KiB))
    assert got == data and reader.held == 256 * KiB
    assert len(s.gets) == 64 and set(s.gets.values()) == {1}


def test_1m_reads_go_straight_into_the_callers_buffer_each_leaf_once() -> None:
    s = CountingMany()
    data = os.urandom(8 * MiB)
    reader = stored(s, data)
    s.gets.clear()
    assert b"".join(read(reader, at, 1 * MiB) for at in range(0, len(data), 1 * MiB)) == data
    assert s.calls == [1 * MiB] * 8 and len(s.gets) == 32 and set(s.gets.values()) == {1}
    assert reader.held == 0  # no leaf was taken in part: none is kept


def test_a_read_that_jumps_fetches_only_the_leaves_it_needs() -> None:
    s = CountingMany()
    root = write_file(s.put, os.urandom(16 * MiB), chunk_size=256 * KiB, width=174)
    reader = LeafReader.of(s, root.cid, root.size)
    assert reader is not None
    wanted = {cid for offset, cid, _ in iter_leaves(s.get, root.cid) if 10 * MiB <= offset < 10 * MiB + 300 * KiB}
    read(reader, 0, 64 * KiB)
    s.gets.clear()
    read(reader, 10 * MiB + 100, 300 * KiB)
    assert len(wanted) == 2 and s.gets == Counter(dict.fromkeys(wanted, 1))


@pytest.mark.parametrize("call", ["read", "read_into"])
def test_64k_reads_through_the_overlay_of_a_disk_store_verify_each_leaf_once(tmp_path: Path, call: str) -> None:
    """The regression: a WASI program's 64 KiB reads of a 16 MiB file on the default (disk) store."""
    data = os.urandom(16 * MiB)
    with CountingDisk(tmp_path / "blocks") as store:
        fs = Fs.empty(store).write("big", data).fs
        ov = Overlay(fs)
        handle = ov.open("big", ov.root)
        assert not isinstance(handle, Errno)
        store.gets.clear()
        out = bytearray(64 * KiB)
        pieces = []
        for at in range(0, len(data), len(out)):
            if call == "read":
                piece = ov.read(handle, at, len(out))
                assert isinstance(piece, bytes)
                pieces.append(piece)
            else:
                assert ov.read_into(handle, at, out) == len(out)
                pieces.append(bytes(out))
        assert b"".join(pieces) == data
        leaves = [cid for cid in store.gets if cid.startswith("bafkrei")]  # (and once the File node: the leaf list)
        assert len(leaves) == 64 and set(store.gets.values()) == {1}
        assert ov.read_into(handle, len(data), out) == 0 and ov.read(handle, len(data), 1) == b""


def test_a_corrupt_leaf_is_refused_and_not_kept_in_the_window(tmp_path: Path) -> None:
    data = os.urandom(2 * MiB)
    with CountingDisk(tmp_path / "blocks") as store:
        reader = stored(store, data)
        victim = next(cid for offset, cid, _ in iter_leaves(store.get, reader_cid(store, data)) if offset == 256 * KiB)
        path = next((tmp_path / "blocks").rglob(victim))
        good = path.read_bytes()
        path.chmod(0o644)
        path.write_bytes(b"x" + good[1:])
        assert read(reader, 0, 64 * KiB) == data[: 64 * KiB]
        with pytest.raises(CorruptBlock):
            read(reader, 64 * KiB, 256 * KiB)  # reaches into the corrupt leaf
        with pytest.raises(CorruptBlock):
            read(reader, 300 * KiB, 10)  # asked again: fetched (and refused) again, never served unverified
        path.write_bytes(good)
        assert read(reader, 300 * KiB, 10) == data[300 * KiB : 300 * KiB + 10]


def test_the_overlay_answers_io_for_a_missing_or_corrupt_leaf(tmp_path: Path) -> None:
    with CountingDisk(tmp_path / "blocks") as store:
        fs = Fs.empty(store).write("big", os.urandom(1 * MiB)).fs
        ov = Overlay(fs)
        handle = ov.open("big", ov.root)
        assert not isinstance(handle, Errno)
        third = [cid for offset, cid, _ in iter_leaves(store.get, fs.stat("big").value["cid"]) if offset == 512 * KiB]
        store.delete(third[0])
        assert ov.read_into(handle, 0, bytearray(64 * KiB)) == 64 * KiB
        assert ov.read_into(handle, 512 * KiB, bytearray(10)) == Errno.IO


def test_a_leaf_of_another_length_than_its_parent_says_is_a_dag_error() -> None:
    store = MemoryBlockStore()
    a, b = store.put(b"abcd", "raw"), store.put(b"xyz", "raw")
    reader = LeafReader(store, [0, 4], [a, b], 8)  # claims the second leaf holds 4 bytes
    assert read(reader, 0, 4) == b"abcd"
    with pytest.raises(DagPbError, match="is 3 bytes, its parent says 4"):
        read(reader, 4, 4)
    with pytest.raises(ValueError, match="not within"):
        read(reader, 6, 4)


def test_a_leaf_that_claims_a_terabyte_is_refused_without_a_buffer_of_that_size(tmp_path: Path) -> None:
    # A File node may say its 3-byte leaf holds 1 TiB. A read of a piece of it used to allocate a window
    # buffer of the claimed length first (MemoryError, a host traceback; a 2 GiB claim took 2 GB of RSS).
    with FileBlockStore(tmp_path / "blocks") as store:
        leaf = store.put(b"abc", "raw")
        claim = 1 << 40
        data = encode_data(UnixFSData(NodeType.FILE, filesize=claim + 3, blocksizes=(claim, 3)))
        root = store.put(encode_pb(PBNode((PBLink.to(leaf, "", 3), PBLink.to(leaf, "", 3)), data)), "dag-pb")
        reader = LeafReader.of(store, root, claim + 3)
        assert reader is not None
        with pytest.raises(DagPbError, match="is 3 bytes, its parent says 1099511627776"):
            read(reader, claim // 2, 100)
        ov = Overlay(Fs.empty(store).link("f", root).fs)
        handle = ov.open("f")
        assert not isinstance(handle, Errno)
        assert ov.read_into(handle, claim // 2, bytearray(100)) == Errno.IO
        assert ov.read(handle, claim + 1, 2) == b"bc"  # the honest leaf still reads
