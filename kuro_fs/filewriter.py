"""The batch's writer process: small staged block files created by a second interpreter, beside the hashing.

## The one decision
A batch that stages many small blocks hands their file creation to one child process. Creating a
small file is three system calls (create, write, close) that cost, in the kernel, about what a
``cp`` pays per file; in the process that hashes and names the blocks, each of them also hands
the GIL over and back, so on two cores the creation and the Python around it ran one after the
other (an import of 10,000 small files: its system calls were a bare loop's, call for call, and
it still took ~2× ``cp -r`` + ``sync``). A child has its own interpreter: the parent sends it
``(staging directory, name, bytes)`` records down a pipe, 64 KiB at a time, and goes on hashing
while the child creates the files. A bare loop over that tree (``/tmp/s30sf/proc.py``, medians
of 4 interleaved rounds at load ~10) took 0.94× ``cp -r`` + ``sync`` with a child writing its
files, 1.29× writing them itself. ``import_path`` of the tree into a new store, each run a fresh
process, interleaved with ``cp -r`` + ``sync`` (``/tmp/s30sf/abproc.py``, medians of 7–9 rounds,
four runs at load 5–12): 2.41×, 1.94×, 2.10×, 2.09× before, 1.68×, 1.70×, 1.74×, 1.59× with the
writer (faster in 9 of 9 rounds of the last run). A CAR of 100,000 four-byte blocks
(``import_car``, 3 pairs at load ~10) took 15.6–24.3 s before, 14.5–18.5 s with it. The
two processes use ~0.1 s more CPU than one (a second interpreter's start, the pipe's copy), so
the gain needs a second core that is free: with both busy, as here, it is less than the split
of the work (child ~0.4 s of CPU, parent the rest) would give.

The rule of the batch is unchanged: the child writes only into the batch's private directory,
with ``O_EXCL`` (a name already there was written whole earlier in the same stream), and the
commit first :meth:`Writer.settle`-s — sends a marker and waits until the child says every
record before it is a closed file — so the commit's ``syncfs`` covers them all. A child that
fails (a full disk, killed) answers with an error or not at all: :meth:`Writer.settle` raises
``OSError`` and the commit makes nothing visible; a batch that ends with an error closes the
child (and waits for it) before deleting its directory. The child runs in a session of its own and
ignores SIGINT (a terminal's Ctrl-C reaches the parent alone, which decides), and ends at end of
input, so it never outlives its parent for long. A staged read settles first, so it sees every block sent before it.

## Effects
Spawns ``sys.executable -I -S -c`` once per batch that stages :data:`SPAWN_AFTER` small blocks;
pipes. Used only by :mod:`kuro_fs.filebatch`. Where no child can be started (no interpreter path,
``OSError``), :func:`start` answers None and the batch creates its files itself, as before.

## Not done here
Blocks of :data:`~kuro_fs.filebatch.EARLY_WRITEBACK` bytes and more are written by the batch
itself (their writeback is started at once; a pipe would copy them twice).
"""

from __future__ import annotations

import struct
import subprocess
import sys
from typing import IO, Final

__all__ = ["SPAWN_AFTER", "Writer", "start"]

#: A batch starts its writer once it has staged this many small blocks itself (fewer do not repay the start).
SPAWN_AFTER: Final = 1024
#: Records are sent once this many bytes are pending.
_SEND_BYTES: Final = 1 << 16
_HEAD: Final = struct.Struct("<BHI")  # kind (0 block, 1 settle), name length, data length

