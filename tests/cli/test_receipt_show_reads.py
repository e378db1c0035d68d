"""``kuro receipt show`` reads the ledger and writes nothing to it: one read-only row lookup per operation id.

It opened the whole ``Ledger``, whose open drains the journal and sweeps ``started`` rows of gone owners into
``unknown`` — writes, from a command that only reads (and twice over for an operation id it did not find).
Now an orphaned run is *answered* ``unknown`` and left as it is stored (the next ledger opened for work
records it), and a receipt still in the journal is shown from there and left in it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from cli_helpers import Kuro, one_error_line

from kuro_wasm.ledger.db import LedgerDB, default_connect
from kuro_wasm.ledger.journal import Journal


def _gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _status(path: Path, op_id: str) -> str:
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as conn:
        found = conn.execute("SELECT status FROM operations WHERE op_id = ?", (op_id,)).fetchone()
    conn.close()
    return str(found[0])


def test_an_orphaned_run_is_shown_unknown_and_left_as_stored(kuro: Kuro, home: Path) -> None:
    path = home / "ledger.sqlite"
    db = LedgerDB(path, default_connect, 2.0)
    assert db.insert_started("orphan", "sha256:0", _gone_pid(), "gone-token", 1) is None
    db.close()

    shown = kuro("receipt", "show", "orphan", "--json")
    assert shown.returncode == 0, shown.stderr
    value = json.loads(shown.stdout)
    assert value["kuro/op-id"] == "orphan" and value["kuro/status"] == "unknown"
    missing = kuro("receipt", "show", "never-ran")
    assert missing.returncode == 1 and "never-ran" in one_error_line(missing)

    assert _status(path, "orphan") == "started"  # answered, not written: no sweep ran


def test_a_receipt_still_in_the_journal_is_shown_and_left_there(kuro: Kuro, home: Path) -> None:
    path = home / "ledger.sqlite"
    LedgerDB(path, default_connect, 2.0).close()
    receipt = {"kuro/type": "kuro/receipt", "kuro/exit-code": 0, "kuro/outcome": "ok"}
    entry = {
        "op-id": "journaled", "digest": "sha256:1", "owner-pid": 1, "owner-token": "t", "started-at": 1,
        "finished-at": 2, "receipt": receipt,
    }  # fmt: skip
    journal = Journal(path.with_suffix(".journal"))
    journal.append(entry)

    shown = kuro("receipt", "show", "journaled", "--json")
    assert shown.returncode == 0, shown.stderr
    value = json.loads(shown.stdout)
    assert value["kuro/persistence"] == "pending" and value["kuro/outcome"] == "ok"
    assert [e["op-id"] for e in journal.read()] == ["journaled"]  # not drained into SQLite by a read


def test_a_ledger_the_first_run_has_not_given_its_tables_yet_holds_no_such_operation(kuro: Kuro, home: Path) -> None:
    """Shown between the first ``kuro run`` creating the file and committing its schema, it said "is not a kuro
    ledger" (no such table): a file with no tables at all holds no operations."""
    path = home / "ledger.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    missing = kuro("receipt", "show", "never-ran")
    assert missing.returncode == 1, missing.stderr
    assert "never-ran" in one_error_line(missing) and "not a kuro ledger" not in missing.stderr
