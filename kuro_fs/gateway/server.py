"""The gateway as an ASGI application: the IPFS Trustless Gateway protocol plus block custody.

## The one decision
One Starlette app over one block store answers exactly two families of requests, and everything it
does not understand is a clear 4xx, never a 5xx:

* ``GET``/``HEAD /ipfs/{cid}[/{path}]`` — the Trustless Gateway (specs.ipfs.tech
  ``http-gateways/trustless-gateway``): a raw block (``Range`` → 206/416) or a CARv1 *streamed*
  block by block, never built in memory (:mod:`kuro_fs.gateway.request` reads the request,
  :mod:`kuro_fs.gateway.dag` picks the blocks, :func:`kuro_fs.car.write_car` frames them). A path
  resolves through UnixFS (and HAMT) directories, kuro.fs directories and dag-cbor; a raw request
  with a path answers the block at its end. 404 when the root (or a path) block is not held, 412
  for ``Cache-Control: only-if-cached`` then, 304 on a matching ``If-None-Match``.
* ``PUT /ipld/{cid}`` — custody: the body is stored only if it hashes to the CID (400 otherwise,
  nothing stored), is at most ``max_block_bytes`` (413; the body is read incrementally and dropped
  past the cap) and carries the write token (``Authorization: Bearer``; 401 without, 403 wrong; a
  gateway started without a token is read-only: 403). 201 when stored, 200 when already held.
  ``GET``/``HEAD /ipld/{cid}`` return the raw block.

Bounds that belong to the app (the server adds connection, header and idle limits, see
:mod:`kuro_fs.gateway.serve`): the request body cap and a deadline for reading it, and a deadline on
every chunk sent, so a client that stops reading cannot hold a response open forever.

## Effects
Reads and writes the injected block store; nothing else. The app is plain ASGI, so any ASGI server
runs it unchanged.

## Not done here
No deserialized responses (HTML, files), no IPNS, no ``/api/v0``, no TLS (put a proxy in front).
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final, TypeVar
from urllib.parse import quote

import anyio
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from kuro_fs.blocks import BlockStore, put_block
from kuro_fs.car import write_car
from kuro_fs.cid import canonical, parse
from kuro_fs.errors import CorruptBlock, InvalidCID, KuroFsError
from kuro_fs.fs import Budget
from kuro_fs.gateway.dag import MALFORMED, NoSuchPath, NotHeld, OverBudget, Resolved, resolve, walk
from kuro_fs.gateway.request import (
    RAW_TYPE,
    Refused,
    Want,
    byte_range,
    content_disposition,
    etag,
    etag_matches,
    negotiate,
)

__all__ = ["DEFAULT_MAX_BLOCK_BYTES", "GatewayConfig", "create_app"]

DEFAULT_MAX_BLOCK_BYTES: Final = 2 * 1024 * 1024
_CACHE_CONTROL: Final = "public, max-age=29030400, immutable"
#: Every method a client may send; the ones a route does not take are answered 405 with ``Allow``.
_METHODS: Final = ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"]
_IPFS_PATH: Final = re.compile(r"/ipfs/[^/]+(/.*)?")
_IPLD_PATH: Final = re.compile(r"/ipld/[^/]+/?")
#: How many bytes of CAR one trip to a worker thread produces before they are sent.
_CAR_BATCH: Final = 256 * 1024
#: What a URL path segment may hold unencoded (RFC 3986 ``pchar`` and ``/``); X-Ipfs-Path encodes the rest.
_PATH_SAFE: Final = "/:@!$&'()*+,;=-._~"
_log = logging.getLogger("kuro.gateway")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """What a gateway app is started with.

    ``token`` None makes the gateway read-only. ``max_block_bytes`` caps a custody upload;
    ``body_timeout`` bounds reading one upload and ``send_timeout`` each chunk sent (seconds).
    ``budget`` bounds the repeats of one CAR response (:func:`kuro_fs.gateway.dag.walk`).
    """

    token: str | None = None
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES
    body_timeout: float = 30.0
    send_timeout: float = 30.0
    budget: Budget = field(default_factory=Budget)


# ---- small responses


def _text(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    base = {"X-Content-Type-Options": "nosniff"} | (headers or {})
    return PlainTextResponse(message + "\n", status_code=status, headers=base)


def _refusal(refused: Refused) -> Response:
    return _text(refused.status, refused.message)


def _store_fault(exc: KuroFsError, cid: str, doing: str) -> Response:
    """A failure of the gateway's own store, answered by the block and the kind of fault only.

    The store's own words stay in the server's log (one line): they may name its files
    (``/home/…/blocks/6a/bafk…``), which are nobody's business over HTTP. A stored block that does
    not hash to its CID is a 500 (the trustless gateway spec: 500 for genuine server errors such
    as storage failures, never for content that is simply not held — that is 404); a store that
    could not be read at all is a 503, the gateway being (perhaps for a while) unable to serve.
    """
    if isinstance(exc, CorruptBlock):
        cid = exc.cid or cid
        _log.warning("gateway: %s: stored block %s is corrupt: %s", doing, cid, exc)
        return _text(500, f"block {cid} is corrupt in this gateway's store (its bytes do not hash to its CID)")
    _log.warning("gateway: %s: the store failed on block %s: %s", doing, cid, exc)
    return _text(503, f"block {cid} is unavailable: this gateway's store could not be read")


async def _off_loop(call: Callable[..., _T], *args: object) -> _T:
    """Run a blocking store read (and its hashing) on a worker thread: the event loop keeps serving."""
    return await anyio.to_thread.run_sync(call, *args)


class _CarStream(StreamingResponse):
    """A streamed CAR body: blocks read on worker threads, each chunk sent under ``send_timeout``.

    A DAG that breaks mid-walk (a block missing, corrupt or malformed, too many repeats) is logged
    in one line and the response is left incomplete, so the server drops the connection: a cut
    CAR never looks complete (chunked encoding never gets its last chunk). A client that goes
    away stops the walk.
    """

    def __init__(self, chunks: Iterator[bytes], headers: dict[str, str], send_timeout: float, what: str) -> None:
        super().__init__(iter(()), status_code=200, headers=headers)  # no Content-Length: it is chunked
        self._chunks = chunks
        self._send_timeout = send_timeout
        self._what = what

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as tg:

            async def client_left() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            tg.start_soon(client_left)
            await self._stream(send)
            tg.cancel_scope.cancel()

    async def _stream(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        batches = _coalesced(self._chunks)
        try:
            while (chunk := await _off_loop(next, batches, None)) is not None:
                with anyio.fail_after(self._send_timeout):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except TimeoutError:
            _log.info("gateway: client stopped reading %s; stream abandoned", self._what)
            return
        except (KuroFsError, OverBudget, *MALFORMED) as exc:
            _log.warning("gateway: CAR of %s cut short: %s", self._what, exc)
            return  # incomplete on purpose: the server closes the connection
        except OSError:  # the client went away
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _coalesced(chunks: Iterator[bytes], at_least: int = _CAR_BATCH) -> Iterator[bytes]:
    # A CAR section's small varint+CID prefix rides with the block after it: one send per block or so.
    pending: list[bytes] = []
    size = 0
    for chunk in chunks:
        pending.append(chunk)
        size += len(chunk)
        if size >= at_least:
            yield pending[0] if len(pending) == 1 else b"".join(pending)
            pending, size = [], 0
    if pending:
        yield b"".join(pending)


# ---- the app


def create_app(store: BlockStore, config: GatewayConfig | None = None) -> Starlette:
    """The gateway ASGI app over ``store`` (see the module docstring for what it answers)."""
    cfg = config or GatewayConfig()

    async def ipfs(request: Request) -> Response:
        return await _serve_ipfs(request, store, cfg)

    async def ipld(request: Request) -> Response:
        if request.method == "PUT":
            return await _custody_put(request, store, cfg)
        return await _serve_ipfs(request, store, cfg, forced=Want("raw"))

    async def other(request: Request) -> Response:
        path = request.url.path
        if _IPFS_PATH.fullmatch(path):
            return _text(405, f"{request.method} is not served on /ipfs/: use GET or HEAD", {"Allow": "GET, HEAD"})
        if _IPLD_PATH.fullmatch(path):
            return _text(
                405, f"{request.method} is not served on /ipld/: use GET, HEAD or PUT", {"Allow": "GET, HEAD, PUT"}
            )
        return _text(404, "not a gateway path: use /ipfs/{cid} or /ipld/{cid}")

    routes = [
        Route("/ipfs/{cid}", ipfs, methods=["GET", "HEAD"]),
        Route("/ipfs/{cid}/{path:path}", ipfs, methods=["GET", "HEAD"]),
        Route("/ipld/{cid}", ipld, methods=["GET", "HEAD", "PUT"]),
        Route("/{rest:path}", other, methods=_METHODS),
    ]
    return Starlette(routes=routes)


@dataclass(frozen=True, slots=True)
class _Ready:
    """A request resolved before its response starts: the path's blocks and, for a CAR, the walk."""

    resolved: Resolved
    blocks: Iterator[tuple[str, bytes]] | None


