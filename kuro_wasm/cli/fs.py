"""``kuro fs …``, ``kuro car …`` and ``kuro cid``: a named kuro.fs root from the shell.

## The one decision
Every ``kuro fs`` command works on a *named* root (``--name``, default
``main``) kept by :mod:`kuro_wasm.cli.refs`: read commands resolve the name to its
root CID, write commands compute the new :class:`kuro_fs.fs.Fs` value and then
move the name with a compare-and-swap (``expected`` = the root they started
from) and a history line naming the op. An op kuro.fs refuses (``not-found``,
``directory-not-empty`` …) is a denial value: printed as one line, exit 1, and
the name does not move.

Long work (``fs put`` of a big tree, ``car export``/``import``) shows a progress
bar on stderr when it is a terminal (:mod:`kuro_wasm.cli.progress`), counted from
the block traffic.

## Effects
The home's block store and refs; local files; stdout.

## Not done here
No recursive ``rm`` (kuro.fs refuses non-empty directories on purpose), no
symlinks, no file modes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kuro_fs.atomic import write_all
from kuro_fs.cid import cid_for

if TYPE_CHECKING:
    from kuro_wasm.cli.progress import Progress
    from kuro_wasm.cli.refs import Refs
from kuro_fs.home import refs_dir
from kuro_wasm.cli.context import Context, Failed, NotFound, UsageError

__all__ = ["add_car_parsers", "add_fs_parsers", "cid_files"]

Leaf = Callable[..., argparse.ArgumentParser]


def add_fs_parsers(group: Any, leaf: Leaf) -> None:
    """The ``kuro fs`` subcommands."""
    from kuro_wasm.cli.refs import DEFAULT_NAME

    def fs_leaf(name: str, help_text: str, handler: Callable[[argparse.Namespace, Context], int]) -> Any:

        p = leaf(group, name, help_text, handler)
        p.add_argument(
            "--name", "-n", default=DEFAULT_NAME, metavar="NAME", help=f"which named fs root (default {DEFAULT_NAME!r})"
        )
        return p

    p = fs_leaf("put", "import a local file or directory tree into the fs at DEST", _put)
    p.add_argument("local", metavar="LOCAL", help="a local file or directory")
    p.add_argument("dest", metavar="DEST", nargs="?", help="the fs path (default: LOCAL's name)")
    p = fs_leaf("get", "copy a file or directory out of the fs", _get)
    p.add_argument("path", metavar="PATH", help="the fs path")
    p.add_argument("local", metavar="LOCAL", nargs="?", help="where to write (default: PATH's name; `-` = stdout)")
    _budget_options(p, entries=True)
    p = fs_leaf("ls", "list a directory (directories end in /)", _ls)
    p.add_argument("path", metavar="PATH", nargs="?", default=".", help="the fs path (default: the root)")
    p.add_argument("--long", "-l", action="store_true", help="also show each entry's size and CID")
    p = fs_leaf("cat", "write a file's bytes to stdout", _cat)
    p.add_argument("path", metavar="PATH", help="the fs path")
    _budget_options(p, entries=False)
    p = fs_leaf("rm", "remove a file or an empty directory", _rm)
    p.add_argument("path", metavar="PATH", help="the fs path")
    p = fs_leaf("mkdir", "create a directory and its missing parents (an existing one is kept as is)", _mkdir)
    p.add_argument("path", metavar="PATH", help="the fs path")
    p = fs_leaf("mv", "move or rename a file or directory", _mv)
    p.add_argument("src", metavar="SRC", help="the fs path to move")
    p.add_argument("dst", metavar="DST", help="the new fs path")
    fs_leaf("log", "the history of the named root: every root it held, newest last (* = current)", _log)
    p = fs_leaf("checkout", "move the named root back to an earlier root (by history number or CID)", _checkout)
    p.add_argument("target", metavar="CID|N", help="a root CID, or a history number from `kuro fs log`")


def _budget_options(p: argparse.ArgumentParser, *, entries: bool) -> None:
    """``--max-bytes`` (and for ``get``, ``--max-entries``): the kuro.fs budget, defaults as :class:`Budget`."""
    from kuro_fs.fs import Budget

    default = Budget()
    flags = [
        ("--max-bytes", default.bytes, "refuse, before writing a byte, files that together claim more than N bytes")
    ]
    if entries:
        flags.append(("--max-entries", default.entries, "refuse a directory whose walk lists more than N entries"))
    for flag, value, text in flags:
        p.add_argument(flag, metavar="N", type=_count, default=value, help=f"{text} (default {value})")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def add_car_parsers(group: Any, leaf: Leaf) -> None:
    """The ``kuro car`` subcommands."""
    from kuro_wasm.cli.refs import DEFAULT_NAME

    p = leaf(group, "export", "write a DAG as a CARv1 file (blocks depth-first from the root)", _car_export)
    p.add_argument("file", metavar="FILE", help="the .car file to write")
    p.add_argument(
        "root",
        metavar="ROOT",
        nargs="?",
        default=DEFAULT_NAME,
        help=f"a root CID or a named fs (default {DEFAULT_NAME!r})",
    )
    p = leaf(group, "import", "verify and store every block of a CARv1 file; prints its roots", _car_import)
    p.add_argument("file", metavar="FILE", help="the .car file to read")
    p.add_argument("--name", "-n", metavar="NAME", help="also point this named fs at the CAR's root")


# ---- helpers


def _refs(ctx: Context) -> Refs:
    from kuro_wasm.cli.refs import Refs

    return Refs(refs_dir(ctx.home))


def _open(ctx: Context, name: str) -> tuple[Any, str | None]:
    """(the Fs value for ``name``, the root it had or None if the name is new)."""
    from kuro_fs.fs import Fs

    root = _refs(ctx).get(name)
    if root is None:
        return Fs.empty(ctx.store), None
    return Fs(ctx.store, root), root


def _check(result: Any, what: str) -> Any:
    """The op's value, or a one-line refusal (exit 1) if kuro.fs denied it."""
    if result.ok:
        return result.value
    receipt = result.receipt
    reason = receipt.get("kuro.fs/reason", "denied")
    budget = receipt.get("kuro.fs/budget")
    if reason == "over-budget" and isinstance(budget, dict):
        raise _Refused(f"{what}: over-budget ({_over(receipt.get('kuro.fs/size'), budget)})")
    extra = receipt.get("kuro.fs/missing") or receipt.get("kuro.fs/cid")
    if reason == "block-missing" and isinstance(extra, str):
        extra = f"{extra}: {_why_missing(result.fs.store, extra)}"
    raise _Refused(f"{what}: {reason}" + (f" ({extra})" if extra else ""))


