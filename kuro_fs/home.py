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

__all__ = [
    "blocks_dir",
    "ensure_home",
    "ledger_path",
    "module_cache_dir",
    "refs_dir",
    "resolve_home",
    "worker_home",
]


def _named(home: str | os.PathLike[str] | None, env: Mapping[str, str] | None) -> Path | None:
    """``home`` if given, else ``$KURO_HOME`` if set (``~`` expanded), else None."""
    if home is not None:
        return Path(home).expanduser()
    value = (os.environ if env is None else env).get("KURO_HOME")
    return Path(value).expanduser() if value else None


def resolve_home(home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The home directory: ``home`` if given, else ``$KURO_HOME``, else ``~/.kuro``."""
    named = _named(home, env)
    return named if named is not None else Path.home() / ".kuro"


def worker_home(home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Where a batch worker keeps its caches (compiled modules, verified gateway blocks), resolved on the worker.

    ``home`` if given (``~`` expanded there), else the worker's ``$KURO_HOME``, else
    ``<temp dir>/kuro-worker-<uid>`` (``tempfile.gettempdir()``: ``$TMPDIR``, else ``/tmp``) —
    never ``~/.kuro``: a worker is often a service account whose home is nobody's kuro home.

    >>> str(worker_home(env={"KURO_HOME": "/srv/kuro"}))
    '/srv/kuro'
    >>> worker_home(env={"TMPDIR": "/x"}).name.startswith("kuro-worker-")
    True
    """
    named = _named(home, env)
    if named is not None:
        return named
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"kuro-worker-{uid}"


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
