"""One deadline for a whole HTTP exchange, enforced beneath httpx at every socket operation.

## The one decision
httpx's timeouts bound each socket operation (a connect, one read, one write, a wait for a pooled
connection), never a request, and its synchronous client has no total timeout (encode/httpx#776,
#1450): a peer that sends one byte just inside the read timeout holds a request open for as long as
it likes, in the response head as well as in the body. So the deadline is kept where every byte
passes, httpcore's network backend (its documented seam below httpx): each connect, TLS handshake,
read and write waits at most ``min(its own timeout, the time left)``, and one that starts at the
deadline or ends after it raises httpcore's own timeout, which httpx maps to
``httpx.TimeoutException`` as it does for any other. Nothing is polled and no thread watches.

The deadline in force is a context variable set by :func:`bounded` around one exchange: the
synchronous client reads on the caller's thread, so pooled connections stay shared while each
request carries its own bound, and a thread with no exchange in progress is not bounded. A
:class:`Deadline` can be :meth:`~Deadline.renew`-ed (a streamed CAR bounds each block, see
:meth:`kuro_fs.gateway.client.GatewayBlockStore.prefetch`) and :meth:`~Deadline.check`-ed between
chunks (which also bounds a transport that is not httpx's own, such as a test's ``MockTransport``).
The clock is injectable, so a test drives time instead of waiting for it.

## Effects
:func:`bound_client` wraps the network backend of each of an ``httpx.Client``'s own transports (the
default one and any proxy mount, so ``HTTP(S)_PROXY`` keeps working). It reaches two private
attributes (``Client._transport``/``_mounts`` and the pool's ``_network_backend``; httpx offers no
public way to give its transport a backend): a missing one raises ``AttributeError`` when the client
is made, never silently unbounded (``tests/gateway/test_deadline.py`` fails on such an upgrade).

## Not done here
Name resolution is not bounded (``getaddrinfo`` takes no timeout); a numeric host, as the gateway
URLs here usually are, resolves without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    import ssl

    import httpcore
    import httpx

__all__ = ["Deadline", "DeadlinePassed", "bound_client", "bounded"]

_T = TypeVar("_T")


class DeadlinePassed(TimeoutError):
    """The exchange's deadline passed between two reads (the caller turns it into its own timeout)."""


class Deadline:
    """When the exchange in progress must be over: ``span`` seconds from its start (or its last renewal)."""

    __slots__ = ("_at", "_clock", "span")

    def __init__(self, span: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.span = span
        self._clock = clock
        self._at = clock() + span

    def left(self) -> float:
        """Seconds until the deadline (negative once it has passed)."""
        return self._at - self._clock()

    def renew(self) -> None:
        """Start a new ``span`` from now (the previous part of the exchange arrived in time)."""
        self._at = self._clock() + self.span

    def check(self) -> None:
        """Raise DeadlinePassed if the deadline has passed."""
        if self.left() < 0:
            raise DeadlinePassed(f"not complete within the {self.span:g} s deadline")

    def within(self, timeout: float | None, operation: Callable[[float], _T], late: type[Exception]) -> _T:
        """``operation(min(timeout, time left))``; ``late`` is raised if it starts or ends past the deadline."""
        left = self.left()
        if left <= 0:
            raise late(f"the {self.span:g} s deadline passed before this step")
        result = operation(left if timeout is None else min(timeout, left))
        if self.left() < 0:
            raise late(f"this step ended past the {self.span:g} s deadline")
        return result


_CURRENT: ContextVar[Deadline | None] = ContextVar("kuro_fs_gateway_deadline", default=None)


@contextmanager
def bounded(span: float, clock: Callable[[], float] = time.monotonic) -> Iterator[Deadline]:
    """Bound every socket operation of the current thread's exchange by one deadline ``span`` s from now."""
    deadline = Deadline(span, clock)
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)


def _within(timeout: float | None, operation: Callable[[float | None], _T], late: str) -> _T:
    deadline = _CURRENT.get()
    if deadline is None:
        return operation(timeout)
    import httpcore  # loaded already: only an httpx client's transport calls this

    return deadline.within(timeout, operation, getattr(httpcore, late))


class _Stream:
    """A connection (an ``httpcore.NetworkStream``) whose every wait is cut at the deadline in force.

    Duck-typed rather than subclassed, so importing this module needs no httpcore (the ``gateway``
    extra is imported when the first store is made).
    """

    def __init__(self, inner: httpcore.NetworkStream | _Stream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return _within(timeout, lambda wait: self._inner.read(max_bytes, wait), "ReadTimeout")

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _within(timeout, lambda wait: self._inner.write(buffer, wait), "WriteTimeout")

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> _Stream:
        start = self._inner.start_tls
        return _Stream(_within(timeout, lambda wait: start(ssl_context, server_hostname, wait), "ConnectTimeout"))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend:
    """httpcore's backend (an ``httpcore.NetworkBackend``), each connection it opens wrapped in :class:`_Stream`."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        connect = self._inner.connect_tcp
        return _Stream(
            _within(timeout, lambda wait: connect(host, port, wait, local_address, socket_options), "ConnectTimeout")
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> _Stream:
        connect = self._inner.connect_unix_socket
        return _Stream(_within(timeout, lambda wait: connect(path, wait, socket_options), "ConnectTimeout"))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def bound_client(client: httpx.Client) -> httpx.Client:
    """``client`` with the backend of each of its httpx transports bounded by the deadline in force."""
    import httpx

    for transport in (client._transport, *client._mounts.values()):  # private: see the module docstring
        if isinstance(transport, httpx.HTTPTransport):
            pool = transport._pool
            if not isinstance(pool._network_backend, _Backend):
                pool._network_backend = cast("httpcore.NetworkBackend", _Backend(pool._network_backend))
    return client
