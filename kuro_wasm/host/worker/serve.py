"""A worker process: harden itself, then run the host's requests one after another, each as a plain Job.

## The one decision
A worker runs exactly the run logic of the in-process backend — one
:class:`kuro_wasm.host.job.Job` per request, built from the request's plain data, executed on the
worker's main thread — and adds only transport: the Job's ``on_chunk`` sends each kept chunk to the
host as the guest writes it, stdin/close/kill frames reach the Job through its public
``ctx.stdin`` and ``ctx.stop``, and at the end the receipt (less the output bytes, which the host
already has) and the stream's counters go back in one ``done`` frame, sent from the Job's ``on_exit``
(before the Job closes its wasmtime store, whose teardown then overlaps the host's work on the
receipt). The host builds the receipt it hands out from that (:mod:`kuro_wasm.host.worker.run`).

Requests may queue (the host pipelines up to two per worker). The main thread reads its requests
itself, from the *run channel* (runs, and the host's replies to this worker's asks: while it waits
for a reply it queues the runs it reads meanwhile), so a run costs no hand-over between threads.
Stdin, close, kill, withdraw and probe frames come on a second socket, the *control channel*, read by
a control thread that stays blocked in ``poll`` while a guest runs (it must act while the main thread
runs one). (A reader thread handing each run to the main thread was measured ~130 µs a warm run
slower: one thread wake-up, two context switches and cold caches per run; two threads taking turns at
reading — leader/follower — was slower still: the thread woken to read next competes with the running
guest for the GIL at every ctypes call into wasmtime.)

The two channels are not ordered with each other: a control frame may come before the run frame it
is about. The host gives a worker its runs in increasing id order, so a control frame for an id above
the highest read is for a run still to come: it is kept and applied when that run is read (a
``withdraw`` of it is granted at once, and the run is skipped when read); one for a lower id whose
run has finished has nothing left to act on. Stdin, close and kill for a queued request wait in its
record and are applied when its Job exists; ``withdraw`` takes a request back if it has not started.
When the host's end of either channel closes, the running guest is stopped and the worker exits.

A worker never touches a module cache on disk and is never told the kuro home: a guest it has not
run yet is asked of the host (``module``), which compiles it — or loads it from its own
tag-verified cache — and sends the serialized artifact (for a plain component, the core modules the host
linked it from and its shape, so the worker runs it on the host's own canonical ABI as the host would,
without compiling them); the worker deserializes it into its
in-memory cache (:meth:`kuro_wasm.host.cache.ModuleCache.seed`), so its warm runs ask nothing. A
taken-over worker therefore cannot leave anything for the host or another worker to deserialize
(and :mod:`.hardening`'s filesystem confinement keeps it from the cache's key and from writing
any file).

## Effects
The two inherited sockets to the host, a control thread, :mod:`.hardening` before any of that, and the
Jobs' own effects (wasmtime, the worker's in-memory module cache).

## Not done here
No scheduling (the host decides what runs where), no retries.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

from kuro_fs.cid import cid_for
from kuro_fs.errors import BlockStoreError, CorruptBlock, MissingBlock
from kuro_fs.filestore import FileBlockStore
from kuro_fs.fs import Budget, Fs
from kuro_fs.fsdir import DirLayout, Entry, encode_dir
from kuro_fs.hamt import Shape
from kuro_wasm.errors import HostError
from kuro_wasm.host import engine
from kuro_wasm.host.cache import ARTIFACTS, MODULE, ModuleCache
from kuro_wasm.host.job import Job
from kuro_wasm.host.worker import hardening
from kuro_wasm.host.worker.protocol import (
    MAX_ARTIFACT_BYTES,
    ProtocolError,
    command_of,
    decode_fixed,
    done_receipt,
    framed,
    read_frame,
    receipt_limit,
    send,
)
from kuro_wasm.host.worker.remote import RemoteStore
from kuro_wasm.host.worker.run import HOST_STATED
from kuro_wasm.model import stream as _stream
from kuro_wasm.model.limits import Limits
from kuro_wasm.model.receipt import HOST_KEYS, checked_outcome, to_json
from kuro_wasm.model.sessions import Session

__all__ = ["serve"]

_FROM_HOST: Final = frozenset({"host"})
_RUN_CHANNEL: Final = frozenset({"run", "reply", "compiled"})
_PLAIN: Final = engine.EngineConfig()
_HOST_PAYLOAD_LIMIT: Final = MAX_ARTIFACT_BYTES
#: What a done frame reports of the Job's receipt: the keys a host may state, less those the host states itself.
_REPORTED: Final = frozenset(f"kuro/{k}" for k in HOST_KEYS) - HOST_STATED | {"kuro/stdout-bytes", "kuro/stderr-bytes"}


@dataclass(eq=False)
class _Request:
    """A run request from the host, and what arrived for it before its Job existed.

    ``message`` is None for a record of control frames that arrived before the run frame was read (the two
    channels are not ordered with each other): they are applied when it is read.
    """

    id: int
    message: dict[str, Any] | None
    stdin: bytearray
    closed: bool
    killed: bool
    job: Job | None = None
    taken: bool = False
    withdrawn: bool = False


class _SocketReader:
    """Frames read straight off a socket, without a buffer: the control thread polls the socket itself, so no
    frame may sit in a user-space buffer while it waits (control frames are few; two ``recv`` calls each)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def read(self, size: int = -1, /) -> bytes:
        got = bytearray()
        while len(got) < size:
            part = self._sock.recv(min(size - len(got), 1 << 20), socket.MSG_WAITALL)
            if not part:
                break
            got += part
        return bytes(got)


