"""Claims apart from runs (what a batch driver does): claim, then settle, release or abandon — never two owners."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from ledger_fakes import command, fake_receipt, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.errors import ModelError, OperationConflict
from kuro_wasm.ledger.ledger import Claim, Ledger


def test_a_claimed_op_id_is_running_until_settled_and_then_replays(ledger: Ledger) -> None:
    sess, cmd = make_session(), command(1)
    claim = ledger.claim("op-1", sess, cmd)
    assert isinstance(claim, Claim)
    assert ledger.result("op-1")["kuro/status"] == "running"
    assert ledger.recover() == 0 and ledger.result("op-1")["kuro/status"] == "running"  # ours, alive: not unknown
    saved = ledger.settle(claim, fake_receipt(sess, cmd, 0, b"out"))
    assert (saved["kuro/status"], saved["kuro/replayed"], saved["kuro/persistence"]) == ("done", False, "saved")
    again = ledger.claim("op-1", sess, cmd)
    assert isinstance(again, dict) and again["kuro/replayed"] is True
    assert again["kuro/stdout-cid"] == saved["kuro/stdout-cid"]


def test_claim_many_is_one_decision_per_op_id_and_answers_the_recorded_ones(ledger: Ledger) -> None:
    sess = make_session()
    first = ledger.claim("a", sess, command(1))
    assert isinstance(first, Claim)
    ledger.settle(first, fake_receipt(sess, command(1)))
    got = ledger.claim_many([(op, sess, command(n), {}) for n, op in enumerate(["a", "b", "c"], start=1)])
    assert isinstance(got[0], dict) and got[0]["kuro/replayed"] is True
    assert isinstance(got[1], Claim) and isinstance(got[2], Claim)
    values = ledger.settle_many([(got[1], fake_receipt(sess, command(2))), (got[2], fake_receipt(sess, command(3), 7))])
    assert [v["kuro/exit-code"] for v in values] == [0, 7]
    assert [row["kuro/status"] for row in ledger.operations()] == ["done", "done", "done"]


def test_a_conflict_anywhere_in_a_claim_many_claims_nothing(ledger: Ledger) -> None:
    sess = make_session()
    done = ledger.claim("a", sess, command(1))
    assert isinstance(done, Claim)
    ledger.settle(done, fake_receipt(sess, command(1)))
    with pytest.raises(OperationConflict):
        ledger.claim_many([("b", sess, command(2), {}), ("a", sess, command(9), {})])
    assert ledger.result("b")["kuro/status"] == "not-found"


def test_one_op_id_twice_in_a_claim_many_is_refused_before_anything_is_recorded(ledger: Ledger) -> None:
    sess = make_session()
    with pytest.raises(ModelError, match="asked for twice"):
        ledger.claim_many([("a", sess, command(1), {}), ("a", sess, command(1), {})])
    assert ledger.result("a")["kuro/status"] == "not-found"


def test_a_released_claim_leaves_no_trace_so_the_op_id_can_run_later(ledger: Ledger) -> None:
    sess, cmd = make_session(), command(1)
    claim = ledger.claim("op-1", sess, cmd)
    assert isinstance(claim, Claim)
    ledger.release([claim])
    assert ledger.result("op-1")["kuro/status"] == "not-found"
    assert isinstance(ledger.claim("op-1", sess, cmd), Claim)


def test_an_abandoned_claim_is_unknown_and_never_claimed_again(ledger: Ledger) -> None:
    sess, cmd = make_session(), command(1)
    claim = ledger.claim("op-1", sess, cmd)
    assert isinstance(claim, Claim)
    unknown = ledger.abandon(claim, "the batch stopped waiting")
    assert unknown["kuro/status"] == "unknown" and unknown["kuro/unknown-reason"] == "the batch stopped waiting"
    assert ledger.claim("op-1", sess, cmd)["kuro/status"] == "unknown"  # type: ignore[index]


def test_a_claim_another_ledger_object_sees_is_running_not_a_second_claim(db: Path, ledger: Ledger) -> None:
    sess, cmd = make_session(), command(1)
    claim = ledger.claim("op-1", sess, cmd)
    assert isinstance(claim, Claim)
    with Ledger(db, store=MemoryBlockStore()) as other:
        assert other.claim("op-1", sess, cmd)["kuro/status"] == "running"  # type: ignore[index]
    ledger.settle(claim, fake_receipt(sess, cmd))


def test_recorded_many_answers_what_claim_many_would_and_claims_nothing(ledger: Ledger) -> None:
    sess = make_session()
    done, held = ledger.claim("a", sess, command(1)), ledger.claim("b", sess, command(2))
    assert isinstance(done, Claim) and isinstance(held, Claim)
    ledger.settle(done, fake_receipt(sess, command(1)))
    got = ledger.recorded_many([(op, sess, command(n), {}) for n, op in enumerate(["a", "b", "c"], start=1)])
    assert got[0] is not None and got[0]["kuro/replayed"] is True
    assert got[1] is not None and got[1]["kuro/status"] == "running"
    assert got[2] is None and ledger.result("c")["kuro/status"] == "not-found"  # not claimed by the asking
    with pytest.raises(OperationConflict):
        ledger.recorded_many([("c", sess, command(3), {}), ("a", sess, command(9), {})])
    with pytest.raises(ModelError, match="asked for twice"):
        ledger.recorded_many([("c", sess, command(3), {}), ("c", sess, command(3), {})])
    ledger.release([held])


def test_an_interrupt_after_claim_many_inserted_its_rows_leaves_no_claim_half_made(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kuro_wasm.ledger import live

    real = live.Live.decide

    def decide(self: live.Live, owner: bool) -> None:
        if owner:  # the Ctrl-C lands between the verdict and waking whoever waits for it
            self.owner = owner
            monkeypatch.setattr(live.Live, "decide", real)
            raise KeyboardInterrupt
        real(self, owner)

    monkeypatch.setattr(live.Live, "decide", decide)
    sess = make_session()
    with pytest.raises(KeyboardInterrupt):
        ledger.claim_many([(op, sess, command(n), {}) for n, op in enumerate(["a", "b"], start=1)])
    answers: list[str] = []
    reader = threading.Thread(target=lambda: answers.extend(ledger.result(op)["kuro/status"] for op in ("a", "b")))
    reader.start()
    reader.join(60)  # a guard against a hang, not a timing margin: the answer needs no waiting at all
    assert answers == ["not-found", "not-found"]
    again = ledger.claim_many([(op, sess, command(n), {}) for n, op in enumerate(["a", "b"], start=1)])
    assert all(isinstance(claim, Claim) for claim in again)


# ---- cancel of a claim whose run is its claimant's (a batch): answered at once, never a lie


def _asked_in_a_thread(ledger: Ledger, op_id: str) -> dict[str, object]:
    answers: list[dict[str, object]] = []
    asker = threading.Thread(target=lambda: answers.append(ledger.result(op_id, cancel=True)), daemon=True)
    asker.start()
    asker.join(60)  # a guard against a hang, not a timing margin: the answer needs no waiting at all
    assert not asker.is_alive(), "a cancel of a claim the ledger holds no run for waited for its settle"
    return answers[0]


def test_a_cancel_of_a_claim_without_a_handle_answers_not_cancellable_at_once_and_changes_nothing(
    ledger: Ledger,
) -> None:
    sess, cmd = make_session(), command(1)
    claim = ledger.claim("op-b", sess, cmd)  # a batch's claim: its run is on a worker the ledger cannot reach
    assert isinstance(claim, Claim)
    asked = _asked_in_a_thread(ledger, "op-b")
    assert (asked["kuro/status"], asked["kuro/cancel"]) == ("running", "not-cancellable")
    assert not claim.live.cancel_requested  # nothing pending that would kill a handle attached later
    saved = ledger.settle(claim, fake_receipt(sess, cmd, 0, b"out"))
    assert (saved["kuro/outcome"], saved["kuro/exit-code"]) == ("ok", 0)


def test_a_cancel_of_a_claim_with_an_attached_handle_kills_it_without_waiting_for_the_settle(ledger: Ledger) -> None:
    from ledger_fakes import FakeHandle

    sess, cmd = make_session(), command(1)
    claim = ledger.claim("op-h", sess, cmd)
    assert isinstance(claim, Claim)
    handle = FakeHandle(sess, cmd, None)
    claim.attach(handle)
    asked = _asked_in_a_thread(ledger, "op-h")
    assert (asked["kuro/status"], asked["kuro/cancel"]) == ("running", "requested") and handle.killed
    ledger.settle(claim, handle.wait())
    assert ledger.result("op-h")["kuro/outcome"] == "cancelled"


def test_another_process_cancelling_a_claim_without_a_handle_is_told_not_cancellable(db: Path, ledger: Ledger) -> None:
    sess, cmd = make_session(), command(1)
    claim = ledger.claim("op-b", sess, cmd)
    assert isinstance(claim, Claim)
    asked = subprocess.run(  # what another process reads from SQLite (this one's registry would answer here)
        [sys.executable, "-c", "import sys; from kuro_wasm.ledger.ledger import Ledger\n"
         "got = Ledger(sys.argv[1]).result('op-b', cancel=True); print(got['kuro/status'], got['kuro/cancel'])",
         str(db)],
        capture_output=True, text=True, check=True, timeout=120,  # a hang guard, not a measure
    )  # fmt: skip
    assert asked.stdout.split() == ["running", "not-cancellable"]
    ledger.settle(claim, fake_receipt(sess, cmd))
    assert ledger.result("op-b")["kuro/outcome"] == "ok"  # no request was left behind to cancel anything
