"""The zygote: one pre-loaded, single-threaded, engine-less process that forks worker processes.

## The one decision
Workers are forked from a zygote — an interpreter started once per pool, which imports everything
a worker needs and then only waits — never from the host, and never spawned one by one. Forking
is cheap (a worker is ready in ~10–20 ms here, against ~200 ms for a fresh interpreter and its
imports), but only safe from a process that has **no threads and no wasmtime engine**: a child
forked after its parent compiled a module hangs the first time it compiles (wasmtime's parallel
compilation leaves a thread pool behind whose locks the child inherits, held by threads it does not
have; ``tests/host/worker/test_fork_hazard.py`` shows the hang). The host has threads and engines,
so it never forks; the zygote checks before every fork that it still has one thread and no engine,
and refuses to fork otherwise. A pool that must start workers some other way has to spawn them.

The host talks to the zygote over a ``SOCK_SEQPACKET`` pair: ``fork`` messages carry the new
worker's two sockets (``SCM_RIGHTS``: its run channel and its control channel) and its options;
the zygote answers nothing but ``exited``
(pid, wait status) for every child it reaps. It is a child subreaper, so a worker that enters its own
pid namespace (by forking once more) stays its child and its death is reported too. The host
learns the worker's pid from the worker's hello and its wait status from here.

## Effects
Spawns one interpreter (``sys.executable``) with an empty environment; forks; ``waitpid``; a
reader thread in the host for ``exited`` messages. The zygote and its workers ignore SIGINT (a terminal's
Ctrl-C reaches them too; the host decides what it cancels).

## Not done here
No worker bookkeeping (the pool's job). The zygote does not outlive the host: it exits when its
socket closes; workers exit when theirs do.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from kuro_wasm.errors import HostError
from kuro_wasm.host.worker.protocol import ProtocolError, decode

__all__ = ["Zygote", "main"]

_PR_SET_CHILD_SUBREAPER: Final = 36
_PACKET: Final = 1 << 16
_EXITS_KEPT: Final = 4096
_ROOT: Final = str(Path(__file__).resolve().parents[3])
_BOOT: Final = (
    "import sys; sys.path.insert(0, sys.argv[2]); from kuro_wasm.host.worker.zygote import main; main(int(sys.argv[1]))"
)


def _packet(kind: str, fields: Mapping[str, Any]) -> bytes:
    return json.dumps({"t": kind, **fields}, separators=(",", ":")).encode("ascii")


# ---- the zygote process


def _single_threaded() -> bool:
    return threading.active_count() == 1 and len(os.listdir("/proc/self/task")) == 1


def main(fd: int) -> None:
    """The zygote process: import everything, then fork a worker per ``fork`` message until the host leaves."""
    from kuro_wasm.host import engine
    from kuro_wasm.host.worker import serve  # every module a worker runs, imported once, before any fork

    try:
        import pyseccomp  # noqa: F401  (loads libseccomp now, not in every worker)
    except (ImportError, RuntimeError):
        pass  # the worker fails its hardening and exits before its hello; the pool says why

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # Everything imported so far lives as long as the workers: out of the collector's sight, so a worker's
    # collections scan only its runs' objects (~10 µs a warm run, measured) and leave the shared pages unwritten.
    gc.freeze()
    ctl = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # A terminal's Ctrl-C reaches every process of its group, the zygote and its workers too; the host decides
    # what it cancels. Python's default handler would raise KeyboardInterrupt here or, in a worker, inside a
    # wasmtime callback (which ends the worker: ctypes hands wasmtime an uninitialised result). Workers inherit it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        ready, _, _ = select.select([ctl.fileno(), wake_r], [], [])
        if wake_r in ready:
            while True:
                try:
                    os.read(wake_r, 512)
                except BlockingIOError:
                    break
            _reap(ctl)
        if ctl.fileno() not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(ctl, _PACKET, 2)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the host closed its end
        try:
            message = decode(data, frozenset({"host"}))
            if message["t"] != "fork" or len(fds) != 2:
                raise ProtocolError("the zygote only forks")
            if not _single_threaded() or engine.engines_exist():
                raise ProtocolError("the zygote has a thread or an engine: forking now would be unsafe")
        except ProtocolError:
            for extra in fds:
                os.close(extra)
            os._exit(2)
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(wake_r)
            os.close(wake_w)
            ctl.close()
            serve.serve(fds[0], fds[1], message["options"])
        for fd in fds:
            os.close(fd)


def _reap(ctl: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        try:
            ctl.send(_packet("exited", {"pid": pid, "status": status}))
        except OSError:
            os._exit(0)


# ---- the host's side


class Zygote:
    """The host's handle on its zygote process: fork workers, learn how they ended. ``close()`` is idempotent.

    Raises HostError: the zygote could not be started.
    """

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._exits: OrderedDict[int, int] = OrderedDict()
        self._closed = False
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno()), _ROOT],
                pass_fds=[theirs.fileno()],
                env={"LC_ALL": "C.UTF-8"} | ({"KURO_DEBUG": "1"} if os.environ.get("KURO_DEBUG") else {}),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=None if os.environ.get("KURO_DEBUG") else subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            ours.close()
            raise HostError(f"cannot start the worker zygote: {exc}") from exc
        finally:
            theirs.close()
        self._reader = threading.Thread(target=self._read, name="kuro-zygote", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        """The zygote's pid."""
        return self._proc.pid

    @property
    def alive(self) -> bool:
        """Whether the zygote still runs (a dead one cannot fork; the pool starts another)."""
        return not self._closed and self._proc.poll() is None

    def fork(self, options: Mapping[str, Any]) -> tuple[socket.socket, socket.socket]:
        """Ask for one worker; return the host's ends of its two sockets: the run channel (runs and the
        replies to the worker's asks in, every frame of the worker out; it says hello there) and the control
        channel (stdin, eof, kill, withdraw, probe in).

        Raises HostError: the zygote is gone.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours_ctl, theirs_ctl = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self._lock:
                packet = _packet("fork", {"options": dict(options)})
                socket.send_fds(self._sock, [packet], [theirs.fileno(), theirs_ctl.fileno()])
        except OSError as exc:
            ours.close()
            ours_ctl.close()
            raise HostError(f"the worker zygote is gone: {exc}") from exc
        finally:
            theirs.close()
            theirs_ctl.close()
        return ours, ours_ctl

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(_PACKET)
                if not data:
                    break
                message = decode(data, frozenset({"zygote"}))
            except (OSError, ProtocolError):
                break
            with self._cond:
                self._exits[message["pid"]] = message["status"]
                while len(self._exits) > _EXITS_KEPT:
                    self._exits.popitem(last=False)
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def exit_status(self, pid: int, timeout: float) -> int | None:
        """The wait status of worker ``pid`` once the zygote has reaped it; None if not known within ``timeout`` s."""
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or self._closed, timeout)
            return self._exits.pop(pid, None)

    def close(self) -> None:
        """Close the zygote's socket (it exits) and reap it."""
        if self._closed and self._proc.returncode is not None:
            return
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
