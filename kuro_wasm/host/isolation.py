"""Which backend runs a guest: in the host's own process (``"wasmtime"``) or in a worker process (``"process"``).

## The one decision
The ``isolation`` run option names the backend, and when a caller does not name one, the
environment variable ``KURO_ISOLATION`` does, and when that is unset too, the guest runs in-process
(``"wasmtime"``, the fastest path). An environment value is read at every call (so a test or a
shell can change it), and a value that names no backend is refused like a bad argument
(``ModelError`` ``invalid-run-option``), never ignored: a user who asked for process isolation must
not silently get less. A :class:`~kuro_wasm.host.worker.pool.WorkerPool` may be passed instead of
``"process"`` to run on that pool rather than the process-wide default one.

The receipt's ``kuro/isolation`` is the backend's name; :data:`ISOLATIONS` says what each promises
(the full tables are in ``docs/abi.md``).

## Effects
Reads ``os.environ`` and ``sys.modules``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Final

from kuro_wasm.errors import ModelError
from kuro_wasm.model.isolation import DEFAULT_ISOLATION, ISOLATIONS

__all__ = ["ENV_VAR", "ISOLATIONS", "resolve_isolation", "worker_pool"]

#: The environment variable naming the default backend.
ENV_VAR: Final = "KURO_ISOLATION"


def _worker_pool_class() -> type | tuple[()]:
    """The WorkerPool class if its module is loaded, else ``()`` (no object can be a pool before it is): looked up,
    not imported, on every process run (an import statement in a function costs ~2 µs per call) and not imported
    at the top either (naming a backend loads no engine)."""
    module = sys.modules.get("kuro_wasm.host.worker.pool")
    return () if module is None else module.WorkerPool


def resolve_isolation(isolation: object) -> str:
    """The backend for a run: ``isolation`` if given, else ``$KURO_ISOLATION``, else ``"wasmtime"``.

    A worker pool object counts as ``"process"``.

    >>> resolve_isolation("process")
    'process'

    Raises ModelError: ``invalid-run-option`` for a name (argument or environment) that is no backend.
    """
    if isolation is None:
        named = os.environ.get(ENV_VAR, "").strip()
        if not named:
            return DEFAULT_ISOLATION
        if named not in ISOLATIONS:
            raise ModelError(
                f"{ENV_VAR}={named!r} names no isolation backend",
                reason="invalid-run-option",
                hint=", ".join(ISOLATIONS),
            )
        return named
    if isinstance(isolation, str):
        if isolation not in ISOLATIONS:
            raise ModelError(
                f"isolation {isolation!r} names no backend", reason="invalid-run-option", hint=", ".join(ISOLATIONS)
            )
        return isolation
    if isinstance(isolation, _worker_pool_class()):
        return "process"
    raise ModelError(
        f"isolation must be a backend name or a WorkerPool, got {type(isolation).__name__}",
        reason="invalid-run-option",
        hint=", ".join(ISOLATIONS),
    )


def worker_pool(isolation: object) -> Any:
    """``isolation`` if it is a :class:`~kuro_wasm.host.worker.pool.WorkerPool`, else None."""
    return isolation if isinstance(isolation, _worker_pool_class()) else None
