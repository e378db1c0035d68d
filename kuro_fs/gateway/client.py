"""A block store that lives behind a trustless gateway: fetch by CID, verify, then cache.

## The one decision
Nothing a gateway sends is trusted — neither its bytes nor its sizes: every block is hashed
against the CID it was asked for (:func:`kuro_fs.cid.matches`) **before** it is cached or
returned, no answer is read past a cap (a block: :data:`MAX_FETCHED_BLOCK`, 2 MiB, the IPFS
stack's largest block — bitswap's message limit and this gateway's custody default; an error
answer: its first :data:`MAX_ERROR_BODY` bytes; a CAR section: the block cap plus its CID) and
none is inflated (only ``identity`` is asked for, and a 2xx body in a ``Content-Encoding`` is
refused unread: a compressed bomb costs its own kilobyte, not the gigabytes it names), and a
CAR is accepted block by block only while each block is the root or a link of a block already
accepted, and only once (so a gateway can neither slip in wrong bytes, nor fill the cache with
blocks nobody asked for, nor repeat one forever). Bytes that fail are a
:class:`~kuro_fs.errors.GatewayLied` and nothing after them is kept.

``get`` fetches exactly the block asked for (``?format=raw``): a guest reading 5 bytes of a
40 MB file fetches the file's root and one leaf, never the file. A caller that knows it wants a
whole file or tree asks for it in one request with :meth:`GatewayBlockStore.prefetch`
(``kuro fs get``/``cat`` and ``kuro car export`` do).

The store speaks the block-store vocabulary (:mod:`kuro_fs.blocks`) over a local ``cache``:

============== ==================================================================================
``get``        cache, else ``GET /ipfs/{cid}?format=raw``; ``None`` on 404
``prefetch``   one CAR (``dag-scope=entity``: a whole UnixFS file, or ``all``: a whole DAG;
               optionally ``entity-bytes``), verified block by block into the cache
``has``        cache, else ``HEAD /ipfs/{cid}?format=raw``
``probe``      ``GET /ipfs/bafkqaaa?format=raw``: is this a trustless gateway at all
``put``        the cache only — nothing is pushed implicitly
``publish``    ``PUT /ipld/{cid}`` of each named block and, for a root, every block of its DAG
               held in the cache; ``rejected``/``reasons`` say why a block was not taken
               (``missing``, ``corrupt``, ``undecodable`` — a dag-pb or dag-cbor block
               that does not decode, kept in the cache, not pushed, since the DAG below it
               cannot be known —, ``invalid-cid``, ``unauthorized``, ``too-large``, ``refused``)
``delete``,    the cache only
``stats``,
``drop_cache``
============== ==================================================================================

A CID may be given in any multibase the IPFS stack reads (``z…``, ``k…``, ``B…``, ``Qm…`` …):
it is turned into its canonical name (:func:`kuro_fs.cid.canonical`) before the cache or the
gateway sees it.

Failures are distinct types (all :class:`~kuro_fs.errors.BlockStoreError`): the gateway cannot be
reached (``GatewayUnreachable``), is too slow (``GatewayTimeout``: a request not over within the
store's ``timeout`` however its bytes are paced, :mod:`kuro_fs.gateway.deadline`; a prefetched CAR:
a block not within it), answers with a status that is
no answer (``GatewayRefused``, e.g. 500 or 401), or lies (``GatewayLied``: wrong bytes, a block
over the cap, a CAR block nobody asked for or sent twice). A network failure in ``publish``
raises; it is not counted as a rejection. A URL that is not ``http(s)://host[:port]`` is refused
when the store is made (``InvalidGatewayURL``, also a ``ValueError``), never at the first request.

## Effects
HTTP through httpx (imported when the first store is made; the ``gateway`` extra) and the cache.
The transport is injectable (``httpx.MockTransport`` in tests).

## Not done here
No retries or backoff, no several gateways at once, no deletion from custody (a gateway keeps what
it was given), no read-ahead guessed from a reader's pattern (``prefetch`` is asked for).
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

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
from kuro_fs.cid import canonical, matches, parse
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
    InvalidGatewayURL,
)
from kuro_fs.gateway.deadline import Deadline, DeadlinePassed, bound_client, bounded
from kuro_fs.gateway.request import CAR_TYPE, RAW_TYPE

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_ERROR_BODY",
    "MAX_FETCHED_BLOCK",
    "PROBE_CID",
    "GatewayBlockStore",
    "check_token",
    "check_url",
]

DEFAULT_TIMEOUT: Final = 30.0
#: The largest block accepted from a gateway: 2 MiB, the IPFS stack's block limit (bitswap refuses
#: larger messages; go and JS importers chunk at 256 KiB–1 MiB) and ``kuro gateway serve``'s custody cap.
MAX_FETCHED_BLOCK: Final = 2 * 1024 * 1024
#: How much of an error answer is read (its first line names the problem; the rest is dropped unread).
MAX_ERROR_BODY: Final = 4096
#: The longest CID a CAR section may start with (a CIDv1 with a 64-byte digest is 68 bytes).
_MAX_CID_BYTES: Final = 256
_CAR_ACCEPT: Final = f"{CAR_TYPE}; version=1; order=dfs; dups=n"
_SCOPES: Final = ("block", "entity", "all")
#: The empty identity block: what :meth:`GatewayBlockStore.probe` asks for.
PROBE_CID: Final = "bafkqaaa"


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
        raise BlockStoreError("a gateway block store needs httpx: pip install 'kuro-wasm[gateway]'") from exc
    return httpx


class _ChunkReader(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (an HTTP body), for :func:`read_car`; a
    chunk that arrives past the deadline is late (raises DeadlinePassed)."""

    def __init__(self, chunks: Iterator[bytes], deadline: Deadline) -> None:
        self._chunks = chunks
        self._deadline = deadline
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, out: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return 0
            self._deadline.check()
        n = min(len(out), len(self._buf))
        out[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


class _Answer:
    """A response's status and at most ``cap`` bytes of its body; ``over`` if the gateway sent (or declared) more."""

    __slots__ = ("body", "content_type", "over", "status")

    def __init__(self, status: int, body: bytes, over: bool, content_type: str = "") -> None:
        self.status = status
        self.body = body
        self.over = over
        self.content_type = content_type

    def first_line(self) -> str:
        text = self.body.decode("utf-8", "replace").strip()
        return text.splitlines()[0][:200] if text else ""


def _identity_only(response: httpx.Response) -> None:
    """Refuse a 2xx body in a ``Content-Encoding``: the client asks for identity and never inflates one.

    httpx decodes whatever encoding a server names, asked for or not, and one network chunk of
    ``gzip, gzip`` inflates to gigabytes in a single call, before any cap sees a byte.
    """
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity") or not 200 <= response.status_code < 300 or response.request.method == "HEAD":
        return
    raise GatewayRefused(
        f"{response.request.method} {response.request.url}: the gateway answered in Content-Encoding "
        f"{encoding!r}, though only identity was accepted; not read",
        response.status_code,
    )


def _raw_chunks(response: httpx.Response) -> Iterator[bytes]:
    # The body as sent, chunk by chunk. A response an injected transport built from bytes (httpx reads
    # those at once) is already in memory: its content is the one chunk.
    return iter((response.content,)) if response.is_stream_consumed else response.iter_raw()


def _capped(response: httpx.Response, cap: int, deadline: Deadline) -> _Answer:
    # Read at most ``cap`` bytes of a streamed body (as sent: never inflated, see _identity_only), then stop;
    # an answer (head or chunk) that arrives past the deadline is late, whatever the transport (httpx's
    # own is bounded at each socket read as well, see kuro_fs.gateway.deadline).
    deadline.check()
    _identity_only(response)
    declared = response.headers.get("content-length", "")
    kind = response.headers.get("content-type", "")
    if declared.isascii() and declared.isdigit() and int(declared) > cap:
        return _Answer(response.status_code, b"", True, kind)
    body = bytearray()
    for chunk in _raw_chunks(response):
        deadline.check()
        body += chunk
        if len(body) > cap:
            return _Answer(response.status_code, bytes(body[:cap]), True, kind)
    return _Answer(response.status_code, bytes(body), False, kind)


def check_url(url: object) -> str:
    """``url`` without a trailing ``/`` if it is ``http(s)://host[:port][/path]``.

    >>> check_url("http://127.0.0.1:8080/")
    'http://127.0.0.1:8080'

    Raises InvalidGatewayURL: anything else (no scheme, no host, a port past 65535, a broken IPv6 literal …).
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InvalidGatewayURL(f"a gateway URL is http(s)://host[:port], got {url!r}")
    httpx = _httpx()
    try:
        split = urlsplit(url)
        port = split.port  # raises ValueError past 65535
        httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise InvalidGatewayURL(f"malformed gateway URL {url!r}: {exc}") from None
    host = split.hostname or ""
    if not host or any(ch.isspace() or ord(ch) < 0x20 for ch in host) or port == 0:
        raise InvalidGatewayURL(f"a gateway URL is http(s)://host[:port], got {url!r} (no usable host or port)")
    return url.rstrip("/")


def check_token(token: object) -> str:
    """``token`` if an HTTP header can carry it as ``Authorization: Bearer <token>``: printable ASCII
    (spaces and tabs inside allowed), not empty.

    >>> check_token("s3cret-token")
    's3cret-token'

    Raises ValueError: anything else (a non-ASCII character or a control character can never be sent,
    so such a token would make every custody write fail).
    """
    if not isinstance(token, str) or not token.strip() or not all(ch == "\t" or " " <= ch <= "~" for ch in token):
        shown = repr(token) if not isinstance(token, str) else f"of {len(token)} characters"
        raise ValueError(f"a custody token is printable ASCII an HTTP header can carry; got one {shown} that is not")
    return token


#: Seconds an idle pooled connection is kept (below common servers' keep-alive timeouts).
_KEEPALIVE_EXPIRY: Final = 2.0


class GatewayBlockStore:
    """A :class:`~kuro_fs.blocks.BlockStore` whose blocks come from (and are published to) a gateway.

    ``url`` is the gateway's base (``http://127.0.0.1:8080``); ``cache`` holds what was fetched or
    put (a :class:`~kuro_fs.filestore.FileBlockStore` to keep it; default: in memory); ``token``
    is the custody write token ``publish`` sends. ``close()`` is idempotent and closes the HTTP
    client (not the cache); ``with`` works.

    ``timeout`` (seconds) bounds each request as a whole — connecting, sending, the response head
    and the whole body, however the gateway paces its bytes — not each socket read: ``get``,
    ``has``, ``probe`` and each block ``publish`` sends must be over within it, else
    GatewayTimeout. A :meth:`prefetch` CAR is bounded per block (see there). ``clock`` is the
    monotonic clock the deadline is read from (injectable, for tests).

    Raises InvalidGatewayURL (a ``BlockStoreError`` and ``ValueError``): ``url`` is not a
    well-formed http(s) URL with a host; ValueError: ``timeout`` is not a positive number, or
    ``token`` is not printable ASCII (:func:`check_token`).
    """

    def __init__(
        self,
        url: str,
        cache: BlockStore | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = check_url(url)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
            raise ValueError(f"a gateway timeout is a positive number of seconds, got {timeout!r}")
        httpx = _httpx()
        self._cache: BlockStore = cache if cache is not None else MemoryBlockStore()
        self._token = None if token is None else check_token(token)
        self._timeout = float(timeout)
        self._clock = clock
        self._client = bound_client(
            httpx.Client(
                base_url=self._url,
                timeout=httpx.Timeout(timeout),
                transport=transport,
                follow_redirects=False,
                # Drop idle connections before a server's own keep-alive timeout (uvicorn's is 5 s) can close
                # one just as a request is sent on it.
                limits=httpx.Limits(keepalive_expiry=_KEEPALIVE_EXPIRY),
                headers={"Accept-Encoding": "identity"},  # blocks are sent as they hash: never inflated here
            )
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

    # ---- HTTP, bounded, with httpx's errors translated

    def _exchange(self, method: str, path: str, cap: int, **kwargs: Any) -> _Answer:
        """One request, over within ``timeout``; the status and at most ``cap`` bytes of a 2xx body
        (:data:`MAX_ERROR_BODY` otherwise)."""
        if self._closed:
            raise BlockStoreError(f"gateway block store for {self._url} is closed")
        httpx = _httpx()

        def once(deadline: Deadline) -> _Answer:
            with self._client.stream(method, path, **kwargs) as response:
                return _capped(response, cap if 200 <= response.status_code < 300 else MAX_ERROR_BODY, deadline)

        try:
            with bounded(self._timeout, self._clock) as deadline:
                try:
                    return once(deadline)
                except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                    # A pooled keep-alive connection the server closed as we reused it: every request here is
                    # idempotent (GET, HEAD, PUT of content-addressed bytes), so it is sent once more, on a new
                    # one, within what is left of the same deadline.
                    return once(deadline)
        except (httpx.TimeoutException, DeadlinePassed) as exc:
            raise GatewayTimeout(
                f"{method} {self._url}{path}: no complete answer within {self._timeout:g} s ({exc})"
            ) from exc
        except (httpx.RequestError, OSError) as exc:
            raise GatewayUnreachable(f"{method} {self._url}{path}: {exc or type(exc).__name__}") from exc

    def _status_error(self, answer: _Answer, what: str) -> GatewayRefused:
        return GatewayRefused(f"{what}: gateway answered {answer.status} {answer.first_line()}".rstrip(), answer.status)

    # ---- reading

    def probe(self) -> None:
        """Check that the gateway is there and speaks the trustless protocol, before relying on it.

        Asks for the empty identity block ``bafkqaaa`` as ``?format=raw`` (the trustless-gateway
        spec's own probe): a trustless gateway answers 200, ``application/vnd.ipld.raw``, no bytes.

        Raises GatewayUnreachable, GatewayTimeout; GatewayRefused (with the status) for any other
        answer — a web server, a path gateway that redirects, a proxy's error page.
        """
        answer = self._exchange(
            "GET", f"/ipfs/{PROBE_CID}", MAX_ERROR_BODY, params={"format": "raw"}, headers={"Accept": RAW_TYPE}
        )
        kind = answer.content_type.split(";", 1)[0].strip().lower()
        if answer.status == 200 and kind == RAW_TYPE and answer.body == b"":
            return
        said = f"{answer.status} {kind or 'no content type'}" + (
            f" ({answer.first_line()})" if answer.status != 200 else ""
        )
        raise GatewayRefused(
            f"{self._url} does not answer the trustless gateway protocol: GET /ipfs/{PROBE_CID}?format=raw got {said}",
            answer.status,
        )

    def get(self, cid: str) -> bytes | None:
        """The block ``cid`` from the cache, else from the gateway (verified, then cached); None on 404.

        One block, one request (``?format=raw``): the DAG below a block is never fetched with it
        (:meth:`prefetch` does that, when asked).

        Raises InvalidCID, GatewayLied (bytes that do not hash to ``cid``, or more than
        :data:`MAX_FETCHED_BLOCK`), GatewayUnreachable, GatewayTimeout, GatewayRefused;
        CorruptBlock from the cache.
        """
        cid = canonical(cid)
        parsed = parse(cid)
        if parsed.hash == "identity":
            return parsed.digest
        cached = self._cache.get(cid)
        if cached is not None:
            return cached
        answer = self._exchange(
            "GET", f"/ipfs/{cid}", MAX_FETCHED_BLOCK, params={"format": "raw"}, headers={"Accept": RAW_TYPE}
        )
        if answer.status == 404:
            return None
        if answer.status != 200:
            raise self._status_error(answer, f"GET {cid}")
        if answer.over:
            raise GatewayLied(cid, f"the gateway sent more than the {MAX_FETCHED_BLOCK}-byte block cap; not cached")
        data = answer.body
        if not matches(parsed, data):
            raise GatewayLied(cid, f"the gateway sent {len(data)} bytes that do not hash to this CID; not cached")
        put_block(self._cache, cid, data)
        return data

    def has(self, cid: str) -> bool:
        """True if the cache holds ``cid`` or the gateway says it does (``HEAD``, nothing fetched)."""
        cid = canonical(cid)
        parsed = parse(cid)
        if parsed.hash == "identity" or self._cache.has(cid):
            return True
        answer = self._exchange("HEAD", f"/ipfs/{cid}", 0, params={"format": "raw"}, headers={"Accept": RAW_TYPE})
        if answer.status == 200:
            return True
        if answer.status == 404:
            return False
        raise self._status_error(answer, f"HEAD {cid}")

    def prefetch(self, cid: str, scope: str = "entity", entity_bytes: tuple[int, int | None] | None = None) -> int:
        """Fetch the DAG entity at ``cid`` as one CAR, verify each block, cache it; return how many.

        ``scope`` is the ``dag-scope`` (``block``, ``entity`` — a whole UnixFS file — or ``all``);
        ``entity_bytes`` (``(from, to)``, inclusive, ``to`` None for the end) asks for only the
        file blocks overlapping that range. Blocks are accepted only while each is the root or
        linked from one already accepted, and each once; a block that is neither, that does not
        hash to its CID, or whose section is longer than a block may be raises GatewayLied
        (blocks accepted before it stay cached: each was verified). A CAR cut short keeps what
        arrived and raises GatewayUnreachable.

        The store's ``timeout`` bounds each block, not the CAR (whose size nobody knows before it
        arrives): the response head and the first block must arrive within ``timeout`` of the
        request, and each further block within ``timeout`` of the block before it — so a gateway
        can hold up a block no longer than a :meth:`get` of it would allow, and a large CAR sent
        at a steady pace is never cut. Past that: GatewayTimeout, the blocks already accepted
        stay cached.

        A prefetch is an optimisation, never a proof of completeness: a CAR that ends early but
        well-formed (a gateway that holds only part of the DAG, or chooses to send less) is
        accepted for what it holds, and the count returned is only what was cached. Every read
        goes through :meth:`get`, which fetches any block the CAR left out, one request each
        (and answers None for one the gateway does not hold); nothing here or in its callers
        takes a prefetched root as a sign that the DAG below it is cached.

        Raises InvalidCID, ValueError (a bad ``scope`` or ``entity_bytes``), GatewayLied,
        GatewayUnreachable, GatewayTimeout, GatewayRefused (also for 404: the root is not held).
        """
        cid = canonical(cid)
        parse(cid)
        if scope not in _SCOPES:
            raise ValueError(f"dag-scope must be block, entity or all, got {scope!r}")
        params = {"format": "car", "dag-scope": scope}
        if entity_bytes is not None:
            first, last = entity_bytes
            if scope != "entity" or not isinstance(first, int) or not (last is None or isinstance(last, int)):
                raise ValueError(
                    f"entity_bytes is (from, to|None) of ints, with dag-scope entity; got {entity_bytes!r}"
                )
            params["entity-bytes"] = f"{first}:{'*' if last is None else last}"
        if self._closed:
            raise BlockStoreError(f"gateway block store for {self._url} is closed")
        httpx = _httpx()
        get = self._client.stream
        try:
            with (
                bounded(self._timeout, self._clock) as deadline,
                get("GET", f"/ipfs/{cid}", params=params, headers={"Accept": _CAR_ACCEPT}) as resp,
            ):
                if resp.status_code != 200:
                    raise self._status_error(_capped(resp, MAX_ERROR_BODY, deadline), f"GET {cid} as CAR")
                _identity_only(resp)
                return self._accept_car(cid, io.BufferedReader(_ChunkReader(_raw_chunks(resp), deadline)), deadline)
        except (httpx.TimeoutException, DeadlinePassed) as exc:
            raise GatewayTimeout(
                f"CAR of {cid} from {self._url}: a block did not arrive within {self._timeout:g} s ({exc})"
            ) from exc
        except (httpx.RequestError, OSError) as exc:
            raise GatewayUnreachable(f"CAR of {cid} from {self._url}: {exc or type(exc).__name__}") from exc

    #: The former name of :meth:`prefetch`.
    fetch_entity = prefetch

    def _accept_car(self, root: str, stream: io.BufferedReader, deadline: Deadline) -> int:
        expected = {parse(root).key}
        taken: set[str] = set()
        stored = 0
        try:
            _roots, sections = read_car(stream, max_section=MAX_FETCHED_BLOCK + _MAX_CID_BYTES)
            for cid, block in sections:  # read_car has already hashed each block against its CID
                deadline.renew()  # this block arrived in time: the next one has ``timeout`` from now
                parsed = parse(cid)
                key = parsed.key
                if key not in expected:
                    raise GatewayLied(cid, f"the gateway sent a block nobody asked for in the CAR of {root}")
                if key in taken:
                    raise GatewayLied(cid, f"the gateway sent a block twice in the dups=n CAR of {root}")
                taken.add(key)
                if len(block) > MAX_FETCHED_BLOCK:
                    raise GatewayLied(cid, f"a {len(block)}-byte block in the CAR of {root} exceeds the block cap")
                if parsed.hash != "identity":
                    put_block(self._cache, cid, block)
                    stored += 1
                expected.update(parse(link).key for link in links_of(cid, block))
        except CarError as exc:  # a block that does not hash, a section over the cap, a CAR that is no CAR
            raise GatewayLied(root, f"the CAR the gateway sent breaks the rules: {exc}") from exc
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
        # (cid, block or None, reason) for cid and, if it links, every block below it, each once. A block
        # that does not hash to its CID is "corrupt"; one of a linking codec that does not decode is
        # "undecodable" and not pushed: what lies below it cannot be known, so the DAG is not whole.
        seen: set[str] = set()
        stack = [cid]
        while stack:
            here = stack.pop()
            parsed = parse(here)
            if parsed.key in seen:
                continue
            seen.add(parsed.key)
            try:
                block = self._cache.get(here)
            except CorruptBlock:
                yield here, None, "corrupt"
                continue
            if block is None:
                yield here, None, "missing"
                continue
            if not matches(parsed, block):
                yield here, None, "corrupt"
                continue
            try:
                links = links_of(here, block)
            except (DagPbError, DagCborError, InvalidCID):
                yield here, None, "undecodable"
                continue
            yield here, block, None
            stack.extend(reversed(links))

    def _confirmed(self, answer: _Answer, cid: str) -> None:
        # A custody gateway's success names the block it now holds ({"cid": …, "stored": …}); any other 2xx
        # (a web host, a proxy's page) is no custody, and every later block would be "published" the same way.
        try:
            named = json.loads(answer.body)["cid"]
            if isinstance(named, str) and parse(canonical(named)).key == parse(cid).key:
                return
        except (ValueError, TypeError, KeyError, InvalidCID):
            pass
        raise GatewayRefused(
            f"PUT {cid}: {self._url} answered {answer.status} without naming the block "
            f"({answer.first_line()[:80]!r}): not a custody gateway",
            answer.status,
        )

    def publish(self, cids: Iterable[str]) -> PublishResult:
        """Push each named block, and every block of its DAG held in the cache, to the gateway's custody.

        A block is counted once however often it is named, and only when the gateway's answer names
        it (``{"cid": …}``). Raises GatewayUnreachable / GatewayTimeout (the network failed: nothing
        is counted for the block in flight) and GatewayRefused for a 5xx answer or a success that
        does not name the block (a server that is no custody gateway); these, and a BlockStoreError of
        the cache, say what was published before them
        (:meth:`~kuro_fs.errors.BlockStoreError.cut_publish_short`: ``partial``, ``published_bytes``).
        """
        result: PublishResult = {"published": 0, "rejected": [], "reasons": {}}
        sent = [0]
        try:
            self._publish(cids, result, sent)
        except BlockStoreError as exc:  # the gateway, the network or the cache
            exc.cut_publish_short(result, sent[0])
            raise
        return result

    def _publish(self, cids: Iterable[str], result: PublishResult, sent: list[int]) -> None:
        # publish's loop: fills ``result`` and ``sent[0]`` (bytes the gateway took) as it goes.
        rejected, reasons = result["rejected"], result["reasons"]
        done: set[str] = set()
        headers = {"Content-Type": "application/octet-stream"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        for cid in cids:
            key = cid if isinstance(cid, str) else repr(cid)
            try:
                cid = canonical(cid)
            except InvalidCID:
                if key not in reasons:
                    rejected.append(key)
                    reasons[key] = "invalid-cid"
                continue
            for here, block, reason in self._dag(cid):
                if parse(here).key in done:  # a CIDv0 and its CIDv1 are one block: pushed and counted once
                    continue
                done.add(parse(here).key)
                if block is None:
                    rejected.append(here)
                    reasons[here] = reason or "missing"
                    continue
                if parse(here).hash == "identity":
                    result["published"] += 1
                    continue
                answer = self._exchange("PUT", f"/ipld/{here}", MAX_ERROR_BODY, content=block, headers=headers)
                if answer.status in (200, 201):
                    self._confirmed(answer, here)
                    result["published"] += 1
                    sent[0] += len(block)
                    continue
                if answer.status >= 500:
                    raise self._status_error(answer, f"PUT {here}")
                rejected.append(here)
                reasons[here] = {401: "unauthorized", 403: "unauthorized", 413: "too-large"}.get(
                    answer.status, "refused"
                )
