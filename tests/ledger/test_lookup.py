"""``lookup`` (what ``kuro receipt show`` reads) answers as the ledger does, and reads a ledger not yet made.

It copied ``Ledger``'s answer logic and diverged: where SQLite could not be read the ledger answered a
receipt still in the journal, ``lookup`` raised; and a file the first ``kuro run`` had created but not yet
given its tables was called "not a kuro ledger".
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ledger_fakes import NOT_LEDGERS, FakeStarter, command, make_session, write_not_a_ledger

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.errors import LedgerCorrupt, LedgerError
from kuro_wasm.ledger.db import LedgerDB, default_connect
from kuro_wasm.ledger.journal import Journal
from kuro_wasm.ledger.ledger import Ledger
from kuro_wasm.ledger.lookup import lookup
from kuro_wasm.ledger.persistence import Persistence

RECEIPT = {"kuro/type": "kuro/receipt", "kuro/exit-code": 0, "kuro/outcome": "ok"}


def _journal(path: Path, op_id: str, digest: str) -> None:
    entry = {
        "op-id": op_id, "digest": digest, "owner-pid": 1, "owner-token": "t", "started-at": 1,
        "finished-at": 2, "receipt": RECEIPT,
    }  # fmt: skip
    Journal(path.with_suffix(".journal")).append(entry)


def _gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    def read_row(self: LedgerDB, op_id: str) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(LedgerDB, "read_row", read_row)


def test_a_receipt_in_the_journal_is_answered_by_lookup_as_by_the_ledger_when_sqlite_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.sqlite"
    LedgerDB(path, default_connect, 2.0).close()
    _journal(path, "journaled", "sha256:1")
    monkeypatch.setattr(Persistence, "drain", lambda self: 0)  # the journal stays as it is
    ledger = Ledger(path, store=MemoryBlockStore(), starter=FakeStarter())
    _unreadable(monkeypatch)
    try:
        by_ledger = ledger.result("journaled")
    finally:
        ledger.close()
    by_lookup = lookup(path, "journaled")
    assert by_lookup == by_ledger
    assert by_lookup is not None and by_lookup["kuro/persistence"] == "pending"


def test_lookup_where_sqlite_cannot_be_read_and_the_journal_has_nothing_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.sqlite"
    LedgerDB(path, default_connect, 2.0).close()
    _unreadable(monkeypatch)
    with pytest.raises(LedgerError, match=r"cannot read the ledger .*disk I/O error"):
        lookup(path, "anything")


def _empty_sqlite(path: Path) -> None:
    """What the first ``kuro run`` leaves before its schema commits: an SQLite file with no tables."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()


@pytest.mark.parametrize("make", [lambda p: p.write_bytes(b""), _empty_sqlite], ids=["zero-bytes", "no-tables"])
def test_a_ledger_file_not_yet_given_its_tables_holds_no_operations(tmp_path: Path, make: Any) -> None:
    path = tmp_path / "ledger.sqlite"
    make(path)
    assert lookup(path, "never-ran") is None
    _journal(path, "journaled", "sha256:1")
    found = lookup(path, "journaled")
    assert found is not None and found["kuro/persistence"] == "pending"


@pytest.mark.parametrize("content", NOT_LEDGERS, ids=["random-bytes", "another-sqlite-database"])
def test_lookup_in_a_file_that_is_no_ledger_is_ledger_corrupt(tmp_path: Path, content: bytes | str) -> None:
    path = tmp_path / "ledger.sqlite"
    write_not_a_ledger(path, content)
    with pytest.raises(LedgerCorrupt, match="is not a kuro ledger"):
        lookup(path, "anything")


def test_lookup_and_the_ledger_give_the_same_answer_for_each_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path, store=MemoryBlockStore(), starter=FakeStarter()) as ledger:
        ledger.run("done", make_session(), command(1))
    db = LedgerDB(path, default_connect, 2.0)
    assert db.insert_started("orphan", "sha256:0", _gone_pid(), "gone", 1) is None
    assert db.insert_started("mine", "sha256:0", os.getpid(), "alive-token-not-this-ledger", 1) is None
    assert db.insert_started("journaled", "sha256:1", _gone_pid(), "gone", 1) is None
    assert db.insert_started("other-digest", "sha256:2", _gone_pid(), "gone", 1) is None
    db.close()
    _journal(path, "journaled", "sha256:1")
    _journal(path, "other-digest", "sha256:9")
    op_ids = ["done", "orphan", "journaled", "other-digest", "never-ran"]
    looked = {op_id: lookup(path, op_id) for op_id in op_ids}
    monkeypatch.setattr(Persistence, "drain", lambda self: 0)  # the ledger answers the journal, as lookup does
    with Ledger(path, store=MemoryBlockStore(), starter=FakeStarter()) as ledger:
        answered = {op_id: ledger.result(op_id) for op_id in op_ids}
    assert looked.pop("never-ran") is None and answered.pop("never-ran")["kuro/status"] == "not-found"
    assert looked == answered
    assert [looked[o]["kuro/status"] for o in ("done", "orphan", "other-digest")] == ["done", "unknown", "unknown"]
    assert looked["journaled"]["kuro/persistence"] == "pending"