@dataclass(eq=False)
class _Worker:
    sock: socket.socket  # runs in; the replies to this worker's asks in; every worker frame out
    ctl: socket.socket  # stdin, eof, kill, withdraw, probe in
    test_hooks: bool
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    #: The worker's state is guarded by ``lock``, entered directly (``with self.lock``: a Condition's ``__enter__`` and
    #: ``__exit__`` are Python calls, and a warm run takes the lock four times); ``cond`` waits and notifies on it.
    lock: threading.RLock = field(default_factory=threading.RLock)
    cond: threading.Condition = field(init=False)
    waiting: int = 0  # threads waiting on ``cond`` (no notify when none: a warm run reads its frames on one thread)
    queued: deque[_Request] = field(default_factory=deque)  # read from the run channel, not yet taken
    requests: dict[int, _Request] = field(default_factory=dict)  # read and not finished, by run id
    early: dict[int, _Request] = field(default_factory=dict)  # control frames for runs not read yet
    highest: int = 0  # the highest run id read (the host's ids for one worker increase)
    reading: bool = False  # a thread is reading the run channel (the others wait for what it files)
    replies: dict[int, tuple[dict[str, Any], bytes] | None] = field(default_factory=dict)
    next_rid: int = 0
    host_gone: bool = False
    lie: str | None = None  # test hook: how the next run's done lies about its fs root (see _lie_about_root)
    forge: dict[str, Any] | None = None  # test hook: fields the next run's done frame carries instead of its own

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)
        self.stream = self.sock.makefile("rb", buffering=1 << 16)

    # ---- the Link the run's RemoteStore talks through

    def send(self, kind: str, fields: Mapping[str, Any], payload: bytes = b"") -> None:
        try:
            with self.send_lock:
                send(self.sock, kind, fields, payload)
        except OSError as exc:
            raise BlockStoreError(f"the host is gone: {exc}") from exc

    def request(self, kind: str, fields: Mapping[str, Any]) -> tuple[bool, bytes]:
        """The host's answer to a ``get``/``has``. Raises CorruptBlock / MissingBlock / BlockStoreError: the
        host's store failed on that block, raised here as the host's store raised it (so a run records the
        same ``kuro/store-faults`` as in-process)."""
        message, payload = self.ask(kind, fields)
        fault = message.get("fault")
        if fault is not None:
            cid = str(fields.get("cid"))
            if fault == "corrupt":
                raise CorruptBlock(cid, "the host's store holds bytes that do not hash to this CID")
            if fault == "missing":
                raise MissingBlock(cid)
            raise BlockStoreError(f"the host's store could not read {cid}")
        return bool(message.get("found")), payload

    def ask(self, kind: str, fields: Mapping[str, Any]) -> tuple[dict[str, Any], bytes]:
        """Send a request and wait for the host's reply to it (``reply`` or ``compiled``), reading the run
        channel itself meanwhile (run frames read then are queued). Raises BlockStoreError."""
        with self.lock:
            self.next_rid += 1
            rid = self.next_rid
            self.replies[rid] = None
        self.send(kind, {**fields, "rid": rid})
        while True:
            with self.lock:
                while self.replies.get(rid) is None and not self.host_gone and self.reading:
                    self._wait()  # another thread reads the run channel: it files our reply if it comes
                reply = self.replies.get(rid)
                if reply is not None or self.host_gone:
                    self.replies.pop(rid, None)
                    break
                self.reading = True
            self._read_run_channel()
        if reply is None:
            raise BlockStoreError("the host went away while it was asked something")
        return reply

    # ---- the main thread reads runs and runs them; a control thread acts on the control frames meanwhile

    def loop(self) -> None:
        """The main thread: take each request in order (skipping withdrawn ones) and run it."""
        while True:
            self._execute_and_report(self._next())

    def _next(self) -> _Request:
        """The next run request not withdrawn: queued already, else read from the run channel."""
        while True:
            with self.lock:
                while self.queued:
                    request = self.queued.popleft()
                    if not request.withdrawn:
                        request.taken = True
                        return request
                if self.reading:
                    self._wait()
                    continue
                self.reading = True
            self._read_run_channel()

    def _wait(self) -> None:
        """Wait on ``cond`` (the caller holds ``lock``), counted in ``waiting``."""
        self.waiting += 1
        try:
            self.cond.wait()
        finally:
            self.waiting -= 1

    def _read_run_channel(self) -> None:
        """Read one frame of the run channel (the caller set ``reading``) and file it; the host gone: exit."""
        try:
            frame = read_frame(self.stream, _FROM_HOST, lambda _m: _HOST_PAYLOAD_LIMIT)
        except (OSError, ProtocolError):
            frame = None
        if frame is None or frame[0]["t"] not in _RUN_CHANNEL:
            self._host_gone()
        message, payload = frame
        with self.lock:
            self.reading = False
            try:
                if message["t"] == "run":
                    self._file_run(message, payload)
                elif message["rid"] in self.replies:
                    self.replies[message["rid"]] = (message, payload)
            except ProtocolError:
                self.host_gone = True  # not the host's frame, or not one of its own: nothing more is trusted
            if self.waiting:
                self.cond.notify_all()
        if self.host_gone:
            self._host_gone()

    def _file_run(self, message: dict[str, Any], payload: bytes) -> None:
        """Queue a run just read, with the control frames that came for it first (caller holds ``cond``).

        Raises ProtocolError: its payload does not start with its fixed fields (:func:`_fixed`)."""
        run_id = message["id"]
        split = message["fixed"]
        if not 0 <= split <= len(payload):
            raise ProtocolError(f"run: {split} bytes of fixed fields in a {len(payload)}-byte payload")
        message.update(_fixed(payload[:split]))
        self.highest = max(self.highest, run_id)
        request = _Request(run_id, message, bytearray(payload[split:]), message["stdin_closed"], message["killed"])
        early = self.early.pop(run_id, None)
        if early is not None:
            if early.withdrawn:
                return  # taken back before it was read (the host had its ``withdrawn``): never run
            if not request.closed:
                request.stdin += early.stdin
            request.closed = request.closed or early.closed
            request.killed = request.killed or early.killed
        self.requests[run_id] = request
        self.queued.append(request)

    def control(self) -> None:
        """The control thread: every control frame, until the host's end of either channel closes (then the
        worker exits). It stays blocked in ``poll`` while a guest runs, so it never competes with the run for
        the GIL; the run channel is watched only for its hang-up (its frames are the main thread's)."""
        poller = select.poll()
        poller.register(self.ctl, select.POLLIN)
        poller.register(self.sock, select.POLLRDHUP)
        reader = _SocketReader(self.ctl)
        while True:
            try:
                events = poller.poll()
            except InterruptedError:
                continue
            if any(fd == self.sock.fileno() for fd, _ in events):
                self._host_gone()
            try:
                frame = read_frame(reader, _FROM_HOST, lambda _m: _HOST_PAYLOAD_LIMIT)
            except (OSError, ProtocolError):
                frame = None
            if frame is None or frame[0]["t"] in _RUN_CHANNEL:
                self._host_gone()
            try:
                self._on_control(*frame)
            except BlockStoreError:  # an answer could not be sent: the host is gone
                self._host_gone()

    def _host_gone(self) -> NoReturn:
        with self.lock:
            self.host_gone = True
            running = [r.job for r in self.requests.values() if r.job is not None]
            self.cond.notify_all()
        for job in running:
            job.ctx.stop("cancelled")
        os._exit(0)

    def _on_control(self, message: dict[str, Any], payload: bytes) -> None:
        kind = message["t"]
        if kind == "probe":
            if self.test_hooks and message["what"] == "lie-block":
                self._lie_block()
            elif self.test_hooks and message["what"].startswith("ask-module:"):
                self._ask_module(message["what"].partition(":")[2])
            elif self.test_hooks and message["what"].startswith("forge:"):
                self.forge = json.loads(message["what"].partition(":")[2])  # {"receipt": {...}, "stream": {...}}
                self.send("probed", {"what": "forge", "result": {"armed": True}})
            elif self.test_hooks and message["what"] in _LIES:
                self.lie = message["what"]  # the next run's done lies about its fs root (see _lie_about_root)
                self.send("probed", {"what": message["what"], "result": {"armed": True}})
            elif self.test_hooks:
                try:
                    result = hardening.probe(message["what"])
                except Exception as exc:
                    result = {"raised": f"{type(exc).__name__}: {exc}"}
                self.send("probed", {"what": message["what"], "result": result})
            return
        run_id = message["id"]
        with self.lock:
            target = self.requests.get(run_id)
            if target is None:
                if run_id <= self.highest:
                    return  # it finished already: a late stdin, kill or withdraw has nothing left to act on
                target = self.early.setdefault(run_id, _Request(run_id, None, bytearray(), False, False))
            if kind == "withdraw":
                ok = not target.taken
                if ok:
                    target.withdrawn = True
                    self.requests.pop(run_id, None)
                # Answered before the lock is let go: the main thread skips the run only after this frame is
                # sent, so the host learns of it before any frame of the run after it.
                self.send("withdrawn", {"id": run_id, "ok": ok})
                return
            job = target.job
            if job is None:
                if kind == "stdin" and not target.closed:
                    target.stdin += payload
                target.closed = target.closed or kind == "eof"
                target.killed = target.killed or kind == "kill"
        if job is not None:
            assert job.ctx.stdin is not None
            if kind == "stdin":
                job.ctx.stdin.write(payload)
            elif kind == "eof":
                job.ctx.stdin.close()
            elif kind == "kill":
                job.ctx.stop("cancelled")

    def _took(self, run_id: int, total: int) -> None:
        """Tell the host the guest has read ``total`` stdin bytes in all (its writer waits for room on it)."""
        try:
            self.send("took", {"id": run_id, "n": total})
        except BlockStoreError:
            pass  # the host is gone: the control thread ends this worker

    def _compiled_by_host(self, run_id: int, cid: object, fuel: bool) -> None:
        """Make sure this worker's memory holds guest ``cid`` compiled for the engine with or without ``fuel``:
        if not, ask the host for
        the artifact (compiled by the host, or loaded from its own module cache) and deserialize it.

        A worker never compiles into, or reads from, the module cache on disk: what it deserializes comes
        from the host. Where the host has nothing to give (the guest is missing or does not compile) the
        run's own load reports why, as in-process; an artifact this engine refuses is compiled here instead
        (in memory).
        """
        if not isinstance(cid, str):
            return
        config, key = _engine(fuel)
        if ModuleCache.holds(cid, key):  # the warm path: one dict lookup
            return
        reply, payload = self.ask("module", {"id": run_id, "cid": cid, "fuel": fuel})
        artifact = next((a for a in ARTIFACTS if a.name == reply["kind"]), None)
        split = reply["meta"]
        if artifact is None or not 0 <= split <= len(payload):
            return
        parts = _parts(reply["parts"], len(payload) - split)
        if parts is None:
            return
        try:
            if parts:  # the core modules it is linked from (a plain component), each under ``CID#name``
                at, modules = split, []
                for name, n in parts:
                    modules.append((name, MODULE.deserialize(engine.engine_for(config), payload[at : at + n])))
                    at += n
            else:
                compiled = artifact.deserialize(engine.engine_for(config), payload[split:])
        except Exception:
            return  # not for this engine: the run's load compiles the verified bytes in memory instead
        if parts:
            for name, module in modules:
                ModuleCache.seed(f"{cid}#{name}", key, module, None)
            ModuleCache.seed(cid, key, None, payload[:split])  # the shape alone: the whole is compiled only if asked
        else:
            ModuleCache.seed(cid, key, compiled, payload[:split])

    def _lie_block(self) -> None:
        """Test hook: hand the host, for the running request, bytes under a CID they do not hash to."""
        with self.lock:
            running = [r.id for r in self.requests.values() if r.job is not None]
        self.send("put", {"id": running[0] if running else 0, "cid": cid_for(b"what was claimed")}, b"what was sent")

    def _ask_module(self, cid: str) -> None:
        """Test hook: ask the host, for the running request, to compile ``cid`` (not waiting for an answer)."""
        with self.lock:
            running = [r.id for r in self.requests.values() if r.job is not None]
            self.next_rid += 1
            rid = self.next_rid
        self.send("module", {"id": running[0] if running else 0, "rid": rid, "cid": cid, "fuel": False})

    def _execute_and_report(self, request: _Request) -> None:
        try:
            self._execute(request)
        except BlockStoreError:
            self._host_gone()
        except Exception as exc:  # a request this worker cannot even start (a bug): say so, stay up
            self.send("failed", {"id": request.id, "error": f"the worker could not start the run: {exc!r}"})
        finally:
            with self.lock:
                self.requests.pop(request.id, None)

    def _execute(self, request: _Request) -> None:
        message = request.message
        assert message is not None  # only requests read from the run channel are taken
        store_path = message["store_path"]
        command = command_of(message["command"])
        store = RemoteStore(
            self,
            request.id,
            direct=None if store_path is None else _direct_store(store_path),
            present={command.get("kuro/guest", ""): message["guest_present"]},
        )
        fs_arg: Any = message["fs"]
        if isinstance(fs_arg, dict):
            # every field of the host's Fs that decides what a run may read or which CIDs it writes
            entries, most = fs_arg["budget"]
            max_flat, bit_width, bucket_size = fs_arg["layout"]
            fs_arg = Fs(
                store,
                fs_arg["root"],
                fs_arg["grant"],
                chunk_size=fs_arg["chunk_size"],
                width=fs_arg["width"],
                layout=DirLayout(max_flat, Shape(bit_width, bucket_size)),
                budget=Budget(entries, most),
            )
        # The deadline is the host's (CLOCK_MONOTONIC is one clock for every process of the machine): the
        # time the request waited in the host and in this worker's queue is part of the run's budget.
        remaining = math.ceil((message["deadline"] - time.monotonic()) * 1000)
        limits = _limits(message["limits"], max(1, remaining))
        self._compiled_by_host(request.id, command.get("kuro/guest"), limits.fuel is not None)

        def on_chunk(_s: _stream.Stream, chunk: _stream.Chunk) -> None:
            self.send("chunk", {"id": request.id, "stream": chunk.stream}, chunk.data)

        unsent: list[BaseException] = []

        def on_exit(receipt: dict[str, Any]) -> None:
            # The done frame leaves as soon as the receipt exists, before the Job closes its wasmtime store.
            try:
                self._report(request.id, job, receipt, store, limits)
            except BaseException as exc:  # BlockStoreError (the host is gone): raised once the Job has ended
                unsent.append(exc)

        session = _session(message["session"])
        with self.lock:  # stdin, close and kill that arrived before the Job exists are in the request
            job = _ReportingJob(
                session,
                command,
                store,
                fs_arg,
                on_chunk=on_chunk,
                on_exit=on_exit,
                limits=limits,
                home=False,  # compiled guests come from the host (_compiled_by_host); no module cache on disk here
                stdin_closed=request.closed,
                stdin=bytes(request.stdin) if request.stdin else None,
                seed=message["seed"] if isinstance(message["seed"], int) else None,
                stdin_bound=None,  # written by the control thread, which must never wait (a kill may be next)
            )
            assert job.ctx.stdin is not None
            job.ctx.stdin.on_take = lambda total: self._took(request.id, total)  # the host holds stdin's bound
            request.job = job
            killed = request.killed or self.host_gone
        if killed:
            job.ctx.stop("cancelled")
        try:
            job.execute()
        except HostError as exc:
            self.send("failed", {"id": request.id, "error": str(exc)})
            return
        if unsent:
            raise unsent[0]

    def _report(self, run_id: int, job: Job, receipt: Mapping[str, Any], store: RemoteStore, limits: Limits) -> None:
        """Send run ``run_id``'s done frame: its receipt less what the host states itself, and its stream's counters.
        Raises BlockStoreError: the host is gone."""
        kept = dict(receipt)
        if kept.get("kuro/outcome") == "host-error" and isinstance(kept.get("kuro/error"), str):
            kept["kuro/error"] = hardening.explain_address_space(kept["kuro/error"], limits.max_memories)
        if "kuro/result" in kept:  # a component's typed result may hold bytes: it travels as DAG-JSON text
            kept["kuro/result"] = to_json(kept["kuro/result"])
        if self.lie is not None:
            self._lie_about_root(store, kept)
        totals = job.totals if isinstance(job, _ReportingJob) and job.totals is not None else job.writer.totals()
        seq, _, _, dropped, truncated, capped_by = totals
        if self.forge is not None:  # test hook: a done frame with fields of the test's choosing
            forge, self.forge = self.forge, None
            kept.update(forge.get("receipt", {}))
            counters = {"seq": seq, "dropped": dropped, "truncated": truncated, "capped_by": capped_by}
            counters.update(forge.get("stream", {}))
            size, payload = done_receipt(kept, receipt_limit(limits))
            self.send("done", {"id": run_id, "receipt": size, "stream": counters, "cpu": _cpu_seconds()}, payload)
            return
        size, payload = done_receipt(kept, receipt_limit(limits))  # over its limit: a host-error receipt says so
        head = _DONE_HEAD % (
            run_id,
            size,
            seq,
            dropped,
            _JSON_BOOL[truncated],
            _CAPPED_BY[capped_by],
            repr(_cpu_seconds()).encode("ascii"),  # a finite float, as JSON writes it
        )
        try:
            first, rest = framed("done", head, payload)
            with self.send_lock:
                self.sock.sendall(first)
                if rest:
                    self.sock.sendall(rest)
        except (OSError, ProtocolError) as exc:
            raise BlockStoreError(f"the host is gone: {exc}") from exc

    def _lie_about_root(self, store: RemoteStore, kept: dict[str, Any]) -> None:
        """Test hook: ``lie-root`` hands back :data:`INCOMPLETE_DIR` (a directory whose one file nobody has) and
        claims it as the new root; ``plant`` only hands it back; ``claim`` claims it without handing it back."""
        lie, self.lie = self.lie, None
        if lie in ("lie-root", "plant"):
            store.put(INCOMPLETE_DIR, "dag-cbor")
        if lie in ("lie-root", "claim"):
            kept["kuro/fs-root-after"] = cid_for(INCOMPLETE_DIR, "dag-cbor")


