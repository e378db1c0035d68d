"""The progress bar: drawn only on a terminal, counted from block traffic (kuro_wasm.cli.progress)."""

from __future__ import annotations

import io
import threading

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.cli.progress import Progress, ProgressStore, render


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_bar_on_a_stream_that_is_not_a_terminal_writes_nothing_at_all() -> None:
    out = io.StringIO()
    with Progress("import", 100, stream=out) as bar:
        bar.advance(50)
        bar.advance(50)
    assert out.getvalue() == ""


def test_a_bar_on_a_terminal_redraws_in_place_and_ends_its_line() -> None:
    out, clock = _Tty(), _Clock()
    with Progress("import", 100, stream=out, clock=clock) as bar:
        bar.advance(10)
        clock.now = 1.0
        bar.advance(40)
    text = out.getvalue()
    assert text.count("\r\x1b[K") == 3  # first draw, a later draw, the final 100 %
    assert "100%" in text and text.endswith("\n")


def test_redraws_are_throttled_to_the_interval() -> None:
    out, clock = _Tty(), _Clock()
    bar = Progress("x", 1000, stream=out, clock=clock, interval=0.5)
    for _ in range(100):
        bar.advance(1)  # the clock does not move: one draw only
    assert out.getvalue().count("\r") == 1


def test_a_failed_job_wipes_the_bar_instead_of_claiming_completion() -> None:
    out = _Tty()
    try:
        with Progress("import", 100, stream=out) as bar:
            bar.advance(10)
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert "100%" not in out.getvalue()
    assert out.getvalue().endswith("\r\x1b[K")


def test_the_bar_never_shows_more_than_the_total() -> None:
    line = render("import", 300, 100, 1.0, width=10)
    assert "[##########] 100%" in line


def test_an_unknown_total_shows_bytes_and_rate_without_a_bar() -> None:
    assert render("export", 3 * 1024 * 1024, None, 1.0) == "export 3.0 MiB 3.0 MiB/s"


def test_the_store_wrapper_counts_put_bytes_and_forwards_everything_else() -> None:
    store, out = MemoryBlockStore(), _Tty()
    bar = Progress("p", None, stream=out, enabled=True)
    wrapped = ProgressStore(store, bar)
    cid = wrapped.put(b"abcd")
    assert wrapped.get(cid) == b"abcd" and wrapped.has(cid)
    assert bar.done == 4
    assert wrapped.stats() == store.stats()


def test_the_store_wrapper_can_count_gets_instead_of_puts() -> None:
    store = MemoryBlockStore()
    cid = store.put(b"abcdef")
    bar = Progress("p", None, stream=io.StringIO())
    wrapped = ProgressStore(store, bar, count_put=False, count_get=True)
    wrapped.put(b"zz")
    wrapped.get(cid)
    assert bar.done == 6


# ---- a ticking line (kuro batch): redrawn while nothing advances, never after the end


class _Ticks:
    """A ``wait`` the test drives: each :meth:`release` lets the ticker draw once; ``close`` ends it."""

    def __init__(self) -> None:
        self.allowed = threading.Semaphore(0)
        self.waiting = threading.Semaphore(0)
        self.thread: threading.Thread | None = None

    def __call__(self, stop: threading.Event, period: float) -> bool:
        self.thread = threading.current_thread()
        self.waiting.release()  # the ticker is between draws
        while not self.allowed.acquire(timeout=0.05):  # a poll for the stop, not a timing margin
            if stop.is_set():
                return True
        return stop.is_set()

    def release(self) -> None:
        """Let one tick happen and wait until the ticker is between draws again."""
        self.allowed.release()
        self.waiting.acquire()


def test_a_ticking_line_redraws_without_advances_and_stops_at_close() -> None:
    out, clock, ticks = _Tty(), _Clock(), _Ticks()
    bar = Progress("batch", None, stream=out, clock=clock, line=lambda done, elapsed: f"{done} after {elapsed:.0f}s")
    bar.start_ticking(0.5, wait=ticks)
    ticks.waiting.acquire()  # the ticker waits for its first tick
    for second in (1, 2, 3):
        clock.now = float(second)
        ticks.release()
    assert out.getvalue() == "".join(f"\r\x1b[K0 after {s}s" for s in (1, 2, 3))
    bar.close()
    assert ticks.thread is not None and ticks.thread.daemon and not ticks.thread.is_alive()
    assert out.getvalue().endswith("\r\x1b[K0 after 3s\n")  # the final state, then nothing
    end = out.getvalue()
    bar.tick()
    assert out.getvalue() == end


def test_close_wakes_a_ticker_that_waits_a_long_period_and_joins_it() -> None:
    out = _Tty()
    bar = Progress("batch", None, stream=out, line=lambda done, elapsed: "line")
    bar.start_ticking(10**6)
    ticker = next(t for t in threading.enumerate() if t.name == "kuro-progress-batch")
    assert ticker.daemon  # a batch that ends without close() (a crash) does not wait for it
    bar.close()
    assert not ticker.is_alive() and out.getvalue() == "\r\x1b[Kline\n"


def test_a_failed_job_stops_the_ticker_and_wipes_the_line() -> None:
    out, ticks = _Tty(), _Ticks()
    try:
        with Progress("batch", None, stream=out, line=lambda done, elapsed: "line") as bar:
            bar.start_ticking(0.5, wait=ticks)
            ticks.waiting.acquire()
            ticks.release()
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert ticks.thread is not None and not ticks.thread.is_alive()
    assert out.getvalue() == "\r\x1b[Kline\r\x1b[K"
    bar.tick()
    assert out.getvalue() == "\r\x1b[Kline\r\x1b[K"


def test_a_line_that_is_not_on_a_terminal_starts_no_ticker() -> None:
    before = set(threading.enumerate())
    bar = Progress("batch", None, stream=io.StringIO(), line=lambda done, elapsed: "line")
    bar.start_ticking(0.01)
    assert set(threading.enumerate()) == before
    bar.close()
