"""Each hardening measure a worker reports is in force: a test hook in the worker tries what it forbids."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator

import pytest

from kuro_wasm.errors import HostError
from kuro_wasm.host.worker.hardening import (
    DENIED_SYSCALLS,
    MEASURES,
    SELF_ONLY_SYSCALLS,
    TRIES,
    Hardening,
    build_seccomp,
    landlock_abi,
    try_syscall,
)
from kuro_wasm.host.worker.pool import WorkerPool


def _namespaced(pool: WorkerPool) -> bool:
    return pool.probe("status")["pid"] == 1


@pytest.mark.parametrize("what", ["socket", "unix-socket", "exec", "fork", "unshare", "lower-nofile"])
def test_the_seccomp_filter_refuses_it(pool: WorkerPool, what: str) -> None:
    result = pool.probe(what)
    assert result["ok"] is False, result
    assert result.get("errno", "EPERM") == "EPERM", result


def test_no_file_grows_past_the_file_size_limit(unconfined: WorkerPool, pool: WorkerPool) -> None:
    assert unconfined.probe(f"fsize:{unconfined.hardening.fsize + 1}") == {"ok": False, "errno": "EFBIG"}
    assert unconfined.probe("fsize:10") == {"ok": True}
    assert pool.probe("fsize:10")["ok"] is False  # confined: not even a temporary file to write


def test_no_more_files_open_than_the_limit(pool: WorkerPool) -> None:
    result = pool.probe("nofile")
    assert result["errno"] == "EMFILE" and result["opened"] < pool.hardening.nofile


def test_no_new_privileges_seccomp_and_no_core_files(pool: WorkerPool) -> None:
    status = pool.probe("status")
    assert status["status"]["NoNewPrivs"] == "1"
    assert status["status"]["Seccomp"] == "2"  # filter mode
    assert status["core"] == 0


@pytest.fixture(scope="module")
def unconfined() -> Iterator[WorkerPool]:
    """A worker without filesystem confinement (``Hardening(filesystem=False)``): it may write files."""
    with WorkerPool(1, spare=0, hardening=Hardening(filesystem=False), test_hooks=True) as started:
        assert started.wait_ready(60)
        yield started


@pytest.fixture(scope="module")
def plain() -> Iterator[WorkerPool]:
    """A worker without namespaces: it sees the host's pid, so only the filter stands between them."""
    with WorkerPool(1, spare=0, hardening=Hardening(namespaces=False), test_hooks=True) as started:
        assert started.wait_ready(60)
        yield started


def _filtered(pool: WorkerPool, name: str, target: int) -> None:
    """The worker's try of ``name`` at ``target`` gets the filter's EPERM, where the same call unfiltered (in
    this test process) gets another answer from the kernel — or, where the kernel itself says EPERM to an
    unprivileged caller, the filter names the syscall all the same."""
    assert pool.probe(f"syscall:{name}:{target}") == {"ok": False, "errno": "EPERM"}, name
    here = try_syscall(name, os.getpid())
    if here.get("errno") == "EPERM":  # e.g. module loading: refused to any unprivileged process
        rule = rf'filter for syscall "{name}" \(\d+\) \[priority: \d+\]\s+if \(\$syscall == \d+\)\s+action ERRNO\(1\);'
        assert re.search(rule, _filter_text()), name
    else:
        assert here != {"ok": False, "errno": "EPERM"}, name


def _filter_text() -> str:
    with tempfile.TemporaryFile("w+") as out:
        build_seccomp(os.getpid()).export_pfc(out)
        out.seek(0)
        return out.read()


@pytest.mark.parametrize(
    "name", ["kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal"]
)
def test_the_host_cannot_be_signalled_from_a_worker(plain: WorkerPool, name: str) -> None:
    _filtered(plain, name, os.getpid())


def test_a_worker_can_still_signal_itself(plain: WorkerPool, pool: WorkerPool) -> None:
    expected = dict.fromkeys(SELF_ONLY_SYSCALLS, "ok")
    assert plain.probe("self-signals") == expected
    assert pool.probe("self-signals") == expected  # PID 1 of its own pid namespace too


@pytest.mark.parametrize(
    ("group", "name"),
    [
        (group, name)
        for group in ("ptrace", "mount", "bpf", "modules")
        for name in DENIED_SYSCALLS[group]
        if name in TRIES
    ],
)
def test_the_filter_refuses_ptrace_mount_bpf_and_module_loading(plain: WorkerPool, group: str, name: str) -> None:
    _filtered(plain, name, os.getpid())


def test_every_group_of_the_filter_has_a_try_in_a_test() -> None:
    tried = {group for group, names in DENIED_SYSCALLS.items() if set(names) & set(TRIES)}
    assert tried >= {"ptrace", "signals", "mount", "bpf", "modules"}


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
    absent = set() if _namespaced(pool) else {"user-namespace", "net-namespace", "pid-namespace", "mount-namespace"}
    if landlock_abi() < 6:
        absent.add("signal-scope")  # the kernel's Landlock has no scopes: not applied, not claimed
    assert set(measures) == set(MEASURES) - absent


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
