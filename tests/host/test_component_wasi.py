"""The virtual WASI 0.2 of component guests: the spec's environment and argv, and deterministic runs.

A ``deterministic=True`` run of a component reads the same virtual clocks and the same seeded
random stream as a WASI preview 1 run (``kuro_wasm.model.wasi``'s constants and ``SeededBytes``),
so the same inputs give the same receipt and nothing is reported as nondeterminism.
"""

from __future__ import annotations

from typing import Any

from hostkit import component, make_fs, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.api import run
from kuro_wasm.host.loader import add_guest
from kuro_wasm.model import wasi
from kuro_wasm.model.sessions import guest

_HOST_TIMES = ("kuro/started-at", "kuro/finished-at", "kuro/duration-ms")


def _run(name: str, args: list[Any], **options: Any) -> dict[str, Any]:
    store = MemoryBlockStore()
    fs = make_fs(store, {"greeting.txt": "hi\n"})
    env, argv0 = options.pop("env", None), options.pop("argv0", None)
    spec = guest(add_guest(store, component(name)), "run", args, env=env, argv0=argv0)
    return run(make_session(fs), spec, store=store, fs=fs, home=False, **options)


def _without_host_times(receipt: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in receipt.items() if k not in _HOST_TIMES}


# ---- deterministic runs


def _expected_entropy(seed: int) -> bytes:
    """What guests/components/entropy.wat prints in a deterministic run: the seeded stream and the virtual clocks."""
    stream = wasi.SeededBytes(seed)
    tick = wasi.DETERMINISTIC_TICK_NS
    wall = wasi.DETERMINISTIC_REALTIME_START_NS + tick
    return b"".join(
        [
            stream.take(16),
            (wall // 10**9).to_bytes(8, "little") + (wall % 10**9).to_bytes(4, "little"),
            (wasi.DETERMINISTIC_MONOTONIC_START_NS + 2 * tick).to_bytes(8, "little"),
            stream.take(8),
            stream.take(16),
            (wasi.DETERMINISTIC_MONOTONIC_START_NS + 3 * tick).to_bytes(8, "little"),
        ]
    )


def test_a_deterministic_components_clocks_and_random_bytes_are_the_virtual_ones_of_its_seed() -> None:
    first = _run("entropy", [], deterministic=True, seed=3)
    assert first["kuro/outcome"] == "ok", first
    assert first["kuro/stdout"] == _expected_entropy(3)
    assert first["kuro/deterministic"] == {"seed": 3}
    assert "kuro/nondeterminism" not in first  # nothing was read from the world
    again = _run("entropy", [], deterministic=True, seed=3)
    assert _without_host_times(again) == _without_host_times(first)
    other = _run("entropy", [], deterministic=True, seed=4)
    assert other["kuro/stdout"] == _expected_entropy(4) != first["kuro/stdout"]


def test_a_real_components_clocks_and_random_bytes_are_counted_as_its_nondeterminism() -> None:
    receipt = _run("entropy", [])
    assert receipt["kuro/nondeterminism"] == {"random-bytes": 40, "wall-clock": 1, "monotonic-clock": 2}
    assert "kuro/deterministic" not in receipt


def test_a_deterministic_python_component_gives_the_same_receipt_twice() -> None:
    first = _run("py-wasi", ["greeting.txt"], deterministic=True, seed=7)
    assert first["kuro/outcome"] == "ok", first
    assert "kuro/nondeterminism" not in first
    assert _without_host_times(_run("py-wasi", ["greeting.txt"], deterministic=True, seed=7)) == _without_host_times(
        first
    )


def test_a_deterministic_sleep_moves_the_virtual_clock_without_waiting() -> None:
    receipt = _run("py-wasi", ["--sleep"], deterministic=True, seed=1, timeout_ms=60_000)
    assert receipt["kuro/outcome"] == "ok", receipt
    assert receipt["kuro/stdout"] == b"slept 3600\n"  # an hour passed on the guest's clocks, none on the host's


# ---- the spec's environment and argv


def test_the_specs_env_and_argv_are_the_components_wasi_environment_and_arguments() -> None:
    receipt = _run("environ", ["x", "y z"], env={"B": "2", "A": "1=one"}, argv0="tool")
    assert receipt["kuro/outcome"] == "ok", receipt
    assert receipt["kuro/stdout"] == b"A=1=one\nB=2\narg tool\narg x\narg y z\n"  # names sorted, as WASI p1's


def test_without_argv0_a_components_argv0_is_its_cid() -> None:
    receipt = _run("environ", [])
    assert receipt["kuro/stdout"] == f"arg {receipt['kuro/command']['kuro/guest']}\n".encode()


def test_a_python_component_reads_the_specs_env_through_os_environ() -> None:
    receipt = _run("py-wasi", [], env={"KURO_GREETING": "hello env"})
    assert b"env hello env\n" in receipt["kuro/stdout"], receipt


def test_the_virtual_wasi_environment_is_empty_when_the_spec_gives_none() -> None:
    assert _run("exiting", [])["kuro/stdout"] == b"vars: 0\n"  # none is made up
    assert _run("exiting", [], env={"K": "v", "L": "w"})["kuro/stdout"] == b"vars: 2\n"


def test_an_env_for_a_component_that_cannot_read_one_is_refused_not_ignored() -> None:
    receipt = _run("typed", [], env={"K": "v"})
    assert receipt["kuro/outcome"] == "load-error"
    assert "kuro/env is not for it" in receipt["kuro/error"]
