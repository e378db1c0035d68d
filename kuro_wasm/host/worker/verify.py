"""What the host believes of a worker: a block only once it hashes to its CID, a new fs root only once complete.

## The one decision
A worker is not trusted with the host's block store, and nothing it hands back reaches that store
before the run's new fs root is believed. Every block it hands back is re-hashed by the host
(:meth:`Staged.add`) — a block that does not hash to the CID the worker named is a protocol
violation, and the worker is killed — and then held **apart**, in the run's own :class:`Staged`
set (in memory up to :data:`SPILL_BYTES`, then in an unnamed temporary file). At the end of the
run, a new fs root (``kuro/fs-root-after``) is believed only after :func:`accept_root`: it must be a
kuro.fs directory, and every block reachable from it must be either one this run handed back (then
its links are walked in turn) or in the caller's store already; only then are the staged blocks it
reaches stored, in one batch. A run that is killed, fails, claims no root or claims one that does
not check leaves nothing in the caller's store.

Why a block already in the store needs no walk: the caller's store only ever receives complete
trees — kuro.fs writes bottom-up (a directory after everything it names), and blocks from a worker
arrive only as part of a root that was checked — so a block found there has everything below it
there too. Were a worker's blocks stored as they arrived (as they once were), a worker could hand
back a directory naming missing blocks in one run, or be killed right after, and claim it as its
root in a later run: the check would find it "in the store" and believe it.

## Effects
Reads the caller's block store; :func:`accept_root` writes the believed blocks to it; a staged set
past :data:`SPILL_BYTES` writes an unnamed temporary file (gone when the set is closed).

## Not done here
Whether the root is what the guest's writes *should* have produced is the worker's word: the host
would have to run the guest again to know. The receipt's meaning table says so. A block of the
caller's store that some other writer left without its children (a partial CAR import, say) is
believed complete like any other.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from typing import IO, Final

from kuro_fs.blocks import BlockStore, open_batch, put_matched
from kuro_fs.car import links_of
from kuro_fs.cid import ParsedCID, matches, parse
from kuro_fs.errors import DagCborError, DagPbError, InvalidCID, KuroFsError
from kuro_fs.fsdir import decode_dir_block

__all__ = ["SPILL_BYTES", "Staged", "accept_root", "check_root"]

#: Staged bytes kept in memory; beyond this a run's handed-back blocks go to an unnamed temporary file.
SPILL_BYTES: Final = 64 << 20


class Staged(Mapping[str, bytes]):
    """The blocks one run handed back, each re-hashed on the way in, keyed by their CIDv1 (:attr:`ParsedCID.key`).

    A read-only mapping ``CID → bytes`` (a CIDv0 finds its CIDv1's block). Used by one thread at a
    time (a worker's reader thread). :meth:`close` drops everything; it is idempotent.
    """

    def __init__(self, spill_bytes: int = SPILL_BYTES) -> None:
        self._spill_bytes = spill_bytes
        self._parsed: dict[str, ParsedCID] = {}  # key → its parsed CID
        self._memory: dict[str, bytes] = {}  # key → bytes, while the total stays within spill_bytes
        self._spilled: dict[str, tuple[int, int]] = {}  # key → (offset, length) in the file
        self._file: IO[bytes] | None = None
        self._nbytes = 0

    def add(self, cid: object, data: bytes) -> str | None:
        """Hold ``data`` under ``cid``; None if it was accepted, else why it was refused (nothing held then)."""
        try:
            parsed = parse(cid)
        except InvalidCID as exc:
            return f"the worker handed back a block under {cid!r}, which is not a CID: {exc}"
        if not matches(parsed, data):
            return f"the worker handed back {len(data)} bytes that do not hash to {cid}"
        key = parsed.key
        if key in self._parsed:
            return None
        if self._nbytes + len(data) <= self._spill_bytes:
            self._memory[key] = data
        else:
            if self._file is None:
                self._file = tempfile.TemporaryFile()  # closed by close()
            offset = self._file.seek(0, 2)
            self._file.write(data)
            self._spilled[key] = (offset, len(data))
        self._parsed[key] = parsed
        self._nbytes += len(data)
        return None

    def _bytes(self, key: str) -> bytes | None:
        data = self._memory.get(key)
        if data is not None:
            return data
        where = self._spilled.get(key)
        if where is None:
            return None
        assert self._file is not None
        self._file.seek(where[0])
        return self._file.read(where[1])

    def __getitem__(self, cid: str) -> bytes:
        try:
            key = parse(cid).key
        except InvalidCID as exc:
            raise KeyError(cid) from exc
        data = self._bytes(key)
        if data is None:
            raise KeyError(cid)
        return data

    def __contains__(self, cid: object) -> bool:
        try:
            return parse(cid).key in self._parsed
        except InvalidCID:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self._parsed)

    def __len__(self) -> int:
        return len(self._parsed)

    @property
    def nbytes(self) -> int:
        """How many bytes are held."""
        return self._nbytes

    def store_into(self, store: BlockStore, cids: list[str]) -> None:
        """Put the held blocks named in ``cids`` into ``store``, in one batch where the store has batches.

        Raises KeyError: a CID not held. Raises whatever the store raises (a broken caller's store is not the
        worker's fault).
        """
        with open_batch(store):
            for cid in cids:
                key = parse(cid).key
                data = self._bytes(key)
                if data is None:
                    raise KeyError(cid)
                put_matched(store, self._parsed[key], data)

    def close(self) -> None:
        """Drop every held block (and the temporary file). Idempotent."""
        self._parsed.clear()
        self._memory.clear()
        self._spilled.clear()
        self._nbytes = 0
        if self._file is not None:
            self._file.close()
            self._file = None


def _walk(store: BlockStore, root: object, staged: Mapping[str, bytes]) -> list[str] | str:
    """The staged CIDs reachable from ``root`` if it is a complete kuro.fs directory; else why it is not."""
    if not isinstance(root, str):
        return f"the new fs root is not a CID string: {root!r}"
    try:
        if parse(root).codec != "dag-cbor":
            return f"the new fs root {root} is not a dag-cbor directory"
        block = staged.get(root)
        if block is None:
            block = store.get(root)
        if block is None:
            return f"the new fs root {root} is neither in the block store nor handed back"
        decode_dir_block(block)  # flat or sharded (a root of more than 256 entries is sharded)
    except (InvalidCID, DagCborError, ValueError, KuroFsError) as exc:
        return f"the new fs root {root} is not a kuro.fs directory: {exc}"
    reached: list[str] = []
    seen: set[str] = set()
    stack = [root]
    while stack:
        cid = stack.pop()
        if cid in seen:
            continue
        seen.add(cid)
        block = staged.get(cid)
        if block is None:
            try:
                present = store.has(cid)
            except (InvalidCID, KuroFsError) as exc:
                return f"the new fs root names {cid!r}, which cannot be looked up: {exc}"
            if not present:
                return f"the new fs root names block {cid}, which is neither in the store nor handed back"
            continue  # in the store already: everything below it is there too (see the module docstring)
        reached.append(cid)
        try:
            stack.extend(links_of(cid, block))
        except (DagPbError, DagCborError, InvalidCID) as exc:
            return f"block {cid} under the new fs root does not decode: {exc}"
    return reached


def check_root(store: BlockStore, root: object, staged: Mapping[str, bytes] | None = None) -> str | None:
    """None if ``root`` is a complete kuro.fs directory over ``store`` plus the ``staged`` blocks; else why not.

    Writes nothing. ``staged``: the blocks the run handed back (already re-hashed), by CID.
    """
    found = _walk(store, root, staged or {})
    return found if isinstance(found, str) else None


def accept_root(store: BlockStore, root: object, staged: Staged) -> str | None:
    """:func:`check_root`, then store the staged blocks ``root`` reaches; None if believed, else why not
    (then nothing is stored). Raises whatever the store raises."""
    found = _walk(store, root, staged)
    if isinstance(found, str):
        return found
    staged.store_into(store, found)
    return None
