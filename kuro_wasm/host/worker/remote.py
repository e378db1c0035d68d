"""The block store a guest sees inside a worker process: the host's blocks, read through frames.

## The one decision
A worker never writes the host's store. The store is the run's filesystem's (an ``Fs`` value's own
store, else the run's); the guest's own bytes are the run's store's and always come through the
host. Every block a run writes is kept in the run's own overlay (so the run reads its own writes)
and handed to the host as a ``put`` frame at once; the host re-hashes it before storing it
(:mod:`kuro_wasm.host.worker.verify`). Reads come from the overlay, then from blocks this run
already fetched, then from the host, one ``get`` frame per block — the host's store may be a
:class:`~kuro_fs.blocks.MemoryBlockStore` no other process can see. When the host's store is a
:class:`~kuro_fs.filestore.FileBlockStore` in a directory the worker may read (its filesystem
confinement grants the pool's ``Hardening.stores``), the worker opens the same directory and reads
it directly (with ``verify`` on: every block is re-hashed on the way in, whatever the host's store
was opened with), saving a round trip per block; writes still go through the host.

A block fetched once is kept for the rest of the run (up to :data:`RUN_CACHE_BYTES`): content
addressing makes a block's bytes immutable, and a guest that reads a file in small pieces would
otherwise pay a round trip per directory block per call. Whether the guest module is present is
answered from the request (the host looked before dispatching), so a warm run asks nothing.

## Effects
Frames through the injected :class:`Link`; the directory of a host ``FileBlockStore`` (read only).

## Not done here
``delete``, ``stats``, ``publish`` and ``drop_cache`` are refused (``BlockStoreError``): no guest
import reaches them. A block deleted from the host's store during a run may still be read by that
run if it had fetched it before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from kuro_fs.blocks import DeleteResult, DropResult, PublishResult, StatsResult, block_bytes
from kuro_fs.cid import cid_for, parse
from kuro_fs.errors import BlockStoreError
from kuro_fs.filestore import FileBlockStore

__all__ = ["RUN_CACHE_BYTES", "Link", "RemoteStore"]

#: How many bytes of fetched blocks one run keeps (beyond that, a block is fetched again when read again).
RUN_CACHE_BYTES: Final = 32 << 20


class Link(Protocol):
    """The worker's side of its connection to the host (fakeable in a few lines for tests)."""

    def send(self, kind: str, fields: Mapping[str, Any], payload: bytes = b"") -> None:
        """Send one frame; raises BlockStoreError when the host is gone."""
        ...

    def request(self, kind: str, fields: Mapping[str, Any]) -> tuple[bool, bytes]:
        """Send a ``get``/``has`` and wait for its reply: ``(found, payload)``. Raises BlockStoreError."""
        ...


class RemoteStore:
    """One run's view of the host's block store (see the module docstring)."""

    def __init__(
        self, link: Link, run_id: int, *, direct: FileBlockStore | None = None, present: Mapping[str, bool] = {}
    ) -> None:
        self._link = link
        self._id = run_id
        self._direct = direct
        self._present = dict(present)
        self._overlay: dict[str, bytes] = {}
        self._fetched: dict[str, bytes] = {}
        self._fetched_bytes = 0

    @property
    def written(self) -> list[str]:
        """The CIDs this run handed to the host, in order."""
        return list(self._overlay)

    def put(self, data: bytes, codec: str = "raw") -> str:
        """Keep ``data`` for this run and hand it to the host; return its CID. Raises TypeError, BlockStoreError."""
        data = block_bytes(data)
        cid = cid_for(data, codec)
        if cid not in self._overlay:
            self._overlay[cid] = data
            self._link.send("put", {"id": self._id, "cid": cid}, data)
        return cid

    def get(self, cid: str) -> bytes | None:
        """The block's bytes, or None. Raises InvalidCID, CorruptBlock (direct reads), BlockStoreError."""
        parse(cid)
        block = self._overlay.get(cid)
        if block is None:
            block = self._fetched.get(cid)
        if block is not None:
            return block
        if self._direct is not None and cid not in self._present:  # the guest's bytes: always the host's store
            block = self._direct.get(cid)
        else:
            found, payload = self._link.request("get", {"id": self._id, "cid": cid})
            block = payload if found else None
        if block is not None and self._fetched_bytes + len(block) <= RUN_CACHE_BYTES:
            self._fetched[cid] = block
            self._fetched_bytes += len(block)
        return block

    def has(self, cid: str) -> bool:
        """Whether the block exists (here or in the host's store). Raises InvalidCID, BlockStoreError."""
        parse(cid)
        if cid in self._overlay or cid in self._fetched:
            return True
        known = self._present.get(cid)
        if known is not None:
            return known
        if self._direct is not None:  # (the guest's presence is known: ``present``)
            return self._direct.has(cid)
        return self._link.request("has", {"id": self._id, "cid": cid})[0]

    def _refuse(self, what: str) -> BlockStoreError:
        return BlockStoreError(f"{what} is not available inside a worker process")

    def delete(self, cid: str) -> DeleteResult:
        raise self._refuse("delete")

    def stats(self) -> StatsResult:
        raise self._refuse("stats")

    def publish(self, cids: Iterable[str]) -> PublishResult:
        raise self._refuse("publish")

    def drop_cache(self) -> DropResult:
        raise self._refuse("drop_cache")
