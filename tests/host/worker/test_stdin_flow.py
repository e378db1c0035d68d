"""Streamed stdin has a pipe's backpressure, in-process and across the worker boundary: a guest that does not
read cannot make its host (or its worker) buffer without end."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hostkit import make_fs, make_session, wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.api import Handle, ProcessHandle, start
from kuro_wasm.host.context import STDIN_BUFFER_BYTES, StdinPipe
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.model import stream as _stream
from kuro_wasm.model.sessions import guest

BOUND = STDIN_BUFFER_BYTES
WAIT = 60.0  # a bound on waiting for an event, never a measured duration


@pytest.fixture(params=["wasmtime", "process"])
def isolation(request: pytest.FixtureRequest) -> Any:
    return request.param if request.param == "wasmtime" else request.getfixturevalue("pool")


def _start(isolation: Any, name: str, export: str, **options: Any) -> Handle:
    store = MemoryBlockStore()
    fs = make_fs(store)
    command = guest(add_guest(store, wat(name)), export)
    handle = start(make_session(fs), command, store=store, home=False, isolation=isolation, **options)
    assert isinstance(handle, Handle), handle
    return handle


def _unread(handle: Handle) -> int:
    """What the host counts as written and not yet read by the guest."""
    if isinstance(handle, ProcessHandle):
        return handle._run.stdin_written - handle._run.stdin_taken
    assert handle._job.ctx.stdin is not None
    return handle._job.ctx.stdin.pending()


def _wait_for(condition: Any) -> None:
    """Until ``condition()`` holds (a state the code must reach; no timing margin is asserted)."""
    event = threading.Event()
    while not condition():
        event.wait(0.005)


def test_a_writer_waits_once_the_bound_is_unread_and_returns_when_the_run_ends(isolation: Any) -> None:
    handle = _start(isolation, "spin", "run", timeout_ms=600_000)  # never reads stdin
    writer = threading.Thread(target=handle.write, args=(b"y" * (3 * BOUND),))
    writer.start()
    _wait_for(lambda: _unread(handle) >= BOUND)
    assert writer.is_alive()  # waiting for room, two bounds' worth not handed over
    assert _unread(handle) == BOUND
    handle.kill()
    writer.join(WAIT)
    assert not writer.is_alive()  # the run ended: the write returned, its rest dropped
    assert handle.wait(WAIT)["kuro/outcome"] == "cancelled"
    handle.write(b"more")  # after the end: ignored, never waits


def test_a_guest_that_reads_gets_every_byte_of_a_write_larger_than_the_bound(isolation: Any) -> None:
    data = bytes(range(256)) * (3 * BOUND // 256 + 7)
    handle = _start(isolation, "cat", "run", max_output_bytes=2 * len(data), timeout_ms=600_000)
    handle.write(data)  # one call, three bounds: passes through as the guest reads
    handle.close_stdin()
    receipt = handle.wait(WAIT)
    assert receipt["kuro/outcome"] == "ok", receipt
    assert _stream.kept_bytes(handle.stream, "stdout") == data


def test_an_on_chunk_callback_answering_output_with_input_never_waits_on_the_guest(isolation: Any) -> None:
    # on_chunk runs on the guest's thread (in-process) or the pool's reader thread (process): waiting there
    # for the guest to read would wait forever.
    answer = b"z" * (2 * BOUND)
    ready = threading.Event()
    box: list[Handle] = []

    def on_chunk(_s: _stream.Stream, _chunk: _stream.Chunk) -> None:
        ready.wait(WAIT)
        if len(box) == 1:
            box.append(box[0])
            box[0].write(answer)  # twice the bound, from the thread that delivers the output
            box[0].close_stdin()

    handle = _start(isolation, "cat", "run", stdin=b"x", on_chunk=on_chunk, max_output_bytes=4 * BOUND)
    box.append(handle)
    ready.set()
    receipt = handle.wait(WAIT * 2)
    assert receipt["kuro/outcome"] == "ok", receipt
    assert _stream.kept_bytes(handle.stream, "stdout") == b"x" + answer


def test_a_callback_feeding_output_back_as_input_many_times_over_never_stalls_the_worker(pool: WorkerPool) -> None:
    # Every socket buffer fills: the host's reader writes stdin from on_chunk while the worker's guest reads
    # and reports what it read. The worker reports only after letting its run's lock go, so its control
    # thread (which takes that lock to hand stdin over) keeps reading, and the run ends at its output cap
    # long before its deadline (it used to stall until the deadline, then be SIGKILLed).
    box: list[Handle] = []

    def on_chunk(_s: _stream.Stream, chunk: _stream.Chunk) -> None:
        box[0].write(chunk.data * 8)

    handle = _start(
        pool,
        "cat",
        "run",
        stdin=b"x" * (2 << 20),
        on_chunk=on_chunk,
        max_output_bytes=16 << 20,
        max_output_chunks=1 << 20,
        timeout_ms=600_000,
    )
    box.append(handle)
    receipt = handle.wait(WAIT * 5)
    assert receipt["kuro/outcome"] == "output-capped", receipt


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
    writer.join(WAIT)
    assert got == b"abcdefghij"


def test_an_unbounded_pipe_never_waits_and_reports_what_was_read() -> None:
    pipe = StdinPipe(threading.Condition(), bound=None)
    reports: list[int] = []
    pipe.on_take = reports.append
    pipe.write(b"x" * (3 * BOUND))
    assert pipe.pending() == 3 * BOUND
    while pipe.take(1 << 19):
        pipe.report()
    assert reports == [
        1 << 20,
        2 << 20,
        3 << 20,
        4 << 20,
        5 << 20,
        6 << 20,
        7 << 20,
        8 << 20,
        9 << 20,
        10 << 20,
        11 << 20,
        12 << 20,
    ]
