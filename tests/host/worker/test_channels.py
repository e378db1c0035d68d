"""A worker's two channels from the host: runs (and the replies to its asks) on one, control frames on the other.

The two channels are not ordered with each other, so a control frame can reach a worker before the run
it is about: the worker keeps it and applies it when it reads the run. These tests play the host by hand,
frame by frame, on one freshly forked worker each, to make every such order happen on purpose.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hostkit import wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker.hardening import Hardening, closed_homes
from kuro_wasm.host.worker.protocol import decode_receipt, encode_fields, read_frame, send
from kuro_wasm.host.worker.zygote import Zygote
from kuro_wasm.model.limits import Limits
from kuro_wasm.model.sessions import guest, session

WAIT = 60.0
WORKER = frozenset({"worker"})


class _Host:
    """One worker and the host's end of its two channels; asks are answered from ``store``; ``out`` holds
    each run's stdout."""

    def __init__(self, zygote: Zygote, store: MemoryBlockStore) -> None:
        options = {
            "hardening": Hardening(filesystem=False, namespaces=False, address_space=None).to_data(),
            "test_hooks": True,
            "closed": closed_homes(),
        }
        self.zygote = zygote
        self.sock, self.ctl = zygote.fork(options)
        self.sock.settimeout(WAIT)  # a guard against a hang, never a margin a test relies on
        self.stream = self.sock.makefile("rb")
        self.store = store
        self.session = session("s-channels", Fs.empty(store).root).to_data()
        hello = self.frame()
        assert hello is not None and hello[0]["t"] == "hello"
        self.pid = int(hello[0]["pid"])
        self.out: dict[int, bytearray] = {}
        self.took: dict[int, int] = {}  # run id -> the last ``took``: stdin bytes its guest has read in all

    def run(self, run_id: int, cid: str, *, stdin: bytes = b"", closed: bool = False, killed: bool = False) -> None:
        fixed = encode_fields(
            "run",
            {"session": self.session, "command": dict(guest(cid, "run")), "fs": None,
             "limits": Limits().as_options(), "seed": None},
        )  # fmt: skip
        fields = {
            "id": run_id,
            "deadline": time.monotonic() + WAIT,
            "stdin_closed": closed,
            "guest_present": True,
            "killed": killed,
            "store_path": None,
            "fixed": len(fixed),
        }
        send(self.sock, "run", fields, fixed + stdin)

    def control(self, kind: str, run_id: int, payload: bytes = b"") -> None:
        send(self.ctl, kind, {"id": run_id}, payload)

    def barrier(self) -> list[dict[str, Any]]:
        """Every control frame sent so far has been acted on (the worker acts on them in order); the frames
        the worker sent before its answer to this barrier."""
        send(self.ctl, "probe", {"what": "status"})
        before = []
        while (message := self.next_frame())["t"] != "probed":
            before.append(message)
        return before

    def frame(self) -> tuple[dict[str, Any], bytes] | None:
        return read_frame(self.stream, WORKER, lambda _m: 1 << 30)

    def next_frame(self) -> dict[str, Any]:
        """The worker's next frame that is not an ask (asks are answered; chunks are kept in ``out``; a ``done``
        has its receipt decoded from its payload)."""
        while True:
            frame = self.frame()
            assert frame is not None, "the worker closed its channel"
            message, payload = frame
            kind = message["t"]
            if kind == "done":
                return {**message, "receipt": decode_receipt(message["receipt"], payload)}
            if kind == "module":  # nothing compiled to give: the worker loads the guest's bytes itself
                send(self.sock, "compiled", {"rid": message["rid"], "kind": None, "meta": 0, "parts": []})
            elif kind in ("get", "has"):
                block = self.store.get(message["cid"])
                found = block is not None if kind == "get" else self.store.has(message["cid"])
                send(self.sock, "reply", {"rid": message["rid"], "found": found, "fault": None}, block or b"")
            elif kind == "chunk":
                if message["stream"] == "stdout":
                    self.out.setdefault(message["id"], bytearray()).extend(payload)
                return message
            elif kind == "took":  # how much stdin the guest read: a real host's writer waits on it
                self.took[message["id"]] = message["n"]
            else:
                return message

    def done(self, run_id: int) -> dict[str, Any]:
        """The receipt fields of run ``run_id``'s ``done``; every other frame before it must be a chunk."""
        while True:
            message = self.next_frame()
            if message["t"] != "chunk":
                assert (message["t"], message["id"]) == ("done", run_id), message
                return dict(message["receipt"])

    def exited(self) -> int | None:
        """The worker's wait status, once it has exited."""
        return self.zygote.exit_status(self.pid, WAIT)

    def close(self) -> None:
        for sock in (self.sock, self.ctl):
            sock.close()


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    started = Zygote()
    yield started
    started.close()