def _prepare(
    store: BlockStore, cid: str, segments: tuple[str, ...], want: Want, budget: Budget, only_cached: bool
) -> _Ready | Response:
    """Everything that reads the store before a status is chosen (run on a worker thread)."""
    reading = [cid]

    def get(block: str) -> bytes | None:
        reading[0] = block  # the block a store failure is named by
        return store.get(block)

    try:
        resolved = resolve(get, cid, segments)
    except NotHeld as exc:
        return _text(412 if only_cached else 404, str(exc))
    except NoSuchPath as exc:
        return _text(404, f"no such path: {exc}")
    except MALFORMED as exc:
        return _text(422, f"cannot resolve {'/'.join(segments)!r} in {cid}: {exc}")
    except KuroFsError as exc:  # CorruptBlock, or a store that could not be read
        return _store_fault(exc, reading[0], f"/ipfs/{cid}")
    if want.kind == "raw" or want.car is None:
        return _Ready(resolved, None)
    try:
        blocks = walk(store.get, resolved, want.car, budget)
    except MALFORMED as exc:  # the terminal block cannot be walked: refused before a 200 is promised
        _log.warning("gateway: refused a CAR of %s: %s", resolved.terminal, exc)
        return _text(422, f"cannot send {resolved.terminal} as a CAR (dag-scope={want.car.scope}): {exc}")
    return _Ready(resolved, blocks)


