"""``kuro batch FILE.jsonl``: one guest invocation per line, fanned out over a cluster, each run at most once.

## The one decision
The file is read and **every line checked before anything runs**: a line is a JSON object with
``kuro run``'s own option names (:data:`kuro_wasm.model.invocation.FIELDS`), and a bad one —
not JSON, not an object, an unknown field, a missing guest, a bad CID, an unknown fs name —
is reported as ``FILE:LINE: what is wrong`` (every bad line, up to :data:`MAX_REPORTED`), exit 2,
nothing run, no cluster started. Blank lines are skipped (they keep their numbers).

Then :func:`kuro_wasm.batch.run_many` runs the lines: no option (or ``--local N``) starts a Dask
``LocalCluster`` of N processes (default: the cores) and stops it at the end — or, without Dask,
N runs at a time on the worker-process pool; ``--cluster ADDRESS`` joins an existing Dask scheduler. Workers read
blocks from the home's block directory (a path every worker must see) or, with ``--gateway URL``,
from that gateway — probed first (``GET /ipfs/bafkqaaa?format=raw``): one that cannot be reached, or
that is no trustless gateway, is one line and exit 2 before any op id is claimed or worker started.
An fs *name* is resolved when the batch starts and never moved: every line sees the root the name had
then (its receipt names the root its writes made). Lines with ``op_id`` go through the home's ledger:
one already recorded is replayed without touching the cluster.

Every receipt and denial is stored as ``kuro run`` stores it (persisted form, a dag-cbor block).
stdout: one line per finished invocation, ``LINE<TAB>OUTCOME<TAB>EXIT<TAB>RECEIPT-CID``, as they
finish; with ``--json`` one JSON object per input line, **in input order** (the receipt, the
denial, the ledger's answer, or ``{"kuro/status": "not-run"}``; when the batch stops early — an error,
a second signal — every line still gets its object: ``not-run``, or ``unknown`` if it was still out).
Progress (done, running, failed, rate) is drawn on stderr when it is a terminal. Ctrl-C (SIGTERM,
SIGHUP) cancels the batch: running guests are killed and stored ``cancelled``, what finished is
stored, what never started is listed; exit 128 + the signal.

Exit status: 0 if every line ran and exited 0; 1 if any did not (a nonzero exit code, a denial,
an op id answered ``running``/``unknown``); 2 bad input; 74 (as ``kuro run``) if the home could not
store some receipt — each is still shown, with ``-`` for its CID, and the rest of the batch goes on.

## Effects
Reads the file, the home (refs, ledger, blocks); starts or joins a cluster; writes stdout/stderr.

## Not done here
Moving fs names; streaming a guest's output while it runs.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kuro_fs.errors import GatewayError
from kuro_fs.home import ledger_path, refs_dir
from kuro_wasm.cli.context import RECEIVED, Context, Interrupted, UsageError, interrupted_status, looks_like_cid
from kuro_wasm.errors import ModelError
from kuro_wasm.model.invocation import FIELDS
from kuro_wasm.model.limits import MAX_WORKERS

if TYPE_CHECKING:
    from kuro_wasm.model.invocation import Invocation

__all__ = ["MAX_REPORTED", "add_batch_parser", "batch", "read_lines"]

#: The signals :mod:`kuro_wasm.cli.launch` turns into ``Interrupted`` (not imported from there: it imports us).
_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: How many bad lines are reported before the rest are only counted.
MAX_REPORTED: Final = 20
#: How often (s) the progress line is redrawn on a terminal while nothing finishes.
TICK_S: Final = 0.5


class _BadLines(UsageError):
    reference = "bad-batch-file"


class _GatewayUnusable(UsageError):
    """``--gateway URL`` names no trustless gateway that answers (exit 2: the command's input is wrong)."""

    def __init__(self, message: str, reference: str) -> None:
        super().__init__(message)
        self.reference = reference


def add_batch_parser(p: argparse.ArgumentParser) -> None:
    """The options of ``kuro batch``."""
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "One JSON object per line, with kuro run's option names:\n  "
        + "\n  ".join(f"{name}: {text}" for name, text in FIELDS.items())
        + "\nexample line: "
        + '{"guest": "bafkrei…", "export": "run", "args": [1], "timeout_ms": 500, "op_id": "job-1"}\n'
        "exit status: 0 every line ran and exited 0, 1 some did not, 2 bad input, 74 a receipt could not be "
        "stored (still shown), 130 interrupted."
    )
    p.add_argument("file", metavar="FILE.jsonl", help="the invocations, one JSON object per line (`-`: stdin)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="ADDRESS", help="an existing Dask scheduler (tcp://host:8786)")
    where.add_argument(
        "--local",
        metavar="N",
        type=int,
        help=f"N worker processes on this machine, started and stopped by the command (default: the cores; "
        f"at most {MAX_WORKERS})",
    )
    p.add_argument(
        "--worker-home",
        metavar="DIR",
        help="where Dask workers keep their caches, a path on each worker (default: the worker's $KURO_HOME, "
        "else $TMPDIR/kuro-worker-UID; never this home)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per input line, in input order, on stdout")
    p.add_argument("--chunk-size", metavar="N", type=int, help="invocations per task (default: adapted to the pace)")
    p.add_argument(
        "--keep-output",
        action="store_true",
        help="ledgered lines also keep their raw output (the home's private output store), as kuro run --keep-output",
    )


# ---- reading the file


def read_lines(text: str, source: str) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    """``(line number, object)`` for every non-blank line of ``text`` that is a JSON object, and the bad lines.

    A bad line is ``(line number, "FILE:LINE: what is wrong")``.
    """
    from kuro_wasm.model.receipt import from_json

    out: list[tuple[int, dict[str, Any]]] = []
    bad: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = from_json(line)
        except ModelError as exc:  # JSON, but a key given twice (env names included): which one was meant?
            bad.append((number, f"{source}:{number}: {exc}"))
            continue
        except ValueError as exc:
            bad.append((number, f"{source}:{number}: not JSON: {exc}"))
            continue
        if not isinstance(value, dict):
            bad.append((number, f"{source}:{number}: a line is a JSON object, got {type(value).__name__}"))
            continue
        out.append((number, value))
    return out, bad


def _refuse(ctx: Context, bad: list[tuple[int, str]], source: str) -> _BadLines:
    """Print each bad line (up to :data:`MAX_REPORTED`) on stderr; the error that ends the command."""
    ordered = [text for _, text in sorted(bad)]
    for text in ordered[:MAX_REPORTED]:
        ctx.note(f"kuro: {' '.join(text.split())}")
    if len(ordered) > MAX_REPORTED:
        ctx.note(f"kuro: … and {len(ordered) - MAX_REPORTED} more bad lines")
    return _BadLines(f"{len(ordered)} bad line(s) in {source}; nothing was run")


class _StdinClosed(UsageError):
    reference = "stdin-closed"


def _read(spec: str) -> tuple[str, str]:
    """The file's text and the name it is reported by; stdin (``-``) is read as bytes and checked as a file is."""
    if spec == "-":
        import sys

        source = "<stdin>"
        try:
            data = sys.stdin.buffer.read()
        except (AttributeError, OSError, ValueError):  # no fd 0 (``<&-``): Python's sys.stdin is None
            raise _StdinClosed("-: standard input is closed, there is no batch to read") from None
    else:
        source = spec
        try:
            data = Path(spec).read_bytes()
        except IsADirectoryError:
            raise UsageError(f"{spec}: is a directory, not a JSON-lines file") from None
    try:
        return data.decode("utf-8"), source
    except UnicodeDecodeError as exc:
        raise _BadLines(f"{source}: not UTF-8 text (byte {exc.start}); nothing was run") from None


class _Roots:
    """fs names → roots, resolved once, as the batch starts (an op id's recorded root wins, so a rerun replays).

    ``ledger`` is the home's ledger if it exists (else no op id is recorded yet).
    """

    def __init__(self, ctx: Context, ledger: Any) -> None:
        from kuro_wasm.cli.refs import Refs

        self._refs = Refs(refs_dir(ctx.home))
        self._ctx = ctx
        self._ledger = ledger
        self._names: dict[str, str | None] = {}

    def default(self) -> str:
        from kuro_fs.fs import Fs
        from kuro_wasm.cli.refs import DEFAULT_NAME

        root = self._name(DEFAULT_NAME)
        return root if root is not None else str(Fs.empty(self._ctx.store).root)

    def _name(self, name: str) -> str | None:
        if name not in self._names:
            self._names[name] = self._refs.get(name)
        return self._names[name]

    def resolve(self, line: dict[str, Any]) -> dict[str, Any]:
        from kuro_fs.cid import parse
        from kuro_fs.errors import InvalidCID

        spec = line.get("fs")
        named = spec is None
        if isinstance(spec, str):
            try:
                parse(spec)
            except InvalidCID:
                if looks_like_cid(spec):
                    raise ModelError(f"fs {spec!r} is not a valid CID", reason="invalid-fs-root") from None
                root = self._name(spec)
                if root is None:
                    raise ModelError(f"no fs named {spec!r} (nor a CID)", reason="invalid-fs-root") from None
                line = {**line, "fs": root}
                named = True
        if named and self._ledger is not None and isinstance(line.get("op_id"), str):
            recorded = self._ledger.result(line["op_id"]).get("kuro/fs-root-cid")
            if isinstance(recorded, str):
                line = {**line, "fs": recorded}
        return line


def _invocations(
    ctx: Context, lines: list[tuple[int, dict[str, Any]]], source: str, ledger: Any
) -> tuple[list[Invocation], list[tuple[int, str]]]:
    from kuro_wasm.model.invocation import invocation

    roots = _Roots(ctx, ledger)
    default = roots.default()
    session_id = f"batch-{uuid.uuid4().hex[:12]}"
    out: list[Invocation] = []
    bad: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for number, line in lines:
        try:
            inv = invocation(roots.resolve(line), session_id=session_id, default_fs=default)
        except ModelError as exc:
            bad.append((number, f"{source}:{number}: {exc} [{exc.reason}]"))
            continue
        if inv.op_id is not None:
            first = seen.setdefault(inv.op_id, number)
            if first != number:
                bad.append((number, f"{source}:{number}: op_id {inv.op_id!r} is already line {first}'s"))
                continue
        out.append(inv)
    return out, bad


# ---- running


def _worker_store(ctx: Context) -> Any:
    from kuro_wasm.batch.stores import GatewayStore, SharedStore

    if ctx.gateway is not None:
        return GatewayStore(ctx.gateway)
    return SharedStore(str(Path(ctx.store.root).resolve()))


class _Output:
    """Prints each finished line (completion order), or with ``--json`` each input line's object in input order."""

    def __init__(self, ctx: Context, numbers: list[int], json_output: bool) -> None:
        self.ctx = ctx
        self.numbers = numbers
        self.json = json_output
        self.ready: dict[int, str] = {}
        self.next = 0
        self.failed = 0
        self.done = 0
        self.unstored = 0

    def finished(self, index: int, value: Mapping[str, Any], cid: str) -> None:
        self.done += 1
        if value.get("kuro/exit-code") != 0:
            self.failed += 1
        if self.json:
            from kuro_wasm.model.receipt import to_json

            self.ready[index] = to_json(value)
            self._flush()
        else:
            outcome = value.get("kuro/outcome") or value.get("kuro/reason") or value.get("kuro/status", "?")
            code = value.get("kuro/exit-code", "-")
            self.ctx.say(f"{self.numbers[index]}\t{outcome}\t{code}\t{cid}")

    def rest(self, not_run: list[int]) -> None:
        """With ``--json``, the batch stopped early: every line not printed yet gets its object now, in order —
        what finished, ``not-run`` for a line that never ran, ``unknown`` for one still out when it stopped."""
        if not self.json:
            return
        never = set(not_run)
        for index in range(self.next, len(self.numbers)):
            if index not in self.ready:
                status = "not-run" if index in never else "unknown"
                self.ready[index] = json.dumps({"kuro/status": status, "kuro/line": self.numbers[index]})
        self._flush()

    def _flush(self) -> None:
        while self.next in self.ready:
            self.ctx.say(self.ready.pop(self.next))
            self.next += 1


def batch(args: argparse.Namespace, ctx: Context) -> int:
    """``kuro batch``: see the module docstring."""
    from kuro_wasm.batch import run_many
    from kuro_wasm.batch.driver import dask_available
    from kuro_wasm.cli.progress import Progress
    from kuro_wasm.cli.run import EXIT_NOT_STORED, _store_or_say
    from kuro_wasm.ledger.ledger import Ledger
    from kuro_wasm.model.summary import is_status_answer

    if args.local is not None and not 1 <= args.local <= MAX_WORKERS:
        raise UsageError(f"--local takes 1 to {MAX_WORKERS} workers, got {args.local}")
    if args.chunk_size is not None and args.chunk_size < 1:
        raise UsageError(f"--chunk-size must be at least 1, got {args.chunk_size}")
    if args.cluster is not None and not dask_available():
        raise UsageError("--cluster needs Dask: pip install 'kuro-wasm[dask]' (or use --local N)")
    text, source = _read(args.file)
    lines, bad = read_lines(text, source)
    if not lines and not bad:
        raise UsageError(f"{source}: no invocation in the file")
    with ExitStack() as stack:
        existing = ledger_path(ctx.home).exists()
        ledger = stack.enter_context(Ledger(home=ctx.home, store=ctx.store)) if existing else None
        invocations, more = _invocations(ctx, lines, source, ledger)
        if bad or more:
            raise _refuse(ctx, bad + more, source)
        if ledger is None and any(inv.op_id is not None for inv in invocations):
            ledger = stack.enter_context(Ledger(home=ctx.home, store=ctx.store))
        numbers = [number for number, _ in lines]
        del text, lines  # the invocations are what the batch needs: the file and its parsed lines go now
        out = _Output(ctx, numbers, args.json)
        try:
            the_batch = run_many(
                invocations,
                store=ctx.store,
                cluster=args.cluster,
                workers=args.local,
                ledger=ledger,
                worker_store=_worker_store(ctx),
                home=ctx.home,
                worker_home=args.worker_home,
                chunk_size=args.chunk_size,
                keep_output=args.keep_output,
            )
        except GatewayError as exc:  # the probe: nothing claimed, no worker started
            raise _GatewayUnusable(f"{exc}; nothing was run", exc.reference) from exc
        total = len(invocations)

        def line(done: int, elapsed: float) -> str:
            rate = f" · {done / elapsed:,.0f}/s" if elapsed > 0 else ""
            return f"batch {done}/{total} done · {the_batch.running} running · {out.failed} failed{rate}"

        progress = Progress("batch", None, stream=ctx.err, line=line)
        with the_batch, _signals_cancel(the_batch) as signals, progress:  # the bar (and its ticker) ends first
            progress.start_ticking(TICK_S)  # the rate and the running count move while guests run
            try:
                for completed in the_batch:
                    with signals.storing():  # a second signal now stops waiting once this receipt is stored, shown
                        value = completed.value
                        known = value.get("kuro/receipt-cid")
                        stdin = completed.invocation.stdin
                        if is_status_answer(value):  # the ledger says running or unknown: no receipt to store
                            cid = None
                        elif isinstance(known, str):
                            cid = known
                        else:
                            cid = _store_or_say(ctx, value, stdin=stdin)
                            if cid is None:  # it ran: shown all the same, and the exit status says it is not kept
                                out.unstored += 1
                        out.finished(completed.index, value, cid or "-")
                        progress.advance(1)
            except KeyboardInterrupt as exc:  # a second signal: stop waiting (what is still out is unknown)
                the_batch.stop()  # wherever it landed: nothing drains after the handlers are restored
                progress.close()
                out.rest(the_batch.not_run)
                _say_not_run(ctx, the_batch.not_run, numbers, out.done)
                _say_unstored(ctx, out.unstored)
                return interrupted_status(exc)
            except Exception:
                progress.close()
                out.rest(the_batch.not_run)
                if the_batch.not_run:
                    _say_not_run(ctx, the_batch.not_run, numbers, out.done, why="stopped")
                _say_unstored(ctx, out.unstored)
                raise
        progress.close()
        if the_batch.cancelled and RECEIVED:
            out.rest(the_batch.not_run)
            _say_not_run(ctx, the_batch.not_run, numbers, out.done)
            _say_unstored(ctx, out.unstored)
            return 128 + RECEIVED[-1]
    ctx.note(f"kuro: batch: {out.done} invocation(s), {out.failed} did not exit 0")
    if out.unstored:
        _say_unstored(ctx, out.unstored)
        return EXIT_NOT_STORED
    return 0 if out.failed == 0 else 1


class _Signals:
    """What a second signal does now: raise :class:`Interrupted`, or — while the command stores a receipt
    in the home and shows it (:meth:`storing`) — wait until that is done, then raise."""

    def __init__(self) -> None:
        self._storing = False
        self._held: int | None = None

    def second(self, signum: int) -> None:
        if self._storing:
            self._held = signum
            return
        raise Interrupted(signum)

    @contextmanager
    def storing(self) -> Iterator[None]:
        self._storing = True
        try:
            yield
        finally:
            self._storing = False
        held, self._held = self._held, None
        if held is not None:
            raise Interrupted(held)


@contextmanager
def _signals_cancel(the_batch: Any) -> Iterator[_Signals]:
    """While the batch runs, a first SIGINT/SIGTERM/SIGHUP cancels it (it drains and stores what finished);
    a second raises :class:`Interrupted` (stop waiting). Nothing is interrupted halfway through storing a
    receipt: not in the ledger (the driver stores what it settles first), not in the home (:meth:`_Signals.storing`).
    """
    signals = _Signals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return

    def on_signal(signum: int, _frame: Any) -> None:
        if the_batch.cancelled:
            signals.second(signum)
            return
        RECEIVED.append(signum)
        the_batch.cancel()

    previous = {signum: signal.signal(signum, on_signal) for signum in _SIGNALS}
    try:
        yield signals
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _say_unstored(ctx: Context, count: int) -> None:
    """Say how many receipts (each shown above, with ``-`` for its CID) the home could not take."""
    if count:
        where = f"could not be stored in {ctx.home} (read-only or full?)"
        ctx.note(f"kuro: error: {count} receipt(s) {where}; each is shown above [receipt-not-stored]")


def _say_not_run(ctx: Context, not_run: list[int], numbers: list[int], done: int, why: str = "interrupted") -> None:
    shown = ", ".join(str(numbers[i]) for i in sorted(not_run)[:50])
    more = " …" if len(not_run) > 50 else ""
    ctx.note(f"kuro: batch {why}: {done} finished and stored; {len(not_run)} did not run (lines {shown}{more})")
