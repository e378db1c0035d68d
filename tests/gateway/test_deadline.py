"""A gateway client's ``timeout`` bounds a whole request (a prefetched CAR: each block), however the bytes are paced.

Time is a fake clock the peer advances, never waited for: a peer "drips" by advancing the clock
before each byte it sends, so a test is as fast on a loaded machine as on an idle one, and a byte
that arrives after the deadline has passed is late by construction, not by a margin. The peers
are a scripted socket server on 127.0.0.1 (what httpx's own transport reads, response head
included) and an ``httpx.MockTransport`` whose body advances the clock as it is read (an injected
transport).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.car import dag_blocks, write_car
from kuro_fs.cid import raw_cid
from kuro_fs.errors import GatewayTimeout
from kuro_fs.gateway.client import GatewayBlockStore
from kuro_fs.importer import import_bytes

HELLO = raw_cid(b"hello")
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.ipld.raw\r\nContent-Length: 5\r\n\r\n"


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


#: A peer's script: a float advances the clock, bytes are sent.
Script = Sequence[float | bytes]


def drip(data: bytes, every: float) -> list[float | bytes]:
    """``data`` one byte at a time, the clock advanced by ``every`` before each."""
    return [step for i in range(len(data)) for step in (every, data[i : i + 1])]


class ScriptedPeer:
    """One HTTP connection on 127.0.0.1: reads a request head, plays the script, then holds the connection open."""

    def __init__(self, script: Script, clock: FakeClock) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.request = b""
        self._script = script
        self._clock = clock
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            try:
                while b"\r\n\r\n" not in self.request:
                    got = conn.recv(65536)
                    if not got:
                        return
                    self.request += got
                for step in self._script:
                    if isinstance(step, float):
                        self._clock.advance(step)
                    else:
                        conn.sendall(step)
            except OSError:  # the client gave up and closed the connection
                return
            self._release.wait(30)  # a safety net only: the test releases it when it ends

    def close(self) -> None:
        self._release.set()
        self._thread.join(30)
        self._listener.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def peer(clock: FakeClock) -> Iterator[Callable[[Script], ScriptedPeer]]:
    started: list[ScriptedPeer] = []

    def start(script: Script) -> ScriptedPeer:
        started.append(ScriptedPeer(script, clock))
        return started[-1]

    yield start
    for one in started:
        one.close()


# ---- the whole request, over a socket


def test_a_block_dripped_a_byte_at_a_time_times_out_as_a_whole(
    peer: Callable[[Script], ScriptedPeer], clock: FakeClock
) -> None:
    # Each byte comes 1 s after the last, well inside a 2.5 s timeout per read; the block takes 5 s.
    gateway = peer([HEAD, *drip(b"hello", 1.0)])
    cache = MemoryBlockStore()
    with GatewayBlockStore(gateway.url, cache, timeout=2.5, clock=clock) as store, pytest.raises(GatewayTimeout):
        store.get(HELLO)
    assert cache.stats()["blocks"] == 0


def _publish(store: GatewayBlockStore) -> object:
    store.put(b"hello")
    return store.publish([HELLO])


EMPTY_RAW = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.ipld.raw\r\nContent-Length: 0\r\n\r\n"


@pytest.mark.parametrize(
    ("call", "answer"),
    [
        (lambda store: store.get(HELLO), HEAD + b"hello"),
        (lambda store: store.has(HELLO), HEAD),
        (lambda store: store.probe(), EMPTY_RAW),
        (_publish, b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"),
    ],
    ids=["get", "has", "probe", "publish"],
)
def test_a_dripped_response_head_times_out_as_a_whole(
    peer: Callable[[Script], ScriptedPeer],
    clock: FakeClock,
    call: Callable[[GatewayBlockStore], object],
    answer: bytes,
) -> None:
    # A whole, right answer — but its head comes 0.1 s a byte, ~8 s in all, of a 2 s timeout.
    head, body = answer.split(b"\r\n\r\n")
    gateway = peer([*drip(head + b"\r\n\r\n", 0.1), body])
    with GatewayBlockStore(gateway.url, timeout=2.0, clock=clock) as store, pytest.raises(GatewayTimeout) as late:
        call(store)
    assert "ended past the 2 s deadline" in str(late.value)  # cut while the head was being read


def test_a_slow_answer_within_the_timeout_is_taken(peer: Callable[[Script], ScriptedPeer], clock: FakeClock) -> None:
    gateway = peer([*drip(HEAD[:10], 0.1), HEAD[10:], *drip(b"hello", 0.1)])  # 1.5 s in all, of 2
    with GatewayBlockStore(gateway.url, timeout=2.0, clock=clock) as store:
        assert store.get(HELLO) == b"hello"
    assert gateway.request.startswith(b"GET /ipfs/" + HELLO.encode() + b"?format=raw ")


def test_a_gateway_reached_through_an_environment_proxy_is_bounded_too(
    peer: Callable[[Script], ScriptedPeer], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = peer([*drip(HEAD, 0.1), b"hello"])  # the head alone takes ~8 s
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    store = GatewayBlockStore("http://gateway.test", timeout=2.0, clock=clock)
    with store, pytest.raises(GatewayTimeout) as late:
        store.get(HELLO)
    assert "ended past the 2 s deadline" in str(late.value)  # cut while the head was being read
    assert proxy.request.startswith(b"GET http://gateway.test/ipfs/")  # it did go through the proxy


# ---- an injected transport, and a CAR bounded per block


def _paced(chunks: Script, clock: FakeClock) -> Iterator[bytes]:
    for step in chunks:
        if isinstance(step, float):
            clock.advance(step)
        else:
            yield step


def _mock(chunks: Script, clock: FakeClock, cache: MemoryBlockStore | None = None) -> GatewayBlockStore:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_paced(chunks, clock))

    return GatewayBlockStore(
        "http://gateway.test", cache, timeout=2.0, clock=clock, transport=httpx.MockTransport(handler)
    )


def test_an_injected_transport_is_bounded_between_chunks(clock: FakeClock) -> None:
    with pytest.raises(GatewayTimeout):
        _mock(drip(b"hello", 1.0), clock).get(HELLO)


def _file_car() -> tuple[str, list[tuple[str, bytes]]]:
    source = MemoryBlockStore()
    root = import_bytes(source, bytes(range(256)) * 2, chunk_size=200, width=4)  # a root and three leaves
    return root, list(dag_blocks(source.get, root))


def _car_paced(root: str, blocks: list[tuple[str, bytes]], pace: Callable[[int], list[float]]) -> list[float | bytes]:
    """The CAR's chunks (header; then each block's prefix and bytes), with ``pace(i)`` clock steps
    before block i's prefix and the same before its bytes."""
    chunks = list(write_car([root], blocks))
    out: list[float | bytes] = [chunks[0]]
    for i in range(len(blocks)):
        before_prefix, before_bytes = pace(i)
        out += [before_prefix, chunks[1 + 2 * i], before_bytes, chunks[2 + 2 * i]]
    return out


