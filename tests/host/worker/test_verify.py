"""The host believes a worker's blocks only once they hash to their CIDs, and its new fs root only once complete."""

from __future__ import annotations

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import cid_for
from kuro_fs.dagcbor import Link, encode
from kuro_fs.fs import Fs
from kuro_wasm.host.worker.verify import accept_block, check_root


def _written(files: dict[str, bytes]) -> tuple[MemoryBlockStore, str, MemoryBlockStore, str, set[str]]:
    """A host store with an empty fs, and a worker's view: the same fs after writes, and what was written."""
    host = MemoryBlockStore()
    before = Fs.empty(host)
    worker = MemoryBlockStore()
    for cid in host.cids():
        worker.put(host.get(cid) or b"", "dag-cbor")
    fs = Fs(worker, before.root)
    for path, data in files.items():
        fs = fs.write(path, data).fs
    return host, before.root, worker, fs.root, set(worker.cids()) - set(host.cids())


def test_a_block_that_hashes_to_its_cid_is_stored() -> None:
    store = MemoryBlockStore()
    cid = cid_for(b"leaf", "raw")
    assert accept_block(store, cid, b"leaf") is None
    assert store.get(cid) == b"leaf"


def test_a_block_that_does_not_hash_to_its_cid_is_refused_and_not_stored() -> None:
    store = MemoryBlockStore()
    cid = cid_for(b"what was claimed", "raw")
    assert "do not hash" in (accept_block(store, cid, b"what was sent") or "")
    assert store.cids() == []


def test_a_name_that_is_not_a_cid_is_refused() -> None:
    assert "not a CID" in (accept_block(MemoryBlockStore(), "bafy-nonsense", b"x") or "")


def test_a_new_root_whose_new_blocks_were_all_handed_back_is_believed() -> None:
    host, _, worker, root, new = _written({"a/b.txt": b"hello", "c.txt": b"x" * 300_000})
    for cid in new:
        assert accept_block(host, cid, worker.get(cid) or b"") is None
    assert check_root(host, root, new) is None
    assert Fs(host, root).read("c.txt").value == b"x" * 300_000


def test_a_new_root_naming_a_block_nobody_handed_back_is_not_believed() -> None:
    host, _, worker, root, new = _written({"a/b.txt": b"hello", "c.txt": b"x" * 300_000})
    leaf = next(c for c in new if c.startswith("bafkrei"))
    for cid in new - {leaf}:
        accept_block(host, cid, worker.get(cid) or b"")
    assert "neither in the store nor handed back" in (check_root(host, root, new - {leaf}) or "")


def test_a_root_that_is_not_a_kuro_fs_directory_is_not_believed() -> None:
    host = MemoryBlockStore()
    leaf = host.put(b"just bytes", "raw")
    not_a_dir = host.put(encode({"hello": "world"}), "dag-cbor")
    assert "not a dag-cbor directory" in (check_root(host, leaf, {leaf}) or "")
    assert "not a kuro.fs directory" in (check_root(host, not_a_dir, {not_a_dir}) or "")
    assert "not in the block store" in (check_root(host, cid_for(b"{}", "dag-cbor"), set()) or "")
    assert "not a CID string" in (check_root(host, 42, set()) or "")


def test_a_handed_block_that_does_not_decode_is_not_believed() -> None:
    host = MemoryBlockStore()
    bad = host.put(b"\x00not dag-pb", "dag-pb")
    root = host.put(
        encode({"entries": {"f": {"cid": Link(bad), "size": 3}}, "type": "kuro.fs/dir", "version": 1}), "dag-cbor"
    )
    assert "does not decode" in (check_root(host, root, {root, bad}) or "")


def test_blocks_already_in_the_store_are_not_walked_again() -> None:
    host = MemoryBlockStore()
    fs = Fs.empty(host).write("big.bin", b"y" * 600_000).fs
    assert check_root(host, fs.root, set()) is None  # nothing handed back: the root was there before
