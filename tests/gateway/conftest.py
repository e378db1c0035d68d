"""Fixtures for the gateway tests: the JS-built fixture CARs in one store, and a gateway serving it.

The gateway runs on 127.0.0.1 only, on a free port, in a background thread of the test process
(the load test starts its own in a subprocess). The kuro.fs tree below is built here with
kuro_fs itself, so paths through kuro.fs directories are served from the same store.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kuro_fs.car import import_car
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_fs.gateway.serve import running_gateway
from kuro_fs.gateway.server import GatewayConfig

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


@pytest.fixture(scope="session")
def fixture_store(tmp_path_factory: pytest.TempPathFactory) -> FileBlockStore:
    store = FileBlockStore(tmp_path_factory.mktemp("gateway") / "blocks")
    for car in sorted(FIXTURES.glob("*.car")):
        import_car(store, car)
    return store


@pytest.fixture(scope="session")
def kuro_fs_tree(fixture_store: FileBlockStore) -> Fs:
    fs = Fs.empty(fixture_store)
    for path, data in [("docs/readme.txt", b"kuro.fs over a gateway\n"), ("docs/big/file.bin", KURO_FS_FILE)]:
        fs = fs.write(path, data).fs
    return fs


@pytest.fixture(scope="session")
def gateway(fixture_store: FileBlockStore, kuro_fs_tree: Fs) -> Iterator[str]:
    with running_gateway(fixture_store, config=GatewayConfig(token=TOKEN, max_block_bytes=1 << 20)) as url:
        yield url


@pytest.fixture(scope="session")
def http(gateway: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway, timeout=30) as client:
        yield client
