"""kuro_wasm: run WebAssembly guests by CID and keep an auditable receipt of every run.

``kuro = session + command intent + effective grant + receipt``. This module only
re-exports; each concept lives in the module named after it: the pure terminal model
(:mod:`~kuro_wasm.model`, :mod:`~kuro_wasm.receipt`, :mod:`~kuro_wasm.stream`,
:mod:`~kuro_wasm.checkpoint`, :mod:`~kuro_wasm.ansi`), the wasmtime host
(:mod:`~kuro_wasm.host` and the modules it drives) and the receipt ledger
(:mod:`~kuro_wasm.ledger`).
"""

from kuro_wasm import ansi, checkpoint, errors, stream
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
from kuro_wasm.host import Handle, add_guest, run, run_async, start
from kuro_wasm.ledger import Ledger
from kuro_wasm.model import Session, denial, guest, session
from kuro_wasm.receipt import receipt, receipt_cid

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
