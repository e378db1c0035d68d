"""The ledger's journal: self-checking lines, torn tails ignored, drain all-or-nothing."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_wasm.ledger.journal import Journal, decode_line, encode_line

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.parametrize(
    "line",
    [b"", b"not a journal line", b"0" * 64 + b" {}", b"deadbeef {}", encode_line({"a": 1}).replace(b"1", b"2")],
)
def test_a_line_that_does_not_check_out_is_not_trusted(line: bytes) -> None:
    assert decode_line(line) is None


def test_a_checked_line_that_is_not_a_map_is_not_an_entry() -> None:
    import hashlib

    body = b"[1,2]"
    assert decode_line(hashlib.sha256(body).hexdigest().encode() + b" " + body) is None


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=5), st.data())
def test_every_entry_round_trips_and_every_cut_of_its_line_is_rejected(entry: dict[str, Any], data: Any) -> None:
    line = encode_line(entry)
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert decode_line(line) == entry
    cut = data.draw(st.integers(0, len(line) - 2))
    assert decode_line(line[:cut]) is None


def test_a_torn_last_line_is_ignored_and_does_not_swallow_the_next_append(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "ledger.journal")
    journal.append({"n": 1})
    with open(journal.path, "ab") as fh:
        fh.write(encode_line({"n": 2})[:30])  # a crash mid-write
    assert journal.read() == [{"n": 1}]
    assert journal.skipped == 1
    journal.append({"n": 3})
    assert journal.read() == [{"n": 1}, {"n": 3}]


def test_the_journal_file_is_private(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "ledger.journal")
    journal.append({"n": 1})
    assert stat.S_IMODE(os.stat(journal.path).st_mode) & 0o077 == 0


def test_drain_empties_the_journal_only_when_the_callback_returns(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "ledger.journal")
    journal.append({"n": 1})
    journal.append({"n": 2})

    def refuse(entries: list[dict[str, Any]]) -> None:
        raise RuntimeError("sqlite said no")

    with pytest.raises(RuntimeError):
        journal.drain(refuse)
    assert journal.read() == [{"n": 1}, {"n": 2}]
    taken: list[dict[str, Any]] = []
    assert journal.drain(taken.extend) == 2
    assert taken == [{"n": 1}, {"n": 2}]
    assert journal.read() == []
    assert journal.drain(taken.extend) == 0


def test_a_missing_journal_reads_empty_and_drains_nothing(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "absent.journal")
    assert journal.read() == []
    assert journal.drain(lambda entries: None) == 0


def test_an_unwritable_journal_raises_oserror(tmp_path: Path) -> None:
    (tmp_path / "ledger.journal").mkdir()
    with pytest.raises(OSError):
        Journal(tmp_path / "ledger.journal").append({"n": 1})


def test_concurrent_appends_from_threads_lose_nothing(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "ledger.journal")

    def writer(k: int) -> None:
        for i in range(25):
            Journal(journal.path).append({"k": k, "i": i, "pad": "x" * 300})

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = journal.read()
    assert sorted((e["k"], e["i"]) for e in got) == [(k, i) for k in range(4) for i in range(25)]
    assert journal.skipped == 0
