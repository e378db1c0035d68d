"""``kuro batch FILE.jsonl``: every line checked before anything runs; receipts stored; Ctrl-C keeps what finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Kuro, add_guest, crashed_run, one_error_line

from kuro_wasm.cli.batch import read_lines

pytestmark = pytest.mark.timeout(300)


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_a_key_given_twice_in_a_line_is_a_bad_line_not_the_last_value() -> None:
    lines, bad = read_lines(
        '{"guest": "g", "export": "_start", "env": {"A": "1", "A": "2"}}\n{"guest": "g", "guest": "h"}\n{"x": 1}',
        "b.jsonl",
    )
    assert [n for n, _ in lines] == [3]
    assert bad == [
        (1, "b.jsonl:1: key 'A' is given twice in one object; give each key once"),
        (2, "b.jsonl:2: key 'guest' is given twice in one object; give each key once"),
    ]


def test_bad_lines_are_each_named_and_nothing_runs(kuro: Kuro, home: Path, tmp_path: Path) -> None:
    guest = add_guest(kuro, "batch.wat")
    good = {"guest": guest, "export": "echo", "args": [1]}
    path = _write(
        tmp_path / "b.jsonl",
        [
            good,
            "{not json",
            "",
            "[1, 2]",
            {"guest": guest, "export": "echo", "timeout": 5},
            {"export": "echo"},
            {"guest": guest, "export": "echo", "fs": "no-such-fs"},
            {"guest": guest, "export": "echo", "env": {"A=B": "1"}},
            {**good, "op_id": "x"},
            {**good, "op_id": "x"},
        ],
    )
    result = kuro("batch", str(path), "--local", "1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    for number, says in [
        (2, "not JSON"),
        (4, "a line is a JSON object"),
        (5, "did you mean 'timeout_ms'"),
        (6, "missing guest"),
        (7, "no fs named 'no-such-fs'"),
        (8, "env name 'A=B'"),
        (10, "op_id 'x' is already line 9's"),
    ]:
        assert f"b.jsonl:{number}: " in result.stderr and says in result.stderr, (number, result.stderr)
    assert "b.jsonl:1:" not in result.stderr and "nothing was run" in result.stderr
    assert result.stdout == "" and not (home / "ledger.sqlite").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["missing.jsonl"], "missing.jsonl"),
        (["empty.jsonl"], "no invocation"),
        (["empty.jsonl", "--local", "0"], "--local takes 1 to 256 workers, got 0"),
        (["empty.jsonl", "--chunk-size", "0"], "--chunk-size must be at least 1"),
        (["empty.jsonl", "--local", "2", "--cluster", "tcp://127.0.0.1:1"], "not allowed with argument"),
    ],
)
def test_bad_arguments_are_one_line(kuro: Kuro, tmp_path: Path, args: list[str], says: str) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n")
    assert says in one_error_line(kuro("batch", *args))


def test_a_batch_runs_on_a_local_cluster_prints_json_in_input_order_and_replays_its_op_ids(
    kuro: Kuro, tmp_path: Path
) -> None:
    guest, trap = add_guest(kuro, "batch.wat"), add_guest(kuro, "trap.wat")
    lines: list[Any] = []
    for i in range(30):
        if i % 10 == 3:
            lines.append({"guest": trap, "export": "run"})
        elif i % 5 == 0:
            lines.append({"guest": guest, "export": "note", "args": [i], "grant": ["guest/invoke", "fs/write"]})
        else:
            lines.append({"guest": guest, "export": "echo", "args": [i], "op_id": f"echo-{i}"})
    path = _write(tmp_path / "b.jsonl", lines)
    first = kuro("batch", str(path), "--local", "2", "--json")
    assert first.returncode == 1, first.stderr  # three traps
    receipts = [json.loads(line) for line in first.stdout.splitlines()]
    assert len(receipts) == 30
    for line, value in zip(lines, receipts, strict=True):
        assert value["kuro/guest"] == line["guest"] and value["kuro/args"] == line.get("args", [])
        assert value["kuro/exit-code"] == (134 if line["guest"] == trap else 0)
    assert all("kuro/fs-root-after" in r for r in receipts[::5])
    shown = kuro("receipt", "show", "echo-1", "--json")
    assert json.loads(shown.stdout)["kuro/stdout-cid"] == receipts[1]["kuro/stdout-cid"]
    again = kuro("batch", str(path), "--local", "2")
    table = [line.split("\t") for line in again.stdout.splitlines()]
    assert sorted(int(row[0]) for row in table) == list(range(1, 31))
    assert {row[1] for row in table} == {"ok", "trap"} and "30 invocation(s), 3 did not exit 0" in again.stderr


def test_ctrl_c_cancels_the_batch_keeps_what_finished_and_lists_what_did_not_run(
    kuro: Kuro, home: Path, tmp_path: Path
) -> None:
    guest, spin = add_guest(kuro, "batch.wat"), add_guest(kuro, "spin.wat")
    lines: list[Any] = [{"guest": guest, "export": "echo", "args": [0]}]
    lines += [{"guest": spin, "export": "run", "timeout_ms": 120_000, "op_id": f"spin-{i}"} for i in range(8)]
    path = _write(tmp_path / "b.jsonl", lines)
    env = {**os.environ, "KURO_HOME": str(home)}
    cmd = [sys.executable, "-m", "kuro_wasm", "batch", str(path), "--local", "2", "--json", "--chunk-size", "1"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # line 1 is done: the cluster runs, the spinners are out
        os.killpg(proc.pid, signal.SIGINT)  # the whole process group, as a terminal's Ctrl-C
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # a hung batch must not outlive the test
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    out = [json.loads(line) for line in [first, *rest.splitlines()]]
    assert len(out) == 9 and out[0]["kuro/outcome"] == "ok"
    cancelled = [v for v in out[1:] if v.get("kuro/outcome") == "cancelled"]
    not_run = [v for v in out[1:] if v.get("kuro/status") == "not-run"]
    assert len(cancelled) + len(not_run) == 8 and "did not run" in err and "Traceback" not in err
    listed = kuro("ledger", "list", "--json")
    rows = {row["kuro/op-id"]: row for row in map(json.loads, listed.stdout.splitlines())}
    assert len(rows) == len(cancelled)  # the ones that never ran were released
    assert all(row["kuro/outcome"] == "cancelled" and row["kuro/status"] == "done" for row in rows.values())


def test_without_dask_a_local_batch_runs_on_the_worker_process_pool(kuro: Kuro, tmp_path: Path) -> None:
    hidden = tmp_path / "no-dask"
    hidden.mkdir()
    # importlib.util.find_spec answers None for a module that sys.modules holds as None, and import fails
    (hidden / "sitecustomize.py").write_text(
        'import sys\nsys.modules["distributed"] = None\nsys.modules["dask"] = None\n'
    )
    guest, trap = add_guest(kuro, "batch.wat"), add_guest(kuro, "trap.wat")
    lines: list[Any] = [{"guest": guest, "export": "echo", "args": [i]} for i in range(12)]
    lines[4] = {"guest": trap, "export": "run"}
    path = _write(tmp_path / "b.jsonl", lines)
    result = kuro("batch", str(path), "--local", "2", "--json", env={"PYTHONPATH": str(hidden)})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr  # one trap
    receipts = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["kuro/exit-code"] for r in receipts] == [134 if i == 4 else 0 for i in range(12)]
    assert {r["kuro/isolation"] for r in receipts} == {"process"}  # not a Dask worker: the hardened pool
    assert all(isinstance(r["kuro/worker"]["pid"], int) for r in receipts)


def test_batch_from_a_closed_stdin_is_one_line_and_exit_2(home: Path, tmp_path: Path) -> None:
    env = {**os.environ, "KURO_HOME": str(home)}
    result = subprocess.run(
        ["sh", "-c", 'exec "$0" -m kuro_wasm batch - <&-', sys.executable],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "standard input is closed" in one_error_line(result) and "internal error" not in result.stderr


def test_batch_from_a_stdin_that_is_not_utf8_is_refused_as_a_file_is(kuro: Kuro, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kuro_wasm", "batch", "-"],
        input=b'{"guest": "\xff"}\n', capture_output=True, env={**os.environ, "KURO_HOME": str(tmp_path)},
        cwd=tmp_path, timeout=120,
    )  # fmt: skip
    err = result.stderr.decode()
    assert result.returncode == 2 and "<stdin>: not UTF-8 text (byte 11)" in err and "Traceback" not in err, err


def test_a_line_answered_unknown_names_no_receipt_and_stores_none(kuro: Kuro, home: Path, tmp_path: Path) -> None:
    # the driver was killed while the line ran: a rerun answers `unknown` from the ledger — not a receipt
    spin = add_guest(kuro, "spin.wat")
    path = _write(tmp_path / "b.jsonl", [{"guest": spin, "export": "run", "timeout_ms": 60000, "op_id": "crashed"}])
    crashed_run(home, tmp_path, ["batch", str(path), "--local", "1"], "crashed")
    before = {p.name for p in (home / "blocks").rglob("*") if p.is_file()}
    again = kuro("batch", str(path), "--local", "1")
    assert again.returncode == 1, again.stderr
    assert again.stdout.splitlines() == ["1\tunknown\t-\t-"]
    assert "receipt-not-stored" not in again.stderr
    assert {p.name for p in (home / "blocks").rglob("*") if p.is_file()} == before
