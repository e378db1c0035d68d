"""The seam between a batch's driver and whatever runs its chunks: five calls, and four ways a chunk ends.

## The one decision
A backend tells the driver, for every chunk it was given, exactly one of:

=============  ==========================================================================
``ran``        the worker's answer: a receipt (and new blocks) per invocation that ran,
               and the invocations it did **not start** (``skipped``: a cancel came first)
``lost``       a worker took the chunk and then died (or the chunk failed after it was
               taken, or whether it was taken is forgotten — a restarted scheduler): none
               of its receipts came back, any of its invocations may have run
``unstarted``  provably never taken by any worker (the fence refused it, or it was never
               sent): the driver may send it again, it has not run
``failed``     no worker can run it (its store cannot be opened there); not run only if
               the backend proves no worker took it (``taken`` False), else it may have
               run and its invocations are recorded ``unknown``
=============  ==========================================================================

"Provably" is the backend's job: the Dask backend asks the scheduler-side fence
(:mod:`kuro_wasm.batch.cluster`), the local backend takes each chunk on a thread of the
driver's own process (:mod:`kuro_wasm.batch.local`). The driver never sends an invocation twice unless a backend said
``unstarted`` for it; nothing is retried behind its back.

## Effects
None here: a protocol and a value.

## Not done here
Which backend runs a batch: :func:`kuro_wasm.batch.driver.backend_for`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

__all__ = ["KINDS", "Backend", "Done"]

#: The ways a chunk ends (see the module docstring).
KINDS: Final = ("ran", "lost", "unstarted", "failed")


@dataclass(frozen=True)
class Done:
    """How one chunk ended: ``kind`` (one of :data:`KINDS`) and what came with it.

    ``ran``: ``{"ran": [{"i", "receipt", "blocks"}…], "skipped": [i…], "seconds": s}``;
    ``lost``: ``{"worker": {"address"?, "pid"?, "signal"?}, "error"?: text}``;
    ``failed``: ``{"error": text, "taken"?: False}`` (``taken`` False: provably never taken); ``unstarted``: ``{}``.
    """

    token: str
    kind: str
    detail: Mapping[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    """What runs a batch's chunks (a Dask cluster, a local process pool, a test's fake)."""

    def open(self, batch_id: str) -> None:
        """Get ready (start or join the cluster). Raises BatchError if it cannot."""
        ...

    def slots(self) -> int:
        """How many chunks can run at once now (worker threads)."""
        ...

    def submit(self, token: str, chunk: dict[str, Any]) -> None:
        """Send one chunk (:func:`kuro_wasm.batch.worker.to_wire`) under a fresh ``token``."""
        ...

    def wait(self, timeout: float) -> list[Done]:
        """Chunks that ended since the last call (waiting up to ``timeout`` s for the first)."""
        ...

    def cancel(self) -> None:
        """Stop the batch: runs going on are killed, chunks not yet taken are never taken."""
        ...

    def close(self) -> None:
        """Release the workers (stop a cluster this backend started). Idempotent."""
        ...
