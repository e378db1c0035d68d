"""The IPLD HashMap (a HAMT over dag-cbor) that a large kuro.fs directory is sharded into.

## The one decision
A large directory is the IPLD HashMap of the spec
(ipld.io/specs/advanced-data-layouts/hamt/spec) with the spec's writing
defaults: ``hashAlg`` sha2-256 (0x12), ``bitWidth`` 8 (256 slots per node, a
32-byte ``map``), ``bucketSize`` 3, each non-root node its own block, and the
CHAMP mutation rules (buckets sorted by key, a bucket that overflows becomes a
child node, a non-root node left with at most ``bucketSize`` entries and no
children collapses back into a bucket). So the same set of entries is always
the same blocks, whatever order they were written, removed and rewritten in;
:mod:`kuro_fs.fsdir` decides *when* a directory is sharded. A cryptographic
hash rather than murmur3: names come from guests, and a hash they cannot
collide keeps every lookup within ``256 / bitWidth`` levels.

Every operation on one key touches one path from the root: O(log n) nodes,
each bounded (at most ``2^bitWidth × bucketSize`` entries). Edits are
persistent — a :class:`Node` is never changed; an edit returns a new root whose
changed children are :class:`Node` values not yet stored, and :meth:`Hamt.flush`
encodes them bottom-up into blocks. A node keeps the canonical dag-cbor
encoding of each of its elements, so re-encoding a node after a one-key edit
joins bytes instead of encoding a few hundred entries again.

Reading trusts nothing: a node is checked where it is used (its bucket keys
must hash to the slots that lead to it, its buckets must fit ``bucketSize``,
it must not be empty or deeper than the hash), once per position, so a block
that lists a name where a lookup can never find it — or that is linked from
two slots to list its names twice — is refused (:class:`~kuro_fs.errors.DagCborError`)
instead of answered.

Written here because no maintained Python IPLD HashMap exists. The JavaScript
implementation by the spec's author (``iamap``) is the differential test
(``tests/parity/test_hamt_parity.py``): the same root CIDs for the same sets;
deletes are checked through the canonical form (a map after deletes is the map
of what remains), because iamap 3.0.6 leaves an empty bucket behind where the
spec removes it.

## Pure
Blocks are read through the injected ``load`` callable; nothing is stored here.

## Not done here
Other hash algorithms and bit widths above 8 are not read; no inline child nodes.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from kuro_fs import dagcbor
from kuro_fs.cid import cid_bytes, cid_from_digest, codec_is
from kuro_fs.errors import DagCborError

__all__ = [
    "BIT_WIDTH",
    "BUCKET_SIZE",
    "HASH_ALG",
    "Hamt",
    "Node",
    "Shape",
    "Values",
    "cbor_head",
    "encode_node",
    "encode_root",
    "link_bytes",
    "node_from_data",
]

#: The multihash code of the key hash (sha2-256).
HASH_ALG: Final = 0x12
BIT_WIDTH: Final = 8
BUCKET_SIZE: Final = 3
_HASH_BITS: Final = 256

Pair: TypeAlias = tuple[bytes, Any]
Bucket: TypeAlias = tuple[Pair, ...]
#: One slot of a node: a stored child (its CID), a child not stored yet (a Node), or a bucket.
Elem: TypeAlias = "str | Node | Bucket"


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """One HAMT node: ``bitmap`` (bit i set ⇔ slot i used) and its elements in slot order.

    ``raws`` holds each element's canonical dag-cbor bytes (None for a child not stored yet).
    ``width`` is the bit width its stored ``map`` shows (0 for a node built here); ``placed``
    records the (depth, hash prefix, bit width, bucket size) positions this node was checked at.
    """

    bitmap: int
    elems: tuple[Elem, ...]
    raws: tuple[bytes | None, ...]
    width: int = 0
    placed: set[tuple[int, int, int, int]] = field(default_factory=set, repr=False)

    @property
    def pending(self) -> bool:
        """True if a child of this node is not stored yet (:meth:`Hamt.flush` stores it)."""
        return None in self.raws


@dataclass(frozen=True, slots=True)
class Shape:
    """A HashMap's parameters: ``bit_width`` (3–8: 2^bit_width slots a node) and ``bucket_size`` (≥ 1).

    Raises ValueError: a parameter out of range.
    """

    bit_width: int = BIT_WIDTH
    bucket_size: int = BUCKET_SIZE

    def __post_init__(self) -> None:
        if type(self.bit_width) is not int or not 3 <= self.bit_width <= 8:
            raise ValueError(f"bit_width must be an int in 3..8, got {self.bit_width!r}")
        if type(self.bucket_size) is not int or not 1 <= self.bucket_size <= 64:
            raise ValueError(f"bucket_size must be an int in 1..64, got {self.bucket_size!r}")

    @property
    def map_bytes(self) -> int:
        """Length of a node's ``map`` bitfield."""
        return (1 << self.bit_width) // 8

    @property
    def max_depth(self) -> int:
        """Levels of nodes the hash can index (the root is level 0)."""
        return _HASH_BITS // self.bit_width


