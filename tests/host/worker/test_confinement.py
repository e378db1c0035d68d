"""No worker can write anything the host or another worker will run: a worker reads only code, system libraries and
the block stores it was given, writes no file, and deserializes only compiled guests the host hands it."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from hostkit import wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_fs.home import module_cache_dir
from kuro_wasm.host.api import run, start
from kuro_wasm.host.cache import cache_for
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker import protocol
from kuro_wasm.host.worker.hardening import Hardening, check_stores, landlock_abi, readable_paths
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.model.sessions import guest, session

DENIED = {"ok": False, "errno": "EACCES"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A kuro home whose module cache holds a compiled guest, its tag and the cache's secret key."""
    store = MemoryBlockStore()
    cid = add_guest(store, _fresh(wat("hello"), tmp_path.name))  # compiled by no earlier test: it reaches the disk
    run(session("s-home", Fs.empty(store).root), guest(cid, "run"), store=store, home=tmp_path)
    assert (module_cache_dir(tmp_path) / ".hmac-key").is_file()
    return tmp_path


def test_a_worker_cannot_read_the_module_cache_key_nor_write_the_cache(pool: WorkerPool, home: Path) -> None:
    cache = module_cache_dir(home)
    entry = next(cache.glob("*.cwasm"))
    assert pool.probe(f"read:{cache / '.hmac-key'}") == DENIED
    assert pool.probe(f"read:{entry}") == DENIED
    assert pool.probe(f"write:{cache / 'planted.cwasm'}") == DENIED
    assert pool.probe(f"write:{entry.with_suffix('.tag')}") == DENIED
    assert not (cache / "planted.cwasm").exists()


