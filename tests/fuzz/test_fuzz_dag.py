"""Fuzzing reads over hostile DAGs: a block-missing denial or a typed KuroFsError, never a silent wrong answer."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import BlockStore, MemoryBlockStore
from kuro_fs.cid import cid_for, parse
from kuro_fs.dagcbor import Link, decode, encode
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.dircache import DirCache
from kuro_fs.errors import KuroFsError
from kuro_fs.fileread import read_file, read_range
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs, FsResult
from kuro_fs.fsdir import DIR_TYPE, DirLayout, Entry, write_dir
from kuro_fs.hamt import Shape
from kuro_fs.unixfs import NodeType, UnixFSData, encode_data, write_file

_BASE = MemoryBlockStore()
_GOOD = write_file(_BASE.put, bytes(range(256)) * 4, chunk_size=100, width=3)  # a real multi-level file
_LEAF = _BASE.put(b"leaf-bytes", "raw")
_EMPTY_DIR = _BASE.put(encode({"entries": {}, "type": DIR_TYPE, "version": 1}), "dag-cbor")
_MISSING_RAW = cid_for(b"not stored", "raw")
_MISSING_PB = cid_for(b"\x0a\x02\x08\x02", "dag-pb")
_LINK_TARGETS = [_GOOD.cid, _LEAF, _EMPTY_DIR, _MISSING_RAW, _MISSING_PB]

_sizes = st.integers(0, 3000)
_data_messages = st.builds(
    UnixFSData,
    st.sampled_from(list(NodeType)),
    st.none() | st.binary(max_size=40),
    st.none() | _sizes,
    st.lists(_sizes, max_size=4).map(tuple),
)
_pb_links = st.builds(
    lambda cid, name, tsize: PBLink.to(cid, name, tsize),
    st.sampled_from(_LINK_TARGETS),
    st.sampled_from(["", "a"]),
    st.integers(0, 5000),
)
_pb_nodes = st.builds(
    lambda links, data: encode_pb(PBNode(tuple(links), data)),
    st.lists(_pb_links, max_size=4),
    st.none() | _data_messages.map(encode_data) | st.binary(max_size=20),
)


def _mutated(block: bytes, flips: list[tuple[int, int]]) -> bytes:
    buf = bytearray(block)
    for at, value in flips:
        if buf:
            buf[at % len(buf)] ^= value
    return bytes(buf)


_flips = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), min_size=1, max_size=3)
_good_root_mutated = st.builds(lambda f: _mutated(_BASE.get(_GOOD.cid) or b"", f), _flips)
_hostile_pb = st.one_of(_pb_nodes, _good_root_mutated, st.binary(max_size=60))


def _store() -> MemoryBlockStore:
    store = MemoryBlockStore()
    store._blocks.update(_BASE._blocks)
    return store


def _fs_with(store: BlockStore, file_cid: str, size: int) -> Fs:
    body = {"entries": {"f": {"cid": Link(file_cid), "size": size}}, "type": DIR_TYPE, "version": 1}
    return Fs(store, store.put(encode(body), "dag-cbor"))


def _truth(store: MemoryBlockStore, cid: str) -> bytes | None:
    try:
        return read_file(store, cid)
    except KuroFsError:
        return None


def _check_reads(fs: Fs, file_cid: str, size: int, offset: int, length: int) -> None:
    truth = _truth(fs.store, file_cid)  # type: ignore[arg-type]
    results: list[FsResult] = [fs.read("f"), fs.read_range("f", offset, length), fs.stat("f"), fs.ls("."), fs.walk()]
    for result in results:
        assert isinstance(result, FsResult)
        if not result.ok:
            assert result.receipt["kuro.fs/reason"] == "block-missing", result.receipt
    whole, part = results[0], results[1]
    if whole.ok:
        assert truth is not None and whole.value == truth and len(truth) == size
    if part.ok:
        assert len(part.value) == max(0, min(length, size - offset)), "read_range answered past the named size"
        if truth is not None:  # a broken part elsewhere in the file need not stop a range that avoids it
            assert len(truth) == size, "read_range answered from a file whose size is a lie"
            assert part.value == truth[offset : offset + length]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_hostile_pb, st.integers(0, 3000), st.integers(0, 1200), st.integers(0, 1200))
def test_reading_a_hostile_dag_pb_file_is_block_missing_or_the_true_bytes(
    block: bytes, size: int, offset: int, length: int
) -> None:
    store = _store()
    cid = store.put(block, "dag-pb")
    _check_reads(_fs_with(store, cid, size), cid, size, offset, length)
    try:  # the store-level readers: bytes or a typed error, nothing else
        read_file(store, cid)
    except KuroFsError:
        pass
    try:
        read_range(store, cid, offset, length)
    except KuroFsError:
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 3000), st.integers(0, 1200), st.integers(0, 1200))
def test_a_directory_entry_that_lies_about_a_good_files_size_is_never_answered_silently(
    size: int, offset: int, length: int
) -> None:
    store = _store()
    _check_reads(_fs_with(store, _GOOD.cid, size), _GOOD.cid, size, offset, length)


_cbor_leaf = st.one_of(
    st.integers(-5, 5000),
    st.text(max_size=6),
    st.binary(max_size=6),
    st.none(),
    st.booleans(),
    st.sampled_from([Link(c) for c in _LINK_TARGETS]),
    st.just(DIR_TYPE),
)
_cbor_values = st.recursive(
    _cbor_leaf,
    lambda c: (
        st.lists(c, max_size=3)
        | st.dictionaries(
            st.sampled_from(["entries", "type", "version", "cid", "size", "f", "..", "a/b", ""]), c, max_size=4
        )
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cbor_values)
def test_a_directory_block_of_any_shape_is_block_missing_or_a_well_formed_listing(value: Any) -> None:
    store = _store()
    try:
        inner = store.put(encode(value), "dag-cbor")
    except ValueError:
        return
    body = {"entries": {"d": {"cid": Link(inner), "size": 0}}, "type": DIR_TYPE, "version": 1}
    fs = Fs(store, store.put(encode(body), "dag-cbor"))
    for result in (fs.ls("d"), fs.walk(), fs.stat("d/f"), fs.read("d/f"), fs.write("d/g", b"x"), fs.mkdir("d/h")):
        assert isinstance(result, FsResult)
        if not result.ok:
            assert result.receipt["kuro.fs/reason"] in {"block-missing", "not-found", "not-a-directory", "path-blocked"}
    if fs.ls("d").ok:
        for item in fs.ls("d").value:
            assert item["cid"] in _LINK_TARGETS and isinstance(item["size"], int) and item["size"] >= 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 1 << 16), st.integers(1, 255), st.integers(0, 1200), st.integers(0, 1200))
def test_a_corrupt_block_in_a_file_store_is_block_missing(at: int, flip: int, offset: int, length: int) -> None:
    whole = bytes(range(256)) * 4
    with tempfile.TemporaryDirectory() as tmp, FileBlockStore(Path(tmp) / "blocks") as store:
        for cid, block in _BASE._blocks.items():
            store.put(block, parse(cid).codec)
        fs = _fs_with(store, _GOOD.cid, len(whole))
        files = sorted(p for p in (Path(tmp) / "blocks").rglob("*") if p.is_file() and p.name.startswith("b"))
        victim = files[at % len(files)]
        data = bytearray(victim.read_bytes())
        data[at % len(data)] ^= flip
        victim.write_bytes(bytes(data))
        for result in (fs.read("f"), fs.read_range("f", offset, length), fs.ls("."), fs.walk(), fs.stat("f")):
            assert isinstance(result, FsResult)
            if result.ok and result.receipt["kuro.fs/op"] == "read":
                assert result.value == whole
            if result.ok and result.receipt["kuro.fs/op"] == "read-range":
                assert result.value == whole[offset : offset + length]
            if not result.ok:
                assert result.receipt["kuro.fs/reason"] == "block-missing"


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(st.integers(-5, 1 << 70), st.floats(), st.text(max_size=3), st.none(), st.booleans()),
    st.one_of(st.integers(-5, 1 << 70), st.floats(), st.text(max_size=3), st.none(), st.booleans()),
)
def test_store_level_read_range_refuses_a_bad_offset_or_length_with_a_value_error(offset: Any, length: Any) -> None:
    store = _store()
    try:
        got = read_range(store, _GOOD.cid, offset, length)
    except ValueError:
        ok = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (offset, length))
        assert not ok, "a good range was refused"
        return
    assert got == read_file(store, _GOOD.cid)[offset : offset + length]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_hostile_pb.map(lambda b: (b, "dag-pb")), _cbor_values.map(lambda v: (v, "dag-cbor"))))
def test_linking_a_hostile_block_is_a_receipt_and_a_refusal_stores_nothing(item: tuple[Any, str]) -> None:
    value, codec = item
    store = _store()
    try:
        cid = store.put(value if codec == "dag-pb" else encode(value), codec)
    except ValueError:
        return
    fs = Fs(store, _EMPTY_DIR)
    before = dict(store._blocks)
    result = fs.link("x/y", cid)
    assert isinstance(result, FsResult)
    if not result.ok:
        assert result.receipt["kuro.fs/reason"] in {"block-missing", "not-a-file", "not-a-directory"}
        assert store._blocks == before and result.fs is fs
    else:
        for read in (result.fs.read("x/y"), result.fs.ls("x/y"), result.fs.walk(), result.fs.stat("x/y")):
            assert isinstance(read, FsResult)


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=1, max_size=300), st.integers(1, 100))
def test_file_bytes_stored_under_a_dag_cbor_cid_are_never_read_as_a_file(data: bytes, chunk: int) -> None:
    store = MemoryBlockStore()
    root = write_file(store.put, data, chunk_size=chunk)
    if not root.cid.startswith("bafybei"):
        return  # one raw leaf: no dag-pb node to disguise
    disguised = store.put(store.get(root.cid) or b"", "dag-cbor")
    parent = store.put(
        encode_pb(
            PBNode(
                (PBLink.to(disguised, "", 0),), encode_data(UnixFSData(NodeType.FILE, None, len(data), (len(data),)))
            )
        ),
        "dag-pb",
    )
    for cid in (disguised, parent):
        try:
            got = read_file(store, cid)
        except KuroFsError:
            continue
        raise AssertionError(f"{cid} read as a file: {got[:20]!r}")
    fs = _fs_with(store, parent, len(data))
    assert fs.read("f").receipt["kuro.fs/reason"] == "block-missing"
    assert fs.read_range("f", 0, 1).receipt["kuro.fs/reason"] == "block-missing"


# ---- hostile sharded directories: a lookup and a listing never disagree


_SHARD_LAYOUT = DirLayout(max_flat=3, shape=Shape(3, 1))
_SHARD_NAMES = [f"n{i}" for i in range(30)]
_SHARD = write_dir(_BASE, {n: Entry(_LEAF, 10) for n in _SHARD_NAMES}, _SHARD_LAYOUT)
_SHARD_VALUE = decode(_BASE.get(_SHARD) or b"")
_SHARD_LINKS = [i for i, e in enumerate(_SHARD_VALUE["shard"]["hamt"][1]) if isinstance(e, Link)]


def _hostile_shard(store: MemoryBlockStore, which: int, flips: list[tuple[int, int]]) -> str:
    # Flip bytes in the sharded directory block itself (which < 0) or in one child node, which the
    # directory then links in place of the good one (so the hostile bytes are reachable).
    if which < 0 or not _SHARD_LINKS:
        return store.put(_mutated(_BASE.get(_SHARD) or b"", flips), "dag-cbor")
    value = decode(_BASE.get(_SHARD) or b"")
    at = _SHARD_LINKS[which % len(_SHARD_LINKS)]
    child = _mutated(_BASE.get(value["shard"]["hamt"][1][at].cid) or b"", flips)
    value["shard"]["hamt"][1][at] = Link(store.put(child, "dag-cbor"))
    return store.put(encode(value), "dag-cbor")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(-3, 8), flips=_flips)
def test_a_hostile_sharded_directory_never_lists_a_name_a_lookup_cannot_find(
    which: int, flips: list[tuple[int, int]]
) -> None:
    store = _store()
    d = _hostile_shard(store, which, flips)
    root = store.put(
        encode({"entries": {"d": {"cid": Link(d), "size": 0}}, "type": DIR_TYPE, "version": 1}), "dag-cbor"
    )
    fs = Fs(store, root, layout=_SHARD_LAYOUT, cache=DirCache())
    listing = fs.ls("d")
    if listing.ok:
        names = [e["name"] for e in listing.value]
        assert len(names) == len(set(names))
        for e in listing.value:
            stat = fs.stat(f"d/{e['name']}")
            assert stat.ok and stat.value["cid"] == e["cid"], (e, stat.receipt)
        assert [x["path"] for x in fs.walk("d").value] == [f"d/{n}" for n in names]
    else:
        assert listing.receipt["kuro.fs/reason"] == "block-missing"
    before = store.cids()
    for result in [fs.write("d/n7", b"new"), fs.rm("d/n3"), fs.read("d/n5"), fs.mkdir("d/x")]:
        assert result.ok or result.receipt["kuro.fs/reason"] in ("block-missing", "not-found")
        if not result.ok:
            assert result.fs.root == root
    assert all(cid in store.cids() for cid in before)
