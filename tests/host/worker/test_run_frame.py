"""The run frame the pool writes out by hand, and the keeper's look at what it has buffered: both must say exactly
what the protocol's encoder and reader would."""

from __future__ import annotations

import io
import socket
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.worker import pool as pool_module
from kuro_wasm.host.worker.pool import WorkerPool, _Inbox
from kuro_wasm.host.worker.protocol import (
    MAX_JSON_BYTES,
    ProtocolError,
    encode,
    encode_fields,
    frame,
    framed,
    read_frame,
)

HOST = frozenset({"host"})
_WIRE = {"session": {"id": "s"}, "command": {"kuro/guest": "x"}, "fs": None, "limits": {}, "deadline": 1.5, "seed": 0}


@settings(max_examples=200, deadline=None)
@given(
    run_id=st.integers(min_value=1, max_value=2**63),
    stdin_closed=st.booleans(),
    present=st.booleans(),
    killed=st.booleans(),
    path=st.none() | st.text(),
)
def test_the_run_frame_written_by_hand_is_the_message_the_encoder_makes(
    run_id: int, stdin_closed: bool, present: bool, killed: bool, path: str | None
) -> None:
    store = MemoryBlockStore()
    guest = (store if present else MemoryBlockStore()).put(b"guest")
    run = SimpleNamespace(
        id=run_id,
        command={"kuro/guest": guest},
        store=store,
        fs_store=store,
        stdin_closed=stdin_closed,
        stop_reason="cancelled" if killed else None,
    )
    conn = SimpleNamespace(stores=())
    wire = encode_fields("run", _WIRE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pool_module, "_readable", lambda *_: path)
        head = WorkerPool._request(None, run, conn)  # type: ignore[arg-type]  # uses nothing of the pool
    first, rest = framed("run", head + wire[1:], b"stdin")
    fields = {"id": run_id, "stdin_closed": stdin_closed, "guest_present": present, "killed": killed}
    expected = {**fields, "store_path": path}
    assert first == frame("run", expected, b"stdin", wire)[0] and rest == b""
    message, payload = read_frame(io.BytesIO(first), HOST, lambda _m: 16) or ({}, b"")
    assert message == {"t": "run", **expected, **_WIRE} and payload == b"stdin"


def test_a_hand_written_frame_over_the_json_limit_is_refused() -> None:
    with pytest.raises(ProtocolError, match="over the"):
        framed("run", b'{"t":"run","x":"' + b"y" * MAX_JSON_BYTES + b'"}')


def test_the_keeper_sees_a_frame_as_here_only_once_every_byte_of_it_is() -> None:
    first = encode("took", {"id": 1, "n": 2})
    whole = first + encode("took", {"id": 1, "n": 3})
    left, right = socket.socketpair()
    with left, right:
        inbox = _Inbox(right)
        assert not inbox.complete
        one = len(first)
        sent = 0
        for cut in (3, one - 1, one, len(whole)):
            left.sendall(whole[sent:cut])
            sent = cut
            while len(inbox._buf) < cut:  # buffered as a read would leave it, nothing read yet
                inbox._buf += right.recv(1 << 16)
            assert inbox.complete is (cut >= one), cut
        assert read_frame(inbox, frozenset({"worker"}), lambda _m: 0) == ({"t": "took", "id": 1, "n": 2}, b"")
        assert inbox.complete
        assert read_frame(inbox, frozenset({"worker"}), lambda _m: 0) == ({"t": "took", "id": 1, "n": 3}, b"")
        assert not inbox.complete
