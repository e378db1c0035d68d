"""``kuro batch --json`` when the batch stops early: every input line still gets its one object, in order.

What finished is printed even when it finished after a line that never ran; a line that never ran
is ``not-run``; nothing is left out of the output because the batch ended with an error.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from batch_witness import Inline

from kuro_wasm.batch.backend import Done
from kuro_wasm.batch.stores import SharedStore
from kuro_wasm.cli.kuro import main

GUESTS = Path(__file__).resolve().parents[2] / "guests"


class _SecondChunkFails(Inline):
    """Runs every chunk but the second, which no worker can run (its store cannot be opened there)."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.ended = 0

    def wait(self, timeout: float) -> list[Any]:
        self.ended += 1
        if self.ended == 2:
            token, _ = self._queue.pop(0)
            return [Done(token, "failed", {"error": "the store cannot be opened on that worker", "taken": False})]
        return super().wait(timeout)


def _home_with_the_batch_guest(tmp_path: Path) -> tuple[Path, str]:
    home = tmp_path / "home"
    out = io.StringIO()
    assert main(["--home", str(home), "guest", "add", str(GUESTS / "batch.wat")], out=out, err=io.StringIO()) == 0
    return home, out.getvalue().split()[0]


def test_a_batch_that_stops_with_an_error_still_prints_one_object_per_line_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, guest = _home_with_the_batch_guest(tmp_path)
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps({"guest": guest, "export": "echo", "args": [n]}) + "\n" for n in range(5)))
    monkeypatch.setattr(
        "kuro_wasm.batch.driver.backend_for", lambda *a, store, **k: _SecondChunkFails(SharedStore(store.path))
    )
    out, err = io.StringIO(), io.StringIO()
    code = main(["--home", str(home), "batch", str(path), "--json", "--chunk-size", "1"], out=out, err=err)
    assert code == 1 and "no worker can run this batch" in err.getvalue() and "Traceback" not in err.getvalue()
    assert "batch stopped: 2 finished and stored; 3 did not run (lines 2, 4, 5)" in err.getvalue()  # no signal came
    shown = [json.loads(line) for line in out.getvalue().splitlines()]
    # line 1 ran; line 2's chunk failed; line 3 was already out and ran; the rest were never sent
    assert [v.get("kuro/outcome") or v["kuro/status"] for v in shown] == ["ok", "not-run", "ok", "not-run", "not-run"]
    assert shown[2]["kuro/args"] == [2] and [v.get("kuro/line") for v in shown[3:]] == [4, 5]


def test_while_a_batch_runs_the_command_holds_no_parsed_line_only_its_invocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    from kuro_wasm import batch

    home, guest = _home_with_the_batch_guest(tmp_path)
    path = tmp_path / "b.jsonl"
    denied = json.dumps({"guest": guest, "export": "held-export", "grant": ["fs/read"]})  # no worker needed
    path.write_text((denied + "\n") * 20)
    held: list[int] = []

    def run_many(*args: Any, **kwargs: Any) -> Any:
        gc.collect()
        held.append(sum(1 for o in gc.get_objects() if isinstance(o, dict) and o.get("export") == "held-export"))
        return real(*args, **kwargs)

    real = batch.run_many
    monkeypatch.setattr(batch, "run_many", run_many)
    code = main(["--home", str(home), "batch", str(path)], out=io.StringIO(), err=io.StringIO())
    assert code == 1 and held == [0]  # twenty denials; the lines' objects were let go before the batch began


class _SecondNeverAnswers(Inline):
    """Runs the first chunk; the worker of the second never answers, even once cancelled (the driver would wait on)."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.waits = 0

    def wait(self, timeout: float) -> list[Any]:
        self.waits += 1
        if self.waits == 1:
            return super().wait(timeout)
        if self.waits > 200:
            raise AssertionError("the command kept waiting for the batch after the second signal")
        return []


def test_a_second_signal_while_the_command_stores_a_receipt_stores_it_then_stops_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal

    from kuro_wasm.cli import run

    home, guest = _home_with_the_batch_guest(tmp_path)
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps({"guest": guest, "export": "echo", "args": [n]}) + "\n" for n in range(3)))
    monkeypatch.setattr(
        "kuro_wasm.batch.driver.backend_for", lambda *a, store, **k: _SecondNeverAnswers(SharedStore(store.path))
    )
    real = run._store_or_say

    def store_or_say(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)  # the first: cancel
        os.kill(os.getpid(), signal.SIGINT)  # the second, while the command itself stores line 1's receipt
        return real(*args, **kwargs)

    monkeypatch.setattr(run, "_store_or_say", store_or_say)
    out, err = io.StringIO(), io.StringIO()
    code = main(["--home", str(home), "batch", str(path), "--json", "--chunk-size", "1"], out=out, err=err)
    assert code == 130 and "Traceback" not in err.getvalue()
    shown = [json.loads(line) for line in out.getvalue().splitlines()]
    assert shown[0]["kuro/outcome"] == "ok" and "receipt-not-stored" not in err.getvalue()  # stored, shown, then 130
    assert shown[1:] == [{"kuro/status": "unknown", "kuro/line": 2}, {"kuro/status": "not-run", "kuro/line": 3}]