class _ReportingJob(Job):
    """A worker's Job, whose receipt is what its ``done`` frame reports: the host keys a worker may state, less those
    its host states itself (:data:`_REPORTED`), and the bytes it kept of each stream. The whole receipt is the
    host's to assemble (:mod:`.run`); building it here too (the output joined and hashed, the session's keys, the
    model's assembly) was work nobody read, on every run's path. The outcome is checked as a receipt's is, so a
    result the model refuses still ends the Job without a receipt (a ``failed`` frame), as before.
    """

    #: the writer's :meth:`~kuro_wasm.model.stream.Writer.totals` as the receipt was made (its done frame's counters)
    totals: tuple[int, int, int, int, bool, str | None] | None = None

    def _receipt(self, session: Session, host: dict[str, Any]) -> dict[str, Any]:
        outcome = checked_outcome(host)
        kept = {k: v for k, v in host.items() if k in _REPORTED and v is not None}
        kept["kuro/outcome"] = outcome
        self.totals = totals = self.writer.totals()
        kept["kuro/stdout-bytes"], kept["kuro/stderr-bytes"] = totals[1], totals[2]
        return kept


#: A ``done`` frame's JSON, written out here rather than through the JSON encoder (ints, two flags and a finite
#: float; the host checks every field, as for any frame): no fields map and no encoder call per run.
_DONE_HEAD: Final = (
    b'{"t":"done","id":%d,"receipt":%d,"stream":{"seq":%d,"dropped":%d,"truncated":%s,"capped_by":%s},"cpu":%s}'
)
_JSON_BOOL: Final = {False: b"false", True: b"true"}
_CAPPED_BY: Final = {None: b"null", "bytes": b'"bytes"', "chunks": b'"chunks"'}
#: How stale the CPU time a done frame reports may be (s of wall time since it was read).
_CPU_STALE_S: Final = 1.0
_CPU_READ: list[float] = [0.0, -math.inf]  # (the process's CPU seconds, the monotonic clock when read)


