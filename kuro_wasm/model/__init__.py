"""kuro_wasm.model: the pure decisions — sessions, grants, denials, receipts, outcomes, the stream,
checkpoints, the ANSI reader, the ABI tables, run limits and operation identity.

Nothing here does I/O: no wasmtime, sqlite3, threading, os, time or pathlib
(``tests/test_architecture.py`` keeps it so). Every other layer of ``kuro_wasm``
builds on these values; this layer imports only :mod:`kuro_fs` and
:mod:`kuro_wasm.errors`. The terminal model's names (sessions, guest specs,
denials, modes and capabilities) are re-exported here, since they are what a
caller means by "the model".
"""

from kuro_wasm.model.sessions import (
    CAPABILITIES,
    DEFAULT_MODE,
    DENIAL_KEYS,
    DENIAL_REASONS,
    GUEST_REQUIRES,
    MODES,
    Mode,
    Session,
    denial,
    guest,
    is_argv,
    is_guest_spec,
    session,
)

__all__ = [
    "CAPABILITIES",
    "DEFAULT_MODE",
    "DENIAL_KEYS",
    "DENIAL_REASONS",
    "GUEST_REQUIRES",
    "MODES",
    "Mode",
    "Session",
    "denial",
    "guest",
    "is_argv",
    "is_guest_spec",
    "session",
]
