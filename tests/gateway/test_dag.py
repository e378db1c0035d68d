"""kuro_fs.gateway.dag: path resolution and the block walk, over the JS-built fixtures.

The HAMT lookups hash names with murmur3 (mmh3) and read only the shards on the way; the manifest's
expectations were found by the fixture builder by searching the shard links, without hashing.
"""

from __future__ import annotations

import pytest
from gateway_helpers import MANIFEST

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.errors import MissingBlock
from kuro_fs.filestore import FileBlockStore
from kuro_fs.gateway.dag import NoSuchPath, NotHeld, resolve, walk
from kuro_fs.gateway.request import CarParams
from kuro_fs.unixfs import NodeType, UnixFSData, encode_data

HAMT = MANIFEST["hamt-with-multi-block-files"]


@pytest.mark.parametrize("name", sorted(HAMT["names"]))
def test_a_hamt_lookup_reads_exactly_the_shards_on_the_way_to_the_name(
    fixture_store: FileBlockStore, name: str
) -> None:
    read: list[str] = []

    def get(cid: str) -> bytes | None:
        read.append(cid)
        return fixture_store.get(cid)

    resolved = resolve(get, HAMT["root"], (name,))
    expected = HAMT["names"][name]
    assert resolved.terminal == expected["cid"]
    assert [c for c, _ in resolved.path_blocks] == [HAMT["root"], *expected["shards_on_the_way"]]
    assert read == [HAMT["root"], *expected["shards_on_the_way"], expected["cid"]]


def test_a_name_missing_from_a_hamt_is_no_such_path(fixture_store: FileBlockStore) -> None:
    with pytest.raises(NoSuchPath):
        resolve(fixture_store.get, HAMT["root"], ("61.txt",))


def test_a_missing_root_or_path_block_is_found_before_anything_is_sent() -> None:
    store = MemoryBlockStore()
    child = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    dir_block = encode_pb(PBNode((PBLink.to(child, "a", 0),), encode_data(UnixFSData(NodeType.DIRECTORY))))
    root = store.put(dir_block, "dag-pb")
    with pytest.raises(NotHeld, match="on the path"):
        resolve(store.get, root, ("a",))
    with pytest.raises(NotHeld, match="root block"):
        resolve(store.get, child, ())


def test_a_block_missing_below_the_entity_root_cuts_the_walk_there() -> None:
    store = MemoryBlockStore()
    leaf = store.put(b"leaf")
    gone = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    node = encode_pb(
        PBNode(
            (PBLink.to(leaf, "", 4), PBLink.to(gone, "", 0)), encode_data(UnixFSData(NodeType.FILE, blocksizes=(4, 0)))
        )
    )
    root = store.put(node, "dag-pb")
    blocks = walk(store.get, resolve(store.get, root, ()), CarParams("all"))
    assert next(blocks)[0] == root and next(blocks)[0] == leaf
    with pytest.raises(MissingBlock):
        next(blocks)


def test_a_dag_whose_links_repeat_is_walked_once_per_block_with_dups_n_and_per_link_with_dups_y() -> None:
    store = MemoryBlockStore()
    leaf = store.put(b"same")
    node = encode_pb(
        PBNode((PBLink.to(leaf, "", 4),) * 3, encode_data(UnixFSData(NodeType.FILE, blocksizes=(4, 4, 4))))
    )
    root = store.put(node, "dag-pb")
    resolved = resolve(store.get, root, ())
    assert [c for c, _ in walk(store.get, resolved, CarParams("all"))] == [root, leaf]
    assert [c for c, _ in walk(store.get, resolved, CarParams("all", dups=True))] == [root, leaf, leaf, leaf]
    assert [c for c, _ in walk(store.get, resolved, CarParams("entity", dups=True))] == [root, leaf, leaf, leaf]


def test_an_identity_link_is_never_emitted() -> None:
    store = MemoryBlockStore()
    inline = "bafkqablimvwgy3y"  # identity "hello"
    node = encode_pb(PBNode((PBLink.to(inline, "", 5),), encode_data(UnixFSData(NodeType.FILE, blocksizes=(5,)))))
    root = store.put(node, "dag-pb")
    for scope in ("all", "entity", "block"):
        assert [c for c, _ in walk(store.get, resolve(store.get, root, ()), CarParams(scope, dups=True))] == [root]  # type: ignore[arg-type]
