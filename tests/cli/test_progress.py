"""The progress bar: drawn only on a terminal, counted from block traffic (kuro_wasm.cli.progress)."""

from __future__ import annotations

import io

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
