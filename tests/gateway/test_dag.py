"""kuro_fs.gateway.dag: path resolution and the block walk, over the JS-built fixtures.

The HAMT lookups hash names with murmur3 (mmh3) and read only the shards on the way; the manifest's
expectations were found by the fixture builder by searching the shard links, without hashing.
"""

from __future__ import annotations

import pytest
from gateway_helpers import MANIFEST

from kuro_fs import dagcbor
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.errors import CorruptBlock, DagPbError, MissingBlock
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Budget
from kuro_fs.gateway.dag import MAX_FILE_DEPTH, NoSuchPath, NotHeld, OverBudget, Unservable, resolve, walk
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


def test_a_path_through_a_sharded_kuro_fs_directory_reads_only_the_hashmap_nodes_on_the_way() -> None:
    # A kuro.fs directory of more than 256 entries is an IPLD HashMap: a name is looked up through it
    # (sha2-256 of the name picks one slot per level), and the nodes on the way are the path's blocks.
    from kuro_fs.fs import Fs
    from kuro_fs.fsdir import DirLayout
    from kuro_fs.hamt import Shape

    store = MemoryBlockStore()
    fs = Fs.empty(store)
    fs = type(fs)(store, fs.root, layout=DirLayout(max_flat=4, shape=Shape(bit_width=3, bucket_size=1)))
    for i in range(40):
        fs = fs.write(f"big/f{i:02d}.txt", f"file {i}".encode()).fs
    fs = fs.write("big/sub/deep.txt", b"deep").fs
    big = fs.stat("big").value["cid"]
    nodes = {cid for cid in store.cids() if cid not in (fs.root, big) and cid.startswith("bafyrei")}
    nodes -= {fs.stat("big/sub").value["cid"]}
    assert len(nodes) > 3  # the map has levels below its root
    resolved = resolve(store.get, fs.root, ("big", "f07.txt"))
    assert resolved.terminal == fs.stat("big/f07.txt").value["cid"]
    on_the_way = [cid for cid, _ in resolved.path_blocks]
    assert on_the_way[:2] == [fs.root, big]
    assert set(on_the_way[2:]) < nodes  # some HashMap nodes below the root, never all of them
    deep = resolve(store.get, fs.root, ("big", "sub", "deep.txt"))
    assert store.get(deep.terminal) == b"deep"
    with pytest.raises(NoSuchPath, match=r"no entry 'f99\.txt'"):
        resolve(store.get, fs.root, ("big", "f99.txt"))
    node = store.get(on_the_way[2]) or b""
    store.delete(on_the_way[2])
    with pytest.raises(NotHeld):
        resolve(store.get, fs.root, ("big", "f07.txt"))
    tampered = {on_the_way[2]: node[:-1] + bytes([node[-1] ^ 1])}  # a node on the way that fails its hash
    with pytest.raises(CorruptBlock):
        resolve(lambda cid: tampered.get(cid) or store.get(cid), fs.root, ("big", "f07.txt"))


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


# ---- nothing less than the entity, nothing without end


def _file_node(links: list[tuple[str, int]], blocksizes: tuple[int, ...] | None = None) -> bytes:
    sizes = tuple(size for _, size in links) if blocksizes is None else blocksizes
    return encode_pb(
        PBNode(
            tuple(PBLink.to(cid, "", size) for cid, size in links),
            encode_data(UnixFSData(NodeType.FILE, blocksizes=sizes)),
        )
    )


@pytest.mark.parametrize("scope", ["entity", "all"])
def test_a_malformed_terminal_block_is_refused_before_the_walk_yields_anything(scope: str) -> None:
    store = MemoryBlockStore()
    root = store.put(b"\xff\xffthis is no dag-pb", "dag-pb")
    with pytest.raises(DagPbError):
        walk(store.get, resolve(store.get, root, ()), CarParams(scope))  # type: ignore[arg-type]
    assert [c for c, _ in walk(store.get, resolve(store.get, root, ()), CarParams("block"))] == [root]


