"""UnixFS: the Data message, the balanced layout (as the JS importer builds it), range reads, directories."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import cid_for, raw_cid
from kuro_fs.dagpb import PBLink, PBNode, decode, encode
from kuro_fs.errors import DagPbError
from kuro_fs.filefill import FILE_NODES
from kuro_fs.fileread import read_file, read_range
from kuro_fs.fs import Fs
from kuro_fs.unixfs import (
    MAX_FILE_DEPTH,
    BalancedLayout,
    MissingBlock,
    NodeType,
    UnixFSData,
    chunks,
    decode_data,
    directory_node,
    encode_data,
    file_root_info,
    iter_leaves,
    write_file,
)

VECTORS: dict[str, Any] = json.loads((Path(__file__).parent.parent / "vectors" / "unixfs.json").read_text())


class CountingStore(MemoryBlockStore):
    """A memory store that records every CID fetched."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[str] = []

    def get(self, cid: str) -> bytes | None:
        self.fetched.append(cid)
        return super().get(cid)


# ---- bad input first


@pytest.mark.parametrize(
    "hexbytes, rule",
    [
        ("", "Type is missing"),
        ("1800", "Type is missing"),
        ("0809", "9 is not a valid NodeType"),
        ("18000802", "out of order"),
        ("0802 0802".replace(" ", ""), "out of order"),
        ("4800", "unknown"),
        ("0a00", "wire type"),
        ("0802 1205 00".replace(" ", ""), "past the end"),
        ("08", "truncated"),
    ],
)
def test_malformed_data_messages_are_refused(hexbytes: str, rule: str) -> None:
    with pytest.raises(DagPbError, match=rule):
        decode_data(bytes.fromhex(hexbytes))


def test_a_layout_needs_a_width_of_two_and_at_least_one_leaf() -> None:
    with pytest.raises(ValueError, match="width"):
        BalancedLayout(MemoryBlockStore().put, 1)
    with pytest.raises(ValueError, match="at least one"):
        BalancedLayout(MemoryBlockStore().put).finish()


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        list(chunks(b"abc", 0))


def test_negative_ranges_are_refused() -> None:
    store = MemoryBlockStore()
    cid = write_file(store.put, b"abc").cid
    with pytest.raises(ValueError, match="non-negative"):
        read_range(store, cid, -1, 2)
    with pytest.raises(ValueError, match="non-negative"):
        read_range(store, cid, 0, -2)


def test_a_missing_leaf_raises_missingblock_naming_it() -> None:
    store = MemoryBlockStore()
    root = write_file(store.put, bytes(range(256)) * 20, chunk_size=1024, width=4)
    leaf = decode(store.get(root.cid) or b"").links[0].cid
    store.delete(leaf)
    with pytest.raises(MissingBlock) as info:
        read_file(store, root.cid)
    assert info.value.cid == leaf


def test_a_node_whose_blocksizes_do_not_match_its_links_is_corrupt() -> None:
    store = MemoryBlockStore()
    leaf = store.put(b"abc")
    data = encode_data(UnixFSData(NodeType.FILE, filesize=6, blocksizes=(3, 3)))
    bad = store.put(encode(PBNode((PBLink.to(leaf, "", 3),), data)), "dag-pb")
    with pytest.raises(DagPbError, match="1 links but 2 blocksizes"):
        read_file(store, bad)


def test_a_leaf_shorter_than_its_blocksize_is_corrupt() -> None:
    store = MemoryBlockStore()
    leaf = store.put(b"abc")
    data = encode_data(UnixFSData(NodeType.FILE, filesize=4, blocksizes=(4,)))
    bad = store.put(encode(PBNode((PBLink.to(leaf, "", 3),), data)), "dag-pb")
    with pytest.raises(DagPbError, match="parent says 4"):
        read_file(store, bad)


