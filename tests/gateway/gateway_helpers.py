"""Shared data for the gateway tests: fixture paths, the fixture manifest, the write token."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "gateway"
TOOLS = ROOT / "tools"
NODE22 = TOOLS / "node_modules" / "node" / "bin" / "node"
TOKEN = "test-write-token"
MANIFEST: dict[str, dict[str, Any]] = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
KURO_FS_FILE = bytes((i * 31 + i // 4096) & 0xFF for i in range(700_000))


def node_or_skip() -> str:
    """The node binary for @ipld/car scripts, or skip (conftest turns a parity skip into a CI failure)."""
    node = shutil.which("node")
    if node is None or not (TOOLS / "node_modules" / "@ipld" / "car").is_dir():
        pytest.skip("node or tools/node_modules missing: run `npm ci --prefix tools`")
    return node