def _why_missing(store: Any, cid: str) -> str:
    """Which of kuro.fs's ``block-missing`` cases it is (absent, corrupt, malformed), asked of the local
    store only (a gateway in front of it is not asked again)."""
    from kuro_fs.errors import BlockStoreError, CorruptBlock

    local = getattr(store, "cache", store)
    try:
        block = local.get(cid)
    except CorruptBlock:
        return "the store holds it, but its bytes do not hash to this CID"
    except (BlockStoreError, ValueError) as exc:
        return f"the store cannot read it: {exc}"
    if block is None:
        return "not in the store" + (" nor at the gateway" if local is not store else "")
    return "the store holds it, but it is not the block the DAG needs there (malformed)"


def _over(size: object, budget: dict[str, int]) -> str:
    """What an over-budget refusal names: the limit passed, and the flag that raises it."""
    if "entries" in budget:
        return f"the walk lists more than {budget['entries']} entries; --max-entries raises the limit"
    claimed = f"{size} bytes" if isinstance(size, int) else "more bytes"
    return f"{claimed} claimed, budget {budget.get('bytes')} bytes; --max-bytes raises it"


class _Refused(Failed):
    """kuro.fs refused an op (a denial value, shown as one line, exit 1)."""

    reference = "fs-denied"


def _commit(ctx: Context, name: str, before: str | None, after: Any, note: str) -> None:
    root = str(after.root)
    if root == before:
        return
    _refs(ctx).set(name, root, note, expected=before)
    ctx.note(f"fs {name} → {root}")


def _progress(ctx: Context, label: str, total: int | None) -> Progress:
    from kuro_wasm.cli.progress import Progress

    return Progress(label, total, stream=ctx.err)


def _tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    total = 0
    for folder, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += (Path(folder) / f).stat().st_size
            except OSError:
                pass
    return total


# ---- fs commands