@dataclass(frozen=True, slots=True)
class Values:
    """How the map's values and keys are checked and encoded (kuro.fs entries: :mod:`kuro_fs.fsdir`).

    ``encode(value)`` gives its canonical dag-cbor bytes; ``decode(item)`` turns a decoded dag-cbor
    item into a value (raising DagCborError); ``key_ok(key)`` says whether a key may be stored.
    """

    encode: Callable[[Any], bytes]
    decode: Callable[[Any], Any]
    key_ok: Callable[[bytes], bool]


# ---- canonical bytes


def cbor_head(major: int, arg: int) -> bytes:
    """The shortest CBOR head for ``major`` type with argument ``0 ≤ arg < 2^64`` (as :mod:`kuro_fs.dagcbor` writes).

    >>> cbor_head(0, 23).hex(), cbor_head(4, 24).hex(), cbor_head(2, 300).hex()
    ('17', '9818', '59012c')
    """
    top = major << 5
    if arg < 24:
        return bytes((top | arg,))
    if arg < 0x100:
        return bytes((top | 24, arg))
    if arg < 0x10000:
        return bytes((top | 25,)) + arg.to_bytes(2, "big")
    if arg < 0x100000000:
        return bytes((top | 26,)) + arg.to_bytes(4, "big")
    return bytes((top | 27,)) + arg.to_bytes(8, "big")


#: The byte-string heads of keys up to 255 bytes (every kuro.fs name), by length.
_KEY_HEADS: Final = tuple(cbor_head(2, n) for n in range(256))
#: Pairs sorted by (key hash, key): the order :meth:`Hamt.build` lays them out in.
_HASH_THEN_KEY: Final = operator.itemgetter(0, 1)

#: A link to a dag-cbor sha2-256 CIDv1, up to its 32-byte digest: tag 42, bytes(37), 0x00, the CID prefix.
_LINK_HEAD: Final = b"\xd8\x2a\x58\x25\x00\x01\x71\x12\x20"


@functools.lru_cache(maxsize=65536)
def link_bytes(cid: str) -> bytes:
    """The canonical dag-cbor bytes of a link to ``cid`` (tag 42 over ``0x00 ‖ binary CID``)."""
    binary = cid_bytes(cid)
    return b"\xd8\x2a" + cbor_head(2, len(binary) + 1) + b"\x00" + binary


def _bucket_raw(bucket: Bucket, values: Values) -> bytes:
    """The canonical bytes of ``bucket``: an array of ``[key, value]`` pairs (the one encoding of a bucket;
    :meth:`Hamt._build` writes a bucket of one pair itself, the same bytes, as its hot loop's fast path)."""
    encode = values.encode
    parts = [cbor_head(4, len(bucket))]
    for key, value in bucket:
        n = len(key)
        parts += (b"\x82", _KEY_HEADS[n] if n < 256 else cbor_head(2, n), key, encode(value))
    return b"".join(parts)


