"""The stores and CAR reader read real IPFS data: CIDv0, identity, sha2-512 and blake3 (issue 17).

kuro.fs still mints CIDv1 sha2-256 only; these are names it reads and files blocks under. The block
store's batches, in-place reads and one-pass ``import_car`` (issue 12) keep every rule here.
Vectors: tests/vectors/cids.json ``readable``.
"""

from __future__ import annotations

import contextvars
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import blake3
import pytest
from fshelpers import PlainStore

from kuro_fs.blocks import BlockStore, MemoryBlockStore, put_block
from kuro_fs.car import import_car, read_car, write_car
from kuro_fs.cid import ParsedCID, cid_for, parse
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.errors import BlockStoreError, CarError, CorruptBlock, InvalidCID
from kuro_fs.fileread import read_bytes, read_into, read_range
from kuro_fs.filestore import PARALLEL_READ_BYTES, FileBlockStore
from kuro_fs.fs import Fs
from kuro_fs.fsdir import Entry, write_dir
from kuro_fs.unixfs import NodeType, UnixFSData, encode_data, iter_file, iter_leaves

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parent.parent / "vectors" / "cids.json").read_text(encoding="utf-8")
)
READABLE: dict[str, dict[str, Any]] = {}
for _case in VECTORS["readable"]:  # the first case of each hash (the empty identity CID comes second)
    READABLE.setdefault(_case["hash"] + ("-v0" if _case["version"] == 0 else ""), _case)
EMPTY_DIR_V0 = READABLE["sha2-256-v0"]["cid"]
SHA512 = READABLE["sha2-512"]["cid"]
BLAKE3 = READABLE["blake3"]["cid"]
IDENTITY = READABLE["identity"]["cid"]
HELLO = b"hello"


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BlockStore:
    return MemoryBlockStore() if request.param == "memory" else FileBlockStore(tmp_path / "blocks")


def test_bytes_that_do_not_hash_to_the_given_cid_are_refused_and_nothing_is_stored(store: BlockStore) -> None:
    for cid in (SHA512, BLAKE3, EMPTY_DIR_V0, IDENTITY):
        with pytest.raises(CorruptBlock, match="nothing stored"):
            put_block(store, cid, b"not the block")
    assert store.stats() == {"blocks": 0, "bytes": 0}


def test_a_malformed_cid_is_refused_before_any_bytes_are_looked_at(store: BlockStore) -> None:
    with pytest.raises(InvalidCID):
        put_block(store, "bafz-not-a-cid", b"x")


def test_an_identity_cid_is_always_present_and_never_stored(store: BlockStore) -> None:
    assert store.has(IDENTITY) and store.get(IDENTITY) == HELLO
    assert store.has("bafkqaaa") and store.get("bafkqaaa") == b""
    assert put_block(store, IDENTITY, HELLO) == IDENTITY
    assert store.stats() == {"blocks": 0, "bytes": 0}
    assert store.publish([IDENTITY]) == {"published": 1, "rejected": [], "reasons": {}}


def test_a_cidv0_and_its_cidv1_reach_the_same_stored_block(store: BlockStore) -> None:
    block = bytes.fromhex("0a020801")
    v1 = store.put(block, "dag-pb")
    assert v1 == READABLE["sha2-256-v0"]["key"]
    assert store.has(EMPTY_DIR_V0) and store.get(EMPTY_DIR_V0) == block
    assert put_block(store, EMPTY_DIR_V0, block) == EMPTY_DIR_V0
    assert store.stats()["blocks"] == 1
    assert store.delete(EMPTY_DIR_V0) == {"removed": True}
    assert not store.has(v1)


@pytest.mark.parametrize("which", ["sha2-512", "blake3"])
def test_a_block_named_by_another_hash_is_filed_verified_and_published(store: BlockStore, which: str) -> None:
    cid = READABLE[which]["cid"]
    assert not store.has(cid) and store.get(cid) is None
    assert put_block(store, cid, HELLO) == cid
    assert store.has(cid) and store.get(cid) == HELLO
    assert store.stats() == {"blocks": 1, "bytes": 5}
    assert store.publish([cid]) == {"published": 1, "rejected": [], "reasons": {}}


def test_a_rotten_sha2_512_block_on_disk_is_refused_on_get(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path / "blocks")
    put_block(store, SHA512, HELLO)
    (path,) = [p for p in (tmp_path / "blocks").rglob("b*") if p.is_file()]
    path.write_bytes(b"jello")
    with pytest.raises(CorruptBlock):
        store.get(SHA512)
    assert store.publish([SHA512])["reasons"] == {SHA512: "corrupt"}


def test_a_store_that_only_mints_cannot_be_handed_a_foreign_hash() -> None:
    class MintOnly:
        def __init__(self) -> None:
            self.inner = MemoryBlockStore()

        def put(self, data: bytes, codec: str = "raw") -> str:
            return self.inner.put(data, codec)

    with pytest.raises(BlockStoreError, match="cannot hold sha2-512"):
        put_block(MintOnly(), SHA512, HELLO)  # type: ignore[arg-type]