def _chain(store: MemoryBlockStore, levels: int) -> str:
    # A hostile file DAG: ``levels`` one-link File nodes stacked over one leaf.
    cid = store.put(b"abc")
    tsize = 3
    for _ in range(levels):
        block = encode(
            PBNode((PBLink.to(cid, "", tsize),), encode_data(UnixFSData(NodeType.FILE, filesize=3, blocksizes=(3,))))
        )
        cid, tsize = store.put(block, "dag-pb"), tsize + len(block)
    return cid


@settings(max_examples=50, deadline=None)
@given(size=st.integers(0, 200), chunk=st.integers(1, 9), width=st.integers(2, 4))
def test_iter_leaves_lists_every_raw_leaf_with_its_offset_and_size(size: int, chunk: int, width: int) -> None:
    store = MemoryBlockStore()
    data = bytes(i % 251 for i in range(size))
    root = write_file(store.put, data, chunk_size=chunk, width=width)
    leaves = list(iter_leaves(store.get, root.cid))
    starts = range(0, max(size, 1), chunk)
    assert [(o, n) for o, _, n in leaves] == [(o, min(chunk, size - o)) for o in starts]
    assert all(store.get(cid) == data[o : o + n] for o, cid, n in leaves)


def test_iter_leaves_refuses_a_missing_node_and_a_hostile_depth() -> None:
    store = MemoryBlockStore()
    assert [n for _, _, n in iter_leaves(store.get, _chain(store, MAX_FILE_DEPTH))] == [3]
    with pytest.raises(DagPbError, match="deeper than"):
        list(iter_leaves(store.get, _chain(store, 1500)))
    with pytest.raises(MissingBlock):
        list(iter_leaves(store.get, cid_for(b"absent", "dag-pb")))


def test_a_file_tree_deeper_than_the_limit_is_malformed_not_a_stack_overflow() -> None:
    store = MemoryBlockStore()
    assert read_file(store, _chain(store, MAX_FILE_DEPTH)) == b"abc"
    with pytest.raises(DagPbError, match="deeper than"):
        read_file(store, _chain(store, MAX_FILE_DEPTH + 1))
    with pytest.raises(DagPbError, match="deeper than"):
        read_range(store, _chain(store, 1500), 1, 1)  # far past Python's recursion limit


def test_a_directory_is_not_read_as_a_file() -> None:
    store = MemoryBlockStore()
    block, _ = directory_node([])
    with pytest.raises(DagPbError, match="directory, not a file"):
        read_file(store, store.put(block, "dag-pb"))


def test_duplicate_directory_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        directory_node([("a", raw_cid(b""), 0), ("a", raw_cid(b"x"), 1)])


def test_a_flat_directory_node_is_built_at_any_size_the_shard_decision_is_elsewhere() -> None:
    entries = [(f"{i:04d}" + "n" * 251, raw_cid(b""), 0) for i in range(901)]  # 901 * (255 + 36) > 262144
    block, _ = directory_node(entries)
    assert len(decode(block).links) == 901


# ---- the published vectors


@pytest.mark.parametrize("vector", VECTORS["files"], ids=lambda v: v["what"])
def test_file_cids_match_the_published_vectors(vector: dict[str, Any]) -> None:
    store = MemoryBlockStore()
    root = write_file(store.put, bytes(vector["size"]))
    assert root.cid == vector["cid"]
    if "root_bytes" in vector:
        assert len(store.get(root.cid) or b"") == vector["root_bytes"]


@pytest.mark.parametrize("vector", VECTORS["file_nodes_hex"], ids=lambda v: v["what"])
def test_file_node_data_fields_match_the_reference_bytes(vector: dict[str, Any]) -> None:
    sizes = tuple(vector["leaf_sizes"])
    store = MemoryBlockStore()
    layout = BalancedLayout(store.put, 174)
    for i, size in enumerate(sizes):
        layout.add_leaf(store.put(bytes([i]) * size), size)
    data = encode_data(UnixFSData(NodeType.FILE, filesize=sum(sizes), blocksizes=sizes))
    field = encode(PBNode((), data))
    assert field.hex() == vector["data_field_hex"]
    if len(sizes) > 1:
        assert (store.get(layout.finish().cid) or b"").endswith(field)


