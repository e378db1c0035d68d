"""What the wheel ships: every package, and the guests and fixture cases an installed ``kuro`` runs.

The wheel is built here (``pip wheel``, as a user's install would build it) and unpacked into a
directory that is the only place ``kuro_wasm`` can be imported from; ``kuro fixtures run`` there,
from a directory with no checkout around it, must find and pass the bundled cases.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_every_package_in_the_tree_is_listed_for_the_wheel() -> None:
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("kuro_fs", "kuro_wasm")
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert set(CONFIG["packages"]) == found | {"kuro_wasm.guests"}
    assert CONFIG["package-dir"] == {"kuro_wasm.guests": "guests"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the sources (a build writes build/ and *.egg-info beside them)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("kuro_fs", "kuro_wasm", "guests"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(source), "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("kuro_wasm-*.whl")
    return built


def test_the_wheel_ships_every_guest_fixture_case_and_the_schema(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {f"kuro_wasm/guests/{p.name}" for p in (ROOT / "guests").glob("*.wat")}
    wanted |= {f"kuro_wasm/guests/c/{p.name}" for p in (ROOT / "guests" / "c").glob("*.wasm")}
    wanted |= {f"kuro_wasm/guests/c/fixtures/{p.name}" for p in (ROOT / "guests" / "c" / "fixtures").glob("*.toml")}
    wanted |= {f"kuro_wasm/guests/fixtures/{p.name}" for p in (ROOT / "guests" / "fixtures").iterdir()}
    assert sorted(wanted - names) == []
    assert "kuro_wasm/py.typed" in names and "kuro_wasm/host/kinds/browser_v0.py" in names


def test_an_installed_kuro_runs_the_bundled_fixtures(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"KURO_HOME": str(tmp_path / "home"), "PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    where = subprocess.run(
        [sys.executable, "-c", "import kuro_wasm; print(kuro_wasm.__file__)"],
        capture_output=True, text=True, env=env, cwd=elsewhere, check=True,
    )  # fmt: skip
    assert where.stdout.strip() == str(site / "kuro_wasm" / "__init__.py")
    result = subprocess.run(
        [sys.executable, "-m", "kuro_wasm", "fixtures", "run"], capture_output=True, text=True, env=env, cwd=elsewhere
    )
    assert result.returncode == 0, result.stdout + result.stderr
    cases = len(list((ROOT / "guests" / "fixtures").glob("*.toml")))
    assert f"{cases} case(s) in {site / 'kuro_wasm' / 'guests' / 'fixtures'}: " in result.stderr
    assert " 0 fail, 0 invalid" in result.stderr
