"""The gateway's rules at its edges: CIDs in every multibase, conditional requests on what is not held,
methods a route does not take, DAGs it cannot send whole (refused up front or cut, in one log line),
a repeat budget, and store reads that never stall the event loop.

Each gateway here runs on 127.0.0.1 over a store built for the test.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from gateway_helpers import MANIFEST, TOKEN
from multiformats import CID

from kuro_fs import dagcbor
from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import parse, raw_cid
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.errors import BlockStoreError
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Budget, Fs
from kuro_fs.gateway.serve import running_gateway
from kuro_fs.gateway.server import GatewayConfig
from kuro_fs.unixfs import NodeType, UnixFSData, encode_data

TWO = MANIFEST["subdir-with-two-single-block-files"]
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ABSENT = raw_cid(b"no gateway holds this")
BASES = ("base58btc", "base36", "base16", "base32upper")


class _Log(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def server_log() -> Iterator[_Log]:
    """Every record the gateway app and uvicorn log while the test runs."""
    handler = _Log()
    loggers = [logging.getLogger(name) for name in ("kuro.gateway", "uvicorn.error")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


def _file_node(links: list[tuple[str, int]], blocksizes: tuple[int, ...] | None = None) -> bytes:
    sizes = tuple(size for _, size in links) if blocksizes is None else blocksizes
    data = encode_data(UnixFSData(NodeType.FILE, blocksizes=sizes))
    return encode_pb(PBNode(tuple(PBLink.to(cid, "", size) for cid, size in links), data))


# ---- CIDs in every multibase


@pytest.mark.parametrize("base", BASES)
def test_a_cid_in_any_multibase_names_the_same_block_as_its_canonical_form(http: httpx.Client, base: str) -> None:
    cid = parse(TWO["subdir"]).key  # the fixture's CIDv0, as a CIDv1
    form = CID.decode(cid).encode(base)
    canonical = http.get(f"/ipfs/{cid}?format=raw")
    got = http.get(f"/ipfs/{form}?format=raw")
    assert got.status_code == 200 and got.content == canonical.content
    assert got.headers["etag"] == canonical.headers["etag"] and got.headers["x-ipfs-roots"] == cid
    assert got.headers["x-ipfs-path"] == f"/ipfs/{form}"
    root = parse(TWO["root"]).key
    car = http.get(f"/ipfs/{CID.decode(root).encode(base)}/subdir?format=car&dag-scope=block")
    assert car.status_code == 200 and car.headers["x-ipfs-roots"] == f"{root},{TWO['subdir']}"
    assert http.head(f"/ipld/{form}").status_code == 200


def test_a_custody_write_to_a_cid_in_another_multibase_files_it_under_its_canonical_name(
    http: httpx.Client, fixture_store: FileBlockStore
) -> None:
    data = b"written under a base58btc name"
    cid = raw_cid(data)
    r = http.put(f"/ipld/{CID.decode(cid).encode('base58btc')}", content=data, headers=AUTH)
    assert r.status_code == 201 and r.json() == {"cid": cid, "stored": True}
    assert fixture_store.get(cid) == data


# ---- conditional requests


def test_if_none_match_star_on_a_block_not_held_is_a_404_not_a_304(http: httpx.Client) -> None:
    star = {"If-None-Match": "*"}
    assert http.get(f"/ipfs/{ABSENT}?format=raw", headers=star).status_code == 404
    assert http.get(f"/ipfs/{ABSENT}?format=car", headers=star).status_code == 404
    assert http.get(f"/ipfs/{ABSENT}?format=raw", headers=star | {"Cache-Control": "only-if-cached"}).status_code == 412
    assert http.get(f"/ipfs/{TWO['root']}/nope?format=raw", headers=star).status_code == 404
    assert http.get(f"/ipfs/{TWO['root']}?format=raw", headers=star).status_code == 304
    assert http.get(f"/ipfs/{TWO['root']}/subdir?format=car", headers=star).status_code == 304


def test_a_stale_etag_for_a_block_not_held_is_a_404(http: httpx.Client) -> None:
    tag = f'"{ABSENT}.raw"'  # the Etag this gateway would give it, were it held
    assert http.get(f"/ipfs/{ABSENT}?format=raw", headers={"If-None-Match": tag}).status_code == 404


# ---- methods


@pytest.mark.parametrize(
    ("method", "url", "allow"),
    [
        ("POST", f"/ipfs/{ABSENT}", "GET, HEAD"),
        ("DELETE", f"/ipfs/{ABSENT}", "GET, HEAD"),
        ("PUT", f"/ipfs/{ABSENT}", "GET, HEAD"),
        ("POST", f"/ipfs/{ABSENT}/a/path", "GET, HEAD"),
        ("POST", f"/ipld/{ABSENT}", "GET, HEAD, PUT"),
        ("DELETE", f"/ipld/{ABSENT}", "GET, HEAD, PUT"),
        ("PATCH", f"/ipld/{ABSENT}", "GET, HEAD, PUT"),
    ],
)
def test_a_method_a_gateway_route_does_not_take_is_a_405_naming_what_it_takes(
    http: httpx.Client, method: str, url: str, allow: str
) -> None:
    r = http.request(method, url, content=b"x")
    assert r.status_code == 405 and r.headers["allow"] == allow and method in r.text


@pytest.mark.parametrize(("method", "url"), [("POST", "/"), ("DELETE", "/ipns/x"), ("POST", f"/ipld/{ABSENT}/more")])
def test_a_method_on_a_path_that_is_no_gateway_route_is_a_404(http: httpx.Client, method: str, url: str) -> None:
    r = http.request(method, url)
    assert r.status_code == 404 and "not a gateway path" in r.text


# ---- DAGs that cannot be sent whole


def _no_tracebacks(log: _Log) -> None:
    assert [r for r in log.records if r.exc_info] == []
    assert [r.getMessage() for r in log.records if r.name == "uvicorn.error"] == []


def test_a_car_of_a_held_but_malformed_root_is_refused_before_the_response_starts(server_log: _Log) -> None:
    store = MemoryBlockStore()
    root = store.put(b"\xff\xffthis is no dag-pb", "dag-pb")
    with running_gateway(store) as url, httpx.Client(base_url=url) as client:
        for _ in range(3):
            r = client.get(f"/ipfs/{root}?format=car")
            assert r.status_code == 422 and root in r.text
        assert client.get(f"/ipfs/{root}?format=car&dag-scope=block").status_code == 200  # the bytes themselves
        assert client.get(f"/ipfs/{root}?format=raw").status_code == 200
    _no_tracebacks(server_log)
    lines = [r.getMessage() for r in server_log.records if r.name == "kuro.gateway"]
    assert len(lines) == 3 and all(root in line and "\n" not in line for line in lines)


def test_a_file_whose_blocksizes_and_links_disagree_is_a_422_not_a_200_with_its_root_alone() -> None:
    store = MemoryBlockStore()
    leaves = [store.put(bytes([i]) * 100) for i in range(3)]
    root = store.put(_file_node([(c, 100) for c in leaves], blocksizes=(100, 100)), "dag-pb")
    with running_gateway(store) as url, httpx.Client(base_url=url) as client:
        r = client.get(f"/ipfs/{root}?format=car&dag-scope=entity")
    assert r.status_code == 422 and "3 links but 2 blocksizes" in r.text


def test_a_walk_that_breaks_below_the_root_cuts_the_stream_with_one_log_line(server_log: _Log) -> None:
    store = MemoryBlockStore()
    leaves = [store.put(bytes([i]) * 100) for i in range(3)]
    inner = store.put(_file_node([(c, 100) for c in leaves], blocksizes=(100,)), "dag-pb")
    root = store.put(_file_node([(leaves[0], 100), (inner, 300)]), "dag-pb")
    with running_gateway(store) as url, httpx.Client(base_url=url) as client:
        with pytest.raises(httpx.RemoteProtocolError):  # a cut CAR never looks complete
            client.get(f"/ipfs/{root}?format=car&dag-scope=entity")
        assert client.get(f"/ipfs/{leaves[0]}?format=raw").status_code == 200  # still serving
    _no_tracebacks(server_log)
    lines = [r.getMessage() for r in server_log.records if r.name == "kuro.gateway"]
    assert len(lines) == 1 and "cut short" in lines[0] and inner in lines[0]


def test_a_diamond_dag_asked_for_with_dups_y_stops_at_the_gateway_s_budget(server_log: _Log) -> None:
    store = MemoryBlockStore()
    cid = store.put(b"leaf")
    for _ in range(40):  # 2**40 paths to the leaf
        cid = store.put(dagcbor.encode([dagcbor.Link(cid), dagcbor.Link(cid)]), "dag-cbor")
    config = GatewayConfig(budget=Budget(entries=2000))
    with running_gateway(store, config=config) as url, httpx.Client(base_url=url) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(f"/ipfs/{cid}?format=car&car-dups=y")
        assert client.get(f"/ipfs/{cid}?format=car").status_code == 200  # dups=n: each block once
    _no_tracebacks(server_log)
    assert any("repeat more than 2000 blocks" in r.getMessage() for r in server_log.records)


# ---- the gateway's own store failing: the block and the kind of fault, never the store's files


def _corrupt(store: FileBlockStore, cid: str) -> None:
    (found,) = [p for p in store.root.rglob(f"{cid}*") if p.is_file()]
    found.write_bytes(b"other bytes on a failing disk")


def test_a_corrupt_stored_block_is_a_500_naming_the_block_not_the_file(tmp_path: Path, server_log: _Log) -> None:
    store = FileBlockStore(tmp_path / "home" / "blocks")
    fs = Fs.empty(store).write("docs/a.txt", b"kuro.fs over a gateway\n").fs
    leaf = fs.stat("docs/a.txt").value["cid"]
    root = fs.root
    _corrupt(store, leaf)
    with running_gateway(store) as url, httpx.Client(base_url=url) as client:
        answers = [
            client.get(f"/ipfs/{leaf}?format=raw"),
            client.head(f"/ipfs/{leaf}?format=raw"),
            client.get(f"/ipfs/{leaf}?format=car"),
            client.get(f"/ipfs/{root}/docs/a.txt?format=raw"),  # the corrupt block at a path's end
            client.get(f"/ipld/{leaf}"),
        ]
    for r in answers:
        assert r.status_code == 500
        assert str(tmp_path) not in r.text and "/blocks/" not in r.text
    assert all(f"block {leaf} is corrupt" in r.text for r in answers if r.request.method == "GET")
    _no_tracebacks(server_log)
    lines = [r.getMessage() for r in server_log.records if r.name == "kuro.gateway"]
    assert len(lines) == 5 and all(leaf in line and str(tmp_path) in line for line in lines)  # the detail: here


class _Unreadable(MemoryBlockStore):
    """A store whose disk went away: every read fails, in words that name its files."""

    def get(self, cid: str) -> bytes | None:
        raise BlockStoreError(f"cannot read /srv/kuro/home/blocks/{cid[-2:]}/{cid}: Input/output error")

    def has(self, cid: str) -> bool:
        raise BlockStoreError(f"cannot stat /srv/kuro/home/blocks/{cid[-2:]}/{cid}: Input/output error")

    def put(self, data: bytes, codec: str = "raw") -> str:
        raise BlockStoreError("cannot write /srv/kuro/home/blocks/tmp-1234: No space left on device")


def test_a_store_that_cannot_be_read_is_a_503_naming_the_block_not_the_file(server_log: _Log) -> None:
    cid = raw_cid(b"on a disk that went away")
    config = GatewayConfig(token=TOKEN)
    with running_gateway(_Unreadable(), config=config) as url, httpx.Client(base_url=url) as client:
        answers = [
            client.get(f"/ipfs/{cid}?format=raw"),
            client.get(f"/ipfs/{cid}?format=car"),
            client.get(f"/ipfs/{cid}?format=raw", headers={"If-None-Match": f'"{cid}.raw"'}),  # asks has()
            client.put(f"/ipld/{cid}", content=b"on a disk that went away", headers=AUTH),
        ]
    for r in answers:
        assert r.status_code == 503 and f"block {cid} is unavailable" in r.text
        assert "/srv/kuro" not in r.text
    _no_tracebacks(server_log)
    lines = [r.getMessage() for r in server_log.records if r.name == "kuro.gateway"]
    assert len(lines) == 4 and all("/srv/kuro" in line for line in lines)


# ---- the event loop


class _Stalling(MemoryBlockStore):
    """A store whose reads of one CID wait until the test lets them go (a slow disk, a stuck NFS mount)."""

    def __init__(self) -> None:
        super().__init__()
        self.slow = ""
        self.entered = threading.Event()
        self.release = threading.Event()

    def get(self, cid: str) -> bytes | None:
        if cid == self.slow:
            self.entered.set()
            self.release.wait(60)
        return super().get(cid)


def test_a_store_read_that_stalls_does_not_stall_other_requests() -> None:
    store = _Stalling()
    store.slow = store.put(b"on a slow disk")
    quick = store.put(b"in memory")
    with running_gateway(store) as url:
        stalled: list[int] = []
        waiter = threading.Thread(
            target=lambda: stalled.append(httpx.get(f"{url}/ipfs/{store.slow}?format=raw", timeout=90).status_code)
        )
        waiter.start()
        try:
            assert store.entered.wait(30)
            r = httpx.get(f"{url}/ipfs/{quick}?format=raw", timeout=30)  # served while the other read waits
            assert r.status_code == 200 and r.content == b"in memory"
            assert not store.release.is_set() and waiter.is_alive()
        finally:
            store.release.set()
            waiter.join(60)
    assert stalled == [200]


# ---- names beyond ASCII


@pytest.mark.parametrize("fmt", ["raw", "car"])
def test_a_path_through_a_non_latin_name_is_served_and_x_ipfs_path_is_percent_encoded(fmt: str) -> None:
    # A response header is bytes: a UnixFS name like 日本.txt (not even latin-1) once crashed the response
    # (a traceback, the connection reset); é was sent as one latin-1 byte no client reads as UTF-8.
    store = MemoryBlockStore()
    leaf = store.put(b"hello", "raw")
    names = ["日本.txt", "café.txt", "a b.txt"]
    links = tuple(PBLink.to(leaf, name, 5) for name in sorted(names))
    folder = store.put(encode_pb(PBNode(links, encode_data(UnixFSData(NodeType.DIRECTORY)))), "dag-pb")
    with running_gateway(store) as url, httpx.Client(base_url=url, timeout=30) as http:
        for name in names:
            r = http.get(f"/ipfs/{folder}/{quote(name, safe='')}", params={"format": fmt})
            assert r.status_code == 200, (name, r.status_code, r.text[:200])
            assert r.headers["X-Ipfs-Path"] == f"/ipfs/{folder}/{quote(name)}"
            assert r.headers["X-Ipfs-Roots"] == f"{folder},{leaf}"


def test_a_content_length_of_non_ascii_digits_is_a_400_under_any_asgi_server() -> None:
    # uvicorn's parser refuses it, but the app is plain ASGI: '²' passed str.isdigit and int('²') crashed (500).
    import asyncio

    from kuro_fs.gateway.server import create_app

    sent: list[dict[str, object]] = []

    async def put() -> None:
        app = create_app(MemoryBlockStore(), GatewayConfig(token=TOKEN))
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "PUT",
            "scheme": "http",
            "path": f"/ipld/{raw_cid(b'x')}",
            "raw_path": f"/ipld/{raw_cid(b'x')}".encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-length", "²".encode("latin-1"))],
            "server": ("gateway.test", 80),
            "client": ("client.test", 1),
        }
        messages = [{"type": "http.request", "body": b"x", "more_body": False}]

        async def receive() -> dict[str, object]:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        await app(scope, receive, send)

    asyncio.run(put())
    assert sent[0]["status"] == 400 and b"Content-Length" in sent[1]["body"]  # type: ignore[operator]
