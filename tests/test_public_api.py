"""The public API is a list, and this test guards it (httpx's test_exported_members).

Each package's ``__init__`` only re-exports; ``__all__`` is sorted, complete and every
name in it resolves.
"""

from __future__ import annotations

import importlib

import pytest

REQUIRED = {
    "kuro_fs": {
        "raw_cid",
        "cid_for",
        "parse_cid",
        "InvalidCID",
        "BlockStore",
        "MemoryBlockStore",
        "FileBlockStore",
        "BlockStoreError",
        "CorruptBlock",
        "Fs",
        "import_bytes",
        "import_path",
        "read_file",
        "read_range",
        "export_car",
        "import_car",
        "to_unixfs_dir",
        "GatewayBlockStore",
        "GatewayError",
        "GatewayLied",
        "GatewayRefused",
        "GatewayTimeout",
        "GatewayUnreachable",
    },
    "kuro_wasm": {
        "session",
        "guest",
        "denial",
        "receipt",
        "receipt_cid",
        "add_guest",
        "run",
        "start",
        "run_async",
        "Ledger",
        "OperationConflict",
        "WorkerPool",
    },
}


@pytest.mark.parametrize("package", sorted(REQUIRED))
def test_all_is_sorted(package: str) -> None:
    module = importlib.import_module(package)
    assert list(module.__all__) == sorted(module.__all__)


@pytest.mark.parametrize("package", sorted(REQUIRED))
def test_every_exported_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize("package", sorted(REQUIRED))
def test_the_names_callers_rely_on_are_exported(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(REQUIRED[package] - set(module.__all__)) == []


def test_the_concept_modules_of_kuro_wasm_are_public() -> None:
    kuro_wasm = importlib.import_module("kuro_wasm")
    for name in ("stream", "checkpoint", "ansi"):
        module = importlib.import_module(f"kuro_wasm.model.{name}")
        assert module.__doc__
        assert getattr(kuro_wasm, name) is module  # `from kuro_wasm import stream` keeps working
