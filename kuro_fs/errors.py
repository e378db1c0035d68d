"""Errors raised by kuro_fs: one root, the tree drawn here.

## The one decision
Bad input and broken data are typed exceptions; refused work is not. A denial
(missing capability, bad path, not-found …) is a receipt value returned by
:mod:`kuro_fs.fs`, never raised. What *is* raised here is for malformed bytes,
invalid CIDs, tampered CARs and store failures — things a caller must not
mistake for an answer.

Errors that describe bad input subclass :class:`ValueError`, the builtin that
callers already catch (as the ``multiformats`` package does). Each class has a
stable kebab-case ``reference`` that user-facing tools print.

::

    KuroFsError
    ├── InvalidCID          (ValueError)   malformed / unsupported CID string or bytes
    ├── DagCborError        (ValueError)   non-canonical or unencodable dag-cbor
    ├── DagPbError          (ValueError)   malformed dag-pb / UnixFS bytes
    │   └── FileTooDeep                    a file's DAG nests deeper than a reader follows (``depth`` names it)
    ├── CarError            (ValueError)   malformed or tampered CAR file
    ├── ShardingNotSupported               (no longer raised: kept importable for callers that catch it)
    └── BlockStoreError                    the store failed to do what was asked
        ├── CorruptBlock                   stored bytes do not hash to their CID
        │   └── GatewayLied                a gateway sent bytes that are not the block asked for
        ├── MissingBlock                   a block the DAG names is not in the store
        └── GatewayError                   a block store behind a gateway could not reach an answer
            ├── InvalidGatewayURL (ValueError) not http(s)://host[:port]: refused before any request
            ├── GatewayUnreachable         connection refused, reset or dropped mid-response
            ├── GatewayTimeout             no answer within the store's timeout
            └── GatewayRefused             an HTTP status that is no answer (401, 403, 413, 5xx …)

A ``BlockStoreError`` that stops a gateway ``publish`` carries what it had published (``partial``, ``published_bytes``).

``GatewayLied`` is also a ``GatewayError``: a caller that only asks "did the network fail me?"
catches it there, one that asks "are these bytes wrong?" catches it as ``CorruptBlock``.

## Not done here
No error carries a denial: see ``kuro.fs/reason`` in :mod:`kuro_fs.fs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kuro_fs.blocks import PublishResult

__all__ = [
    "BlockStoreError",
    "CarError",
    "CorruptBlock",
    "DagCborError",
    "DagPbError",
    "FileTooDeep",
    "GatewayError",
    "GatewayLied",
    "GatewayRefused",
    "GatewayTimeout",
    "GatewayUnreachable",
    "InvalidCID",
    "InvalidGatewayURL",
    "KuroFsError",
    "MissingBlock",
    "ShardingNotSupported",
]


class KuroFsError(Exception):
    """Root of every exception kuro_fs raises on purpose."""

    reference = "kuro-fs-error"


class InvalidCID(KuroFsError, ValueError):
    """A CID string or byte form is malformed or outside what kuro_fs accepts.

    Accepted: CIDv1, sha2-256 (32-byte digest), codecs raw / dag-pb / dag-cbor,
    string form base32 lower-case multibase (``b…``).
    """

    reference = "invalid-cid"


class DagCborError(KuroFsError, ValueError):
    """A value cannot be encoded as canonical dag-cbor, or bytes are not dag-cbor."""

    reference = "invalid-dag-cbor"


class DagPbError(KuroFsError, ValueError):
    """Bytes are not a well-formed dag-pb node or UnixFS Data message."""

    reference = "invalid-dag-pb"


class FileTooDeep(DagPbError):
    """A UnixFS file's DAG nests File nodes deeper than ``depth`` levels, the most a reader follows.

    ``cid`` names the node found past that depth. :class:`kuro_fs.fs.Fs` refuses such a read
    ``over-budget`` with ``kuro.fs/budget`` ``{"depth": depth}``.
    """

    reference = "file-too-deep"

    def __init__(self, cid: str, depth: int) -> None:
        super().__init__(f"file tree deeper than {depth} levels at {cid}")
        self.cid = cid
        self.depth = depth


class CarError(KuroFsError, ValueError):
    """A CAR file is malformed, truncated, or holds a block that fails its CID."""

    reference = "invalid-car"


class ShardingNotSupported(KuroFsError):
    """Formerly: a directory too large for one UnixFS block. kuro_fs now writes HAMT shards and never raises it;
    the name stays importable so code that catches it keeps working."""

    reference = "hamt-sharding-not-supported"


class BlockStoreError(KuroFsError):
    """The block store could not complete an operation (I/O error, closed store).

    One that cut a gateway ``publish`` short (the network, the gateway, or the store's own cache
    failing) says what was done before it: ``partial`` is the result so far
    (``{"published": n, "rejected": […], "reasons": {…}}``), ``published_bytes`` the bytes of the blocks
    the gateway took, and the message names both. Both are ``None`` for any other failure.
    """

    reference = "block-store-error"
    partial: PublishResult | None = None
    published_bytes: int | None = None

    def cut_publish_short(self, partial: PublishResult, published_bytes: int) -> None:
        """Record (and say in the message) what the ``publish`` this failure stopped had published."""
        self.partial, self.published_bytes = partial, published_bytes
        self.args = (
            f"{self.args[0] if self.args else type(self).__name__}; publish stopped: "
            f"{partial['published']} blocks ({published_bytes} bytes) published before it, "
            f"{len(partial['rejected'])} rejected, the block in flight and those after it not sent",
            *self.args[1:],
        )


class CorruptBlock(BlockStoreError):
    """Stored bytes do not hash to the CID they are stored under.

    Raised instead of returning wrong bytes: a reader must never be handed data
    that does not match the name it asked for.
    """

    reference = "corrupt-block"

    def __init__(self, cid: str, detail: str = "stored bytes do not hash to this CID") -> None:
        super().__init__(f"corrupt block {cid}: {detail}")
        self.cid = cid


class MissingBlock(BlockStoreError):
    """A block the DAG names is not in the store (``block-missing``)."""

    reference = "block-missing"

    def __init__(self, cid: str) -> None:
        super().__init__(f"block missing from the store: {cid}")
        self.cid = cid


class GatewayError(BlockStoreError):
    """A block store behind a gateway could not get an answer from it."""

    reference = "gateway-error"


class InvalidGatewayURL(GatewayError, ValueError):
    """A gateway URL that is not ``http(s)://host[:port]`` (bad input: refused before any request)."""

    reference = "invalid-gateway-url"


class GatewayUnreachable(GatewayError):
    """The gateway could not be reached, or the connection broke mid-response."""

    reference = "gateway-unreachable"


class GatewayTimeout(GatewayError):
    """The gateway did not answer within the store's timeout."""

    reference = "gateway-timeout"


class GatewayRefused(GatewayError):
    """The gateway answered with a status that is no answer to the request (``status`` says which)."""

    reference = "gateway-refused"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class GatewayLied(CorruptBlock, GatewayError):
    """A gateway sent bytes that do not hash to the CID asked for (or a block nobody asked for).

    Nothing it sent in that response after the lie is cached or returned.
    """

    reference = "gateway-lied"
