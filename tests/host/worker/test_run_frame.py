"""The run frame the pool writes out by hand must be exactly the message the protocol's encoder would make."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.worker import pool as pool_module
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.host.worker.protocol import (
    MAX_JSON_BYTES,
    ProtocolError,
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