def _put(args: argparse.Namespace, ctx: Context) -> int:
    from kuro_fs.importer import import_path
    from kuro_fs.paths import clean_path, join_path
    from kuro_wasm.cli.progress import ProgressStore

    local = Path(args.local)
    if not local.exists():
        raise FileNotFoundError(2, "No such file or directory", str(local))
    dest = args.dest or local.resolve().name
    fs, before = _open(ctx, args.name)
    # Validate the destination first (bad path, a file in the way, a directory there):
    # kuro.fs decides, and a refused put imports nothing. Fs.link refuses what Fs.write
    # refuses about the path, so a write of nothing answers for it — but for a tree, a
    # DEST ending in '/' (which only a directory may take) is the same path without it.
    parts = clean_path(dest)
    probe = join_path(parts) if local.is_dir() and parts else dest
    _check(fs.write(probe, b""), f"put {dest}")
    with _progress(ctx, f"import {local.name}", _tree_size(local)) as bar:
        cid = import_path(ProgressStore(ctx.store, bar), local)
    linked = _new(fs.link(dest, cid), f"put {dest}")
    _commit(ctx, args.name, before, linked, f"put {local.name} → {dest} ({cid})")
    ctx.say(f"{cid}  {dest}")
    return 0


def _new(result: Any, what: str) -> Any:
    _check(result, what)
    return result.fs


def _get(args: argparse.Namespace, ctx: Context) -> int:
    from kuro_fs.paths import escape_name, has_control

    fs, _ = _open(ctx, args.name)
    fs = fs.with_budget(entries=args.max_entries, bytes=args.max_bytes)
    stat = _check(fs.stat(args.path), f"get {args.path}")
    target = args.local or Path(args.path).name or args.name
    if stat["kind"] != "dir":
        _prefetch(ctx, stat, args.max_bytes)
        pieces = _check(fs.stream(args.path), f"get {args.path}")
        if target == "-":
            _stream(ctx, pieces, None)
        else:
            _write_local(Path(target), pieces)
            ctx.note(f"wrote {target}")
        return 0
    if target == "-":
        raise UsageError(f"{args.path} is a directory; give a local directory to copy it into")
    items = _check(fs.walk(args.path), f"get {args.path}")
    # Every byte the copy would write is known from the listing: a DAG that shares one big file
    # under many paths is refused here, before a directory is made or a byte written.
    total = sum(item["size"] for item in items if item["kind"] != "dir")
    if total > args.max_bytes:
        raise _Refused(f"get {args.path}: over-budget ({_over(total, {'bytes': args.max_bytes})})")
    # A name stored before kuro.fs refused control characters would make a local file whose name
    # lies (a newline, a terminal escape): refused, shown escaped, before anything is written.
    odd = next((item["path"] for item in items if has_control(item["path"])), None)
    if odd is not None:
        raise _Refused(f"get {args.path}: bad-path ({escape_name(odd)} has a control character; nothing written)")
    base = Path(target)
    base.mkdir(parents=True, exist_ok=True)
    prefix = len([p for p in args.path.split("/") if p not in ("", ".")])
    for item in items:
        local = base.joinpath(*item["path"].split("/")[prefix:])
        if item["kind"] == "dir":
            local.mkdir(parents=True, exist_ok=True)
        else:
            _prefetch(ctx, item, args.max_bytes)
            _write_local(local, _check(fs.stream(item["path"]), f"get {item['path']}"))
    ctx.note(f"wrote {base}/")
    return 0


def _prefetch(ctx: Context, entry: Mapping[str, Any], budget: int) -> None:
    """Through a gateway, a file's whole DAG in one request instead of one per block — only when its
    claimed size is within the read budget (a file the budget refuses is not fetched first)."""
    if entry.get("kind") != "dir" and isinstance(entry.get("size"), int) and entry["size"] <= budget:
        ctx.prefetch(entry["cid"])


def _stream(ctx: Context, pieces: Iterable[bytes | memoryview], handle: Any) -> None:
    """Write a file's pieces (:meth:`kuro_fs.fs.Fs.stream`) as they are read: never the whole file in memory."""
    if handle is None:
        ctx.out.flush()
        handle = getattr(ctx.out, "buffer", None)
    for piece in pieces:
        if handle is None:
            ctx.out.write(bytes(piece).decode("utf-8", "replace"))
        else:
            write_all(handle, piece)
    if handle is not None:
        handle.flush()


