"""A batch over a gateway that lies: the receipt names the CID that failed verification and how, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_witness import Shared

from kuro_fs.filestore import FileBlockStore
from kuro_fs.gateway.serve import running_gateway
from kuro_wasm.batch import GatewayStore, run_many
from kuro_wasm.batch.local import LocalPool

pytestmark = pytest.mark.timeout(120)


class _Lying:
    """The shared store, except that ``lie_about``'s bytes come back with one byte more."""

    def __init__(self, inner: FileBlockStore, lie_about: str) -> None:
        self._inner = inner
        self._lie = lie_about

    def get(self, cid: str) -> bytes | None:
        data = self._inner.get(cid)
        return data + b"!" if data is not None and cid == self._lie else data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
def lying_gateway(shared: Shared) -> Iterator[str]:
    with running_gateway(_Lying(shared.store, shared.batch)) as url:  # type: ignore[arg-type]
        yield url


def _the_lie_is_named(receipt: dict[str, Any], guest: str) -> None:
    assert (receipt["kuro/outcome"], receipt["kuro/exit-code"]) == ("load-error", 126)
    error = receipt["kuro/error"]
    assert "\n" not in error and error.count(guest) >= 1, error
    assert "do not hash to this CID" in error and "[gateway-lied]" in error, error


def test_a_guest_the_gateway_lies_about_is_named_in_a_pool_runs_receipt(
    shared: Shared, lying_gateway: str, tmp_path: Path
) -> None:
    lines = [{"guest": shared.batch, "export": "echo", "args": [1]}]
    pool = LocalPool(1, store=GatewayStore(lying_gateway), home=False)
    [done] = list(run_many(lines, store=FileBlockStore(tmp_path / "driver"), cluster=pool))
    _the_lie_is_named(done.value, shared.batch)


def test_a_guest_the_gateway_lies_about_is_named_in_a_dask_workers_receipt(
    shared: Shared, lying_gateway: str, client: Any, tmp_path: Path
) -> None:
    lines = [{"guest": shared.batch, "export": "echo", "args": [1]}]
    store = FileBlockStore(tmp_path / "driver")
    where = GatewayStore(lying_gateway)
    [done] = list(run_many(lines, store=store, cluster=client, worker_store=where, worker_home=str(tmp_path / "w")))
    _the_lie_is_named(done.value, shared.batch)
