"""Which blocks answer a gateway request: path resolution, then the walk of the terminal entity.

## The one decision
A CAR response is the blocks needed to verify the path, then the blocks of the terminal entity
chosen by ``dag-scope``, depth-first pre-order (links in the order their block lists them), with
identity CIDs never emitted (their bytes are inline in the parent) and repeats emitted or skipped
by ``dups``. Path segments resolve through

* UnixFS directories (a link of that name) and HAMT-sharded UnixFS directories (murmur3-x64-64 of
  the name picks one bucket per level, as go/JS ``hamt-sharding`` do, so only the shards on the way
  are read — never the whole HAMT);
* kuro.fs directories (``{"entries": {name: {"cid": …}}, "type": "kuro.fs/dir"}``: a segment is an
  entry name, so kuro.fs paths read as they do in ``kuro fs``); through a sharded one (an IPLD
  HashMap, past 256 entries) :func:`kuro_fs.fsdir.lookup` reads one node a level, and those nodes
  are the path's blocks;
* any other dag-cbor node by IPLD pathing (map key or list index, following links).

``entity`` is: every block of a UnixFS file (only those overlapping ``entity-bytes``, chosen from
``blocksizes`` without reading the leaves outside the range), a UnixFS directory block, all shard
blocks of a HAMT (not what they point to), and the block itself for anything else (raw, dag-cbor,
symlinks). ``all`` follows every link.

A missing root or path block, or a path that does not exist, is found before anything is sent
(:class:`NotHeld`, :class:`NoSuchPath`): a local store can say 404 up front; so is a terminal
block that does not decode as the walk needs it (:func:`walk` decodes it before it returns). A
block missing in the middle of the walk raises :class:`~kuro_fs.errors.MissingBlock` while
streaming. The walk never sends less than it claims: a UnixFS file whose ``blocksizes`` and links
disagree, a file DAG deeper than :data:`MAX_FILE_DEPTH` or a HAMT deeper than 8 levels raises
:class:`Unservable` instead of quietly skipping what it cannot place. Repeats are bounded by the
kuro.fs walk budget (:class:`~kuro_fs.fs.Budget`): every visit of a block already visited counts,
every byte re-sent with ``dups=y`` too (:class:`OverBudget`), so a diamond DAG — n levels, 2ⁿ
paths — cannot make one response stream terabytes.

## Pure
Blocks come through the injected ``get``.

## Not done here
No HAMT deeper than the 8 levels one 64-bit hash addresses; no dag-json; no UnixFS symlink following.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import mmh3

from kuro_fs import dagcbor
from kuro_fs.cid import ParsedCID, parse
from kuro_fs.dagpb import PBNode
from kuro_fs.dagpb import decode as decode_pb
from kuro_fs.errors import DagCborError, DagPbError, InvalidCID, MissingBlock
from kuro_fs.fs import Budget
from kuro_fs.fsdir import DIR_TYPE, lookup
from kuro_fs.gateway.request import CarParams, EntityBytes
from kuro_fs.unixfs import NodeType, UnixFSData, decode_data

__all__ = [
    "MALFORMED",
    "MAX_FILE_DEPTH",
    "NoSuchPath",
    "NotHeld",
    "OverBudget",
    "Resolved",
    "Unservable",
    "hamt_index",
    "resolve",
    "walk",
]

Get = Callable[[str], "bytes | None"]
_MAX_HAMT_LEVELS: Final = 8
_MAX_FILE_DEPTH: Final = 100


class NotHeld(Exception):
    """A block the request needs before streaming (the root or one on the path) is not held."""

    def __init__(self, cid: str, on_path: bool) -> None:
        super().__init__(f"{'block on the path' if on_path else 'root block'} {cid} is not held by this gateway")
        self.cid = cid


class NoSuchPath(Exception):
    """A path segment names nothing in the node it is looked up in."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """A resolved content path: the blocks that verify it (root first) and the terminal CID."""

    path_blocks: tuple[tuple[str, bytes], ...]
    terminal: str
    roots: tuple[str, ...]  # every CID on the way, root first, terminal last (X-Ipfs-Roots)
    block: bytes  # the terminal block, read once


# ---- node reading


def _unixfs(block: bytes) -> tuple[PBNode, UnixFSData | None]:
    node = decode_pb(block)
    try:
        return node, (decode_data(node.data) if node.data is not None else None)
    except DagPbError:
        return node, None


def _fetch(get: Get, cid: str, on_path: bool) -> bytes:
    block = get(cid)
    if block is None:
        raise NotHeld(cid, on_path)
    return block


def hamt_index(name: str, level: int, fanout: int) -> int:
    """The bucket of ``name`` at ``level`` of a HAMT with ``fanout`` buckets.

    The hash is the first 64 bits of murmur3-x64-128 (multicodec ``murmur3-x64-64``), read
    most significant bit first, ``log2(fanout)`` bits per level.
    """
    bits = fanout.bit_length() - 1
    h1 = mmh3.hash64(name.encode("utf-8"), signed=False)[0]
    shift = 64 - bits * (level + 1)
    if shift < 0:
        raise NoSuchPath(f"HAMT deeper than one 64-bit hash addresses while looking up {name!r}")
    return (h1 >> shift) & (fanout - 1)


def _hamt_step(get: Get, node: PBNode, meta: UnixFSData, name: str, out: list[tuple[str, bytes]]) -> str | None:
    # Descend shard by shard; append the intermediate shard blocks to ``out``; return the entry CID.
    fanout = meta.fanout or 256
    if fanout < 2 or fanout & (fanout - 1):
        raise NoSuchPath(f"HAMT fanout {fanout} is not a power of two")
    width = len(f"{fanout - 1:X}")
    for level in range(_MAX_HAMT_LEVELS):
        prefix = f"{hamt_index(name, level, fanout):0{width}X}"
        child = None
        for link in node.links:
            if link.name == prefix + name:
                return link.cid
            if link.name == prefix:
                child = link.cid
        if child is None:
            return None
        block = _fetch(get, child, True)
        out.append((child, block))
        node, sub = _unixfs(block)
        if sub is None or sub.type != NodeType.HAMT_SHARD:
            raise NoSuchPath(f"HAMT bucket {child} is not a shard node")
        meta = sub
    raise NoSuchPath(f"HAMT deeper than {_MAX_HAMT_LEVELS} levels while looking up {name!r}")


def _is_sharded_kuro_dir(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == DIR_TYPE and isinstance(value.get("shard"), dict)


def _cbor_step(value: Any, segment: str) -> Any:
    if isinstance(value, dict) and value.get("type") == DIR_TYPE and isinstance(value.get("entries"), dict):
        entry = value["entries"].get(segment)
        if isinstance(entry, dict) and isinstance(entry.get("cid"), dagcbor.Link):
            return entry["cid"]
        raise NoSuchPath(f"no entry {segment!r} in this kuro.fs directory")
    if isinstance(value, dict):
        if segment in value:
            return value[segment]
    elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
        return value[int(segment)]
    raise NoSuchPath(f"no field {segment!r} in this dag-cbor node")


def resolve(get: Get, root: str, segments: tuple[str, ...]) -> Resolved:
    """Follow ``segments`` from ``root``; return the blocks on the way and the terminal CID.

    Raises NotHeld: the root or a path block is not held. Raises NoSuchPath: a segment names
    nothing. Raises InvalidCID, DagPbError, DagCborError: a block on the way is malformed.
    """
    parse(root)
    cid = root
    block = _fetch(get, cid, False)
    blocks: list[tuple[str, bytes]] = []
    roots = [root]
    pending = list(segments)
    while pending:
        codec = parse(cid).codec
        blocks.append((cid, block))
        if codec == "dag-pb":
            segment = pending.pop(0)
            node, meta = _unixfs(block)
            if meta is not None and meta.type == NodeType.HAMT_SHARD:
                found = _hamt_step(get, node, meta, segment, blocks)
            elif meta is not None and meta.type == NodeType.DIRECTORY:
                found = next((link.cid for link in node.links if link.name == segment), None)
            else:
                raise NoSuchPath(f"{cid} is not a directory; cannot look up {segment!r}")
            if found is None:
                raise NoSuchPath(f"no entry {segment!r} in directory {cid}")
            cid = found
        elif codec == "dag-cbor":
            value: Any = dagcbor.decode(block)
            if _is_sharded_kuro_dir(value):
                segment = pending.pop(0)
                try:
                    entry, nodes = lookup(get, block, segment)
                except MissingBlock as exc:
                    raise NotHeld(exc.cid, True) from None
                blocks.extend(nodes)
                if entry is None:
                    raise NoSuchPath(f"no entry {segment!r} in this kuro.fs directory")
                value = dagcbor.Link(entry.cid)
            while pending and not isinstance(value, dagcbor.Link):
                value = _cbor_step(value, pending.pop(0))
            if not isinstance(value, dagcbor.Link):
                return Resolved(tuple(blocks[:-1]), cid, tuple(roots), block)  # a value inside this block
            cid = value.cid
        else:
            raise NoSuchPath(f"{cid} is a raw block; cannot look up {pending[0]!r}")
        roots.append(cid)
        block = _fetch(get, cid, True)
    return Resolved(tuple(blocks), cid, tuple(roots), block)


# ---- the walk


class Unservable(ValueError):
    """The entity cannot be sent whole: a UnixFS file whose ``blocksizes`` and links disagree, a file
    DAG deeper than :data:`MAX_FILE_DEPTH` or a HAMT deeper than one 64-bit hash addresses. Sending
    less would be a 200 with an incomplete entity, so the walk stops here instead."""


class OverBudget(Exception):
    """A response would repeat more blocks (or, with ``dups=y``, re-send more bytes) than its budget allows."""


#: How deep a UnixFS file DAG may be (a balanced 174-wide tree of 256 KiB leaves needs 6 levels for a petabyte).
MAX_FILE_DEPTH: Final = _MAX_FILE_DEPTH


class _Emitter:
    """Emits blocks once (``dups=n``) or per link (``dups=y``), and charges every repeated visit to the budget."""

    def __init__(self, get: Get, dups: bool, known: tuple[str, bytes], budget: Budget) -> None:
        self.get = get
        self.dups = dups
        self.seen: set[str] = set()
        self.known = known  # the terminal block, already read by resolve
        self.budget = budget
        self.repeats = 0
        self.repeated_bytes = 0

    def block(self, cid: str) -> tuple[ParsedCID, bytes]:
        parsed = parse(cid)
        if parsed.hash == "identity":
            return parsed, parsed.digest
        data = self.known[1] if cid == self.known[0] else self.get(cid)
        if data is None:
            raise MissingBlock(cid)
        return parsed, data

    def charge(self, size: int) -> None:
        """Count one more visit of a block visited before (``size`` bytes re-sent); OverBudget past the budget."""
        self.repeats += 1
        self.repeated_bytes += size
        if self.repeats > self.budget.entries or self.repeated_bytes > self.budget.bytes:
            raise OverBudget(
                f"the response would repeat more than {self.budget.entries} blocks or re-send more than "
                f"{self.budget.bytes} bytes (a DAG whose links meet again and again)"
            )

    def seen_before(self, parsed: ParsedCID) -> bool:
        return parsed.key in self.seen

    def emit(self, parsed: ParsedCID, cid: str, data: bytes) -> Iterator[tuple[str, bytes]]:
        if parsed.hash == "identity":
            return
        key = parsed.key
        if key in self.seen:
            self.charge(len(data) if self.dups else 0)
            if not self.dups:
                return
        else:
            self.seen.add(key)
        yield cid, data


def _links(parsed: ParsedCID, data: bytes) -> list[str]:
    if parsed.codec == "dag-pb":
        return [link.cid for link in decode_pb(data).links]
    if parsed.codec == "dag-cbor":
        return dagcbor.links(dagcbor.decode(data))
    return []


def _all(em: _Emitter, cid: str) -> Iterator[tuple[str, bytes]]:
    stack = [cid]
    while stack:
        here = stack.pop()
        if not em.dups and em.seen_before(parse(here)):
            continue  # its whole DAG was sent (or is being sent) already
        parsed, data = em.block(here)
        yield from em.emit(parsed, here, data)
        stack.extend(reversed(_links(parsed, data)))


def _file_node(cid: str, data: bytes) -> tuple[PBNode, UnixFSData] | None:
    # A dag-pb node of a UnixFS file, checked: its blocksizes describe its links one for one. None: not a file node.
    node, meta = _unixfs(data)
    if meta is None or meta.type not in (NodeType.FILE, NodeType.RAW):
        return None
    if len(meta.blocksizes) != len(node.links):
        raise Unservable(
            f"UnixFS file node {cid} has {len(node.links)} links but {len(meta.blocksizes)} blocksizes; "
            "which bytes each link holds is unknown"
        )
    return node, meta


def _file(
    em: _Emitter, cid: str, parsed: ParsedCID, data: bytes, lo: int, hi: int, depth: int
) -> Iterator[tuple[str, bytes]]:
    # The blocks of the file subtree at ``cid`` overlapping [lo, hi) (relative to its start).
    yield from em.emit(parsed, cid, data)
    if parsed.codec != "dag-pb":
        return
    if depth > MAX_FILE_DEPTH:
        raise Unservable(f"UnixFS file DAG deeper than {MAX_FILE_DEPTH} levels at {cid}")
    checked = _file_node(cid, data)
    if checked is None:
        if depth == 0:
            return
        raise Unservable(f"block {cid} inside a UnixFS file is not a file node")
    node, meta = checked
    start = len(meta.data or b"")
    for link, size in zip(node.links, meta.blocksizes, strict=True):
        stop = start + size
        if start >= hi:
            break
        if stop > lo:
            child_parsed = parse(link.cid)
            if not em.dups and child_parsed.codec == "raw" and em.seen_before(child_parsed):
                em.charge(0)  # a leaf sent already: nothing to read or send
            else:
                _, child_data = em.block(link.cid)
                yield from _file(
                    em, link.cid, child_parsed, child_data, max(lo - start, 0), min(hi, stop) - start, depth + 1
                )
        start = stop


def _entity(em: _Emitter, cid: str, entity_bytes: EntityBytes | None) -> Iterator[tuple[str, bytes]]:
    parsed, data = em.block(cid)
    if parsed.codec != "dag-pb":
        yield from em.emit(parsed, cid, data)
        return
    _node, meta = _unixfs(data)
    if meta is not None and meta.type in (NodeType.FILE, NodeType.RAW):
        size = len(meta.data or b"") + sum(meta.blocksizes)
        span = (0, size) if entity_bytes is None else entity_bytes.resolve(size)
        if span is None:  # an empty or out-of-file range: the root block lets the client see why
            yield from em.emit(parsed, cid, data)
            return
        yield from _file(em, cid, parsed, data, span[0], span[1], 0)
    elif meta is not None and meta.type == NodeType.HAMT_SHARD:
        yield from _shards(em, cid, parsed, data, 0)
    else:
        yield from em.emit(parsed, cid, data)


def _shards(em: _Emitter, cid: str, parsed: ParsedCID, data: bytes, depth: int) -> Iterator[tuple[str, bytes]]:
    yield from em.emit(parsed, cid, data)
    node, meta = _unixfs(data)
    width = len(f"{(meta.fanout if meta and meta.fanout else 256) - 1:X}")
    buckets = [link.cid for link in node.links if len(link.name) == width]  # a bucket that is itself a shard
    if buckets and depth + 1 >= _MAX_HAMT_LEVELS:
        raise Unservable(f"HAMT shard {cid} is deeper than {_MAX_HAMT_LEVELS} levels: no name can reach it")
    for child in buckets:
        child_parsed, child_data = em.block(child)
        yield from _shards(em, child, child_parsed, child_data, depth + 1)


def _check_terminal(resolved: Resolved, car: CarParams) -> None:
    # Decode the terminal block as the walk will, before anything is sent: a malformed root is refused, not cut.
    parsed = parse(resolved.terminal)
    if car.scope == "block" or parsed.hash == "identity":
        return
    if car.scope == "all":
        _links(parsed, resolved.block)
    elif parsed.codec == "dag-pb":
        _file_node(resolved.terminal, resolved.block)


def walk(get: Get, resolved: Resolved, car: CarParams, budget: Budget | None = None) -> Iterator[tuple[str, bytes]]:
    """The ``(cid, block)`` pairs of a CAR response for ``resolved`` under ``car``, lazily.

    The terminal block is decoded here, at once, as the walk will need it: a malformed one raises
    before the first pair (so a server can refuse the request instead of cutting a started stream).
    ``budget`` (default :class:`~kuro_fs.fs.Budget`'s) bounds the repeats: every visit of a block
    already visited in this response counts against ``entries``, and every re-sent byte
    (``dups=y``) against ``bytes`` — a DAG whose links meet again and again cannot make one
    response stream without end.

    Raises (now) DagPbError / DagCborError / InvalidCID / Unservable: the terminal block is
    malformed. Raises (while iterating) MissingBlock: a block of the entity is not held; DagPbError,
    DagCborError, InvalidCID, Unservable: a malformed block below; OverBudget: too many repeats.
    """
    _check_terminal(resolved, car)
    em = _Emitter(get, car.dups, (resolved.terminal, resolved.block), budget or Budget())
    return _walk(em, resolved, car)


def _walk(em: _Emitter, resolved: Resolved, car: CarParams) -> Iterator[tuple[str, bytes]]:
    for cid, data in resolved.path_blocks:
        yield from em.emit(parse(cid), cid, data)
    if car.scope == "block":
        parsed, data = em.block(resolved.terminal)
        yield from em.emit(parsed, resolved.terminal, data)
    elif car.scope == "entity":
        yield from _entity(em, resolved.terminal, car.entity_bytes)
    else:
        yield from _all(em, resolved.terminal)


#: The errors a malformed DAG raises while it is resolved or walked.
MALFORMED: Final = (InvalidCID, DagPbError, DagCborError, Unservable)
