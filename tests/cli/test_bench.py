"""``tools/bench.py --quick`` runs end to end, so the benchmark cannot rot (no figure is asserted)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
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
    for section in (
        "warm invocation", "import", "read", "fs_read", "overlay", "infinite loop", "invocations/s", "WASI fd_write",
        "WASI read", "WASI hello-world", "disk store", "import_car", "peak memory",
    ):  # fmt: skip
        assert section in figures, section
    for row in data["rows"]:
        if row["anchor_value"] is None:
            assert row["note"].startswith("not available: "), row  # said plainly, never a made-up number
            assert row["ratio"] is None
        else:
            assert row["value"] is not None and row["ratio"] is not None
            assert abs(row["ratio"] - row["value"] / row["anchor_value"]) < 1e-9
        assert row["figure"] in result.stdout
    assert len([row for row in data["rows"] if "LocalCluster(2)" in row["figure"]]) == 3  # the batch section
    rates = [row for row in data["rows"] if "invocations/s" in row["figure"]]
    assert len(rates) == 2
    assert all(row["extra"]["threads"] == os.cpu_count() and "all cores" in row["figure"] for row in rates)
    bench, readme_perf = _bench_module(), _tool("readme_perf")
    assert [s["section"] for s in data["sections"]] == list(bench.SECTIONS)  # each section, its load and time
    assert {row["section"] for row in data["rows"]} == set(bench.SECTIONS)
    page = readme_perf.replace_between(f"intro\n{readme_perf.BEGIN}\nold\n{readme_perf.END}\nrest\n", "")
    assert page == f"intro\n{readme_perf.BEGIN}\n{readme_perf.END}\nrest\n"
    text = readme_perf.render(data, "tools/bench.py --quick")
    assert "QUICK (smoke sizes)" in text and all(row["figure"] in text for row in data["rows"])
    assert all(f"`--only {name}`" in text for name in bench.SECTIONS)


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"kuro_tool_{name}", ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_tables_goal_verdicts_read_every_goal_form() -> None:
    verdict = _tool("readme_perf").verdict
    row = {"ratio": 1.2, "value": 120.0, "unit": "µs", "anchor_value": 100.0}
    assert [verdict({**row, "goal": g}) for g in ("≤ 1.5×", "≤ 1.1×", "≤ +50 µs", "≤ +10 µs", "≤ 1 ms", "≈ 1×")] == [
        "✓", "✗", "✓", "✗", "✓", "",
    ]  # fmt: skip
    rate = {"ratio": 0.8, "value": 20_393.0, "unit": "/s", "anchor_value": 25_000.0}
    assert verdict({**rate, "goal": "≥ 20,000/s"}) == "✓" and verdict({**rate, "goal": "≥ 10,000/s, ≥ 1×"}) == "✗"
    assert verdict({"ratio": None, "value": None, "unit": "s", "anchor_value": None, "goal": "≤ 3 s"}) == ""


def _bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kuro_bench_under_test", ROOT / "tools" / "bench.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.get(spec.name)
    if module is None:  # dataclasses look the module up by name while the class is built
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


def test_an_anchor_that_cannot_run_is_said_plainly_never_given_a_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = _bench_module()
    monkeypatch.setattr(bench.shutil, "which", lambda _name: None)
    row = bench._bench_js_import(tmp_path / "x.bin", 1.5, "1 MiB", "bafy")
    assert (row.anchor_value, row.ratio, row.note) == (None, None, "not available: node is not installed")
    assert row.value == 1.5  # our own figure is still reported
    monkeypatch.setitem(sys.modules, "extism", None)  # `import extism` now raises ImportError
    rows = bench._bench_extism(10.0, 1, {})
    assert [(r.anchor_value, r.ratio) for r in rows] == [(None, None)]
    assert rows[0].note.startswith("not available: extism not importable")


def test_an_anchor_of_zero_gives_no_ratio_and_says_why() -> None:
    row = _bench_module()._row("f", 1.0, "ms", "a", 0.0, note="kept?")
    assert (row.ratio, row.anchor_value) == (None, None)
    assert row.note == "not available: the anchor measured 0 (timer resolution)"


def test_the_floor_script_runs() -> None:
    got = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_floor.py"), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert got.returncode == 0, got.stderr
    assert got.stdout.count("µs a call") == 4
