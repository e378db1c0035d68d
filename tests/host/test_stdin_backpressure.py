"""Streamed stdin has a pipe's backpressure: a guest that does not read cannot make its host buffer without end."""

from __future__ import annotations

import threading
from typing import Any

from hostkit import make_fs, make_session, wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.api import Handle, start
from kuro_wasm.host.context import STDIN_BUFFER_BYTES, StdinPipe
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model import stream as _stream
from kuro_wasm.model.sessions import guest

BOUND = STDIN_BUFFER_BYTES


def _start(export_wat: str, export: str, **options: Any) -> Handle:
    store = MemoryBlockStore()
    fs = make_fs(store)
    handle = start(
        make_session(fs), guest(add_guest(store, wat(export_wat)), export), store=store, home=False, **options
    )
    assert isinstance(handle, Handle), handle
    return handle


def _wait_for(condition: Any) -> None:
    """Until ``condition()`` holds (a state the code must reach; no timing margin is asserted)."""
    event = threading.Event()
    while not condition():
        event.wait(0.005)


def test_a_writer_waits_once_the_bound_is_buffered_and_returns_when_the_run_ends() -> None:
    handle = _start("spin", "run", timeout_ms=600_000)  # never reads stdin
    pipe = handle._job.ctx.stdin
    assert pipe is not None
    writer = threading.Thread(target=handle.write, args=(b"y" * (3 * BOUND),))
    writer.start()
    _wait_for(lambda: pipe.pending() >= BOUND)
    assert writer.is_alive()  # waiting for room, holding two bounds' worth unbuffered
    assert pipe.pending() == BOUND
    handle.kill()
    writer.join(60)
    assert not writer.is_alive()  # the run ended: the write returned, its rest dropped
    assert handle.wait()["kuro/outcome"] == "cancelled"
    handle.write(b"more")  # after the end: ignored, never waits
    assert pipe.pending() == BOUND


def test_a_guest_that_reads_gets_every_byte_of_a_write_larger_than_the_bound() -> None:
    data = bytes(range(256)) * (3 * BOUND // 256 + 7)
    handle = _start("cat", "run", max_output_bytes=2 * len(data))
    handle.write(data)  # one call, three bounds: passes through as the guest reads
    handle.close_stdin()
    receipt = handle.wait()
    assert receipt["kuro/outcome"] == "ok", receipt
    assert _stream.kept_bytes(handle.stream, "stdout") == data


def test_an_on_chunk_callback_answering_output_with_input_never_waits_on_the_guest() -> None:
    # The callback runs on the guest's thread: waiting for the guest to read would wait forever.
    answer = b"z" * (2 * BOUND)
    answered: list[int] = []
    handle_box: list[Handle] = []

    def on_chunk(_stream: _stream.Stream, chunk: _stream.Chunk) -> None:
        if not answered:
            answered.append(1)
            handle_box[0].write(answer)  # twice the bound, from the guest's own thread
            handle_box[0].close_stdin()

    store = MemoryBlockStore()
    fs = make_fs(store)
    ready = threading.Event()

    def gated(stream: _stream.Stream, chunk: _stream.Chunk) -> None:
        ready.wait(60)
        on_chunk(stream, chunk)

    handle = start(
        make_session(fs),
        guest(add_guest(store, wat("cat")), "run"),
        store=store,
        home=False,
        stdin=b"x",
        on_chunk=gated,
        max_output_bytes=4 * BOUND,
    )
    assert isinstance(handle, Handle)
    handle_box.append(handle)
    ready.set()
    receipt = handle.wait(120)
    assert receipt["kuro/outcome"] == "ok", receipt
    assert _stream.kept_bytes(handle.stream, "stdout") == b"x" + answer


def test_the_pipe_alone_keeps_at_most_its_bound_and_hands_the_rest_over_as_it_is_read() -> None:
    cond = threading.Condition()
    pipe = StdinPipe(cond, bound=4)
    writer = threading.Thread(target=pipe.write, args=(b"abcdefghij",))
    writer.start()
    _wait_for(lambda: pipe.pending() >= 4)
    got = b""
    while len(got) < 10:
        with cond:
            piece = pipe.take(3)
        if piece:
            got += piece
        else:
            _wait_for(lambda: pipe.pending() > 0)
        assert pipe.pending() <= 4
    writer.join(60)
    assert got == b"abcdefghij"


def test_an_unbounded_pipe_never_waits() -> None:
    pipe = StdinPipe(threading.Condition(), bound=None)
    pipe.write(b"x" * (3 * BOUND))
    assert pipe.pending() == 3 * BOUND
