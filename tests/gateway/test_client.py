"""GatewayBlockStore: fetch by CID, verify before caching or returning, publish to custody.

Lying, failing and slow gateways are httpx.MockTransport fakes; the round trips go to the real
gateway on 127.0.0.1.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from gateway_helpers import MANIFEST, TOKEN

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.car import write_car
from kuro_fs.cid import cid_for, parse, raw_cid
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.errors import (
    BlockStoreError,
    CorruptBlock,
    GatewayError,
    GatewayLied,
    GatewayRefused,
    GatewayTimeout,
    GatewayUnreachable,
    InvalidCID,
)
from kuro_fs.fileread import read_file
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_fs.gateway.client import MAX_ERROR_BODY, MAX_FETCHED_BLOCK, GatewayBlockStore
from kuro_fs.importer import import_bytes
from kuro_fs.varint import encode_uvarint

HELLO = raw_cid(b"hello")


def _fake(
    handler: Callable[[httpx.Request], httpx.Response], cache: MemoryBlockStore | None = None
) -> GatewayBlockStore:
    return GatewayBlockStore("http://gateway.test", cache, transport=httpx.MockTransport(handler))


# ---- bad input and bad gateways


@pytest.mark.parametrize("url", ["", "ftp://x", "127.0.0.1:8080", None, 5])
def test_a_gateway_url_that_is_not_http_is_refused(url: object) -> None:
    with pytest.raises(BlockStoreError, match="http"):
        GatewayBlockStore(url)  # type: ignore[arg-type]


@pytest.mark.parametrize("token", ["t\u00f6k\u00e9n", "bell\x07", "", "   ", b"bytes"])
def test_a_custody_token_no_http_header_can_carry_is_refused_when_the_store_is_made(token: object) -> None:
    with pytest.raises(ValueError, match="printable ASCII"):
        GatewayBlockStore("http://gateway.test", token=token)  # type: ignore[arg-type]


def test_a_malformed_cid_is_refused_before_any_request() -> None:
    store = _fake(lambda r: pytest.fail("no request may be sent"))  # type: ignore[arg-type]
    for call in (store.get, store.has):
        with pytest.raises(InvalidCID):
            call("bafy-nope")


def test_bytes_that_do_not_hash_to_the_cid_are_a_lie_and_nothing_is_cached() -> None:
    cache = MemoryBlockStore()
    store = _fake(lambda r: httpx.Response(200, content=b"jello"), cache)
    with pytest.raises(GatewayLied) as info:
        store.get(HELLO)
    assert isinstance(info.value, CorruptBlock) and isinstance(info.value, GatewayError)
    assert cache.stats() == {"blocks": 0, "bytes": 0}


def test_a_car_with_a_block_that_does_not_hash_is_a_lie() -> None:
    leaf = b"leaf bytes"
    fs_store = MemoryBlockStore()
    root = import_bytes(fs_store, leaf * 100, chunk_size=100, width=4)
    blocks = [(c, fs_store.get(c) or b"") for c in [root, *fs_store.cids()] if c != root]
    tampered = [(root, fs_store.get(root) or b"")] + [(c, b"x" + b[1:]) for c, b in blocks]
    body = b"".join(write_car([root], tampered))
    cache = MemoryBlockStore()
    store = _fake(lambda r: httpx.Response(200, content=body), cache)
    with pytest.raises(GatewayLied):
        store.fetch_entity(root)
    assert cache.stats()["blocks"] <= 1  # at most the verified root


def test_a_car_that_slips_in_a_block_nobody_asked_for_is_a_lie() -> None:
    fs_store = MemoryBlockStore()
    root = fs_store.put(b"root block")
    stranger = fs_store.put(b"a block nobody asked for")
    body = b"".join(write_car([root], [(root, b"root block"), (stranger, b"a block nobody asked for")]))
    cache = MemoryBlockStore()
    with pytest.raises(GatewayLied, match="nobody asked for"):
        _fake(lambda r: httpx.Response(200, content=body), cache).fetch_entity(root)
    assert not cache.has(stranger)


@pytest.mark.parametrize(
    ("respond", "error"),
    [
        (lambda r: httpx.Response(500, text="boom"), GatewayRefused),
        (lambda r: httpx.Response(401, text="who are you"), GatewayRefused),
        (lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused", request=r)), GatewayUnreachable),
        (lambda r: (_ for _ in ()).throw(httpx.RemoteProtocolError("cut", request=r)), GatewayUnreachable),
        (lambda r: (_ for _ in ()).throw(httpx.ReadTimeout("slow", request=r)), GatewayTimeout),
    ],
    ids=["500", "401", "connect", "cut", "timeout"],
)
def test_network_failures_are_distinct_typed_block_store_errors(
    respond: Callable[[httpx.Request], httpx.Response], error: type[Exception]
) -> None:
    store = _fake(respond)
    for call in (store.get, store.has):
        with pytest.raises(error) as info:
            call(HELLO)
        assert isinstance(info.value, BlockStoreError)
    if error is GatewayRefused:  # the status the gateway answered, not merely some refusal status
        assert info.value.status == respond(httpx.Request("GET", "http://gw/")).status_code  # type: ignore[attr-defined]


def test_a_404_is_a_miss_not_an_error() -> None:
    store = _fake(lambda r: httpx.Response(404, text="not held"))
    assert store.get(HELLO) is None and store.has(HELLO) is False
    assert store.get(cid_for(b"x", "dag-pb")) is None  # the CAR path's 404 is a miss too


def test_an_unreachable_gateway_is_unreachable() -> None:
    store = GatewayBlockStore("http://127.0.0.1:9", timeout=5)
    with pytest.raises(GatewayUnreachable):
        store.get(HELLO)


def test_the_probe_passes_a_real_trustless_gateway(gateway: str) -> None:
    with GatewayBlockStore(gateway) as store:
        store.probe()


@pytest.mark.parametrize(
    ("respond", "says"),
    [
        (lambda r: httpx.Response(200, text="<html>hello</html>", headers={"content-type": "text/html"}), "text/html"),
        (lambda r: httpx.Response(200, content=b"x", headers={"content-type": "application/vnd.ipld.raw"}), "200"),
        (lambda r: httpx.Response(404, text="no such path"), "404"),
        (lambda r: httpx.Response(301, headers={"location": "http://elsewhere/"}), "301"),
    ],
    ids=["web-page", "wrong-bytes", "404", "redirect"],
)
def test_the_probe_refuses_a_server_that_is_no_trustless_gateway(
    respond: Callable[[httpx.Request], httpx.Response], says: str
) -> None:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return respond(request)

    with pytest.raises(GatewayRefused, match="does not answer the trustless gateway protocol") as info:
        _fake(handler).probe()
    assert says in str(info.value) and asked == ["http://gateway.test/ipfs/bafkqaaa?format=raw"]


def test_the_probe_of_an_unreachable_gateway_is_unreachable() -> None:
    with pytest.raises(GatewayUnreachable):
        GatewayBlockStore("http://127.0.0.1:9", timeout=5).probe()


def test_a_closed_store_refuses_network_operations_and_closing_twice_is_fine() -> None:
    store = _fake(lambda r: httpx.Response(404))
    store.close()
    store.close()
    with pytest.raises(BlockStoreError, match="closed"):
        store.get(HELLO)


def test_identity_cids_never_touch_the_network() -> None:
    store = _fake(lambda r: pytest.fail("no request may be sent"))  # type: ignore[arg-type]
    assert store.get("bafkqablimvwgy3y") == b"hello" and store.has("bafkqaaa")


# ---- a hostile gateway cannot make the client hold more than a block


class _Hose:
    """An endless body (bounded at 64 MiB so a broken cap fails instead of hanging), counting what was taken."""

    def __init__(self, first: bytes = b"", chunk: bytes = b"x" * 65536) -> None:
        self.first = first
        self.chunk = chunk
        self.taken = 0

    def __iter__(self) -> Iterator[bytes]:
        yield self.first
        self.taken += len(self.first)
        while self.taken < 64 << 20:
            self.taken += len(self.chunk)
            yield self.chunk


def test_a_raw_body_past_the_block_cap_is_refused_without_reading_the_rest() -> None:
    hose = _Hose()
    cache = MemoryBlockStore()
    store = _fake(lambda r: httpx.Response(200, content=hose), cache)
    with pytest.raises(GatewayLied, match="block cap"):
        store.get(HELLO)
    assert MAX_FETCHED_BLOCK < hose.taken <= MAX_FETCHED_BLOCK + 2 * 65536
    assert cache.stats()["blocks"] == 0


def test_a_declared_length_past_the_block_cap_is_refused_before_the_body_is_read() -> None:
    hose = _Hose()
    store = _fake(lambda r: httpx.Response(200, content=hose, headers={"Content-Length": str(64 << 20)}))
    with pytest.raises(GatewayLied, match="block cap"):
        store.get(HELLO)
    assert hose.taken == 0


def test_an_endless_error_body_is_read_only_as_far_as_its_first_kilobytes() -> None:
    hose = _Hose(first=b"the gateway is sad\n")
    store = _fake(lambda r: httpx.Response(500, content=hose))
    with pytest.raises(GatewayRefused, match="500 the gateway is sad") as info:
        store.get(HELLO)
    assert hose.taken <= MAX_ERROR_BODY + 65536 + 32 and len(str(info.value)) < 400
    with pytest.raises(GatewayRefused):
        store.prefetch(cid_for(b"x", "dag-pb"))
    assert hose.taken <= 2 * (MAX_ERROR_BODY + 65536 + 32)


@functools.cache
def _bomb() -> bytes:
    # About 1 KB that a gzip-of-gzip decoder turns into 512 MiB in one call.
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return gzip.compress(b"".join([*(inner.compress(zeros) for _ in range(512)), inner.flush()]), 9)


@pytest.mark.parametrize("status", [200, 404, 500])
def test_a_compressed_bomb_is_never_inflated(status: int) -> None:
    # httpx decodes any Content-Encoding a server names, whatever was asked for: one 1 KB chunk of
    # `gzip, gzip` became 512 MiB in memory before the block cap saw a byte. The client asks for identity
    # and refuses an encoded answer unread.
    bomb = _bomb()
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("accept-encoding", ""))
        return httpx.Response(status, content=iter([bomb]), headers={"Content-Encoding": "gzip, gzip"})

    cache = MemoryBlockStore()
    store = _fake(handler, cache)
    tracemalloc.start()
    try:
        if status == 404:
            assert store.get(HELLO) is None
        else:
            with pytest.raises(GatewayError):
                store.get(HELLO)
        with pytest.raises(GatewayError):
            store.prefetch(cid_for(b"x", "dag-pb"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak
    assert asked and all(a == "identity" for a in asked) and cache.stats()["blocks"] == 0


def test_an_answer_in_a_content_encoding_is_refused_naming_it() -> None:
    body = gzip.compress(b"hello")
    store = _fake(lambda r: httpx.Response(200, content=iter([body]), headers={"Content-Encoding": "gzip"}))
    with pytest.raises(GatewayRefused, match="Content-Encoding 'gzip'"):
        store.get(HELLO)
    plain = _fake(lambda r: httpx.Response(200, content=iter([b"hello"]), headers={"Content-Encoding": "identity"}))
    assert plain.get(HELLO) == b"hello"


def _car_head(root: str) -> bytes:
    return b"".join(write_car([root], []))


def test_a_car_section_longer_than_a_block_is_refused_from_its_length_prefix() -> None:
    root = cid_for(b"x", "dag-pb")
    hose = _Hose(first=_car_head(root) + encode_uvarint(200 << 20))
    cache = MemoryBlockStore()
    with pytest.raises(GatewayLied, match="out of range"):
        _fake(lambda r: httpx.Response(200, content=hose), cache).prefetch(root)
    assert hose.taken <= 2 * 65536 and cache.stats()["blocks"] == 0


def test_a_car_that_repeats_a_block_is_a_lie_at_the_second_copy() -> None:
    block = b"the one block"
    root = raw_cid(block)
    section = b"".join(write_car([root], [(root, block)]))[len(_car_head(root)) :]
    hose = _Hose(first=_car_head(root), chunk=section)
    cache = MemoryBlockStore()
    with pytest.raises(GatewayLied, match="twice"):
        _fake(lambda r: httpx.Response(200, content=hose), cache).prefetch(root)
    assert hose.taken < 65536 and cache.stats()["blocks"] == 1


@pytest.mark.parametrize("url", ["http://[::1", "http://", "http://host:99999", "http://:80", "http://a b/"])
def test_a_malformed_gateway_url_is_refused_when_the_store_is_made(url: str) -> None:
    with pytest.raises(BlockStoreError, match="gateway URL"):
        GatewayBlockStore(url)


# ---- CIDs in every multibase the IPFS stack reads


def _multibase_forms(cid: str) -> list[str]:
    from multiformats import CID

    parsed = CID.decode(cid)
    return [parsed.encode(base) for base in ("base58btc", "base36", "base16", "base32upper")]


def test_a_cid_in_any_multibase_is_fetched_and_cached_under_its_canonical_name() -> None:
    asked: list[str] = []

    def serve(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return httpx.Response(200, content=b"hello")

    cache = MemoryBlockStore()
    store = _fake(serve, cache)
    for form in _multibase_forms(HELLO):
        assert store.get(form) == b"hello" and store.has(form)
    assert asked == [f"/ipfs/{HELLO}"] and cache.cids() == [HELLO]


# ---- against the real gateway


def _counting(store: GatewayBlockStore) -> list[httpx.Request]:
    sent: list[httpx.Request] = []
    store._client.event_hooks["request"] = [sent.append]
    return sent


def test_reading_a_few_bytes_of_a_big_file_fetches_only_the_blocks_on_the_way(
    gateway: str, kuro_fs_tree: Fs, fixture_store: FileBlockStore
) -> None:
    from gateway_helpers import KURO_FS_FILE

    file_cid = kuro_fs_tree.stat("docs/big/file.bin").value["cid"]
    cache = MemoryBlockStore()
    with GatewayBlockStore(gateway, cache) as store:
        fs = Fs(store, kuro_fs_tree.root)
        sent = _counting(store)
        assert fs.read_range("docs/big/file.bin", 300_000, 5).value == KURO_FS_FILE[300_000:300_005]
    assert all(r.url.params["format"] == "raw" for r in sent)
    assert cache.get(file_cid) is not None
    leaves = [c for c in cache.cids() if c != file_cid and parse(c).codec == "raw"]
    assert len(leaves) == 1 and len(fixture_store.get(leaves[0]) or b"") == 262_144  # one leaf, not the file


def test_a_whole_file_asked_for_with_prefetch_comes_as_one_verified_car_and_reads_back(
    gateway: str, kuro_fs_tree: Fs
) -> None:
    from gateway_helpers import KURO_FS_FILE

    file_cid = kuro_fs_tree.stat("docs/big/file.bin").value["cid"]
    cache = MemoryBlockStore()
    with GatewayBlockStore(gateway, cache) as store:
        sent = _counting(store)
        assert store.prefetch(file_cid) == 4  # the root and its three leaves
        assert [r.url.params["format"] for r in sent] == ["car"]
        assert read_file(store, file_cid) == KURO_FS_FILE
        assert len(sent) == 1  # every block was in the cache
        assert store.prefetch(file_cid, entity_bytes=(0, 4)) == 2  # a range: the root and the first leaf


def test_a_car_holding_less_than_the_dag_is_kept_for_what_it_holds_and_reads_fetch_the_rest() -> None:
    # A prefetch is an optimisation, not a proof of completeness: a well-formed dag-scope=all CAR with the
    # root alone is accepted (1 block), and reading the file fetches each block it left out, one request each.
    source = MemoryBlockStore()
    data = bytes(i * 7 % 251 for i in range(1024))  # four different leaves
    root = import_bytes(source, data, chunk_size=256, width=4)
    root_only = b"".join(write_car([root], [(root, source.get(root) or b"")]))
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.params["format"])
        if request.url.params["format"] == "car":
            return httpx.Response(200, content=root_only)
        return httpx.Response(200, content=source.get(request.url.path.rsplit("/", 1)[1]) or b"")

    cache = MemoryBlockStore()
    store = _fake(handler, cache)
    assert store.prefetch(root, "all") == 1
    assert cache.cids() == [root]
    assert read_file(store, root) == data
    assert sent == ["car"] + ["raw"] * 4  # the four leaves the CAR did not hold
    assert sorted(cache.cids()) == sorted(source.cids())


def test_real_ipfs_data_reads_through_the_store(gateway: str) -> None:
    mixed = MANIFEST["subdir-with-mixed-block-files"]
    sha = MANIFEST["sha2-512-file"]
    with GatewayBlockStore(gateway) as store:
        assert read_file(store, sha["root"]) == bytes.fromhex(sha["bytes"])  # sha2-512 blocks
        assert read_file(store, mixed["subdir/multiblock.txt"]) == bytes.fromhex(mixed["multiblock_bytes"])  # CIDv0
        assert store.get(mixed["root"]) is not None
    with GatewayBlockStore(gateway) as fresh:
        assert fresh.fetch_entity(mixed["subdir/multiblock.txt"]) == 6
        got = b"".join(fresh.get(c) or b"" for c in mixed["multiblock_descendants"])
        assert got == bytes.fromhex(mixed["multiblock_bytes"])
        assert fresh.fetch_entity(sha["root"]) == 1 + len(sha["descendants"])


def test_publish_pushes_a_root_and_its_dag_to_custody(
    gateway: str, fixture_store: FileBlockStore, tmp_path: Path
) -> None:
    cache = FileBlockStore(tmp_path / "cache")
    data = hashlib.sha256(b"seed").digest() * 20_000
    with GatewayBlockStore(gateway, cache, token=TOKEN) as store:
        root = import_bytes(store, data, chunk_size=65536, width=4)
        assert not fixture_store.has(root)  # nothing is pushed implicitly
        result = store.publish([root, root])
        assert result == {"published": cache.stats()["blocks"], "rejected": [], "reasons": {}}
    assert read_file(fixture_store, root) == data


def test_publish_pushes_and_counts_one_block_once_whatever_name_it_is_given() -> None:
    # A CIDv0 and its CIDv1 are one block: named both ways (or linked both ways in a DAG) it was
    # PUT twice and counted twice.
    from multiformats import CID

    cache = MemoryBlockStore()
    leaf = cache.put(b"leaf")
    node = cache.put(encode_pb(PBNode((PBLink.to(leaf, "a", 4),))), "dag-pb")
    v0 = str(CID.decode(node).set(base="base58btc", version=0))
    put: list[str] = []

    def custody(request: httpx.Request) -> httpx.Response:
        put.append(request.url.path)
        return httpx.Response(201, json={"cid": request.url.path.rsplit("/", 1)[1], "stored": True})

    store = GatewayBlockStore("http://gateway.test", cache, token=TOKEN, transport=httpx.MockTransport(custody))
    assert store.publish([v0, node, node.upper()]) == {"published": 2, "rejected": [], "reasons": {}}
    assert len(put) == 2


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, text="<html>welcome</html>"),
        httpx.Response(201, json={}),
        httpx.Response(200, json={"cid": raw_cid(b"another block"), "stored": True}),
    ],
)
def test_a_success_that_does_not_name_the_block_is_no_custody(answer: httpx.Response) -> None:
    # Any server answering 200 to a PUT (a web host, a proxy's landing page) was counted as custody of
    # every block: publish reported them all published while nothing held them.
    cache = MemoryBlockStore()
    held = cache.put(b"mine")
    web_host = httpx.MockTransport(lambda r: answer)
    store = GatewayBlockStore("http://gateway.test", cache, token=TOKEN, transport=web_host)
    with pytest.raises(GatewayRefused, match="custody"):
        store.publish([held])


def test_publish_reports_what_it_could_not_push_and_why(gateway: str, tmp_path: Path) -> None:
    cache = MemoryBlockStore()
    with (
        GatewayBlockStore(gateway, cache, token="wrong") as wrong,
        GatewayBlockStore(gateway, cache, token=TOKEN) as right,
    ):
        held = cache.put(b"mine")
        absent = raw_cid(b"not in the cache")
        assert wrong.publish([held]) == {"published": 0, "rejected": [held], "reasons": {held: "unauthorized"}}
        assert right.publish([held, absent, "bafy-bad"]) == {
            "published": 1,
            "rejected": [absent, "bafy-bad"],
            "reasons": {absent: "missing", "bafy-bad": "invalid-cid"},
        }
        big = cache.put(b"b" * ((1 << 20) + 1))  # the test gateway caps blocks at 1 MiB
        assert right.publish([big])["reasons"] == {big: "too-large"}


def _custody(put: list[str]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        put.append(request.url.path.rsplit("/", 1)[1])
        return httpx.Response(201, json={"cid": put[-1], "stored": True})

    return httpx.MockTransport(answer)


@pytest.mark.parametrize("codec", ["dag-pb", "dag-cbor"])
def test_publish_reports_a_block_under_the_root_that_does_not_decode_and_keeps_it(codec: str) -> None:
    # Such a block was pushed as bytes and the DAG below it skipped: {"rejected": []} for a root whose
    # DAG nobody could know was whole.
    cache = MemoryBlockStore()
    bad = cache.put(b"\xff\xfe not a node", codec)
    root = cache.put(encode_pb(PBNode((PBLink.to(bad, "bad", 13),))), "dag-pb")
    put: list[str] = []
    store = GatewayBlockStore("http://gateway.test", cache, token=TOKEN, transport=_custody(put))
    assert store.publish([root]) == {"published": 1, "rejected": [bad], "reasons": {bad: "undecodable"}}
    assert put == [root]
    assert cache.get(bad) == b"\xff\xfe not a node"  # nothing stored is lost
    assert store.publish([bad])["reasons"] == {bad: "undecodable"}  # named itself, the same


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
        httpx.Response(503, text="down"),
    ],
    ids=["unreachable", "timeout", "5xx"],
)
def test_a_publish_cut_short_says_how_many_blocks_and_bytes_it_had_published(
    failure: httpx.Response | Exception,
) -> None:
    cache = MemoryBlockStore()
    leaves = [cache.put(bytes([i]) * (100 + i)) for i in range(3)]
    root = cache.put(encode_pb(PBNode(tuple(PBLink.to(c, str(i), 100 + i) for i, c in enumerate(leaves)))), "dag-pb")
    put: list[str] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        if len(put) == 3:  # the root and two leaves went through
            if isinstance(failure, Exception):
                raise failure
            return failure
        put.append(request.url.path.rsplit("/", 1)[1])
        return httpx.Response(201, json={"cid": put[-1], "stored": True})

    store = GatewayBlockStore("http://gateway.test", cache, token=TOKEN, transport=httpx.MockTransport(flaky))
    with pytest.raises(GatewayError) as raised:
        store.publish([root])
    sent = sum(len(cache.get(c) or b"") for c in put)
    assert f"3 blocks ({sent} bytes) published before" in str(raised.value)
    assert raised.value.partial == {"published": 3, "rejected": [], "reasons": {}}
    assert raised.value.published_bytes == sent


def test_a_publish_cut_short_by_its_own_cache_failing_says_what_it_had_published() -> None:
    class FailingCache(MemoryBlockStore):
        def get(self, cid: str) -> bytes | None:
            if cid == leaves[2]:
                raise BlockStoreError("the disk went away")
            return super().get(cid)

    cache = FailingCache()
    leaves = [cache.put(bytes([i]) * 10) for i in range(3)]
    root = cache.put(encode_pb(PBNode(tuple(PBLink.to(c, str(i), 10) for i, c in enumerate(leaves)))), "dag-pb")
    put: list[str] = []
    store = GatewayBlockStore("http://gateway.test", cache, token=TOKEN, transport=_custody(put))
    with pytest.raises(BlockStoreError, match="disk went away; publish stopped: 3 blocks") as raised:
        store.publish([root])
    assert raised.value.partial == {"published": 3, "rejected": [], "reasons": {}}
    assert raised.value.published_bytes == sum(len(cache.get(c) or b"") for c in put)
