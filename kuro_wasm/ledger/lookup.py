"""One operation's answer read from a ledger file by a caller that only looks: it writes nothing.

## The one decision
Reading an operation must not change the ledger. Opening a :class:`kuro_wasm.ledger.ledger.Ledger` is
opening it for work: it prepares the schema, moves the journal into SQLite and turns ``started`` rows
of gone owners into ``unknown`` — writes. :func:`lookup` opens the file for reading only
(:class:`kuro_wasm.ledger.db.LedgerDB` with ``reading=True``), reads the one row, and answers as
``Ledger.result`` would, with two differences that keep it a read: a ``started`` row whose owner is gone
is *answered* ``unknown`` (the reason judged now, nothing written: the next ledger opened for work
records it), and a receipt still in the journal is answered from there (``pending``) and left in it.
``kuro receipt show`` uses it.

## Effects
Reads SQLite, the journal beside it and ``/proc`` (is a row's owner alive).
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

from kuro_wasm.ledger.answer import answer, receipt_of, status_value
from kuro_wasm.ledger.db import LedgerDB, default_connect
from kuro_wasm.ledger.journal import Journal
from kuro_wasm.ledger.liveness import owner_gone
from kuro_wasm.model.operation import check_op_id

__all__ = ["lookup"]


def lookup(path: Path, op_id: str, *, timeout: float = 2.0) -> dict[str, Any] | None:
    """The answer for ``op_id`` in the ledger at ``path`` (``kuro/status``: done, running, unknown), or None if
    it holds no such operation. Nothing is written.

    Raises LedgerCorrupt: the file is no kuro ledger, or the row fails its checksum. LedgerError: the
    ledger cannot be read. ValueError: ``op_id`` is no operation id.
    """
    check_op_id(op_id)
    db = LedgerDB(path, default_connect, timeout, reading=True)
    try:
        row = db.read_row(op_id)
    except sqlite3.Error as exc:
        raise db.refusal(exc, "cannot read the ledger", "is damaged") from exc
    finally:
        db.close()
    if row is None or row.status != "done":
        pending = Journal(path.with_suffix(".journal")).latest(op_id)
        if pending is not None and (row is None or pending["digest"] == row.digest):
            return answer(pending["receipt"], replayed=True, persistence="pending")
    if row is None:
        return None
    if row.status == "done":
        return answer(receipt_of(row), replayed=True, persistence="saved")
    if row.status == "started":
        reason = owner_gone(row.owner_pid, row.owner_token)
        if reason is not None:
            row = replace(row, status="unknown", reason=reason)
    return status_value(row)