def test_a_car_of_real_ipfs_names_is_read_verified_and_imported(tmp_path: Path, store: BlockStore) -> None:
    leaf = b"leaf"
    leaf_512 = "b" + _b32(bytes([1, 0x55, 0x13, 0x40]) + hashlib.sha512(leaf).digest())
    leaf_b3 = "b" + _b32(bytes([1, 0x55, 0x1E, 0x20]) + blake3.blake3(leaf).digest())
    blocks = [(EMPTY_DIR_V0, bytes.fromhex("0a020801")), (leaf_512, leaf), (leaf_b3, leaf)]
    car = b"".join(write_car([EMPTY_DIR_V0], blocks))
    roots, sections = read_car(io.BytesIO(car))
    assert roots == [EMPTY_DIR_V0] and list(sections) == blocks
    path = tmp_path / "real.car"
    path.write_bytes(car)
    assert import_car(store, path) == [EMPTY_DIR_V0]
    assert all(store.get(cid) == data for cid, data in blocks)
    assert parse(leaf_512).hash == "sha2-512" and store.has(cid_for(bytes.fromhex("0a020801"), "dag-pb"))


def _b32(data: bytes) -> str:
    import base64

    return base64.b32encode(data).decode().rstrip("=").lower()


# ---- the block store's batches, in-place reads and one-pass import keep the reading profile


def _leaf_cids(a: bytes, b: bytes) -> tuple[str, str]:
    return (
        "b" + _b32(bytes([1, 0x55, 0x1E, 0x20]) + blake3.blake3(a).digest()),
        "b" + _b32(bytes([1, 0x55, 0x13, 0x40]) + hashlib.sha512(b).digest()),
    )


def test_a_batch_files_foreign_names_under_their_keys_and_never_stages_an_identity_block(store: BlockStore) -> None:
    empty_dir = bytes.fromhex("0a020801")
    named = [(SHA512, HELLO), (BLAKE3, HELLO), (EMPTY_DIR_V0, empty_dir), (IDENTITY, HELLO)]
    outside = contextvars.copy_context()  # a context the batch is not active in
    with store.batch():  # type: ignore[attr-defined]
        for cid, data in named:
            assert put_block(store, cid, data) == cid
            assert store.has(cid) and store.get(cid) == data  # staged blocks are readable in the batch
            assert outside.run(store.has, cid) is (cid == IDENTITY)  # and nowhere else yet
        with pytest.raises(CorruptBlock, match="nothing stored"):
            store.put(b"not hello", "raw", cid=SHA512)  # type: ignore[call-arg]
    assert store.stats() == {"blocks": 3, "bytes": 14}  # identity is never a block
    assert all(store.get(cid) == data for cid, data in named)
    assert store.has(READABLE["sha2-256-v0"]["key"])  # the CIDv0 was filed under its CIDv1


def test_a_batch_that_raises_leaves_none_of_its_foreign_blocks(store: BlockStore) -> None:
    with pytest.raises(RuntimeError), store.batch():  # type: ignore[attr-defined]
        put_block(store, SHA512, HELLO)
        put_block(store, EMPTY_DIR_V0, bytes.fromhex("0a020801"))
        raise RuntimeError("the import failed half-way")
    assert store.stats() == {"blocks": 0, "bytes": 0}
    assert not store.has(SHA512) and not store.has(EMPTY_DIR_V0)


def test_get_into_checks_each_block_in_place_under_its_own_hash(tmp_path: Path) -> None:
    store = FileBlockStore(tmp_path / "blocks")
    for cid in (SHA512, BLAKE3):
        put_block(store, cid, HELLO)
        whole, part = bytearray(5), bytearray(3)
        assert store.get_into(cid, memoryview(whole)) == 5 and whole == HELLO  # the in-place path
        assert store.get_into(cid, memoryview(part), 1) == 5 and part == b"ell"  # the range path
    identity = bytearray(5)
    assert store.get_into(IDENTITY, memoryview(identity)) == 5 and identity == HELLO
    put_block(store, EMPTY_DIR_V0, bytes.fromhex("0a020801"))
    v0 = bytearray(4)
    assert store.get_into(EMPTY_DIR_V0, memoryview(v0)) == 4 and v0 == bytes.fromhex("0a020801")
    for cid in (SHA512, BLAKE3):
        key = parse(cid).key
        (tmp_path / "blocks" / key[-3:-1] / key).write_bytes(b"jello")  # same size: only the hash can tell
        with pytest.raises(CorruptBlock):
            store.get_into(cid, memoryview(bytearray(5)))
        with pytest.raises(CorruptBlock):
            store.get_into(cid, memoryview(bytearray(3)), 1)


