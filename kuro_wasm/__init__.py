"""kuro_wasm: run WebAssembly guests by CID and keep an auditable receipt of every run.

``kuro = session + command intent + effective grant + receipt``. This module only
re-exports; each concept lives in the module named after it: the pure terminal model
(:mod:`~kuro_wasm.model.sessions`, :mod:`~kuro_wasm.model.receipt`, :mod:`~kuro_wasm.model.stream`,
:mod:`~kuro_wasm.model.checkpoint`, :mod:`~kuro_wasm.model.ansi`), the wasmtime host
(:mod:`~kuro_wasm.host.api` and the modules it drives) and the receipt ledger
(:mod:`~kuro_wasm.ledger.ledger`).
"""

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
from kuro_wasm.ledger.ledger import Ledger
from kuro_wasm.model import ansi, checkpoint, stream
from kuro_wasm.model.receipt import receipt, receipt_cid
from kuro_wasm.model.sessions import Session, denial, guest, session

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
