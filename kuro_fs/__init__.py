"""kuro_fs: content addressing, block stores and a filesystem whose substrate is a CID DAG.

This module only re-exports; each concept lives in the module named after it.
``kuro_fs`` never imports ``kuro_wasm``.
"""

from kuro_fs.blocks import BlockStore, MemoryBlockStore, publish_blocks
from kuro_fs.cid import ParsedCID, cid_for, parse_cid, raw_cid, verify
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
from kuro_fs.filestore import FileBlockStore, default_store

__all__ = [
    "BlockStore",
    "BlockStoreError",
    "CarError",
    "CorruptBlock",
    "DagCborError",
    "DagPbError",
    "FileBlockStore",
    "InvalidCID",
    "KuroFsError",
    "MemoryBlockStore",
    "ParsedCID",
    "ShardingNotSupported",
    "cid_for",
    "default_store",
    "parse_cid",
    "publish_blocks",
    "raw_cid",
    "verify",
]
