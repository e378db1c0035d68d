"""The ledger with the real wasmtime host (the default starter) and real guests from guests/."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import raw_cid
from kuro_fs.fs import Fs
from kuro_wasm.errors import KuroError, OperationConflict
from kuro_wasm.host.api import add_guest, start
from kuro_wasm.ledger.ledger import Ledger
from kuro_wasm.model.sessions import guest, session

GUESTS = Path(__file__).resolve().parents[2] / "guests"


def _guest(store: MemoryBlockStore, name: str) -> str:
    return add_guest(store, (GUESTS / f"{name}.wat").read_bytes())


def test_a_replayed_fs_write_does_not_run_the_guest_again(tmp_path: Path, store: MemoryBlockStore) -> None:
    wrote = Fs.empty(store).write("greeting.txt", b"hi")
    fs0 = wrote.fs
    sess = session("s-fs", fs0.root, "terminal-build")
    cmd = guest(_guest(store, "fs-write"), "run")
    exits: list[dict[str, Any]] = []
    starts: list[str] = []

    def counting_start(sess: Any, command: Any, **options: Any) -> Any:
        starts.append(sess.id)
        return start(sess, command, **options)

    with Ledger(tmp_path / "ledger.sqlite", store=store, starter=counting_start, timeout=0.5) as led:
        first = led.run("op-write", sess, cmd, fs=fs0, on_exit=exits.append, home=False)
        again = led.run("op-write", sess, cmd, fs=fs0, on_exit=exits.append, home=False)
    assert first["kuro/isolation"] == "wasmtime"
    assert first["kuro/exit-code"] == 0
    root_after = first["kuro/fs-root-after"]
    assert root_after != fs0.root
    assert Fs(store, root_after).read("out/hello.txt").value == b"written by a guest"
    assert len(exits) == 1 and starts == ["s-fs"]  # the host started and finished exactly one run
    assert again["kuro/replayed"] is True
    assert again["kuro/fs-root-after"] == root_after
    assert again["kuro/started-at"] == first["kuro/started-at"]  # the same run, not a second one
    with Ledger(tmp_path / "ledger.sqlite", store=store) as led:
        restored = led.result("op-write", for_new_task=True)
        with pytest.raises(OperationConflict):
            led.run("op-write", sess, cmd, fs=Fs(store, root_after), home=False)
    assert restored["kuro/fs-root-after"] == root_after
    assert restored["kuro/current"] is False
    terminal = (
        "kuro/status",
        "kuro/exit-code",
        "kuro/outcome",
        "kuro/started-at",
        "kuro/finished-at",
        "kuro/duration-ms",
    )
    assert {k: restored[k] for k in terminal} == {k: first[k] for k in terminal}  # after a restart, as it ended
    assert len(exits) == 1 and starts == ["s-fs"]


def test_a_ledgered_run_reads_its_stdin_to_the_end_and_the_echo_is_not_kept_in_the_preview(
    tmp_path: Path, store: MemoryBlockStore
) -> None:
    stdin = b"a stdin line the guest echoes 31f0\n"
    sess = session("s-cat", Fs.empty(store).root, "terminal-build")
    with Ledger(tmp_path / "ledger.sqlite", store=store) as led:
        r = led.run("op-cat", sess, guest(_guest(store, "cat"), "run"), stdin=stdin, timeout_ms=10_000, home=False)
    assert r["kuro/outcome"] == "ok"  # end of input came after the stdin bytes, not the deadline
    assert r["kuro/exit-code"] == 0
    assert r["kuro/stdout-bytes"] == len(stdin)
    assert r["kuro/stdout-cid"] == raw_cid(stdin) and store.get(r["kuro/stdout-cid"]) is None  # not persisted
    assert r["kuro/stdout-preview"] == "[REDACTED]\n"
    assert r["kuro/redactions"] == 1


def test_real_output_is_named_with_a_preview_and_kept_only_when_asked(tmp_path: Path, store: MemoryBlockStore) -> None:
    sess = session("s-hello", Fs.empty(store).root)
    with Ledger(tmp_path / "ledger.sqlite", store=store) as led:
        r = led.run("op-hello", sess, guest(_guest(store, "hello"), "run"), home=False)
    assert r["kuro/stdout-preview"] == "hello, kuro\n"
    assert r["kuro/stderr-preview"] == "note: stderr works\n"
    assert store.get(r["kuro/stdout-cid"]) is None
    assert r["kuro/persistence"] == "saved"
    private = MemoryBlockStore()
    with Ledger(tmp_path / "ledger.sqlite", store=store, output_store=private) as led:
        kept = led.run("op-kept", sess, guest(_guest(store, "hello"), "run"), home=False, keep_output=True)
    assert private.get(kept["kuro/stdout-cid"]) == b"hello, kuro\n"


def test_cancel_stops_a_spinning_guest_and_its_receipt_is_stored(tmp_path: Path, store: MemoryBlockStore) -> None:
    sess = session("s-spin", Fs.empty(store).root)
    cmd = guest(_guest(store, "spin"), "run")
    led = Ledger(tmp_path / "ledger.sqlite", store=store)
    answers: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: answers.append(led.run("op-spin", sess, cmd, home=False)), daemon=True)
    worker.start()
    live = led.result("op-spin")
    while "kuro/stream-state" not in live:  # until the host's handle is attached
        live = led.result("op-spin")
    assert live["kuro/status"] == "running"
    assert live["kuro/stream-state"] == "running"
    assert live["kuro/stdout-bytes"] == 0
    cancelled = led.result("op-spin", cancel=True)
    worker.join(30)
    assert not worker.is_alive()
    assert cancelled["kuro/outcome"] == "cancelled"
    assert cancelled["kuro/exit-code"] == 130
    assert answers[0]["kuro/outcome"] == "cancelled"
    assert led.result("op-spin")["kuro/exit-code"] == 130
    led.close()


def test_a_denied_command_is_stored_as_its_denial(tmp_path: Path, store: MemoryBlockStore) -> None:
    sess = session("s-deny", Fs.empty(store).root, grant=["fs/read"])
    with Ledger(tmp_path / "ledger.sqlite", store=store) as led:
        first = led.run("op-deny", sess, guest(_guest(store, "hello"), "run"), home=False)
        again = led.run("op-deny", sess, guest(_guest(store, "hello"), "run"), home=False)
    assert first["kuro/reason"] == "missing-capabilities"
    assert first["kuro/missing"] == ["guest/invoke"]
    assert again["kuro/replayed"] is True


@pytest.mark.parametrize(
    "bad",
    [
        {"stdin": "text"},  # the digest reads a str, the host takes bytes only
        {"home": 12345},
        {"home": ""},
        {"on_chunk": 5},
        {"on_exit": "print"},
        {"store": "not a store"},
    ],
    ids=["stdin-str", "home-int", "home-empty", "on_chunk", "on_exit", "store"],
)
def test_an_option_the_host_refuses_is_refused_before_the_op_id_is_claimed(
    tmp_path: Path, store: MemoryBlockStore, bad: dict[str, Any]
) -> None:
    # refused after the claim, the op id would be used up as `unknown` though nothing ran
    sess = session("s-bad", str(Fs.empty(store).root), "terminal-build")
    cmd = guest(_guest(store, "hello"), "run")
    with Ledger(tmp_path / "ledger.sqlite", store=store) as led:
        with pytest.raises(KuroError):
            led.run("op-bad", sess, cmd, **bad)
        assert led.result("op-bad")["kuro/status"] == "not-found"
        ran = led.run("op-bad", sess, cmd, home=False)  # the op id is still free for the real run
    assert (ran["kuro/replayed"], ran["kuro/exit-code"]) == (False, 0)


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_a_run_cancelled_from_its_own_output_callback_ends_cancelled_instead_of_hanging(
    tmp_path: Path, store: MemoryBlockStore, isolation: str
) -> None:
    # "stop when the output says so": the callback runs on a thread the run needs in order to end,
    # so the cancel must not wait there for the run's receipt. The guest writes once and then spins (the flood's
    # run export could reach the output cap before a callback on another thread asks for the cancel).
    sess = session("s-cb", str(Fs.empty(store).root), "terminal-build")
    cmd = guest(_guest(store, "flood"), "write_then_spin")
    asked: list[dict[str, Any]] = []
    got: list[dict[str, Any]] = []
    with Ledger(tmp_path / "ledger.sqlite", store=store) as led:

        def on_chunk(_stream: str, _chunk: bytes) -> None:
            if not asked:
                asked.append(led.result("op-cb", cancel=True))

        runner = threading.Thread(
            target=lambda: got.append(
                led.run("op-cb", sess, cmd, on_chunk=on_chunk, timeout_ms=60_000, home=False, isolation=isolation)
            ),
            daemon=True,
        )
        runner.start()
        runner.join(120)  # a hang guard, not a measure: the run ends at its cancel
        assert not runner.is_alive(), "a cancel from the run's own callback hung the run"
        assert led.result("op-cb")["kuro/outcome"] == "cancelled"
    assert (asked[0]["kuro/status"], asked[0]["kuro/cancel"]) == ("running", "requested")
    assert (got[0]["kuro/outcome"], got[0]["kuro/exit-code"]) == ("cancelled", 130)


def test_a_run_a_closed_worker_pool_refuses_leaves_its_op_id_free(tmp_path: Path, store: MemoryBlockStore) -> None:
    # the pool refuses before anything is sent: nothing ran, so the op id is not used up as `unknown`
    from kuro_wasm.errors import NotStarted
    from kuro_wasm.host.worker.pool import WorkerPool

    sess = session("s-closed", str(Fs.empty(store).root), "terminal-build")
    cmd = guest(_guest(store, "hello"), "run")
    pool = WorkerPool(1, spare=0)
    pool.close()
    with Ledger(tmp_path / "ledger.sqlite", store=store) as led:
        with pytest.raises(NotStarted, match="closed"):
            led.run("op-closed", sess, cmd, isolation=pool, home=False)
        assert led.result("op-closed")["kuro/status"] == "not-found"
        ran = led.run("op-closed", sess, cmd, home=False)  # the op id is still free for a run that happens
    assert (ran["kuro/replayed"], ran["kuro/exit-code"]) == (False, 0)