def test_a_file_of_foreign_names_reads_into_one_buffer_as_iter_file_reads_it(tmp_path: Path) -> None:
    # A CIDv0 file root over a blake3 leaf and a sha2-512 leaf, past the threaded-read threshold.
    a, b = bytes(range(256)) * (PARALLEL_READ_BYTES // 512 + 7), b"\x5a" * (PARALLEL_READ_BYTES // 2 + 11)
    leaf_b3, leaf_512 = _leaf_cids(a, b)
    store = FileBlockStore(tmp_path / "blocks")
    put_block(store, leaf_b3, a)
    put_block(store, leaf_512, b)
    meta = UnixFSData(NodeType.FILE, filesize=len(a) + len(b), blocksizes=(len(a), len(b)))
    links = (PBLink(parse(leaf_b3).bytes, "", len(a)), PBLink(parse(leaf_512).bytes, "", len(b)))
    node = encode_pb(PBNode(links, encode_data(meta)))
    root = str(ParsedCID("dag-pb", hashlib.sha256(node).digest(), version=0))
    assert put_block(store, root, node) == root and root.startswith("Qm")
    whole = a + b
    assert b"".join(iter_file(store.get, root)) == whole
    assert read_bytes(store, root) == whole and read_range(store, root, len(a) - 3, 6) == whole[len(a) - 3 : len(a) + 3]
    out = bytearray(len(whole))
    assert read_into(store, root, out) == len(whole) and out == whole
    assert list(iter_leaves(store.get, root)) == [(0, leaf_b3, len(a)), (len(a), leaf_512, len(b))]
    assert read_bytes(store, leaf_b3) == a and read_bytes(store, leaf_512, 5, 5) == b[5:10]  # a one-leaf file
    one = bytearray(7)
    assert read_into(store, leaf_b3, one, 1) == 7 and one == a[1:8]
    fs = Fs.empty(store).link("foreign.bin", root).fs
    assert fs.read("foreign.bin").value == whole
    key = parse(leaf_512).key
    (tmp_path / "blocks" / key[-3:-1] / key).write_bytes(b"\x5b" * len(b))
    with pytest.raises(CorruptBlock) as info:
        read_bytes(store, root)
    assert info.value.cid == leaf_512


def test_a_car_of_real_ipfs_names_imports_all_or_nothing_into_every_store(tmp_path: Path) -> None:
    leaf_b3, leaf_512 = _leaf_cids(b"leaf", b"leaf")
    blocks = [(EMPTY_DIR_V0, bytes.fromhex("0a020801")), (IDENTITY, HELLO), (leaf_512, b"leaf"), (leaf_b3, b"leaf")]
    good = b"".join(write_car([EMPTY_DIR_V0], blocks))
    (tmp_path / "good.car").write_bytes(good)
    (tmp_path / "bad.car").write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # the last (blake3) block no longer hashes
    stores: list[Any] = [MemoryBlockStore(), FileBlockStore(tmp_path / "blocks"), PlainStore()]
    for store in stores:
        with pytest.raises(CarError, match="does not hash"):
            import_car(store, tmp_path / "bad.car")
        assert store.stats()["blocks"] == 0
        assert import_car(store, tmp_path / "good.car") == [EMPTY_DIR_V0]
        assert store.stats()["blocks"] == 3  # the identity block is its own name, never stored
        assert all(store.get(cid) == data for cid, data in blocks)
    assert not any(p.name.startswith(".batch-") for p in (tmp_path / "blocks").iterdir())


def _named_by(which: str, block: bytes) -> str:
    digest = hashlib.sha512(block).digest() if which == "sha2-512" else blake3.blake3(block).digest()
    return str(ParsedCID("dag-cbor", digest, hash=which))


@pytest.mark.parametrize("entries", [3, 300], ids=["flat", "sharded"])
@pytest.mark.parametrize("which", ["sha2-512", "blake3"])
def test_a_kuro_fs_directory_named_by_another_hash_is_listed_and_read(
    store: BlockStore, which: str, entries: int
) -> None:
    # A directory block (flat, or the root of a sharded one) that arrived under a sha2-512 or blake3 CID
    # (say from a CAR) is a directory like any other: its bytes are checked under the CID's own hash.
    files = {f"f{i:03d}": Entry(store.put(b"%d" % i), len(b"%d" % i)) for i in range(entries)}
    block = store.get(write_dir(store, files))
    assert block is not None
    root = put_block(store, _named_by(which, block), block)
    fs = Fs(store, root)
    assert [e["name"] for e in fs.ls("/").value] == sorted(files)
    assert fs.read("f002").value == b"2"
    written = fs.write("new.txt", b"n")
    assert written.ok and parse(written.fs.root).hash == "sha2-256"  # the new root is minted as always
    assert written.fs.read("new.txt").value == b"n"


def test_a_directory_block_that_does_not_hash_to_its_foreign_name_is_corrupt(store: BlockStore) -> None:
    block = store.get(write_dir(store, {"a": Entry(store.put(b"a"), 1)}))
    assert block is not None
    name = _named_by("sha2-512", block)
    put_block(store, name, block)
    if isinstance(store, FileBlockStore):
        (path,) = [p for p in store.root.rglob(name) if p.is_file()]
        path.write_bytes(block.replace(b"a", b"b"))
        refused = Fs(store, name).read("a")
        assert (refused.receipt["kuro.fs/reason"], refused.receipt["kuro.fs/cid"]) == ("block-missing", name)
