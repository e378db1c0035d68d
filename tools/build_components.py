#!/usr/bin/env python3
"""Build the component guests from their sources: WAT core modules + WIT (wasm-tools), a Python guest (componentize-py).

    python tools/build_components.py OUT_DIR            # every guest under guests/components/
    python tools/build_components.py OUT_DIR typed      # only these

Sources: ``guests/components/<name>.wat`` (its world is named on its first line,
``(world kuro:fixtures/<world>)``, from ``guests/components/wit/``), and
the Python guests ``guests/components/py-*/app.py`` (world ``kuro:host/command``):
``py-tool`` built with ``componentize-py --stub-wasi`` (WASI imports become
trapping stubs, so the component imports only the kuro world), ``py-wasi``
without it (it imports WASI 0.2, which this host provides virtually). The world package ``wit/host.wit`` is
the one every guest is built against. Each output ``OUT_DIR/<name>.wasm`` has a
stamp beside it (SHA-256 of every input and the tool's version), so an
unchanged guest is not rebuilt — the Python guest takes ~15 s to build.

Built, not committed: the componentize-py output embeds a random seed, so a
rebuild is never byte-identical and a rebuild-and-compare check could not hold.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "guests" / "components"
WORLD = ROOT / "wit"
BIN = Path(sys.executable).parent
#: Python guests: name → built with ``--stub-wasi`` (WASI imports become trapping stubs inside the component).
PYTHON = {"py-tool": True, "py-wasi": False}
_WORLD_LINE = re.compile(r"\(world kuro:fixtures/([a-z][a-z0-9-]*)\)")


def _tool(name: str) -> str:
    found = BIN / name
    return str(found) if found.exists() else (shutil.which(name) or name)


def _version(tool: str) -> str:
    return subprocess.run([_tool(tool), "--version"], capture_output=True, text=True, check=True).stdout.strip()


def guests() -> list[str]:
    """Every buildable guest name: the WAT guests, then ``py-tool``."""
    return [*sorted(p.stem for p in SOURCES.glob("*.wat")), *PYTHON]


def _wit_dir(tmp: Path) -> Path:
    """The fixture worlds with the kuro world (and the WASI stand-in) as dependencies."""
    out = tmp / "wit"
    shutil.copytree(SOURCES / "wit", out)
    (out / "deps" / "kuro-host").mkdir(parents=True, exist_ok=True)
    shutil.copy(WORLD / "host.wit", out / "deps" / "kuro-host" / "host.wit")
    return out


def _inputs(name: str) -> list[Path]:
    wit = sorted([*SOURCES.glob("wit/**/*.wit"), *WORLD.glob("*.wit")])
    if name in PYTHON:
        return [*sorted((SOURCES / name).glob("*.py")), *wit]
    return [SOURCES / f"{name}.wat", *wit]


def _stamp(name: str) -> str:
    digest = hashlib.sha256()
    digest.update(_version("componentize-py" if name in PYTHON else "wasm-tools").encode())
    for path in _inputs(name):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _build_wat(name: str, out: Path, tmp: Path) -> None:
    source = SOURCES / f"{name}.wat"
    found = _WORLD_LINE.search(source.read_text(encoding="utf-8").splitlines()[0])
    if found is None:
        raise SystemExit(f"{source}: first line must name its world: (world kuro:fixtures/<world>)")
    core = tmp / f"{name}.core.wasm"
    wasm_tools = _tool("wasm-tools")
    subprocess.run(
        [wasm_tools, "component", "embed", str(_wit_dir(tmp)), str(source), "-w", found.group(1), "-o", str(core)],
        check=True,
    )
    subprocess.run([wasm_tools, "component", "new", str(core), "-o", str(out)], check=True)


def _build_py(name: str, out: Path, tmp: Path) -> None:
    app = tmp / name
    shutil.copytree(SOURCES / name, app)
    stub = ["--stub-wasi"] if PYTHON[name] else []
    subprocess.run(
        [_tool("componentize-py"), "-d", str(WORLD), "-w", "command", "componentize", *stub, "app", "-o", str(out)],
        check=True,
        cwd=app,
        stdout=subprocess.DEVNULL,
    )


def build(out_dir: Path, names: list[str] | None = None) -> dict[str, Path]:
    """Build ``names`` (default: every guest) into ``out_dir``; return name → built ``.wasm`` path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    built = {}
    for name in names or guests():
        target, stamp_path = out_dir / f"{name}.wasm", out_dir / f"{name}.stamp"
        stamp = _stamp(name)
        if not (target.exists() and stamp_path.exists() and stamp_path.read_text() == stamp):
            with tempfile.TemporaryDirectory() as tmp:
                part = Path(tmp) / f"{name}.wasm"
                if name in PYTHON:
                    _build_py(name, part, Path(tmp))
                else:
                    _build_wat(name, part, Path(tmp))
                shutil.move(str(part), target)
            stamp_path.write_text(stamp)
        built[name] = target
    return built


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for name, path in build(Path(argv[0]), argv[1:] or None).items():
        print(f"{name}: {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
