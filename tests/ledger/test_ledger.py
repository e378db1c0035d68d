"""The ledger on real SQLite files, driven through the fake starter (tests/ledger/conftest.py)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ledger_fakes import GUEST, ROOT, FakeHandle, FakeStarter, RunThread, command, fake_receipt, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import raw_cid
from kuro_fs.errors import BlockStoreError
from kuro_wasm.errors import LedgerCorrupt, LedgerError, ModelError, OperationConflict, StillRunning
from kuro_wasm.ledger.db import default_connect
from kuro_wasm.ledger.ledger import MAX_PAGE, Claim, Ledger
from kuro_wasm.model.operation import argument_digest
from kuro_wasm.model.sessions import Session, denial, guest, is_guest_spec, session

# ---- bad input first


@pytest.mark.parametrize(
    "op_id",
    [
        "",
        "   ",
        None,
        7,
        "x" * 1025,
        "op\nkuro ledger: forged row",
        "op\x1b]0;title\x07",
        "op\x7f",
        "op\x85",
        "op\ud800",
    ],
)
def test_a_bad_operation_id_is_refused_before_anything_runs(ledger: Ledger, starter: FakeStarter, op_id: Any) -> None:
    with pytest.raises(ModelError) as info:
        ledger.run(op_id, make_session(), command())
    assert info.value.reason == "invalid-op-id"
    assert starter.total == 0
    assert ledger.operations() == []


def test_an_unknown_run_option_is_refused_before_anything_is_recorded(ledger: Ledger, starter: FakeStarter) -> None:
    with pytest.raises(ModelError) as info:
        ledger.run("op", make_session(), command(), timeout=5)
    assert info.value.reason == "unknown-run-option"
    assert starter.total == 0
    assert ledger.result("op")["kuro/status"] == "not-found"


@pytest.mark.parametrize(
    "limit",
    [
        {"timeout_ms": 0},
        {"timeout_ms": -5},
        {"timeout_ms": None},
        {"timeout_ms": True},
        {"timeout_ms": "500"},
        {"timeout_ms": 1.5},
        {"max_output_bytes": -1},
        {"max_memory_bytes": "64k"},
        {"fuel": False},
    ],
)
def test_a_bad_limit_is_refused_before_anything_is_recorded(
    ledger: Ledger, starter: FakeStarter, limit: dict[str, Any]
) -> None:
    with pytest.raises(ModelError) as info:
        ledger.run("op", make_session(), command(), **limit)
    assert info.value.reason == "invalid-limit"
    assert starter.total == 0
    assert ledger.result("op")["kuro/status"] == "not-found"  # the op id is still free, not burnt as unknown


def test_an_fs_root_that_is_not_a_cid_is_refused_before_anything_is_recorded(
    ledger: Ledger, starter: FakeStarter
) -> None:
    with pytest.raises(ModelError) as info:
        ledger.run("op", make_session(), command(), fs="not-a-cid")
    assert info.value.reason == "invalid-fs-root"
    assert starter.total == 0
    assert ledger.result("op")["kuro/status"] == "not-found"


@pytest.mark.parametrize("stdin", [["a"], 12, iter([b"x"])])
def test_stdin_that_is_not_bytes_is_refused(ledger: Ledger, starter: FakeStarter, stdin: Any) -> None:
    with pytest.raises(ModelError):
        ledger.run("op", make_session(), command(), stdin=stdin)
    assert starter.total == 0


def test_a_session_that_is_not_a_session_is_refused(ledger: Ledger, starter: FakeStarter) -> None:
    with pytest.raises(ModelError):
        ledger.run("op", {"kuro/mode": "terminal-build"}, command())  # type: ignore[arg-type]
    assert starter.total == 0


def test_a_file_that_is_not_a_ledger_is_reported_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.write_bytes(b"this is not a database file at all" * 100)
    with pytest.raises(LedgerCorrupt):
        Ledger(path, store=MemoryBlockStore(), starter=FakeStarter())


def test_a_damaged_page_of_the_listing_is_reported_corrupt_not_raised_raw(
    db: Path, store: MemoryBlockStore, starter: FakeStarter
) -> None:
    with Ledger(db, store=store, starter=starter) as ledger:
        for i in range(3):
            ledger.run(f"op-{i}", make_session(), command(i))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'operations'").fetchone()
    (page,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with open(db, "r+b") as fh:  # the page `kuro ledger list` reads (the table, in rowid order): a bad sector, say
        fh.seek((root - 1) * page)
        fh.write(b"\xff" * 16)
    with Ledger(db, store=store, starter=starter) as ledger:
        with pytest.raises(LedgerCorrupt, match="malformed"):
            ledger.operations()


def test_a_receipt_edited_in_the_database_is_reported_corrupt(ledger: Ledger, db: Path) -> None:
    ledger.run("op", make_session(), command())
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE operations SET receipt = replace(receipt, '\"ok\"', '\"exit\"')")
    with pytest.raises(LedgerCorrupt):
        ledger.result("op")


def test_a_closed_ledger_refuses_use_and_closing_twice_is_fine(db: Path, store: MemoryBlockStore) -> None:
    led = Ledger(db, store=store, starter=FakeStarter())
    led.close()
    led.close()
    assert led.closed
    with pytest.raises(LedgerError):
        led.run("op", make_session(), command())
    with pytest.raises(LedgerError):
        led.result("op")
    with pytest.raises(LedgerError), led:
        pass


def test_the_context_manager_closes_the_ledger(db: Path, store: MemoryBlockStore) -> None:
    with Ledger(db, store=store, starter=FakeStarter()) as led:
        assert not led.closed
    assert led.closed


# ---- the argument digest


def test_the_digest_names_grant_mode_command_stdin_limits_and_fs_root_but_not_the_session_id() -> None:
    base = argument_digest(make_session("a"), command(1))
    assert argument_digest(make_session("b"), command(1)) == base
    assert argument_digest(make_session("a"), command(1), timeout_ms=120_000) == base  # the default, spelled out
    assert argument_digest(make_session("a"), command(1), stdin=None) == base
    changed = [
        argument_digest(make_session("a", mode="terminal-repo"), command(1)),
        argument_digest(session("a", ROOT, "terminal-build", grant=["guest/invoke"]), command(1)),
        argument_digest(make_session("a"), command(2)),
        argument_digest(make_session("a"), command(1), stdin=b"x"),
        argument_digest(make_session("a"), command(1), timeout_ms=5),
        argument_digest(make_session("a"), command(1), max_output_bytes=5),
        argument_digest(make_session("a"), command(1), fuel=10),
        argument_digest(make_session("a"), command(1), max_memory_bytes=65_536),
        argument_digest(make_session("a"), command(1), fs=raw_cid(b"another root")),
        argument_digest(session("a", raw_cid(b"the session's other root"), "terminal-build"), command(1)),
    ]
    assert base not in changed
    assert len(set(changed)) == len(changed)


def test_an_fs_values_own_grant_budget_and_format_are_part_of_the_digest_and_its_defaults_are_not() -> None:
    # Each changes what the guest may do or which CIDs it writes: "the same operation" with another
    # Fs grant would replay a receipt the new request could never have produced.
    from dataclasses import replace

    from kuro_fs.fs import Fs
    from kuro_fs.fsdir import DirLayout

    fs = Fs.empty(MemoryBlockStore())
    sess = session("a", fs.root, "terminal-build")
    base = argument_digest(sess, command(1))
    assert argument_digest(sess, command(1), fs=fs) == base  # a default Fs value is its root, as before
    assert argument_digest(sess, command(1), fs=fs.root) == base
    changed = [
        argument_digest(sess, command(1), fs=other)
        for other in (
            fs.with_grant(["fs/read"]),
            fs.with_budget(bytes=4),
            fs.with_budget(entries=5),
            replace(fs, chunk_size=1024),
            replace(fs, width=10),
            replace(fs, layout=DirLayout(max_flat=1)),
        )
    ]
    assert base not in changed
    assert len(set(changed)) == len(changed)


def test_the_digest_uses_the_stdin_cid_so_equal_stdin_means_equal_digest() -> None:
    one = argument_digest(make_session(), command(), stdin=b"hello")
    assert argument_digest(make_session(), command(), stdin=bytearray(b"hello")) == one
    assert argument_digest(make_session(), command(), stdin="hello") == one


OTHER_ROOT = raw_cid(b"another root")
#: One change to one part of the digest each: (session, command, options) of the changed request.
CHANGES: dict[str, tuple[Any, Any, dict[str, Any]]] = {
    "mode": (make_session(mode="terminal-repo"), command(1), {}),
    "grant": (session("s1", ROOT, "terminal-build", grant=["guest/invoke"]), command(1), {}),
    "command": (make_session(), command(2), {}),
    "stdin": (make_session(), command(1), {"stdin": b"other input"}),
    "timeout_ms": (make_session(), command(1), {"timeout_ms": 5}),
    "max_output_bytes": (make_session(), command(1), {"max_output_bytes": 5}),
    "max_memory_bytes": (make_session(), command(1), {"max_memory_bytes": 65_536}),
    "fuel": (make_session(), command(1), {"fuel": 10}),
    "fs": (make_session(), command(1), {"fs": OTHER_ROOT}),
    "session root": (session("s1", OTHER_ROOT, "terminal-build"), command(1), {}),
}


@pytest.mark.parametrize("part", sorted(CHANGES))
def test_a_change_in_any_one_part_of_the_digest_is_a_conflict_and_runs_nothing(
    ledger: Ledger, starter: FakeStarter, part: str
) -> None:
    ledger.run("op", make_session(), command(1), stdin=b"input")
    sess, cmd, options = CHANGES[part]
    options = {"stdin": b"input", **options}
    with pytest.raises(OperationConflict):
        ledger.run("op", sess, cmd, **options)
    assert starter.total == 1
    assert ledger.result("op")["kuro/command"]["kuro/args"] == [1]


# ---- run, replay, conflict


def test_a_first_run_runs_once_and_says_saved(ledger: Ledger, starter: FakeStarter) -> None:
    r = ledger.run("op-1", make_session(), command(), timeout_ms=500)
    assert starter.total == 1
    assert starter.options[0]["timeout_ms"] == 500
    assert r["kuro/status"] == "done"
    assert r["kuro/replayed"] is False
    assert r["kuro/persistence"] == "saved"
    assert r["kuro/op-id"] == "op-1"
    assert r["kuro/exit-code"] == 0


def test_a_ledgered_run_gets_end_of_input_right_after_its_start(ledger: Ledger, starter: FakeStarter) -> None:
    ledger.run("op", make_session("s-eof"), command(), stdin=b"all of it")
    assert starter.handles["s-eof"].stdin_closed  # else a guest reading to the end waits for its deadline


def test_replay_returns_the_stored_receipt_without_running(ledger: Ledger, starter: FakeStarter) -> None:
    first = ledger.run("op-1", make_session(), command(3))
    again = ledger.run("op-1", make_session(), command(3))
    assert starter.total == 1
    assert again["kuro/replayed"] is True
    assert again["kuro/persistence"] == "saved"
    assert {k: v for k, v in again.items() if k != "kuro/replayed"} == {
        k: v for k, v in first.items() if k != "kuro/replayed"
    }


def test_a_different_digest_raises_operation_conflict_and_runs_nothing(ledger: Ledger, starter: FakeStarter) -> None:
    ledger.run("op-1", make_session(), command(1))
    with pytest.raises(OperationConflict):
        ledger.run("op-1", make_session(), command(2))
    with pytest.raises(OperationConflict):
        ledger.run("op-1", make_session(), command(1), stdin=b"other input")
    assert starter.total == 1
    assert ledger.result("op-1")["kuro/command"]["kuro/args"] == [1]


def test_a_replay_survives_reopening_the_ledger(db: Path, store: MemoryBlockStore) -> None:
    first_starter = FakeStarter(exit_code=3, stdout=b"out")
    with Ledger(db, store=store, starter=first_starter) as led:
        first = led.run("op", make_session(), command())
    second_starter = FakeStarter()
    with Ledger(db, store=store, starter=second_starter) as led:
        again = led.run("op", make_session(), command())
        got = led.result("op")
    assert second_starter.total == 0
    assert again["kuro/exit-code"] == got["kuro/exit-code"] == first["kuro/exit-code"] == 3
    assert got["kuro/outcome"] == "exit"
    assert got["kuro/stdout-preview"] == "out"


def test_a_replay_is_answered_while_another_writer_holds_the_database(
    ledger: Ledger, db: Path, starter: FakeStarter
) -> None:
    first = ledger.run("op", make_session(), command(), stdin=b"x")
    holder = _lock(db)
    try:
        again = ledger.run("op", make_session(), command(), stdin=b"x")
        with pytest.raises(OperationConflict):
            ledger.run("op", make_session(), command(), stdin=b"y")
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert again["kuro/replayed"] is True
    assert again["kuro/persistence"] == "saved"
    assert again["kuro/receipt-cid"] == first["kuro/receipt-cid"]
    assert starter.total == 1


def test_a_denial_is_stored_and_replayed_like_a_receipt(db: Path, store: MemoryBlockStore) -> None:
    calls = []

    def deny(sess: Any, cmd: Any, **options: Any) -> dict[str, Any]:
        calls.append(cmd)
        found = denial(sess, cmd)
        assert found is not None
        return found

    argv = ["rm", "-rf", "/"]
    with Ledger(db, store=store, starter=deny) as led:
        first = led.run("op", make_session(), argv)
        again = led.run("op", make_session(), argv)
    assert len(calls) == 1
    assert first["kuro/reason"] == again["kuro/reason"] == "argv-not-a-process"
    assert again["kuro/replayed"] is True


def test_an_operation_never_seen_is_not_found(ledger: Ledger) -> None:
    assert ledger.result("never") == {"kuro/status": "not-found", "kuro/op-id": "never"}


def test_operations_lists_what_was_recorded(ledger: Ledger) -> None:
    ledger.run("a", make_session(), command(1))
    ledger.run("b", make_session(), command(2))
    listed = {o["kuro/op-id"]: o for o in ledger.operations()}
    assert set(listed) == {"a", "b"}
    assert listed["a"]["kuro/status"] == "done"
    assert listed["a"]["kuro/exit-code"] == 0


def test_operations_lists_a_run_whose_owner_is_gone_as_unknown(ledger: Ledger, db: Path) -> None:
    with sqlite3.connect(db) as conn:  # left by a process that died after the ledger was opened
        conn.execute(
            "INSERT INTO operations (op_id, digest, status, owner_pid, owner_token, started_at) "
            "VALUES ('gone', ?, 'started', 1, 'another-boot:0', 0)",
            (argument_digest(make_session(), command()),),
        )
    conn.close()
    assert [(o["kuro/op-id"], o["kuro/status"]) for o in ledger.operations()] == [("gone", "unknown")]


# ---- what is stored


def test_the_row_keeps_the_outputs_cid_and_a_bounded_preview_and_no_raw_output_is_stored(
    db: Path, store: MemoryBlockStore
) -> None:
    out = ("é" * 30_000).encode()
    with Ledger(db, store=store, starter=FakeStarter(stdout=out, stderr=b"warn\n")) as led:
        r = led.run("op", make_session(), command())
    assert "kuro/stdout" not in r and "kuro/stderr" not in r
    assert r["kuro/stdout-cid"] == raw_cid(out)
    assert store.get(r["kuro/stdout-cid"]) is None  # named, never stored (keep_output was not asked)
    assert r["kuro/stdout-bytes"] == len(out) == 60_000
    assert r["kuro/stdout-preview"] == "é" * 24_000
    assert r["kuro/stdout-preview-truncated?"] is True
    assert r["kuro/stderr-preview"] == "warn\n"
    assert r["kuro/stderr-preview-truncated?"] is False
    stored = store.get(r["kuro/receipt-cid"])  # the persisted (redacted) receipt, as dag-cbor
    assert stored is not None and out not in stored


def test_keep_output_puts_the_raw_output_and_the_full_receipt_in_the_private_output_store(
    db: Path, store: MemoryBlockStore
) -> None:
    private = MemoryBlockStore()
    out = b"the whole output 9c2e\n"
    with Ledger(db, store=store, output_store=private, starter=FakeStarter(stdout=out)) as led:
        r = led.run("op", make_session(), command(), keep_output=True)
        again = led.run("op", make_session(), command())  # keeping output is not part of the identity
    assert again["kuro/replayed"] is True
    assert r["kuro/output-kept"] is True
    assert private.get(r["kuro/stdout-cid"]) == out and store.get(r["kuro/stdout-cid"]) is None
    full = private.get(r["kuro/receipt-cid"])
    assert full is not None and out in full
    assert all(out not in (store.get(c) or b"") for c in store.cids())  # nothing raw in the shared store


class _FullStore(MemoryBlockStore):
    """An output store whose disk is full."""

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        raise BlockStoreError("no space left on device")


def test_output_that_could_not_be_kept_is_not_said_to_be_kept(db: Path, store: MemoryBlockStore) -> None:
    out = b"lost output\n"
    with Ledger(db, store=store, output_store=_FullStore(), starter=FakeStarter(stdout=out)) as led:
        r = led.run("op", make_session(), command(), keep_output=True)
    assert r["kuro/output-kept"] is False
    assert r["kuro/receipt-cid"] is None
    assert any(raw_cid(out) in e for e in r["kuro/store-errors"])
    assert any(e.startswith("the receipt block:") for e in r["kuro/store-errors"])
    assert r["kuro/stdout-cid"] == raw_cid(out)  # still named: the bytes are known, only not kept


def test_secrets_are_redacted_from_what_is_stored_and_counted(db: Path, store: MemoryBlockStore) -> None:
    secret = b"token=abcdef123456 and AKIAIOSFODNN7EXAMPLE\n"
    with Ledger(db, store=store, starter=FakeStarter(stdout=secret, stderr=b"password: hunter2")) as led:
        r = led.run("op", make_session(), command())
        replay = led.result("op")
    assert r["kuro/redactions"] == replay["kuro/redactions"] == 3
    assert "abcdef123456" not in r["kuro/stdout-preview"]
    assert "hunter2" not in r["kuro/stderr-preview"]
    raw = b"".join(p.read_bytes() for p in db.parent.iterdir() if p.is_file())
    assert b"abcdef123456" not in raw and b"AKIAIOSFODNN7EXAMPLE" not in raw and b"hunter2" not in raw


def test_stdin_contents_are_never_persisted(db: Path, store: MemoryBlockStore) -> None:
    stdin = b"stdin-only-content-7f3a9"

    def echoing(sess: Any, cmd: Any, **options: Any) -> Any:
        starter = FakeStarter()
        handle = starter(sess, cmd, **options)
        handle._result = {**handle.wait(), "kuro/stdin": options["stdin"]}  # a host that leaks stdin into results
        return handle

    with Ledger(db, store=store, starter=echoing) as led:
        r = led.run("op", make_session(), command(), stdin=stdin)
    assert "kuro/stdin" not in r
    raw = b"".join(p.read_bytes() for p in db.parent.iterdir() if p.is_file())
    assert stdin not in raw


def test_stdin_echoed_into_the_output_is_concealed_in_the_previews_and_counted(
    db: Path, store: MemoryBlockStore
) -> None:
    stdin = b"first stdin line 5e1d\nsecond stdin line 77ab\n"
    echo = FakeStarter(stdout=b"got: " + stdin + b"end\n", stderr=b"second stdin line 77ab\n")
    with Ledger(db, store=store, starter=echo) as led:
        r = led.run("op", make_session(), command(), stdin=stdin)
        replay = led.result("op")
    assert r["kuro/stdout-preview"] == "got: [REDACTED]\n[REDACTED]\nend\n"
    assert r["kuro/stderr-preview"] == "[REDACTED]\n"
    assert r["kuro/redactions"] == replay["kuro/redactions"] == 3
    assert r["kuro/stdout-cid"] == raw_cid(b"got: " + stdin + b"end\n")  # named, not stored
    raw = b"".join(p.read_bytes() for p in db.parent.iterdir() if p.is_file())
    assert b"5e1d" not in raw and b"77ab" not in raw


def test_values_of_secret_named_environment_variables_are_concealed_in_the_previews(
    db: Path, store: MemoryBlockStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KURO_TEST_SERVICE_TOKEN", "env-held-value-0c4f9e")
    monkeypatch.setenv("KURO_TEST_GREETING", "plain-value-visible")
    out = b"using env-held-value-0c4f9e and plain-value-visible\n"
    with Ledger(db, store=store, starter=FakeStarter(stdout=out)) as led:
        r = led.run("op", make_session(), command())
    assert r["kuro/stdout-preview"] == "using [REDACTED] and plain-value-visible\n"
    assert r["kuro/redactions"] == 1
    raw = b"".join(p.read_bytes() for p in db.parent.iterdir() if p.is_file())
    assert b"env-held-value-0c4f9e" not in raw


def test_a_restored_receipt_handed_out_for_new_work_is_not_current(db: Path, store: MemoryBlockStore) -> None:
    with Ledger(db, store=store, starter=FakeStarter()) as led:
        led.run("op", make_session(), command())
    with Ledger(db, store=store, starter=FakeStarter()) as led:
        plain = led.result("op")
        for_new = led.result("op", for_new_task=True)
    assert "kuro/current" not in plain
    assert for_new["kuro/current"] is False
    assert for_new["kuro/exit-code"] == 0 and for_new["kuro/outcome"] == "ok"


# ---- runs in progress


def test_result_of_a_running_operation_is_its_live_status(ledger: Ledger) -> None:
    blocking = FakeStarter(block=True)
    ledger._starter = blocking
    worker = RunThread(ledger, "op", make_session("s-live"), command())
    worker.start()
    handle = blocking.wait_started("s-live")
    live = ledger.result("op")
    assert live["kuro/status"] == "running"
    assert live["kuro/op-id"] == "op"
    handle.release(7)
    done = worker.answer()
    assert done["kuro/exit-code"] == 7
    assert ledger.result("op")["kuro/exit-code"] == 7


def test_cancel_kills_a_running_operation_and_returns_its_cancelled_receipt(ledger: Ledger) -> None:
    blocking = FakeStarter(block=True)
    ledger._starter = blocking
    worker = RunThread(ledger, "op", make_session("s-cancel"), command())
    worker.start()
    handle = blocking.wait_started("s-cancel")
    cancelled = ledger.result("op", cancel=True)
    assert handle.killed
    assert cancelled["kuro/exit-code"] == 130
    assert cancelled["kuro/outcome"] == "cancelled"
    assert cancelled["kuro/persistence"] == "saved"
    assert worker.answer()["kuro/exit-code"] == 130
    assert ledger.result("op", cancel=True)["kuro/exit-code"] == 130  # cancelling a finished op changes nothing
    assert blocking.total == 1


def test_a_cancel_that_arrives_before_the_run_has_a_handle_stops_it_as_soon_as_it_has_one(
    ledger: Ledger, starter: FakeStarter
) -> None:
    entered, go = threading.Event(), threading.Event()
    blocking = FakeStarter(block=True)

    def slow_start(sess: Any, cmd: Any, **options: Any) -> Any:
        entered.set()
        assert go.wait(20)
        return blocking(sess, cmd, **options)

    ledger._starter = slow_start
    worker = RunThread(ledger, "op", make_session("s-early"), command())
    worker.start()
    assert entered.wait(20)
    cancelled: list[dict[str, Any]] = []
    canceller = threading.Thread(target=lambda: cancelled.append(ledger.result("op", cancel=True)), daemon=True)
    canceller.start()
    while not ledger_live_cancel_requested(ledger, "op"):
        threading.Event().wait(0.001)
    go.set()  # the handle exists only now; the pending cancel must reach it
    canceller.join(20)
    assert not canceller.is_alive()
    assert blocking.handles["s-early"].killed
    assert cancelled[0]["kuro/exit-code"] == 130
    assert worker.answer()["kuro/outcome"] == "cancelled"


def ledger_live_cancel_requested(ledger: Ledger, op_id: str) -> bool:
    from kuro_wasm.ledger import ledger as ledger_module

    with ledger_module._LIVE_LOCK:
        live = ledger_module._LIVE.get(ledger._live_key(op_id))
    return live is not None and live.cancel_requested


def test_a_second_run_of_a_running_operation_does_not_start_it(ledger: Ledger) -> None:
    blocking = FakeStarter(block=True)
    ledger._starter = blocking
    worker = RunThread(ledger, "op", make_session("s-twice"), command())
    worker.start()
    handle = blocking.wait_started("s-twice")
    second = ledger.run("op", make_session("s-twice"), command())
    assert second["kuro/status"] == "running"
    with pytest.raises(OperationConflict):
        ledger.run("op", make_session("s-twice"), command(9))
    handle.release()
    worker.answer()
    assert blocking.total == 1


def test_a_starter_that_raises_leaves_unknown_and_is_never_retried(ledger: Ledger, starter: FakeStarter) -> None:
    starter.raise_on_start = RuntimeError("host blew up")
    with pytest.raises(RuntimeError):
        ledger.run("op", make_session(), command())
    starter.raise_on_start = None
    again = ledger.run("op", make_session(), command())
    assert again["kuro/status"] == "unknown"
    assert again["kuro/unknown-reason"] == "host-raised: RuntimeError"
    assert "new operation id" in again["kuro/hint"]
    assert starter.total == 0
    assert ledger.result("op")["kuro/status"] == "unknown"


def test_a_started_row_of_a_gone_owner_becomes_unknown_on_open(db: Path, store: MemoryBlockStore) -> None:
    with Ledger(db, store=store, starter=FakeStarter()):
        pass
    digest = argument_digest(make_session(), command())
    with sqlite3.connect(db) as conn:  # a row as a crashed process leaves it: pid reused by someone else
        conn.execute(
            "INSERT INTO operations (op_id, digest, status, owner_pid, owner_token, started_at) "
            "VALUES ('op', ?, 'started', 1, 'another-boot:0', 0)",
            (digest,),
        )
    starter = FakeStarter()
    with Ledger(db, store=store, starter=starter) as led:
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT status, reason FROM operations").fetchone() == (
                "unknown",
                "owner-process-gone",
            )
        assert led.run("op", make_session(), command())["kuro/status"] == "unknown"
    assert starter.total == 0


# ---- persistence honesty


def _lock(db: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def _status(db: Path, op_id: str) -> str | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT status FROM operations WHERE op_id = ?", (op_id,)).fetchone()
    return None if row is None else str(row[0])


def test_a_locked_database_sends_the_receipt_to_the_journal_and_result_migrates_it(
    db: Path, store: MemoryBlockStore
) -> None:
    blocking = FakeStarter(block=True)
    led = Ledger(db, store=store, starter=blocking, timeout=0.2)
    worker = RunThread(led, "op", make_session("s-lock"), command())
    worker.start()
    handle = blocking.wait_started("s-lock")
    holder = _lock(db)
    handle.release(4, stdout=b"kept")
    r = worker.answer()
    assert r["kuro/persistence"] == "pending"
    assert led.journal_path.stat().st_size > 0
    # while SQLite is still locked the pending receipt is what result and run answer, without running
    assert led.result("op")["kuro/persistence"] == "pending"
    assert led.run("op", make_session("s-lock"), command())["kuro/exit-code"] == 4
    assert blocking.total == 1
    holder.execute("COMMIT")
    holder.close()
    got = led.result("op")
    assert got["kuro/persistence"] == "saved"
    assert got["kuro/exit-code"] == 4
    assert _status(db, "op") == "done"
    assert led.journal_path.stat().st_size == 0
    assert blocking.total == 1
    led.close()


class _ReadOnlyWhen(sqlite3.Connection):
    """A connection whose database turns read-only once ``read_only`` is set: SQLite itself refuses
    every write (``attempt to write a readonly database``), even on a connection opened before."""

    read_only: threading.Event

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        super().execute(f"PRAGMA query_only = {int(self.read_only.is_set())}")
        return super().execute(sql, parameters)


def test_a_read_only_database_sends_the_receipt_to_the_journal_and_a_later_open_migrates_it(
    db: Path, store: MemoryBlockStore
) -> None:
    read_only = threading.Event()

    def connect(path: Path, timeout: float) -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=timeout, check_same_thread=False, factory=_ReadOnlyWhen)
        conn.read_only = read_only
        return conn

    blocking = FakeStarter(block=True)
    led = Ledger(db, store=store, starter=blocking, connect=connect, timeout=0.2)
    worker = RunThread(led, "op", make_session("s-ro"), command())
    worker.start()
    handle = blocking.wait_started("s-ro")
    read_only.set()
    handle.release(0, stdout=b"done")
    r = worker.answer()
    assert r["kuro/persistence"] == "pending"
    assert _status(db, "op") == "started"
    led.close()
    with Ledger(db, store=store, starter=FakeStarter()) as reopened:
        assert _status(db, "op") == "done"
        got = reopened.result("op")
    assert got["kuro/persistence"] == "saved"
    assert got["kuro/stdout-preview"] == "done"
    assert blocking.total == 1


def test_both_stores_unavailable_is_reported_failed_and_the_operation_becomes_unknown(
    db: Path, store: MemoryBlockStore
) -> None:
    blocking = FakeStarter(block=True)
    led = Ledger(db, store=store, starter=blocking, timeout=0.2)
    led.journal_path.mkdir()  # a directory where the journal file must go: every append fails
    worker = RunThread(led, "op", make_session("s-fail"), command())
    worker.start()
    handle = blocking.wait_started("s-fail")
    holder = _lock(db)
    handle.release(0)
    r = worker.answer()
    holder.execute("COMMIT")
    holder.close()
    assert r["kuro/persistence"] == "failed"
    assert "replay protection cannot be promised" in r["kuro/persistence-error"]
    after = led.result("op")
    assert after["kuro/status"] == "unknown"  # never "saved", never silently re-run
    assert led.run("op", make_session("s-fail"), command())["kuro/status"] == "unknown"
    assert blocking.total == 1
    led.close()


def test_a_locked_database_at_start_refuses_the_run_and_runs_nothing(
    ledger: Ledger, db: Path, starter: FakeStarter
) -> None:
    holder = _lock(db)
    try:
        with pytest.raises(LedgerError, match="nothing ran"):
            ledger.run("op", make_session(), command())
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert starter.total == 0
    assert ledger.result("op")["kuro/status"] == "not-found"


def test_the_journal_holds_no_stdin_and_no_unredacted_secret(db: Path, store: MemoryBlockStore) -> None:
    blocking = FakeStarter(block=True)
    led = Ledger(db, store=store, starter=blocking, timeout=0.2)
    worker = RunThread(led, "op", make_session("s-j"), command(), stdin=b"stdin-bytes-91c2")
    worker.start()
    handle = blocking.wait_started("s-j")
    holder = _lock(db)
    handle.release(0, stdout=b"ghp_" + b"A" * 36)
    assert worker.answer()["kuro/persistence"] == "pending"
    text = led.journal_path.read_bytes()
    holder.execute("COMMIT")
    holder.close()
    led.close()
    assert b"stdin-bytes-91c2" not in text
    assert b"A" * 36 not in text
    entry = json.loads(text.split(b" ", 1)[1])
    assert entry["receipt"]["kuro/redactions"] == 1


# ---- concurrency


def test_threads_writing_different_operations_lose_nothing(db: Path, store: MemoryBlockStore) -> None:
    starter = FakeStarter()
    ledger = Ledger(db, store=store, starter=starter, timeout=30)
    workers = [RunThread(ledger, f"op-{i}", make_session(f"s-{i}"), command(i)) for i in range(24)]
    for w in workers:
        w.start()
    answers = [w.answer(timeout=60) for w in workers]
    assert all(a["kuro/persistence"] == "saved" for a in answers)
    assert {o["kuro/op-id"] for o in ledger.operations() if o["kuro/status"] == "done"} == {
        f"op-{i}" for i in range(24)
    }
    assert starter.total == 24
    ledger.close()


def test_threads_racing_for_one_operation_run_it_once(db: Path, store: MemoryBlockStore) -> None:
    starter = FakeStarter()
    ledgers = [Ledger(db, store=store, starter=starter, timeout=30) for _ in range(4)]
    barrier = threading.Barrier(8)

    class Racer(RunThread):
        def run(self) -> None:
            barrier.wait()
            super().run()

    racers = [Racer(ledgers[i % 4], "shared", make_session("s-race"), command()) for i in range(8)]
    for r in racers:
        r.start()
    answers = [r.answer() for r in racers]
    assert starter.total == 1
    assert sum(1 for a in answers if a["kuro/replayed"] is False) == 1
    assert all(a["kuro/status"] in ("done", "running") for a in answers)
    for led in ledgers:
        led.close()


def test_closing_the_ledger_closes_its_connections(db: Path, store: MemoryBlockStore) -> None:
    opened: list[sqlite3.Connection] = []

    def connect(path: Path, timeout: float) -> sqlite3.Connection:
        opened.append(sqlite3.connect(path, timeout=timeout, check_same_thread=False))
        return opened[-1]

    led = Ledger(db, store=store, starter=FakeStarter(), connect=connect)
    led.run("op", make_session(), command())
    assert led.result("op")["kuro/status"] == "done"
    led.close()
    assert opened
    for conn in opened:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")


def test_a_ledger_made_before_the_started_index_and_cancel_table_gets_them_on_open(
    db: Path, store: MemoryBlockStore
) -> None:
    Ledger(db, store=store, starter=FakeStarter()).close()
    with sqlite3.connect(db) as conn:
        conn.execute("DROP INDEX operations_started")
        conn.execute("DROP TABLE cancel_requests")
    conn.close()
    Ledger(db, store=store, starter=FakeStarter()).close()
    with sqlite3.connect(db) as conn:
        plan = conn.execute("EXPLAIN QUERY PLAN SELECT op_id FROM operations WHERE status = 'started'").fetchall()
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert "operations_started" in str(plan)
    assert "cancel_requests" in tables


def test_by_default_the_ledger_its_journal_blocks_and_output_store_live_in_the_home(tmp_path: Path) -> None:
    home = tmp_path / "kuro-home"
    starter = FakeStarter(stdout=b"into the home's block store")
    with Ledger(home=home, starter=starter) as led:
        r = led.run("op", make_session(), command())
    assert led.path == home / "ledger.sqlite"
    assert led.journal_path == home / "ledger.journal"
    from kuro_fs.filestore import FileBlockStore

    with FileBlockStore(home / "blocks") as blocks:
        assert blocks.get(r["kuro/stdout-cid"]) is None  # output is never kept unless asked
        assert blocks.get(r["kuro/receipt-cid"]) is not None  # the persisted receipt is
    with Ledger(home=home, starter=starter) as led:
        kept = led.run("op-kept", make_session(), command(), keep_output=True)
    with FileBlockStore(home / "output") as private:  # the private output store, beside the ledger
        assert private.get(kept["kuro/stdout-cid"]) == b"into the home's block store"


def test_callbacks_and_home_pass_through_to_the_starter_but_do_not_change_the_digest(
    ledger: Ledger, starter: FakeStarter
) -> None:
    exits: list[Any] = []

    def on_exit(receipt: Any) -> None:
        exits.append(receipt)

    ledger.run("op", make_session(), command(), on_exit=on_exit, home=False)
    starter.options[0]["on_exit"]("the receipt")  # the starter's on_exit is ours (noted as the run's callback)
    assert exits == ["the receipt"]
    assert starter.options[0]["home"] is False
    assert ledger.run("op", make_session(), command())["kuro/replayed"] is True
    assert starter.total == 1


def test_operations_page_through_the_ledger_with_a_cursor(ledger: Ledger, starter: FakeStarter) -> None:
    for i in range(7):
        ledger.run(f"op-{i}", make_session(), command())
    everything = ledger.operations()
    pages, after = [], None
    while True:
        page = ledger.operations(limit=3, after=after)
        if not page:
            break
        pages.append([row["kuro/op-id"] for row in page])
        after = page[-1]["kuro/cursor"]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [op for p in pages for op in p] == [row["kuro/op-id"] for row in everything]


@pytest.mark.parametrize(
    "bad",
    [
        {"limit": 0},
        {"limit": True},
        {"limit": 2**63},
        {"limit": 2**80},
        {"after": "nonsense"},
        {"after": "x:y"},
        {"after": 7},
        # forged cursors: digits int() refuses, and positions past SQLite's integers
        {"after": "\u00b2:op"},
        {"after": "\u0663:op"},
        {"after": f"{2**63}:op"},
        {"after": f"-{2**63 + 1}:op"},
        {"after": "9" * 5000 + ":op"},
        {"after": "r\u0663:op"},
        {"after": f"r{2**63}:op"},
        {"after": "r-1:op"},
        {"after": "r" + "9" * 5000 + ":op"},
        {"after": "r7:"},
        {"after": "17:op"},  # a cursor of older code (a start time): refused, never read as a rowid
        {"after": "r1:\udcff"},  # a lone surrogate (a non-UTF-8 argv byte): no op id has one, SQLite cannot take it
    ],
)
def test_a_bad_page_is_refused(ledger: Ledger, bad: dict[str, Any]) -> None:
    with pytest.raises(ModelError) as info:
        ledger.operations(**bad)
    assert info.value.reason == "invalid-page"


#: Any text, lone surrogates too (as a non-UTF-8 argv byte decodes): st.text leaves them out.
_cursor_text = st.lists(st.one_of(st.characters(), st.sampled_from("\ud800\udcff\udfff"))).map("".join)
_cursors = st.one_of(
    _cursor_text,
    st.builds(lambda n, rest: f"r{n}:{rest}", st.integers(min_value=-(2**70), max_value=2**70), _cursor_text),
    st.builds(lambda digits, rest: f"r{digits}:{rest}", st.text("0123456789\u0663\u00b2", max_size=25), _cursor_text),
)


def test_any_cursor_text_pages_on_or_is_an_invalid_page(ledger: Ledger) -> None:
    ledger.run("a", make_session(), command())

    @settings(max_examples=300, deadline=None)
    @given(_cursors)
    def page_after(cursor: str) -> None:
        try:
            rows = ledger.operations(limit=5, after=cursor)
        except ModelError as exc:
            assert exc.reason == "invalid-page"
        else:
            assert [row["kuro/op-id"] for row in rows] in ([], ["a"])

    page_after()


def test_a_cursor_of_a_row_started_before_1970_pages_on(db: Path, store: MemoryBlockStore) -> None:
    # a clock set back past the epoch gives negative start times; their cursors are still this ledger's own
    with Ledger(db, store=store, starter=FakeStarter(), now=lambda: -5) as ledger:
        for op_id in ("a", "b"):
            ledger.run(op_id, make_session(), command())
        first = ledger.operations(limit=1)
        assert first[0]["kuro/cursor"] == "r1:a"
        assert [row["kuro/op-id"] for row in ledger.operations(after=first[0]["kuro/cursor"])] == ["b"]


def _paged(ledger: Ledger, after: str | None) -> list[str]:
    return [row["kuro/op-id"] for row in ledger.operations(after=after)]


def test_a_row_recorded_after_the_clock_went_back_is_on_the_next_page_not_skipped(
    db: Path, store: MemoryBlockStore
) -> None:
    clock = iter([2000, 3000, 1000, 1000, 1000])  # the clock is set back between the pages
    with Ledger(db, store=store, starter=FakeStarter(), now=lambda: next(clock)) as ledger:
        ledger.run("a", make_session(), command(1))  # started 2000, finished 3000
        first = ledger.operations(limit=1)
        assert [row["kuro/op-id"] for row in first] == ["a"]
        ledger.run("b", make_session(), command(2))  # recorded after a, started "before" it
        assert _paged(ledger, first[0]["kuro/cursor"]) == ["b"]
        assert _paged(ledger, None) == ["a", "b"]  # oldest first is the order they were recorded in


def test_a_row_that_takes_the_place_of_a_released_claim_is_not_skipped_by_a_cursor_past_it(ledger: Ledger) -> None:
    sess = make_session()
    ledger.run("a", sess, command(1))
    claims = ledger.claim_many([("x", sess, command(2), {}), ("y", sess, command(3), {})])
    listed = ledger.operations()
    assert [row["kuro/op-id"] for row in listed] == ["a", "x", "y"]
    ledger.release([c for c in claims if isinstance(c, Claim)])  # never sent: their rows go
    ledger.run("z", sess, command(4))  # recorded after the page was read
    assert _paged(ledger, listed[-1]["kuro/cursor"]) == ["z"]


def test_a_page_far_into_the_ledger_reads_its_rows_not_every_row_before_it(db: Path, store: MemoryBlockStore) -> None:
    Ledger(db, store=store, starter=FakeStarter()).close()
    with sqlite3.connect(db) as conn:  # a large ledger, made fast: done rows, recorded in op id order
        conn.executemany(
            "INSERT INTO operations (op_id, digest, status, owner_pid, owner_token, started_at) "
            "VALUES (?, 'd', 'done', 1, 't', 0)",
            [(f"op-{i:05}",) for i in range(20_000)],
        )
    conn.close()
    steps = [0]  # SQLite's VM steps, counted in hundreds: work done, not time

    def counting(path: Path, timeout: float) -> sqlite3.Connection:
        conn = default_connect(path, timeout)
        conn.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1), 100)
        return conn

    def steps_of(after: str | None) -> tuple[list[str], int]:
        before = steps[0]
        rows = ledger.operations(limit=2, after=after)
        return [row["kuro/op-id"] for row in rows], steps[0] - before

    with Ledger(db, store=store, starter=FakeStarter(), connect=counting) as ledger:
        first, first_steps = steps_of(None)
        last, last_steps = steps_of("r19998:op-19997")
    assert first == ["op-00000", "op-00001"] and last == ["op-19998", "op-19999"]
    assert last_steps <= first_steps + 5  # a keyset page: its own rows, never the 19998 before it


def test_the_largest_page_limit_sqlite_counts_is_every_row(ledger: Ledger) -> None:
    ledger.run("op-1", make_session(), command())
    assert [row["kuro/op-id"] for row in ledger.operations(limit=MAX_PAGE)] == ["op-1"]


def test_a_home_that_is_a_file_is_a_ledger_error_naming_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a directory")
    with pytest.raises(LedgerError, match=f"cannot create the ledger's directory {home}"):
        Ledger(home=home)
    assert home.read_text() == "not a directory"  # nothing already there is lost


def test_a_refused_operation_id_is_echoed_cut_short(ledger: Ledger) -> None:
    # A megabyte op id must not come back as a megabyte error line.
    for op_id in ("x" * 1_000_000, "\n" * 1_000_000, ["x"] * 100_000):
        with pytest.raises(ModelError) as info:
            ledger.run(op_id, make_session(), command())
        assert len(str(info.value)) < 300 and "\n" not in str(info.value)
    with pytest.raises(ModelError, match=r"got 'xxxx.*'… \(1000000 characters\)"):
        ledger.run("x" * 1_000_000, make_session(), command())


# ---- a Ctrl-C (or the CLI's SIGTERM/SIGHUP) at any moment after the guest started is a cancel


class _InterruptingHandle(FakeHandle):
    """A fake run whose ``close_stdin`` is where the interrupt lands (the moment between start and the wait)."""

    def close_stdin(self) -> None:
        raise KeyboardInterrupt


def _stored_cancelled_with(ledger: Ledger, handle_type: type[FakeHandle]) -> None:
    """Run one op whose fake run is a ``handle_type``: it is killed, and stored ``cancelled``."""
    handles: list[FakeHandle] = []

    def start(sess: Session, cmd: Any, **_options: Any) -> FakeHandle:
        handles.append(handle_type(sess, cmd, None))
        return handles[-1]

    ledger._starter = start
    answer = ledger.run("op", make_session(), command())
    assert handles[0].killed
    assert (answer["kuro/outcome"], answer["kuro/exit-code"]) == ("cancelled", 130)
    assert ledger.result("op")["kuro/status"] == "done"


def test_an_interrupt_between_start_and_the_wait_is_stored_as_cancelled_not_unknown(ledger: Ledger) -> None:
    _stored_cancelled_with(ledger, _InterruptingHandle)


def test_an_interrupt_during_the_cancel_poll_is_stored_as_cancelled_not_unknown(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocking = FakeStarter(block=True)
    ledger._starter = blocking
    monkeypatch.setattr("kuro_wasm.ledger.ledger.CANCEL_POLL_S", 0.001)

    def interrupted(op_id: str) -> bool:  # the signal lands while the ledger asks SQLite for a cancel request
        raise KeyboardInterrupt

    monkeypatch.setattr(ledger._db, "cancel_requested", interrupted)
    answer = ledger.run("op", make_session(), command())
    assert blocking.handles["s1"].killed
    assert (answer["kuro/outcome"], answer["kuro/exit-code"]) == ("cancelled", 130)
    assert ledger.result("op")["kuro/status"] == "done"


class _TwiceInterruptedHandle(FakeHandle):
    """Ctrl-C lands in the first wait, and a second signal (SIGTERM on its heels) in the first wait after the kill."""

    def __init__(self, sess: Session, cmd: Any, result: dict[str, Any] | None) -> None:
        super().__init__(sess, cmd, result)
        self.interrupts = 2

    def wait(self, timeout: float | None = None) -> Mapping[str, Any]:
        if self.interrupts:
            self.interrupts -= 1
            raise KeyboardInterrupt
        return super().wait(timeout)


def test_a_second_interrupt_while_the_killed_run_ends_does_not_leave_it_unknown(ledger: Ledger) -> None:
    _stored_cancelled_with(ledger, _TwiceInterruptedHandle)


@pytest.mark.parametrize(
    ("runnable", "refused"),
    [
        pytest.param([1], [1.0], id="integral-float-arg"),
        pytest.param([1], (1,), id="tuple-args"),
        pytest.param([b"x"], [bytearray(b"x")], id="bytearray-arg"),
    ],
)
def test_a_command_the_gate_refuses_never_shares_a_digest_with_one_it_allows(runnable: Any, refused: Any) -> None:
    # The gate tells these apart (only the exact guest spec runs; the others are guest-spec-required),
    # so they are different operations: one digest would replay a denial for a runnable spec, or a
    # receipt of a run for a command that would have been refused.
    sess = make_session()
    allowed = guest(GUEST, "run", runnable)
    spelled = {**allowed, "kuro/args": refused}
    assert denial(sess, allowed) is None
    found = denial(sess, spelled)
    assert found is not None and found["kuro/reason"] == "guest-spec-required"
    assert argument_digest(sess, spelled) != argument_digest(sess, allowed)


def test_a_denied_spelling_does_not_replay_for_the_runnable_spec(db: Path, store: MemoryBlockStore) -> None:
    def gate(sess: Any, cmd: Any, **options: Any) -> Any:
        found = denial(sess, cmd)
        return found if found is not None else FakeHandle(sess, cmd, fake_receipt(sess, cmd))

    runnable = command(1)
    with Ledger(db, store=store, starter=gate) as led:
        refused = led.run("op", make_session(), {**runnable, "kuro/args": [1.0]})
        assert refused["kuro/reason"] == "guest-spec-required"
        with pytest.raises(OperationConflict):
            led.run("op", make_session(), runnable)


@pytest.mark.parametrize("value", [2**64, -(2**64) - 1])
def test_a_command_value_outside_dag_cbor_is_a_model_error(value: Any) -> None:
    with pytest.raises(ModelError) as info:
        argument_digest(make_session(), {"kuro/type": "kuro/guest", "x": value})
    assert info.value.reason == "unencodable-value"


def test_a_whole_float_past_2_53_is_digested_as_the_float_javascript_writes() -> None:
    # 1e300 was refused as an integer past 2^64; @ipld/dag-cbor writes it as a float (fb 7e37e43c8800759c)
    digest = argument_digest(make_session(), {"kuro/type": "kuro/guest", "x": 1e300})
    assert digest != argument_digest(make_session(), {"kuro/type": "kuro/guest", "x": 1e299})
    assert argument_digest(make_session(), {"kuro/type": "kuro/guest", "x": 2.0}) == argument_digest(
        make_session(), {"kuro/type": "kuro/guest", "x": 2}
    )


def test_a_command_nested_past_dag_cbor_is_a_model_error_not_a_recursion_error() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    for nested in (deep, {**command(), "kuro/args": [deep]}):
        with pytest.raises(ModelError) as info:
            argument_digest(make_session(), nested)
        assert info.value.reason == "unencodable-value"
    shallow_enough_for_python: Any = []
    for _ in range(300):  # deeper than dag-cbor's 256, shallow enough for Python's own recursion
        shallow_enough_for_python = [shallow_enough_for_python]
    with pytest.raises(ModelError):
        argument_digest(make_session(), shallow_enough_for_python)


_arg_values = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e18, max_value=1e18),
    st.booleans(),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.binary(max_size=3).map(bytearray),
)
_spelled_args = st.one_of(st.lists(_arg_values, max_size=3), st.lists(_arg_values, max_size=3).map(tuple))


@settings(max_examples=300, deadline=None)
@given(_spelled_args, _spelled_args)
def test_equal_digests_mean_the_gate_decides_alike_and_the_specs_are_equal(one: Any, two: Any) -> None:
    sess = make_session()
    a, b = ({**command(), "kuro/args": args} for args in (one, two))
    if argument_digest(sess, a) == argument_digest(sess, b):
        assert is_guest_spec(a) == is_guest_spec(b)
        if is_guest_spec(a):
            assert a == b


class _Alarm(Exception):
    """What a program's own signal handler raises (a SIGALRM timeout's)."""


class _AlarmedHandle(FakeHandle):
    """A program's signal handler raises ``raised`` (a class attribute) in the ledger's first wait."""

    alarmed = False
    raised: BaseException = _Alarm("the program's own timeout")

    def wait(self, timeout: float | None = None) -> Mapping[str, Any]:
        if not self.alarmed:
            self.alarmed = True
            raise self.raised
        return super().wait(timeout)


class _TimedOutHandle(_AlarmedHandle):
    """The handler raises a plain TimeoutError (not the handle's own StillRunning)."""

    raised = TimeoutError("the program's own timeout")


def test_a_handlers_timeout_error_is_not_taken_for_the_ledgers_poll(ledger: Ledger) -> None:
    # The ledger polls the run with wait(CANCEL_POLL_S); only the handle's own StillRunning is that poll ending.
    handles: list[FakeHandle] = []

    def start(sess: Session, cmd: Any, **_options: Any) -> FakeHandle:
        handles.append(_TimedOutHandle(sess, cmd, None))
        return handles[-1]

    ledger._starter = start
    with pytest.raises(TimeoutError, match="the program's own timeout") as raised:
        ledger.run("op", make_session(), command())
    assert not isinstance(raised.value, StillRunning)
    assert handles[0].killed
    stored = ledger.result("op")
    assert (stored["kuro/status"], stored["kuro/outcome"]) == ("done", "cancelled")


def test_a_signal_handlers_exception_while_the_run_goes_on_stores_the_cancelled_receipt_then_propagates(
    ledger: Ledger,
) -> None:
    # The run is stopped and its receipt recorded (not left unknown with the run going on unrecorded), then the
    # program's exception goes on up, as run() does in-process.
    handles: list[FakeHandle] = []

    def start(sess: Session, cmd: Any, **_options: Any) -> FakeHandle:
        handles.append(_AlarmedHandle(sess, cmd, None))
        return handles[-1]

    ledger._starter = start
    with pytest.raises(_Alarm) as raised:
        ledger.run("op", make_session(), command())
    assert handles[0].killed
    assert raised.value.__notes__ == ["kuro: raised during a run, which was stopped: its receipt says cancelled"]
    stored = ledger.result("op")
    assert (stored["kuro/status"], stored["kuro/outcome"]) == ("done", "cancelled")
