"""kuro_wasm.host.worker: the worker-process backend of ``isolation="process"``.

One concept per module: the frames (:mod:`.protocol`), the zygote that forks workers
(:mod:`.zygote`), a worker's hardening (:mod:`.hardening`) and its request loop (:mod:`.serve`),
the block store a guest sees inside a worker (:mod:`.remote`), what the host checks of what comes
back (:mod:`.verify`), one run seen from the host (:mod:`.run`) and the pool (:mod:`.pool`). The
protocol and the pool are the seam a scale-out backend would reuse: a remote worker speaks the same
frames.

This package imports :mod:`kuro_wasm.host.job` and the model, never :mod:`kuro_wasm.host.api`
(which imports it).
"""

from kuro_wasm.host.worker.hardening import Hardening
from kuro_wasm.host.worker.pool import WorkerPool, default_pool

__all__ = ["Hardening", "WorkerPool", "default_pool"]
