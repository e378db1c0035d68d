"""What the original kuro's grant names gate here: a scratch directory that is never committed, and checkpoints.

The guest-visible cases are fixtures (``guests/fixtures/scratch-*.toml`` and the alias cases);
these tests pin what a fixture cannot see: where scratch blocks go, the scratch bound, and
``Handle.checkpoint`` under ``agent/checkpoint``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hostkit import make_fs

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host import fsgate
from kuro_wasm.host.api import Handle, run, start
from kuro_wasm.host.context import RunContext
from kuro_wasm.model.checkpoint import abandon, restore
from kuro_wasm.model.sessions import guest, session

HANG_GUARD = 10.0  # seconds: only so a broken host fails instead of hanging the suite


def test_scratch_writes_leave_no_block_in_the_store(store: MemoryBlockStore, guest_cid: Callable[[str], str]) -> None:
    fs = make_fs(store, {"greeting.txt": "hi"})
    cid = guest_cid("scratch")
    before = set(store.cids())
    r = run(session("s", fs.root, grant=["guest/invoke", "tmp/write"]), guest(cid, "run"), store=store, home=False)
    assert (r["kuro/exit-code"], r["kuro/stdout"]) == (0, b"scratch works")
    assert set(store.cids()) == before
    assert "kuro/fs-root-after" not in r


def test_the_scratch_directory_is_per_run(store: MemoryBlockStore, guest_cid: Callable[[str], str]) -> None:
    fs = make_fs(store)
    sess = session("s", fs.root, grant=["guest/invoke", "fs/scratch"])
    run(sess, guest(guest_cid("scratch"), "run"), store=store, home=False)
    again = run(sess, guest(guest_cid("scratch"), "ls"), store=store, home=False)
    assert (again["kuro/exit-code"], again["kuro/stdout"]) == (0, b"")  # the first run's tmp/notes.txt is gone


def test_writes_past_the_scratch_bound_store_nothing_and_answer_io() -> None:
    run_ = RunContext(grant=frozenset({"fs/scratch"}), emit=lambda name, data: True)
    assert fsgate.call_in(run_, "fs_write", "fs/write", "write", "a.txt", b"ok", scratch=True).reason is None
    run_.scratch_bytes = fsgate.SCRATCH_MAX_BYTES - 1
    refused = fsgate.call_in(run_, "fs_write", "fs/write", "write", "b.txt", b"xy", scratch=True)
    assert refused.reason == "over-budget" and refused.fs is None  # the guest sees TOO_LARGE (-9)
    assert run_.denials == []


def test_a_write_the_scratch_refused_is_not_counted_against_its_bound() -> None:
    # Only bytes written count: a refused write (over the bound, or a bad path) stored nothing,
    # so a later write that fits in what is left is accepted.
    run_ = RunContext(grant=frozenset({"fs/scratch"}), emit=lambda name, data: True)
    run_.scratch_bytes = fsgate.SCRATCH_MAX_BYTES - 10
    assert fsgate.call_in(run_, "fs_write", "fs/write", "write", "big", b"x" * 11, scratch=True).reason == "over-budget"
    assert fsgate.call_in(run_, "fs_write", "fs/write", "write", "a/../b", b"x" * 5, scratch=True).reason == "bad-path"
    assert fsgate.call_in(run_, "fs_write", "fs/write", "write", "fits", b"x" * 10, scratch=True).reason is None
    assert run_.scratch_bytes == fsgate.SCRATCH_MAX_BYTES


def test_a_path_is_in_the_scratch_only_with_fs_scratch_and_only_under_tmp() -> None:
    granted = RunContext(grant=frozenset({"fs/scratch"}), emit=lambda name, data: True)
    plain = RunContext(grant=frozenset({"fs/write"}), emit=lambda name, data: True)
    assert [fsgate.scratch_path(granted, p) for p in ("tmp/a", "/tmp//b/c", "./tmp", "tmpx/a", "a/tmp", "../tmp")] == [
        "a", "b/c", ".", None, None, None,
    ]  # fmt: skip
    assert fsgate.scratch_path(plain, "tmp/a") is None


# ---- agent/checkpoint gates taking a checkpoint of a run


def _live_cat(mode: str, store: MemoryBlockStore, cid: str, home: Path) -> tuple[Handle, threading.Event]:
    wrote = threading.Event()
    handle = start(
        session("s", make_fs(store).root, mode),
        guest(cid, "run"),
        store=store,
        home=home,
        on_chunk=lambda stream, chunk: wrote.set(),
    )
    assert isinstance(handle, Handle), handle
    handle.write(b"hello")
    assert wrote.wait(HANG_GUARD)
    return handle, wrote


def test_a_checkpoint_of_a_live_run_needs_agent_checkpoint(
    store: MemoryBlockStore, guest_cid: Callable[[str], str], home: Path
) -> None:
    with _live_cat("terminal-repo", store, guest_cid("cat"), home)[0] as handle:
        assert handle.checkpoint() == {
            "kuro/type": "kuro/denial",
            "kuro/allowed?": False,
            "kuro/reason": "missing-capabilities",
            "kuro/session-id": "s",
            "kuro/mode": "terminal-repo",
            "kuro/isolation": "none",
            "kuro/missing": ["agent/checkpoint"],
        }


def test_with_agent_checkpoint_a_live_run_checkpoints_and_restores_orphaned(
    store: MemoryBlockStore, guest_cid: Callable[[str], str], home: Path
) -> None:
    with _live_cat("terminal-agent", store, guest_cid("cat"), home)[0] as handle:
        data = handle.checkpoint()
        assert data["kuro.checkpoint/state"] == "running"
        restored = restore(data)
        assert restored.state == "orphaned" and restored.stdout_bytes == 5
        assert data["kuro/command"]["kuro/export"] == "run"


@pytest.mark.parametrize("isolation", ["wasmtime", "process"])
def test_an_abandoned_checkpoint_of_a_live_run_states_the_isolation_it_ran_under(
    store: MemoryBlockStore, guest_cid: Callable[[str], str], home: Path, isolation: str
) -> None:
    sess = session("s-iso", make_fs(store).root, "terminal-agent")
    handle = start(sess, guest(guest_cid("spin"), "run"), store=store, home=home, isolation=isolation)
    assert isinstance(handle, Handle)
    with handle:
        receipt = abandon(restore(handle.checkpoint()))
    assert (receipt["kuro/outcome"], receipt["kuro/isolation"]) == ("abandoned", isolation)  # never "none"
    assert handle.wait()["kuro/isolation"] == isolation  # the same backend the run's own receipt names
