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
fails (a full disk, killed, a record whose name is not a block name) answers with an error or not
at all: :meth:`Writer.settle` raises ``OSError``, and the failure is final — every later stage,
staged read and commit of the batch raises it too, since which files the child made since the
last settle is unknown; the batch can only be discarded, which closes the child (and waits for
it) before deleting its directory. So does any exception partway through a write to the child
(a ``KeyboardInterrupt`` there loses the records' framing; a record cut short is never written).
The child runs in a session of its own and ignores SIGINT (a terminal's Ctrl-C reaches the parent
alone, which decides). It ends on an explicit end record the batch's end sends, or at end of its
input — once its parent has died and every process forked from the parent meanwhile has let go
of the pipe: a fork drops it at once (:func:`os.register_at_fork`), a spawned process (fork and
exec, no Python between them) at its exec (close-on-exec). A staged read
settles first, so it sees every block sent before it.

## Effects
Spawns ``sys.executable -I -S -c`` once per batch that stages :data:`SPAWN_AFTER` small blocks;
pipes. The parent never waits for the child unless it must (a settle, or :data:`_BACKLOG_BYTES` held):
the start does not wait for its ``ready`` (its interpreter started, the batch directory open; 14–70 ms
per import here); records go down a 1 MiB pipe (:data:`_PIPE_BYTES`) without blocking, what it does not
take held for the next send; and while the child is more than :data:`_BUSY_BYTES` behind (starting, or
slower than the hashing: each file creation cost it ~4× more CPU after a mass delete on ext4, whose
allocator skips recently freed inodes) the batch creates the small blocks it stages itself
(:attr:`Writer.busy`), so both processes create files. 10,000 small files, ``import_path`` in a fresh
process each, 12 rounds interleaved in rotated order with ``cp -r`` + ``sync`` (``/tmp/s31-small-ab/ab.py``,
load 3.0–5.2): medians 1.16 s before (1.65× ``cp``'s median), 1.00 s with all three (1.42×; faster in 9
of 12 rounds); without the busy hand-over 1.06 s, with a 64 KiB pipe 1.10 s. Again, 14 rounds at load
1.6–2.1: 0.94 s before (1.56×), 0.76 s after (1.26×; faster in 11 of 14). Until the child has said
ready, the blocks sent are only held (nothing goes down the pipe, so it has made none of them): a child
that ends or answers anything else first (``sys.executable`` is no usable interpreter) hands every block
sent back to the batch, which writes them itself and starts no other writer. Used only by
:mod:`kuro_fs.filebatch`. Where no child can be started (no interpreter path, a frozen application,
``OSError``), :func:`start` answers None and the batch creates its files itself.

## Not done here
Blocks of :data:`~kuro_fs.filebatch.EARLY_WRITEBACK` bytes and more are written by the batch
itself (their writeback is started at once; a pipe would copy them twice).
"""

from __future__ import annotations

import fcntl
import io
import os
import select
import struct
import subprocess
import sys
import weakref
from collections import deque
from typing import IO, Final, cast

__all__ = ["SPAWN_AFTER", "Unsent", "Writer", "start"]

#: A batch starts its writer once it has staged this many small blocks itself (fewer do not repay the start).
SPAWN_AFTER: Final = 1024
#: Records are sent once this many bytes are pending.
_SEND_BYTES: Final = 1 << 16
#: The pipe's size asked for (``F_SETPIPE_SZ``; Linux allows 1 MiB to any process by default).
_PIPE_BYTES: Final = 1 << 20
#: The child is busy (the batch writes a small block itself) while more than this is held for it.
_BUSY_BYTES: Final = 1 << 16
#: Once found busy, it is taken as busy for this many more blocks before the pipe is looked at again.
_BUSY_SKIP: Final = 8
#: Bytes of records held for the child at most (before its ready, or beyond what the pipe takes): past
#: this, a send waits for the child.
_BACKLOG_BYTES: Final = 4 << 20
#: Blocks handed back to the batch, ``(cid, bytes)``, when the child turned out not to run.
Unsent = list[tuple[str, bytes]]
_HEAD: Final = struct.Struct("<BHI")  # kind (0 block, 1 settle, 2 end), name length, data length
_SETTLE: Final = _HEAD.pack(1, 0, 0)
_END: Final = _HEAD.pack(2, 0, 0)

# The child: say ready once its root is open, then read records, create each file, answer each settle
# with the files created since the last; exit 0 on the end record. A record cut short (the parent died
# or was interrupted mid-write) is never written; a name that is not a block name ends it with an error.
_CHILD: Final = r"""
import os, signal, struct, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
head = struct.Struct("<BHI")
read = sys.stdin.buffer.read
answer = sys.stdout.buffer
alphabet = "abcdefghijklmnopqrstuvwxyz234567"
counts = {}
try:
    root = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    answer.write(b"ready\n")
    answer.flush()
    while True:
        h = read(head.size)
        if len(h) != head.size:
            sys.exit(1)  # input ended without the end record
        kind, nlen, dlen = head.unpack(h)
        if kind == 2:
            sys.exit(0)
        if kind == 1:
            answer.write(("ok " + " ".join(f"{g}:{n}" for g, n in counts.items()) + "\n").encode())
            answer.flush()
            counts.clear()
            continue
        name = read(nlen).decode("ascii", "replace")
        data = read(dlen)
        if len(name) != nlen or len(data) != dlen:
            sys.exit(1)  # a record cut short: nothing of it is written
        if kind != 0 or len(name) not in (59, 110) or name[0] != "b" or name[1:].strip(alphabet):
            raise ValueError
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
except ValueError:
    answer.write(b"error 71 the block writer got a malformed record\n")
    answer.flush()
    sys.exit(1)
"""

# The writers alive in this process: a process forked from it lets go of their pipes (see _after_fork).
_live: Final[weakref.WeakSet[Writer]] = weakref.WeakSet()


class Writer:
    """One child process creating staged block files in one batch directory (see the module docstring).

    Not thread-safe: the batch calls it under its lock. Once it fails (an error answer, no answer after its
    ready, an exception partway through a write or a settle) it stays failed: every later call raises that
    failure. One whose child never said ready instead hands back every block sent and is closed.
    """

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self._child = child
        assert child.stdin is not None and child.stdout is not None
        self._in: IO[bytes] = child.stdin
        self._out: IO[bytes] = child.stdout
        os.set_blocking(self._in.fileno(), False)  # a full pipe leaves records held, not the parent waiting
        try:  # a deeper pipe: the child finds records waiting for it while the parent hashes the next ones
            fcntl.fcntl(self._in.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        except (OSError, AttributeError):
            pass  # the system's size (64 KiB on Linux): records wait here instead
        self._ready = False  # the child said ready: every record from here on is its to write
        self._held: Unsent = []  # the blocks sent before that, kept to hand back if it never does
        self._look_at = _SEND_BYTES  # held bytes at which to look for the ready line again
        self._pending: list[bytes] = []  # records not yet joined into a chunk
        self._size = 0  # bytes in _pending, or held before the ready
        self._chunks: deque[bytes | memoryview] = deque()  # joined records the pipe has not taken yet
        self._queued = 0  # bytes in _chunks
        self._skip = 0  # blocks still to be called busy without a look at the pipe
        self._unsettled = False  # records sent (or pending) since the last settle that answered ok
        self._closed = False
        self._failed: OSError | None = None  # the first failure, raised again by every later call
        self._pid = os.getpid()  # the process that owns the child (a forked copy of this object does not)
        _live.add(self)

    @property
    def failure(self) -> OSError | None:
        """Why this writer failed (a new exception each time), or None if it has not."""
        failed = self._failed
        return None if failed is None else OSError(*failed.args)

    def send(self, cid: str, data: bytes | memoryview) -> Unsent:
        """Have ``<shard>/<cid>`` created with ``data`` (sent when enough is pending, or at :meth:`settle`).

        Returns the blocks the caller must now write itself: none, or — the child having ended or answered
        other than ready — every block sent so far, this one included (the writer is then closed).
        Raises OSError: the writer failed (the child is gone, or answered an error), or was closed.
        """
        if self._failed is not None or self._closed:
            raise self._gone()
        block = bytes(data)
        self._unsettled = True
        if not self._ready:
            self._held.append((cid, block))
            self._size += len(block) + _HEAD.size + len(cid)
            if self._size < self._look_at:
                return []
            self._look_at = self._size + _SEND_BYTES
            ready = self._look(wait=self._size >= _BACKLOG_BYTES)
            if ready is None:
                return []
            if not ready:
                return self._hand_back()
            self._push(wait=False)
            return []
        name = cid.encode("ascii")
        self._pending += (_HEAD.pack(0, len(name), len(block)), name, block)
        self._size += len(block) + _HEAD.size + len(name)
        if self._size >= _SEND_BYTES or self._queued:
            self._push(wait=False)
        return []

    def settle(self) -> tuple[dict[str, int], Unsent]:
        """Wait until every block sent is a closed file; return how many files each staging directory got, and
        the blocks the caller must write itself (every block sent, if the child never said ready: the writer
        is then closed and the counts empty).

        Raises OSError: the child failed (its error), or ended without answering, or the writer failed earlier.
        """
        if self._failed is not None or self._closed:
            raise self._gone()
        if not self._unsettled:
            return {}, []
        if not self._ready and not self._look(wait=True):
            return {}, self._hand_back()
        self._pending.append(_SETTLE)
        try:
            self._push(wait=True)
            line = self._answer()
            if not line or line[0] != "ok":
                raise self._fail(line)
            counts: dict[str, int] = {}
            for item in line[1:]:
                group, _, count = item.partition(":")
                counts[group] = int(count)
        except BaseException as exc:
            self._mark(exc)
            raise
        self._unsettled = False
        return counts, []

    @property
    def busy(self) -> bool:
        """True while the child is more than :data:`_BUSY_BYTES` of records behind (not yet ready, or its pipe
        full): a block the caller writes itself meanwhile is made at once, beside the child's files.

        Raises OSError: the child is gone (a write to it failed), as :meth:`send` would.
        """
        if self._failed is not None or self._closed:
            return False  # send() raises
        if not self._ready:
            if self._size < _BUSY_BYTES:
                return False
            ready = self._look(wait=False)
            if not ready:
                return ready is None  # False: the child never ran, and the next send() hands every block back
        if self._queued + self._size <= _BUSY_BYTES:
            return False
        if self._skip:  # found busy lately: the pipe is looked at again only every _BUSY_SKIP blocks
            self._skip -= 1
            return True
        self._push(wait=False)
        if self._queued > _BUSY_BYTES:
            self._skip = _BUSY_SKIP
            return True
        return False

    @property
    def unsettled(self) -> bool:
        """True if a block was sent since the last :meth:`settle` that answered."""
        return self._unsettled

    def close(self) -> None:
        """End the child and wait for it (killed if it does not end within 10 s). Idempotent.

        A writer that has not failed sends the end record first (after the rest of a record the pipe took
        part of; records not begun are dropped), so the child ends even while a process forked meanwhile
        still holds its input open; one that failed closes the input (a record cut short is never written)
        and the child ends at end of input, or is killed.
        """
        self._pending.clear()
        self._held.clear()
        if self._closed:
            return
        self._closed = True
        _live.discard(self)
        if self._pid != os.getpid():
            return  # a forked copy: the child is not ours to end
        try:
            if self._failed is None:
                while len(self._chunks) > 1:
                    self._chunks.pop()
                self._pending.append(_END)
                self._push(wait=True)
            self._in.close()
        except (OSError, ValueError):
            pass
        try:
            self._child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        self._out.close()

    def _look(self, wait: bool) -> bool | None:
        # Whether the child has said ready (without waiting unless ``wait``): None, not yet; False, it ended or
        # answered something else, so it made no file. On the line, the held blocks become pending records.
        if not wait and not _ready_for(self._out, select.POLLIN, 0):
            return None
        if self._out.readline() != b"ready\n":
            return False
        self._ready = True
        held, self._held, self._size = self._held, [], 0
        try:
            for cid, block in held:
                name = cid.encode("ascii")
                self._pending += (_HEAD.pack(0, len(name), len(block)), name, block)
                self._size += len(block) + _HEAD.size + len(name)
        except BaseException as exc:  # e.g. KeyboardInterrupt: the blocks not yet made records would be lost
            self._mark(exc)
            raise
        return True

    def _hand_back(self) -> Unsent:
        # The child never said ready: end it and give the batch every block it was sent.
        held, self._held = self._held, []
        self._failed = OSError("the block writer process never ran")  # close() sends it nothing more
        self.close()
        return held

    def _push(self, wait: bool) -> None:
        # Write the pending records to the child: what the pipe takes now, the rest held for the next push
        # unless ``wait`` or more than _BACKLOG_BYTES are held (then until the pipe has taken them all).
        if self._pending:
            chunk = b"".join(self._pending)
            self._pending.clear()
            self._size = 0
            self._chunks.append(chunk)
            self._queued += len(chunk)
        try:
            while self._chunks:
                head = self._chunks[0]
                done = self._in.write(head)
                if done is None:  # the pipe is full
                    if not wait and self._queued <= _BACKLOG_BYTES:
                        return
                    _ready_for(self._in, select.POLLOUT, None)
                    continue
                self._queued -= done
                if done == len(head):
                    self._chunks.popleft()
                else:
                    self._chunks[0] = memoryview(head)[done:]
        except OSError as exc:
            raise self._fail(self._answer()) from exc
        except BaseException as exc:  # e.g. KeyboardInterrupt partway through a record: its framing is lost
            self._mark(exc)
            raise

    def _answer(self) -> list[str]:
        return self._out.readline().decode("ascii", "replace").split()

    def _mark(self, exc: BaseException) -> None:
        # Any exception partway through a write or a settle fails the writer for good.
        if self._failed is None:
            self._failed = exc if isinstance(exc, OSError) else OSError(f"the block writer was interrupted ({exc!r})")

    def _fail(self, answer: list[str]) -> OSError:
        # The child's own error when it answered one (a full disk), else how it ended; it is ended first.
        if len(answer) >= 2 and answer[0] == "error" and answer[1].isdigit():
            self._failed = OSError(int(answer[1]), " ".join(answer[2:]) or "the block writer failed")
            self.close()
        else:
            self._failed = OSError("the block writer process ended")
            self.close()
            self._failed = OSError(f"the block writer process ended (exit {self._child.returncode})")
        return self._failed

    def _gone(self) -> OSError:
        return self.failure or OSError(f"the block writer process ended (exit {self._child.returncode})")

    def _forget(self) -> None:
        # In a forked child: let go of the pipes (the descriptors now read /dev/null, so a later close of
        # this object's files closes nothing of the child's) and never touch the writer process.
        if self._closed:
            return
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            for stream in (self._in, self._out):
                os.dup2(null, stream.fileno(), inheritable=False)
        finally:
            os.close(null)
        self._failed = OSError("the block writer belongs to the process this one was forked from")


def _ready_for(stream: IO[bytes], event: int, timeout: int | None) -> bool:
    # Whether ``stream`` is readable or writable (``event``) within ``timeout`` ms (None: wait until it is),
    # or has hung up or failed (the next read or write says how). poll(), not select(): a host with many
    # files open gives the pipes descriptors past select()'s FD_SETSIZE (1,024), which it refuses.
    poller = select.poll()
    poller.register(stream, event)
    return bool(poller.poll(timeout))


def _after_fork() -> None:
    # A forked process holds every descriptor its parent had (close-on-exec acts only at exec): were it
    # to keep a writer's input open, that writer would never see end of input.
    for writer in list(_live):
        writer._forget()


os.register_at_fork(after_in_child=_after_fork)


def start(batch_dir: str) -> Writer | None:
    """A writer creating files under ``batch_dir``; None where no child interpreter can be started.

    Does not wait for the child to say it is ready (:meth:`Writer.send` looks for that as it goes): a child
    that ends first (``sys.executable`` is no usable interpreter) hands back every block it was sent.
    """
    if not sys.executable or getattr(sys, "frozen", False):
        return None
    try:
        child = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _CHILD, batch_dir],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            close_fds=True,
            start_new_session=True,
        )
    except OSError:
        return None
    assert child.stdout is not None
    child.stdout = io.BufferedReader(cast("io.FileIO", child.stdout))  # answers are read by line
    return Writer(child)
