"""The import graph is part of the design: these tests keep it honest.

- ``kuro_fs`` never imports ``kuro_wasm`` (the filesystem is usable without the host).
- Pure modules (decisions) import no effect machinery: no wasmtime, sqlite3, threading,
  os, time, random, subprocess, pathlib. Effects live in the thin host modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PURE_MODULES = [
    "kuro_fs/cid.py",
    "kuro_fs/dagcbor.py",
    "kuro_fs/dagpb.py",
    "kuro_fs/unixfs.py",
    "kuro_fs/fileread.py",
    "kuro_fs/paths.py",
    "kuro_fs/fs.py",
    "kuro_fs/fsdir.py",
    "kuro_wasm/model.py",
    "kuro_wasm/receipt.py",
    "kuro_wasm/stream.py",
    "kuro_wasm/checkpoint.py",
    "kuro_wasm/ansi.py",
    "kuro_wasm/abi.py",
    "kuro_wasm/ledger_answer.py",
    "kuro_wasm/operation.py",
    "kuro_wasm/outcome.py",
    "kuro_wasm/redact.py",
    "kuro_wasm/summary.py",
]
EFFECT_IMPORTS = {"wasmtime", "sqlite3", "threading", "os", "time", "random", "subprocess", "pathlib", "socket"}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_kuro_fs_never_imports_kuro_wasm() -> None:
    offenders = [
        str(p.relative_to(ROOT)) for p in (ROOT / "kuro_fs").rglob("*.py") if "kuro_wasm" in _imported_roots(p)
    ]
    assert offenders == []


def test_kuro_fs_never_imports_the_wasm_runtime_or_sqlite() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "kuro_fs").rglob("*.py")
        if _imported_roots(p) & {"wasmtime", "sqlite3"}
    ]
    assert offenders == []


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_modules_import_no_effect_machinery(module: str) -> None:
    path = ROOT / module
    assert path.exists(), f"{module} is listed as a pure module but does not exist"
    assert sorted(_imported_roots(path) & EFFECT_IMPORTS) == []
