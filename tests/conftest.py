"""Project-wide test configuration.

Parity tests (marker ``parity``) compare our bytes with the JavaScript IPFS stack.
A developer without node may skip them; CI (``CI`` set in the environment) may not:
there a skipped parity test is reported as a failure, because a parity claim nobody
checks is no claim.

The test run never touches the real embedded home: ``KURO_HOME`` points at a fresh
temporary directory for the whole session (tests that need their own home set it).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator

import pytest


def pytest_configure(config: pytest.Config) -> None:
    os.environ["KURO_HOME"] = tempfile.mkdtemp(prefix="kuro-test-home-")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and item.get_closest_marker("parity") is not None:
        report.outcome = "failed"
        report.longrepr = f"parity test skipped in CI (not allowed): {report.longrepr}"