def _held(store: BlockStore, cid: str) -> bool | Response:
    try:
        return store.has(cid)
    except KuroFsError as exc:
        return _store_fault(exc, cid, f"is {cid} held")


async def _serve_ipfs(request: Request, store: BlockStore, cfg: GatewayConfig, forced: Want | None = None) -> Response:
    given = request.path_params["cid"]
    path = request.path_params.get("path", "").strip("/")
    try:
        cid = canonical(given)  # z…, k…, f…, B… and Qm… are the same block as its b… name
    except InvalidCID as exc:
        return _text(400, f"invalid CID: {exc}")
    query = dict(request.query_params)
    want = forced or negotiate(query, request.headers.get("accept"))
    if isinstance(want, Refused):
        return _refusal(want)
    segments = tuple(s for s in path.split("/") if s) if path else ()
    if any(s in (".", "..") for s in segments):
        return _text(400, f"path {path!r} has '.' or '..' segments; content paths are literal")
    tag = etag(cid, path, want)
    common = {
        "Etag": tag,
        "Cache-Control": _CACHE_CONTROL,
        "X-Content-Type-Options": "nosniff",
        "Vary": "Accept",
        # A header is bytes: the path as the request URL writes it (UTF-8, percent-encoded), never raw text.
        "X-Ipfs-Path": quote(f"/ipfs/{given}" + (f"/{path}" if path else ""), safe=_PATH_SAFE),
    }
    only_cached = "only-if-cached" in request.headers.get("cache-control", "").lower()
    if etag_matches(request.headers.get("if-none-match"), tag) and not segments:
        held = await _off_loop(_held, store, cid)  # is there a representation at all? (a stat: nothing read)
        if isinstance(held, Response):
            return held
        if held:
            return Response(status_code=304, headers=common)
        return _text(412 if only_cached else 404, f"root block {cid} is not held by this gateway")
    ready = await _off_loop(_prepare, store, cid, segments, want, cfg.budget, only_cached)
    if isinstance(ready, Response):
        return ready
    if etag_matches(request.headers.get("if-none-match"), tag):
        return Response(status_code=304, headers=common)
    common["X-Ipfs-Roots"] = ",".join(ready.resolved.roots)
    if ready.blocks is None:
        return _raw(request, ready.resolved, common, query.get("filename"))
    return _car(request, cfg, cid, ready.blocks, want, common, query.get("filename"))


