"""kuro_fs: content addressing, block stores and a filesystem whose substrate is a CID DAG.

This module only re-exports; each concept lives in the module named after it.
``kuro_fs`` never imports ``kuro_wasm``.
"""

from kuro_fs.blocks import BlockStore, MemoryBlockStore, StoreBatch, open_batch, publish_blocks
from kuro_fs.car import export_car, import_car
from kuro_fs.cid import ParsedCID, cid_for, parse_cid, raw_cid, verify
from kuro_fs.errors import (
    BlockStoreError,
    CarError,
    CorruptBlock,
    DagCborError,
    DagPbError,
    InvalidCID,
    KuroFsError,
    MissingBlock,
    ShardingNotSupported,
)
from kuro_fs.fileread import read_bytes, read_file, read_into, read_range
from kuro_fs.filestore import FileBlockStore, default_store
from kuro_fs.fs import DENIAL_REASONS, Fs, FsLog, FsResult, to_unixfs_dir
from kuro_fs.importer import file_cid, import_bytes, import_path

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
    "InvalidCID",
    "KuroFsError",
    "MemoryBlockStore",
    "MissingBlock",
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
