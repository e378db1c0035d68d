"""kuro_wasm.ledger: the durable receipt ledger — SQLite rows with operation identity, the
self-checking journal it falls back to, liveness of a run's owner, and what a stored record keeps.

This layer imports the host lazily (only to start a run) and the model; never the CLI.
"""

from kuro_wasm.ledger.ledger import Ledger

__all__ = ["Ledger"]
