"""A block store that lives behind a trustless gateway: fetch by CID, verify, then cache.

## The one decision
Nothing a gateway sends is trusted: every block is hashed against the CID it was asked for
(:func:`kuro_fs.cid.matches`) **before** it is cached or returned, and a CAR is accepted block by
block only while each block is the root or a link of a block already accepted (so a gateway can
neither slip in wrong bytes nor fill the cache with blocks nobody asked for). Bytes that fail are a
:class:`~kuro_fs.errors.GatewayLied` and nothing after them is kept.

The store speaks the block-store vocabulary (:mod:`kuro_fs.blocks`) over a local ``cache``:

============== ==================================================================================
``get``        cache, else the gateway: a dag-pb root is fetched as one CAR
               (``dag-scope=entity``: a whole UnixFS file in one request), anything else (or a
               gateway without CARs) as ``?format=raw``; ``None`` on 404
``has``        cache, else ``HEAD /ipfs/{cid}?format=raw``
``put``        the cache only — nothing is pushed implicitly
``publish``    ``PUT /ipld/{cid}`` of each named block and, for a root, every block of its DAG
               held in the cache; ``rejected``/``reasons`` say why a block was not taken
               (``missing``, ``corrupt``, ``invalid-cid``, ``unauthorized``, ``too-large``,
               ``refused``)
``delete``,    the cache only
``stats``,
``drop_cache``
============== ==================================================================================

Failures are distinct types (all :class:`~kuro_fs.errors.BlockStoreError`): the gateway cannot be
reached (``GatewayUnreachable``), is too slow (``GatewayTimeout``), answers with a status that is
no answer (``GatewayRefused``, e.g. 500 or 401), or lies (``GatewayLied``). A network failure in
``publish`` raises; it is not counted as a rejection.

## Effects
HTTP through httpx (imported when the first store is made; the ``gateway`` extra) and the cache.
The transport is injectable (``httpx.MockTransport`` in tests).

## Not done here
No retries or backoff, no several gateways at once, no deletion from custody (a gateway keeps what
it was given).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from kuro_fs.blocks import (
    BlockStore,
    DeleteResult,
    DropResult,
    MemoryBlockStore,
    PublishResult,
    StatsResult,
    put_block,
)
from kuro_fs.car import links_of, read_car
from kuro_fs.cid import matches, parse
from kuro_fs.errors import (
    BlockStoreError,
    CarError,
    CorruptBlock,
    DagCborError,
    DagPbError,
    GatewayLied,
    GatewayRefused,
    GatewayTimeout,
    GatewayUnreachable,
    InvalidCID,
)
from kuro_fs.gateway.request import CAR_TYPE, RAW_TYPE

if TYPE_CHECKING:
    import httpx

__all__ = ["DEFAULT_TIMEOUT", "MAX_FETCHED_BLOCK", "GatewayBlockStore"]

DEFAULT_TIMEOUT: Final = 30.0
#: The largest block accepted from a gateway (the IPFS ecosystem's 2 MiB block limit).
MAX_FETCHED_BLOCK: Final = 2 * 1024 * 1024
_CAR_ACCEPT: Final = f"{CAR_TYPE}; version=1; order=dfs; dups=n"


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
        raise BlockStoreError("a gateway block store needs httpx: pip install 'kuro-wasm[gateway]'") from exc
    return httpx


class _ChunkReader(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (an HTTP body), for :func:`read_car`."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, out: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(out), len(self._buf))
        out[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


#: Seconds an idle pooled connection is kept (below common servers' keep-alive timeouts).
_KEEPALIVE_EXPIRY: Final = 2.0


class GatewayBlockStore:
    """A :class:`~kuro_fs.blocks.BlockStore` whose blocks come from (and are published to) a gateway.

    ``url`` is the gateway's base (``http://127.0.0.1:8080``); ``cache`` holds what was fetched or
    put (a :class:`~kuro_fs.filestore.FileBlockStore` to keep it; default: in memory); ``token``
    is the custody write token ``publish`` sends. ``close()`` is idempotent and closes the HTTP
    client (not the cache); ``with`` works.

    Raises BlockStoreError: if ``url`` is not an http(s) URL.
    """

    def __init__(
        self,
        url: str,
        cache: BlockStore | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        prefetch_entities: bool = True,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise BlockStoreError(f"a gateway URL is http(s)://host[:port], got {url!r}")
        httpx = _httpx()
        self._url = url.rstrip("/")
        self._cache: BlockStore = cache if cache is not None else MemoryBlockStore()
        self._token = token
        self._prefetch = prefetch_entities
        self._client = httpx.Client(
            base_url=self._url,
            timeout=httpx.Timeout(timeout),
            transport=transport,
            follow_redirects=False,
            # Drop idle connections before a server's own keep-alive timeout (uvicorn's is 5 s) can close
            # one just as a request is sent on it.
            limits=httpx.Limits(keepalive_expiry=_KEEPALIVE_EXPIRY),
        )
        self._closed = False

    # ---- lifecycle

    @property
    def url(self) -> str:
        """The gateway's base URL."""
        return self._url

    @property
    def cache(self) -> BlockStore:
        """The local store fetched blocks are kept in."""
        return self._cache

    def close(self) -> None:
        """Close the HTTP client. Idempotent; later network operations raise ``BlockStoreError``."""
        if not self._closed:
            self._closed = True
            self._client.close()

    def __enter__(self) -> GatewayBlockStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GatewayBlockStore({self._url!r}, cache={self._cache!r})" + (" [closed]" if self._closed else "")

    # ---- HTTP, with httpx's errors translated

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        if self._closed:
            raise BlockStoreError(f"gateway block store for {self._url} is closed")
        httpx = _httpx()
        try:
            try:
                return self._client.request(method, path, **kwargs)  # type: ignore[no-any-return]
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                # A pooled keep-alive connection the server closed as we reused it: every request here is
                # idempotent (GET, HEAD, PUT of content-addressed bytes), so it is sent once more, on a new one.
                return self._client.request(method, path, **kwargs)  # type: ignore[no-any-return]
        except httpx.TimeoutException as exc:
            raise GatewayTimeout(f"{method} {self._url}{path}: no answer in time ({exc})") from exc
        except (httpx.TransportError, OSError) as exc:
            raise GatewayUnreachable(f"{method} {self._url}{path}: {exc or type(exc).__name__}") from exc

    @staticmethod
    def _status_error(response: httpx.Response, what: str) -> GatewayRefused:
        detail = response.text.strip().splitlines()[0][:200] if response.text.strip() else ""
        return GatewayRefused(
            f"{what}: gateway answered {response.status_code} {detail}".rstrip(), response.status_code
        )

    # ---- reading

    def get(self, cid: str) -> bytes | None:
        """The block ``cid`` from the cache, else from the gateway (verified, then cached); None on 404.

        Raises InvalidCID, GatewayLied, GatewayUnreachable, GatewayTimeout, GatewayRefused;
        CorruptBlock from the cache.
        """
        parsed = parse(cid)
        if parsed.hash == "identity":
            return parsed.digest
        cached = self._cache.get(cid)
        if cached is not None:
            return cached
        if self._prefetch and parsed.codec == "dag-pb":
            try:
                self.fetch_entity(cid)
            except GatewayRefused as exc:
                if exc.status == 404:
                    return None  # the root is not held: no second request
            except (CarError, DagPbError, DagCborError):
                pass  # a broken DAG below the root: the raw block may still be servable
            except (GatewayUnreachable, GatewayTimeout):
                if not self._cache.has(cid):
                    raise
            cached = self._cache.get(cid)
            if cached is not None:
                return cached
        return self._fetch_raw(cid)

    def _fetch_raw(self, cid: str) -> bytes | None:
        parsed = parse(cid)
        response = self._request("GET", f"/ipfs/{cid}", params={"format": "raw"}, headers={"Accept": RAW_TYPE})
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._status_error(response, f"GET {cid}")
        data = response.content
        if len(data) > MAX_FETCHED_BLOCK or not matches(parsed, data):
            raise GatewayLied(cid, f"the gateway sent {len(data)} bytes that do not hash to this CID; not cached")
        put_block(self._cache, cid, data)
        return data

    def has(self, cid: str) -> bool:
        """True if the cache holds ``cid`` or the gateway says it does (``HEAD``, nothing fetched)."""
        parsed = parse(cid)
        if parsed.hash == "identity" or self._cache.has(cid):
            return True
        response = self._request("HEAD", f"/ipfs/{cid}", params={"format": "raw"}, headers={"Accept": RAW_TYPE})
        if response.status_code == 200:
            return True
        if response.status_code == 404:
            return False
        raise self._status_error(response, f"HEAD {cid}")

    def fetch_entity(self, cid: str, scope: str = "entity") -> int:
        """Fetch the DAG entity at ``cid`` as one CAR, verify each block, cache it; return how many.

        ``scope`` is the ``dag-scope`` (``block``, ``entity`` — a whole UnixFS file — or ``all``).
        Blocks are accepted only while each is the root or linked from one already accepted;
        a block that is neither, or that does not hash to its CID, raises GatewayLied (blocks
        accepted before it stay cached: each was verified). A CAR cut short keeps what arrived.

        Raises InvalidCID, GatewayLied, GatewayUnreachable, GatewayTimeout, GatewayRefused (also
        for 404: the root is not held).
        """
        parse(cid)
        if scope not in ("block", "entity", "all"):
            raise ValueError(f"dag-scope must be block, entity or all, got {scope!r}")
        if self._closed:
            raise BlockStoreError(f"gateway block store for {self._url} is closed")
        httpx = _httpx()
        params = {"format": "car", "dag-scope": scope}
        stored = 0
        try:
            with self._client.stream("GET", f"/ipfs/{cid}", params=params, headers={"Accept": _CAR_ACCEPT}) as resp:
                if resp.status_code != 200:
                    resp.read()
                    raise self._status_error(resp, f"GET {cid} as CAR")
                stored = self._accept_car(cid, io.BufferedReader(_ChunkReader(resp.iter_bytes())))
        except httpx.TimeoutException as exc:
            raise GatewayTimeout(f"CAR of {cid} from {self._url}: no answer in time ({exc})") from exc
        except (httpx.TransportError, OSError) as exc:
            raise GatewayUnreachable(f"CAR of {cid} from {self._url}: {exc or type(exc).__name__}") from exc
        return stored

    def _accept_car(self, root: str, stream: io.BufferedReader) -> int:
        expected = {parse(root).key}
        stored = 0
        try:
            _roots, sections = read_car(stream)
            for cid, block in sections:  # read_car has already hashed each block against its CID
                parsed = parse(cid)
                if parsed.key not in expected:
                    raise GatewayLied(cid, f"the gateway sent a block nobody asked for in the CAR of {root}")
                if parsed.hash != "identity":
                    put_block(self._cache, cid, block)
                    stored += 1
                expected.update(parse(link).key for link in links_of(cid, block))
        except CarError as exc:
            if "does not hash" in str(exc):
                raise GatewayLied(root, f"a block in the CAR does not hash to its CID: {exc}") from exc
            raise
        return stored

    # ---- the local side

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        """Store in the cache only (publish pushes); see :meth:`kuro_fs.blocks.MemoryBlockStore.put`."""
        if cid is None:
            return self._cache.put(data, codec)
        return put_block(self._cache, cid, data)

    def delete(self, cid: str) -> DeleteResult:
        """Remove ``cid`` from the cache (the gateway keeps its copy)."""
        return self._cache.delete(cid)

    def stats(self) -> StatsResult:
        """The cache's block count and bytes."""
        return self._cache.stats()

    def drop_cache(self) -> DropResult:
        """Empty the cache."""
        return self._cache.drop_cache()

    # ---- custody

    def _dag(self, cid: str) -> Iterator[tuple[str, bytes | None, str | None]]:
        # (cid, block or None, reason) for cid and, if it links, every block below it, each once.
        seen: set[str] = set()
        stack = [cid]
        while stack:
            here = stack.pop()
            key = parse(here).key
            if key in seen:
                continue
            seen.add(key)
            try:
                block = self._cache.get(here)
            except CorruptBlock:
                yield here, None, "corrupt"
                continue
            if block is None:
                yield here, None, "missing"
                continue
            yield here, block, None
            try:
                stack.extend(reversed(links_of(here, block)))
            except (DagPbError, DagCborError, InvalidCID):
                continue  # a block that does not decode links nothing; it is still published as bytes

    def publish(self, cids: Iterable[str]) -> PublishResult:
        """Push each named block, and every block of its DAG held in the cache, to the gateway's custody.

        A block is counted once however often it is named. Raises GatewayUnreachable /
        GatewayTimeout (the network failed: nothing is counted for the block in flight) and
        GatewayRefused for a 5xx answer.
        """
        published = 0
        rejected: list[str] = []
        reasons: dict[str, str] = {}
        done: set[str] = set()
        headers = {"Content-Type": "application/octet-stream"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        for cid in cids:
            key = cid if isinstance(cid, str) else repr(cid)
            try:
                parse(cid)
            except InvalidCID:
                if key not in reasons:
                    rejected.append(key)
                    reasons[key] = "invalid-cid"
                continue
            for here, block, reason in self._dag(cid):
                if here in done:
                    continue
                done.add(here)
                if block is not None and not matches(parse(here), block):
                    block, reason = None, "corrupt"
                if block is None:
                    rejected.append(here)
                    reasons[here] = reason or "missing"
                    continue
                if parse(here).hash == "identity":
                    published += 1
                    continue
                response = self._request("PUT", f"/ipld/{here}", content=block, headers=headers)
                if response.status_code in (200, 201):
                    published += 1
                    continue
                if response.status_code >= 500:
                    raise self._status_error(response, f"PUT {here}")
                rejected.append(here)
                reasons[here] = {401: "unauthorized", 403: "unauthorized", 413: "too-large"}.get(
                    response.status_code, "refused"
                )
        return {"published": published, "rejected": rejected, "reasons": reasons}
