"""Owner liveness: is the process that started a ledger row still alive?

## The one decision
An owner is a pid **and** a token naming that process's life: ``boot-id:start-time``
(the boot id of the machine, and the kernel start time of the pid from
``/proc/<pid>/stat``). A pid alone is not enough: pids are reused, and a reused
pid would make a crashed run look alive for ever (``started``, never
``unknown``). A pid whose token differs from the recorded one is another
process; a zombie (``Z``/``X``) counts as gone, since it runs nothing.

Without ``/proc`` the token is ``"pid"`` and liveness falls back to
``kill(pid, 0)``: weaker (a reused pid looks alive), said here rather than hidden.

## Effects
Reads ``/proc`` (the boot id once, at import; ``/proc/<pid>/stat`` on every
question), ``os.getpid`` and ``os.kill(pid, 0)`` (signal 0: nothing is sent).
This process's own token is computed once per pid, so a forked child gets its own.

## Not done here
Whether a row of *this* process is still running is not a /proc question: the
ledger asks its registry of live runs (:mod:`kuro_wasm.ledger.live`). No locks,
no waiting for a process to end, nothing across machines (another boot id is
simply another process).
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["owner_gone", "own_token", "process_token"]


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


_BOOT_ID: Final = (_read("/proc/sys/kernel/random/boot_id") or "no-boot-id").strip()
_OWN: dict[int, str] = {}


def process_token(pid: int) -> str | None:
    """``boot-id:start-time`` of a live pid; ``None`` if gone or a zombie; ``"pid"`` without /proc."""
    if not os.path.isdir("/proc/self"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "pid"
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return f"{_BOOT_ID}:{fields[19]}"


def own_token() -> tuple[int, str]:
    """``(pid, token)`` of this process: what a row it claims records as its owner."""
    pid = os.getpid()  # recomputed after a fork
    if pid not in _OWN:
        _OWN[pid] = process_token(pid) or "pid"
    return pid, _OWN[pid]


def owner_gone(owner_pid: int, owner_token: str) -> str | None:
    """``"owner-process-gone"`` if the recorded owner no longer runs, else ``None`` (it may still be running).

    Gone: no live process has that pid, or the live one started at another time
    (the pid was reused). A ``"pid"`` token on either side (no /proc) compares pids only.
    """
    current = process_token(owner_pid)
    if current is None:
        return "owner-process-gone"
    if owner_token not in ("pid", current) and current != "pid":
        return "owner-process-gone"  # the pid was reused by another process
    return None
