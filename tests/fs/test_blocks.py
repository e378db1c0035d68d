"""The BlockStore contract: every store speaks the same seven operations with the same shapes.

One suite, parametrized over MemoryBlockStore and FileBlockStore. Bad input first.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import BlockStore, MemoryBlockStore
from kuro_fs.cid import cid_for, raw_cid
from kuro_fs.errors import InvalidCID
from kuro_fs.filestore import FileBlockStore, shard_of

BAD_CIDS = ["", "Qmfoo", "bafkrei", "../../etc/passwd", "bafkrei/../../x", "BAFKREI"]


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest) -> BlockStore:
    name = "memory_store" if request.param == "memory" else "file_store"
    result: BlockStore = request.getfixturevalue(name)
    return result


def _corrupt(store: BlockStore, cid: str, data: bytes) -> None:
    """Make the block stored under ``cid`` hold ``data`` (bypassing put's minting)."""
    if isinstance(store, MemoryBlockStore):
        store._blocks[cid] = data
    elif isinstance(store, FileBlockStore):
        (store.root / shard_of(cid) / cid).write_bytes(data)
    else:  # pragma: no cover
        raise AssertionError(type(store))


# ---- bad input


@pytest.mark.parametrize("bad", BAD_CIDS)
def test_every_cid_taking_operation_refuses_a_malformed_cid(store: BlockStore, bad: str) -> None:
    for op in (store.get, store.has, store.delete):
        with pytest.raises(InvalidCID):
            op(bad)


def test_put_under_an_unknown_codec_is_refused_and_stores_nothing(store: BlockStore) -> None:
    with pytest.raises(InvalidCID):
        store.put(b"x", "dag-json")
    assert store.stats() == {"blocks": 0, "bytes": 0}


@pytest.mark.parametrize("data", ["hello", 5, True, [1, 2], None, 1.5], ids=repr)
def test_put_of_anything_but_bytes_is_a_type_error_and_stores_nothing(store: BlockStore, data: object) -> None:
    # bytes(5) is five zero bytes and bytes([1, 2]) two bytes: a silent wrong block, not a block.
    with pytest.raises(TypeError):
        store.put(data)  # type: ignore[arg-type]
    assert store.stats() == {"blocks": 0, "bytes": 0}


def test_publish_rejects_malformed_missing_and_corrupt_blocks_with_reasons(store: BlockStore) -> None:
    good = store.put(b"good")
    bad = store.put(b"will rot")
    _corrupt(store, bad, b"rotten!!")
    missing = raw_cid(b"never stored")
    result = store.publish([good, missing, bad, "Qmfoo"])
    assert result == {
        "published": 1,
        "rejected": [missing, bad, "Qmfoo"],
        "reasons": {missing: "missing", bad: "corrupt", "Qmfoo": "invalid-cid"},
    }


def test_publish_rejects_a_non_string_cid_as_invalid(store: BlockStore) -> None:
    result = store.publish([42])  # type: ignore[list-item]
    assert result == {"published": 0, "rejected": ["42"], "reasons": {"42": "invalid-cid"}}


# ---- the seven operations


def test_put_returns_the_cid_minted_from_the_bytes(store: BlockStore) -> None:
    assert store.put(b"hello") == "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq"
    assert store.put(b"\xa0", "dag-cbor") == cid_for(b"\xa0", "dag-cbor")
    assert store.put(bytes.fromhex("0a020801"), "dag-pb") == (
        "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354"
    )


def test_put_then_get_round_trips_the_bytes(store: BlockStore) -> None:
    cid = store.put(b"hello")
    assert store.get(cid) == b"hello"
    assert store.has(cid)


def test_put_accepts_bytearray_and_memoryview(store: BlockStore) -> None:
    assert store.put(bytearray(b"ab")) == store.put(memoryview(b"ab")) == raw_cid(b"ab")  # type: ignore[arg-type]
    assert store.get(raw_cid(b"ab")) == b"ab"


def test_the_empty_block_is_a_block(store: BlockStore) -> None:
    cid = store.put(b"")
    assert store.get(cid) == b""
    assert store.has(cid)
    assert store.stats() == {"blocks": 1, "bytes": 0}


def test_a_miss_is_none_not_an_error(store: BlockStore) -> None:
    cid = raw_cid(b"absent")
    assert store.get(cid) is None
    assert store.has(cid) is False


def test_the_same_bytes_under_another_codec_are_another_block(store: BlockStore) -> None:
    a = store.put(b"\xa0", "raw")
    b = store.put(b"\xa0", "dag-cbor")
    assert a != b
    assert store.stats() == {"blocks": 2, "bytes": 2}


def test_put_is_idempotent(store: BlockStore) -> None:
    first = store.put(b"twice")
    second = store.put(b"twice")
    assert first == second
    assert store.stats() == {"blocks": 1, "bytes": 5}


def test_delete_removes_then_reports_false_on_the_second_call(store: BlockStore) -> None:
    cid = store.put(b"gone soon")
    assert store.delete(cid) == {"removed": True}
    assert store.delete(cid) == {"removed": False}
    assert store.get(cid) is None
    assert not store.has(cid)


def test_deleting_a_block_never_stored_succeeds_with_removed_false(store: BlockStore) -> None:
    assert store.delete(raw_cid(b"never")) == {"removed": False}


def test_stats_counts_blocks_and_bytes(store: BlockStore) -> None:
    assert store.stats() == {"blocks": 0, "bytes": 0}
    store.put(b"abc")
    store.put(b"defgh")
    assert store.stats() == {"blocks": 2, "bytes": 8}
    store.delete(raw_cid(b"abc"))
    assert store.stats() == {"blocks": 1, "bytes": 5}


def test_publish_counts_blocks_whose_bytes_match_their_cid(store: BlockStore) -> None:
    cids = [store.put(b"one"), store.put(b"two", "dag-cbor"), store.put(b"three", "dag-pb")]
    assert store.publish(cids) == {"published": 3, "rejected": [], "reasons": {}}


def test_publish_checks_a_repeated_cid_once(store: BlockStore) -> None:
    cid = store.put(b"one")
    assert store.publish([cid, cid, cid]) == {"published": 1, "rejected": [], "reasons": {}}


def test_publish_counts_one_block_once_whatever_name_it_is_given(store: BlockStore) -> None:
    # A CIDv0 and its CIDv1 are one block (filed under one key): publishing it under each name
    # once counted it twice.
    from multiformats import CID

    cid = store.put(b"node", "dag-pb")
    v0 = str(CID.decode(cid).set(base="base58btc", version=0))
    assert store.publish([cid, v0, cid]) == {"published": 1, "rejected": [], "reasons": {}}
    absent = cid_for(b"absent", "dag-pb")
    absent_v0 = str(CID.decode(absent).set(base="base58btc", version=0))
    assert store.publish([absent, absent_v0]) == {"published": 0, "rejected": [absent], "reasons": {absent: "missing"}}


def test_publish_of_nothing_publishes_nothing(store: BlockStore) -> None:
    assert store.publish([]) == {"published": 0, "rejected": [], "reasons": {}}


def test_drop_cache_removes_every_block_and_says_how_many(store: BlockStore) -> None:
    for i in range(5):
        store.put(bytes([i]) * i)
    assert store.drop_cache() == {"removed": 5}
    assert store.stats() == {"blocks": 0, "bytes": 0}
    assert store.drop_cache() == {"removed": 0}


def test_a_store_works_again_after_drop_cache(store: BlockStore) -> None:
    store.put(b"before")
    store.drop_cache()
    cid = store.put(b"after")
    assert store.get(cid) == b"after"


def test_both_stores_satisfy_the_protocol(store: BlockStore) -> None:
    assert isinstance(store, BlockStore)


# ---- properties


@given(blobs=st.lists(st.binary(max_size=300), max_size=12))
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_store_agrees_with_a_dict_model(tmp_path: Path, blobs: list[bytes]) -> None:
    for store in (MemoryBlockStore(), FileBlockStore(tmp_path / hashlib.sha256(repr(blobs).encode()).hexdigest())):
        store.drop_cache()
        model = {raw_cid(b): b for b in blobs}
        for blob in blobs:
            store.put(blob)
        assert store.stats() == {"blocks": len(model), "bytes": sum(map(len, model.values()))}
        for cid, blob in model.items():
            assert store.get(cid) == blob
        assert store.publish(list(model))["published"] == len(model)
        for cid in list(model)[::2]:
            assert store.delete(cid) == {"removed": True}
            del model[cid]
        assert store.stats()["blocks"] == len(model)
        assert store.drop_cache() == {"removed": len(model)}
