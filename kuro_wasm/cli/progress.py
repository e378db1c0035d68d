"""A progress bar on stderr for long CLI work (big imports, CAR export/import).

## The one decision
A bar is drawn **only when its stream is a terminal**; piped or redirected, the
command stays silent, so logs and scripts never see ``\\r`` noise. Progress is
measured where every long job already passes: the block traffic. A
:class:`ProgressStore` wraps any ``BlockStore`` and counts the bytes of the blocks
put (import) or got (export), so the importer and the CAR code need no callback
parameter. For a file import the bytes put are the file's bytes plus a little
dag-pb, so the count is clamped to the total and finished explicitly.

A line that moves without traffic (``kuro batch``: the rate and the running count change while
guests run) can tick: :meth:`Progress.start_ticking` redraws it every ``period`` seconds from a
daemon thread, which :meth:`Progress.close` (or leaving the ``with``, failed or not) stops and
joins before it draws the final state — so a tick can neither keep the process alive nor print
after the end: a draw happens under the lock only while the bar is open, and closing is done
under the same lock.

## Pure / Effects
:func:`render` is pure (numbers in, one line out). :class:`Progress` writes to its
stream, at most every ``interval`` seconds (clock injected), under a lock so a
multi-threaded importer can report from any thread; a ticking bar owns one thread.

## Not done here
No ETA smoothing, no multi-bar layout, no colour.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, TextIO

__all__ = ["Progress", "ProgressStore", "render"]

_UNITS: Final = ("B", "KiB", "MiB", "GiB", "TiB")


def _size(n: float) -> str:
    for unit in _UNITS:
        if n < 1024 or unit == _UNITS[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def render(label: str, done: int, total: int | None, elapsed: float, width: int = 30) -> str:
    """One line of progress: ``label [####----]  42% 10.5/25.0 MiB 120.3 MiB/s``.

    With no total (unknown size) the bar is replaced by the byte count alone.

    >>> render("import", 512, 1024, 1.0, width=10)
    'import [#####-----]  50% 512 B/1.0 KiB 512 B/s'
    >>> render("export", 2048, None, 2.0)
    'export 2.0 KiB 1.0 KiB/s'
    """
    rate = f"{_size(done / elapsed)}/s" if elapsed > 0 else ""
    if total is None or total <= 0:
        return f"{label} {_size(done)} {rate}".rstrip()
    shown = min(done, total)
    filled = width * shown // total
    percent = 100 * shown // total
    bar = "#" * filled + "-" * (width - filled)
    return f"{label} [{bar}] {percent:3d}% {_size(shown)}/{_size(total)} {rate}".rstrip()


class Progress:
    """A bar for one job; ``advance`` from any thread, ``close`` (or ``with``) to finish.

    ``line(done, elapsed)`` draws something other than bytes (``kuro batch`` counts invocations).
    """

    def __init__(
        self,
        label: str,
        total: int | None,
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = 0.1,
        line: Callable[[int, float], str] | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self._stream = sys.stderr if stream is None else stream
        self.enabled = _isatty(self._stream) if enabled is None else enabled
        self._clock = clock
        self._interval = interval
        self._start = clock()
        self._last_draw: float | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._line = line
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def advance(self, n: int) -> None:
        """Count ``n`` more bytes done; redraw if the interval has passed."""
        with self._lock:
            self.done += n
            if not self.enabled or self._closed:
                return
            now = self._clock()
            if self._last_draw is None or now - self._last_draw >= self._interval:
                self._draw(now)

    def tick(self) -> None:
        """Redraw now (the line may have moved without an advance); nothing once closed or when disabled."""
        with self._lock:
            if self.enabled and not self._closed:
                self._draw(self._clock())

    def start_ticking(self, period: float, *, wait: Callable[[threading.Event, float], bool] | None = None) -> None:
        """Redraw every ``period`` s from a daemon thread until the bar is closed (nothing when disabled).

        ``wait(stop, period)`` returns True to stop (default: ``stop.wait(period)``; tests drive it).
        """
        if not self.enabled or self._ticker is not None or self._closed:
            return
        pause = wait if wait is not None else _wait

        def loop() -> None:
            while not pause(self._stop, period):
                self.tick()

        self._ticker = threading.Thread(target=loop, name=f"kuro-progress-{self.label}", daemon=True)
        self._ticker.start()

    def _stop_ticking(self) -> None:
        self._stop.set()
        ticker = self._ticker
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join()

    def close(self) -> None:
        """Stop ticking, draw the final state and end the line (idempotent; silent when disabled)."""
        self._stop_ticking()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.enabled:
                if self.total is not None:
                    self.done = max(self.done, self.total)  # a finished job is 100 %, dag-pb overhead or not
                self._draw(self._clock())
                self._stream.write("\n")
                self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
            return
        self._stop_ticking()
        with self._lock:  # a failed job: wipe the bar instead of claiming 100 %
            if self.enabled and not self._closed and self._last_draw is not None:
                self._stream.write("\r\x1b[K")
                self._stream.flush()
            self._closed = True

    def _draw(self, now: float) -> None:
        self._last_draw = now
        elapsed = now - self._start
        text = (
            render(self.label, self.done, self.total, elapsed) if self._line is None else self._line(self.done, elapsed)
        )
        self._stream.write("\r\x1b[K" + text)
        self._stream.flush()


def _wait(stop: threading.Event, period: float) -> bool:
    return stop.wait(period)


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class ProgressStore:
    """A ``BlockStore`` wrapper that reports the bytes of blocks put and/or got to a :class:`Progress`.

    Every other attribute is forwarded to the wrapped store unchanged.
    """

    def __init__(self, store: Any, progress: Progress, *, count_put: bool = True, count_get: bool = False) -> None:
        self._store = store
        self._progress = progress
        self._count_put = count_put
        self._count_get = count_get

    def put(self, data: bytes, codec: str = "raw", *, cid: str | None = None) -> str:
        """Store the block (under ``cid`` when given: a block of another hash than sha2-256), then count its bytes."""
        named: str = self._store.put(data, codec) if cid is None else self._store.put(data, codec, cid=cid)
        if self._count_put:
            self._progress.advance(len(data))
        return named

    def get(self, cid: str) -> bytes | None:
        """Fetch the block, then count its bytes."""
        data: bytes | None = self._store.get(cid)
        if self._count_get and data is not None:
            self._progress.advance(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