def _write_local(target: Path, pieces: Iterable[bytes | memoryview]) -> None:
    """Write a file's pieces to ``target`` as they are read, whole or not at all: a copy that fails part-way
    (a leaf missing or corrupt) leaves what was at ``target`` before, never a torn file under its name.
    A symlink (``/dev/stdout``), a FIFO or a device is written through, in place, as ``cp`` would
    (:func:`kuro_fs.atomic.write_target`).
    """
    from kuro_fs.atomic import write_target

    write_target(target, pieces, mode=0o666, sync=False)  # as open() makes it: the umask decides


def _ls(args: argparse.Namespace, ctx: Context) -> int:
    from kuro_fs.paths import escape_name

    fs, _ = _open(ctx, args.name)
    for entry in _check(fs.ls(args.path), f"ls {args.path}"):
        shown = escape_name(entry["name"]) + ("/" if entry["kind"] == "dir" else "")
        ctx.say(f"{entry['size']:>12}  {entry['cid']}  {shown}" if args.long else shown)
    return 0


def _cat(args: argparse.Namespace, ctx: Context) -> int:
    fs, _ = _open(ctx, args.name)
    fs = fs.with_budget(bytes=args.max_bytes)
    _prefetch(ctx, _check(fs.stat(args.path), f"cat {args.path}"), args.max_bytes)
    _stream(ctx, _check(fs.stream(args.path), f"cat {args.path}"), None)
    return 0


def _rm(args: argparse.Namespace, ctx: Context) -> int:
    fs, before = _open(ctx, args.name)
    _commit(ctx, args.name, before, _new(fs.rm(args.path), f"rm {args.path}"), f"rm {args.path}")
    return 0


def _mkdir(args: argparse.Namespace, ctx: Context) -> int:
    fs, before = _open(ctx, args.name)
    _commit(ctx, args.name, before, _new(fs.mkdir(args.path), f"mkdir {args.path}"), f"mkdir {args.path}")
    return 0


def _mv(args: argparse.Namespace, ctx: Context) -> int:
    fs, before = _open(ctx, args.name)
    _commit(ctx, args.name, before, _new(fs.mv(args.src, args.dst), f"mv {args.src}"), f"mv {args.src} {args.dst}")
    return 0


def _log(args: argparse.Namespace, ctx: Context) -> int:
    from kuro_fs.errors import InvalidCID
    from kuro_fs.paths import escape_name

    refs = _refs(ctx)
    entries = refs.log(args.name)
    if not entries:
        raise NotFound(f"fs {args.name!r} has no history yet (write to it first, e.g. `kuro fs put FILE`)")
    try:
        current = refs.get(args.name)
    except InvalidCID as exc:  # the history is still whole: show it, and how to point the name back
        current = None
        ctx.note(f"fs {args.name}: its ref file is damaged ({exc}); `kuro fs checkout N` points it back")
    for entry in entries:
        mark = "*" if entry.root == current and entry is entries[-1] else " "
        # A note names local files (a put's source): shown escaped, as every name is, so it cannot act on the terminal.
        ctx.say(f"{mark} {entry.seq:>4}  {entry.root}  {escape_name(entry.at)}  {escape_name(entry.note)}")
    return 0


def _checkout(args: argparse.Namespace, ctx: Context) -> int:
    from kuro_fs.cid import parse
    from kuro_fs.fsdir import decode_dir_block
    from kuro_wasm.cli.refs import RefError, resolve_target

    refs = _refs(ctx)
    entries = refs.log(args.name)
    root = resolve_target(entries, args.target)
    if parse(root).codec != "dag-cbor":  # a raw block may hold a directory's bytes: still no fs root
        raise RefError(f"{root} is not a kuro.fs directory (a {parse(root).codec} CID; an fs root is dag-cbor)")
    block = ctx.store.get(root)
    if block is None:
        raise NotFound(f"root {root} is not in the block store of {ctx.home}")
    decode_dir_block(block)  # raises if it is not a kuro.fs directory (flat or sharded)
    # No compare-and-swap: a checkout names its root outright (and so also repairs a damaged ref file).
    refs.set(args.name, root, f"checkout {args.target}", expected=True)
    ctx.note(f"fs {args.name} → {root}")
    return 0


# ---- car and cid


