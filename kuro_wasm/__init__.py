"""kuro_wasm: run WebAssembly guests by CID and keep an auditable receipt of every run.

``kuro = session + command intent + effective grant + receipt``. This module only
re-exports; each concept lives in the module named after it, in five layers: the pure
model (:mod:`kuro_wasm.model` — sessions, receipts, the stream, checkpoints, the ANSI
reader), the wasmtime host (:mod:`kuro_wasm.host`), the receipt ledger
(:mod:`kuro_wasm.ledger`), batches over a cluster (:mod:`kuro_wasm.batch`) and the
command line (:mod:`kuro_wasm.cli`).

The names are resolved on first use (PEP 562), so ``import kuro_wasm`` — and the
``kuro`` command, which starts by importing this package — loads no wasm engine,
SQLite or asyncio until something asks for them.
"""

from __future__ import annotations

import importlib

# Not ``from typing import TYPE_CHECKING``: typing costs ~2.5 ms, and this package is the first
# thing the ``kuro`` executable imports, before its signal guard is installed.
TYPE_CHECKING = False
if TYPE_CHECKING:  # what a type checker and a reader see; at run time each name loads on first use
    from typing import Any

    from kuro_wasm import errors
    from kuro_wasm.errors import (
        CheckpointError,
        CheckpointVersionError,
        HostError,
        KuroError,
        LedgerCorrupt,
        LedgerError,
        LoadError,
        ModelError,
        OperationConflict,
        StreamClosed,
    )
    from kuro_wasm.host.api import Handle, add_guest, run, run_async, start
    from kuro_wasm.host.worker.pool import WorkerPool
    from kuro_wasm.ledger.ledger import Ledger
    from kuro_wasm.model import ansi, checkpoint, stream
    from kuro_wasm.model.receipt import receipt, receipt_cid
    from kuro_wasm.model.sessions import Session, denial, guest, session

#: public name → the module it lives in (a module itself when the name is the module's last part)
_WHERE: dict[str, str] = {
    "errors": "kuro_wasm.errors",
    **dict.fromkeys(
        [
            "CheckpointError",
            "CheckpointVersionError",
            "HostError",
            "KuroError",
            "LedgerCorrupt",
            "LedgerError",
            "LoadError",
            "ModelError",
            "OperationConflict",
            "StreamClosed",
        ],
        "kuro_wasm.errors",
    ),
    **dict.fromkeys(["Handle", "add_guest", "run", "run_async", "start"], "kuro_wasm.host.api"),
    "Ledger": "kuro_wasm.ledger.ledger",
    "WorkerPool": "kuro_wasm.host.worker.pool",
    "ansi": "kuro_wasm.model.ansi",
    "checkpoint": "kuro_wasm.model.checkpoint",
    "stream": "kuro_wasm.model.stream",
    **dict.fromkeys(["receipt", "receipt_cid"], "kuro_wasm.model.receipt"),
    **dict.fromkeys(["Session", "denial", "guest", "session"], "kuro_wasm.model.sessions"),
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'kuro_wasm' has no attribute {name!r}")
    module = importlib.import_module(where)
    value = module if where.rsplit(".", 1)[-1] == name else getattr(module, name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "CheckpointError",
    "CheckpointVersionError",
    "Handle",
    "HostError",
    "KuroError",
    "Ledger",
    "LedgerCorrupt",
    "LedgerError",
    "LoadError",
    "ModelError",
    "OperationConflict",
    "Session",
    "StreamClosed",
    "WorkerPool",
    "add_guest",
    "ansi",
    "checkpoint",
    "denial",
    "errors",
    "guest",
    "receipt",
    "receipt_cid",
    "run",
    "run_async",
    "session",
    "start",
    "stream",
]