def _cpu_seconds() -> float:
    """This process's CPU time for a done frame (the host retires a worker past half its ``RLIMIT_CPU``), read again
    only when :data:`_CPU_STALE_S` of wall time has passed: a system call (``CLOCK_PROCESS_CPUTIME_ID`` has no vDSO
    path) saved on each warm run, for a figure that lags by at most a second's worth of its threads' CPU against
    a bound of half an hour (a run that took longer reads it afresh)."""
    now = time.monotonic()
    if now - _CPU_READ[1] >= _CPU_STALE_S:
        _CPU_READ[0], _CPU_READ[1] = time.process_time(), now
    return _CPU_READ[0]


#: Test hooks: a kuro.fs directory naming one file whose block nobody ever handed back.
INCOMPLETE_DIR: Final = encode_dir({"lost.txt": Entry(cid_for(b"a file nobody handed back"), 25)})
_LIES: Final = frozenset({"lie-root", "plant", "claim"})
_SESSIONS: dict[tuple[Any, ...], Session] = {}
_LAST_SESSION: list[tuple[dict[str, Any], Session] | None] = [None]
_LIMITS: dict[tuple[Any, ...], Limits] = {}
_LAST_LIMITS: list[tuple[Mapping[str, Any], int, Limits] | None] = [None]
_INT_OR_NONE: Final = frozenset({int, type(None)})
_ENGINE_KEYS: dict[bool, tuple[engine.EngineConfig, str]] = {}
_DIRECT: dict[str, FileBlockStore] = {}


