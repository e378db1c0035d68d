"""The worker pool: long-lived worker processes, what runs where, and what happens when one dies.

## The one decision
A run is never lost and never run twice. The pool sends each run to one worker; a worker takes its
requests strictly in order, so of the runs sent to it only the oldest one not yet finished (its
*head*) can have started. When a worker's socket closes before the head's ``done``, the head — and
only the head — ends with ``worker-died`` (exit 128 + the signal, learned from the zygote, within a
few milliseconds), and the runs queued behind it, which cannot have started, go back to the front of
the pool's queue for another worker: that is their first run, not a retry. No run that started is
ever sent again; a ledgered run therefore records ``worker-died`` as its outcome.

Scheduling: runs wait in one queue; an idle worker takes the next one, and when every worker is busy
a second run is pipelined behind a running one (``depth`` 2), so a worker never waits for the host
between two short runs. A worker that falls idle while another still has a queued run takes it back
(``withdraw``: the worker gives it up only if it has not started), so a short run is not stuck
behind a long one. The pool keeps ``workers`` active workers plus ``spare`` started and idle ones:
when a worker dies or retires, a spare takes its place at once and a new spare is forked from the
zygote in the background. Whatever ends a worker's reader thread, the worker is killed.

The host keeps its own clock on every run: a run still waiting for a worker when its deadline
passes, or killed while waiting, ends at once (``timeout``/``cancelled``); a worker that has not
stopped its head :data:`~kuro_wasm.host.worker.run.STOP_GRACE_S` after its deadline or a kill is
killed (``SIGKILL`` through a pidfd), and the run ends with the stop's outcome. A frame that breaks
the protocol, a block that does not hash to its CID, or a result the model refuses gets the worker
killed the same way; its head's receipt says why (``worker-died``). An error of the host's own while
it reads a worker's frames gets the worker killed too, and its head ends ``host-error``: neither is
ever the guest's fault, and no reader thread ends in a traceback.

Compiled guests go one way only: a worker asks for a guest it has not run (``module``), and the
host compiles it — or loads it from its own module cache, whose tags it verifies — and answers with
the serialized artifact (one compile for workers asking at once). A worker never writes anything
the host deserializes.

Who reads a worker's frames (leader/follower): each worker has a *keeper* thread, which reads them
while runs are out that no caller waits on (:func:`~kuro_wasm.host.api.start`, the async API, probes)
and, while none is out, waits in ``poll`` for the worker's hang-up only. A :func:`~kuro_wasm.host.api.run`
caller waits for its receipt by reading its worker's frames itself once its run is that worker's
head (:meth:`WorkerPool.lead`), and hands the channel on when its run ends — to the waiting caller of
the next head, or to the keeper while frames are still awaited. A warm run thus costs no thread
hand-over in the host (~5–10 % of a warm trivial run, interleaved, loaded machine). Whoever reads
when a worker's channel ends settles its runs, once (:meth:`WorkerPool._end`); ``on_chunk`` and
``on_exit`` are called on whichever thread reads. A run() made from ``on_chunk`` first hands the channel the
thread reads on — to the keeper, or, made on the keeper, to a stand-in thread until the keeper is back — since
the reader's run may be the new run's head on the same worker (unread, both would hang); that run's later
chunks, and its receipt, may then come while its ``on_chunk`` still waits. A run() made from a signal handler
while the main thread waits in ``poll`` for its run's frames hands that channel to the keeper the same way; when
it returns, the interrupted wait is woken (the process's signal eventfd) and claims the channel back, or finds its
run ended.
On the main thread a caller reads only while
Ctrl-C is routed to its run (:meth:`~kuro_wasm.host.worker.run.RemoteRun.interrupt`: the run is killed and
its ``cancelled`` receipt returned, as :func:`~kuro_wasm.host.api.stop_and_wait` does) or ignored: an exception
raised into a thread inside a frame would leave the channel unreadable, and the worker is then killed.

Each worker has two sockets: the *run channel* carries runs and the replies to the worker's asks to
it, and every frame of the worker back; the *control channel* carries stdin, eof, kill, withdraw and
probe frames to it (its main thread reads its runs itself; see :mod:`.serve`). The two are not
ordered with each other, so every dispatch gives its run a new id: a worker reads its runs in
increasing id order, and can tell a control frame for a run still to come from one for a run that
has finished.

## Effects
The zygote process and the workers it forks; one keeper thread and one eventfd per worker, one
watchdog thread; the run() callers' threads while they wait; pidfds; the callers' block stores (blocks
in and out); the host's module cache (guests compiled for workers).

## Not done here
No scheduling across machines (the frames are the protocol a remote pool would speak too), no
priorities, no per-tenant pools.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import itertools
import json
import os
import select
import signal
import socket
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import wasmtime.component

from kuro_fs.blocks import BlockStore
from kuro_fs.cid import parse
from kuro_fs.errors import InvalidCID, KuroFsError
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Fs
from kuro_fs.home import blocks_dir, resolve_home
from kuro_wasm.errors import HostError, KuroError, NotStarted
from kuro_wasm.host import engine as _engine
from kuro_wasm.host import loader
from kuro_wasm.host.cache import COMPONENT, MODULE
from kuro_wasm.host.context import STDIN_BUFFER_BYTES
from kuro_wasm.host.fsgate import fault_kind
from kuro_wasm.host.job import OnChunk, OnExit
from kuro_wasm.host.worker import protocol
from kuro_wasm.host.worker.hardening import Hardening, check_stores, closed_homes
from kuro_wasm.host.worker.protocol import CONTROL, MAX_BLOCK_BYTES, ProtocolError, read_frame, send
from kuro_wasm.host.worker.run import STOP_GRACE_S, RemoteRun, died_result
from kuro_wasm.host.worker.verify import accept_root
from kuro_wasm.host.worker.zygote import Zygote
from kuro_wasm.model import stream as _stream
from kuro_wasm.model.limits import MAX_WORKERS, Limits
from kuro_wasm.model.sessions import Session

__all__ = ["WorkerPool", "answering_for", "default_pool"]

_FROM_WORKER: Final = frozenset({"worker"})
#: How often a stdin writer waiting for room looks again whether its run ended (``took`` wakes it at once).
_STDIN_RECHECK_S: Final = 0.05
#: Set on the pool's reader threads, which call ``on_chunk``: a stdin write from there never waits.
_READER = threading.local()
#: The largest run frame (JSON and stdin) sent to a worker that is running another run. Its main thread reads
#: its run channel only between runs, so a frame that does not fit the socket's buffer (~200 KiB by default)
#: would block the host's sender — and through the sender's lock every frame to that worker, kills included —
#: until the running guest ends; a larger run waits in the queue for an idle worker instead.
PIPELINE_FRAME_BYTES: Final = 64 << 10
_START_FAILURES: Final = 3


class _StartTimeout(Exception):
    """A worker's hello did not come within the pool's ``start_timeout`` (raised by the hello's read alone)."""


_EXIT_STATUS_WAIT_S: Final = 1.0
#: ``_Conn.token`` when the worker's keeper thread reads its run channel.
_KEEPER: Final = object()
#: How long a run() caller waiting for its turn to read sleeps before it looks again (it is woken sooner).
_LEAD_RECHECK_S: Final = 0.25
_RECV_BYTES: Final = 1 << 16
#: At most this many bytes of plain components' serialized core modules are kept for the workers that ask next
#: (a componentize-py guest's are ~34 MiB): past it, those kept are dropped before the newest is kept.
_SENT_BYTES: Final = 128 << 20
#: Written by a Ctrl-C that :func:`kuro_wasm.host.api.run` routes to a process run on the main thread (one
#: eventfd for the process, made on first use and never closed: a signal handler may write it at any time).
_SIGFD: list[int] = []


class _Inbox:
    """The bytes of a worker's run channel, buffered: unlike ``socket.makefile``, it tells whether a frame's bytes
    are here already (``pending``), which a ``poll`` of the socket cannot, so a reader polls only when they are not."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = b""
        self._pos = 0

    @property
    def pending(self) -> bool:
        return self._pos < len(self._buf)

    def read(self, size: int = -1, /) -> bytes:
        """``size`` bytes; fewer only at the end of the stream. Raises OSError."""
        end = self._pos + size
        if end <= len(self._buf):
            out = self._buf[self._pos : end]
            self._pos = end
            return out
        if self._pos == len(self._buf):  # all read: the next bytes come whole in one recv, as a frame's mostly do
            part = self._sock.recv(max(_RECV_BYTES, min(size, 1 << 24)))
            if len(part) >= size:
                self._buf, self._pos = part, size
                return part[:size] if len(part) > size else part
            self._buf, self._pos = part, 0
            if not part:
                return part
        parts = [self._buf[self._pos :]]
        have = len(parts[0])
        self._buf, self._pos = b"", 0
        while have < size:
            part = self._sock.recv(max(_RECV_BYTES, min(size - have, 1 << 24)))
            if not part:
                break
            parts.append(part)
            have += len(part)
        data = b"".join(parts)
        if have > size:
            self._buf, data = data[size:], data[:size]
        return data


class _Conn:
    """One worker process as the host sees it."""

    def __init__(self, sock: socket.socket, ctl: socket.socket, zygote: Zygote) -> None:
        self.sock = sock  # the run channel: runs and replies out, every worker frame in
        self.ctl = ctl  # the control channel: stdin, eof, kill, withdraw, probe out
        self.zygote = zygote  # the one that forked it, and will report its wait status
        self.send_lock = threading.Lock()
        self.pid: int | None = None
        self.pidfd: int | None = None
        self.pidfd_lock = threading.Lock()  # a kill never signals through a pidfd number closed (and reused) meanwhile
        self.hardening: list[str] = []
        self.stores: tuple[str, ...] = ()  # the block store directories it may read directly (its hello says)
        self.outstanding: list[RemoteRun] = []
        self.ready = False
        self.dead = False
        self.retiring = False
        self.violation: str | None = None  # why the host stopped trusting it (a protocol violation)
        self.host_failure: str | None = None  # the host's own error while reading its frames
        self.hard_stop: tuple[RemoteRun, str] | None = None
        self.probes: deque[dict[str, Any]] = deque()
        self.probe_cond = threading.Condition()
        # Frames decided under the pool's lock, written in that order by whichever thread flushes: the order
        # on the wire is the order of ``outstanding``, and a run's stdin or kill never overtakes the run.
        self.outbox: deque[tuple[str, bytes, bytes | bytearray | memoryview]] = deque()
        self.inbox = _Inbox(sock)  # the run channel's frames, read by whoever holds ``token``
        # Who reads the run channel (module docstring): None (nobody: no frame is awaited), _KEEPER (the worker's
        # keeper thread) or the run whose run() caller reads its own frames. Changed under the pool's lock.
        self.token: object = None
        self.wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)  # wakes the keeper from its idle poll
        self.main_poll: select.poll | None = None  # the main thread's wait for its frames or a Ctrl-C (_await)
        self.main_polling = False  # the main thread waits in ``main_poll`` (a signal handler's run then makes its own)
        self.keep = False  # probed (tests): the keeper reads whatever comes, runs or not
        self.keeper_free = True  # False while its keeper waits in a run() made from on_chunk (a stand-in reads)
        self.ending = False  # one thread is settling its end (kill, the head's receipt, the rest re-queued)
        self.ended = False
        self.closed = False  # its descriptors are closed (``wake`` is written only before)

    def queue(self, kind: str, fields: Mapping[str, Any], payload: bytes = b"") -> None:
        """Put a control frame in the outbox (caller holds the pool's lock). Raises ProtocolError (never, for the
        int fields and bytes the pool's frames carry)."""
        self.outbox.append((kind, *protocol.frame(kind, fields, payload)))

    def send(self, kind: str, fields: Mapping[str, Any], payload: bytes = b"") -> bool:
        """Write one frame; False if the worker is gone (its reader sees that too)."""
        try:
            with self.send_lock:
                send(self.ctl if kind in CONTROL else self.sock, kind, fields, payload)
            return True
        except (OSError, ProtocolError):
            return False

    def kill(self) -> None:
        """SIGKILL the worker (through its pidfd: never another process that reused the pid)."""
        with self.pidfd_lock:
            if self.pidfd is not None:
                try:
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                except OSError:
                    pass
                return
        for sock in (self.sock, self.ctl):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def facts(self) -> dict[str, Any]:
        return {"pid": self.pid, "hardening": list(self.hardening)}


class WorkerPool:
    """Worker processes for ``isolation="process"`` runs (see the module docstring). ``close()`` is idempotent.

    ``workers`` active workers (default: ``$KURO_WORKERS``, else the number of CPUs; at most
    :data:`~kuro_wasm.model.limits.MAX_WORKERS`, 256) plus ``spare`` idle ones (as many at most);
    ``hardening`` is what each worker applies to itself; ``test_hooks`` makes workers answer
    :meth:`probe` (tests only); ``start_timeout`` is how long (s) each read of a worker's hello may wait (past it
    the start failed: a start timeout, said as such once the pool gives up). Raises HostError: the zygote
    could not be started, a count out of range; ValueError: a confined pool's ``hardening.stores`` would open
    the kuro home to its workers (:func:`~kuro_wasm.host.worker.hardening.check_stores`).
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        spare: int = 1,
        hardening: Hardening | None = None,
        test_hooks: bool = False,
        depth: int = 2,
        start_timeout: float = 30.0,
    ) -> None:
        count = workers if workers is not None else _default_workers()
        if isinstance(count, bool) or not isinstance(count, int) or count < 1 or spare < 0 or depth < 1:
            raise HostError(f"a pool needs workers >= 1, spare >= 0, depth >= 1; got {count}, {spare}, {depth}")
        if count > MAX_WORKERS or spare > MAX_WORKERS:
            raise HostError(f"a pool has at most {MAX_WORKERS} workers (and spares); got {count}, spare {spare}")
        self.size = count
        self.spare = spare
        self.depth = depth
        chosen = hardening or Hardening()
        if chosen.stores is None:  # the default kuro home's block store, as the CLI opens it
            chosen = dataclasses.replace(chosen, stores=(_resolved(str(blocks_dir())),))
        if chosen.filesystem:
            check_stores(
                chosen.stores or (), closed_homes()[0]
            )  # a grant that opens the kuro home to workers: refused here, clearly
        self.hardening = chosen
        self._options = {"hardening": self.hardening.to_data(), "test_hooks": test_hooks, "closed": closed_homes()}
        self._start_timeout = start_timeout
        lock = threading.Lock()
        #: The pool's state is guarded by ``_lock``, entered directly (``with self._lock``: a Condition's
        #: ``__enter__`` is a Python call, and the warm path takes the lock a dozen times a run); the three
        #: conditions below wait and notify on it.
        self._lock = lock
        self._cond = threading.Condition(lock)  # the pool's state
        self._watch = threading.Condition(lock)  # the watchdog's wake-up, under the same lock
        self._lead = threading.Condition(lock)  # who reads a worker's channel changed, or a waited-for run moved
        self._active: list[_Conn] = []
        self._spares: list[_Conn] = []
        self._starting = 0
        self._failures = 0
        self._broken: str | None = None
        self._pending: deque[RemoteRun] = deque()
        self._live: set[RemoteRun] = set()
        self._ids = itertools.count(1)
        self._closed = False
        self._watch_due = 0.0  # when the watchdog wakes next (a run due sooner wakes it)
        #: How many requests of each kind (``get``, ``has``, ``module``) the host has answered for its workers.
        self.answered: Counter[str] = Counter()
        self._compiling: dict[tuple[object, ...], threading.Lock] = {}  # (cid, engine config, home) being prepared
        #: a plain component's core modules as sent (the parts' names and sizes, their bytes), serialized once for
        #: every worker that asks, and kept while the loader keeps the prepared guest (at most _SENT_BYTES of them)
        self._sent_parts: weakref.WeakKeyDictionary[loader.Prepared, tuple[list[list[Any]], bytes]] = (
            weakref.WeakKeyDictionary()
        )
        self._zygote = Zygote()
        self._watchdog = threading.Thread(target=self._watch_loop, name="kuro-pool-watchdog", daemon=True)
        self._watchdog.start()
        with self._lock:
            self._fill()

    # ---- workers

    def _fill(self) -> None:
        """Fork workers until active + spare + starting covers the target (caller holds the lock)."""
        if self._closed or self._broken is not None:
            return
        missing = self.size + self.spare - len(self._active) - len(self._spares) - self._starting
        for _ in range(max(0, missing)):
            if not self._zygote.alive:
                self._zygote.close()
                self._zygote = Zygote()
            try:
                sock, ctl = self._zygote.fork(self._options)
            except HostError as exc:
                self._broken = str(exc)
                self._fail_waiting()
                return
            self._starting += 1
            conn = _Conn(sock, ctl, self._zygote)
            threading.Thread(target=self._read, args=(conn,), name="kuro-pool-reader", daemon=True).start()

    def _fail_waiting(self) -> None:
        failure = HostError(f"no worker process could be started: {self._broken}")
        waiting = list(self._pending)
        self._pending.clear()
        for run in waiting:
            threading.Thread(target=run.fail, args=(failure,), daemon=True).start()

    def wait_ready(self, timeout: float = 30.0) -> bool:
        """Block until every active and spare worker has said hello; False on timeout or a broken pool."""
        with self._lock:
            return (
                self._cond.wait_for(
                    lambda: (
                        self._broken is not None or (len(self._active) == self.size and len(self._spares) == self.spare)
                    ),
                    timeout,
                )
                and self._broken is None
            )

    @property
    def zygote_pid(self) -> int:
        """The pid of the zygote the workers are forked from."""
        return self._zygote.pid

    @property
    def pids(self) -> list[int]:
        """Pids of the active workers (then the spares), as the host sees them."""
        with self._lock:
            return [c.pid for c in self._active + self._spares if c.pid is not None]

    # ---- the reader of one worker

    def _read(self, conn: _Conn) -> None:
        """The keeper thread of one worker: its hello, then its frames whenever no run() caller reads them."""
        _READER.active = True  # this thread calls on_chunk: a stdin write from there must never wait
        try:
            try:
                self._hello(conn)
            except (ProtocolError, _StartTimeout) as exc:
                conn.violation = str(exc)
            except TimeoutError as exc:  # not the hello read's own (that is _StartTimeout): the host's failure
                conn.host_failure = f"{type(exc).__name__}: {exc}"
            except (OSError, ValueError):
                pass  # the connection broke (the worker is going)
            except Exception as exc:  # a host bug on this worker's frames: no traceback, no half-trusted worker left
                conn.host_failure = f"{type(exc).__name__}: {exc}"
            else:
                self._keep(conn)
        finally:
            self._end(conn)  # whatever ended this thread, the worker is not used again
            with self._lock:
                self._lead.wait_for(lambda: conn.ended)  # another thread may be settling its end still
                conn.closed = True
            try:
                os.close(conn.wake)
                conn.sock.close()
                conn.ctl.close()
            except OSError:
                pass

    def _hello(self, conn: _Conn) -> None:
        conn.sock.settimeout(self._start_timeout)
        try:
            hello = read_frame(conn.inbox, _FROM_WORKER, lambda _m: 0)
        except TimeoutError:  # this read's own timeout, and only it, is a start that took too long
            raise _StartTimeout(
                f"no hello from a worker within {self._start_timeout} s (the pool's start_timeout, for each read of it)"
            ) from None
        if hello is not None and hello[0]["t"] == "unfit":
            raise ProtocolError(f"the worker could not harden itself: {hello[0]['error']}")
        if hello is None or hello[0]["t"] != "hello":
            raise ProtocolError("a worker must say hello first")
        conn.sock.settimeout(None)
        # Said by the worker's own code after hardening, before any guest ran in it: trusted once, here.
        conn.pid = int(hello[0]["pid"])
        threading.current_thread().name = f"kuro-pool-reader-{conn.pid}"  # names the worker in a thread dump
        hardening = hello[0]["hardening"]
        if not isinstance(hardening, list) or not all(isinstance(h, str) for h in hardening):
            raise ProtocolError("hello.hardening must be a list of names")
        conn.hardening = sorted(hardening)
        if hello[0]["engine"] != _engine.engine_key(_engine.EngineConfig()):  # its runs must be the in-process ones
            raise ProtocolError(f"the worker's engine is {hello[0]['engine']}, not this host's")
        stores = hello[0]["stores"]
        if not isinstance(stores, list) or not all(isinstance(d, str) for d in stores):
            raise ProtocolError("hello.stores must be a list of directory names")
        conn.stores = tuple(stores)
        conn.pidfd = os.pidfd_open(conn.pid)
        with self._lock:
            self._starting -= 1
            self._failures = 0
            conn.ready = True
            if self._closed:
                conn.kill()
            elif len(self._active) < self.size:
                self._active.append(conn)
            else:
                self._spares.append(conn)
            self._cond.notify_all()
            flush = self._dispatch()
        self._flush(flush)

    def _keep(self, conn: _Conn) -> None:
        """Read ``conn``'s frames while the token is the keeper's; while nobody's, wait in ``poll`` for the worker's
        hang-up (not for its data: a run() caller may be about to read that) or a wake; return once it has ended."""
        poller = select.poll()
        poller.register(conn.sock, select.POLLRDHUP)
        poller.register(conn.wake, select.POLLIN)
        while True:
            with self._lock:
                while not conn.ended and (conn.ending or conn.token not in (None, _KEEPER)):
                    self._lead.wait()  # a run() caller reads (or ends it): it hands the channel back
                if conn.ended:
                    return
                mine = conn.token is _KEEPER
            if mine:
                if not self._pump_as(conn, _KEEPER):
                    return
                with self._lock:
                    if conn.token is _KEEPER:
                        self._pass_on(conn)
                continue
            events = poller.poll()
            try:
                os.eventfd_read(conn.wake)
            except BlockingIOError:
                pass
            if any(fd == conn.sock.fileno() for fd, _ in events):  # it hung up (or broke): read what is left
                with self._lock:
                    if conn.token is None:
                        conn.token = _KEEPER

    def _pump_as(self, conn: _Conn, token: object) -> bool:
        """:meth:`_pump` with this thread named as reading ``conn`` for ``token`` (the keeper or a stand-in)."""
        _READER.leads = (conn, token)
        try:
            return self._pump(conn)
        finally:
            _READER.leads = None

    def _pump(self, conn: _Conn) -> bool:
        """Read and act on one frame of ``conn`` (the caller holds its token); False (after ending it) at its end."""
        try:
            frame = read_frame(conn.inbox, _FROM_WORKER, lambda m: self._payload_limit(conn, m))
            if frame is not None:
                _READER.worker = conn.pid
                try:
                    self._on_frame(conn, *frame)
                finally:
                    _READER.worker = None
                return True
        except ProtocolError as exc:
            conn.violation = str(exc)
        except (OSError, ValueError):
            pass  # the connection broke (the worker is going): its runs are settled by _end
        except Exception as exc:  # a host bug on this worker's frames: no traceback, no half-trusted worker left
            conn.host_failure = f"{type(exc).__name__}: {exc}"
        self._end(conn)
        return False

    def _end(self, conn: _Conn) -> None:
        """Kill the worker and settle its runs (:meth:`_died`), once, whichever thread saw its end first."""
        with self._lock:
            if conn.ending:
                return
            conn.ending = True
        try:
            conn.kill()
            self._died(conn)
        finally:
            with self._lock:
                conn.ended = True
                self._lead.notify_all()
                self._wake(conn)

    def _wake(self, conn: _Conn) -> None:
        """Wake ``conn``'s keeper from its idle poll (caller holds the lock)."""
        if not conn.closed:
            os.eventfd_write(conn.wake, 1)

    def _pass_on(self, conn: _Conn) -> None:
        """Give ``conn``'s channel to whoever reads next (caller holds the lock and the token): the run() caller of
        its head if it waits to read, else the keeper while a frame is awaited, else nobody."""
        head = conn.outstanding[0] if conn.outstanding else None
        if head is not None and head.waiter and not conn.ending:
            conn.token = head
            self._lead.notify_all()
        elif head is not None or conn.keep:
            if conn.token is not _KEEPER:
                conn.token = _KEEPER
                self._wake(conn)
                self._lead.notify_all()
        elif conn.token is not None:
            conn.token = None
            self._lead.notify_all()

    def lead(self, run: RemoteRun) -> dict[str, Any]:
        """Wait for ``run``'s receipt, reading its worker's frames on this thread while it is that worker's head
        (leader/follower: no thread hand-over on a warm run); raises the run's HostError if it has none.

        Only for a run submitted with ``leading`` set by a caller that waits at once (:func:`~kuro_wasm.host.api.run`):
        on the main thread, only while a Ctrl-C is routed to :meth:`RemoteRun.interrupt` or ignored, and the program's
        handlers are guarded (:func:`kuro_wasm.host.interrupts.hold`: one that raises stops the run through
        :meth:`RemoteRun.interrupted`) — an exception raised into this thread inside a frame would leave the channel
        unreadable (it then kills the worker).
        """
        main = threading.current_thread() is threading.main_thread()
        outer: tuple[_Conn, object] | None = getattr(_READER, "leads", None)
        if outer is not None:  # called from on_chunk while this thread reads a worker's frames: hand them on
            self._hand_off(*outer)
        try:
            return self._lead_run(run, main)
        finally:
            if outer is not None and outer[1] is _KEEPER:
                with self._lock:
                    outer[0].keeper_free = True
            elif outer is not None and main and _SIGFD:  # a signal handler's run: the run it interrupted may wait
                os.eventfd_write(_SIGFD[0], 1)  # in _await for frames the keeper now reads (it takes them back)

    def _lead_run(self, run: RemoteRun, main: bool) -> dict[str, Any]:
        outer = getattr(_READER, "leads", None)
        while not run.done.is_set():
            if run.stop_asked:  # Ctrl-C while it waited for a worker or its turn: as stop_and_wait
                run.stop_asked = False
                self.kill(run)
            conn = self._claim(run)
            if conn is None:
                continue
            was = getattr(_READER, "active", False)
            _READER.active = True  # on_chunk is called here now: a stdin write from there must never wait
            _READER.leads = (conn, run)
            inside = end = False
            try:
                while not run.done.is_set():
                    if main and not conn.inbox.pending:
                        if not self._await(conn, run):  # raised in here (between frames), the channel is whole
                            break  # its run ended, or a signal handler's run handed the channel on: claim it again
                    elif run.stop_asked:  # asked inside the last frame (a guarded handler raised): frames keep coming
                        run.stop_asked = False
                        self.kill(run)
                    inside = True
                    if not self._pump(conn):
                        break
                    inside = False
                    if conn.token is not run:  # a run() made from on_chunk handed the channel on: wait for it again
                        break
            except BaseException as exc:  # raised into this thread (a signal handler's) inside a frame: not whole
                if inside:
                    why = f"the reading thread was interrupted inside a frame: {type(exc).__name__}"
                    conn.host_failure = conn.host_failure or why
                    end = True
                raise
            finally:
                _READER.active = was
                _READER.leads = outer
                if end:
                    self._end(conn)
                with self._lock:
                    if conn.token is run:
                        self._pass_on(conn)
        if run.failure is not None:
            raise run.failure
        assert run.receipt is not None
        return run.receipt

    def _hand_off(self, conn: _Conn, token: object) -> None:
        """This thread, reading ``conn`` under ``token``, is about to wait for another run (a run() made from
        ``on_chunk``): ``conn``'s frames are read meanwhile — its run may be that run's head on the same worker —
        by the keeper, or by a stand-in thread while the keeper itself is the thread that waits."""
        with self._lock:
            if conn.token is not token or conn.ending:
                return
            if token is _KEEPER:
                conn.keeper_free = False  # until this thread's run() returns (lead's end)
            elif conn.keeper_free:
                conn.token = _KEEPER
                self._wake(conn)
                self._lead.notify_all()
                return
            stand = object()
            conn.token = stand
        threading.Thread(target=self._stand_in, args=(conn, stand), name="kuro-pool-stand-in", daemon=True).start()

    def _stand_in(self, conn: _Conn, stand: object) -> None:
        """Read ``conn``'s frames for its keeper while that waits in a run() made from ``on_chunk``: until the
        next head's caller waits to read, or the keeper is back (the keeper's token is still ``stand`` then)."""
        _READER.active = True
        while True:
            if not self._pump_as(conn, stand):
                return
            with self._lock:
                if conn.token is not stand:
                    return
                head = conn.outstanding[0] if conn.outstanding else None
                if (head is not None and head.waiter) or conn.keeper_free:
                    self._pass_on(conn)
                    return

    def _claim(self, run: RemoteRun) -> _Conn | None:
        """The worker whose channel ``run``'s caller now reads, or None (its run is done, or it was interrupted)."""
        with self._lock:
            run.waiter = True
            try:
                while not run.done.is_set() and not run.stop_asked:
                    conn: _Conn | None = run.conn if run.sent else None
                    if (
                        conn is not None
                        and not conn.ending
                        and conn.token in (None, run)
                        and conn.outstanding[:1] == [run]
                    ):
                        conn.token = run
                        return conn
                    self._lead.wait(_LEAD_RECHECK_S)  # queued, or another reads: woken at a dispatch or hand-over
                return None
            finally:
                run.waiter = False

    def _await(self, conn: _Conn, run: RemoteRun) -> bool:
        """Block until ``conn`` has data, acting on a Ctrl-C routed to ``run`` meanwhile (main thread only); False
        when woken to find ``run`` ended or its channel handed on (a signal handler's run did it: :meth:`lead`)."""
        if not _SIGFD:
            _SIGFD.append(os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK))
        sigfd = run.sigfd = _SIGFD[0]
        # One poll object per worker, not one per run; a signal handler's run waiting here while the interrupted
        # wait is inside that object's poll() gets its own (one poll object polled twice at once raises).
        shared = not conn.main_polling
        poller = conn.main_poll if shared else None
        if poller is None:
            poller = select.poll()
            poller.register(conn.sock, select.POLLIN)
            poller.register(sigfd, select.POLLIN)
            if shared:
                conn.main_poll = poller
        if shared:
            conn.main_polling = True
        try:
            while True:
                if run.stop_asked:
                    run.stop_asked = False
                    self.kill(run)  # as stop_and_wait: the run ends cancelled, and its receipt is waited for
                data = False
                for fd, _ in poller.poll():
                    if fd != sigfd:
                        data = True
                        continue
                    try:
                        os.eventfd_read(sigfd)
                    except BlockingIOError:
                        pass
                    if conn.token is not run or run.done.is_set():
                        return False
                if data:
                    return True
        finally:
            if shared:
                conn.main_polling = False

    def _payload_limit(self, conn: _Conn, message: Mapping[str, Any]) -> int:
        if message["t"] == "put":
            return MAX_BLOCK_BYTES
        if message["t"] in ("chunk", "done"):
            with self._lock:
                head = conn.outstanding[0] if conn.outstanding else None
            if head is not None and message["t"] == "done":  # the receipt: bounded by its run's own limits
                return protocol.receipt_limit(head.limits)
            if head is not None:  # a kept chunk fits what the cap has left; more is refused unread
                return max(0, head.limits.max_output_bytes - _stream.total_bytes(head.stream))
        return 0

    def _head(self, conn: _Conn, run_id: object) -> RemoteRun:
        with self._lock:
            head = conn.outstanding[0] if conn.outstanding else None
        if head is None or head.id != run_id:
            raise ProtocolError(f"a frame for run {run_id!r}, which is not the one this worker is running")
        return head

    def _on_frame(self, conn: _Conn, message: dict[str, Any], payload: bytes) -> None:
        kind = message["t"]
        if kind == "done":  # (first: every run has one)
            self._done(conn, message, payload)
        elif kind == "chunk":
            run = self._head(conn, message["id"])
            try:
                kept = run.chunk(message["stream"], payload)
            except KuroError as exc:
                raise ProtocolError(f"a chunk the stream refuses: {exc}") from exc
            if not kept:
                raise ProtocolError("the worker sent a chunk past the output bounds")
            if run.interruption is not None:  # on_chunk raised SystemExit/KeyboardInterrupt: stop the run
                self.kill(run)
        elif kind == "took":
            run = self._head(conn, message["id"])
            with self._lock:  # a worker can only say more than it was given by lying: it is held to what it got
                run.stdin_taken = max(run.stdin_taken, min(message["n"], run.stdin_written))
                self._cond.notify_all()
        elif kind in ("get", "has"):
            run = self._head(conn, message["id"])
            self._answer(conn, run, kind, message)
        elif kind == "module":
            self._compiled(conn, self._head(conn, message["id"]), message)
        elif kind == "put":
            run = self._head(conn, message["id"])
            problem = run.staged.add(message["cid"], payload)  # held apart until the run's root is believed
            if problem is not None:
                raise ProtocolError(problem)
        elif kind == "failed":
            run = self._head(conn, message["id"])
            self._finished(conn, run)
            run.fail(HostError(message["error"]))
        elif kind == "withdrawn":
            self._withdrawn(conn, message["id"], message["ok"])
        elif kind == "probed":
            with conn.probe_cond:
                conn.probes.append(message)
                conn.probe_cond.notify_all()
        else:
            raise ProtocolError(f"a worker does not send {kind}")

    def _answer(self, conn: _Conn, run: RemoteRun, kind: str, message: Mapping[str, Any]) -> None:
        cid = message["cid"]
        try:
            parse(cid)
        except InvalidCID as exc:
            raise ProtocolError(f"a {kind} for {cid!r}, which is not a CID") from exc
        block: bytes | None = None
        fault: str | None = None
        source = run.store if cid == run.command.get("kuro/guest") else run.fs_store
        try:
            if kind == "has":
                found = source.has(cid)
            else:
                block = source.get(cid)
                found = block is not None
        except KuroFsError as exc:  # a corrupt block or a failing store: the worker's store raises it as such
            found, block = False, None
            fault = fault_kind(exc)
            run.store_failed(exc)  # … and its receipt, if the guest could not load, says which block and why
        self.answered[kind] += 1
        conn.send("reply", {"rid": message["rid"], "found": found, "fault": fault}, block or b"")

    def _compiled(self, conn: _Conn, run: RemoteRun, message: Mapping[str, Any]) -> None:
        """Answer a worker's ``module``: the guest compiled by this host (or loaded from its own verified module
        cache) for the run's engine, serialized, with its shape — for a guest its kind linked from core modules
        (a plain component, :attr:`loader.Prepared.parts`) those instead; ``kind`` None when it cannot be loaded
        (the worker's run then reports why). Workers only ever deserialize what the host hands them, and the host
        compiles for a worker only the guest its run names, for that run's engine (anything else is a protocol
        breach: a taken-over worker cannot make the host compile other blocks)."""
        if message["cid"] != run.command.get("kuro/guest") or message["fuel"] is not (run.limits.fuel is not None):
            raise ProtocolError("a worker asked for a compiled guest other than its run's own")
        kind: str | None = None
        meta = artifact = b""
        parts: list[list[Any]] = []
        config = _engine.EngineConfig(fuel=message["fuel"])
        key = (message["cid"], config, run.home)
        with self._lock:
            once = self._compiling.setdefault(key, threading.Lock())
        sent: tuple[list[list[Any]], bytes] | None = None
        with once:  # workers asking for one guest at once: the first compiles (and serializes), the others find it
            ready = loader.prepare(run.store, message["cid"], config, home=run.home)
            if not isinstance(ready, loader.LoadFailure) and ready.parts:
                with self._cond:
                    sent = self._sent_parts.get(ready)
                if sent is None:
                    pieces = [(name, MODULE.serialize(module)) for name, module in ready.parts]
                    sent = ([[n, len(p)] for n, p in pieces], b"".join(p for _, p in pieces))
                    with self._cond:
                        if sum(len(kept) for _, kept in self._sent_parts.values()) + len(sent[1]) > _SENT_BYTES:
                            self._sent_parts.clear()  # (bounded: serialized again when asked again)
                        self._sent_parts[ready] = sent
            with self._lock:  # (still holding `once`: a request coming now waits for it, not for a lock of its own)
                self._compiling.pop(key, None)
        if sent is not None and not isinstance(ready, loader.LoadFailure):
            # linked from its core modules (a plain component): those, and its shape, not the compiled whole
            kind, meta = COMPONENT.name, ready.shape.to_bytes()
            parts, artifact = [list(part) for part in sent[0]], sent[1]
        else:
            try:
                compiled = None if isinstance(ready, loader.LoadFailure) else loader.compiled_guest(ready)
            except (KuroError, wasmtime.WasmtimeError):  # a deferred component that cannot load: the worker says why
                compiled = None
            if compiled is not None and not isinstance(ready, loader.LoadFailure):
                form = COMPONENT if isinstance(compiled, wasmtime.component.Component) else MODULE
                kind, meta, artifact = form.name, ready.shape.to_bytes(), form.serialize(compiled)
        if len(meta) + len(artifact) > protocol.MAX_ARTIFACT_BYTES:  # too big for a frame: it compiles it itself
            kind, meta, artifact, parts = None, b"", b"", []
        self.answered["module"] += 1
        reply = {"rid": message["rid"], "kind": kind, "meta": len(meta), "parts": parts}
        conn.send("compiled", reply, meta + artifact)

    def _done(self, conn: _Conn, message: Mapping[str, Any], payload: bytes) -> None:
        run = self._head(conn, message["id"])
        try:
            result = run.frame_result(message["receipt"], payload, message["stream"])
        except KuroError as exc:
            raise ProtocolError(f"the worker's result is refused: {exc}") from exc
        after = result.pop("kuro/fs-root-after", None)
        if after is not None:
            problem = accept_root(run.fs_store, after, run.staged)
            if problem is not None:
                raise ProtocolError(problem)
            result["kuro/fs-root-after"] = after
        try:
            built = run.settle(result, conn.facts(), publish=False)
        except KuroError as exc:
            raise ProtocolError(f"the worker's result is refused: {exc}") from exc
        try:
            if message["cpu"] > self.hardening.cpu_seconds / 2:
                with self._lock:
                    conn.retiring = True  # replaced before RLIMIT_CPU could end it mid-run
            self._finished(conn, run)  # the worker's next run is on its way before the waiter is woken
        finally:
            if built:
                run.publish()

    def _finished(self, conn: _Conn, run: RemoteRun) -> None:
        with self._lock:
            if conn.outstanding and conn.outstanding[0] is run:
                conn.outstanding.pop(0)
            self._live.discard(run)
            head = conn.outstanding[0] if conn.outstanding else None
            if head is not None and not head.withdrawing:
                head.stdin.clear()  # the new head may be running: it can no longer come back (unless withdrawn)
            retire = conn.retiring and not conn.outstanding
            flush = self._dispatch()
        self._flush(flush)
        if retire:
            conn.kill()

    def _withdrawn(self, conn: _Conn, run_id: object, ok: bool) -> None:
        with self._lock:
            run = next((r for r in conn.outstanding if r.id == run_id), None)
            if run is None:
                return
            if ok and (not run.withdrawing or run.stream.seq > 0):
                # a run the host did not ask back, or one that has written: granting it would run it twice
                raise ProtocolError(f"withdrawn: run {run_id} was not asked back, or it has started")
            run.withdrawing = False
            if not ok:
                if conn.outstanding[:1] == [run]:
                    run.stdin.clear()  # it started: the worker has every byte
                return
            conn.outstanding.remove(run)
            run.conn, run.sent = None, False
            reason = run.stop_reason
            if reason is None:
                self._pending.appendleft(run)
            flush = self._dispatch()
        self._flush(flush)
        if reason is not None:
            self._live.discard(run)
            run.stopped(reason, _WAITED.get(reason), None)

    # ---- dispatch (callers hold the lock; the frames are written after it is released)

    def _dispatch(self) -> set[_Conn]:
        """Give waiting runs to workers with room (idle ones first); the workers whose outbox has new frames."""
        touched: set[_Conn] = set()
        pending, active, depth = self._pending, self._active, self.depth
        while pending:
            # the first ready, not retiring worker with the fewest runs out, if it has room (one pass, no list)
            conn: _Conn | None = None
            least = depth
            for c in active:
                out = len(c.outstanding)
                if out < least and c.ready and not c.retiring:
                    conn, least = c, out
                    if not out:
                        break
            if conn is None:
                break
            run = pending[0]
            # A new id at every dispatch: a worker reads its runs in the order of their ids, so it can tell a
            # control frame for a run it has not read yet from one for a run it has finished.
            run.id = next(self._ids)
            with run.lock:
                head = self._request(run, conn)
                payload = run.wire + run.stdin
            try:
                wire = protocol.framed("run", head, payload)
            except ProtocolError as exc:  # never for the fields made here (an int, a float, three flags and a path)
                pending.popleft()
                self._live.discard(run)
                failure = HostError(f"the run cannot be sent to a worker process: {exc}")
                threading.Thread(target=run.fail, args=(failure,), daemon=True).start()
                continue
            if conn.outstanding and len(wire[0]) + len(wire[1]) > PIPELINE_FRAME_BYTES:
                break  # too large to wait in a busy worker's channel: it goes to the first idle worker (FIFO)
            pending.popleft()
            run.conn, run.sent = conn, True
            conn.outstanding.append(run)
            if len(conn.outstanding) == 1:
                run.stdin.clear()  # the head may start at once: it can no longer be withdrawn
            conn.outbox.append(("run", *wire))
            touched.add(conn)
            if conn.token is None and not run.leading:  # no run() caller will read its frames: the keeper does
                conn.token = _KEEPER
                self._wake(conn)
            if run.waiter:
                self._lead.notify_all()
        if not pending:
            idle: _Conn | None = None
            busy: _Conn | None = None
            for c in active:
                if not c.outstanding:
                    if idle is None and c.ready and not c.retiring:
                        idle = c
                elif busy is None and len(c.outstanding) > 1:
                    busy = c
            if idle is not None and busy is not None and not busy.outstanding[-1].withdrawing:
                run = busy.outstanding[-1]
                run.withdrawing = True
                busy.queue("withdraw", {"id": run.id})
                touched.add(busy)
        return touched

    def _flush(self, conns: set[_Conn]) -> None:
        """Write the frames waiting in each worker's outbox, in order (one writer per worker at a time)."""
        for conn in conns:
            with conn.send_lock:
                while True:
                    with self._lock:
                        if not conn.outbox:
                            break
                        kind, first, rest = conn.outbox.popleft()
                        control = kind in CONTROL
                        if not rest:  # the small frames queued behind it for the same channel: one write for all
                            batch = [first]
                            while conn.outbox and (conn.outbox[0][0] in CONTROL) is control:
                                kind, more, rest = conn.outbox.popleft()
                                batch.append(more)
                                if rest:
                                    break
                            if len(batch) > 1:
                                first = b"".join(batch)
                    try:
                        sock = conn.ctl if control else conn.sock
                        sock.sendall(first)
                        if rest:
                            sock.sendall(rest)
                    except OSError:
                        with self._lock:
                            conn.outbox.clear()  # the worker is gone: its reader sees that and settles its runs
                        break

    def _request(self, run: RemoteRun, conn: _Conn) -> bytes:
        """``run``'s frame JSON: the fields decided when it is sent, and the length of its fixed fields (``run.wire``,
        encoded at submit, the start of its payload). Written out here, not through the JSON encoder: an int, a
        float, three bools and a cached path string (the run frame took ~5 µs to make through the encoder, ~2 µs
        so; a pipelined trivial run costs the host ~85 µs of CPU in all)."""
        guest = run.command.get("kuro/guest")
        try:
            present = isinstance(guest, str) and run.store.has(guest)
        except (KuroFsError, ValueError):
            present = False
        return _RUN_HEAD % (
            run.id,
            repr(run.deadline).encode("ascii"),  # a finite float (a monotonic clock reading), as JSON writes it
            _JSON_BOOL[bool(run.stdin_closed)],
            _JSON_BOOL[present],
            _JSON_BOOL[run.stop_reason == "cancelled"],
            _json_path(_readable(run.fs_store, conn.stores)),
            len(run.wire),
        )

    # ---- death

    def _died(self, conn: _Conn) -> None:
        with self._lock:
            conn.dead = True
            conn.outbox.clear()
            if not conn.ready:  # it never joined the pool: its start failed
                self._starting -= 1
                self._failures += 1
                if self._failures >= _START_FAILURES and self._broken is None:
                    self._broken = (
                        conn.violation
                        or (f"host error: {conn.host_failure}" if conn.host_failure else None)
                        or "workers exit before their hello (hardening failed?)"
                    )
                    self._fail_waiting()
            for group in (self._active, self._spares):
                if conn in group:
                    group.remove(conn)
            while len(self._active) < self.size and self._spares:
                self._active.append(self._spares.pop(0))
            head = conn.outstanding[0] if conn.outstanding else None
            closing = self._closed
            for run in reversed(conn.outstanding[1:]):
                run.conn, run.sent, run.withdrawing = None, False, False
                if run.stop_reason is None and not closing:  # closed: nothing takes a queued run any more
                    self._pending.appendleft(run)
            behind = [r for r in conn.outstanding[1:] if r.stop_reason is not None or closing]
            conn.outstanding.clear()
            self._fill()
            flush = self._dispatch()
            self._cond.notify_all()
        self._flush(flush)
        for run in behind:
            self._live.discard(run)
            reason = run.stop_reason or "closed"
            run.stopped("cancelled" if reason == "closed" else reason, _WAITED.get(reason), None)
        # The exit status is read through the pidfd, so it is closed only after (and under its lock: a late kill
        # then finds None, never a number another worker's pidfd now holds).
        status = _exit_status(conn) if head is not None and conn.pid is not None else None
        with conn.pidfd_lock:
            if conn.pidfd is not None:
                os.close(conn.pidfd)
                conn.pidfd = None
        if head is None:
            return
        self._live.discard(head)
        if conn.hard_stop is not None and conn.hard_stop[0] is head:
            reason = conn.hard_stop[1]
            detail = f"the worker did not stop the guest within {STOP_GRACE_S:g} s; the host killed it (SIGKILL)"
            head.stopped(reason, detail, {**conn.facts(), **died_result(status, "")[1]})
            return
        if closing:
            head.stopped("cancelled", "the worker pool was closed while the guest ran", conn.facts())
            return
        if conn.host_failure is not None:  # the host failed, not the guest nor (as far as anyone knows) the worker
            why = f"host error: reading the worker's frames failed ({conn.host_failure}); the host killed the worker"
            head.settle({"exit-code": 70, "outcome": "host-error", "error": why}, conn.facts())
            return
        result, facts = died_result(status, conn.violation or "it ended mid-run")
        head.settle(result, {**conn.facts(), **facts})

    # ---- runs

    def prepare(
        self,
        session: Session,
        command: Mapping[str, Any],
        store: BlockStore,
        fs: Any,
        *,
        limits: Limits,
        home: Any,
        stdin: bytes | None,
        stdin_closed: bool,
        on_chunk: OnChunk | None,
        on_exit: OnExit | None,
        seed: int | None = None,
    ) -> RemoteRun:
        """A run for this pool (its clock starts now); :meth:`submit` sends it. Arguments are already checked."""
        resolved = home if home is False else str(resolve_home(None if home is True else home))
        return RemoteRun(
            next(self._ids),
            session,
            command,
            store,
            fs,
            limits=limits,
            home=resolved,
            stdin=stdin,
            stdin_closed=stdin_closed,
            on_chunk=on_chunk,
            on_exit=on_exit,
            seed=seed,
        )

    def submit(self, run: RemoteRun) -> None:
        """Queue ``run`` for the next free worker.

        Raises NotStarted (a HostError; nothing was queued): the pool is closed or broken, or the run's frame
        could not be sent (a spec whose args are more JSON than a frame carries: refused now, not left queued
        until its deadline).
        """
        with self._lock:
            self._usable()
        run.wire = _encoded_run(run)  # outside the lock: a large command takes a while to encode
        run.wake = self._run_settled
        with self._lock:
            self._usable()
            self._live.add(run)
            self._pending.append(run)
            flush = self._dispatch()
            if run.deadline < self._watch_due:
                self._watch.notify_all()
        self._flush(flush)

    def _run_settled(self) -> None:
        """A run whose caller waits to read its worker's frames has its receipt (its wait ends)."""
        with self._lock:
            self._lead.notify_all()

    def _usable(self) -> None:
        """Raises HostError: the pool is closed or broken (called under the lock)."""
        if self._closed:
            raise NotStarted("the worker pool is closed")
        if self._broken is not None:
            raise NotStarted(f"no worker process could be started: {self._broken}")

    def stdin(self, run: RemoteRun, data: bytes) -> None:
        """Give ``run`` stdin bytes (ignored after close_stdin or the end).

        As in-process, at most :data:`~kuro_wasm.host.context.STDIN_BUFFER_BYTES` may wait unread: past
        that this waits until the worker says its guest read some (``took``), input closes or the run
        ends — so neither this process nor the worker buffers without end for a guest that does not
        read. The pool's reader threads (which call ``on_chunk``) never wait here.
        """
        view = memoryview(data)
        while view:
            with self._lock:
                while True:
                    if run.done.is_set() or run.stdin_closed:
                        return
                    room = STDIN_BUFFER_BYTES - (run.stdin_written - run.stdin_taken)
                    if room > 0 or getattr(_READER, "active", False):
                        break
                    self._cond.wait(_STDIN_RECHECK_S)  # woken by ``took``; the run's end is seen at the recheck
                piece = bytes(view[: max(room, 0) or len(view)])
                view = view[len(piece) :]
                run.stdin_written += len(piece)
                conn = run.conn if run.sent else None
                if conn is None or conn.outstanding[:1] != [run] or run.withdrawing:
                    run.stdin += piece  # not running yet (or maybe coming back): the host keeps every byte
                if conn is not None:
                    conn.queue("stdin", {"id": run.id}, piece)
            if conn is not None:
                self._flush({conn})

    def close_stdin(self, run: RemoteRun) -> None:
        """End of input for ``run``."""
        with self._lock:
            if run.done.is_set() or run.stdin_closed:
                return
            run.stdin_closed = True
            conn = run.conn if run.sent else None
            if conn is not None:
                conn.queue("eof", {"id": run.id})
        if conn is not None:
            self._flush({conn})

    def kill(self, run: RemoteRun) -> None:
        """Stop ``run`` (``cancelled``) unless it has ended; a worker that does not comply is killed."""
        with self._lock:
            if run.done.is_set() or run.stop_reason is not None:
                return
            run.stop_reason, run.stop_at = "cancelled", time.monotonic()
            conn = run.conn if run.sent else None
            if conn is None:
                if run in self._pending:
                    self._pending.remove(run)
                self._live.discard(run)
            if conn is not None:
                conn.queue("kill", {"id": run.id})
                if conn.outstanding[:1] != [run] and not run.withdrawing:  # queued in the worker: take it back
                    run.withdrawing = True
                    conn.queue("withdraw", {"id": run.id})
            self._watch.notify_all()
        if conn is None:
            run.stopped("cancelled", None, None)
            return
        self._flush({conn})

    # ---- the watchdog

    def _watch_loop(self) -> None:
        with self._lock:
            while not self._closed:
                now = time.monotonic()
                due = now + 1.0
                expired: list[RemoteRun] = []
                hard: list[tuple[_Conn, RemoteRun, str]] = []
                withdraw: list[_Conn] = []
                for run in list(self._live):
                    if run.done.is_set():
                        self._live.discard(run)
                        continue
                    conn = run.conn if run.sent else None
                    if conn is None:
                        if now >= run.deadline:
                            expired.append(run)
                        else:
                            due = min(due, run.deadline)
                        continue
                    if conn.outstanding[:1] == [run]:
                        limit = run.deadline + STOP_GRACE_S
                        if run.stop_at is not None:
                            limit = min(limit, run.stop_at + STOP_GRACE_S)
                        if now >= limit and conn.hard_stop is None:
                            reason = run.stop_reason if run.stop_at is not None and run.stop_reason else "timeout"
                            hard.append((conn, run, reason))
                        due = min(due, limit)
                    elif now >= run.deadline and not run.withdrawing:
                        run.stop_reason = run.stop_reason or "timeout"
                        run.withdrawing = True
                        conn.queue("withdraw", {"id": run.id})
                        withdraw.append(conn)
                    elif not run.withdrawing:
                        due = min(due, run.deadline)
                for run in expired:
                    if run in self._pending:
                        self._pending.remove(run)
                    self._live.discard(run)
                    run.stop_reason = run.stop_reason or "timeout"
                for conn, run, reason in hard:
                    conn.hard_stop = (run, reason)
                if expired or hard or withdraw:
                    self._cond.release()
                    try:
                        for run in expired:
                            run.stopped("timeout", _WAITED["timeout"], None)
                        for conn, _run, _reason in hard:
                            conn.kill()
                        self._flush(set(withdraw))
                    finally:
                        self._cond.acquire()
                    continue
                self._watch_due = due
                self._watch.wait(max(0.0005, due - time.monotonic()))

    # ---- tests

    def _probe_target(self, timeout: float) -> _Conn | None:
        # A ready active worker, waiting (up to ``timeout``) for the replacement of one that just died.
        with self._lock:
            self._cond.wait_for(lambda: self._broken is not None or any(c.ready for c in self._active), timeout)
            conn = next((c for c in self._active if c.ready), None)
            if conn is not None:  # its answer (or what a lying worker sends) is read at once, runs or not
                conn.keep = True
                if conn.token is None:
                    conn.token = _KEEPER
                    self._wake(conn)
            return conn

    def probe_async(self, what: str) -> None:
        """Ask the active worker to try ``what`` and do not wait (``abort`` and ``lie-block`` get no answer)."""
        conn = self._probe_target(30.0)
        if conn is None or not conn.send("probe", {"what": what}):
            raise HostError("no worker to probe")

    def probe(self, what: str, timeout: float = 30.0) -> dict[str, Any]:
        """Ask an active worker to try ``what`` (a :func:`hardening.probe` name); its answer. Test hooks only.

        Raises HostError: no answer (the pool was not started with ``test_hooks``, or the worker died).
        """
        conn = self._probe_target(timeout)
        if conn is None or not conn.send("probe", {"what": what}):
            raise HostError("no worker to probe")
        with conn.probe_cond:
            if not conn.probe_cond.wait_for(lambda: bool(conn.probes) or conn.dead, timeout) or not conn.probes:
                raise HostError(f"no answer to the probe {what!r}")
            return dict(conn.probes.popleft()["result"])

    # ---- lifecycle

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop every worker and the zygote; runs still going end ``cancelled``. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = self._active + self._spares
            waiting = list(self._pending)
            self._pending.clear()
            self._watch.notify_all()
        for run in waiting:
            run.stopped("cancelled", "the worker pool was closed before a worker took the run", None)
        for conn in conns:
            conn.kill()
        self._zygote.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_WAITED: Final[Mapping[str, str]] = {
    "timeout": "the deadline passed before the guest started (no worker was free)",
    "cancelled": "killed before the guest started",
    "closed": "the worker pool was closed before a worker took the run",
}


def answering_for() -> int | None:
    """The pid of the worker whose frame this thread is acting on now (a block it asked for being read, a chunk of
    its run handed to ``on_chunk``…), or None. The thread may be the worker's keeper or a
    :func:`~kuro_wasm.host.api.run` caller reading its own worker's frames: its name does not tell."""
    worker: int | None = getattr(_READER, "worker", None)
    return worker


def _exit_status(conn: _Conn) -> int | None:
    """How the worker ended: read from its zombie's ``/proc/PID/stat`` as soon as its pidfd says it has exited
    (no wait for the zygote to be scheduled), else the zygote's report once it has reaped it."""
    assert conn.pid is not None
    if conn.pidfd is not None:
        poller = select.poll()
        poller.register(conn.pidfd, select.POLLIN)
        if poller.poll(_EXIT_STATUS_WAIT_S * 1000):
            try:
                with open(f"/proc/{conn.pid}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
                signal.pidfd_send_signal(conn.pidfd, 0)  # still unreaped after the read: the pid was not reused
                if fields[0] == b"Z" and len(fields) >= 50:
                    return int(fields[49])  # exit_code, "in the form reported by waitpid(2)" (proc(5), field 52)
            except (OSError, ValueError, IndexError):
                pass  # reaped already (or another process now): the zygote reports it
    return conn.zygote.exit_status(conn.pid, _EXIT_STATUS_WAIT_S)


def _readable(store: BlockStore, granted: tuple[str, ...]) -> str | None:
    """The directory of ``store`` if the worker may read it directly (a file store under a directory it was
    granted), else None: its blocks then come as frames."""
    if not isinstance(store, FileBlockStore) or not granted:
        return None
    root = _resolved(str(store.root))
    return root if any(root == d or root.startswith(d.rstrip("/") + "/") for d in granted) else None


@functools.lru_cache(maxsize=64)
def _resolved(path: str) -> str:
    return str(Path(path).resolve())


def _encoded_run(run: RemoteRun) -> bytes:
    """The JSON object of ``run``'s :data:`~kuro_wasm.host.worker.protocol.RUN_FIXED` fields, encoded once: the
    start of its ``run`` frame's payload wherever and whenever it is sent (the same bytes for every warm run of one
    caller, which a worker knows again by them).

    Raises HostError: they are not plain data, or more JSON than a worker reads for them.
    """
    fs_arg = run.fs_arg
    fs: Any = fs_arg
    if isinstance(fs_arg, Fs):
        grant = None if fs_arg.grant is None else sorted(fs_arg.grant)
        fs = {
            "root": fs_arg.root,
            "grant": grant,
            "chunk_size": fs_arg.chunk_size,
            "width": fs_arg.width,
            "budget": [fs_arg.budget.entries, fs_arg.budget.bytes],
            "layout": [fs_arg.layout.max_flat, fs_arg.layout.shape.bit_width, fs_arg.layout.shape.bucket_size],
        }
    fixed = {"command": protocol.command_data(run.command), "fs": fs, "seed": run.seed}
    try:
        rest = protocol.encode_fields("run", fixed)
        session = _session_json(run.session)
    except ProtocolError as exc:
        raise NotStarted(f"the run cannot be sent to a worker process: {exc}") from None
    encoded = b'{"session":' + session + b',"limits":' + _limits_json(run.limits) + b"," + rest[1:]
    if len(encoded) > protocol.MAX_JSON_BYTES:
        why = f"{len(encoded)} bytes of JSON, over the {protocol.MAX_JSON_BYTES}-byte limit"
        raise NotStarted(f"the run cannot be sent to a worker process: {why}")
    return encoded


@functools.lru_cache(maxsize=256)
def _session_json(session: Session) -> bytes:
    """A session's plain data as a run frame's JSON (sessions are frozen; a warm run re-sends the same one).
    Raises ProtocolError: not plain data."""
    return protocol.encode_fields("run", session.to_data())


@functools.lru_cache(maxsize=256)
def _limits_json(limits: Limits) -> bytes:
    """A run's limits as a run frame's JSON (frozen, and the same for every warm run of one caller)."""
    return protocol.encode_fields("run", limits.as_options())


_RUN_HEAD: Final = (
    b'{"t":"run","id":%d,"deadline":%s,"stdin_closed":%s,"guest_present":%s,"killed":%s,"store_path":%s,"fixed":%d}'
)
_JSON_BOOL: Final = {False: b"false", True: b"true"}


@functools.lru_cache(maxsize=64)
def _json_path(path: str | None) -> bytes:
    """A store directory (or None) as JSON (its size is checked with the whole frame's)."""
    return json.dumps(path).encode("ascii")


def _default_workers() -> int:
    raw = os.environ.get("KURO_WORKERS")
    if raw is not None:
        try:
            value = int(raw)
        except ValueError as exc:
            raise HostError(f"KURO_WORKERS must be a positive integer, got {raw!r}") from exc
        if 1 <= value <= MAX_WORKERS:
            return value
        raise HostError(f"KURO_WORKERS must be an integer from 1 to {MAX_WORKERS}, got {raw!r}")
    return max(1, os.cpu_count() or 1)


_DEFAULT: list[WorkerPool | None] = [None]
_DEFAULT_LOCK = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool behind ``isolation="process"`` (started on first use, closed at exit)."""
    with _DEFAULT_LOCK:
        pool = _DEFAULT[0]
        if pool is None or pool.closed:
            pool = WorkerPool()
            _DEFAULT[0] = pool
            atexit.register(pool.close)
        return pool