def encode_node(node: Node, shape: Shape) -> bytes:
    """The canonical dag-cbor bytes of ``node`` (``[map, data]``). Raises ValueError: a child is not stored."""
    if node.pending:
        raise ValueError("a node with children not yet stored has no encoding: flush it first")
    m = shape.map_bytes
    raws: Any = node.raws
    return b"".join((b"\x82", cbor_head(2, m), node.bitmap.to_bytes(m, "little"), cbor_head(4, len(raws)), *raws))


def encode_root(node: Node, shape: Shape) -> bytes:
    """The canonical dag-cbor bytes of the spec's ``HashMapRoot`` whose ``hamt`` is ``node``::

        {"hamt": [map, data], "hashAlg": 18, "bucketSize": shape.bucket_size}

    Raises ValueError: a child is not stored.
    """
    return (
        b"\xa3\x64hamt"
        + encode_node(node, shape)
        + b"\x67hashAlg"
        + cbor_head(0, HASH_ALG)
        + b"\x6abucketSize"
        + cbor_head(0, shape.bucket_size)
    )


def node_from_data(item: Any, values: Values) -> Node:
    """The :class:`Node` a decoded ``[map, data]`` dag-cbor item describes, its elements re-encoded.

    Checks what the node alone shows: a ``map`` of 1–32 bytes (a power of two) whose set bits
    count the elements, buckets of one or more ``[key, value]`` pairs sorted by unique key, links
    to dag-cbor blocks. Raises DagCborError otherwise.
    """
    if not isinstance(item, list) or len(item) != 2:
        raise DagCborError("a HAMT node is [map, data]")
    bits, data = item
    if not isinstance(bits, bytes) or len(bits) not in (1, 2, 4, 8, 16, 32) or not isinstance(data, list):
        raise DagCborError("a HAMT node's map is 1–32 bytes (a power of two) and its data a list")
    bitmap = int.from_bytes(bits, "little")
    if bitmap.bit_count() != len(data):
        raise DagCborError(f"a HAMT node's map sets {bitmap.bit_count()} bits for {len(data)} elements")
    elems: list[Elem] = []
    raws: list[bytes | None] = []
    for element in data:
        if isinstance(element, dagcbor.Link):
            if not codec_is(element.cid, "dag-cbor"):
                raise DagCborError(f"a HAMT child link must name a dag-cbor node, got {element.cid}")
            elems.append(element.cid)
            raws.append(link_bytes(element.cid))
            continue
        if not isinstance(element, list) or not element:
            raise DagCborError("a HAMT element is a link or a non-empty bucket")
        pairs: list[Pair] = []
        for pair in element:
            if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], bytes):
                raise DagCborError("a HAMT bucket entry is [key bytes, value]")
            if pairs and pairs[-1][0] >= pair[0]:
                raise DagCborError("a HAMT bucket's keys must be unique and sorted")
            if not values.key_ok(pair[0]):
                raise DagCborError(f"HAMT key {pair[0]!r} is not allowed here")
            pairs.append((pair[0], values.decode(pair[1])))
        bucket = tuple(pairs)
        elems.append(bucket)
        raws.append(_bucket_raw(bucket, values))
    return Node(bitmap, tuple(elems), tuple(raws), (len(bits) * 8).bit_length() - 1)


def _hash(key: bytes) -> int:
    return int.from_bytes(hashlib.sha256(key).digest(), "big")


def _slots(node: Node) -> Iterator[tuple[int, Elem]]:
    bits = node.bitmap
    for elem in node.elems:
        low = bits & -bits
        bits ^= low
        yield low.bit_length() - 1, elem


def _with(node: Node, pos: int, elem: Elem, raw: bytes | None) -> Node:
    elems = (*node.elems[:pos], elem, *node.elems[pos + 1 :])
    return Node(node.bitmap, elems, (*node.raws[:pos], raw, *node.raws[pos + 1 :]))