def test_the_one_link_node_of_width_times_chunk_plus_one_is_52_bytes() -> None:
    store = MemoryBlockStore()
    root = write_file(store.put, bytes(174 * 1024 + 1), chunk_size=1024)
    top = decode(store.get(root.cid) or b"")
    last = store.get(top.links[-1].cid) or b""
    assert len(last) == 52
    assert last.endswith(bytes.fromhex("0a06080218012001"))


class _Recorder:
    def __init__(self) -> None:
        self.nodes: list[PBNode] = []

    def put(self, block: bytes, codec: str) -> str:
        self.nodes.append(decode(block))
        return cid_for(block, codec)


@pytest.mark.parametrize("vector", VECTORS["layouts"], ids=lambda v: str(v["leaves"]))
def test_the_balanced_layout_has_the_published_shape(vector: dict[str, Any]) -> None:
    rec = _Recorder()
    layout = BalancedLayout(rec.put)
    for i in range(vector["leaves"]):
        layout.add_leaf(raw_cid(i.to_bytes(4, "big")), 262144)
    root = layout.finish()
    assert vector["leaves"] + len(rec.nodes) == vector["blocks"]
    assert len(rec.nodes[-1].links) == vector["root_links"]
    assert root.size == vector["leaves"] * 262144


@pytest.mark.parametrize("vector", VECTORS["directories"], ids=lambda v: v["what"])
def test_unixfs_directories_match_the_published_vectors(vector: dict[str, Any]) -> None:
    store = MemoryBlockStore()
    links = []
    for name, text in vector["entries"].items():
        if text is None:
            block, tsize = directory_node([])
            links.append((name.rstrip("/"), store.put(block, "dag-pb"), tsize))
        else:
            froot = write_file(store.put, text.encode())
            links.append((name, froot.cid, froot.tsize))
    block, tsize = directory_node(links)
    assert cid_for(block, "dag-pb") == vector["cid"]
    assert tsize == vector["tsize"]
    if "link_order" in vector:
        assert [link.name for link in decode(block).links] == vector["link_order"]
    if "block_hex" in vector:
        assert block.hex() == vector["block_hex"]


# ---- the layout is the batch algorithm


def _batch_reference(data: bytes, chunk: int, width: int) -> str:
    # The JS importer's balanced layout, written as the recursion it is.
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)] or [b""]
    level: list[tuple[bytes, int, int]] = [
        (PBLink.to(raw_cid(p)).hash, len(p), len(p)) for p in pieces
    ]  # (cid bin, filesize, tsize)
    if len(level) == 1:
        return raw_cid(pieces[0])
    while True:
        nxt = []
        for g in range(0, len(level), width):
            group = level[g : g + width]
            sizes = tuple(s for _, s, _ in group)
            block = encode(
                PBNode(
                    tuple(PBLink(h, "", t) for h, _, t in group),
                    encode_data(UnixFSData(NodeType.FILE, filesize=sum(sizes), blocksizes=sizes)),
                )
            )
            nxt.append((PBLink.to(cid_for(block, "dag-pb")).hash, sum(sizes), len(block) + sum(t for *_, t in group)))
        level = nxt
        if len(level) == 1:
            return PBLink(level[0][0]).cid


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3000), st.integers(1, 64), st.integers(2, 5))
def test_the_streaming_layout_equals_the_batch_layout(size: int, chunk: int, width: int) -> None:
    data = bytes((i * 7 + size) % 251 for i in range(size))
    store = MemoryBlockStore()
    assert write_file(store.put, data, chunk_size=chunk, width=width).cid == _batch_reference(data, chunk, width)


# ---- reading


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=600), st.integers(1, 40), st.integers(2, 4), st.integers(0, 700), st.integers(0, 700))
def test_a_range_read_equals_the_slice(data: bytes, chunk: int, width: int, offset: int, length: int) -> None:
    store = MemoryBlockStore()
    root = write_file(store.put, data, chunk_size=chunk, width=width)
    assert read_file(store, root.cid) == data
    assert read_range(store, root.cid, offset, length) == data[offset : offset + length]
    assert file_root_info(store.get, root.cid)[1:] == (root.size, root.tsize)


