"""The import graph is part of the design: these tests keep it honest.

- ``kuro_fs`` never imports ``kuro_wasm`` (the filesystem is usable without the host).
- ``kuro_wasm`` is five layers, and imports run one way:
  ``cli → batch → ledger → host → model → kuro_fs`` (plus the leaf ``kuro_wasm.errors``, which
  every layer may use and which imports nothing of ``kuro_wasm``). Lazy imports inside
  functions count too: a lazy import is still an arrow.
- No import circle among ``kuro_wasm`` modules.
- The model layer (decisions) imports no effect machinery: no wasmtime, sqlite3,
  threading, os, time, random, subprocess, pathlib. Effects live in the thin host,
  ledger and CLI modules.
- The CLI's shared context imports no command module.
- Importing ``kuro_wasm.batch`` (what the CLI and a library caller load) imports no Dask:
  Dask is an optional extra, loaded only by the backend that uses it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kuro_wasm"

#: Layer of each subpackage: a module may import its own layer or a lower one, never a higher one.
LAYERS = {"model": 0, "host": 1, "ledger": 2, "batch": 3, "cli": 4}

#: Pure modules outside kuro_wasm/model/ (every module under model/ is pure by rule).
OTHER_PURE_MODULES = [
    "kuro_fs/cid.py",
    "kuro_fs/dagcbor.py",
    "kuro_fs/dagpb.py",
    "kuro_fs/unixfs.py",
    "kuro_fs/fileread.py",
    "kuro_fs/paths.py",
    "kuro_fs/fs.py",
    "kuro_fs/fsdir.py",
    "kuro_fs/varint.py",
    "kuro_fs/gateway/request.py",
    "kuro_fs/gateway/dag.py",
    "kuro_fs/extents.py",
    "kuro_fs/leafread.py",
    "kuro_fs/overlay.py",
    "kuro_fs/overlay_tree.py",
    "kuro_wasm/errors.py",
    "kuro_wasm/ledger/answer.py",
]
EFFECT_IMPORTS = {"wasmtime", "sqlite3", "threading", "os", "time", "random", "subprocess", "pathlib", "socket"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in the file (top level or inside a function), absolute names."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from kuro_wasm.cli import fs` is an arrow to the submodule kuro_wasm.cli.fs; a name
            # that is not a submodule is an arrow to the module (or package __init__) itself
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                is_module = (ROOT / Path(*candidate.split("."))).with_suffix(".py").exists()
                found.add(candidate if is_module else node.module)
    return found


def _roots(path: Path) -> set[str]:
    return {name.split(".")[0] for name in _imports(path)}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) >= 2 and parts[0] == "kuro_wasm" and parts[1] in LAYERS:
        return LAYERS[parts[1]]
    if module == "kuro_wasm.errors":
        return -1
    return None


KURO_WASM_FILES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_kuro_wasm_is_five_subpackages_and_a_shared_leaf() -> None:
    packages = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert packages == sorted(LAYERS)
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "errors.py"]


def test_kuro_fs_never_imports_kuro_wasm() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "kuro_fs").rglob("*.py") if "kuro_wasm" in _roots(p)]
    assert offenders == []


def test_kuro_fs_never_imports_the_wasm_runtime_or_sqlite() -> None:
    offenders = [
        str(p.relative_to(ROOT)) for p in (ROOT / "kuro_fs").rglob("*.py") if _roots(p) & {"wasmtime", "sqlite3"}
    ]
    assert offenders == []


@pytest.mark.parametrize("path", KURO_WASM_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_run_one_way(path: Path) -> None:
    here = _layer(_module_name(path))
    if here is None:  # kuro_wasm/__init__.py and __main__.py sit above every layer
        return
    upward = sorted(m for m in _imports(path) if (_layer(m) or -1) > here)
    assert upward == [], f"{_module_name(path)} (layer {here}) imports a higher layer"


def test_errors_is_a_leaf() -> None:
    assert sorted(m for m in _imports(PACKAGE / "errors.py") if m.startswith("kuro_wasm")) == []


def test_no_import_circle() -> None:
    graph = {
        _module_name(p): {m for m in _imports(p) if m.startswith("kuro_wasm.") and m != _module_name(p)}
        for p in KURO_WASM_FILES
    }
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt) :], nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    # a package __init__ that re-exports its own submodule is not a circle unless the submodule imports it back
    assert cycles == []


def test_cli_context_imports_no_command_module() -> None:
    imported = {m for m in _imports(PACKAGE / "cli" / "context.py") if m.startswith("kuro_wasm.cli")}
    assert imported == set()


MODEL_FILES = sorted(str(p.relative_to(ROOT)) for p in (PACKAGE / "model").glob("*.py"))


@pytest.mark.parametrize("module", MODEL_FILES + OTHER_PURE_MODULES)
def test_pure_modules_import_no_effect_machinery(module: str) -> None:
    path = ROOT / module
    assert path.exists(), f"{module} is listed as a pure module but does not exist"
    assert sorted(_roots(path) & EFFECT_IMPORTS) == []


def test_the_batch_layer_loads_dask_only_in_its_dask_backend() -> None:
    for path in sorted((PACKAGE / "batch").glob("*.py")):
        roots = _roots(path)
        if path.name == "cluster.py":
            assert "distributed" in roots
            continue
        assert not roots & {"dask", "distributed"}, path.name
