"""Helpers shared by the host tests (imported as ``hostkit``; pytest puts this directory on sys.path)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.model.sessions import Session, session

ROOT = Path(__file__).resolve().parents[2]
GUESTS = ROOT / "guests"
ALL_CAPS = ["guest/invoke", "fs/read", "fs/ls", "fs/write", "fs/rm", "stdin/read"]


def wat(name: str) -> str:
    """The WAT source of guests/<name>.wat."""
    return (GUESTS / f"{name}.wat").read_text(encoding="utf-8")


def make_fs(store: MemoryBlockStore, files: Mapping[str, bytes | str] | None = None) -> Fs:
    """An Fs in ``store`` holding ``files`` (path → content)."""
    fs = Fs.empty(store)
    for path, data in (files or {}).items():
        result = fs.write(path, data.encode("utf-8") if isinstance(data, str) else data)
        assert result.ok, result.receipt
        fs = result.fs
    return fs


def make_session(fs: Fs, grant: list[str] | None = None, mode: str = "terminal-repo") -> Session:
    """A session over ``fs`` (every host capability unless ``grant`` says otherwise)."""
    return session("s-test", fs.root, mode, grant=ALL_CAPS if grant is None else grant)
