"""Random interleavings of run / result / cancel / reopen / crash / locked saves against a dict model.

Invariants after every step: no operation id was ever started twice, and every
operation the model knows finished is retrievable with its exit code (a terminal
receipt is never lost, even one that went through the journal).
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from ledger_fakes import FakeStarter, RunThread, command, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.errors import OperationConflict
from kuro_wasm.ledger.ledger import Ledger
from kuro_wasm.model.operation import argument_digest

OPS = st.sampled_from(["a", "b", "c", "d"])
VARIANTS = st.integers(0, 1)
CODES = st.integers(0, 3)


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ledger-machine-"))
        self.db = self.dir / "ledger.sqlite"
        self.store = MemoryBlockStore()
        self.starter = FakeStarter()
        self.ledger = Ledger(self.db, store=self.store, starter=self.starter, timeout=0.05)
        # op -> (state, variant, exit code or None); state in running | done | unknown
        self.model: dict[str, tuple[str, int, int | None]] = {}
        self.threads: dict[str, RunThread] = {}

    def _running(self) -> list[str]:
        return sorted(op for op, (state, _, _) in self.model.items() if state == "running")

    def _expect(self, op: str, variant: int, got: dict[str, Any]) -> None:
        state, _, code = self.model[op]
        assert got["kuro/status"] == state, (op, got)
        if state == "done":
            assert got["kuro/exit-code"] == code
            assert got["kuro/replayed"] is True

    @rule(op=OPS, variant=VARIANTS, code=CODES)
    def run_now(self, op: str, variant: int, code: int) -> None:
        self.starter.block, self.starter.exit_code = False, code
        known = self.model.get(op)
        if known is not None and known[1] != variant:
            try:
                self.ledger.run(op, make_session(f"s-{op}"), command(variant))
            except OperationConflict:
                return
            raise AssertionError("a different request under a known op id must conflict")
        got = self.ledger.run(op, make_session(f"s-{op}"), command(variant))
        if known is None:
            assert got["kuro/replayed"] is False and got["kuro/exit-code"] == code
            assert got["kuro/persistence"] == "saved"
            self.model[op] = ("done", variant, code)
        else:
            self._expect(op, variant, got)

    @precondition(lambda self: len(self.model) < 4)
    @rule(op=OPS, variant=VARIANTS)
    def run_blocked(self, op: str, variant: int) -> None:
        if op in self.model:
            return
        self.starter.block = True
        worker = RunThread(self.ledger, op, make_session(f"s-{op}"), command(variant))
        worker.start()
        self.starter.wait_started(f"s-{op}")
        self.threads[op] = worker
        self.model[op] = ("running", variant, None)

    @precondition(lambda self: bool(self._running()))
    @rule(data=st.data(), code=CODES, locked=st.booleans())
    def release(self, data: Any, code: int, locked: bool) -> None:
        op = data.draw(st.sampled_from(self._running()))
        holder = None
        if locked:  # SQLite refuses the save: the receipt must go to the journal, then come back
            holder = sqlite3.connect(self.db, isolation_level=None)
            holder.execute("BEGIN EXCLUSIVE")
        try:
            self.starter.handles[f"s-{op}"].release(code)
            got = self.threads.pop(op).answer()
        finally:
            if holder is not None:
                holder.execute("COMMIT")
                holder.close()
        assert got["kuro/exit-code"] == code
        assert got["kuro/persistence"] == ("pending" if locked else "saved")
        self.model[op] = ("done", self.model[op][1], code)

    @precondition(lambda self: bool(self._running()))
    @rule(data=st.data())
    def cancel(self, data: Any) -> None:
        op = data.draw(st.sampled_from(self._running()))
        got = self.ledger.result(op, cancel=True)
        assert got["kuro/exit-code"] == 130
        assert self.threads.pop(op).answer()["kuro/exit-code"] == 130
        self.model[op] = ("done", self.model[op][1], 130)

    @rule(op=OPS)
    def result(self, op: str) -> None:
        got = self.ledger.result(op)
        if op not in self.model:
            assert got == {"kuro/status": "not-found", "kuro/op-id": op}
        else:
            self._expect(op, self.model[op][1], got)

    @rule()
    def reopen(self) -> None:
        self.ledger.close()
        self.ledger = Ledger(self.db, store=self.store, starter=self.starter, timeout=0.05)

    @rule(op=OPS, variant=VARIANTS)
    def crash(self, op: str, variant: int) -> None:
        """A row left by a process that died mid-run (its pid now belongs to someone else)."""
        if op in self.model:
            return
        with sqlite3.connect(self.db) as conn:
            conn.execute(
                "INSERT INTO operations (op_id, digest, status, owner_pid, owner_token, started_at) "
                "VALUES (?, ?, 'started', 1, 'another-boot:0', 0)",
                (op, argument_digest(make_session(f"s-{op}"), command(variant))),
            )
        conn.close()
        self.model[op] = ("unknown", variant, None)

    @invariant()
    def no_operation_ran_twice(self) -> None:
        assert all(count == 1 for count in self.starter.starts.values()), self.starter.starts

    @invariant()
    def no_terminal_receipt_is_lost(self) -> None:
        for op, (state, _, code) in self.model.items():
            if state == "done":
                got = self.ledger.result(op)
                assert got["kuro/status"] == "done" and got["kuro/exit-code"] == code, (op, got)
                assert got["kuro/persistence"] == "saved", (op, got)  # SQLite is free now: the journal drained

    def teardown(self) -> None:
        for op in self._running():
            self.starter.handles[f"s-{op}"].release(0)
            self.threads.pop(op).answer()
        self.ledger.close()
        shutil.rmtree(self.dir, ignore_errors=True)


LedgerMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_ledger_machine = LedgerMachine.TestCase
