"""The gateway under load and abuse: 64 connections of mixed good and hostile requests, bounded in
count and time, on 127.0.0.1 only, against a ``kuro gateway serve`` subprocess.

Each of the 64 connections makes at least a few requests and stops at the deadline (or a request
cap), so a slow machine makes the test longer, not red. It must end with zero 5xx, every status
the one that request deserves, every byte served hashing to its CID (raw bodies re-hashed, CAR
bodies parsed and verified block by block) and flat memory (the server's resident set at the end
within a fixed allowance of what it was after warm-up).

The 30-second soak runs in CI (``CI`` set) or with ``KURO_SOAK=1``; otherwise a 4-second variant
runs the same mix, so a developer's suite stays fast and CI pays the 30 s once.
"""

from __future__ import annotations

import asyncio
import io
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kuro_fs.car import read_car
from kuro_fs.cid import raw_cid, verify
from kuro_fs.filestore import default_store
from kuro_fs.importer import import_bytes

CONNECTIONS = 64
MIN_REQUESTS_PER_CONNECTION = 5  # every connection does at least this much, however slow the machine
MAX_REQUESTS_PER_CONNECTION = 20_000
RSS_ALLOWANCE = 48 * 1024 * 1024
TOKEN = "load-test-token"
SOAK = bool(os.environ.get("CI") or os.environ.get("KURO_SOAK"))


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, dict[str, list[str]]]]:
    home = tmp_path_factory.mktemp("load-home")
    store = default_store(home)
    rng = random.Random(17)
    big = import_bytes(store, rng.randbytes(8 * 262144 + 999))  # 256 KiB leaves
    mid = import_bytes(store, rng.randbytes(600_000))
    small = [store.put(rng.randbytes(rng.randrange(1, 4000))) for _ in range(40)]
    leaves = [c for c in store.cids() if c.startswith("bafkrei") and c not in small]
    store.close()
    env = {**os.environ, "KURO_HOME": str(home), "KURO_GATEWAY_TOKEN": TOKEN}
    env.pop("KURO_GATEWAY", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kuro_wasm", "gateway", "serve", "--port", "0", "--max-block-bytes", "65536"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            m = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
            url = m.group(1) if m else None
        assert url is not None, "the gateway did not start"
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield url, proc.pid, {"files": [big, mid], "leaves": leaves, "small": small}
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stderr.close()


class Tally:
    def __init__(self) -> None:
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.wrong: list[str] = []
        self.bytes_verified = 0


async def _one(client: httpx.AsyncClient, rng: random.Random, held: dict[str, list[str]], tally: Tally) -> None:
    kind = rng.choices(
        [
            "raw",
            "raw-small",
            "car",
            "head",
            "range",
            "absent",
            "no-format",
            "bad-cid",
            "put-ok",
            "put-bad",
            "put-big",
            "put-noauth",
        ],
        weights=[30, 15, 6, 8, 6, 6, 5, 4, 4, 3, 2, 3],
    )[0]
    expect: set[int]
    if kind in ("raw", "raw-small"):
        cid = rng.choice(held["leaves" if kind == "raw" else "small"])
        r = await client.get(f"/ipfs/{cid}?format=raw")
        expect = {200}
        if r.status_code == 200:
            if verify(cid, r.content):
                tally.bytes_verified += len(r.content)
            else:
                tally.wrong.append(f"raw {cid}: bytes do not hash to the CID")
    elif kind == "car":
        cid = rng.choice(held["files"])
        r = await client.get(f"/ipfs/{cid}", params={"format": "car", "dag-scope": rng.choice(["entity", "all"])})
        expect = {200}
        if r.status_code == 200:
            try:
                _roots, sections = read_car(io.BytesIO(r.content))  # verifies every block
                tally.bytes_verified += sum(len(b) for _, b in sections)
            except ValueError as exc:
                tally.wrong.append(f"car {cid}: {exc}")
    elif kind == "head":
        r = await client.head(f"/ipfs/{rng.choice(held['leaves'])}?format=raw")
        expect = {200}
    elif kind == "range":
        cid = rng.choice(held["leaves"])
        r = await client.get(f"/ipfs/{cid}?format=raw", headers={"Range": "bytes=100-199"})
        expect = {206}
        if r.status_code == 206 and len(r.content) != 100:
            tally.wrong.append(f"range {cid}: {len(r.content)} bytes")
    elif kind == "absent":
        r = await client.get(f"/ipfs/{raw_cid(rng.randbytes(8))}?format=raw")
        expect = {404}
    elif kind == "no-format":
        r = await client.get(f"/ipfs/{rng.choice(held['small'])}")
        expect = {400}
    elif kind == "bad-cid":
        r = await client.get(f"/ipfs/bafy{rng.randrange(10**9)}?format=raw")
        expect = {400}
    else:
        data = rng.randbytes(70_000 if kind == "put-big" else rng.randrange(1, 2000))
        body = data if kind != "put-bad" else data + b"!"
        headers = {} if kind == "put-noauth" else {"Authorization": f"Bearer {TOKEN}"}
        r = await client.put(f"/ipld/{raw_cid(data)}", content=body, headers=headers)
        expect = {"put-ok": {201, 200}, "put-bad": {400}, "put-big": {413}, "put-noauth": {401}}[kind]
    tally.statuses[(kind, r.status_code)] += 1
    if r.status_code not in expect:
        tally.wrong.append(f"{kind}: {r.status_code} {r.text[:80]!r}")


async def _connection(
    client: httpx.AsyncClient, seed: int, deadline: float, held: dict[str, list[str]], tally: Tally
) -> None:
    rng = random.Random(seed)
    for n in range(MAX_REQUESTS_PER_CONNECTION):
        if n >= MIN_REQUESTS_PER_CONNECTION and time.monotonic() >= deadline:
            return
        await _one(client, rng, held, tally)


def _slowloris(url: str, until: float, closed: list[bool]) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"GET /ipfs/")
        while time.monotonic() < until:
            try:
                sock.sendall(b"x")
                sock.settimeout(1.0)
                if sock.recv(1) == b"":
                    closed.append(True)
                    return
            except TimeoutError:
                continue
            except OSError:
                closed.append(True)
                return


