"""Running the gateway app on uvicorn, with the limits a server on a network needs.

## The one decision
The app bounds what it reads and sends (:mod:`kuro_fs.gateway.server`); this module bounds the
connections, on uvicorn with its ``httptools`` parser (``uvicorn[standard]``), by a small subclass
of uvicorn's protocol:

================================ ==========================================================
abuse                            bound
================================ ==========================================================
many connections                 ``max_connections`` (uvicorn ``limit_concurrency``: 503 past it)
                                 and a listen ``backlog``
huge request heads               ``max_head_bytes`` over the request line and headers: 400, closed
slow request heads (slowloris)   the head must arrive within ``head_timeout`` s of the
                                 connection (or of the previous response), else closed
idle keep-alive                  ``keep_alive`` s (uvicorn)
slow upload / slow reader        the app's ``body_timeout`` / ``send_timeout``
bytes between requests           (a CRLF, a body the answer did not read) start the head deadline
================================ ==========================================================

uvicorn alone never times out a connection that has sent part of a request head, and
``data_received`` re-arms nothing, so a client dripping one byte at a time would hold a
connection forever; the head deadline closes that gap.

## Effects
Binds a socket and runs an event loop (in this thread, or a background one for tests and benches).

## Not done here
No TLS, no HTTP/2, no multi-process workers (run several behind a proxy if one core is not enough).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from kuro_fs.blocks import BlockStore
from kuro_fs.gateway.server import GatewayConfig, create_app

__all__ = ["ServerLimits", "listen", "run_gateway", "running_gateway"]

_DEFAULT_HEAD_BYTES: Final = 16 * 1024


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Connection-level bounds (see the module docstring's table)."""

    max_connections: int = 512
    backlog: int = 1024
    max_head_bytes: int = _DEFAULT_HEAD_BYTES
    head_timeout: float = 10.0
    keep_alive: int = 5


class _Overlong(Exception):
    pass


def _protocol(limits: ServerLimits) -> type[HttpToolsProtocol]:
    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        _head_bytes = 0
        _head_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._head_bytes = 0
            self._head_timer = self.loop.call_later(limits.head_timeout, self._head_too_slow)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def _count(self, n: int) -> None:
            self._head_bytes += n
            if self._head_bytes > limits.max_head_bytes:
                raise _Overlong  # httptools reports it as a parser error: uvicorn answers 400 and closes

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            # Any byte cancels uvicorn's keep-alive timer, which only a new response re-arms: bytes that start
            # no request (a CRLF between requests, the rest of a body the answer did not wait for) would hold
            # the connection open forever. With no request in progress they get the head deadline.
            idle = self.cycle is None or self.cycle.response_complete
            if idle and self._head_timer is None and not self.transport.is_closing():
                self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.cycle is not None and self.cycle.keep_alive:
                self._disarm()  # idle keep-alive is uvicorn's timer; the next head re-arms ours

    return BoundedHttpToolsProtocol


class _CutIsLogged(logging.Filter):
    """Drops uvicorn's generic line for a response left incomplete: the app cuts a broken CAR on purpose
    and has logged one line naming it (:class:`kuro_fs.gateway.server._CarStream`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != _INCOMPLETE


_INCOMPLETE: Final = "ASGI callable returned without completing response."
_CUT_FILTER: Final = _CutIsLogged()


def _config(
    store: BlockStore, host: str, port: int, config: GatewayConfig, limits: ServerLimits, log_level: str
) -> uvicorn.Config:
    built = _uvicorn_config(store, host, port, config, limits, log_level)
    logging.getLogger("uvicorn.error").addFilter(_CUT_FILTER)  # after uvicorn configured its logging; once
    return built


def _uvicorn_config(
    store: BlockStore, host: str, port: int, config: GatewayConfig, limits: ServerLimits, log_level: str
) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(store, config),
        host=host,
        port=port,
        http=_protocol(limits),
        limit_concurrency=limits.max_connections,
        backlog=limits.backlog,
        timeout_keep_alive=limits.keep_alive,
        lifespan="off",
        access_log=False,
        log_level=log_level,
        server_header=False,
    )


def listen(host: str, port: int, backlog: int = 1024) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0 picks a free port), for :func:`run_gateway`.

    Bound here rather than by uvicorn, whose bind failure is three log lines and ``sys.exit(3)``.
    Raises OSError: the address cannot be bound or resolved; ``filename`` is ``host:port``.
    """
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        return socket.create_server((host, port), family=family, backlog=backlog)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), f"{host}:{port}") from None


def run_gateway(
    store: BlockStore,
    host: str = "127.0.0.1",
    port: int = 8080,
    config: GatewayConfig | None = None,
    limits: ServerLimits | None = None,
    log_level: str = "info",
    sock: socket.socket | None = None,
) -> None:
    """Serve ``store`` until interrupted (Ctrl-C or SIGTERM stop it gracefully).

    ``sock`` (from :func:`listen`) is served instead of binding ``host``:``port``.
    """
    server = uvicorn.Server(_config(store, host, port, config or GatewayConfig(), limits or ServerLimits(), log_level))
    server.run(sockets=None if sock is None else [sock])


@contextmanager
def running_gateway(
    store: BlockStore,
    host: str = "127.0.0.1",
    port: int = 0,
    config: GatewayConfig | None = None,
    limits: ServerLimits | None = None,
    log_level: str = "warning",
) -> Iterator[str]:
    """Run the gateway in a background thread; yield its base URL (``http://127.0.0.1:PORT``).

    ``port=0`` picks a free port. The server stops when the block exits.
    Raises RuntimeError: if the server did not start within 10 s.
    """
    server = uvicorn.Server(_config(store, host, port, config or GatewayConfig(), limits or ServerLimits(), log_level))
    thread = threading.Thread(target=server.run, name="kuro-gateway", daemon=True)
    thread.start()
    started = threading.Event()
    for _ in range(1000):
        if server.started:
            started.set()
            break
        if not thread.is_alive():
            break
        threading.Event().wait(0.01)
    if not started.is_set():
        server.should_exit = True
        thread.join(5)
        raise RuntimeError(f"gateway did not start on {host}:{port}")
    sockets: list[Any] = [s for srv in server.servers for s in srv.sockets]
    bound_port = sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound_port}"
    finally:
        server.should_exit = True
        thread.join(10)
