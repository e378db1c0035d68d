"""kuro_wasm.ledger: the durable receipt ledger — SQLite rows with operation identity, the
self-checking journal it falls back to, liveness of a run's owner, and what a stored record keeps.

This layer imports the host lazily (only to start a run) and the model; never the CLI.
``Ledger`` is resolved on first use, so importing :mod:`kuro_wasm.ledger.record` alone (the
CLI does, to persist a receipt) loads no SQLite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kuro_wasm.ledger.ledger import Ledger


def __getattr__(name: str) -> Any:
    if name == "Ledger":
        from kuro_wasm.ledger.ledger import Ledger

        return Ledger
    raise AttributeError(f"module 'kuro_wasm.ledger' has no attribute {name!r}")


__all__ = ["Ledger"]