@pytest.fixture
def store() -> MemoryBlockStore:
    return MemoryBlockStore()


@pytest.fixture
def host(zygote: Zygote, store: MemoryBlockStore) -> Iterator[_Host]:
    started = _Host(zygote, store)
    yield started
    started.close()


def _guests(store: MemoryBlockStore) -> tuple[str, str]:
    return add_guest(store, wat("cat")), add_guest(store, wat("hello"))


def test_a_kill_that_comes_before_its_run_frame_cancels_the_run_when_it_is_read(host: _Host) -> None:
    cat, hello = _guests(host.store)
    host.control("kill", 1)
    assert host.barrier() == []
    host.run(1, cat)  # stdin stays open: only the kill can end it
    assert host.done(1)["kuro/outcome"] == "cancelled"
    host.run(2, hello, closed=True)
    assert host.done(2)["kuro/outcome"] == "ok"  # the kill was the run's own, not the next one's


def test_stdin_and_eof_before_and_after_the_run_frame_reach_the_guest_in_order(host: _Host) -> None:
    cat, _ = _guests(host.store)
    host.control("stdin", 1, b"ab")
    assert host.barrier() == []
    host.run(1, cat, stdin=b"01")  # what the host held when it sent the run comes first
    host.control("stdin", 1, b"cd")
    host.control("eof", 1)
    assert host.done(1)["kuro/outcome"] == "ok"
    assert bytes(host.out[1]) == b"01abcd"


def test_an_eof_before_the_run_frame_ends_its_input(host: _Host) -> None:
    cat, _ = _guests(host.store)
    host.control("eof", 1)
    host.control("stdin", 1, b"after the end")  # ignored, as for a run already read
    assert host.barrier() == []
    host.run(1, cat, stdin=b"x")
    assert host.done(1)["kuro/outcome"] == "ok"
    assert bytes(host.out[1]) == b"x"


def test_a_withdraw_of_a_run_not_yet_read_is_granted_and_that_run_never_runs(host: _Host) -> None:
    cat, hello = _guests(host.store)
    host.control("withdraw", 1)
    assert host.next_frame() == {"t": "withdrawn", "id": 1, "ok": True}
    host.run(1, cat)  # would wait for stdin forever if it ran
    host.run(2, hello, closed=True)
    assert host.done(2)["kuro/outcome"] == "ok"  # the first frame about any run is run 2's
    assert 1 not in host.out


def test_a_granted_withdraw_reaches_the_host_before_any_frame_of_the_next_run(host: _Host) -> None:
    _, hello = _guests(host.store)
    host.control("withdraw", 1)  # races with the worker reading run 1: granted or refused, never both
    host.run(1, hello, closed=True)
    host.run(2, hello, closed=True)
    seen = []
    while not seen or seen[-1][:2] != ("done", 2):
        message = host.next_frame()
        seen.append((message["t"], message["id"], message.get("ok")))
    frames = [f for f in seen if f[0] != "chunk"]
    if ("withdrawn", 1, True) in frames:  # heard of before anything of run 2; run 1 never ran
        assert frames == [("withdrawn", 1, True), ("done", 2, None)]
    else:  # refused (or unanswered: run 1 had finished), and run 1 ran
        assert [f for f in frames if f[0] == "done"] == [("done", 1, None), ("done", 2, None)]
        assert {f for f in frames if f[0] != "done"} <= {("withdrawn", 1, False)}


def test_a_withdraw_of_a_queued_run_is_granted_while_another_runs(host: _Host) -> None:
    cat, hello = _guests(host.store)
    host.run(1, cat)
    host.control("stdin", 1, b"x")
    assert host.next_frame()["t"] == "chunk"  # run 1 runs, blocked on stdin
    host.run(2, hello, closed=True)
    host.control("withdraw", 2)
    assert host.next_frame() == {"t": "withdrawn", "id": 2, "ok": True}
    host.control("eof", 1)
    assert host.done(1)["kuro/outcome"] == "ok"
    host.run(3, hello, closed=True)
    assert host.done(3)["kuro/outcome"] == "ok"  # run 2 was skipped
    assert 2 not in host.out


