"""kuro.fs directory blocks: flat up to 256 entries, an IPLD HashMap beyond, one CID per set of entries."""

from __future__ import annotations

import random
from typing import Any

import pytest
from fshelpers import ok
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs import dagcbor
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import cid_for, raw_cid
from kuro_fs.dircache import DirCache
from kuro_fs.errors import DagCborError
from kuro_fs.fs import Fs
from kuro_fs.fsdir import (
    MAX_FLAT_ENTRIES,
    DirLayout,
    Entry,
    FlatDir,
    ShardedDir,
    decode_dir,
    decode_dir_block,
    encode_dir,
    read_dir,
    write_dir,
)
from kuro_fs.hamt import Shape
from kuro_fs.paths import escape_name, stored_name_ok

SMALL = DirLayout(max_flat=3, shape=Shape(3, 1))  # shards at 4 entries, and a child per colliding slot


def entries(n: int, prefix: str = "file-") -> dict[str, Entry]:
    return {f"{prefix}{i:05d}.txt": Entry(raw_cid(b"%d" % i), len(b"%d" % i)) for i in range(n)}


def _with_files(store: MemoryBlockStore, files: dict[str, Entry]) -> dict[str, Entry]:
    for name in files:
        store.put(name.removeprefix("file-").removesuffix(".txt").lstrip("0").encode() or b"0")
    return files


# ---- the layout threshold


def test_256_entries_stay_one_flat_block_and_the_257th_shards_the_directory() -> None:
    store = MemoryBlockStore()
    flat = entries(MAX_FLAT_ENTRIES)
    cid = write_dir(store, flat)
    assert cid == cid_for(encode_dir(flat), "dag-cbor")  # exactly today's bytes
    assert isinstance(decode_dir_block(store.get(cid) or b""), FlatDir)
    more = {**flat, "one-more": Entry(raw_cid(b"x"), 1)}
    sharded = write_dir(store, more)
    block = store.get(sharded) or b""
    assert isinstance(decode_dir_block(block), ShardedDir)
    assert dagcbor.decode(block)["shard"]["hashAlg"] == 0x12 and dagcbor.decode(block)["shard"]["bucketSize"] == 3
    assert read_dir(store, sharded) == more


def test_growing_past_the_threshold_and_shrinking_back_returns_to_the_flat_cid() -> None:
    store = MemoryBlockStore()
    fs = Fs.empty(store)
    for i in range(MAX_FLAT_ENTRIES + 2):
        fs = ok(fs.write(f"d/{i}", b"")).fs
    assert isinstance(decode_dir_block(store.get(ok(fs.stat("d")).value["cid"]) or b""), ShardedDir)
    fs = ok(fs.rm("d/0")).fs
    fs = ok(fs.rm("d/1")).fs
    flat = {str(i): Entry(raw_cid(b""), 0) for i in range(2, MAX_FLAT_ENTRIES + 2)}
    assert ok(fs.stat("d")).value["cid"] == cid_for(encode_dir(flat), "dag-cbor")


