"""The progress bar appears on a terminal and nowhere else (driven through a real pty)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from cli_helpers import Kuro, kuro_runner


def _run_on_a_pty(args: list[str], home: Path, cwd: Path) -> tuple[int, bytes]:
    """Run the CLI with stderr (and stdin/stdout) on a pseudo-terminal; return (status, everything it printed)."""
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "kuro_wasm", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "KURO_HOME": str(home)},
        cwd=cwd,
        close_fds=True,
    ) as proc:
        os.close(follower)
        chunks: list[bytes] = []
        while True:
            ready, _, _ = select.select([leader], [], [], 60)
            if not ready:
                proc.kill()
                break
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        status = proc.wait(timeout=60)
    os.close(leader)
    return status, b"".join(chunks)


def _big(tmp_path: Path) -> Path:
    f = tmp_path / "big.bin"
    f.write_bytes(os.urandom(3 << 20))
    return f


def test_an_import_on_a_terminal_draws_a_bar_that_ends_at_100_percent(home: Path, tmp_path: Path) -> None:
    status, output = _run_on_a_pty(["fs", "put", str(_big(tmp_path))], home, tmp_path)
    assert status == 0, output
    assert b"\r\x1b[Kimport big.bin [" in output
    assert b"100% 3.0 MiB/3.0 MiB" in output


def test_the_same_import_piped_prints_no_bar_at_all(kuro: Kuro, tmp_path: Path) -> None:
    result = kuro("fs", "put", str(_big(tmp_path)))
    assert result.returncode == 0
    assert "\r" not in result.stderr and "%" not in result.stderr
    assert result.stderr.startswith("fs main → ")


def test_a_car_export_on_a_terminal_counts_bytes_without_a_total(home: Path, tmp_path: Path) -> None:
    assert _run_on_a_pty(["fs", "put", str(_big(tmp_path))], home, tmp_path)[0] == 0
    status, output = _run_on_a_pty(["car", "export", str(tmp_path / "x.car")], home, tmp_path)
    assert status == 0, output
    assert b"export x.car 3.0 MiB" in output


def test_a_car_import_on_a_terminal_draws_a_bar_against_the_file_size(home: Path, tmp_path: Path) -> None:
    assert _run_on_a_pty(["fs", "put", str(_big(tmp_path))], home, tmp_path)[0] == 0
    assert _run_on_a_pty(["car", "export", str(tmp_path / "x.car")], home, tmp_path)[0] == 0
    other = tmp_path / "other-home"
    status, output = _run_on_a_pty(["car", "import", str(tmp_path / "x.car")], other, tmp_path)
    assert status == 0, output
    assert b"\r\x1b[Kimport x.car [" in output and b"100% 3.0 MiB/3.0 MiB" in output


def test_the_same_car_import_piped_prints_no_bar(kuro: Kuro, tmp_path: Path) -> None:
    assert kuro("fs", "put", str(_big(tmp_path))).returncode == 0
    assert kuro("car", "export", str(tmp_path / "x.car")).returncode == 0
    result = kuro("car", "import", str(tmp_path / "x.car"), env={"KURO_HOME": str(tmp_path / "other-home")})
    assert result.returncode == 0 and result.stderr == ""


def test_receipt_show_colours_guest_output_on_a_terminal_by_default(home: Path, tmp_path: Path) -> None:
    wat = tmp_path / "red.wat"
    wat.write_text(
        '(module (import "kuro" "write" (func $w (param i32 i32 i32) (result i32)))\n'
        '  (memory (export "memory") 1) (data (i32.const 0) "\\1b[31mred\\1b[0m\\n")\n'
        '  (func (export "run") (result i32)\n'
        "    (drop (call $w (i32.const 1) (i32.const 0) (i32.const 13))) (i32.const 0)))\n"
    )
    kuro = kuro_runner(home, tmp_path)
    cid = kuro("guest", "add", str(wat)).stdout.split()[0]
    stored = kuro("run", cid, "run").stderr.split("receipt ", 1)[1].split()[0]
    status, output = _run_on_a_pty(["receipt", "show", stored], home, tmp_path)
    assert status == 0, output
    assert b"\x1b[0;31mred\x1b[0m" in output  # re-coloured from the ANSI reader's spans
    assert b"\x1b" not in kuro("receipt", "show", stored).stdout.encode()  # piped: plain text


def test_a_batch_on_a_terminal_ends_its_progress_line_before_the_summary_and_exits(home: Path, tmp_path: Path) -> None:
    import json

    kuro = kuro_runner(home, tmp_path)
    guest = kuro("guest", "add", str(Path(__file__).resolve().parents[2] / "guests" / "batch.wat")).stdout.split()[0]
    lines = tmp_path / "b.jsonl"
    lines.write_text("".join(json.dumps({"guest": guest, "export": "echo", "args": [i]}) + "\n" for i in range(3)))
    status, output = _run_on_a_pty(["batch", str(lines), "--local", "1"], home, tmp_path)
    assert status == 0, output
    last_draw = output.rindex(b"\r\x1b[K")
    summary = output.index(b"kuro: batch: 3 invocation(s), 0 did not exit 0")
    assert b"batch 3/3 done" in output[last_draw:summary]  # the final state, drawn before the summary
    assert output.endswith(b"0 did not exit 0\r\n")  # and nothing after it: the ticker stopped first