def test_a_withdraw_of_a_running_or_finished_run_is_never_granted(host: _Host) -> None:
    cat, _ = _guests(host.store)
    host.run(1, cat)
    host.control("stdin", 1, b"x")
    assert host.next_frame()["t"] == "chunk"
    host.control("withdraw", 1)
    assert host.next_frame() == {"t": "withdrawn", "id": 1, "ok": False}
    host.control("eof", 1)
    assert host.done(1)["kuro/outcome"] == "ok"
    host.control("withdraw", 1)
    host.control("kill", 1)  # late: nothing left to act on
    # unanswered once the worker has forgotten the run, refused just before: never granted
    assert host.barrier() in ([], [{"t": "withdrawn", "id": 1, "ok": False}])


@pytest.mark.parametrize("channel", ["run", "control"])
def test_the_host_closing_either_channel_stops_the_running_guest_and_the_worker(host: _Host, channel: str) -> None:
    cat, _ = _guests(host.store)
    host.run(1, cat)
    host.control("stdin", 1, b"x")
    assert host.next_frame()["t"] == "chunk"  # the guest runs, blocked on stdin
    if channel == "run":
        host.sock.shutdown(socket.SHUT_RDWR)
    else:
        host.ctl.close()
    status = host.exited()
    assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    if channel == "control":
        assert host.frame() is None  # no done: the run was stopped with the worker


@pytest.mark.parametrize(
    ("fixed", "payload"),
    [
        (-1, b""),  # a run's own fixed fields, said to be longer than the payload that holds them
        (2, b"{}"),  # a JSON object, not a run's fixed fields
        (3, b"[1]"),  # not an object
        (4, b'{"se'),  # not JSON
    ],
)
def test_a_run_frame_whose_fixed_fields_are_not_a_runs_ends_the_worker_before_anything_runs(
    host: _Host, fixed: int, payload: bytes
) -> None:
    if fixed < 0:
        spec = {"command": dict(guest(_guests(host.store)[1], "run")), "fs": None, "seed": None}
        payload = encode_fields("run", {**spec, "session": host.session, "limits": Limits().as_options()})
        fixed = len(payload) + 1
    fields = {"id": 1, "deadline": time.monotonic() + WAIT, "stdin_closed": True, "guest_present": True}
    send(host.sock, "run", {**fields, "killed": False, "store_path": None, "fixed": fixed}, payload)
    assert host.frame() is None  # no ask, no chunk, no done: the worker read nothing more and left
    status = host.exited()
    assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_the_host_closing_the_run_channel_ends_an_idle_worker(host: _Host) -> None:
    host.sock.shutdown(socket.SHUT_RDWR)
    status = host.exited()
    assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_runs_read_while_the_worker_waits_for_its_asks_are_run_after_in_order(host: _Host) -> None:
    cat, hello = _guests(host.store)
    host.run(1, hello, closed=True)
    first = host.frame()  # the worker has never run this guest: it asks for it
    assert first is not None and first[0]["t"] == "module"
    host.run(2, cat, stdin=b"two")  # read by the worker while it waits for its answer
    host.control("eof", 2)
    host.run(3, hello, closed=True)
    send(host.sock, "compiled", {"rid": first[0]["rid"], "kind": None, "meta": 0, "parts": []})
    assert host.done(1)["kuro/outcome"] == "ok"
    assert bytes(host.out[1]) == b"hello, kuro\n"
    assert host.done(2)["kuro/outcome"] == "ok"
    assert bytes(host.out[2]) == b"two"
    assert host.done(3)["kuro/outcome"] == "ok"


def test_the_host_closing_while_the_worker_waits_for_an_answer_ends_the_worker(host: _Host) -> None:
    _, hello = _guests(host.store)
    host.run(1, hello, closed=True)
    asked = host.frame()
    assert asked is not None and asked[0]["t"] == "module"
    host.sock.shutdown(socket.SHUT_RDWR)  # no answer will ever come
    status = host.exited()
    assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