def _raw(request: Request, resolved: Resolved, headers: dict[str, str], filename: str | None) -> Response:
    block = resolved.block  # read (and re-hashed by the store) once, by resolve
    headers = headers | {
        "Content-Type": RAW_TYPE,
        "Accept-Ranges": "bytes",
        "Content-Disposition": content_disposition(filename, f"{resolved.terminal}.bin"),
    }
    span = byte_range(request.headers.get("range"), len(block))
    if span == "unsatisfiable":
        return _text(416, "range not satisfiable", {"Content-Range": f"bytes */{len(block)}"})
    if span is not None:
        lo, hi = span
        headers["Content-Range"] = f"bytes {lo}-{hi - 1}/{len(block)}"
        body = block[lo:hi]
        return Response(b"" if request.method == "HEAD" else body, 206, headers | {"Content-Length": str(hi - lo)})
    if request.method == "HEAD":
        return Response(b"", 200, headers | {"Content-Length": str(len(block))})
    return Response(block, 200, headers)


def _car(
    request: Request,
    cfg: GatewayConfig,
    cid: str,
    blocks: Iterator[tuple[str, bytes]],
    want: Want,
    headers: dict[str, str],
    filename: str | None,
) -> Response:
    assert want.car is not None
    headers = headers | {
        "Content-Type": want.car.content_type,
        "Accept-Ranges": "none",
        "Content-Disposition": content_disposition(filename, f"{cid}.car"),
    }
    if request.method == "HEAD":
        # The fields GET sends and no Content-Length (RFC 9110 §8.6: GET's is unknown, the CAR is chunked).
        # A streaming response is how Starlette leaves it out (a Response with a b"" body declares 0).
        return StreamingResponse(iter(()), 200, headers)
    return _CarStream(write_car([cid], blocks), headers, cfg.send_timeout, f"/ipfs/{cid}")


# ---- custody


def _authorized(request: Request, cfg: GatewayConfig) -> Response | None:
    if cfg.token is None:
        return _text(403, "this gateway is read-only: it was started without a write token")
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return _text(401, "custody writes need Authorization: Bearer <token>", {"WWW-Authenticate": "Bearer"})
    if not hmac.compare_digest(token.strip().encode("utf-8", "surrogateescape"), cfg.token.encode("utf-8")):
        return _text(403, "wrong write token")
    return None


async def _read_capped(request: Request, cap: int) -> bytes | Response:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):  # '²' is a digit to str.isdigit, not to int
            return _text(400, f"bad Content-Length {declared!r}")
        if int(declared) > cap:
            return _text(413, f"block of {declared} bytes exceeds the {cap}-byte cap")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            return _text(413, f"block exceeds the {cap}-byte cap", {"Connection": "close"})
    return bytes(body)


def _store(store: BlockStore, cid: str, data: bytes) -> bool | Response:
    """Verify and file ``data`` under ``cid`` (on a worker thread); True if the block was held already."""
    try:
        held = store.has(cid)
        put_block(store, cid, data)
    except CorruptBlock:
        return _text(400, f"the {len(data)} bytes sent do not hash to {cid}; nothing stored")
    except KuroFsError as exc:
        return _store_fault(exc, cid, f"custody of {cid}")
    return held


async def _custody_put(request: Request, store: BlockStore, cfg: GatewayConfig) -> Response:
    denied = _authorized(request, cfg)
    if denied is not None:
        return denied
    try:
        cid = canonical(request.path_params["cid"])
        parsed = parse(cid)
    except InvalidCID as exc:
        return _text(400, f"invalid CID: {exc}")
    try:
        with anyio.fail_after(cfg.body_timeout):
            got = await _read_capped(request, cfg.max_block_bytes)
    except TimeoutError:
        return _text(408, f"block upload not received within {cfg.body_timeout:g} s", {"Connection": "close"})
    except ClientDisconnect:
        return _text(400, "client disconnected during upload")
    if isinstance(got, Response):
        return got
    held = await _off_loop(_store, store, cid, got)
    if isinstance(held, Response):
        return held
    status = 200 if held or parsed.hash == "identity" else 201
    return JSONResponse({"cid": cid, "stored": not held}, status_code=status)