def _without(node: Node, pos: int, bit: int) -> Node:
    elems = (*node.elems[:pos], *node.elems[pos + 1 :])
    return Node(node.bitmap & ~bit, elems, (*node.raws[:pos], *node.raws[pos + 1 :]))


# ---- the map


class Hamt:
    """Operations on one HashMap: ``shape``, ``values``, and ``load(cid, depth, prefix)`` → its checked node.

    ``load`` is how children are read (and cached, and verified); a loader that raises
    stops the operation with its error. Every method is pure over nodes: nothing is stored.
    """

    def __init__(self, shape: Shape, values: Values, load: Callable[[str, int, int], Node]) -> None:
        self.shape = shape
        self.values = values
        self.load = load
        self._w = shape.bit_width
        self._mask = (1 << shape.bit_width) - 1
        #: by depth, how far a key's hash is shifted for its slot there (:meth:`_index`, :meth:`_build`)
        self._shifts = tuple(_HASH_BITS - (depth + 1) * shape.bit_width for depth in range(shape.max_depth))

    # ---- checks

    def check(self, node: Node, depth: int, prefix: int) -> None:
        """Refuse ``node`` at ``depth`` under hash ``prefix`` unless every key there hashes to its slot.

        Also refused: a map of another width, a bucket over ``bucket_size``, an empty non-root node,
        a node deeper than the hash. Checked once per position in a map of this shape (memoised on
        the node: a cached node may be linked from maps of other shapes, where it must be checked anew).
        Raises DagCborError.
        """
        w = self._w
        where = (depth, prefix, w, self.shape.bucket_size)
        if where in node.placed:
            return
        if node.width not in (0, w):
            raise DagCborError(f"a HAMT node of bitWidth {node.width} in a map of bitWidth {w}")
        if depth >= self.shape.max_depth:
            raise DagCborError(f"a HAMT node at depth {depth}, deeper than the {_HASH_BITS}-bit hash allows")
        if depth and not node.elems:
            raise DagCborError("an empty HAMT node below the root")
        shift = self._shifts[depth]  # (depth < max_depth: checked above)
        for slot, elem in _slots(node):
            if type(elem) is tuple:
                if len(elem) > self.shape.bucket_size:
                    raise DagCborError(f"a HAMT bucket of {len(elem)} entries (bucketSize {self.shape.bucket_size})")
                want = (prefix << w) | slot
                for key, _ in elem:
                    if _hash(key) >> shift != want:
                        raise DagCborError(f"HAMT key {key!r} is in a slot its hash does not lead to")
        node.placed.add(where)

    def _child(self, elem: Elem, depth: int, prefix: int) -> Node:
        if isinstance(elem, Node):
            return elem
        assert isinstance(elem, str)
        return self.load(elem, depth, prefix)

    def _index(self, h: int, depth: int) -> int:
        return (h >> self._shifts[depth]) & self._mask

    # ---- reads

    def get(self, root: Node, key: bytes) -> Any:
        """The value stored under ``key``, or None."""
        h = _hash(key)
        node, depth, prefix = root, 0, 0
        while True:
            slot = self._index(h, depth)
            bit = 1 << slot
            if not node.bitmap & bit:
                return None
            elem = node.elems[(node.bitmap & (bit - 1)).bit_count()]
            if type(elem) is tuple:
                for k, value in elem:
                    if k == key:
                        return value
                return None
            prefix = (prefix << self._w) | slot
            depth += 1
            node = self._child(elem, depth, prefix)

    def items(self, root: Node) -> Iterator[Pair]:
        """Every (key, value), in hash order (each node checked on the way)."""
        stack = [(root, 0, 0)]
        while stack:
            node, depth, prefix = stack.pop()
            for slot, elem in _slots(node):
                if type(elem) is tuple:
                    yield from elem
                else:
                    where = (prefix << self._w) | slot
                    stack.append((self._child(elem, depth + 1, where), depth + 1, where))

    def count_upto(self, root: Node, limit: int) -> int:
        """The number of entries, or ``limit`` if there are at least that many (stops reading there)."""
        n = 0
        for _ in self.items(root):
            n += 1
            if n >= limit:
                break
        return n

    # ---- edits (persistent: a new root comes back, the old one is unchanged)

    def set(self, root: Node, key: bytes, value: Any) -> Node:
        """``root`` with ``key`` bound to ``value``. Raises DagCborError: the keys' hashes are exhausted."""
        return self._set(root, key, _hash(key), value, 0, 0)

    def _set(self, node: Node, key: bytes, h: int, value: Any, depth: int, prefix: int) -> Node:
        if depth >= self.shape.max_depth:
            raise DagCborError("HAMT keys collide in every bit of their hash")
        slot = self._index(h, depth)
        bit = 1 << slot
        pos = (node.bitmap & (bit - 1)).bit_count()
        if not node.bitmap & bit:
            bucket: Bucket = ((key, value),)
            return Node(
                node.bitmap | bit,
                (*node.elems[:pos], bucket, *node.elems[pos:]),
                (*node.raws[:pos], _bucket_raw(bucket, self.values), *node.raws[pos:]),
            )
        elem = node.elems[pos]
        where = (prefix << self._w) | slot
        if type(elem) is tuple:
            for j, (k, old) in enumerate(elem):
                if k == key:
                    if old == value:
                        return node
                    bucket = (*elem[:j], (key, value), *elem[j + 1 :])
                    return _with(node, pos, bucket, _bucket_raw(bucket, self.values))
            if len(elem) < self.shape.bucket_size:
                bucket = tuple(sorted((*elem, (key, value)), key=lambda pair: pair[0]))
                return _with(node, pos, bucket, _bucket_raw(bucket, self.values))
            child = Node(0, (), ())
            for k, v in (*elem, (key, value)):
                child = self._set(child, k, _hash(k), v, depth + 1, where)
            return _with(node, pos, child, None)
        below = self._child(elem, depth + 1, where)
        changed = self._set(below, key, h, value, depth + 1, where)
        return node if changed is below else _with(node, pos, changed, None)

    def delete(self, root: Node, key: bytes) -> Node:
        """``root`` without ``key`` (the same node if it was absent); collapses as the spec says."""
        return self._delete(root, key, _hash(key), 0, 0)

    def _delete(self, node: Node, key: bytes, h: int, depth: int, prefix: int) -> Node:
        slot = self._index(h, depth)
        bit = 1 << slot
        if not node.bitmap & bit:
            return node
        pos = (node.bitmap & (bit - 1)).bit_count()
        elem = node.elems[pos]
        if type(elem) is tuple:
            rest = tuple(pair for pair in elem if pair[0] != key)
            if len(rest) == len(elem):
                return node
            if rest:
                return _with(node, pos, rest, _bucket_raw(rest, self.values))
            return _without(node, pos, bit)
        where = (prefix << self._w) | slot
        below = self._child(elem, depth + 1, where)
        changed = self._delete(below, key, h, depth + 1, where)
        if changed is below:
            return node
        pairs = self._collapsible(changed)
        if pairs is None:
            return _with(node, pos, changed, None)
        if not pairs:
            return _without(node, pos, bit)
        bucket = tuple(sorted(pairs, key=lambda pair: pair[0]))
        return _with(node, pos, bucket, _bucket_raw(bucket, self.values))

    def _collapsible(self, node: Node) -> list[Pair] | None:
        # A node with no children and at most bucket_size entries goes back into its parent as a bucket.
        out: list[Pair] = []
        for elem in node.elems:
            if type(elem) is not tuple:
                return None
            out.extend(elem)
            if len(out) > self.shape.bucket_size:
                return None
        return out

    def build(self, pairs: Iterable[Pair]) -> Node:
        """A new map holding ``pairs`` (keys unique), laid out in one pass: each slot holding more than
        ``bucket_size`` keys becomes a child, as inserting them one by one would make it.

        Raises DagCborError: the keys' hashes are exhausted; ValueError: a duplicate key.
        """
        hashed = sorted([(_hash(key), key, value) for key, value in pairs], key=_HASH_THEN_KEY)
        for a, b in itertools.pairwise(hashed):
            if a[1] == b[1]:
                raise ValueError(f"duplicate key {a[1]!r}")
        return self._build(hashed, 0)

    def _build(self, hashed: list[tuple[int, bytes, Any]], depth: int) -> Node:
        # One pass per level over the pairs sorted by hash (each slot's keys are contiguous): the slot as
        # :meth:`_index` reads it, and a bucket of one pair (most slots below the root) encoded as
        # :func:`_bucket_raw` would, inline — the hot loop of a directory import (~1,000 keys a directory),
        # where a call per key cost ~5% (Hamt.build A/B); larger buckets go through :func:`_bucket_raw`.
        if depth >= self.shape.max_depth:
            raise DagCborError("HAMT keys collide in every bit of their hash")
        shift = self._shifts[depth]
        mask = self._mask
        size = self.shape.bucket_size
        values = self.values
        encode = values.encode
        bitmap = 0
        elems: list[Elem] = []
        raws: list[bytes | None] = []
        for slot, group in itertools.groupby(hashed, key=lambda item: item[0] >> shift & mask):
            items = list(group)
            bitmap |= 1 << slot
            if len(items) > size:
                elems.append(self._build(items, depth + 1))
                raws.append(None)
            elif len(items) == 1:
                _, key, value = items[0]
                n = len(key)
                elems.append(((key, value),))
                raws.append(b"".join((b"\x81\x82", _KEY_HEADS[n] if n < 256 else cbor_head(2, n), key, encode(value))))
            else:  # keys are unique (build checked): sorting the pairs compares keys only, never values
                bucket: Bucket = tuple(sorted([(key, value) for _, key, value in items]))
                elems.append(bucket)
                raws.append(_bucket_raw(bucket, values))
        return Node(bitmap, tuple(elems), tuple(raws))

    # ---- storing

    def flush(self, root: Node) -> tuple[Node, list[tuple[str, bytes, Node]]]:
        """``root`` with every child not yet stored encoded: (the new root, [(cid, block, node)] deepest first).

        The caller stores the blocks; the root itself is encoded by whoever embeds it.
        """
        out: list[tuple[str, bytes, Node]] = []
        return self._flush(root, 0, 0, out), out

    def _flush(self, node: Node, depth: int, prefix: int, out: list[tuple[str, bytes, Node]]) -> Node:
        if not node.pending:
            return node
        elems = list(node.elems)
        raws = list(node.raws)
        for pos in [i for i, raw in enumerate(raws) if raw is None]:
            elem = elems[pos]
            assert isinstance(elem, Node)
            where = (prefix << self._w) | _slot_at(node.bitmap, pos)
            child = self._flush(elem, depth + 1, where, out)
            block = encode_node(child, self.shape)
            digest = hashlib.sha256(block).digest()
            cid = cid_from_digest(digest, "dag-cbor")
            child.placed.add((depth + 1, where, self._w, self.shape.bucket_size))
            out.append((cid, block, child))
            elems[pos] = cid
            raws[pos] = _LINK_HEAD + digest
        return Node(node.bitmap, tuple(elems), tuple(raws))


def _slot_at(bitmap: int, pos: int) -> int:
    # The slot of the element at ``pos``: the (pos+1)-th set bit of ``bitmap`` (a binary search on popcounts).
    lo, hi = 0, bitmap.bit_length()
    while lo < hi:
        mid = (lo + hi) // 2
        if (bitmap & ((2 << mid) - 1)).bit_count() > pos:
            hi = mid
        else:
            lo = mid + 1
    return lo