def test_a_worker_reads_code_and_writes_no_file_at_all(pool: WorkerPool, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_bytes(b"the user's")
    assert pool.probe(f"read:{tmp_path / 'secret.txt'}") == DENIED
    assert pool.probe(f"write:{tmp_path / 'new.txt'}") == DENIED
    assert pool.probe(f"read:{Path.home() / '.bashrc'}")["ok"] is False
    assert pool.probe(f"read:{sys.executable}") == {"ok": True}  # the interpreter and its libraries stay readable
    assert pool.probe("read:/etc/passwd") == DENIED
    assert pool.probe("write:/dev/null") == {"ok": True}
    assert not (tmp_path / "new.txt").exists()


def test_compiled_guests_come_from_the_host_once_per_worker(pool2: WorkerPool, tmp_path: Path) -> None:
    store = MemoryBlockStore()
    sess = session("s-art", Fs.empty(store).root)
    cat = guest(add_guest(store, _fresh(wat("cat"), tmp_path.name)), "run")  # compiled by no earlier test
    stats = cache_for(tmp_path).stats
    asked, compiled = pool2.answered["module"], pool2.probe("compiles")["compiles"]
    pids: set[int] = set()
    for _ in range(3):
        handles = [start(sess, cat, store=store, isolation=pool2, home=tmp_path) for _ in range(2)]  # one per worker
        for handle in handles:
            handle.write(b"r")
            handle.close_stdin()
        receipts = [handle.wait(60) for handle in handles]
        assert [r["kuro/stdout"] for r in receipts] == [b"r", b"r"]
        pids |= {r["kuro/worker"]["pid"] for r in receipts}
    assert pids == set(pool2.pids)
    assert pool2.answered["module"] - asked == 2  # once per worker; then each runs it from its own memory
    assert stats.compiles == 1  # compiled by the host, once, into the host's own cache
    assert pool2.probe("compiles")["compiles"] == compiled  # and never by a worker (this one ran it too)
    suffixes = sorted(p.suffix for p in module_cache_dir(tmp_path).iterdir() if not p.name.startswith("."))
    assert suffixes == [".cwasm", ".meta", ".tag"]  # one entry, the host's: a worker has no cache on disk


def test_a_worker_asking_the_host_to_compile_anything_but_its_runs_guest_is_killed(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    cat, other = add_guest(store, wat("cat")), add_guest(store, wat("hello"))
    echoed = threading.Event()
    handle = start(
        session("s-ask", Fs.empty(store).root),
        guest(cat, "run"),
        store=store,
        isolation=pool,
        on_chunk=lambda s, c: echoed.set(),
        home=False,
    )
    handle.write(b"x")
    assert echoed.wait(60)
    compiled = pool.answered["module"]
    pool.probe_async(f"ask-module:{other}")
    receipt = handle.wait(60)
    assert (receipt["kuro/outcome"], receipt["kuro/worker"]["signal"]) == ("worker-died", "SIGKILL")
    assert "other than its run's own" in receipt["kuro/error"]
    assert pool.answered["module"] == compiled  # the host compiled nothing for it


def test_a_compiled_guest_too_big_for_a_frame_is_compiled_by_the_worker_in_memory(
    pool: WorkerPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryBlockStore()
    hello = guest(add_guest(store, _fresh(wat("hello"), tmp_path.name)), "run")
    monkeypatch.setattr(protocol, "MAX_ARTIFACT_BYTES", 100)  # smaller than any artifact: none is sent
    asked, compiled = pool.answered["module"], pool.probe("compiles")["compiles"]
    receipt = run(session("s-big", Fs.empty(store).root), hello, store=store, isolation=pool, home=tmp_path)
    assert (receipt["kuro/outcome"], receipt["kuro/stdout"]) == ("ok", b"hello, kuro\n"), receipt
    assert pool.answered["module"] == asked + 1  # asked, answered "none": the worker compiled it, in memory
    assert pool.probe("compiles")["compiles"] == compiled + 1
    entries = sorted(p.suffix for p in module_cache_dir(tmp_path).iterdir() if not p.name.startswith("."))
    assert entries == [".cwasm", ".meta", ".tag"]  # the host's own entry only


def test_a_guest_the_host_cannot_compile_fails_to_load_in_the_worker_as_in_process(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    sess = session("s-bad", Fs.empty(store).root)
    missing = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    not_wasm = store.put(b"\0asm\x01\0\0\0\x00garbage")
    for cid in (missing, not_wasm):
        inproc = run(sess, guest(cid, "run"), store=store, home=False)
        worker = run(sess, guest(cid, "run"), store=store, isolation=pool, home=False)
        assert (worker["kuro/outcome"], worker["kuro/error"]) == (inproc["kuro/outcome"], inproc["kuro/error"])


def test_without_filesystem_confinement_none_is_claimed() -> None:
    store = MemoryBlockStore()
    hello = guest(add_guest(store, wat("hello")), "run")
    with WorkerPool(1, spare=0, hardening=Hardening(filesystem=False, namespaces=False)) as unconfined:
        receipt = run(session("s-open", Fs.empty(store).root), hello, store=store, isolation=unconfined)
    measures = set(receipt["kuro/worker"]["hardening"])
    assert "landlock" not in measures and "signal-scope" not in measures and "seccomp" in measures


def test_the_confined_worker_says_which_landlock_measures_are_in_force(pool: WorkerPool) -> None:
    store = MemoryBlockStore()
    receipt = run(
        session("s-ll", Fs.empty(store).root), guest(add_guest(store, wat("hello")), "run"), store=store, isolation=pool
    )
    measures = set(receipt["kuro/worker"]["hardening"])
    assert "landlock" in measures
    assert ("signal-scope" in measures) is (landlock_abi() >= 6)


@pytest.mark.parametrize("grant", [".", "..", "cache", "cache/modules", "refs"])
def test_a_block_store_grant_that_opens_the_kuro_home_is_refused_when_the_pool_is_made(
    tmp_path: Path, grant: str
) -> None:
    home = tmp_path / "home"
    (home / "cache" / "modules").mkdir(parents=True)
    with pytest.raises(ValueError, match="kuro home"):
        check_stores((str(home / grant),), str(home))


@pytest.mark.parametrize("grant", ["blocks", "blocks/shard", "../elsewhere"])
def test_the_homes_blocks_and_directories_outside_it_may_be_granted(tmp_path: Path, grant: str) -> None:
    check_stores((str(tmp_path / "home" / grant),), str(tmp_path / "home"))


def test_a_pool_refuses_a_grant_of_the_default_kuro_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KURO_HOME", str(tmp_path / "home"))
    with pytest.raises(ValueError, match="kuro home"):
        WorkerPool(1, spare=0, hardening=Hardening(stores=(str(tmp_path),)))


def test_an_import_path_holding_the_kuro_home_is_granted_only_for_what_was_imported_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kuro_probe_pkg").mkdir()
    (tmp_path / "kuro_probe_pkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "kuro_probe_pkg", raising=False)
    __import__("kuro_probe_pkg")
    dirs, _ = readable_paths((), namespaced=False, closed=(str(tmp_path.resolve() / ".kuro"),))
    assert str(tmp_path.resolve() / "kuro_probe_pkg") in dirs
    assert not any(
        str(tmp_path.resolve()).startswith(d.rstrip("/") + "/") or d == str(tmp_path.resolve()) for d in dirs
    )


def _fresh(source: str, name: str) -> str:
    """``source`` (a WAT module) with one more export, ``name``: a guest no other test compiled, so no module
    cache (the host's or a worker's, in memory) holds it yet."""
    body = source.rstrip()
    assert body.endswith(")")
    return f'{body[:-1]} (func (export "{name}")))'
