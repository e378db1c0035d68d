"""Clients nobody here wrote: @helia/verified-fetch against the gateway, and the fixture CARs rebuilt
by the JS stack byte for byte.

verified-fetch needs node >= 22; ``tools/package.json`` depends on the ``node`` npm package, which
ships that binary (tools/node_modules/node/bin/node). Marker ``parity``: CI may not skip these.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from gateway_helpers import FIXTURES, MANIFEST, NODE22, TOOLS, node_or_skip

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.gateway.serve import running_gateway
from kuro_fs.importer import import_bytes

pytestmark = pytest.mark.parity


def _node22() -> str:
    if not NODE22.is_file() or not (TOOLS / "node_modules" / "@helia" / "verified-fetch").is_dir():
        pytest.skip("node 22 from npm missing: run `npm ci --prefix tools`")
    return str(NODE22)


def test_verified_fetch_gets_raw_blocks_and_a_multi_block_unixfs_file_byte_identical() -> None:
    node = _node22()
    store = MemoryBlockStore()
    data = bytes((i * 131 + i // 977) & 0xFF for i in range(3 * 262144 + 12345))  # four 256 KiB chunks
    file_cid = import_bytes(store, data)
    raw = store.put(b"a raw block for verified-fetch")
    with running_gateway(store) as url:
        run = subprocess.run(
            [node, str(TOOLS / "verified_fetch.mjs"), url, raw, file_cid],
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert run.returncode == 0, run.stderr
    got = {r["cid"]: r for r in json.loads(run.stdout)}
    assert got[raw] == {
        "cid": raw,
        "status": 200,
        "sha256": hashlib.sha256(b"a raw block for verified-fetch").hexdigest(),
        "length": 30,
        "error": None,
    }
    assert got[file_cid]["status"] == 200 and got[file_cid]["error"] is None
    assert (got[file_cid]["length"], got[file_cid]["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())


def test_verified_fetch_reads_real_ipfs_data_cidv0_from_the_gateway(gateway: str) -> None:
    node = _node22()
    mixed = MANIFEST["subdir-with-mixed-block-files"]
    run = subprocess.run(
        [node, str(TOOLS / "verified_fetch.mjs"), gateway, mixed["subdir/multiblock.txt"]],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    (result,) = json.loads(run.stdout)
    expected = bytes.fromhex(mixed["multiblock_bytes"])
    assert (result["status"], result["length"], result["sha256"]) == (
        200,
        len(expected),
        hashlib.sha256(expected).hexdigest(),
    )


def test_the_fixture_cars_are_what_the_js_stack_builds(tmp_path: Path) -> None:
    node = node_or_skip()
    run = subprocess.run(
        [node, str(TOOLS / "gateway_fixtures.mjs"), str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    built = sorted(p.name for p in tmp_path.iterdir())
    assert built == sorted(p.name for p in FIXTURES.iterdir())
    for name in built:
        assert (tmp_path / name).read_bytes() == (FIXTURES / name).read_bytes(), name
