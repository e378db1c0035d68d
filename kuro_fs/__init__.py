"""kuro_fs: content addressing, block stores and a filesystem whose substrate is a CID DAG.

This module only re-exports; each concept lives in the module named after it.
``kuro_fs`` never imports ``kuro_wasm``. Names load on first use (PEP 562), so importing one
submodule (``kuro_fs.home``, say) does not load them all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kuro_fs.blocks import BlockStore, MemoryBlockStore, StoreBatch, open_batch, publish_blocks
    from kuro_fs.car import export_car, import_car
    from kuro_fs.cid import ParsedCID, cid_for, parse_cid, raw_cid, verify
    from kuro_fs.errors import (
        BlockStoreError,
        CarError,
        CorruptBlock,
        DagCborError,
        DagPbError,
        GatewayError,
        GatewayLied,
        GatewayRefused,
        GatewayTimeout,
        GatewayUnreachable,
        InvalidCID,
        InvalidGatewayURL,
        KuroFsError,
        MissingBlock,
        ShardingNotSupported,
    )
    from kuro_fs.fileread import read_bytes, read_file, read_into, read_range
    from kuro_fs.filestore import FileBlockStore, default_store
    from kuro_fs.fs import DENIAL_REASONS, Fs, FsLog, FsResult, to_unixfs_dir
    from kuro_fs.gateway.client import GatewayBlockStore
    from kuro_fs.importer import file_cid, import_bytes, import_path
    from kuro_fs.overlay import Overlay

_WHERE: dict[str, str] = {
    "BlockStore": "kuro_fs.blocks",
    "MemoryBlockStore": "kuro_fs.blocks",
    "StoreBatch": "kuro_fs.blocks",
    "open_batch": "kuro_fs.blocks",
    "publish_blocks": "kuro_fs.blocks",
    "export_car": "kuro_fs.car",
    "import_car": "kuro_fs.car",
    "ParsedCID": "kuro_fs.cid",
    "cid_for": "kuro_fs.cid",
    "parse_cid": "kuro_fs.cid",
    "raw_cid": "kuro_fs.cid",
    "verify": "kuro_fs.cid",
    "BlockStoreError": "kuro_fs.errors",
    "CarError": "kuro_fs.errors",
    "CorruptBlock": "kuro_fs.errors",
    "DagCborError": "kuro_fs.errors",
    "DagPbError": "kuro_fs.errors",
    "GatewayError": "kuro_fs.errors",
    "GatewayLied": "kuro_fs.errors",
    "GatewayRefused": "kuro_fs.errors",
    "GatewayTimeout": "kuro_fs.errors",
    "GatewayUnreachable": "kuro_fs.errors",
    "InvalidCID": "kuro_fs.errors",
    "InvalidGatewayURL": "kuro_fs.errors",
    "KuroFsError": "kuro_fs.errors",
    "MissingBlock": "kuro_fs.errors",
    "ShardingNotSupported": "kuro_fs.errors",
    "read_bytes": "kuro_fs.fileread",
    "read_file": "kuro_fs.fileread",
    "read_into": "kuro_fs.fileread",
    "read_range": "kuro_fs.fileread",
    "FileBlockStore": "kuro_fs.filestore",
    "default_store": "kuro_fs.filestore",
    "DENIAL_REASONS": "kuro_fs.fs",
    "Fs": "kuro_fs.fs",
    "FsLog": "kuro_fs.fs",
    "FsResult": "kuro_fs.fs",
    "to_unixfs_dir": "kuro_fs.fs",
    "GatewayBlockStore": "kuro_fs.gateway.client",
    "file_cid": "kuro_fs.importer",
    "import_bytes": "kuro_fs.importer",
    "import_path": "kuro_fs.importer",
    "Overlay": "kuro_fs.overlay",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'kuro_fs' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "BlockStore",
    "BlockStoreError",
    "CarError",
    "CorruptBlock",
    "DENIAL_REASONS",
    "DagCborError",
    "DagPbError",
    "FileBlockStore",
    "Fs",
    "FsLog",
    "FsResult",
    "GatewayBlockStore",
    "GatewayError",
    "GatewayLied",
    "GatewayRefused",
    "GatewayTimeout",
    "GatewayUnreachable",
    "InvalidCID",
    "InvalidGatewayURL",
    "KuroFsError",
    "MemoryBlockStore",
    "MissingBlock",
    "Overlay",
    "ParsedCID",
    "ShardingNotSupported",
    "StoreBatch",
    "cid_for",
    "default_store",
    "export_car",
    "file_cid",
    "import_bytes",
    "import_car",
    "import_path",
    "open_batch",
    "parse_cid",
    "publish_blocks",
    "raw_cid",
    "read_bytes",
    "read_file",
    "read_into",
    "read_range",
    "to_unixfs_dir",
    "verify",
]