def _root_for(ctx: Context, spec: str) -> str:
    from kuro_fs.cid import parse
    from kuro_fs.errors import InvalidCID

    try:
        return str(parse(spec))
    except InvalidCID:
        root = _refs(ctx).get(spec)
        if root is None:
            raise NotFound(f"{spec!r} is neither a CID nor a named fs") from None
        return root


def _car_export(args: argparse.Namespace, ctx: Context) -> int:
    from kuro_fs.car import export_car
    from kuro_wasm.cli.progress import ProgressStore

    root = _root_for(ctx, args.root)
    folder = Path(args.file).absolute().parent
    if not folder.is_dir():  # name the user's path, not the temporary file the export writes first
        raise FileNotFoundError(2, "No such directory", str(folder))
    ctx.prefetch(root, "all")  # through a gateway: the whole DAG in one request
    with _progress(ctx, f"export {Path(args.file).name}", None) as bar:
        export_car(ProgressStore(ctx.store, bar, count_put=False, count_get=True), root, args.file)
    if _is_stdout(ctx, args.file):  # (`car export /dev/stdout > x.car`: a line there would write over the CAR)
        ctx.note(f"{root}  {args.file}")
    else:
        ctx.say(f"{root}  {args.file}")
    return 0


def _is_stdout(ctx: Context, path: str) -> bool:
    """True if ``path`` names the file ``ctx.out`` writes to (``/dev/stdout``, ``/proc/self/fd/1``)."""
    try:
        mine, theirs = os.stat(path), os.fstat(ctx.out.fileno())
    except (AttributeError, OSError, ValueError):  # (io.UnsupportedOperation is an OSError and a ValueError)
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def _car_import(args: argparse.Namespace, ctx: Context) -> int:
    from kuro_fs.car import import_car
    from kuro_wasm.cli.progress import ProgressStore

    path = Path(args.file)
    with _progress(ctx, f"import {path.name}", path.stat().st_size) as bar:
        roots = import_car(ProgressStore(ctx.store, bar), path)
    for root in roots:
        ctx.say(root)
    if args.name is not None:
        if len(roots) != 1:
            raise UsageError(f"--name needs a CAR with one root; this one has {len(roots)}")
        if not _is_fs_dir(ctx.store, roots[0]):
            raise UsageError(
                f"--name needs a CAR whose root is a kuro.fs directory; {roots[0]} is not one "
                "(its blocks are imported; `kuro car export FILE NAME` of a named fs makes such a CAR)"
            )
        refs = _refs(ctx)
        refs.set(args.name, roots[0], f"car import {path.name}", expected=refs.get(args.name))
        ctx.note(f"fs {args.name} → {roots[0]}")
    return 0


def _is_fs_dir(store: Any, root: str) -> bool:
    """True if ``root`` names a kuro.fs directory block held by ``store`` (what an fs name may point at)."""
    from kuro_fs.cid import parse
    from kuro_fs.fsdir import decode_dir_block

    if parse(root).codec != "dag-cbor":
        return False
    block = store.get(root)
    if block is None:
        return False
    try:
        decode_dir_block(block)
    except ValueError:
        return False
    return True


class _NullStore:
    """A BlockStore that keeps nothing: enough to *name* a file without storing it."""

    def put(self, data: bytes, codec: str = "raw") -> str:

        return cid_for(bytes(data), codec)

    def get(self, cid: str) -> bytes | None:
        return None

    def has(self, cid: str) -> bool:
        return False


def cid_files(args: argparse.Namespace, ctx: Context) -> int:
    """``kuro cid FILE...``: the UnixFS CID (as ``fs put``/IPFS name it), or ``--raw``."""
    from kuro_fs.cid import cid_from_digest
    from kuro_fs.importer import import_path
    from kuro_wasm.cli.progress import ProgressStore

    for name in args.files:
        path = Path(name)
        if args.raw:
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                while block := handle.read(1 << 20):
                    digest.update(block)
            cid = cid_from_digest(digest.digest(), "raw")
        else:
            if not path.exists():
                raise FileNotFoundError(2, "No such file or directory", name)
            with _progress(ctx, f"cid {path.name}", _tree_size(path)) as bar:
                cid = import_path(ProgressStore(_NullStore(), bar), path)
        ctx.say(f"{cid}  {name}")
    return 0
