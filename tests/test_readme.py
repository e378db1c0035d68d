"""The README is a contract: exactly two Quickstart commands (CI runs the second verbatim), a library example
that runs, and Performance tables written from one full bench run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return [line.strip() for block in blocks for line in block.strip().splitlines() if line.strip()]


def test_the_quickstart_has_exactly_two_commands() -> None:
    commands = _quickstart_commands()
    assert len(commands) == 2, commands


def test_the_first_command_runs_the_demo_on_the_embedded_home() -> None:
    assert _quickstart_commands()[0].endswith("kuro demo")


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert _quickstart_commands()[1] in ci_lines


def test_ci_is_strict_bash() -> None:
    assert "set -euo pipefail" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_library_example_in_the_readme_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    monkeypatch.setenv("KURO_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(ROOT)
    code = code.replace('"/tmp/kuro-blocks"', repr(str(tmp_path / "blocks")))
    lines = code.rstrip().splitlines()
    namespace: dict[str, object] = {}
    exec("\n".join([*lines[:-1], f"result = ({lines[-1]})"]), namespace)
    exit_code, outcome, isolation, stdout_cid, reads = namespace["result"]  # type: ignore[misc]
    assert (exit_code, outcome, isolation) == (0, "ok", "wasmtime")
    assert stdout_cid == "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq"  # raw CID of b"hello"
    assert reads == [stdout_cid]


def test_the_performance_tables_are_one_full_bench_run_written_by_readme_perf() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    begin, end = text.index("<!-- bench:begin -->"), text.index("<!-- bench:end -->")
    block = text[begin:end]
    assert "Figures from one run: `.venv/bin/python tools/bench.py`" in block  # readme_perf's head, not typed by hand
    assert "QUICK" not in block  # smoke sizes are never quoted
    assert block.count("| figure | kuro | anchor (same run) | ratio | goal | note |") >= 10  # every section's table
