"""UnixFS directories as the JavaScript importer writes them: flat, or HAMT-sharded past its size threshold.

## The one decision
:func:`~kuro_fs.fsdir.to_unixfs_dir` must give the CIDs that
``ipfs-unixfs-importer`` (the version pinned in ``tools/package.json``, with its
defaults) gives for the same tree, so its rules are followed to the byte:

* **When to shard** (its ``links-bytes`` strategy): a directory is sharded when
  the sum, over its links, of UTF-8 name bytes + binary CID bytes (each
  link's own: 36 for a CIDv1 sha2-256, 34 for a linked CIDv0) exceeds
  :data:`~kuro_fs.unixfs.SHARD_THRESHOLD_BYTES` (262144). The importer counts a
  link only once it knows the child's CID while it adds entries, which is true
  of files and of empty directories, never of a directory with entries (it is
  flushed after the walk). So a subdirectory with entries counts 0 here too —
  kubo would count it; parity with the pinned importer is the rule.
* **The shard** is a tree of UnixFS ``HAMTShard`` nodes of fanout 256. A name's
  slot at level ``d`` is byte ``d mod 8`` of the big-endian first 64 bits of
  murmur3-x64-128 of its UTF-8 bytes (of the name followed by the byte
  ``d // 8`` from level 8 on: the importer's "infinite hash"). A slot holds one
  entry (link name: two upper-case hex digits + the name) or, when several names
  share it, a sub-shard (link name: the two digits). Each node's Data is
  ``Type=5, Data=bitfield, hashType=0x22, fanout=256``, the bitfield big-endian
  with leading zero bytes dropped; links are in slot order; a link's Tsize is
  its child's cumulative size, a node's is its block plus its links'.

murmur3 comes from the ``mmh3`` package (the hash is exact integer arithmetic;
the parity tests check it against the JavaScript importer).

## Pure
Blocks go out through the injected ``put``.

## Not done here
No mode/mtime; the ``block-bytes`` strategy (the importer's ``unixfs-v1-2025``
profile) is not followed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import mmh3

from kuro_fs.cid import cid_bytes
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.unixfs import SHARD_THRESHOLD_BYTES, NodeType, Put, UnixFSData, directory_node, encode_data

__all__ = ["FANOUT", "HASH_TYPE", "shard_slots", "shard_weight", "unixfs_directory"]

#: Slots per HAMTShard node, and the multihash code of murmur3-x64-64 written in each.
FANOUT: Final = 256
HASH_TYPE: Final = 0x22

#: One directory link for :func:`unixfs_directory`: name, CID, Tsize, and whether the
#: importer's size estimate counts it (a file or an empty directory).
Link = tuple[str, str, int, bool]


def shard_weight(links: Iterable[Link]) -> int:
    """The importer's estimate of a directory's size: name + CID bytes of the links it counts."""
    return sum(len(name.encode("utf-8")) + _cid_length(cid) for name, cid, _, counted in links if counted)


def _cid_length(cid: str) -> int:
    # The binary CID's length: 36 for every 59-character base32 CIDv1 (kuro's own), else as parsed
    # (a linked CIDv0 is 34 bytes, a sha2-512 CID 68).
    return 36 if len(cid) == 59 and cid[0] == "b" else len(cid_bytes(cid))


def shard_slots(name: str, levels: int) -> list[int]:
    """The slot of ``name`` at each of the first ``levels`` levels of a UnixFS shard.

    >>> shard_slots("a", 3)
    [133, 85, 85]
    """
    key = name.encode("utf-8")
    out: list[int] = []
    for level in range(levels):
        if level % 8 == 0:
            salted = key if level == 0 else key + bytes((level // 8,))
            digest = mmh3.hash64(salted, signed=False)[0].to_bytes(8, "big")
        out.append(digest[level % 8])
    return out


def unixfs_directory(links: Iterable[Link], put: Put) -> tuple[str, int]:
    """Store the UnixFS directory of ``links`` (flat or sharded, as the importer decides); return (CID, Tsize).

    Raises ValueError: duplicate names.
    """
    items = list(links)
    if shard_weight(items) <= SHARD_THRESHOLD_BYTES:
        block, tsize = directory_node((name, cid, size) for name, cid, size, _ in items)
        return put(block, "dag-pb"), tsize
    names = [name for name, *_ in items]
    if len(set(names)) != len(names):
        raise ValueError("duplicate directory entry in a sharded directory")
    entries = [(name, cid, size, shard_slots(name, 8)) for name, cid, size, _ in items]
    return _shard(entries, 0, put)


def _shard(entries: list[tuple[str, str, int, list[int]]], level: int, put: Put) -> tuple[str, int]:
    groups: dict[int, list[tuple[str, str, int, list[int]]]] = {}
    for entry in entries:
        slots = entry[3]
        if len(slots) <= level:
            slots += shard_slots(entry[0], level + 8)[len(slots) :]
        groups.setdefault(slots[level], []).append(entry)
    links: list[PBLink] = []
    for slot in sorted(groups):
        group = groups[slot]
        label = f"{slot:02X}"
        if len(group) == 1:
            name, cid, size, _ = group[0]
            links.append(PBLink.to(cid, label + name, size))
        else:
            sub, size = _shard(group, level + 1, put)
            links.append(PBLink.to(sub, label, size))
    bitfield = sum(1 << slot for slot in groups)
    data = UnixFSData(
        NodeType.HAMT_SHARD,
        data=bitfield.to_bytes(max(1, (bitfield.bit_length() + 7) // 8), "big"),
        hash_type=HASH_TYPE,
        fanout=FANOUT,
    )
    links.sort(key=lambda link: link.name.encode("utf-8"))
    block = encode_pb(PBNode(tuple(links), encode_data(data)))
    return put(block, "dag-pb"), len(block) + sum(link.tsize for link in links)