#: The fixed fields of runs read already, by their bytes (a warm run's are the same bytes every time): decoded and
#: checked once (:func:`~kuro_wasm.host.worker.protocol.decode_fixed`: ~10 µs of a warm run), not per run.
#: Bounded in entries and in the size of each; read and written by the thread reading the run channel.
_FIXED: dict[bytes, dict[str, Any]] = {}
_FIXED_SIZE: Final = 64
_FIXED_MEMO_BYTES: Final = 16 << 10


def _fixed(data: bytes) -> dict[str, Any]:
    """The fixed fields a run frame's payload starts with (``data``), remembered by their bytes. The values are
    shared by every run of those bytes, as an in-process caller's command is by each of its runs: nothing
    changes them (a Job copies its command; a session is frozen). Raises ProtocolError as ``decode_fixed``."""
    found = _FIXED.get(data)
    if found is None:
        found = decode_fixed(data)
        if len(data) <= _FIXED_MEMO_BYTES:
            if len(_FIXED) >= _FIXED_SIZE:
                _FIXED.clear()
            _FIXED[data] = found
    return found


def _direct_store(path: str) -> FileBlockStore:
    """The host's file block store at ``path``, opened once per worker: a FileBlockStore holds no state but
    its directory (opening one costs a ``mkdir`` call, ~10 µs, on every run otherwise); a bounded memo."""
    found = _DIRECT.get(path)
    if found is None:
        found = FileBlockStore(path)
        if len(_DIRECT) >= 16:
            _DIRECT.clear()
        _DIRECT[path] = found
    return found


