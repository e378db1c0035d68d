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

Besides what the caller chooses, every store gets **structural bounds** that
always apply and are always in the receipt: at most ``max_table_elements``
elements in any one table (a single ``table.grow`` by 2**28 elements otherwise
takes seconds and gigabytes while no deadline can interrupt it — an
instruction runs to its end), and at most ``max_instances``, ``max_tables``
and ``max_memories`` per store, and at most ``max_output_chunks`` kept output
chunks (each write costs host memory whatever its size, an empty one too),
and ``max_value_bytes``: the largest value one call may carry across a
component's boundary, either way (see below).
The defaults are what real guests use: one memory (a C, Rust or Zig program,
and the components componentize-py builds, have one), four tables (a program
has one, a componentize-py component two), 64 instances (a component
instantiates dozens of core modules); a guest of the multi-memory proposal
must be given ``max_memories``. A caller may set them, and only values other
than the defaults enter an operation's identity.

**``max_memory_bytes`` bounds the whole guest** (:meth:`Limits.store_bounds`):
wasmtime's store limits are per memory and per table, so the budget ``M`` is
split by the counts the store allows, and what a guest can reach in all its
memories and tables together never passes ``M``:

* the tables may take at most a sixteenth of ``M``, split evenly: each table
  holds at most ``E = min(max_table_elements, M // (16 × 8 × max_tables))``
  elements (8 bytes an element: wasmtime's ``funcref`` slot; GC references take 4);
* the memories share the rest evenly: each may grow to
  ``(M − max_tables × E × 8) // max_memories`` bytes.

So a guest of one memory and no table gets all of ``M`` only with
``max_tables=0``; with the default four tables its memory gets ``M − 4·E·8``
(15/16 of ``M`` for ``M`` up to 512 MiB). The bounds depend on the limits
alone, never on the guest, so the same limits give the same store on every
backend and the receipt can state them: ``kuro/limits`` carries
``per-memory-bytes`` and ``per-table-elements``. Without ``max_memory_bytes``
each memory may reach wasmtime's own ceiling (4 GiB for a 32-bit memory, 1 GiB
in a worker process) and each table ``max_table_elements``: with the defaults,
4 GiB and 32 MiB of tables.

``max_value_bytes`` exists because wasmtime's component C API holds a value as
one 32-byte C value per element, converted into wasmtime's own values (~48
bytes each): a ``list<u8>`` costs the host ~80 bytes per byte while it crosses
(measured: a 48 MiB ``fs.read`` took a host from 77 to 3881 MiB of RSS, whatever
the guest's memory limit). A value is counted as it lies in the guest's memory
under the canonical ABI, without alignment padding — a ``list<u8>`` or string by
its bytes, every other value by its size (at least 1 byte): so the host holds at
most ~80 × the bound for bytes, a few hundred × for lists of small records, per
call. The default (4 MiB: ~330 MiB of host memory at worst; wasmtime itself
refuses a ``list<u8>`` of more than ~2.7 MiB from guest to host) keeps that well
below the host's memory; :meth:`Limits.value_bound` also never exceeds
``max_memory_bytes`` (no larger value could be in the guest's memory anyway).
Core modules pass numbers only; the bound is in every receipt all the same.

## Pure
Values only.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kuro_wasm.errors import ModelError

__all__ = [
    "BOUNDS",
    "CHOSEN_LIMITS",
    "TABLE_ELEMENT_BYTES",
    "TABLE_SHARE",
    "DEFAULT_MAX_INSTANCES",
    "DEFAULT_MAX_MEMORIES",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_MAX_OUTPUT_CHUNKS",
    "DEFAULT_MAX_TABLES",
    "DEFAULT_MAX_TABLE_ELEMENTS",
    "DEFAULT_MAX_VALUE_BYTES",
    "DEFAULT_TIMEOUT_MS",
    "LIMIT_NAMES",
    "Limits",
    "MAX_WORKERS",
    "StoreBounds",
]

DEFAULT_TIMEOUT_MS: Final = 120_000
#: The most worker processes one pool (``$KURO_WORKERS``, ``WorkerPool(workers=…)``) or one local batch
#: (``kuro batch --local N``, ``run_many(workers=…)``) starts: a fixed cap, so a typo'd huge number is
#: refused with this limit named instead of forking until the machine gives out.
MAX_WORKERS: Final = 256
DEFAULT_MAX_OUTPUT_BYTES: Final = 1_048_576
_U64_END: Final = 2**64
#: The smallest value of each limit; those whose default is None may also be None.
_MINIMUM: Final[Mapping[str, int]] = {
    "timeout_ms": 1,
    "max_output_bytes": 0,
    "max_memory_bytes": 0,
    "fuel": 0,
    "max_table_elements": 0,
    "max_instances": 1,
    "max_tables": 0,
    "max_memories": 0,
    "max_output_chunks": 0,
    "max_value_bytes": 0,
}
#: Wasmtime's store limits take these as ``int`` counts; larger values mean "as wasmtime allows".
DEFAULT_MAX_TABLE_ELEMENTS: Final = 1_000_000
DEFAULT_MAX_INSTANCES: Final = 64
DEFAULT_MAX_TABLES: Final = 4
DEFAULT_MAX_MEMORIES: Final = 1
#: Bytes one table element may take in wasmtime (a ``funcref`` slot; GC references take 4).
TABLE_ELEMENT_BYTES: Final = 8
#: With ``max_memory_bytes`` set, the tables together may take at most this fraction's reciprocal of it.
TABLE_SHARE: Final = 16
#: Kept output chunks per run, whatever their size (each costs host memory; see kuro_wasm.model.stream).
DEFAULT_MAX_OUTPUT_CHUNKS: Final = 100_000
#: The largest value (canonical-ABI bytes) one call may carry across a component's boundary, either way.
DEFAULT_MAX_VALUE_BYTES: Final = 4 * 2**20


@dataclass(frozen=True, slots=True)
class Limits:
    """How long a guest may run, how much it may print, and (optionally) its memory and fuel.

    >>> Limits(timeout_ms=50).receipt_value()  # doctest: +NORMALIZE_WHITESPACE
    {'timeout-ms': 50, 'max-output-bytes': 1048576, 'max-table-elements': 1000000, 'max-instances': 64,
     'max-tables': 4, 'max-memories': 1, 'max-output-chunks': 100000, 'max-value-bytes': 4194304,
     'per-table-elements': 1000000}
    >>> Limits(fuel=-1)
    Traceback (most recent call last):
    ...
    kuro_wasm.errors.ModelError: fuel must be an int in 0..2**64-1, got -1
    """

    timeout_ms: int = DEFAULT_TIMEOUT_MS
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    max_memory_bytes: int | None = None
    fuel: int | None = None
    max_table_elements: int = DEFAULT_MAX_TABLE_ELEMENTS
    max_instances: int = DEFAULT_MAX_INSTANCES
    max_tables: int = DEFAULT_MAX_TABLES
    max_memories: int = DEFAULT_MAX_MEMORIES
    max_output_chunks: int = DEFAULT_MAX_OUTPUT_CHUNKS
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    #: (its store bounds, its receipt value), made on first use and kept by this object alone (no field of the
    #: value: not compared, hashed or shown; :func:`dataclasses.replace` makes a copy without it)
    _memo: tuple[StoreBounds, dict[str, int]] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        # Every run builds one: checked field by field from a precomputed table (no dataclasses.fields()).
        for name, minimum, nullable in _CHECKS:
            value = getattr(self, name)
            if type(value) is int and minimum <= value < _U64_END:  # bools are not ints here (type, not isinstance)
                continue
            if value is None and nullable:
                continue
            raise ModelError(f"{name} must be an int in {minimum}..2**64-1, got {value!r}", reason="invalid-limit")

    @classmethod
    def of(
        cls,
        timeout_ms: object,
        max_output_bytes: object,
        max_memory_bytes: object,
        fuel: object,
        bounds: Mapping[str, object],
    ) -> Limits:
        """``Limits(timeout_ms, max_output_bytes, max_memory_bytes, fuel, **bounds)``, the same value
        (and the same refusals), remembered: a host builds one per run, mostly the same few."""
        key = (timeout_ms, max_output_bytes, max_memory_bytes, fuel, *map(bounds.get, BOUNDS, _UNSETS))
        if _KEY_TYPES.issuperset(map(type, key)):  # only ints, None, unset: no bool (True == 1 would hit), no float
            found = _KNOWN.get(key)
            if found is not None:
                return found
        made = cls(timeout_ms, max_output_bytes, max_memory_bytes, fuel, **bounds)  # type: ignore[arg-type]
        if len(_KNOWN) < 256:
            _KNOWN[key] = made
        return made

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Limits:
        """The limits named in ``options`` (keyword names, e.g. ``timeout_ms``), defaults for the rest."""
        return cls(**{name: options[name] for name in LIMIT_NAMES if name in options})

    def as_options(self) -> dict[str, int | None]:
        """The keyword form of every limit: ``{"timeout_ms": …, "max_output_bytes": …, …}``."""
        return {name: getattr(self, name) for name in LIMIT_NAMES}

    def identity(self) -> dict[str, int | None]:
        """The limits an operation's identity digests: the four chosen ones always, the bounds when not default."""
        out = {name: getattr(self, name) for name in CHOSEN_LIMITS}
        for name in BOUNDS:
            value = getattr(self, name)
            if value != _DEFAULTS[name]:
                out[name] = value
        return out

    def value_bound(self) -> int:
        """The most bytes one value may have crossing a component's boundary: ``max_value_bytes``, and never
        more than ``max_memory_bytes`` when that is set.

        >>> Limits(max_value_bytes=100).value_bound(), Limits(max_memory_bytes=65536).value_bound()
        (100, 65536)
        """
        if self.max_memory_bytes is None:
            return self.max_value_bytes
        return min(self.max_value_bytes, self.max_memory_bytes)

    def receipt_value(self) -> dict[str, int]:
        """The receipt's ``kuro/limits``: kebab-case names; memory and fuel only when set; the bounds always;
        then the store's applied bounds (:meth:`store_bounds`): ``per-table-elements`` always,
        ``per-memory-bytes`` when ``max_memory_bytes`` is set."""
        return dict(_derived(self)[1])

    def store_bounds(self) -> StoreBounds:
        """What the guest's store is given: the budget split over its memories and tables (module docstring).

        >>> b = Limits(max_memory_bytes=64 << 20).store_bounds()
        >>> b.per_memory_bytes, b.per_table_elements, b.per_memory_bytes + 4 * b.per_table_elements * 8
        (62914560, 131072, 67108864)
        >>> Limits(max_memory_bytes=655360, max_tables=0).store_bounds().per_memory_bytes
        655360
        """
        return _derived(self)[0]


@dataclass(frozen=True, slots=True)
class StoreBounds:
    """The bounds a wasmtime store is given for one run (``Store.set_limits``).

    ``per_memory_bytes`` None: no bound but wasmtime's own ceiling.
    """

    per_memory_bytes: int | None
    per_table_elements: int
    instances: int
    tables: int
    memories: int

    def total_bytes(self) -> int | None:
        """The most the guest's memories and tables can hold together (None: no bound was asked)."""
        if self.per_memory_bytes is None:
            return None
        return self.memories * self.per_memory_bytes + self.tables * self.per_table_elements * TABLE_ELEMENT_BYTES


#: The limits a caller chooses per run (always part of an operation's identity).
CHOSEN_LIMITS: Final[tuple[str, ...]] = ("timeout_ms", "max_output_bytes", "max_memory_bytes", "fuel")
#: The structural bounds every store gets (part of an operation's identity only when not the default).
BOUNDS: Final[tuple[str, ...]] = (
    "max_table_elements",
    "max_instances",
    "max_tables",
    "max_memories",
    "max_output_chunks",
    "max_value_bytes",
)
#: The keyword names of every limit, in a fixed order.
LIMIT_NAMES: Final[tuple[str, ...]] = CHOSEN_LIMITS + BOUNDS
_DEFAULTS: Final[Mapping[str, object]] = {f.name: f.default for f in dataclasses.fields(Limits) if f.init}
_CHECKS: Final = tuple((f.name, _MINIMUM[f.name], f.default is None) for f in dataclasses.fields(Limits) if f.init)
_KEBAB: Final[Mapping[str, str]] = {name: name.replace("_", "-") for name in LIMIT_NAMES}


_UNSET: Final = object()
_UNSETS: Final = (_UNSET,) * len(BOUNDS)
_KEY_TYPES: Final = frozenset({int, type(None), object})
_KNOWN: dict[tuple[object, ...], Limits] = {}


def _derived(limits: Limits) -> tuple[StoreBounds, dict[str, int]]:
    """``limits``' store bounds and receipt value, for the values a run asks both of: kept on the object itself
    (most runs share a few Limits objects, :meth:`Limits.of` remembers them, and a value's hash — ten fields —
    costs more than an attribute read). A module table by ``id()`` held the first 256 objects alive and then
    took no other, however often it was asked."""
    found = limits._memo
    if found is None:
        found = (_store_bounds(limits), _receipt_value(limits))  # (equal values share these, by hash)
        object.__setattr__(limits, "_memo", found)  # (a frozen value: its memo is no part of it)
    return found


@functools.lru_cache(maxsize=64)
def _store_bounds(limits: Limits) -> StoreBounds:
    budget, tables, memories = limits.max_memory_bytes, limits.max_tables, limits.max_memories
    if budget is None:
        return StoreBounds(None, limits.max_table_elements, limits.max_instances, tables, memories)
    per_table = 0
    if tables:
        per_table = min(limits.max_table_elements, budget // (TABLE_SHARE * TABLE_ELEMENT_BYTES * tables))
    rest = budget - tables * per_table * TABLE_ELEMENT_BYTES
    per_memory = rest // memories if memories else 0
    return StoreBounds(per_memory, per_table, limits.max_instances, tables, memories)


@functools.lru_cache(maxsize=64)
def _receipt_value(limits: Limits) -> dict[str, int]:
    """Shared and memoized (most runs have the same limits): callers copy it."""
    out = {"timeout-ms": limits.timeout_ms, "max-output-bytes": limits.max_output_bytes}
    if limits.max_memory_bytes is not None:
        out["max-memory-bytes"] = limits.max_memory_bytes
    if limits.fuel is not None:
        out["fuel"] = limits.fuel
    for name in BOUNDS:
        out[_KEBAB[name]] = getattr(limits, name)
    applied = _store_bounds(limits)
    if applied.per_memory_bytes is not None:
        out["per-memory-bytes"] = applied.per_memory_bytes
    out["per-table-elements"] = applied.per_table_elements
    return out
