"""Fixtures for the pure terminal-model suite (no wasmtime, no I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from model_strategies import EMPTY_CID, GUEST_CID

from kuro_wasm.model.sessions import Session, guest, session


@pytest.fixture
def sess() -> Session:
    """A terminal-repo session over the empty fs root."""
    return session("s1", EMPTY_CID)


@pytest.fixture
def spec() -> dict[str, Any]:
    """A guest spec: run(40, 2) of a (fake) guest CID."""
    return guest(GUEST_CID, "run", [40, 2])
