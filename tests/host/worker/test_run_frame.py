"""The run frame the pool writes out by hand must be exactly the message the protocol's encoder would make, and a
worker must read the same fixed fields from it whether it has seen their bytes before or not."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.worker import pool as pool_module
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.host.worker.protocol import (
    MAX_JSON_BYTES,
    RUN_FIXED,
    ProtocolError,
    decode_fixed,
    encode_fields,
    frame,
    framed,
    read_frame,
)
from kuro_wasm.host.worker.serve import _fixed

HOST = frozenset({"host"})
_FIXED = {"session": {"id": "s"}, "command": {"kuro/guest": "x"}, "fs": None, "limits": {}, "seed": 0}
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    run_id=st.integers(min_value=1, max_value=2**63),
    deadline=st.floats(min_value=0, max_value=1e300),
    stdin_closed=st.booleans(),
    present=st.booleans(),
    killed=st.booleans(),
    path=st.none() | st.text(),
    stdin=st.binary(max_size=64),
)
def test_the_run_frame_written_by_hand_is_the_message_the_encoder_makes(
    run_id: int, deadline: float, stdin_closed: bool, present: bool, killed: bool, path: str | None, stdin: bytes
) -> None:
    store = MemoryBlockStore()
    guest = (store if present else MemoryBlockStore()).put(b"guest")
    wire = encode_fields("run", _FIXED)
    run = SimpleNamespace(
        id=run_id,
        deadline=deadline,
        command={"kuro/guest": guest},
        store=store,
        fs_store=store,
        stdin_closed=stdin_closed,
        stop_reason="cancelled" if killed else None,
        wire=wire,
    )
    conn = SimpleNamespace(stores=())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pool_module, "_readable", lambda *_: path)
        head = WorkerPool._request(None, run, conn)  # type: ignore[arg-type]  # uses nothing of the pool
    first, rest = framed("run", head, wire + stdin)
    fields = {"id": run_id, "deadline": deadline, "stdin_closed": stdin_closed, "guest_present": present}
    expected = {**fields, "killed": killed, "store_path": path, "fixed": len(wire)}
    assert first == frame("run", expected, wire + stdin)[0] and rest == b""
    message, payload = read_frame(io.BytesIO(first), HOST, lambda _m: 1 << 10) or ({}, b"")
    assert message == {"t": "run", **expected} and payload == wire + stdin
    assert decode_fixed(payload[: message["fixed"]]) == _FIXED and payload[message["fixed"] :] == stdin


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries({name: _JSON for name in sorted(RUN_FIXED)}), st.integers(0, 2))
def test_fixed_fields_read_again_by_their_bytes_are_those_the_encoder_wrote(fields: dict[str, Any], seen: int) -> None:
    data = encode_fields("run", fields)
    for _ in range(seen):  # the worker has read these bytes before (or not)
        _fixed(data)
    assert _fixed(data) == fields == json.loads(data)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"[]", "must be exactly"),
        (b'{"session":{},"limits":{},"command":{},"fs":null}', "must be exactly"),
        (b'{"session":{},"limits":{},"command":{},"fs":null,"seed":0,"more":1}', "must be exactly"),
        (b'{"session":NaN,"limits":{},"command":{},"fs":null,"seed":0}', "not JSON"),
        (b'{"session":', "not JSON"),
        (b"\xff", "not JSON"),
    ],
)
def test_fixed_fields_that_are_not_a_runs_are_a_protocol_error(data: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        _fixed(data)
    with pytest.raises(ProtocolError, match=why):  # refused again: a refusal is never remembered
        _fixed(data)


def test_fixed_fields_over_the_json_limit_are_refused_unread() -> None:
    with pytest.raises(ProtocolError, match="over the"):
        decode_fixed(b" " * (MAX_JSON_BYTES + 1))


def test_a_hand_written_frame_over_the_json_limit_is_refused() -> None:
    with pytest.raises(ProtocolError, match="over the"):
        framed("run", b'{"t":"run","x":"' + b"y" * MAX_JSON_BYTES + b'"}')