def _engine(fuel: bool) -> tuple[engine.EngineConfig, str]:
    """The engine config with or without fuel and its :func:`~kuro_wasm.host.engine.engine_key`, made once
    (a worker never changes its memory profile: the key of a config stays the same)."""
    found = _ENGINE_KEYS.get(fuel)
    if found is None:
        config = engine.EngineConfig(fuel=fuel)
        found = _ENGINE_KEYS[fuel] = (config, engine.engine_key(config))
    return found


def _limits(options: Mapping[str, Any], timeout_ms: int) -> Limits:
    """The request's limits with ``timeout_ms`` (what is left of its deadline), checked by
    :meth:`Limits.from_options` once per distinct value (a warm run re-sends the same ones and has nearly all
    its time left); a bounded memo whose key holds only ints and None (so ``True`` never finds ``1``'s)."""
    last = _LAST_LIMITS[0]
    if last is not None and last[0] is options and last[1] == timeout_ms:  # a warm run: the same fixed fields' map
        return last[2]
    key = (timeout_ms, *options.items())
    if not _INT_OR_NONE.issuperset(map(type, options.values())):
        return Limits.from_options({**options, "timeout_ms": timeout_ms})
    found = _LIMITS.get(key)
    if found is None:
        found = Limits.from_options({**options, "timeout_ms": timeout_ms})
        if len(_LIMITS) >= 256:
            _LIMITS.clear()
        _LIMITS[key] = found
    _LAST_LIMITS[0] = (options, timeout_ms, found)  # (holding ``options``: its identity is not reused meanwhile)
    return found


