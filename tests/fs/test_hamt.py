"""The IPLD HashMap under kuro.fs's large directories: canonical form, lookups, and hostile nodes refused."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs import dagcbor
from kuro_fs.cid import cid_for, raw_cid
from kuro_fs.errors import DagCborError
from kuro_fs.fsdir import ENTRY_VALUES, Entry
from kuro_fs.hamt import Hamt, Node, Shape, encode_node, encode_root, node_from_data
from kuro_fs.paths import stored_name_ok

KEYS = [f"k{i}".encode() for i in range(40)]
SHAPES = [Shape(3, 1), Shape(3, 2), Shape(4, 3), Shape(8, 3)]


class Blocks:
    """Flushed nodes by CID, and a loader over them that checks placement as kuro.fs's does."""

    def __init__(self, shape: Shape) -> None:
        self.nodes: dict[str, Node] = {}
        self.hamt = Hamt(shape, ENTRY_VALUES, self.load)

    def load(self, cid: str, depth: int, prefix: int) -> Node:
        node = self.nodes[cid]
        self.hamt.check(node, depth, prefix)
        return node

    def store(self, root: Node) -> tuple[Node, bytes]:
        root, blocks = self.hamt.flush(root)
        for cid, block, node in blocks:
            assert cid == cid_for(block, "dag-cbor")
            self.nodes[cid] = node
        return root, encode_root(root, self.hamt.shape)


def entry(key: bytes, version: int = 0) -> Entry:
    return Entry(raw_cid(key + bytes([version])), version)


def _generic(node: Node, blocks: Blocks) -> Any:
    # The node as plain data, for dagcbor.encode: the differential reference of encode_node.
    data: list[Any] = []
    for elem in node.elems:
        if isinstance(elem, str):
            data.append(dagcbor.Link(elem))
        else:
            assert isinstance(elem, tuple)
            data.append([[key, {"cid": dagcbor.Link(e.cid), "size": e.size}] for key, e in elem])
    return [node.bitmap.to_bytes(blocks.hamt.shape.map_bytes, "little"), data]


# ---- canonical form


@settings(max_examples=120, deadline=None)
@given(
    shape=st.sampled_from(SHAPES),
    ops=st.lists(st.tuples(st.booleans(), st.sampled_from(KEYS), st.integers(0, 3)), max_size=120),
)
def test_any_order_of_sets_and_deletes_ends_in_the_blocks_of_the_final_map(
    shape: Shape, ops: list[tuple[bool, bytes, int]]
) -> None:
    blocks = Blocks(shape)
    root = Node(0, (), ())
    model: dict[bytes, Entry] = {}
    for i, (put, key, version) in enumerate(ops):
        if put:
            root = blocks.hamt.set(root, key, entry(key, version))
            model[key] = entry(key, version)
        else:
            root = blocks.hamt.delete(root, key)
            model.pop(key, None)
        if i % 10 == 0:  # a stored map goes on being edited through loaded children
            root, _ = blocks.store(root)
    root, ours = blocks.store(root)
    _, fresh = blocks.store(blocks.hamt.build(model.items()))
    assert ours == fresh
    assert dict(blocks.hamt.items(root)) == model
    for key in KEYS:
        assert blocks.hamt.get(root, key) == model.get(key)
    assert blocks.hamt.count_upto(root, 1000) == len(model)


def test_a_bucket_overflows_into_a_child_and_a_delete_folds_it_back() -> None:
    blocks = Blocks(Shape(3, 1))
    root = blocks.hamt.build((k, entry(k)) for k in KEYS[:2])
    first = blocks.store(root)[1]
    big = blocks.hamt.build((k, entry(k)) for k in KEYS[:12])
    assert any(isinstance(elem, Node) for elem in big.elems)  # 12 keys in 8 slots of one: children
    for key in KEYS[2:12]:
        big = blocks.hamt.delete(big, key)
    assert blocks.store(big)[1] == first
    assert blocks.hamt.delete(big, b"absent") is big


def test_setting_the_same_value_returns_the_same_node() -> None:
    hamt = Blocks(Shape()).hamt
    root = hamt.build((k, entry(k)) for k in KEYS)
    assert hamt.set(root, KEYS[3], entry(KEYS[3])) is root


def test_build_refuses_a_duplicate_key() -> None:
    with pytest.raises(ValueError, match="duplicate key"):
        Blocks(Shape()).hamt.build([(b"a", entry(b"a")), (b"a", entry(b"a", 1))])


@pytest.mark.parametrize("bad", [dict(bit_width=2), dict(bit_width=9), dict(bucket_size=0), dict(bit_width=True)])
def test_a_shape_out_of_range_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Shape(**bad)


# ---- bytes: the hand-written encoders against the generic dag-cbor encoder


