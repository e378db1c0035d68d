"""The isolation backends a receipt can name: the closed table of ``kuro/isolation`` values of a run.

## The one decision
A run's ``kuro/isolation`` is one of :data:`ISOLATIONS` — ``"wasmtime"`` (the guest ran in the
host's own process) or ``"process"`` (in a hardened worker process) — and every name has its
meaning here and its full table in ``docs/abi.md``; a denial says ``"none"`` (nothing ran). Which
backend runs a given run is decided by :func:`kuro_wasm.host.isolation.resolve_isolation`.

## Pure
A table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["DEFAULT_ISOLATION", "ISOLATIONS"]

#: Every backend, by the name a receipt's ``kuro/isolation`` carries.
ISOLATIONS: Final[Mapping[str, str]] = {
    "wasmtime": "in the host's process: wasmtime's sandbox, capability-checked imports, prompt stops",
    "process": "the same, in a pooled worker process with OS hardening; a dying worker never takes the host",
}
#: The backend when neither the caller nor ``$KURO_ISOLATION`` names one.
DEFAULT_ISOLATION: Final = "wasmtime"
