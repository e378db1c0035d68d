"""One run's clocks and random bytes: the host's, counted as nondeterminism — or, in a deterministic run, virtual.

## The one decision
Every guest kind that offers time or randomness (WASI preview 1, the virtual
WASI 0.2 of components) reads it through one :class:`RunClocks`, so "deterministic"
means one thing whatever the kind. Without a seed the readings are the host's
(``time.time_ns``, ``time.monotonic_ns``, ``os.urandom``) and each is counted into
the receipt's ``kuro/nondeterminism`` (``wall-clock`` and ``monotonic-clock``
readings, ``random-bytes``). With :attr:`RunContext.seed
<kuro_wasm.host.context.RunContext.seed>` set (``deterministic=True``) nothing
is read from the world and nothing is counted: the clocks start at fixed
instants and advance :data:`~kuro_wasm.model.wasi.DETERMINISTIC_TICK_NS` per
reading (both clocks share one elapsed time, so intervals are positive and
equal on both), a sleep moves them by its length without waiting
(:meth:`RunClocks.advance`), and random bytes are the seed's SHA-256 stream
(:class:`~kuro_wasm.model.wasi.SeededBytes`) — secure, insecure and
``insecure-seed`` alike, in the order the guest asks.

## Effects
The host's clocks and entropy (runs without a seed only); the run's receipt facts.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from kuro_wasm.host.context import RunContext
from kuro_wasm.model import wasi
from kuro_wasm.model.wasi import SeededBytes

__all__ = ["RunClocks", "count"]


@dataclass(eq=False)
class RunClocks:
    """The clocks and random stream of one run (``seed`` None: the host's, counted)."""

    seed: int | None = None
    _elapsed_ns: int = 0
    _random: SeededBytes | None = None

    def realtime_ns(self, run: RunContext) -> int:
        """Nanoseconds since the Unix epoch."""
        if self.seed is not None:
            self._elapsed_ns += wasi.DETERMINISTIC_TICK_NS
            return wasi.DETERMINISTIC_REALTIME_START_NS + self._elapsed_ns
        count(run, "wall-clock")
        return time.time_ns()

    def monotonic_ns(self, run: RunContext) -> int:
        """Nanoseconds on the monotonic clock (one reading: counted, or a virtual tick)."""
        if self.seed is not None:
            self._elapsed_ns += wasi.DETERMINISTIC_TICK_NS
            return wasi.DETERMINISTIC_MONOTONIC_START_NS + self._elapsed_ns
        count(run, "monotonic-clock")
        return time.monotonic_ns()

    def monotonic_now_ns(self) -> int:
        """The monotonic clock as the host sees it when deciding whether a timer is due (not a guest reading:
        neither counted nor a tick)."""
        if self.seed is not None:
            return wasi.DETERMINISTIC_MONOTONIC_START_NS + self._elapsed_ns
        return time.monotonic_ns()

    @property
    def virtual(self) -> bool:
        """True in a deterministic run: timers are due when the virtual clock is moved to them, never by waiting."""
        return self.seed is not None

    def advance(self, ns: int) -> None:
        """A deterministic run's sleep: the virtual clocks move on by ``ns`` without waiting."""
        self._elapsed_ns += max(0, ns)

    def random(self, run: RunContext, n: int) -> bytes:
        """``n`` random bytes: the host's entropy (counted), or the seeded stream of a deterministic run."""
        if self.seed is not None:
            if self._random is None:
                self._random = SeededBytes(self.seed)
            return self._random.take(n)
        count(run, "random-bytes", n)
        return os.urandom(n)


def count(run: RunContext, what: str, n: int = 1) -> None:
    """Count a clock reading or random bytes into the receipt's ``kuro/nondeterminism``."""
    seen: dict[str, Any] = run.kind_state.setdefault("receipt", {}).setdefault("nondeterminism", {})
    seen[what] = seen.get(what, 0) + n
