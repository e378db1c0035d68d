"""Components under ``isolation="process"``: the spec's args and the typed result cross the worker boundary intact."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hostkit import component, make_fs, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.errors import HostError
from kuro_wasm.host.api import run, start
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker import pool as pool_module
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.host.worker.protocol import MAX_JSON_BYTES, ProtocolError, command_data, command_of
from kuro_wasm.model.sessions import guest

CID = "bafkreicwk4quvp7jvrrivokpcyjnsjrcnj3lbqnzkowucmqsrzkkrbmyoq"
WAIT_MS = 60_000  # a bound on a run that takes milliseconds, never a measured duration


@pytest.mark.parametrize(
    ("export", "args", "result"),
    [
        ("sum-bytes", [b"abc"], 294),  # bytes for a list<u8>: the run frame carries bytes
        ("sum-bytes", [b""], 0),
        ("sum-bytes", [[1, 2, 3]], 6),
        ("fill", [3], b"\x07\x07\x07"),
    ],
)
def test_a_components_bytes_cross_to_the_worker_and_back(
    pool: WorkerPool, export: str, args: list[object], result: object
) -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, component("typed"))
    receipt = run(make_session(fs), guest(cid, export, args), store=store, fs=fs, isolation=pool, timeout_ms=WAIT_MS)
    assert (receipt["kuro/outcome"], receipt.get("kuro/result")) == ("ok", result), receipt
    assert receipt["kuro/isolation"] == "process"


def test_a_command_holding_bytes_crosses_as_dag_cbor_and_comes_back_exactly() -> None:
    plain = dict(guest(CID, "f", [1, "x", {"/": {"bytes": "aGk"}}]))
    assert command_data(plain) is plain  # no bytes: the command itself, as JSON
    held = dict(guest(CID, "f", [b"\x00\xff", [{"k": b""}], {"/": {"bytes": "aGk"}}]))
    wire = command_data(held)
    assert wire[0] == "dag-cbor" and command_of(json.loads(json.dumps(wire))) == held
    for bad in (["dag-cbor", "!!"], ["dag-cbor", "AAAA"], ["cbor", ""], ["dag-cbor"]):
        with pytest.raises(ProtocolError):
            command_of(bad)


def test_args_too_large_for_a_run_frame_are_refused_at_once_not_left_to_hang(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, component("typed"))
    spec = guest(cid, "sum-bytes", [b"\1" * (3 << 20)])  # within max_value_bytes; 4 MiB of base64 in the frame
    with pytest.raises(HostError, match=r"cannot be sent to a worker process: .* over the 4194304-byte limit"):
        run(make_session(fs), spec, store=store, fs=fs, isolation=pool, timeout_ms=WAIT_MS)
    fits = run(make_session(fs), guest(cid, "sum-bytes", [b"\1" * (2 << 20)]), store=store, fs=fs, isolation=pool)
    assert (fits["kuro/outcome"], fits["kuro/result"]) == ("ok", 2 << 20)


def test_a_run_whose_frame_breaks_its_limit_at_dispatch_fails_there_and_the_pool_goes_on(
    pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fields decided at dispatch (an id, a deadline, flags, a store directory) are a few dozen bytes of the
    # frame's own JSON; were one ever past the frame's limit, its run fails with the submit's error, not hangs.
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, component("typed"))
    monkeypatch.setattr(pool_module, "_readable", lambda *_args: "x" * MAX_JSON_BYTES)
    with pytest.raises(HostError, match=r"cannot be sent to a worker process: .* over the 4194304-byte limit"):
        run(make_session(fs), guest(cid, "sum-bytes", [b"abc"]), store=store, fs=fs, isolation=pool, timeout_ms=WAIT_MS)
    monkeypatch.undo()
    after = run(make_session(fs), guest(cid, "sum-bytes", [b"abc"]), store=store, fs=fs, isolation=pool)
    assert (after["kuro/outcome"], after["kuro/result"]) == ("ok", 294)


def test_a_worker_runs_a_plain_component_on_the_hosts_own_canonical_abi(pool: WorkerPool) -> None:
    # 3 MiB of list<u8> out of the guest: past what wasmtime's component path lets one call copy (its hostcall
    # fuel, ~2.7 MiB, a trap there), within max_value_bytes: only the host's own canonical ABI returns it
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, component("typed"))
    spec = guest(cid, "fill", [3 << 20])
    receipt = run(make_session(fs), spec, store=store, fs=fs, isolation=pool, timeout_ms=WAIT_MS)
    assert (receipt["kuro/outcome"], receipt["kuro/isolation"]) == ("ok", "process"), receipt
    assert receipt["kuro/result"] == b"\x07" * (3 << 20)
    alone = run(make_session(fs), spec, store=store, fs=fs, timeout_ms=WAIT_MS)
    same = ("kuro/exit-code", "kuro/outcome", "kuro/result", "kuro/reads", "kuro/guest-kind")
    assert {k: receipt.get(k) for k in same} == {k: alone.get(k) for k in same}


def test_a_plain_components_core_modules_are_serialized_once_for_every_worker_that_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each worker asks the host for the guest it has not run; the host serialized a plain component's core
    modules anew for every one of them. Two workers asking now cost one serialization of each module."""
    serialized: list[int] = []

    def counting(module: Any) -> bytes:
        serialized.append(id(module))
        return bytes(module.serialize())

    monkeypatch.setattr(pool_module, "MODULE", dataclasses.replace(pool_module.MODULE, serialize=counting))
    store = MemoryBlockStore()
    fs = make_fs(store)
    cid = add_guest(store, component("typed"))
    cat = guest(cid, "run", ["cat"])
    with WorkerPool(2, spare=0) as two:
        assert two.wait_ready(60)
        held = start(make_session(fs), cat, store=store, fs=fs, isolation=two, timeout_ms=WAIT_MS)
        held.write(b"first ")  # (its worker is busy with it until stdin closes: the next run takes the other)
        other = run(make_session(fs), cat, store=store, fs=fs, stdin=b"second", isolation=two, timeout_ms=WAIT_MS)
        held.close_stdin()
        first = held.wait()
    assert (first["kuro/stdout"], other["kuro/stdout"]) == (b"first ", b"second")
    assert first["kuro/worker"]["pid"] != other["kuro/worker"]["pid"]  # two workers asked
    assert serialized and len(serialized) == len(set(serialized))  # each core module once