def test_a_range_read_fetches_only_the_blocks_it_needs() -> None:
    store = CountingStore()
    data = bytes((i * 31 + i // 256) % 256 for i in range(16384))  # 16 KiB, every leaf distinct
    root = write_file(store.put, data, chunk_size=256, width=4)  # 64 leaves, 3 levels
    store.fetched.clear()
    FILE_NODES.clear()  # a cold read (decoded File nodes are kept process-wide)
    assert read_range(store, root.cid, 1000, 10) == data[1000:1010]
    leaves = [c for c in store.fetched if c.startswith("bafkrei")]
    assert len(leaves) == 1  # bytes 1000..1009 sit in leaf 3 only
    assert len(store.fetched) == 4  # root, level 2, level 1, the leaf
    store.fetched.clear()
    read_file(store, root.cid)
    assert len(set(store.fetched)) > 60


def test_an_empty_range_fetches_nothing() -> None:
    store = CountingStore()
    root = write_file(store.put, b"abcdef")
    store.fetched.clear()
    assert read_range(store, root.cid, 3, 0) == b""
    assert store.fetched == []


def test_files_from_other_importers_with_data_in_the_node_still_read() -> None:
    store = MemoryBlockStore()
    leaf = store.put(b"world")
    data = encode_data(UnixFSData(NodeType.FILE, data=b"hello ", filesize=11, blocksizes=(5,)))
    root = store.put(encode(PBNode((PBLink.to(leaf, "", 5),), data)), "dag-pb")
    assert read_file(store, root) == b"hello world"
    assert read_range(store, root, 4, 4) == b"o wo"


@settings(max_examples=100, deadline=None)
@given(
    st.builds(
        UnixFSData,
        st.sampled_from(NodeType),
        st.none() | st.binary(min_size=1, max_size=8),
        st.none() | st.integers(0, 1 << 40),
        st.lists(st.integers(0, 1 << 30), max_size=4).map(tuple),
        st.none() | st.integers(0, 255),
        st.none() | st.integers(0, 1024),
        st.none() | st.integers(0, 0o7777),
        st.none() | st.binary(max_size=6),
    )
)
def test_data_messages_round_trip(msg: UnixFSData) -> None:
    assert decode_data(encode_data(msg)) == msg


def test_an_empty_input_is_one_empty_chunk() -> None:
    views: Iterator[memoryview] = chunks(b"", 4)
    assert [bytes(v) for v in views] == [b""]


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40)), min_size=1, max_size=8),
    width=st.integers(2, 4),
)
def test_add_leaves_builds_the_tree_of_that_many_add_leaf_calls(runs: list[tuple[int, int]], width: int) -> None:
    """A run of one leaf repeated (a hole's zero leaf) is the same tree as the leaf added that many times,
    wherever the run starts in a node and whatever leaves come before and after it."""
    store = MemoryBlockStore()
    leaves = [(store.put(bytes([i]) * (i + 1), "raw"), i + 1) for i in range(4)]
    one, many = BalancedLayout(store.put, width), BalancedLayout(store.put, width)
    for which, count in runs:
        cid, size = leaves[which]
        for _ in range(count):
            one.add_leaf(cid, size)
        many.add_leaves(cid, size, count)
    if not any(count for _, count in runs):
        one.add_leaf(*leaves[0])
        many.add_leaf(*leaves[0])
    assert many.finish() == one.finish()


