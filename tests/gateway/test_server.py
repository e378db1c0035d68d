"""The gateway over HTTP: raw blocks (the suite's trustless_gateway_raw_test.go cases), negotiation,
caching, ranges, custody, paths through kuro.fs, and the limits on abusive connections.

Bad input first. Every request goes over a real socket to a gateway on 127.0.0.1.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import socket
import time
from urllib.parse import quote

import httpx
import pytest
from gateway_helpers import KURO_FS_FILE, MANIFEST, TOKEN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuro_fs.cid import cid_for, parse, raw_cid
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_fs.gateway.serve import ServerLimits, running_gateway
from kuro_fs.gateway.server import GatewayConfig

TWO = MANIFEST["subdir-with-two-single-block-files"]
MIXED = MANIFEST["subdir-with-mixed-block-files"]
RAW = "application/vnd.ipld.raw"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ABSENT = raw_cid(b"no gateway holds this")


# ---- bad input


@pytest.mark.parametrize(
    ("url", "headers", "status", "says"),
    [
        ("/ipfs/not-a-cid?format=raw", {}, 400, "invalid CID"),
        ("/ipfs/QmShort?format=raw", {}, 400, "invalid CID"),
        (f"/ipfs/{TWO['root']}", {}, 400, "no format"),
        (f"/ipfs/{TWO['root']}", {"Accept": "*/*"}, 400, "no format"),
        (f"/ipfs/{TWO['root']}", {"Accept": "text/html"}, 406, "Accept names nothing"),
        (f"/ipfs/{TWO['root']}?format=tar", {}, 400, "format 'tar'"),
        (f"/ipfs/{TWO['root']}", {"Accept": f"{RAW}; q=0, application/vnd.ipld.car; q=0"}, 406, "q=0"),
        (f"/ipfs/{TWO['root']}", {"Accept": "application/vnd.ipld.car; version=2"}, 406, "version '2'"),
        (f"/ipfs/{TWO['root']}", {"Accept": "application/vnd.ipld.car; order=bfs"}, 406, "order 'bfs'"),
        (f"/ipfs/{TWO['root']}?format=car&car-dups=maybe", {}, 400, "dups 'maybe'"),
        (f"/ipfs/{TWO['root']}?format=car&dag-scope=most", {}, 400, "dag-scope"),
        (f"/ipfs/{TWO['root']}?format=car&entity-bytes=5", {}, 400, "entity-bytes"),
        (f"/ipfs/{TWO['root']}?format=car&entity-bytes=9:2", {}, 400, "entity-bytes"),
        (f"/ipfs/{TWO['root']}?format=car&entity-bytes=0:*&dag-scope=all", {}, 400, "implies dag-scope=entity"),
        (f"/ipfs/{TWO['root']}/subdir/%2E%2E/subdir?format=car", {}, 400, "'..'"),
        (f"/ipfs/{ABSENT}?format=raw", {}, 404, "not held"),
        (f"/ipfs/{ABSENT}?format=car", {}, 404, "not held"),
        (f"/ipfs/{ABSENT}?format=raw", {"Cache-Control": "only-if-cached"}, 412, "not held"),
        (f"/ipfs/{TWO['root']}/nope?format=car", {}, 404, "no such path"),
        (f"/ipfs/{TWO['subdir/ascii.txt']}/deeper?format=car", {}, 404, "not a directory"),
        ("/", {}, 404, "not a gateway path"),
        ("/ipns/example.com", {}, 404, "not a gateway path"),
    ],
)
def test_a_request_the_gateway_cannot_serve_gets_a_clear_4xx(
    http: httpx.Client, url: str, headers: dict[str, str], status: int, says: str
) -> None:
    r = http.get(url, headers=headers)
    assert r.status_code == status
    assert says in r.text
    assert r.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    ("headers", "body", "status", "says"),
    [
        ({}, b"hello", 401, "Bearer"),
        ({"Authorization": "Basic dTpw"}, b"hello", 401, "Bearer"),
        ({"Authorization": "Bearer wrong"}, b"hello", 403, "wrong write token"),
        (AUTH, b"hellx", 400, "do not hash"),
        (AUTH, b"x" * ((1 << 20) + 1), 413, "cap"),
    ],
)
def test_a_custody_write_that_fails_a_check_stores_nothing(
    http: httpx.Client, fixture_store: FileBlockStore, headers: dict[str, str], body: bytes, status: int, says: str
) -> None:
    cid = raw_cid(b"hello") if len(body) < 10 else raw_cid(body)
    before = fixture_store.stats()
    r = http.put(f"/ipld/{cid}", content=body, headers=headers)
    assert r.status_code == status and says in r.text
    if status == 401:
        assert r.headers["www-authenticate"] == "Bearer"
    assert not fixture_store.has(cid) and fixture_store.stats() == before


def test_an_upload_past_the_cap_without_a_length_is_cut_off_at_the_cap(gateway: str) -> None:
    def chunks():  # chunked transfer: no Content-Length to refuse up front
        for _ in range(40):
            yield b"z" * 65536

    with httpx.Client(base_url=gateway) as client:
        r = client.put(f"/ipld/{ABSENT}", content=chunks(), headers=AUTH)
    assert r.status_code == 413


def test_a_custody_write_to_a_bad_cid_is_refused(http: httpx.Client) -> None:
    r = http.put("/ipld/bafyfoo", content=b"x", headers=AUTH)
    assert r.status_code == 400 and "invalid CID" in r.text


def test_a_gateway_started_without_a_token_is_read_only(fixture_store: FileBlockStore) -> None:
    with running_gateway(fixture_store) as url, httpx.Client(base_url=url) as client:
        r = client.put(f"/ipld/{raw_cid(b'ro')}", content=b"ro", headers=AUTH)
        assert r.status_code == 403 and "read-only" in r.text
        assert client.get(f"/ipfs/{TWO['root']}?format=raw").status_code == 200


# ---- custody


def test_a_verified_block_is_stored_once_and_writes_are_idempotent(
    http: httpx.Client, fixture_store: FileBlockStore
) -> None:
    data = b"custody block " + bytes(range(256))
    cid = raw_cid(data)
    first = http.put(f"/ipld/{cid}", content=data, headers=AUTH)
    again = http.put(f"/ipld/{cid}", content=data, headers=AUTH)
    assert (first.status_code, first.json()) == (201, {"cid": cid, "stored": True})
    assert (again.status_code, again.json()) == (200, {"cid": cid, "stored": False})
    assert fixture_store.get(cid) == data
    got = http.get(f"/ipld/{cid}")
    assert got.status_code == 200 and got.content == data and got.headers["content-type"] == RAW


def test_custody_takes_blocks_of_every_hash_it_reads(http: httpx.Client, fixture_store: FileBlockStore) -> None:
    import blake3

    data = b"a blake3 block"
    binary = bytes([1, 0x55, 0x1E, 0x20]) + blake3.blake3(data).digest()
    cid = "b" + base64.b32encode(binary).decode().rstrip("=").lower()
    assert http.put(f"/ipld/{cid}", content=data, headers=AUTH).status_code == 201
    assert http.get(f"/ipfs/{cid}?format=raw").content == data
    v0 = "QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn"
    assert http.put(f"/ipld/{v0}", content=bytes.fromhex("0a020801"), headers=AUTH).status_code in (200, 201)
    assert fixture_store.get(cid_for(bytes.fromhex("0a020801"), "dag-pb")) == bytes.fromhex("0a020801")


# ---- raw blocks (ipfs/gateway-conformance tests/trustless_gateway_raw_test.go)


@pytest.mark.parametrize("via", ["format", "accept"])
def test_get_a_raw_block(http: httpx.Client, fixture_store: FileBlockStore, via: str) -> None:
    cid = TWO["subdir"]
    r = http.get(f"/ipfs/{cid}?format=raw") if via == "format" else http.get(f"/ipfs/{cid}", headers={"Accept": RAW})
    assert r.status_code == 200 and r.content == fixture_store.get(cid)


def test_a_raw_block_comes_with_the_expected_response_headers(
    http: httpx.Client, fixture_store: FileBlockStore
) -> None:
    cid = TWO["subdir/ascii.txt"]
    r = http.get(f"/ipfs/{cid}", headers={"Accept": RAW})
    block = fixture_store.get(cid)
    assert block is not None and r.content == block
    assert r.headers["content-type"] == RAW
    assert r.headers["content-length"] == str(len(block))
    assert re.fullmatch(r'attachment;\s*filename=".*\.bin"', r.headers["content-disposition"])
    assert r.headers["x-content-type-options"] == "nosniff"


def test_a_filename_parameter_names_the_download(http: httpx.Client) -> None:
    r = http.get(f"/ipfs/{TWO['subdir/ascii.txt']}?filename=foobar.bin", headers={"Accept": RAW})
    assert re.match(r'attachment;\s*filename="foobar\.bin', r.headers["content-disposition"])
    odd = http.get(f"/ipfs/{TWO['subdir/ascii.txt']}?filename=na%22me%C3%A9.bin&format=raw")
    assert (
        odd.headers["content-disposition"] == "attachment; filename=\"na_me_.bin\"; filename*=UTF-8''na%22me%C3%A9.bin"
    )


def test_a_raw_block_comes_with_the_expected_caching_headers(http: httpx.Client) -> None:
    cid = TWO["subdir/ascii.txt"]
    r = http.get(f"/ipfs/{cid}", headers={"Accept": RAW})
    assert r.headers["etag"]
    assert r.headers["x-ipfs-path"] == f"/ipfs/{cid}"
    assert cid in r.headers["x-ipfs-roots"]
    directives = {}
    for directive in r.headers["cache-control"].replace(" ", "").split(","):
        key, _, value = directive.partition("=")
        directives[key] = value
    assert "public" in directives and "immutable" in directives and int(directives["max-age"]) >= 29030400


def test_the_probe_cid_answers_an_empty_block_and_an_empty_car(http: httpx.Client) -> None:
    raw = http.get("/ipfs/bafkqaaa?format=raw")
    assert raw.status_code == 200 and raw.content == b""
    car = http.get("/ipfs/bafkqaaa?format=car")
    assert car.status_code == 200
    from kuro_fs.car import read_car

    roots, sections = read_car(io.BytesIO(car.content))
    assert roots == ["bafkqaaa"] and list(sections) == []
    assert http.head("/ipfs/bafkqaaa?format=raw").status_code == 200


_MULTIBLOCK = MIXED["subdir/multiblock.txt"]


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        (f"/ipfs/{TWO['subdir']}?format=raw", {}),
        (f"/ipld/{TWO['subdir']}", {}),
        (f"/ipfs/{TWO['subdir']}?format=raw", {"Range": "bytes=2-9"}),
        (f"/ipfs/{TWO['subdir']}?format=raw", {"Range": "bytes=99999-"}),
        (f"/ipfs/{TWO['root']}?format=car", {}),
        (f"/ipfs/{_MULTIBLOCK}?format=car&dag-scope=entity", {}),
        (f"/ipfs/{_MULTIBLOCK}?format=car&dag-scope=entity&entity-bytes=0:10", {}),
        ("/ipfs/bafkqaaa?format=car", {}),
        (f"/ipfs/{ABSENT}?format=raw", {}),
        (f"/ipfs/{TWO['root']}?format=tar", {}),
    ],
    ids=["raw", "ipld", "range-206", "range-416", "car", "car-entity", "car-entity-bytes", "probe-car", "404", "400"],
)
def test_head_sends_the_fields_get_would_and_no_body(http: httpx.Client, url: str, headers: dict[str, str]) -> None:
    # RFC 9110 §9.3.2 and §8.6: the same fields as GET, and a Content-Length only if it is the one GET sends —
    # a streamed CAR has none (it is chunked), so its HEAD has none either.
    get, head = http.get(url, headers=headers), http.head(url, headers=headers)
    assert head.status_code == get.status_code and head.content == b""
    framing = {"date", "transfer-encoding"}
    assert {k: v for k, v in head.headers.items() if k not in framing} == {
        k: v for k, v in get.headers.items() if k not in framing
    }
    if "content-length" not in get.headers:
        assert get.headers["transfer-encoding"] == "chunked"


def test_a_matching_if_none_match_is_answered_304_and_the_etag_varies_with_car_parameters(http: httpx.Client) -> None:
    cid = MIXED["subdir/multiblock.txt"]
    tags = {
        q: http.get(f"/ipfs/{cid}?{q}").headers["etag"]
        for q in (
            "format=raw",
            "format=car",
            "format=car&dag-scope=entity",
            "format=car&car-dups=y",
            "format=car&dag-scope=entity&entity-bytes=0:10",
        )
    }
    assert len(set(tags.values())) == len(tags)
    for q, tag in tags.items():
        assert http.get(f"/ipfs/{cid}?{q}", headers={"If-None-Match": tag}).status_code == 304
        assert http.get(f"/ipfs/{cid}?{q}", headers={"If-None-Match": f"W/{tag}"}).status_code == 304
    assert http.get(f"/ipfs/{cid}?format=raw", headers={"If-None-Match": '"other"'}).status_code == 200


@pytest.mark.parametrize(
    ("range_", "status", "body", "content_range"),
    [
        ("bytes=0-1", 206, slice(0, 2), "bytes 0-1/{n}"),
        ("bytes=2-", 206, slice(2, None), "bytes 2-{last}/{n}"),
        ("bytes=-3", 206, slice(-3, None), "bytes {n_minus_3}-{last}/{n}"),
        ("bytes=5-1000000", 206, slice(5, None), "bytes 5-{last}/{n}"),
        ("bytes=1000000-", 416, None, "bytes */{n}"),
        ("bytes=0-1,4-5", 200, slice(None), None),
        ("lines=1-2", 200, slice(None), None),
    ],
)
def test_a_single_range_on_a_raw_block_is_a_206_and_an_unsatisfiable_one_a_416(
    http: httpx.Client,
    fixture_store: FileBlockStore,
    range_: str,
    status: int,
    body: slice | None,
    content_range: str | None,
) -> None:
    cid = TWO["subdir/ascii.txt"]
    block = fixture_store.get(cid)
    assert block is not None
    r = http.get(f"/ipfs/{cid}?format=raw", headers={"Range": range_})
    assert r.status_code == status
    n = len(block)
    if body is not None:
        assert r.content == block[body]
    if content_range is not None:
        assert r.headers["content-range"] == content_range.format(n=n, last=n - 1, n_minus_3=n - 3)


def test_a_raw_request_with_a_path_answers_the_block_at_its_end(
    http: httpx.Client, fixture_store: FileBlockStore
) -> None:
    r = http.get(f"/ipfs/{TWO['root']}/subdir/hello.txt?format=raw")
    assert r.status_code == 200 and r.content == fixture_store.get(TWO["subdir/hello.txt"])
    assert r.headers["x-ipfs-roots"].split(",") == [TWO["root"], TWO["subdir"], TWO["subdir/hello.txt"]]


# ---- kuro.fs


def test_paths_resolve_through_kuro_fs_directories(http: httpx.Client, kuro_fs_tree: Fs) -> None:
    from kuro_fs.car import read_car

    r = http.get(f"/ipfs/{kuro_fs_tree.root}/docs/big/file.bin?format=car&dag-scope=entity")
    assert r.status_code == 200
    _roots, sections = read_car(io.BytesIO(r.content))
    blocks = list(sections)
    codecs = [parse(c).codec for c, _ in blocks]
    assert codecs[:3] == ["dag-cbor", "dag-cbor", "dag-cbor"]  # /, docs, big
    leaves = b"".join(b for c, b in blocks[4:] if parse(c).codec == "raw")
    assert hashlib.sha256(leaves).digest() == hashlib.sha256(KURO_FS_FILE).digest()
    missing = http.get(f"/ipfs/{kuro_fs_tree.root}/docs/nope?format=car")
    assert missing.status_code == 404 and "kuro.fs directory" in missing.text


# ---- limits on abusive connections


def test_a_request_head_larger_than_the_cap_is_refused_and_the_connection_closed(fixture_store: FileBlockStore) -> None:
    with running_gateway(fixture_store, limits=ServerLimits(max_head_bytes=2048)) as url:
        with httpx.Client(base_url=url) as client:
            r = client.get(f"/ipfs/{TWO['root']}?format=raw", headers={"X-Pad": "p" * 4096})
            assert r.status_code == 400
            assert client.get(f"/ipfs/{TWO['root']}?format=raw").status_code == 200


def test_a_client_that_drips_its_request_head_is_disconnected(fixture_store: FileBlockStore) -> None:
    with running_gateway(fixture_store, limits=ServerLimits(head_timeout=0.3)) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"GET /ipfs/")
            for _ in range(50):  # one byte every 0.1 s would keep uvicorn alone waiting forever
                try:
                    sock.sendall(b"a")
                except OSError:
                    break
                time.sleep(0.1)
                sock.setblocking(False)
                try:
                    if sock.recv(1) == b"":
                        break
                except BlockingIOError:
                    pass
                finally:
                    sock.setblocking(True)
            else:
                pytest.fail("the gateway kept a dripping connection open for 5 s")


@pytest.mark.parametrize("method", ["GET", "PUT", "GET then CRLF"])
def test_bytes_after_an_answer_cannot_hold_the_connection_open(fixture_store: FileBlockStore, method: str) -> None:
    # Any byte after an answer cancels uvicorn's keep-alive timer, and nothing re-armed one unless a new
    # request began: a byte of a body the answer did not wait for (a GET's, a refused PUT's) or a bare
    # CRLF between requests held the connection (one of max_connections) open forever. Now bytes that
    # arrive with no request in progress start the head deadline.
    with running_gateway(fixture_store, limits=ServerLimits(head_timeout=0.3, keep_alive=1)) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            verb, body = method.split()[0], "" if "CRLF" in method else "Content-Length: 1000000\r\n"
            path = f"/ipfs/{TWO['root']}?format=raw" if verb == "GET" else f"/ipld/{ABSENT}"
            sock.sendall(f"{verb} {path} HTTP/1.1\r\nHost: x\r\n{body}\r\n".encode())
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200" if verb == "GET" else b"HTTP/1.1 403"), answer[:60]
            sock.sendall(b"\r\n" if "CRLF" in method else b"a")
            sock.settimeout(20)  # far beyond the 0.3 s bound: only a connection never closed reaches it
            try:
                while sock.recv(65536):
                    pass
            except TimeoutError:
                pytest.fail("the gateway kept the connection open 20 s after its answer")
            except ConnectionResetError:
                pass


def test_a_client_that_stops_reading_a_car_is_dropped_after_the_send_deadline() -> None:
    from kuro_fs.blocks import MemoryBlockStore
    from kuro_fs.importer import import_bytes

    store = MemoryBlockStore()
    root = import_bytes(store, bytes(range(256)) * (64 * 1024 + 7))  # 16 MiB: more than any socket buffers
    with running_gateway(store, config=GatewayConfig(send_timeout=0.5)) as url:
        host, port = url.removeprefix("http://").split(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(10)
        sock.connect((host, int(port)))
        with sock:
            sock.sendall(f"GET /ipfs/{root}?format=car&car-dups=y HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            time.sleep(2.0)  # not reading: the server's send deadline passes
            with httpx.Client(base_url=url) as client:  # meanwhile others are served
                assert client.get(f"/ipfs/{root}?format=raw").status_code == 200
            received = 0
            while chunk := sock.recv(1 << 16):  # what was buffered, then the server's close
                received += len(chunk)
        assert 0 < received < 16 * 1024 * 1024


# ---- hostile input, generated


_SEGMENT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_PARAM = st.sampled_from(["format", "dag-scope", "entity-bytes", "car-dups", "car-order", "car-version", "filename"])


@given(
    st.sampled_from([TWO["root"], MIXED["subdir/multiblock.txt"], "bafkqaaa", ABSENT]) | st.text(max_size=70),
    st.lists(_SEGMENT, max_size=3),
    st.dictionaries(_PARAM, st.text(max_size=20), max_size=4),
    st.none() | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=80),
    st.none() | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_request_makes_the_gateway_answer_5xx(
    http: httpx.Client, cid: str, segments: list[str], query: dict[str, str], accept: str | None, range_: str | None
) -> None:
    path = "/".join(quote(s, safe="") for s in [cid, *segments])
    headers = {k: v.strip() for k, v in (("Accept", accept), ("Range", range_)) if v and v.strip()}
    r = http.get(f"/ipfs/{path}", params=query, headers=headers)
    assert 200 <= r.status_code < 500, (r.status_code, r.text[:200])
    if r.status_code >= 400:
        assert r.text.strip()  # a refusal always says why


@given(st.binary(max_size=300), st.data())
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_custody_write_makes_the_gateway_answer_5xx(http: httpx.Client, body: bytes, data: st.DataObject) -> None:
    # Random text is almost never a CID, so the CIDs the body hashes to (under each codec) and one it does
    # not are drawn too: the writes that reach the store, not only the ones refused at the path.
    how = data.draw(st.sampled_from(["text", "raw", "dag-pb", "dag-cbor", "other"]))
    if how == "text":
        cid = data.draw(st.text(max_size=70))
    else:
        cid = cid_for(body + b"!" if how == "other" else body, "raw" if how == "other" else how)
    r = http.put(f"/ipld/{quote(cid, safe='')}", content=body, headers=AUTH)
    assert r.status_code in (200, 201, 400, 404, 405, 413), (r.status_code, r.text[:200])
    if how == "raw":  # a block that hashes to its CID is kept (200: it was already held)
        assert r.status_code in (200, 201) and r.json() == {"cid": cid, "stored": r.status_code == 201}, r.text
    if how == "other":
        assert r.status_code == 400, r.text


def test_the_app_is_plain_asgi_and_runs_without_uvicorn(fixture_store: FileBlockStore) -> None:
    import asyncio

    from kuro_fs.gateway.server import create_app

    async def fetch() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=create_app(fixture_store))
        async with httpx.AsyncClient(transport=transport, base_url="http://asgi") as client:
            raw = await client.get(f"/ipfs/{TWO['subdir']}?format=raw")
            car = await client.get(f"/ipfs/{TWO['root']}?format=car")
            return raw, car

    raw, car = asyncio.run(fetch())
    assert raw.status_code == 200 and raw.content == fixture_store.get(TWO["subdir"])
    from kuro_fs.car import read_car

    _roots, sections = read_car(io.BytesIO(car.content))
    assert len(list(sections)) == 4
