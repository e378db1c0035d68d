"""kuro_wasm.batch: many guest invocations over a cluster of workers, each run at most once.

The fifth layer, between the ledger and the command line (``cli → batch → ledger → host →
model``): a batch *uses* the ledger — its driver claims operation ids and records receipts, the
ledger's exactly-once promise is the batch's — and it runs guests through the host in its
workers, so it can sit neither in the ledger (which must not import a distributed engine to keep
receipts) nor in the host (which must not import the ledger). One concept per module: the
invocation on the wire and the worker's side (:mod:`.worker`), where workers read blocks
(:mod:`.stores`), what the driver believes of an answer (:mod:`.verify`), the backend seam
(:mod:`.backend`) and its two backends — Dask (:mod:`.cluster`, the ``dask`` extra) and this
machine's worker-process pool (:mod:`.local`) — and the driver, ``run_many`` (:mod:`.driver`).

Importing this package imports no Dask and no wasmtime.
"""

from kuro_wasm.batch.driver import Batch, Completed, run_many
from kuro_wasm.batch.stores import GatewayStore, SharedStore, WorkerStore

__all__ = ["Batch", "Completed", "GatewayStore", "SharedStore", "WorkerStore", "run_many"]
