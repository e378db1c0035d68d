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


_BUILT: dict[str, Path] = {}


def component(name: str) -> bytes:
    """The bytes of the component guest ``name``, built from guests/components/ (tools/build_components.py).

    Built once into build/components/ (a stamp beside each output skips an unchanged rebuild).
    """
    if name not in _BUILT:
        import importlib.util

        spec = importlib.util.spec_from_file_location("build_components", ROOT / "tools" / "build_components.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _BUILT.update(module.build(ROOT / "build" / "components", [name]))
    return _BUILT[name].read_bytes()
