"""Named fs roots: a ref file per name plus an append-only history (kuro_wasm.cli.refs)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.cid import cid_for
from kuro_fs.errors import InvalidCID
from kuro_wasm.cli.refs import RefConflict, RefEntry, RefError, Refs, check_name, parse_log, resolve_target


def _root(n: int) -> str:
    return cid_for(f"dir {n}".encode(), "dag-cbor")


def _refs(tmp_path: Path) -> Refs:
    return Refs(tmp_path / "refs", now=lambda: "2026-01-01T00:00:00Z")


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "../up", "a b", "x" * 101, "naïve", "-dash"])
def test_a_name_that_could_be_a_path_or_a_dotfile_is_refused(name: str) -> None:
    with pytest.raises(RefError):
        check_name(name)


def test_a_root_that_is_not_a_cid_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    refs = _refs(tmp_path)
    with pytest.raises(InvalidCID):
        refs.set("main", "not-a-cid", "bad")
    assert refs.get("main") is None
    assert refs.log("main") == []


def test_a_name_never_set_has_no_root_and_no_history(tmp_path: Path) -> None:
    refs = _refs(tmp_path)
    assert refs.get("main") is None
    assert refs.log("main") == []
    assert refs.names() == []


def test_every_move_is_appended_and_the_ref_names_the_latest(tmp_path: Path) -> None:
    refs = _refs(tmp_path)
    for n in range(3):
        refs.set("main", _root(n), f"write {n}")
    assert refs.get("main") == _root(2)
    assert [(e.seq, e.root, e.note) for e in refs.log("main")] == [(n, _root(n), f"write {n}") for n in range(3)]
    assert refs.names() == ["main"]


def test_a_checkout_is_itself_appended_so_history_is_never_rewritten(tmp_path: Path) -> None:
    refs = _refs(tmp_path)
    refs.set("main", _root(0), "a")
    refs.set("main", _root(1), "b")
    target = resolve_target(refs.log("main"), "0")
    refs.set("main", target, "checkout 0")
    assert refs.get("main") == _root(0)
    assert [e.root for e in refs.log("main")] == [_root(0), _root(1), _root(0)]


def test_a_writer_that_read_a_stale_root_gets_a_conflict_not_a_lost_update(tmp_path: Path) -> None:
    refs = _refs(tmp_path)
    refs.set("main", _root(0), "a", expected=None)
    refs.set("main", _root(1), "b", expected=_root(0))
    with pytest.raises(RefConflict):
        refs.set("main", _root(2), "stale", expected=_root(0))
    with pytest.raises(RefConflict):
        refs.set("main", _root(2), "creating an existing name", expected=None)
    assert refs.get("main") == _root(1)
    assert len(refs.log("main")) == 2


def test_concurrent_writers_never_lose_a_history_entry(tmp_path: Path) -> None:
    refs = _refs(tmp_path)

    def writer(k: int) -> None:
        for i in range(10):
            Refs(tmp_path / "refs").set("main", _root(100 * k + i), f"{k}/{i}")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log = refs.log("main")
    assert [e.seq for e in log] == list(range(40))
    assert refs.get("main") == log[-1].root


def test_a_torn_last_log_line_is_ignored_and_cut_before_the_next_append(tmp_path: Path) -> None:
    refs = _refs(tmp_path)
    refs.set("main", _root(0), "a")
    log_path = tmp_path / "refs" / "main.log"
    with open(log_path, "ab") as handle:
        handle.write(b'{"seq": 1, "root": "bafy')  # a crash mid-append
    assert [e.seq for e in refs.log("main")] == [0]
    refs.set("main", _root(1), "b")
    assert [(e.seq, e.root) for e in refs.log("main")] == [(0, _root(0)), (1, _root(1))]
    assert log_path.read_text().count("\n") == 2


def test_a_malformed_whole_line_in_the_middle_is_an_error_not_silence() -> None:
    with pytest.raises(RefError):
        parse_log('{"seq": 0, "root": "x"}\nnot json\n{"seq": 1, "root": "y"}\n')


def test_the_ref_file_is_replaced_atomically_with_no_temp_left_behind(tmp_path: Path) -> None:
    refs = _refs(tmp_path)
    refs.set("main", _root(0), "a")
    refs.set("main", _root(1), "b")
    leftovers = [p.name for p in (tmp_path / "refs").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    assert (tmp_path / "refs" / "main.ref").read_text() == _root(1) + "\n"


def test_a_missing_ref_file_falls_back_to_the_last_logged_root(tmp_path: Path) -> None:
    refs = _refs(tmp_path)
    refs.set("main", _root(0), "a")
    (tmp_path / "refs" / "main.ref").unlink()  # a crash after the log append, before the ref replace
    assert refs.get("main") == _root(0)


@pytest.mark.parametrize("target", ["7", "-1"])
def test_a_history_number_that_does_not_exist_is_refused(target: str) -> None:
    entries = [RefEntry(0, _root(0), "a", "t")]
    with pytest.raises((RefError, InvalidCID)):
        resolve_target(entries, target)


@pytest.mark.parametrize("target", ["²", "¹⁰", "٣x", "𝟘"])
def test_a_target_of_digits_that_are_not_ascii_is_a_typed_error_not_a_crash(target: str) -> None:
    # str.isdigit() is true for "²", which int() cannot read: that was an internal ValueError.
    with pytest.raises((RefError, InvalidCID)):
        resolve_target([RefEntry(0, _root(0), "a", "t")], target)


def test_a_checkout_target_that_is_neither_a_number_nor_a_cid_is_an_invalid_cid() -> None:
    with pytest.raises(InvalidCID):
        resolve_target([], "yesterday")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=8))
def test_any_notes_round_trip_through_the_log(notes: list[str]) -> None:
    lines = "".join(_json_line(i, note) for i, note in enumerate(notes))
    assert [e.note for e in parse_log(lines)] == notes


def _json_line(i: int, note: str) -> str:
    return json.dumps(RefEntry(i, _root(i), note, "t").to_data()) + "\n"