def _session(data: Any) -> Session:
    """The session of a request, checked by :meth:`Session.from_data` once per distinct session (a warm run
    re-sends the same one, found at once by comparing it with the last); a bounded memo."""
    last = _LAST_SESSION[0]
    if last is not None and (data is last[0] or (type(data) is dict and data == last[0])):
        return last[1]
    try:
        key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(data.items()))
        hash(key)
    except (AttributeError, TypeError):
        return Session.from_data(data)  # not a session's data: let the model say why
    found = _SESSIONS.get(key)
    if found is None:
        found = Session.from_data(data)
        if len(_SESSIONS) >= 256:
            _SESSIONS.clear()
        _SESSIONS[key] = found
    _LAST_SESSION[0] = (data, found)
    return found


def _parts(parts: Any, room: int) -> list[tuple[str, int]] | None:
    """A ``compiled`` reply's ``parts`` as (name, length) pairs filling ``room`` bytes exactly, or None when
    they do not (an empty list: the artifact is the compiled guest itself)."""
    if not isinstance(parts, list) or not all(
        isinstance(p, list) and len(p) == 2 and type(p[0]) is str and type(p[1]) is int and p[1] >= 0 for p in parts
    ):
        return None
    pairs = [(str(p[0]), int(p[1])) for p in parts]
    return pairs if not pairs or sum(n for _, n in pairs) == room else None


