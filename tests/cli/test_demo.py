"""``kuro demo``: the README's first command works on a fresh home, and its embedded guests stay the repo's."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import GUESTS, ROOT, Kuro

from kuro_wasm.cli.demo import steps
from kuro_wasm.cli.demo_guests import GUESTS as EMBEDDED


@pytest.mark.parametrize("name", sorted(EMBEDDED))
def test_each_embedded_guest_is_identical_to_its_source_in_guests(name: str) -> None:
    stale = "kuro_wasm/cli/demo_guests.py is stale: run python tools/embed_guests.py"
    source = (GUESTS / name).read_bytes()
    assert EMBEDDED[name] == (source if name.endswith(".wasm") else source.decode("utf-8")), stale


def test_the_embedded_module_is_exactly_what_the_generator_writes() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "embed_guests.py"), "--check"], capture_output=True)
    assert result.returncode == 0, result.stderr


def test_every_step_names_an_embedded_guest_or_is_an_argv() -> None:
    assert all(step.guest in EMBEDDED or (step.guest == "" and step.argv) for step in steps())


def test_the_demo_runs_on_a_fresh_home_and_every_receipt_is_as_expected(kuro: Kuro, home: Path) -> None:
    result = kuro("demo")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"{len(steps())}/{len(steps())} receipts as expected" in out
    assert "NOT as expected" not in out
    for fact in (
        "hello, kuro",
        "ok · exit code 0",
        "refused fs_write",
        "      4      15      88 total",
        "timeout · exit code 124",
        "argv-not-a-process",
    ):
        assert fact in out, fact
    assert (home / "blocks").is_dir() and (home / "refs" / "demo.ref").is_file()


def test_the_demo_receipts_can_be_shown_again_by_cid(kuro: Kuro) -> None:
    out = kuro("demo").stdout
    cids = re.findall(r"receipt (bafyrei[a-z2-7]+)", out)
    assert len(cids) == len(steps())
    for cid in cids:
        assert kuro("receipt", "show", cid).returncode == 0


def test_the_demo_can_run_again_on_the_same_home(kuro: Kuro) -> None:
    assert kuro("demo").returncode == 0
    again = kuro("demo")
    assert again.returncode == 0, again.stdout
    assert kuro("fs", "log", "-n", "demo").stdout.count("\n") == 1  # the same tree is not logged twice


def test_the_demo_json_mode_prints_only_receipts_one_json_object_per_line(kuro: Kuro) -> None:
    result = kuro("demo", "--json")
    assert result.returncode == 0, result.stderr
    receipts = [json.loads(line) for line in result.stdout.splitlines()]  # e.g. `kuro demo --json | jq`
    assert [r.get("kuro/outcome", r.get("kuro/reason")) for r in receipts] == [
        "ok", "ok", "exit", "ok", "timeout", "argv-not-a-process"
    ]  # fmt: skip
    assert f"{len(steps())}/{len(steps())} receipts as expected" in result.stderr


def test_the_installed_kuro_script_runs(home: Path) -> None:
    script = Path(sys.executable).parent / "kuro"
    found = str(script) if script.exists() else shutil.which("kuro")
    if found is None:
        pytest.fail("no `kuro` console script installed; pip install the package (pyproject [project.scripts])")
    result = subprocess.run([found, "--help"], capture_output=True, text=True, env={"KURO_HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert "kuro demo" in result.stdout


def test_the_demo_needs_nothing_but_the_installed_packages(tmp_path: Path, home: Path) -> None:
    """What a non-editable install ships (the two packages' modules) is enough: no guests/ dir, no checkout."""
    site = tmp_path / "site"
    for package in ("kuro_fs", "kuro_wasm"):
        shutil.copytree(GUESTS.parent / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"KURO_HOME": str(home), "PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    where = subprocess.run(
        [sys.executable, "-c", "import kuro_wasm.cli.demo as d; print(d.__file__)"],
        capture_output=True, text=True, env=env, cwd=elsewhere, check=True,
    )  # fmt: skip
    assert where.stdout.strip() == str(site / "kuro_wasm" / "cli" / "demo.py")
    result = subprocess.run(
        [sys.executable, "-m", "kuro_wasm", "demo"], capture_output=True, text=True, env=env, cwd=elsewhere
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_without_kuro_home_the_demo_creates_and_uses_dot_kuro_in_the_home_directory(tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    user_home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("KURO_HOME", "KURO_DEBUG")}
    env["HOME"] = str(user_home)
    result = subprocess.run(
        [sys.executable, "-m", "kuro_wasm", "demo"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"home {user_home / '.kuro'}" in result.stdout
    assert (user_home / ".kuro" / "refs" / "demo.ref").is_file()
