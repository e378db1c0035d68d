"""The host believes a worker's blocks only once they hash to their CIDs, and its new fs root only once complete;
nothing a worker hands back reaches the caller's store before then."""

from __future__ import annotations

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import ParsedCID, cid_for, parse
from kuro_fs.dagcbor import Link, encode
from kuro_fs.fs import Fs
from kuro_fs.fsdir import Entry, encode_dir
from kuro_wasm.host.worker.verify import Staged, accept_root, check_root


def _written(files: dict[str, bytes]) -> tuple[MemoryBlockStore, str, Staged]:
    """A host store with an empty fs; the root after a worker wrote ``files`` over it; what it handed back."""
    host = MemoryBlockStore()
    before = Fs.empty(host)
    worker = MemoryBlockStore()
    for cid in host.cids():
        worker.put(host.get(cid) or b"", "dag-cbor")
    fs = Fs(worker, before.root)
    for path, data in files.items():
        fs = fs.write(path, data).fs
    staged = Staged()
    for cid in set(worker.cids()) - set(host.cids()):
        assert staged.add(cid, worker.get(cid) or b"") is None
    return host, fs.root, staged


def test_a_block_that_hashes_to_its_cid_is_held_apart_not_stored() -> None:
    staged = Staged()
    cid = cid_for(b"leaf", "raw")
    assert staged.add(cid, b"leaf") is None
    assert staged[cid] == b"leaf" and cid in staged and len(staged) == 1


def test_a_block_that_does_not_hash_to_its_cid_is_refused_and_not_held() -> None:
    staged = Staged()
    cid = cid_for(b"what was claimed", "raw")
    assert "do not hash" in (staged.add(cid, b"what was sent") or "")
    assert cid not in staged and len(staged) == 0


def test_a_name_that_is_not_a_cid_is_refused() -> None:
    assert "not a CID" in (Staged().add("bafy-nonsense", b"x") or "")
    assert "not a CID" in (Staged().add(42, b"x") or "")


def test_a_cidv0_and_its_cidv1_name_one_staged_block() -> None:
    staged = Staged()
    v1 = cid_for(b"\x0a\x00", "dag-pb")
    v0 = str(ParsedCID(codec="dag-pb", digest=parse(v1).digest, version=0))
    assert staged.add(v0, b"\x0a\x00") is None
    assert staged[v1] == b"\x0a\x00" and v1 in staged


def test_past_the_spill_size_blocks_go_to_a_temporary_file_and_read_back_the_same() -> None:
    staged = Staged(spill_bytes=1000)
    blocks = {cid_for(bytes([i]) * 700, "raw"): bytes([i]) * 700 for i in range(5)}
    for cid, data in blocks.items():
        assert staged.add(cid, data) is None
    assert staged.nbytes == 3500 and all(staged[cid] == data for cid, data in blocks.items())
    staged.close()
    assert len(staged) == 0


def test_a_new_root_whose_new_blocks_were_all_handed_back_is_believed_and_only_then_stored() -> None:
    host, root, staged = _written({"a/b.txt": b"hello", "c.txt": b"x" * 300_000})
    before = set(host.cids())
    assert check_root(host, root, staged) is None
    assert set(host.cids()) == before  # checking writes nothing
    assert accept_root(host, root, staged) is None
    assert Fs(host, root).read("c.txt").value == b"x" * 300_000
    assert check_root(host, root) is None  # complete in the store alone now


def test_blocks_no_believed_root_reaches_are_not_stored() -> None:
    host, root, staged = _written({"a.txt": b"kept"})
    stray = cid_for(b"written, then left behind", "raw")
    staged.add(stray, b"written, then left behind")
    assert accept_root(host, root, staged) is None
    assert not host.has(stray)


def test_a_new_root_naming_a_block_nobody_handed_back_is_not_believed_and_nothing_is_stored() -> None:
    host, root, staged = _written({"a/b.txt": b"hello", "c.txt": b"x" * 300_000})
    leaf = next(c for c in staged if c.startswith("bafkrei"))
    partial = Staged()
    for cid in staged:
        if cid != leaf:
            partial.add(cid, staged[cid])
    before = set(host.cids())
    assert "neither in the store nor handed back" in (accept_root(host, root, partial) or "")
    assert set(host.cids()) == before


def test_a_directory_handed_back_earlier_is_not_in_the_store_to_be_believed_later() -> None:
    host = MemoryBlockStore()
    incomplete = encode_dir({"lost.txt": Entry(cid_for(b"nobody has this"), 15)})
    earlier = Staged()
    earlier.add(cid_for(incomplete, "dag-cbor"), incomplete)
    earlier.close()  # the run that handed it back ended without a root that reaches it
    assert "neither in the block store nor handed back" in (check_root(host, cid_for(incomplete, "dag-cbor")) or "")


def test_a_root_that_is_not_a_kuro_fs_directory_is_not_believed() -> None:
    staged = Staged()
    leaf = cid_for(b"just bytes", "raw")
    staged.add(leaf, b"just bytes")
    not_a_dir = cid_for(encode({"hello": "world"}), "dag-cbor")
    staged.add(not_a_dir, encode({"hello": "world"}))
    host = MemoryBlockStore()
    assert "not a dag-cbor directory" in (check_root(host, leaf, staged) or "")
    assert "not a kuro.fs directory" in (check_root(host, not_a_dir, staged) or "")
    assert "neither in the block store nor handed back" in (check_root(host, cid_for(b"{}", "dag-cbor")) or "")
    assert "not a CID string" in (check_root(host, 42) or "")


def test_a_handed_block_that_does_not_decode_is_not_believed() -> None:
    staged = Staged()
    bad = cid_for(b"\x00not dag-pb", "dag-pb")
    staged.add(bad, b"\x00not dag-pb")
    root_block = encode({"entries": {"f": {"cid": Link(bad), "size": 3}}, "type": "kuro.fs/dir", "version": 1})
    root = cid_for(root_block, "dag-cbor")
    staged.add(root, root_block)
    assert "does not decode" in (check_root(MemoryBlockStore(), root, staged) or "")


def test_blocks_already_in_the_store_are_not_walked_again() -> None:
    host = MemoryBlockStore()
    fs = Fs.empty(host).write("big.bin", b"y" * 600_000).fs
    assert check_root(host, fs.root) is None  # nothing handed back: the root was there before
