"""A worker's engine is the in-process engine: memory is reserved, grown and bounded exactly as in-process."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hostkit import wat

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_wasm.host import engine
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.host.worker.hardening import (
    DEFAULT_ADDRESS_SPACE,
    MEMORY_RESERVATION,
    MEMORY_ROOM,
    MIN_ADDRESS_SPACE,
    Hardening,
    memories_that_fit,
)
from kuro_wasm.host.worker.pool import WorkerPool
from kuro_wasm.model.limits import DEFAULT_MAX_MEMORIES
from kuro_wasm.model.sessions import guest, session

TWO_MEMORIES = '(module (memory 1) (memory $b 1) (func (export "run") (result i32) (i32.const 0)))'


def test_a_worker_runs_the_in_process_engine_under_an_address_space_that_fits_it(pool: WorkerPool) -> None:
    assert pool.probe("engine") == {
        "key": engine.engine_key(engine.EngineConfig()),
        "fuel-key": engine.engine_key(engine.EngineConfig(fuel=True)),
        "profile": None,  # wasmtime's own reservation, as in-process: nothing narrowed
        "address-space": DEFAULT_ADDRESS_SPACE,
    }
    assert engine.memory_profile() is None


@pytest.mark.parametrize("max_memory_bytes", [None, 1 << 20, 64 << 20])
def test_memory_grows_as_far_in_a_worker_as_in_process(pool: WorkerPool, max_memory_bytes: int | None) -> None:
    store = MemoryBlockStore()
    sess = session("s-grow", Fs.empty(store).root)
    cid = add_guest(store, wat("grow"))
    receipts: dict[str, Any] = {
        name: run(sess, guest(cid, "run"), store=store, isolation=iso, max_memory_bytes=max_memory_bytes)
        for name, iso in (("wasmtime", "wasmtime"), ("process", pool))
    }
    inproc, worker = receipts["wasmtime"], receipts["process"]
    for key in ("kuro/outcome", "kuro/exit-code", "kuro/engine", "kuro/limits"):
        assert worker[key] == inproc[key], key
    per_memory = inproc["kuro/limits"].get("per-memory-bytes")  # the memories' share of max_memory_bytes
    pages = 65535 if max_memory_bytes is None else per_memory // 65536 - 1
    assert worker["kuro/exit-code"] == pages


_INSTANTIATE_WITH_ROOM = """
import resource, sys, wasmtime
c = wasmtime.Config(); c.parallel_compilation = False  # compile threads would map their arenas and stacks late
e = wasmtime.Engine(c); m = wasmtime.Module(e, '(module (memory (export "m") 1))'); s = wasmtime.Store(e)
with open("/proc/self/status") as f:
    size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (size + int(sys.argv[1]), resource.RLIM_INFINITY))
try:
    wasmtime.Instance(s, m, [])
    print("ok")
except wasmtime.WasmtimeError as exc:
    print("refused", exc)
"""
_SLACK = 16 << 20  # what else instantiating maps besides the memory (the store's own tables): a few pages


@pytest.mark.parametrize(("room", "fits"), [(MEMORY_RESERVATION + _SLACK, True), (MEMORY_RESERVATION - _SLACK, False)])
def test_the_reservation_a_worker_makes_room_for_is_what_wasmtime_reserves(room: int, fits: bool) -> None:
    """Instantiating one memory under an address space limit: it fits when the room left is one
    :data:`MEMORY_RESERVATION` (plus a little), and is refused with a little less, though that is still
    more than 4 GiB — the reservation counted is wasmtime's whole one, guards included."""
    done = subprocess.run(
        [sys.executable, "-c", _INSTANTIATE_WITH_ROOM, str(room)], capture_output=True, check=True, text=True
    )
    assert done.stdout.startswith("ok" if fits else "refused"), done.stdout
    assert room > 4 << 30


def test_an_address_space_for_one_memory_runs_one_and_refuses_two_as_a_host_error() -> None:
    store = MemoryBlockStore()
    sess = session("s-as", Fs.empty(store).root)
    grow, two = add_guest(store, wat("grow")), add_guest(store, TWO_MEMORIES)
    with WorkerPool(1, spare=0, hardening=Hardening(address_space=MIN_ADDRESS_SPACE)) as tight:
        grown = run(sess, guest(grow, "run"), store=store, isolation=tight)
        refused = run(sess, guest(two, "run"), store=store, isolation=tight, max_memories=2)
    assert (grown["kuro/outcome"], grown["kuro/exit-code"]) == ("exit", 65535)
    assert "rlimit-as" in grown["kuro/worker"]["hardening"]
    assert (refused["kuro/outcome"], refused["kuro/exit-code"]) == ("host-error", 70)
    assert "Cannot allocate memory" in refused["kuro/error"]
    assert "RLIMIT_AS" in refused["kuro/error"] and "room for 1 linear memory" in refused["kuro/error"]
    assert run(sess, guest(two, "run"), store=store, max_memories=2)["kuro/outcome"] == "ok"  # no such limit here


def test_an_address_space_too_small_for_any_memory_is_refused_when_made() -> None:
    with pytest.raises(ValueError, match="one linear memory"):
        Hardening(address_space=MIN_ADDRESS_SPACE - 1)


def test_more_memories_than_the_default_address_space_holds_end_host_error_saying_why(pool: WorkerPool) -> None:
    """``max_memories`` raised past the default: the store's memories at full reservation no longer fit the
    worker's ``RLIMIT_AS``. The run ends ``host-error`` (never a crash, never the guest's fault), the worker
    stays up, and the reason names the limit; in-process the same run is fine."""
    store = MemoryBlockStore()
    sess = session("s-many", Fs.empty(store).root)
    fits = memories_that_fit(DEFAULT_ADDRESS_SPACE)
    many = add_guest(store, _memories(fits + 1))
    receipts = {
        name: run(sess, guest(many, "run"), store=store, isolation=iso, max_memories=fits + 1)
        for name, iso in (("wasmtime", "wasmtime"), ("process", pool))
    }
    assert receipts["wasmtime"]["kuro/outcome"] == "ok"
    refused = receipts["process"]
    assert (refused["kuro/outcome"], refused["kuro/exit-code"]) == ("host-error", 70), refused
    assert f"room for {fits} linear memories" in refused["kuro/error"]
    assert f"max_memories={fits + 1}" in refused["kuro/error"]
    fitting = run(sess, guest(add_guest(store, _memories(fits)), "run"), store=store, isolation=pool, max_memories=fits)
    assert fitting["kuro/outcome"] == "ok", fitting
    assert refused["kuro/worker"]["pid"] in pool.pids  # the worker that refused it is still serving


def _memories(count: int) -> str:
    memories = " ".join(f"(memory $m{i} 1)" for i in range(count))
    return f'(module {memories} (func (export "run") (result i32) (i32.const 0)))'


def test_the_default_address_space_has_room_for_more_memories_than_a_run_allows_by_default() -> None:
    assert memories_that_fit(DEFAULT_ADDRESS_SPACE) == MEMORY_ROOM >= DEFAULT_MAX_MEMORIES
