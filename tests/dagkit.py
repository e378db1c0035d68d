"""Hostile DAG shapes shared by the fs, host and CLI tests (imported as ``dagkit``: ``tests/`` is on sys.path)."""

from __future__ import annotations

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.dagpb import PBLink, PBNode
from kuro_fs.dagpb import encode as encode_pb
from kuro_fs.unixfs import NodeType, UnixFSData, encode_data


def diamond_file(store: MemoryBlockStore, levels: int, leaf: int = 1024) -> tuple[str, int]:
    """A file of ``levels + 1`` blocks whose every node links one child 174 times: it claims ``leaf`` × 174^levels.

    Returns ``(root CID, claimed size)``; the one leaf is ``leaf`` zero bytes.
    """
    cid, size, tsize = store.put(bytes(leaf)), leaf, leaf
    for _ in range(levels):
        data = encode_data(UnixFSData(NodeType.FILE, filesize=size * 174, blocksizes=(size,) * 174))
        block = encode_pb(PBNode(tuple(PBLink.to(cid, "", tsize) for _ in range(174)), data))
        cid, size, tsize = store.put(block, "dag-pb"), size * 174, len(block) + 174 * tsize
    return cid, size
