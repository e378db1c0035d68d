"""One operation's answer read from a ledger file by a caller that only looks: it writes nothing.

## The one decision
Reading an operation must not change the ledger. Opening a :class:`kuro_wasm.ledger.ledger.Ledger` is
opening it for work: it prepares the schema, moves the journal into SQLite and turns ``started`` rows
of gone owners into ``unknown`` — writes. :func:`lookup` opens the file for reading only
(:class:`kuro_wasm.ledger.db.LedgerDB` with ``reading=True``), reads the one row, and answers as
``Ledger.result`` would — the same :func:`kuro_wasm.ledger.answer.answer_for`, the same journal fallback
where SQLite cannot be read — with two differences that keep it a read: a ``started`` row whose owner is
gone is *answered* ``unknown`` (the reason judged now, nothing written: the next ledger opened for work
records it), and a receipt still in the journal is answered from there (``pending``) and left in it.
A file with no tables yet (the first ``kuro run`` made it and has not committed its schema) holds no
operations. ``kuro receipt show`` uses it.

## Effects
Reads SQLite, the journal beside it and ``/proc`` (is a row's owner alive).
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

from kuro_wasm.ledger.answer import Row, answer_for
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
    journal = Journal(path.with_suffix(".journal"))
    db = LedgerDB(path, default_connect, timeout, reading=True)
    try:
        row = db.read_row(op_id)
    except sqlite3.Error as exc:  # the journal may still answer (as Ledger.result's)
        row, pending = None, journal.latest(op_id)
        if pending is None:
            raise db.refusal(exc, "cannot read the ledger", "is damaged") from exc
    else:
        pending = None if row is not None and row.status == "done" else journal.latest(op_id)
    finally:
        db.close()
    if row is None and pending is None:
        return None
    return answer_for(op_id, row, pending, _judged)


def _judged(row: Row) -> Row:
    """A ``started`` row answered ``unknown`` if its owner is gone (nothing written)."""
    reason = owner_gone(row.owner_pid, row.owner_token)
    return row if reason is None else replace(row, status="unknown", reason=reason)