def test_a_file_whose_blocksizes_and_links_disagree_is_refused_not_sent_as_its_root_alone() -> None:
    store = MemoryBlockStore()
    leaves = [store.put(bytes([i]) * 10) for i in range(3)]
    root = store.put(_file_node([(c, 10) for c in leaves], blocksizes=(10, 10)), "dag-pb")
    with pytest.raises(Unservable, match="3 links but 2 blocksizes"):
        walk(store.get, resolve(store.get, root, ()), CarParams("entity"))
    inner = store.put(_file_node([(c, 10) for c in leaves], blocksizes=(10,)), "dag-pb")
    outer = store.put(_file_node([(leaves[0], 10), (inner, 30)]), "dag-pb")
    blocks = walk(store.get, resolve(store.get, outer, ()), CarParams("entity"))
    assert [next(blocks)[0], next(blocks)[0], next(blocks)[0]] == [outer, leaves[0], inner]
    with pytest.raises(Unservable, match="blocksizes"):
        next(blocks)


def test_a_file_dag_deeper_than_the_limit_is_refused_at_that_depth() -> None:
    store = MemoryBlockStore()
    cid = store.put(b"bottom")
    for _ in range(MAX_FILE_DEPTH + 2):
        cid = store.put(_file_node([(cid, 6)]), "dag-pb")
    with pytest.raises(Unservable, match="deeper than"):
        list(walk(store.get, resolve(store.get, cid, ()), CarParams("entity")))


def _diamond(store: MemoryBlockStore, levels: int, codec: str) -> str:
    """``levels`` nodes, each linking twice to the one below: 2**levels paths to the leaf."""
    cid = store.put(b"leaf of the diamond" * 10)
    size = 190
    for _ in range(levels):
        if codec == "dag-cbor":
            cid = store.put(dagcbor.encode({"a": dagcbor.Link(cid), "b": dagcbor.Link(cid)}), "dag-cbor")
        else:
            cid = store.put(_file_node([(cid, size), (cid, size)]), "dag-pb")
            size *= 2
    return cid


@pytest.mark.parametrize(("codec", "scope"), [("dag-cbor", "all"), ("dag-pb", "entity"), ("dag-pb", "all")])
def test_a_diamond_dag_with_dups_y_stops_at_the_repeat_budget(codec: str, scope: str) -> None:
    store = MemoryBlockStore()
    root = _diamond(store, 50, codec)
    blocks = walk(store.get, resolve(store.get, root, ()), CarParams(scope, dups=True), Budget(entries=1000))  # type: ignore[arg-type]
    with pytest.raises(OverBudget):
        for _ in range(1_000_000):
            next(blocks)
    if scope == "all":  # dups=n sends each block once, and skips a block seen before without reading it
        assert len(list(walk(store.get, resolve(store.get, root, ()), CarParams(scope)))) == 51


def test_a_diamond_file_with_dups_n_is_bounded_too_and_repeated_bytes_count() -> None:
    store = MemoryBlockStore()
    root = _diamond(store, 50, "dag-pb")
    with pytest.raises(OverBudget):
        list(walk(store.get, resolve(store.get, root, ()), CarParams("entity"), Budget(entries=5000)))
    with pytest.raises(OverBudget, match="re-send more than 10000 bytes"):
        list(walk(store.get, resolve(store.get, root, ()), CarParams("all", dups=True), Budget(bytes=10_000)))


def test_a_file_of_repeated_leaves_fits_the_default_budget() -> None:
    store = MemoryBlockStore()
    leaf = store.put(bytes(262_144))
    root = store.put(_file_node([(leaf, 262_144)] * 174), "dag-pb")
    resolved = resolve(store.get, root, ())
    assert len(list(walk(store.get, resolved, CarParams("entity", dups=True)))) == 175
    assert len(list(walk(store.get, resolved, CarParams("entity")))) == 2
