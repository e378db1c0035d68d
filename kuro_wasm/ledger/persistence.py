"""Persistence honesty: where a terminal receipt is kept, and what the ledger may say about it.

## The one decision
Never report ``saved`` for something that was not. A terminal receipt goes to
SQLite in one transaction with its status (``kuro/persistence: "saved"``). If
SQLite refuses — locked past its timeout, read-only, disk full — the receipt is
appended and fsync-ed to the journal (``"pending"``) and moved into SQLite by the
next :meth:`Persistence.drain`, all entries or none, without running anything.
If the journal refuses too, the answer says ``"failed"`` with
``kuro/persistence-error``: replay protection cannot be promised, and the caller
is told so rather than left to assume it. While an entry waits in the journal,
:meth:`Persistence.pending` finds it, so a pending receipt is answered, not lost.

## Effects
SQLite through :class:`~kuro_wasm.ledger.db.LedgerDB` and the journal file
through :class:`~kuro_wasm.ledger.journal.Journal`, both handed in. SQLite errors
(``sqlite3.Error``) and journal errors (``OSError``) are judged here; nothing
else is caught.

## Not done here
Who may save a receipt (the claim) and which answer wins when a row and a
journal entry disagree are :class:`kuro_wasm.ledger.ledger.Ledger`'s decisions; the
journal's line format and locking are :mod:`kuro_wasm.ledger.journal`'s. No retry loop:
a pending receipt moves when the ledger is next used or opened.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from kuro_wasm.ledger.answer import answer
from kuro_wasm.ledger.db import LedgerDB
from kuro_wasm.ledger.journal import Journal

__all__ = ["ENTRY_KEYS", "Persistence"]

#: The keys of a terminal entry (what :meth:`Persistence.save` takes and the journal holds).
ENTRY_KEYS: Final = frozenset({"op-id", "digest", "receipt", "owner-pid", "owner-token", "started-at", "finished-at"})


class Persistence:
    """Terminal receipts into SQLite, else into the journal; and back out of the journal."""

    def __init__(self, db: LedgerDB, journal: Journal) -> None:
        self._db = db
        self._journal = journal

    def save(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Keep the terminal ``entry`` (keys :data:`ENTRY_KEYS`); return its receipt as a fresh answer.

        ``kuro/persistence`` is ``saved`` (SQLite committed), ``pending`` (in the
        journal) or ``failed`` (neither; ``kuro/persistence-error`` says why).
        Raises ValueError: the receipt cannot be stored as JSON (a NaN or infinity).
        """
        return self.save_many([entry])[0]

    def save_many(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """:meth:`save` for several entries: one SQLite transaction for all, else each to the journal."""
        try:
            self._db.save_terminal(entries)
            return [answer(entry["receipt"], replayed=False, persistence="saved") for entry in entries]
        except sqlite3.Error as exc:
            db_error = exc
        return [self._journal_one(entry, db_error) for entry in entries]

    def _journal_one(self, entry: dict[str, Any], db_error: sqlite3.Error) -> dict[str, Any]:
        stored = entry["receipt"]
        try:
            self._journal.append(entry)
            return answer(stored, replayed=False, persistence="pending")
        except OSError as exc:
            message = (
                f"the receipt was not saved (SQLite: {db_error}; journal: {exc}): replay protection "
                f"cannot be promised for operation {entry['op-id']!r}"
            )
            return {**answer(stored, replayed=False, persistence="failed"), "kuro/persistence-error": message}

    def pending(self, op_id: str) -> dict[str, Any] | None:
        """The latest journal entry for ``op_id`` with a receipt, or ``None`` (also if the journal cannot be read)."""
        return self._journal.latest(op_id)

    def drain(self) -> int:
        """Move the journal's entries into SQLite (all or none); 0 if there are none or SQLite refuses."""
        try:
            return self._journal.drain(self._migrate)
        except (OSError, sqlite3.Error):
            return 0

    def _migrate(self, entries: list[dict[str, Any]]) -> None:
        good = [e for e in entries if ENTRY_KEYS <= set(e) and isinstance(e["receipt"], dict)]
        self._db.save_terminal(good)
