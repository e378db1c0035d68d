"""Each hardening measure a worker reports is in force: a test hook in the worker tries what it forbids."""

from __future__ import annotations

import os

import pytest

from kuro_wasm.errors import HostError
from kuro_wasm.host.worker.hardening import MEASURES, Hardening
from kuro_wasm.host.worker.pool import WorkerPool


def _namespaced(pool: WorkerPool) -> bool:
    return pool.probe("status")["pid"] == 1


@pytest.mark.parametrize("what", ["socket", "unix-socket", "exec", "fork", "unshare", "lower-nofile"])
def test_the_seccomp_filter_refuses_it(pool: WorkerPool, what: str) -> None:
    result = pool.probe(what)
    assert result["ok"] is False, result
    assert result.get("errno", "EPERM") == "EPERM", result


def test_no_file_grows_past_the_file_size_limit(pool: WorkerPool) -> None:
    assert pool.probe(f"fsize:{pool.hardening.fsize + 1}") == {"ok": False, "errno": "EFBIG"}


def test_no_more_files_open_than_the_limit(pool: WorkerPool) -> None:
    result = pool.probe("nofile")
    assert result["errno"] == "EMFILE" and result["opened"] < pool.hardening.nofile


def test_no_new_privileges_seccomp_and_no_core_files(pool: WorkerPool) -> None:
    status = pool.probe("status")
    assert status["status"]["NoNewPrivs"] == "1"
    assert status["status"]["Seccomp"] == "2"  # filter mode
    assert status["core"] == 0


def test_the_host_cannot_be_signalled_from_a_worker(pool: WorkerPool) -> None:
    assert pool.probe(f"signal:{os.getpid()}")["ok"] is False


def test_in_its_namespaces_a_worker_sees_no_network_and_no_other_process(pool: WorkerPool) -> None:
    if not _namespaced(pool):
        pytest.skip("this kernel does not give unprivileged users namespaces")  # then the receipt does not claim them
    status = pool.probe("status")
    assert status["interfaces"] == ["lo"]
    assert status["visible-pids"] == [1]


def test_a_receipt_lists_exactly_the_measures_in_force(pool: WorkerPool) -> None:
    from hostkit import wat

    from kuro_fs.blocks import MemoryBlockStore
    from kuro_fs.fs import Fs
    from kuro_wasm.host.api import run
    from kuro_wasm.host.loader import add_guest
    from kuro_wasm.model.sessions import guest, session

    store = MemoryBlockStore()
    receipt = run(
        session("s", Fs.empty(store).root), guest(add_guest(store, wat("hello")), "run"), store=store, isolation=pool
    )
    measures = receipt["kuro/worker"]["hardening"]
    namespaces = {"user-namespace", "net-namespace", "pid-namespace", "mount-namespace"}
    assert set(measures) == (set(MEASURES) if _namespaced(pool) else set(MEASURES) - namespaces)


def test_without_namespaces_none_are_claimed() -> None:
    with WorkerPool(1, spare=0, hardening=Hardening(namespaces=False), test_hooks=True) as plain:
        assert plain.wait_ready(60)
        assert plain.probe("status")["pid"] != 1
        assert plain.probe("socket")["ok"] is False  # the filter is there all the same


def test_a_worker_that_cannot_harden_itself_never_runs_a_guest() -> None:
    with WorkerPool(1, spare=0, hardening=Hardening(nofile=1 << 40)) as broken:
        assert not broken.wait_ready(60)
        with pytest.raises(HostError, match="could not harden"):
            broken.submit(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [{"nofile": 0}, {"fsize": True}, {"cpu_seconds": 1.5}, {"address_space": 0}])
def test_a_hardening_that_cannot_be_applied_is_refused_when_made(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Hardening(**bad)  # type: ignore[arg-type]
