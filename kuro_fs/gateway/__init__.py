"""kuro_fs.gateway: blocks leave the machine — a trustless IPFS gateway with custody, and its client store.

Re-exports only. The server (:mod:`kuro_fs.gateway.server`, Starlette) and its runner
(:mod:`kuro_fs.gateway.serve`, uvicorn) are imported by name, so importing this package pulls in
neither; the client (:class:`GatewayBlockStore`) imports httpx when it is first constructed.
These need the ``gateway`` extra: ``pip install 'kuro-wasm[gateway]'``.
"""

from kuro_fs.gateway.client import GatewayBlockStore

__all__ = ["GatewayBlockStore"]
