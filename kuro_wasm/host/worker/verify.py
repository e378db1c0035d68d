"""What the host believes of a worker: a block only once it hashes to its CID, a new fs root only once complete.

## The one decision
A worker is not trusted with the host's block store. Every block it hands back is re-hashed by the
host (:func:`accept_block`) before it is stored — a block that does not hash to the CID the worker
named is a protocol violation, and the worker is killed. A new fs root (``kuro/fs-root-after``) is
believed only after :func:`check_root`: it must be a kuro.fs directory, and every block reachable
from it must be either in the host's store already (it was there before the run; nothing
below it needs walking) or one this run handed back (and was hashed on the way in), whose links
are then walked in turn. So the root the receipt names is complete and well-formed in the host's
own store, and its walk costs what the run wrote, not the size of the tree.

## Effects
Reads and writes the host's block store.

## Not done here
Whether the root is what the guest's writes *should* have produced is the worker's word: the host
would have to run the guest again to know. The receipt's meaning table says so.
"""

from __future__ import annotations

from collections.abc import Collection

from kuro_fs.blocks import BlockStore
from kuro_fs.car import links_of
from kuro_fs.cid import parse, verify
from kuro_fs.errors import DagCborError, DagPbError, InvalidCID, KuroFsError
from kuro_fs.fsdir import decode_dir

__all__ = ["accept_block", "check_root"]


def accept_block(store: BlockStore, cid: str, data: bytes) -> str | None:
    """Store a block a worker handed back; None if it was accepted, else why it was refused.

    Raises whatever the store raises (a broken host store is not the worker's fault).
    """
    try:
        codec = parse(cid).codec
    except InvalidCID as exc:
        return f"the worker handed back a block under {cid!r}, which is not a CID: {exc}"
    if not verify(cid, data):
        return f"the worker handed back {len(data)} bytes that do not hash to {cid}"
    stored = store.put(data, codec)
    if stored != cid:  # pragma: no cover - verify() and put() mint the same CID
        return f"the store filed the block as {stored}, not {cid}"
    return None


def check_root(store: BlockStore, root: object, handed: Collection[str]) -> str | None:
    """None if ``root`` is a complete kuro.fs directory in ``store``; else why it is not believed.

    ``handed`` are the CIDs this run handed back (already accepted by :func:`accept_block`).
    """
    if not isinstance(root, str):
        return f"the new fs root is not a CID string: {root!r}"
    try:
        if parse(root).codec != "dag-cbor":
            return f"the new fs root {root} is not a dag-cbor directory"
        block = store.get(root)
        if block is None:
            return f"the new fs root {root} is not in the block store"
        decode_dir(block)
    except (InvalidCID, DagCborError, ValueError, KuroFsError) as exc:
        return f"the new fs root {root} is not a kuro.fs directory: {exc}"
    seen: set[str] = set()
    stack = [root]
    while stack:
        cid = stack.pop()
        if cid in seen:
            continue
        seen.add(cid)
        if cid not in handed:
            try:
                present = store.has(cid)
            except (InvalidCID, KuroFsError) as exc:
                return f"the new fs root names {cid!r}, which cannot be looked up: {exc}"
            if not present:
                return f"the new fs root names block {cid}, which is neither in the store nor handed back"
            continue  # it was in the store before: everything below it was checked when it got there
        block = store.get(cid)
        if block is None:
            return f"block {cid} went missing from the store while the new root was checked"
        try:
            stack.extend(links_of(cid, block))
        except (DagPbError, DagCborError, InvalidCID) as exc:
            return f"block {cid} under the new fs root does not decode: {exc}"
    return None
