"""An interrupt while waiting for a receipt is itself, and does not cut short the wait for a killed run."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hostkit import make_fs, make_session

from kuro_fs.blocks import MemoryBlockStore
from kuro_wasm.host.api import Handle, start, stop_and_wait, wait_event
from kuro_wasm.model.sessions import guest


class _InterruptedInItsFinally:
    """``Event.wait`` as it breaks when a second signal lands in ``Condition.wait``'s ``finally``
    before the lock is taken back: the ``with`` releases a lock it does not hold."""

    def wait(self, timeout: float | None = None) -> bool:
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError("release unlocked lock")


def test_an_interrupt_inside_condition_wait_is_raised_as_the_interrupt() -> None:
    with pytest.raises(KeyboardInterrupt):
        wait_event(_InterruptedInItsFinally(), None)  # type: ignore[arg-type]


def test_a_runtime_error_of_its_own_is_not_taken_for_an_interrupt() -> None:
    class Broken:
        def wait(self, timeout: float | None = None) -> bool:
            raise RuntimeError("something else")

    with pytest.raises(RuntimeError, match="something else"):
        wait_event(Broken(), None)  # type: ignore[arg-type]


def test_wait_event_is_event_wait() -> None:
    event = threading.Event()
    assert wait_event(event, 0) is False
    event.set()
    assert wait_event(event, None) is True


class _Run:
    """A run that ends (``cancelled``) once killed; ``interrupts`` signals land in the waits first."""

    def __init__(self, interrupts: int) -> None:
        self.interrupts = interrupts
        self.kills = 0

    def kill(self) -> None:
        self.kills += 1

    def wait(self, timeout: float | None = None) -> Mapping[str, Any]:
        if self.interrupts:
            self.interrupts -= 1
            raise KeyboardInterrupt
        assert self.kills, "waited for a run nobody killed"
        return {"kuro/outcome": "cancelled", "kuro/exit-code": 130}


@pytest.mark.parametrize("interrupts", [0, 1, 3])
def test_stop_and_wait_returns_the_cancelled_receipt_whatever_interrupts_arrive(interrupts: int) -> None:
    run = _Run(interrupts)
    assert stop_and_wait(run) == {"kuro/outcome": "cancelled", "kuro/exit-code": 130}
    assert run.kills == interrupts + 1


@pytest.mark.parametrize("when", ["after the thread began", "before the thread existed"])
def test_an_interrupt_while_start_starts_the_guest_cancels_it_and_the_handle_is_returned(
    store: MemoryBlockStore,
    guest_cid: Callable[[str], str],
    home: Path,
    when: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Thread.start waits for the new thread to begin: a signal landing there (the guest may already
    # be writing) must cancel that run, not leave it running with no handle.
    original = threading.Thread.start
    interrupted: list[bool] = []

    def interrupted_start(thread: threading.Thread) -> None:
        if thread.name != "kuro-guest" or interrupted:
            return original(thread)
        interrupted.append(True)
        if when == "after the thread began":
            original(thread)
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", interrupted_start)
    handle = start(make_session(make_fs(store)), guest(guest_cid("spin"), "run"), store=store, home=home)
    assert isinstance(handle, Handle) and interrupted
    receipt = handle.wait()
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("cancelled", 130)
