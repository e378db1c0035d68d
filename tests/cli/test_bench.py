"""``tools/bench.py --quick`` runs end to end, so the benchmark cannot rot (no figure is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_helpers import ROOT


def test_the_quick_bench_prints_a_table_and_writes_every_figure_beside_its_anchor(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("machine: ")
    data = json.loads(out.read_text())
    assert {"nproc", "cpu", "python", "wasmtime"} <= set(data["machine"])
    assert data["quick"] is True
    figures = " ".join(row["figure"] for row in data["rows"])
    for section in ("warm invocation", "import", "read", "fs_read", "infinite loop", "invocations/s"):
        assert section in figures, section
    for row in data["rows"]:
        if row["anchor_value"] is None:
            assert row["note"].startswith("not available: "), row  # said plainly, never a made-up number
            assert row["ratio"] is None
        else:
            assert row["value"] is not None and row["ratio"] is not None
            assert abs(row["ratio"] - row["value"] / row["anchor_value"]) < 1e-9
        assert row["figure"] in result.stdout
