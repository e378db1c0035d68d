"""A worker's done frame is plain data of the worker's choosing: any of it is taken or refused with a typed error,
and a refused one gets the worker killed and its run a receipt that does not blame the guest — never a traceback."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from hostkit import wat
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.errors import KuroError
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.host.worker.run import RemoteRun
from kuro_wasm.model.limits import Limits
from kuro_wasm.model.sessions import guest, session

_STORE = MemoryBlockStore()
_SESSION = session("s-result", Fs.empty(_STORE).root)
_COMMAND = guest(add_guest(_STORE, wat("hello")), "run")
_KEYS = [
    "kuro/exit-code",
    "kuro/outcome",
    "kuro/error",
    "kuro/trap",
    "kuro/fs-root-after",
    "kuro/reads",
    "kuro/denials",
    "kuro/fuel-consumed",
    "kuro/engine",
    "kuro/result",
    "kuro/nondeterminism",
    "kuro/deterministic",
    "kuro/timed-out?",
    "kuro/stdout-bytes",
    "kuro/stderr-bytes",
    "kuro/worker",
    "kuro/isolation",
    "stdout",
    "exit-code",
]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_PLAUSIBLE: dict[str, Any] = {
    "kuro/exit-code": st.sampled_from([0, 1, 70, 137, -1, 2**70]) | _JSON,
    "kuro/outcome": st.sampled_from(["ok", "exit", "trap", "worker-died", "abandoned", "host-error"]) | _JSON,
    "kuro/stdout-bytes": st.just(0) | _JSON,
    "kuro/stderr-bytes": st.just(0) | _JSON,
}


@st.composite
def _done(draw: st.DrawFn) -> tuple[Any, Any]:
    receipt = {}
    for key in draw(st.lists(st.sampled_from(_KEYS), unique=True, max_size=8)):
        receipt[key] = draw(_PLAUSIBLE.get(key, _JSON))
    if draw(st.booleans()):
        receipt.update({"kuro/exit-code": 0, "kuro/stdout-bytes": 0, "kuro/stderr-bytes": 0})
    stream = {
        "seq": draw(st.just(0) | _JSON),
        "dropped": draw(st.just(0) | _JSON),
        "truncated": draw(st.just(False) | _JSON),
        "capped_by": draw(st.none() | _JSON),
    }
    for key in draw(st.lists(st.sampled_from(sorted(stream)), unique=True, max_size=2)):
        del stream[key]
    return draw(st.just(receipt) | _JSON), draw(st.just(stream) | _JSON)


def _run() -> RemoteRun:
    return RemoteRun(
        1, _SESSION, _COMMAND, _STORE, None, limits=Limits(), home=False, stdin=None,
        stdin_closed=True, on_chunk=None, on_exit=None,
    )  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_done())
def test_any_done_frame_is_a_receipt_or_a_typed_refusal(done: tuple[Any, Any]) -> None:
    receipt, stream = done
    remote = _run()
    try:
        result = remote.worker_result(receipt, stream)
        remote.settle(result, {"pid": 1})
    except KuroError:
        return
    got = remote.receipt
    assert got is not None and got["kuro/outcome"] not in ("worker-died", "abandoned")
    assert got["kuro/isolation"] == "process" and got["kuro/worker"] == {"pid": 1}


@pytest.mark.parametrize(
    "field",
    [
        {"receipt": {"kuro/outcome": ["ok"]}},
        {"receipt": {"kuro/outcome": {"x": 1}}},
        {"receipt": {"kuro/exit-code": "0"}},
        {"receipt": {"kuro/reads": "bafy"}},
        {"receipt": {"kuro/stdout-bytes": [12]}},
        {"stream": {"capped_by": ["bytes"], "truncated": True, "seq": 9, "dropped": 1}},
        {"stream": {"seq": {"n": 1}}},
    ],
)
def test_a_malformed_done_frame_gets_the_worker_killed_and_blames_no_guest(
    pool: WorkerPool, field: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    store = MemoryBlockStore()
    sess = session("s-forge", Fs.empty(store).root)
    cid = add_guest(store, wat("hello"))
    assert pool.probe("forge:" + json.dumps(field)) == {"armed": True}
    pid = pool.pids[0]
    receipt = run(sess, guest(cid, "run"), store=store, isolation=pool)
    assert receipt["kuro/outcome"] in ("worker-died", "host-error"), receipt
    assert receipt["kuro/worker"]["pid"] == pid and "refused" in receipt["kuro/error"]
    assert pool.wait_ready(60) and pid not in pool.pids  # killed and replaced
    _wait_reaped(pid)
    assert "Traceback" not in capfd.readouterr().err
    again = run(sess, guest(cid, "run"), store=store, isolation=pool)
    assert (again["kuro/outcome"], again["kuro/stdout"]) == ("ok", b"hello, kuro\n"), again


def test_a_host_bug_on_a_worker_s_frames_is_a_host_error_and_the_worker_is_killed(
    pool: WorkerPool, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from kuro_wasm.host.worker import pool as pool_module

    def broken(*_args: object) -> None:
        raise RuntimeError("a bug in the host")

    monkeypatch.setattr(pool_module, "accept_root", broken)
    store = MemoryBlockStore()
    sess = session("s-bug", Fs.empty(store).root, "terminal-build")
    cid = add_guest(store, wat("fs-write"))
    pid = pool.pids[0]
    receipt = run(sess, guest(cid, "run"), store=store, isolation=pool)
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("host-error", 70)
    assert "RuntimeError: a bug in the host" in receipt["kuro/error"] and receipt["kuro/worker"]["pid"] == pid
    assert pool.wait_ready(60) and pid not in pool.pids
    assert "Traceback" not in capfd.readouterr().err


def test_a_worker_whose_end_nobody_reported_says_so_and_invents_no_signal() -> None:
    from kuro_wasm.host.worker.run import died_result

    remote = _run()
    result, facts = died_result(None, "it ended mid-run")
    remote.settle(result, {"pid": 7, **facts})
    got = remote.receipt
    assert got is not None
    assert (got["kuro/outcome"], got["kuro/exit-code"]) == ("worker-died", 137)  # the outcome's own code
    assert got["kuro/worker"] == {"pid": 7, "status": "unknown"} and "unknown" in got["kuro/error"]


def _wait_reaped(pid: int) -> None:
    """Wait until process ``pid`` is gone: its receipt comes as soon as it has exited, and the zygote reaps it
    on its own time (a zombie until then)."""
    deadline = time.monotonic() + 60  # a bound on waiting for the event, never a measured duration
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, f"worker {pid} was killed but never reaped"
        time.sleep(0.005)