def serve(fd: int, control_fd: int, options: Mapping[str, Any]) -> None:
    """The body of a worker process (never returns): harden, say hello on socket ``fd``, run requests.

    ``fd`` carries the host's runs and its replies to this worker's asks in, and every frame of the worker
    out; ``control_fd`` carries the host's stdin, eof, kill, withdraw and probe frames in.

    ``options``: ``hardening`` (:meth:`hardening.Hardening.to_data`), ``closed`` (:func:`hardening.closed_homes`,
    resolved by the host) and ``test_hooks`` (bool). A worker that
    cannot apply its required hardening exits with status 3 before its hello.
    """
    code = 0
    try:
        sock = socket.socket(fileno=fd)
        ctl = socket.socket(fileno=control_fd)
        config = hardening.Hardening.from_data(options["hardening"])
        in_force: list[str] = []
        pid = os.getpid()
        if config.namespaces:
            names, pid = hardening.enter_namespaces()
            in_force += names
        in_force += hardening.apply_limits(config)
        in_force += hardening.set_no_new_privs()
        stores: list[str] = []
        if config.filesystem:
            closed = tuple(str(c) for c in options["closed"])
            names, stores = hardening.confine_filesystem(config.stores or (), "pid-namespace" in in_force, closed)
            in_force += names
        in_force += hardening.install_seccomp()
    except BaseException as exc:
        _debug("the worker could not harden itself")
        try:
            send(sock, "unfit", {"error": f"{type(exc).__name__}: {exc}"})
        except BaseException:
            pass
        os._exit(3)
    try:
        if not any(callable(signal.getsignal(n)) for n in signal.valid_signals()):
            engine.watch_signals_in_runs(False)  # no Python handler to run while a guest does (the zygote saw to it)
        worker = _Worker(sock, ctl, bool(options.get("test_hooks")))
        hello = {"pid": pid, "hardening": sorted(in_force), "engine": engine.engine_key(_PLAIN), "stores": stores}
        worker.send("hello", hello)
        threading.Thread(target=worker.control, name="kuro-worker-control", daemon=True).start()
        worker.loop()
    except BaseException:
        _debug("the worker failed")
        code = 1
    finally:
        os._exit(code)


def _debug(what: str) -> None:
    """With ``KURO_DEBUG`` set (the zygote then keeps stderr), say why a worker gives up."""
    if os.environ.get("KURO_DEBUG"):
        import traceback

        print(f"kuro worker {os.getpid()}: {what}", file=sys.stderr)
        traceback.print_exc()
