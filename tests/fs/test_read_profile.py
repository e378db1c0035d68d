"""The stores and CAR reader read real IPFS data: CIDv0, identity, sha2-512 and blake3 (issue 17).

kuro.fs still mints CIDv1 sha2-256 only; these are names it reads and files blocks under.
Vectors: tests/vectors/cids.json ``readable``.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import blake3
import pytest

from kuro_fs.blocks import BlockStore, MemoryBlockStore, put_block
from kuro_fs.car import import_car, read_car, write_car
from kuro_fs.cid import cid_for, parse
from kuro_fs.errors import BlockStoreError, CorruptBlock, InvalidCID
from kuro_fs.filestore import FileBlockStore

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