@settings(max_examples=100, deadline=None)
@given(data=st.binary(min_size=1, max_size=50), width=st.integers(2, 3), levels=st.lists(st.integers(1, 3)))
def test_add_node_appends_a_whole_node_as_its_leaves_would(data: bytes, width: int, levels: list[int]) -> None:
    """A whole node of the layout (``width ** h`` leaves) added where such a node starts is the tree of its
    leaves added one by one; where none starts it is refused (ValueError) and nothing is added."""
    store = MemoryBlockStore()
    leaf = store.put(data, "raw")
    nodes = {}
    for h in (1, 2, 3):
        layout = BalancedLayout(store.put, width)
        layout.add_leaves(leaf, len(data), width**h)
        nodes[h] = layout.finish()
    by_node, by_leaf = BalancedLayout(store.put, width), BalancedLayout(store.put, width)
    leaves = 0
    for h in levels:
        node = nodes[h]
        if leaves % width**h:
            with pytest.raises(ValueError):
                by_node.add_node(node.cid, node.size, node.tsize, h)
            by_node.add_leaf(leaf, len(data))
            by_leaf.add_leaf(leaf, len(data))
            leaves += 1
            continue
        by_node.add_node(node.cid, node.size, node.tsize, h)
        by_leaf.add_leaves(leaf, len(data), width**h)
        leaves += width**h
    with pytest.raises(ValueError):
        by_node.add_node(leaf, len(data), len(data), 0)
    by_node.add_leaf(leaf, len(data))
    by_leaf.add_leaf(leaf, len(data))
    assert by_node.finish() == by_leaf.finish()


def test_listing_the_leaves_of_a_hole_reads_its_repeated_node_once_per_run() -> None:
    """A hole is one node repeated at each depth: listing its 4096 leaves reads and decodes each once, not once
    per repeat (before: every node, ~0.8 s for the 65536 leaves of a leaf table at 256 KiB chunks)."""
    store = MemoryBlockStore()
    gets = 0
    zero = store.put(bytes(4), "raw")
    layout = BalancedLayout(store.put, 4)
    layout.add_leaves(zero, 4, 4096)
    root = layout.finish()

    def get(cid: str) -> bytes | None:
        nonlocal gets
        gets += 1
        return store.get(cid)

    listed = list(iter_leaves(get, root.cid))
    assert listed == [(4 * k, zero, 4) for k in range(4096)]
    assert gets == 6, gets  # each level's one node, once (before: all 1365 nodes)


def test_the_shard_estimate_counts_each_links_own_binary_cid_length() -> None:
    # The importer's links-bytes rule sums name bytes + cid.byteLength: 36 for kuro's CIDv1s,
    # but a linked CIDv0 file is 34 bytes and a sha2-512 one 68 (both readable, so both linkable).
    import hashlib

    from kuro_fs.cid import cid_bytes, format_binary
    from kuro_fs.unixfs_hamt import shard_weight

    v1 = raw_cid(b"x")
    v0 = "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH"
    sha512 = format_binary(b"\x01\x55\x13\x40" + hashlib.sha512(b"x").digest())
    links = [("a", v1, 1, True), ("bb", v0, 1, True), ("ccc", sha512, 1, True), ("d", v1, 1, False)]
    assert [len(cid_bytes(c)) for _, c, _, _ in links[:3]] == [36, 34, 68]
    assert shard_weight(links) == (1 + 36) + (2 + 34) + (3 + 68)


def test_a_file_node_whose_sizes_add_up_past_uint64_is_malformed() -> None:
    # UnixFS sizes are uint64, so no file holds 2^64 bytes or more. Two blocksizes of 2^64-1 each
    # used to pass, and Fs.link then raised OverflowError writing the entry's size into its directory.
    store = MemoryBlockStore()
    leaf = store.put(b"abc")
    top = 2**64 - 1
    data = encode_data(UnixFSData(NodeType.FILE, blocksizes=(top, top)))
    root = store.put(encode(PBNode((PBLink.to(leaf, "", 3), PBLink.to(leaf, "", 3)), data)), "dag-pb")
    with pytest.raises(DagPbError, match="more than 2\\^64-1 bytes"):
        file_root_info(store.get, root)
    with pytest.raises(DagPbError, match="more than 2\\^64-1 bytes"):
        read_file(store, root)
    denied = Fs.empty(store).link("f", root)
    assert not denied.ok
    assert denied.receipt["kuro.fs/reason"] == "not-a-file"
