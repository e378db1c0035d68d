"""Fixtures for the gateway tests: the JS-built fixture CARs in one store, and a gateway serving it.

The gateway runs on 127.0.0.1 only, on a free port, in a background thread of the test process
(the load test starts its own in a subprocess). The kuro.fs tree below is built here with
kuro_fs itself, so paths through kuro.fs directories are served from the same store.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from gateway_helpers import FIXTURES, KURO_FS_FILE, TOKEN

from kuro_fs.car import import_car
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_fs.gateway.serve import running_gateway
from kuro_fs.gateway.server import GatewayConfig


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
