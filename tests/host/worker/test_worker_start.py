"""Why a pool's workers could not start is said as it happened: a slow start is a start timeout, nothing else is.

The hello a worker sends once hardened is read with ``start_timeout``; that read's own timeout is the start
timeout. A ``TimeoutError`` raised anywhere else while the host takes the hello in is the host's failure,
never reported as a start that took too long (nor as workers exiting).
"""

from __future__ import annotations

import pytest

from kuro_wasm.errors import NotStarted
from kuro_wasm.host.worker import pool as pool_module
from kuro_wasm.host.worker.pool import WorkerPool


def test_workers_that_do_not_say_hello_within_the_start_timeout_are_a_start_timeout() -> None:
    with WorkerPool(1, spare=0, start_timeout=1e-6) as slow:  # no worker forks and hardens in a microsecond
        assert not slow.wait_ready(60)
        with pytest.raises(NotStarted, match=r"no hello from a worker within 1e-06 s") as info:
            slow.submit(object())  # type: ignore[arg-type]
    assert "exit" not in str(info.value)
    # the timeout bounds each read of the hello (the socket's), not the time since the worker was forked
    assert "of its fork" not in str(info.value) and "each read" in str(info.value)


def test_a_timeout_error_raised_elsewhere_while_a_hello_is_taken_in_is_a_host_error_not_a_start_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def pidfd_open(pid: int, flags: int = 0) -> int:
        raise TimeoutError("raised by the host's own code, not the hello's read")

    monkeypatch.setattr(pool_module.os, "pidfd_open", pidfd_open)  # (os itself: the pool's readers call it)
    with WorkerPool(1, spare=0) as failing:
        assert not failing.wait_ready(60)
        with pytest.raises(NotStarted, match="host error: TimeoutError: raised by the host's own code") as info:
            failing.submit(object())  # type: ignore[arg-type]
    assert "within" not in str(info.value) and "exit" not in str(info.value)