def test_a_car_is_bounded_per_block_not_as_a_whole(clock: FakeClock) -> None:
    root, blocks = _file_car()
    assert len(blocks) == 4
    cache = MemoryBlockStore()
    # Each block 1.5 s after the one before (of a 2 s timeout): 6 s in all, and every block in time.
    store = _mock(_car_paced(root, blocks, lambda i: [1.5, 0.0]), clock, cache)
    assert store.prefetch(root) == 4
    assert sorted(cache.cids()) == sorted(cid for cid, _ in blocks)


def test_a_car_block_that_takes_longer_than_the_timeout_ends_the_prefetch(clock: FakeClock) -> None:
    root, blocks = _file_car()
    cache = MemoryBlockStore()
    # The third block: its prefix after 1.5 s, its bytes 1.5 s later — 3 s for one block.
    store = _mock(_car_paced(root, blocks, lambda i: [1.5, 1.5 if i == 2 else 0.0]), clock, cache)
    with pytest.raises(GatewayTimeout, match="did not arrive within 2 s"):
        store.prefetch(root)
    assert sorted(cache.cids()) == sorted(cid for cid, _ in blocks[:2])  # verified and in time: kept


# ---- bad input


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf"), "5", True, None])
def test_a_timeout_that_is_not_a_positive_number_is_refused(timeout: Any) -> None:
    with pytest.raises(ValueError, match="timeout"):
        GatewayBlockStore("http://gateway.test", timeout=timeout)