@settings(max_examples=40, deadline=None)
@given(names=st.lists(st.sampled_from([f"n{i}" for i in range(14)]), min_size=1, max_size=30), seed=st.integers())
def test_one_set_of_entries_has_one_cid_whatever_the_order_of_writes_and_removals(names: list[str], seed: int) -> None:
    store = MemoryBlockStore()
    fs = Fs(store, Fs.empty(store).root, layout=SMALL)
    for name in names:
        fs = ok(fs.write(f"d/{name}", name.encode())).fs
    final = sorted(set(names))
    rng = random.Random(seed)
    gone = set(rng.sample(final, len(final) // 2))
    for name in sorted(gone, key=lambda _: rng.random()):
        fs = ok(fs.rm(f"d/{name}")).fs
    kept = {n: Entry(raw_cid(n.encode()), len(n)) for n in final if n not in gone}
    d = ok(fs.stat("d")).value["cid"] if kept else None
    if kept:
        assert d == write_dir(store, kept, SMALL)
        assert [e["name"] for e in ok(fs.ls("d")).value] == sorted(kept)
        for n in kept:
            assert ok(fs.read(f"d/{n}")).value == n.encode()


def test_a_directory_of_another_layout_is_read_as_it_is_and_re_laid_out_on_its_first_edit() -> None:
    store = MemoryBlockStore()
    many = entries(12)
    foreign = write_dir(store, many, SMALL)  # sharded with bitWidth 3, bucketSize 1
    fs = ok(Fs.empty(store).link("d", foreign)).fs
    assert sorted(e["name"] for e in ok(fs.ls("d")).value) == sorted(many)
    edited = ok(fs.write("d/new", b"")).fs
    assert ok(edited.stat("d")).value["cid"] == write_dir(store, {**many, "new": Entry(raw_cid(b""), 0)})


def test_a_large_flat_directory_from_an_older_root_is_read_and_sharded_on_its_first_edit() -> None:
    store = MemoryBlockStore()
    old = _with_files(store, entries(1000))
    root_block = encode_dir({"big": Entry(store.put(encode_dir(old), "dag-cbor"), 0)})
    fs = Fs(store, store.put(root_block, "dag-cbor"))
    assert ok(fs.ls("big")).receipt["kuro.fs/entries"] == 1000
    assert ok(fs.read("big/file-00007.txt")).value == b"7"
    fs = ok(fs.write("big/new", b"n")).fs
    block = store.get(ok(fs.stat("big")).value["cid"]) or b""
    assert isinstance(decode_dir_block(block), ShardedDir)
    assert read_dir(store, ok(fs.stat("big")).value["cid"]) == {**old, "new": Entry(raw_cid(b"n"), 1)}


def test_a_layout_is_checked() -> None:
    with pytest.raises(ValueError, match="max_flat"):
        DirLayout(max_flat=-1)
    with pytest.raises(ValueError, match="layout must be a DirLayout"):
        Fs(MemoryBlockStore(), Fs.empty(MemoryBlockStore()).root, layout=3)  # type: ignore[arg-type]


# ---- decoding


def test_decode_dir_names_a_sharded_block_instead_of_misreading_it() -> None:
    store = MemoryBlockStore()
    cid = write_dir(store, entries(300))
    with pytest.raises(DagCborError, match=r"sharded kuro\.fs directory"):
        decode_dir(store.get(cid) or b"")
    assert len(read_dir(store, cid)) == 300


@pytest.mark.parametrize(
    "value, why",
    [
        (
            {"shard": {"bucketSize": 3, "hamt": [bytes(32), []], "hashAlg": 0x22}, "type": "kuro.fs/dir", "version": 1},
            "sha2-256",
        ),
        (
            {"shard": {"bucketSize": 0, "hamt": [bytes(32), []], "hashAlg": 0x12}, "type": "kuro.fs/dir", "version": 1},
            "unsupported shape",
        ),
        ({"shard": {"hamt": [bytes(32), []], "hashAlg": 0x12}, "type": "kuro.fs/dir", "version": 1}, "HashMapRoot"),
        ({"shard": {}, "entries": {}, "type": "kuro.fs/dir", "version": 1}, "expected keys"),
        ({"entries": {}, "type": "kuro.fs/dir", "version": 2}, "v1"),
        (
            {"entries": {"a/b": {"cid": dagcbor.Link(raw_cid(b"")), "size": 0}}, "type": "kuro.fs/dir", "version": 1},
            "bad entry name",
        ),
    ],
)
def test_a_malformed_directory_block_is_refused_naming_the_rule(value: dict[str, Any], why: str) -> None:
    with pytest.raises(DagCborError, match=why):
        decode_dir_block(dagcbor.encode(value))


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=20).filter(stored_name_ok),
        st.tuples(st.binary(max_size=4), st.integers(0, 2**40)),
        max_size=40,
    )
)
def test_the_flat_encoder_writes_what_the_generic_dag_cbor_encoder_writes(raw: dict[str, tuple[bytes, int]]) -> None:
    found = {name: Entry(raw_cid(data), size) for name, (data, size) in raw.items()}
    generic = {n: {"cid": dagcbor.Link(e.cid), "size": e.size} for n, e in found.items()}
    assert encode_dir(found) == dagcbor.encode({"entries": generic, "type": "kuro.fs/dir", "version": 1})
    assert decode_dir(encode_dir(found)) == found


def test_write_dir_refuses_a_name_no_directory_may_hold() -> None:
    for bad in ["a/b", "", "..", " ", "a\x00"]:
        with pytest.raises(DagCborError, match="bad entry name"):
            write_dir(MemoryBlockStore(), {bad: Entry(raw_cid(b""), 0)})


# ---- hostile sharded directories are refused, naming the block


def _sharded(store: MemoryBlockStore, n: int) -> tuple[Fs, ShardedDir, str]:
    files = entries(n)
    for name in files:
        store.put(b"%d" % int(name[5:10]))
    d = write_dir(store, files, SMALL)
    fs = Fs(store, write_dir(store, {"d": Entry(d, 0)}), layout=SMALL, cache=DirCache())
    decoded = decode_dir_block(store.get(d) or b"")
    assert isinstance(decoded, ShardedDir)
    return fs, decoded, d


