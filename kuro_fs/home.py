"""The embedded home: where kuro keeps its durable state by default.

## The one decision
One function resolves the home directory, and every default location
(blocks, ledger, compiled-module cache, named fs roots) is derived from it here,
so no other module reads ``$KURO_HOME`` or ``~``. Order: an explicit argument,
then ``$KURO_HOME``, then ``~/.kuro``.

## Effects
Reads the environment; :func:`ensure_home` creates directories.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["blocks_dir", "ensure_home", "ledger_path", "module_cache_dir", "refs_dir", "resolve_home"]


def resolve_home(home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The home directory: ``home`` if given, else ``$KURO_HOME``, else ``~/.kuro``."""
    if home is not None:
        return Path(home).expanduser()
    environ = os.environ if env is None else env
    value = environ.get("KURO_HOME")
    if value:
        return Path(value).expanduser()
    return Path.home() / ".kuro"


def ensure_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Resolve the home and create it (and its parents) if missing."""
    path = resolve_home(home)
    path.mkdir(parents=True, exist_ok=True)
    return path


def blocks_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """Where the durable block store lives: ``<home>/blocks``."""
    return resolve_home(home) / "blocks"


def ledger_path(home: str | os.PathLike[str] | None = None) -> Path:
    """Where the receipt ledger lives: ``<home>/ledger.sqlite`` (journal beside it)."""
    return resolve_home(home) / "ledger.sqlite"


def module_cache_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """Where compiled guest modules are cached: ``<home>/cache/modules``."""
    return resolve_home(home) / "cache" / "modules"


def refs_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """Where named fs roots and their history are kept: ``<home>/refs``."""
    return resolve_home(home) / "refs"
