"""Where a batch worker reads blocks: a shared ``FileBlockStore`` directory, or a trustless gateway.

## The one decision
Blocks travel **by CID, never inside a task**: a worker is told *where* to read (a
:class:`SharedStore` path or a :class:`GatewayStore` URL — small, plain, picklable values) and
fetches the guest and the kuro.fs blocks it needs itself, verifying each against its CID (the
file store re-hashes on every read; the gateway store before it keeps anything). A worker never
writes there: what a run writes comes back with its receipt and the driver re-hashes it
(:mod:`kuro_wasm.batch.verify`). :func:`worker_store_for` infers the spec from the driver's own
store, and refuses a store no other process can see (a ``MemoryBlockStore``) instead of letting
every guest end ``guest-not-found``.

Before anything is sent the driver calls :meth:`WorkerStore.check`: a gateway is probed from the
driver (``GET /ipfs/bafkqaaa?format=raw``), so an unreachable one — or a server that is no
trustless gateway — is one typed error before a worker starts or an op id is claimed, never a
batch of ``load-error`` receipts.

A worker's cache home is its own, resolved where it runs (:func:`kuro_fs.home.worker_home`: a
``worker_home`` the caller names, else the worker's ``$KURO_HOME``, else
``<temp dir>/kuro-worker-<uid>``), never a path of the driver's: blocks fetched from a gateway are
kept, verified, in that home's ``blocks/``, compiled guests in its ``cache/modules``.

## Effects
:meth:`SharedStore.open` opens a directory; :meth:`GatewayStore.open` an HTTP client (and the
block store of the worker's cache home); :meth:`GatewayStore.check` one HTTP request.
Nothing happens on construction.

## Not done here
No publishing: blocks a batch writes stay in the driver's store (``kuro gateway publish`` sends
them on). A shared path must be the same path on every machine (an NFS mount, say).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from kuro_fs.blocks import BlockStore
from kuro_wasm.errors import ModelError

__all__ = ["PROBE_TIMEOUT", "GatewayStore", "SharedStore", "WorkerStore", "worker_store_for"]

#: Seconds the driver waits for a gateway to answer its probe before a batch starts.
PROBE_TIMEOUT: Final = 10.0


class WorkerStore(Protocol):
    """What a worker opens to read blocks (a small value sent to every worker once)."""

    def open(self, home: Path | None) -> BlockStore:
        """The store, opened in the worker; ``home`` is the worker's cache home (None: keep nothing on disk)."""
        ...

    def describe(self) -> str:
        """A short text naming where blocks come from (for error lines)."""
        ...

    def check(self) -> None:
        """Run by the driver before anything is sent: raise if workers plainly cannot read there.

        Raises BlockStoreError (a gateway that cannot be reached or is no trustless gateway).
        """
        ...


@dataclass(frozen=True)
class SharedStore:
    """A ``FileBlockStore`` directory every worker can read at the same path."""

    path: str

    def open(self, home: Path | None) -> BlockStore:
        """The directory's store, reading with verification on (``home`` unused).

        Raises BlockStoreError: the directory is not there.
        """
        from kuro_fs.errors import BlockStoreError
        from kuro_fs.filestore import FileBlockStore

        if not Path(self.path).is_dir():
            raise BlockStoreError(f"the shared block store {self.path} is not a directory on this worker")
        return FileBlockStore(self.path, verify=True)

    def describe(self) -> str:
        return f"the shared block store {self.path}"

    def check(self) -> None:
        """Nothing: the path is the workers' (a mount the driver may not see); a worker that lacks it
        fails the batch at its first chunk (``failed``), before anything runs."""


@dataclass(frozen=True)
class GatewayStore:
    """A trustless gateway every worker can reach (``kuro gateway serve``), read and verified by CID."""

    url: str

    def open(self, home: Path | None) -> BlockStore:
        """A ``GatewayBlockStore`` keeping what it fetched (verified) in ``home``'s block store, else in memory."""
        from kuro_fs.filestore import FileBlockStore
        from kuro_fs.gateway.client import GatewayBlockStore
        from kuro_fs.home import blocks_dir

        cache = None if home is None else FileBlockStore(blocks_dir(home))
        return GatewayBlockStore(self.url, cache=cache)

    def describe(self) -> str:
        return f"the gateway {self.url}"

    def check(self) -> None:
        """Probe the gateway from the driver (:meth:`~kuro_fs.gateway.client.GatewayBlockStore.probe`,
        within :data:`PROBE_TIMEOUT` s): an unreachable one, or a server that is no trustless gateway,
        refuses the batch before a worker starts or an op id is claimed.

        Raises InvalidGatewayURL, GatewayUnreachable, GatewayTimeout, GatewayRefused.
        """
        from kuro_fs.gateway.client import GatewayBlockStore

        with GatewayBlockStore(self.url, timeout=PROBE_TIMEOUT) as store:
            store.probe()


def worker_store_for(store: BlockStore) -> WorkerStore:
    """Where workers read the blocks of the driver's ``store``: its directory, or its gateway.

    Raises ModelError (``worker-store-required``): the store lives only in this process.
    """
    from kuro_fs.filestore import FileBlockStore

    if isinstance(store, FileBlockStore):
        return SharedStore(os.fspath(store.root.resolve()))
    url = getattr(store, "url", None)
    if type(store).__name__ == "GatewayBlockStore" and isinstance(url, str):
        return GatewayStore(url)
    raise ModelError(
        f"workers cannot read a {type(store).__name__} (it lives in this process only)",
        reason="worker-store-required",
        hint="pass worker_store=SharedStore(PATH) or GatewayStore(URL), or a FileBlockStore as store",
    )