# The child: read records, create each file, answer each settle with the files created since the last.
_CHILD: Final = r"""
import os, signal, struct, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
root = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
head = struct.Struct("<BHI")
read = sys.stdin.buffer.read
answer = sys.stdout.buffer
counts = {}
try:
    while h := read(head.size):
        kind, nlen, dlen = head.unpack(h)
        if kind == 1:
            answer.write(("ok " + " ".join(f"{g}:{n}" for g, n in counts.items()) + "\n").encode())
            answer.flush()
            counts.clear()
            continue
        name = read(nlen).decode()
        data = read(dlen)
        group = name[-3:-1]
        path = group + "/" + name
        try:
            fd = os.open(path, flags, 0o644, dir_fd=root)
        except FileNotFoundError:
            try:
                os.mkdir(group, dir_fd=root)
            except FileExistsError:
                pass
            fd = os.open(path, flags, 0o644, dir_fd=root)
        except FileExistsError:
            continue
        try:
            done = os.write(fd, data)
            while done < len(data):
                done += os.write(fd, data[done:])
        except BaseException:
            os.close(fd)
            os.unlink(path, dir_fd=root)
            raise
        os.close(fd)
        counts[group] = counts.get(group, 0) + 1
except OSError as exc:
    answer.write(f"error {exc.errno} {exc.strerror}\n".encode())
    answer.flush()
    sys.exit(1)
"""


class Writer:
    """One child process creating staged block files in one batch directory (see the module docstring).

    Not thread-safe: the batch calls it under its lock.
    """

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self._child = child
        assert child.stdin is not None and child.stdout is not None
        self._in: IO[bytes] = child.stdin
        self._out: IO[bytes] = child.stdout
        self._pending: list[bytes] = []
        self._size = 0
        self._unsettled = False  # records sent (or pending) since the last settle
        self._closed = False

    def send(self, cid: str, data: bytes | memoryview) -> None:
        """Have ``<shard>/<cid>`` created with ``data`` (sent when enough is pending, or at :meth:`settle`).

        Raises OSError: the child is gone (BrokenPipeError), or this writer was closed.
        """
        if self._closed:
            raise OSError(f"the block writer process ended (exit {self._child.returncode})")
        name = cid.encode("ascii")
        self._pending += (_HEAD.pack(0, len(name), len(data)), name, bytes(data))
        self._size += len(data) + _HEAD.size + len(name)
        self._unsettled = True
        if self._size >= _SEND_BYTES:
            self._write()

    def settle(self) -> dict[str, int]:
        """Wait until every block sent is a closed file; return how many files each staging directory got.

        Raises OSError: the child failed (its error), or ended without answering.
        """
        if self._closed:
            raise OSError(f"the block writer process ended (exit {self._child.returncode})")
        if not self._unsettled:
            return {}
        self._pending.append(_HEAD.pack(1, 0, 0))
        self._write()
        line = self._out.readline().decode("ascii", "replace").split()
        self._unsettled = False
        if not line or line[0] != "ok":
            raise self._failure(line)
        counts: dict[str, int] = {}
        for item in line[1:]:
            group, _, count = item.partition(":")
            counts[group] = int(count)
        return counts

    @property
    def unsettled(self) -> bool:
        """True if a block was sent since the last :meth:`settle`."""
        return self._unsettled

    def close(self) -> None:
        """End the child and wait for it (killed if it does not end at end of input). Idempotent."""
        self._pending.clear()
        if self._closed:
            return
        self._closed = True
        try:
            self._in.close()
        except OSError:
            pass
        try:
            self._child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        self._out.close()

    def _write(self) -> None:
        data = b"".join(self._pending)
        self._pending.clear()
        self._size = 0
        try:
            self._in.write(data)
            self._in.flush()
        except OSError as exc:
            raise self._failure(self._out.readline().decode("ascii", "replace").split()) from exc

    def _failure(self, answer: list[str]) -> OSError:
        # The child's own error when it answered one (a full disk), else how it ended; it is ended first.
        self.close()
        if len(answer) >= 2 and answer[0] == "error" and answer[1].isdigit():
            return OSError(int(answer[1]), " ".join(answer[2:]) or "the block writer failed")
        return OSError(f"the block writer process ended (exit {self._child.returncode})")


def start(batch_dir: str) -> Writer | None:
    """A writer creating files under ``batch_dir``; None where no child interpreter can be started."""
    if not sys.executable:
        return None
    try:
        child = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _CHILD, batch_dir],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )
    except OSError:
        return None
    return Writer(child)