def test_a_lost_hamt_node_is_block_missing_naming_it_and_a_write_through_it_stores_nothing() -> None:
    store = MemoryBlockStore()
    fs, decoded, _ = _sharded(store, 40)
    child = next(e for e in decoded.root.elems if isinstance(e, str))
    store.delete(child)
    behind = [n for n in entries(40) if not fs.read(f"d/{n}").ok]  # the names under the lost node
    assert behind and len(behind) < 40
    before = store.cids()
    for result in [
        fs.ls("d"),
        fs.walk("."),
        fs.read(f"d/{behind[0]}"),
        fs.stat(f"d/{behind[0]}"),
        fs.write(f"d/{behind[0]}", b"new bytes"),
        fs.rm(f"d/{behind[0]}"),
    ]:
        assert result.receipt["kuro.fs/reason"] == "block-missing" and result.receipt["kuro.fs/cid"] == child
    assert store.cids() == before
    other = next(n for n in entries(40) if n not in behind)
    assert ok(fs.read(f"d/{other}")).ok  # the rest of the directory still reads


def test_a_child_node_linked_from_two_slots_is_refused_not_listed_twice() -> None:
    store = MemoryBlockStore()
    _, decoded, d = _sharded(store, 40)
    links = [e for e in decoded.root.elems if isinstance(e, str)]
    assert len(links) >= 2
    value = dagcbor.decode(store.get(d) or b"")
    data = value["shard"]["hamt"][1]
    first = next(i for i, e in enumerate(data) if isinstance(e, dagcbor.Link))
    second = next(i for i, e in enumerate(data) if isinstance(e, dagcbor.Link) and i != first)
    data[second] = data[first]  # a diamond inside the map: one child under two hash prefixes
    bad = store.put(dagcbor.encode(value), "dag-cbor")
    hostile = Fs(store, write_dir(store, {"d": Entry(bad, 0)}), cache=DirCache())
    receipt = hostile.ls("d").receipt
    assert receipt["kuro.fs/reason"] == "block-missing" and receipt["kuro.fs/cid"] == data[first].cid


# ---- names written before control characters were refused


def test_a_stored_name_with_control_characters_is_listed_exactly_and_escaped_for_printing() -> None:
    store = MemoryBlockStore()
    legacy = {
        "evil\nfake": {"cid": dagcbor.Link(store.put(b"x")), "size": 1},
        "\x1b]0;title\x07": {"cid": dagcbor.Link(store.put(b"y")), "size": 1},
        "plain": {"cid": dagcbor.Link(store.put(b"z")), "size": 1},
    }
    old = store.put(dagcbor.encode({"entries": legacy, "type": "kuro.fs/dir", "version": 1}), "dag-cbor")
    fs = Fs(store, old)
    names = [e["name"] for e in ok(fs.ls(".")).value]
    assert sorted(names) == sorted(legacy)
    assert [escape_name(n) for n in sorted(names)] == ["\\x1b]0;title\\x07", "evil\\x0afake", "plain"]
    assert fs.read("evil\nfake").receipt["kuro.fs/reason"] == "bad-path"  # not addressable by path
    listed = {e["name"]: e["cid"] for e in ok(fs.ls(".")).value}
    assert store.get(listed["evil\nfake"]) == b"x"  # its content is reachable by CID
    fs = ok(fs.write("new", b"n")).fs  # the directory stays writable, the old names kept as they are
    assert sorted(e["name"] for e in ok(fs.ls(".")).value) == sorted([*legacy, "new"])


def test_a_node_checked_in_one_map_is_checked_again_in_a_map_of_another_shape() -> None:
    # A node the cache holds was checked at (depth 1, prefix 5) of a bitWidth-8 map; a hostile map of
    # bitWidth 3 linking the same node at its (1, 5) must still be refused — there its keys lead elsewhere.
    import hashlib

    store, cache = MemoryBlockStore(), DirCache()
    names = [n for n in (f"k{i}" for i in range(20_000)) if hashlib.sha256(n.encode()).digest()[0] == 5][:4]
    good = write_dir(store, {n: Entry(raw_cid(b"x"), 1) for n in names}, DirLayout(max_flat=0))
    assert sorted(read_dir(store, good, cache)) == names  # its child node (all 4 names) now cached, checked
    value = dagcbor.decode(store.get(good) or b"")
    value["shard"]["hamt"] = [bytes([1 << 5]), value["shard"]["hamt"][1]]  # the same child, slot 5 of 8
    hostile = store.put(dagcbor.encode(value), "dag-cbor")
    with pytest.raises(DagCborError):
        read_dir(store, hostile, cache)
