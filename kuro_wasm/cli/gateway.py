"""``kuro gateway serve`` and ``kuro gateway publish``: the home's blocks over HTTP, and custody pushes.

## The one decision
``serve`` serves the home's own block store (never a gateway-backed one: a gateway that fetched
from another gateway would be a recursive gateway, not this one) with the Trustless Gateway
protocol and custody writes (:mod:`kuro_fs.gateway.server`), under the connection limits of
:mod:`kuro_fs.gateway.serve`. The write token comes from ``--token-file`` or
``$KURO_GATEWAY_TOKEN`` — never from the command line, where ``ps`` would show it; without one the
gateway is read-only. ``publish`` is the one explicit way blocks leave the machine: it pushes the
named CIDs (and, for a root, its DAG) from the home to ``--gateway``/``$KURO_GATEWAY``.

## Effects
Binds a socket (serve) or talks HTTP (publish); reads the home's blocks; prints one JSON line.

## Not done here
No daemonizing, no TLS (put a proxy in front), no listing of what a gateway holds.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kuro_wasm.cli.context import TOKEN_ENV, Context, UsageError, checked_token

__all__ = ["add_gateway_parsers", "publish", "serve"]


def add_gateway_parsers(group: Any, leaf: Callable[..., argparse.ArgumentParser]) -> None:
    """``kuro gateway serve`` and ``kuro gateway publish``."""
    srv = leaf(group, "serve", "serve the home's blocks as an IPFS trustless gateway with custody writes", serve)
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8080, help="port to listen on (default: 8080; 0 picks a free one)")
    srv.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"a file holding the custody write token (default: ${TOKEN_ENV}; neither: read-only)",
    )
    srv.add_argument(
        "--max-block-bytes", type=int, default=2 * 1024 * 1024, help="largest block a custody write may store"
    )
    srv.add_argument("--max-connections", type=int, default=512, help="connections served at once (more get 503)")
    pub = leaf(group, "publish", "push blocks (and each root's DAG) from the home to a gateway's custody", publish)
    pub.add_argument("cids", nargs="+", metavar="CID", help="a block or DAG root to publish")


def _token(args: argparse.Namespace) -> str | None:
    from kuro_fs.gateway.client import check_token

    if args.token_file is None:
        return checked_token(os.environ.get(TOKEN_ENV) or None, f"${TOKEN_ENV}", check_token)
    try:
        token = Path(args.token_file).read_bytes().decode("utf-8").strip()
    except UnicodeDecodeError:
        raise UsageError(f"token file {args.token_file} is not UTF-8 text") from None
    if not token:
        raise UsageError(f"token file {args.token_file} is empty")
    return checked_token(token, f"token file {args.token_file}", check_token)


def serve(args: argparse.Namespace, ctx: Context) -> int:
    """Run the gateway over the home's block store until interrupted."""
    from kuro_fs.filestore import default_store
    from kuro_fs.gateway.serve import ServerLimits, listen, run_gateway
    from kuro_fs.gateway.server import GatewayConfig

    if ctx.gateway is not None:
        raise UsageError("`kuro gateway serve` serves the home's own blocks; drop --gateway / $KURO_GATEWAY")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a TCP port")
    if args.max_block_bytes < 1 or args.max_connections < 1:
        raise UsageError("--max-block-bytes and --max-connections must be positive")
    token = _token(args)
    limits = ServerLimits(max_connections=args.max_connections)
    sock = listen(args.host, args.port, limits.backlog)  # a port in use is one line (OSError), before anything else
    with sock:
        store = default_store(ctx.home)
        # uvicorn says nothing when it is handed a socket: the address (the port --port 0 picked) is said here,
        # and a client may connect from now on (the socket is listening; uvicorn accepts what waits).
        host = f"[{args.host}]" if ":" in args.host else args.host
        where = f"http://{host}:{sock.getsockname()[1]}"
        ctx.note(
            f"kuro gateway: serving {store.root}, running on {where}"
            + ("" if token else " (read-only: no write token)")
        )
        config = GatewayConfig(token=token, max_block_bytes=args.max_block_bytes)
        run_gateway(store, args.host, args.port, config, limits, sock=sock)
    return 0


def publish(args: argparse.Namespace, ctx: Context) -> int:
    """Push the named blocks to the gateway; print the result; exit 1 if any was rejected."""
    if ctx.gateway is None:
        raise UsageError("publish needs a gateway: --gateway URL or $KURO_GATEWAY")
    result = ctx.store.publish(args.cids)
    ctx.say(json.dumps(result, sort_keys=True))
    return 1 if result["rejected"] else 0