@pytest.mark.parametrize(
    "seconds",
    [
        pytest.param(4, marks=pytest.mark.skipif(SOAK, reason="CI runs the 30 s soak instead")),
        pytest.param(30, marks=[pytest.mark.slow, pytest.mark.skipif(not SOAK, reason="CI (or KURO_SOAK=1) only")]),
    ],
    ids=["short", "soak-30s"],
)
def test_the_gateway_under_64_connections_of_mixed_load_and_abuse(
    loaded: tuple[str, int, dict[str, list[str]]], seconds: int
) -> None:
    url, pid, held = loaded
    tally = Tally()
    # Warm-up (a tenth of the run) before the memory baseline.
    asyncio.run(_run(url, held, tally, max(1.0, seconds / 10), seed=1000))
    baseline = _rss(pid)
    closed: list[bool] = []
    drips = [threading.Thread(target=_slowloris, args=(url, time.monotonic() + seconds, closed)) for _ in range(4)]
    for t in drips:
        t.start()
    asyncio.run(_run(url, held, tally, seconds, seed=0))
    for t in drips:
        t.join()
    end = _rss(pid)
    served_5xx = {k: n for k, n in tally.statuses.items() if k[1] >= 500}
    assert served_5xx == {}
    assert tally.wrong == []
    assert sum(tally.statuses.values()) >= 2 * MIN_REQUESTS_PER_CONNECTION * CONNECTIONS  # warm-up + run
    assert tally.bytes_verified > 0
    assert end - baseline < RSS_ALLOWANCE, f"resident set grew {(end - baseline) >> 20} MiB"
    if seconds > 10:  # a dripping client must be cut off by the 10 s head deadline
        assert len(closed) == 4


async def _run(url: str, held: dict[str, list[str]], tally: Tally, seconds: float, seed: int) -> None:
    # One pool of 64 keep-alive connections, one request loop per connection.
    # Idle connections expire (2 s) before the server's keep-alive (5 s) closes them under a request.
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS, keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120, verify=False) as client:
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(_connection(client, seed + i, deadline, held, tally) for i in range(CONNECTIONS)))
