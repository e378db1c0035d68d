"""A run's limits as one value: checked once, passed through every layer, written into the receipt.

## The one decision
The limits a guest runs under are one frozen, validated :class:`Limits` value.
The public entry points (``run``, ``start``, ``run_async``, ``Ledger.run``, the
CLI) keep their keyword arguments, and each builds this value from them; it is
refused (``ModelError``, reason ``invalid-limit``) before anything is loaded,
stored or claimed. The receipt's ``kuro/limits`` is :meth:`Limits.receipt_value`
of the same value, and the operation identity (:mod:`kuro_wasm.model.operation`)
digests the same fields, so what was asked, what ran and what was recorded
cannot drift apart.

Every limit is an int from its minimum to 2**64-1 (each is written into the
receipt as dag-cbor and wasmtime takes u64s); booleans are not ints here.
``max_memory_bytes`` and ``fuel`` may be None (not limited by kuro).

## Pure
Values only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kuro_wasm.errors import ModelError

__all__ = ["DEFAULT_MAX_OUTPUT_BYTES", "DEFAULT_TIMEOUT_MS", "LIMIT_NAMES", "Limits"]

DEFAULT_TIMEOUT_MS: Final = 120_000
DEFAULT_MAX_OUTPUT_BYTES: Final = 1_048_576
_U64_END: Final = 2**64
#: The smallest value of each limit; those whose default is None may also be None.
_MINIMUM: Final[Mapping[str, int]] = {"timeout_ms": 1, "max_output_bytes": 0, "max_memory_bytes": 0, "fuel": 0}


@dataclass(frozen=True, slots=True)
class Limits:
    """How long a guest may run, how much it may print, and (optionally) its memory and fuel.

    >>> Limits(timeout_ms=50).receipt_value()
    {'timeout-ms': 50, 'max-output-bytes': 1048576}
    >>> Limits(fuel=-1)
    Traceback (most recent call last):
    ...
    kuro_wasm.errors.ModelError: fuel must be an int in 0..2**64-1, got -1
    """

    timeout_ms: int = DEFAULT_TIMEOUT_MS
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    max_memory_bytes: int | None = None
    fuel: int | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            minimum = _MINIMUM[field.name]
            if value is None and field.default is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < _U64_END:
                raise ModelError(
                    f"{field.name} must be an int in {minimum}..2**64-1, got {value!r}", reason="invalid-limit"
                )

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Limits:
        """The limits named in ``options`` (keyword names, e.g. ``timeout_ms``), defaults for the rest."""
        return cls(**{name: options[name] for name in LIMIT_NAMES if name in options})

    def as_options(self) -> dict[str, int | None]:
        """The keyword form: ``{"timeout_ms": …, "max_output_bytes": …, "max_memory_bytes": …, "fuel": …}``."""
        return {name: getattr(self, name) for name in LIMIT_NAMES}

    def receipt_value(self) -> dict[str, int]:
        """The receipt's ``kuro/limits``: kebab-case names; the optional limits only when set."""
        out = {"timeout-ms": self.timeout_ms, "max-output-bytes": self.max_output_bytes}
        if self.max_memory_bytes is not None:
            out["max-memory-bytes"] = self.max_memory_bytes
        if self.fuel is not None:
            out["fuel"] = self.fuel
        return out


#: The keyword names of the limits, in a fixed order.
LIMIT_NAMES: Final[tuple[str, ...]] = ("timeout_ms", "max_output_bytes", "max_memory_bytes", "fuel")
