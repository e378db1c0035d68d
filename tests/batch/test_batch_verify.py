"""What the driver believes of a worker's answer: re-hashed blocks, complete roots, output that matches its CID."""

from __future__ import annotations

from typing import Any

import pytest
from batch_witness import Shared

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.cid import raw_cid
from kuro_fs.fs import Fs
from kuro_wasm.batch.verify import accepted, worker_died
from kuro_wasm.batch.worker import CaptureStore, host_part
from kuro_wasm.host.api import run
from kuro_wasm.host.worker.verify import check_root
from kuro_wasm.model.invocation import Invocation, invocation

WRITE = ["guest/invoke", "fs/read", "fs/write"]


def _note(shared: Shared) -> tuple[Invocation, dict[str, Any]]:
    """A real worker answer: the note guest run over a capture store, as a worker runs it."""
    inv = invocation(
        {"guest": shared.batch, "export": "note", "args": [7], "grant": WRITE}, session_id="v", default_fs=shared.empty
    )
    capture = CaptureStore(shared.store)
    receipt = run(inv.session, inv.command, store=capture, home=False, **inv.run_options())
    return inv, {"receipt": host_part(receipt), "blocks": capture.written(receipt["kuro/fs-root-after"])}


def test_a_good_answer_is_stored_and_rebuilt_from_the_drivers_own_session_and_command(shared: Shared) -> None:
    inv, answer = _note(shared)
    driver = MemoryBlockStore()
    got = accepted(driver, inv, answer)
    assert got["kuro/outcome"] == "ok" and got["kuro/session-id"] == "v"
    assert Fs(driver, got["kuro/fs-root-after"]).read("notes/7").value == b"7"
    assert check_root(driver, got["kuro/fs-root-after"], set()) is None


def test_a_new_root_that_is_a_sharded_directory_is_believed(shared: Shared) -> None:
    # past 256 entries a kuro.fs directory is a HashMap: a write into such a root comes back as one
    big = Fs(shared.store, shared.empty)
    for i in range(300):
        big = big.write(f"f{i:03d}", b"x").fs
    inv = invocation(
        {"guest": shared.batch, "export": "note", "args": [7], "grant": WRITE}, session_id="v", default_fs=big.root
    )
    capture = CaptureStore(shared.store)
    receipt = run(inv.session, inv.command, store=capture, home=False, **inv.run_options())
    answer = {"receipt": host_part(receipt), "blocks": capture.written(receipt["kuro/fs-root-after"])}
    got = accepted(shared.store, inv, answer)
    assert got["kuro/outcome"] == "ok", got.get("kuro/error")
    assert Fs(shared.store, got["kuro/fs-root-after"]).read("notes/7").value == b"7"


def test_a_block_that_does_not_hash_to_its_cid_makes_a_host_error_and_keeps_no_root(shared: Shared) -> None:
    inv, answer = _note(shared)
    cid, data = answer["blocks"][0]
    answer["blocks"][0] = (cid, data + b"tampered")
    got = accepted(MemoryBlockStore(), inv, answer)
    assert got["kuro/outcome"] == "host-error" and got["kuro/exit-code"] == 70
    assert "kuro/fs-root-after" not in got and "did not verify" in got["kuro/error"]


def test_a_new_root_missing_a_block_is_not_believed(shared: Shared) -> None:
    inv, answer = _note(shared)
    answer["blocks"] = answer["blocks"][:1]  # the root alone: what it links to was never handed back
    got = accepted(MemoryBlockStore(), inv, answer)
    assert got["kuro/outcome"] == "host-error" and "neither in the store nor handed back" in got["kuro/error"]


def test_output_that_does_not_hash_to_its_cid_is_not_believed(shared: Shared) -> None:
    inv = invocation({"guest": shared.batch, "export": "echo", "args": [3]}, session_id="v", default_fs=shared.empty)
    receipt = run(inv.session, inv.command, store=shared.store, home=False, **inv.run_options())
    host = host_part(receipt)
    host["kuro/stdout"] = b"n=4\n"
    got = accepted(shared.store, inv, {"receipt": host, "blocks": []})
    assert got["kuro/outcome"] == "host-error" and raw_cid(b"n=3\n") in got["kuro/error"]


@pytest.mark.parametrize(
    "lie",
    [
        {"kuro/stdout-bytes": 0},  # beside the 4 bytes kept
        {"kuro/stderr": b"x", "kuro/stderr-bytes": 2},
        {"kuro/stdout": b"n=3\n!", "kuro/stdout-cid": raw_cid(b"n=3\n!")},  # output and CID agree, the count not
        {"kuro/truncated?": False},  # stated only when true: a false one is not a receipt the host makes
    ],
)
def test_output_counts_that_do_not_add_up_are_not_believed(shared: Shared, lie: dict[str, Any]) -> None:
    inv = invocation({"guest": shared.batch, "export": "echo", "args": [3]}, session_id="v", default_fs=shared.empty)
    receipt = run(inv.session, inv.command, store=shared.store, home=False, **inv.run_options())
    host = host_part(receipt)
    assert host["kuro/stdout"] == b"n=3\n" and host["kuro/stdout-bytes"] == 4
    got = accepted(shared.store, inv, {"receipt": {**host, **lie}, "blocks": []})
    assert got["kuro/outcome"] == "host-error", got
    assert accepted(shared.store, inv, {"receipt": host, "blocks": []})["kuro/outcome"] == "ok"


def test_a_receipt_the_model_refuses_is_a_host_error(shared: Shared) -> None:
    inv = invocation({"guest": shared.batch, "export": "echo", "args": [3]}, session_id="v", default_fs=shared.empty)
    got = accepted(shared.store, inv, {"receipt": {"kuro/exit-code": "zero"}, "blocks": []})
    assert got["kuro/outcome"] == "host-error"
    got = accepted(shared.store, inv, {"receipt": None, "blocks": "nope"})
    assert got["kuro/outcome"] == "host-error"


def test_a_died_receipt_says_which_worker_and_that_it_is_not_run_again(shared: Shared) -> None:
    inv = invocation({"guest": shared.batch, "export": "echo", "args": [3]}, session_id="v", default_fs=shared.empty)
    got = worker_died(inv, {"address": "tcp://10.0.0.9:1234", "pid": 42}, 1)
    assert (got["kuro/outcome"], got["kuro/exit-code"]) == ("worker-died", 137)
    assert got["kuro/worker"] == {"address": "tcp://10.0.0.9:1234", "pid": 42}
    assert "not run again" in got["kuro/error"]
    assert worker_died(inv, {"pid": 1, "signal": "SIGSEGV"}, 1)["kuro/exit-code"] == 139


def test_an_answer_whose_root_is_not_believed_leaves_nothing_in_the_store(shared: Shared) -> None:
    inv, answer = _note(shared)
    answer["blocks"] = answer["blocks"][:1]
    driver = MemoryBlockStore()
    assert accepted(driver, inv, answer)["kuro/outcome"] == "host-error"
    assert driver.cids() == []  # the root block it did hand back was not kept either
