"""kuro_fs: content addressing, block stores and a filesystem whose substrate is a CID DAG.

This module only re-exports; each concept lives in the module named after it.
``kuro_fs`` never imports ``kuro_wasm``.
"""

from kuro_fs.blocks import BlockStore, MemoryBlockStore
from kuro_fs.cid import cid_for, parse_cid, raw_cid, verify
from kuro_fs.errors import (
    BlockStoreError,
    CarError,
    CorruptBlock,
    DagCborError,
    DagPbError,
    InvalidCID,
    KuroFsError,
    ShardingNotSupported,
)

__all__ = [
    "BlockStore",
    "BlockStoreError",
    "CarError",
    "CorruptBlock",
    "DagCborError",
    "DagPbError",
    "InvalidCID",
    "KuroFsError",
    "MemoryBlockStore",
    "ShardingNotSupported",
    "cid_for",
    "parse_cid",
    "raw_cid",
    "verify",
]
