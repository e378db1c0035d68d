"""Running the JavaScript reference scripts in tools/ (one JSON request on stdin, one JSON line out)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def why_skip(package: str) -> str | None:
    """Why the node reference cannot run here (None if it can)."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not (TOOLS / "node_modules" / package).is_dir():
        return "tools/node_modules is missing: run `npm ci --prefix tools`"
    return None


def run_node(script: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``results`` of ``tools/<script>`` for ``{"cases": cases}``."""
    proc = subprocess.run(
        ["node", str(TOOLS / script)],
        input=json.dumps({"cases": cases}).encode(),
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    results: list[dict[str, Any]] = json.loads(proc.stdout)["results"]
    return results