@settings(max_examples=60, deadline=None)
@given(
    shape=st.sampled_from(SHAPES),
    keys=st.sets(st.text(min_size=1, max_size=12).filter(stored_name_ok).map(str.encode), max_size=60),
)
def test_node_and_root_bytes_equal_the_generic_dag_cbor_encoding(shape: Shape, keys: set[bytes]) -> None:
    blocks = Blocks(shape)
    root, root_bytes = blocks.store(blocks.hamt.build((k, entry(k)) for k in keys))
    reference = {"hamt": _generic(root, blocks), "hashAlg": 0x12, "bucketSize": shape.bucket_size}
    assert root_bytes == dagcbor.encode(reference)
    for node in blocks.nodes.values():
        assert encode_node(node, shape) == dagcbor.encode(_generic(node, blocks))
        again = node_from_data(dagcbor.decode(encode_node(node, shape)), ENTRY_VALUES)
        assert again.raws == node.raws and again.bitmap == node.bitmap


def test_a_node_with_a_child_not_stored_has_no_encoding() -> None:
    hamt = Blocks(Shape(3, 1)).hamt
    with pytest.raises(ValueError, match="flush it first"):
        encode_node(hamt.build((k, entry(k)) for k in KEYS), hamt.shape)


# ---- hostile nodes


def _link(cid: str) -> dagcbor.Link:
    return dagcbor.Link(cid)


_ENTRY = {"cid": _link(raw_cid(b"x")), "size": 1}


@pytest.mark.parametrize(
    "item, why",
    [
        ([b"\x01"], "a HAMT node is"),
        ([b"\x01\x00\x00", []], "power of two"),
        ([b"\x03", [[[b"a", _ENTRY]]]], "sets 2 bits for 1 elements"),
        ([b"\x01", [[]]], "non-empty bucket"),
        ([b"\x01", [[[b"b", _ENTRY], [b"a", _ENTRY]]]], "unique and sorted"),
        ([b"\x01", [[[b"a", _ENTRY], [b"a", _ENTRY]]]], "unique and sorted"),
        ([b"\x01", [[["a", _ENTRY]]]], "key bytes"),
        ([b"\x01", [[[b"a/b", _ENTRY]]]], "not allowed"),
        ([b"\x01", [[[b"..", _ENTRY]]]], "not allowed"),
        ([b"\x01", [[[b"\xff", _ENTRY]]]], "not allowed"),
        ([b"\x01", [_link(raw_cid(b"leaf"))]], "dag-cbor node"),
        ([b"\x01", [[[b"a", {"cid": _link(raw_cid(b"x"))}]]]], "expected keys cid, size"),
        ([b"\x01", [5]], "a link or a non-empty bucket"),
    ],
)
def test_a_malformed_node_is_refused_naming_the_rule(item: Any, why: str) -> None:
    with pytest.raises(DagCborError, match=why):
        node_from_data(item, ENTRY_VALUES)


def _slot(key: bytes, depth: int, bit_width: int) -> int:
    h = int.from_bytes(hashlib.sha256(key).digest(), "big")
    return (h >> (256 - (depth + 1) * bit_width)) & ((1 << bit_width) - 1)


def test_a_key_in_a_slot_its_hash_does_not_lead_to_is_refused() -> None:
    shape = Shape(3, 3)
    hamt = Hamt(shape, ENTRY_VALUES, lambda cid, depth, prefix: Node(0, (), ()))
    key = b"a"
    wrong = (_slot(key, 0, 3) + 1) % 8
    node = node_from_data([bytes([1 << wrong]), [[[key, _ENTRY]]]], ENTRY_VALUES)
    with pytest.raises(DagCborError, match="does not lead to"):
        hamt.check(node, 0, 0)
    right = node_from_data([bytes([1 << _slot(key, 0, 3)]), [[[key, _ENTRY]]]], ENTRY_VALUES)
    hamt.check(right, 0, 0)
    with pytest.raises(DagCborError, match="does not lead to"):  # the same node reached under another prefix
        hamt.check(right, 1, (_slot(key, 0, 3) + 1) % 8)


def test_a_node_checked_at_the_wrong_width_depth_or_size_is_refused() -> None:
    key = b"a"
    node = node_from_data([bytes([1 << _slot(key, 0, 3)]), [[[key, _ENTRY]]]], ENTRY_VALUES)
    with pytest.raises(DagCborError, match="bitWidth 3 in a map of bitWidth 8"):
        Hamt(Shape(8, 3), ENTRY_VALUES, lambda *a: node).check(node, 0, 0)
    with pytest.raises(DagCborError, match="deeper than"):
        Hamt(Shape(3, 3), ENTRY_VALUES, lambda *a: node).check(node, 85, 0)
    with pytest.raises(DagCborError, match="empty HAMT node below the root"):
        Hamt(Shape(3, 3), ENTRY_VALUES, lambda *a: node).check(node_from_data([b"\x00", []], ENTRY_VALUES), 1, 0)
    same = [k for k in (f"s{i}".encode() for i in range(400)) if _slot(k, 0, 3) == 0][:2]
    over = node_from_data([b"\x01", [[[k, _ENTRY] for k in sorted(same)]]], ENTRY_VALUES)
    with pytest.raises(DagCborError, match="bucket of 2 entries"):
        Hamt(Shape(3, 1), ENTRY_VALUES, lambda *a: over).check(over, 0, 0)
