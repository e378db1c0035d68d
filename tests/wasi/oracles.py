"""What each guests/c program must do, written in Python over kuro.fs: the specification the runners are held to.

An oracle takes a :class:`~wasikit.WasiCase` and returns the :class:`~wasikit.WasiOutcome` the program
must produce: exit code, stdout, stderr and the tree it leaves. The tree is modelled with a
:class:`kuro_fs.overlay.Overlay` over the case's root imported into an ``Fs`` — the same overlay a
kuro WASI binding will use — so the differential tests hold *both* the overlay's POSIX choices and
every runner (wasmtime's built-in WASI first) to one specification, byte for byte, error texts
included (wasi-libc's ``strerror``, from ``wasi_errno.json``).

What the C library adds on top of the WASI calls is modelled here too: wasi-libc maps a path onto
the ``/`` preopen by stripping leading slashes; a directory opened for reading fails its first read
with ``EBADF``; opening one for writing is ``EISDIR``; ``O_APPEND`` writes at the end.

Imported by the tests in this folder as ``oracles``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from wasikit import WasiCase, WasiOutcome

from kuro_fs.blocks import MemoryBlockStore
from kuro_fs.fs import Fs
from kuro_fs.importer import import_path
from kuro_fs.overlay import Errno, Handle, Overlay

_TABLE = json.loads((Path(__file__).parent / "wasi_errno.json").read_text(encoding="utf-8"))
ERRNO: dict[str, tuple[int, str]] = {k: (v[0], v[1]) for k, v in _TABLE.items() if not k.startswith("_")}


def strerror(errno: Errno) -> str:
    return ERRNO[errno.value][1]


class Exit(Exception):
    """The program called exit(code) (the oracle stops where the program would)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Trapped(Exception):
    """The program trapped (abort()): the run ends with no exit code, ``message`` its cause."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


#: What wasmtime's trap says of C's abort() (wasi-libc's abort is ``unreachable``).
ABORT = "wasm trap: wasm `unreachable` instruction executed"


class Guest:
    """The world one run sees: a tree (an Overlay), stdin, and the two output streams."""

    def __init__(self, case: WasiCase) -> None:
        self.store = MemoryBlockStore()
        root = import_path(self.store, case.root, workers=1) if case.root is not None else Fs.empty(self.store).root
        self.ov = Overlay(Fs(self.store, root))
        self.stdin = case.stdin
        self.out = bytearray()
        self.err = bytearray()
        self.has_root = case.root is not None

    def print(self, text: str | bytes) -> None:
        self.out += text.encode("utf-8") if isinstance(text, str) else text

    def eprint(self, text: str) -> None:
        self.err += text.encode("utf-8")

    def take_stdin(self) -> bytes:
        data, self.stdin = self.stdin, b""
        return data

    # ---- what wasi-libc does with a path and a file descriptor

    @staticmethod
    def rel(path: str) -> str:
        """The path wasi-libc hands the WASI call: relative to the ``/`` preopen."""
        if path.startswith("/"):
            return path.lstrip("/") or "."
        return path

    def open(
        self, path: str, *, write: bool = False, create: bool = False, truncate: bool = False, exclusive: bool = False
    ) -> Handle | Errno:
        """``open(2)``: a directory may be opened for reading only."""
        if path == "":
            return Errno.NOENT
        opened = self.ov.open(self.rel(path), create=create, truncate=truncate, exclusive=exclusive)
        if isinstance(opened, Handle) and write and self.is_dir(opened):
            self.ov.close(opened)
            return Errno.ISDIR
        return opened

    def is_dir(self, handle: Handle) -> bool:
        stat = self.ov.stat(handle)
        return not isinstance(stat, Errno) and stat.kind == "dir"

    def read_all(self, handle: Handle) -> bytes | Errno:
        """Everything from offset 0 (``read`` until 0): a directory cannot be read (``EBADF``)."""
        if self.is_dir(handle):
            return Errno.BADF
        out = bytearray()
        while True:
            chunk = self.ov.read(handle, len(out), 65536)
            if isinstance(chunk, Errno):
                return chunk
            if not chunk:
                return bytes(out)
            out += chunk

    def size(self, handle: Handle) -> int:
        stat = self.ov.stat(handle)
        assert not isinstance(stat, Errno)
        return stat.size

    def outcome(self, code: int | None, trap: str | None = None) -> WasiOutcome:
        result = self.ov.commit()
        assert result.ok, result.denial
        fs = result.fs
        files: dict[str, bytes | None] = {}
        if self.has_root:
            walk = fs.walk()
            assert walk.ok
            for entry in walk.value:
                files[entry["path"]] = fs.read(entry["path"]).value if entry["kind"] == "file" else None
        return WasiOutcome(code, bytes(self.out), bytes(self.err), fs.root if self.has_root else None, files, trap)


def run(case: WasiCase, body: Callable[[Guest, list[str]], int]) -> WasiOutcome:
    guest = Guest(case)
    try:
        code = body(guest, list(case.args))
    except Exit as done:
        code = done.code
    except Trapped as trapped:  # a real directory keeps every write made before the trap
        return guest.outcome(None, trapped.message)
    return guest.outcome(code)


def c_escaped(data: bytes) -> str:
    out = []
    for byte in data:
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\x{byte:02x}")
    return '"' + "".join(out) + '"'


def strtoll_prefix(text: bytes) -> int:
    """C ``strtoll(s, NULL, 10)``: leading space, sign, digits; clamped to 64 bits; 0 if none."""
    match = re.match(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)", text)
    if match is None:
        return 0
    return max(-(2**63), min(2**63 - 1, int(match.group(1))))


def strtoll_whole(text: str) -> int | None:
    """C ``strtoll`` that must consume the whole, non-empty string without overflow (fsops' ``number``)."""
    match = re.fullmatch(r"[ \t\n\v\f\r]*([+-]?[0-9]+)", text)
    if match is None:
        return None
    value = int(match.group(1))
    return value if -(2**63) <= value < 2**63 else None


def c_remainder(a: int, b: int) -> int:
    """C's ``a % b``: the sign follows the dividend."""
    r = abs(a) % b
    return r if a >= 0 else -r


def fnv64(data: bytes) -> int:
    h = 14695981039346656037
    for byte in data:
        h = ((h ^ byte) * 1099511628211) & (2**64 - 1)
    return h


# ---- the programs


def cat(g: Guest, args: list[str]) -> int:
    if not args:
        g.print(g.take_stdin())
        return 0
    status = 0
    for name in args:
        if name == "-":
            g.print(g.take_stdin())
            continue
        opened = g.open(name)
        data = opened if isinstance(opened, Errno) else g.read_all(opened)
        if isinstance(data, Errno):
            g.eprint(f"cat: {name}: {strerror(data)}\n")
            status = 1
        else:
            g.print(data)
    return status


def _wc_counts(data: bytes) -> tuple[int, int, int]:
    return data.count(b"\n"), len(re.findall(rb"[^ \t\n\v\f\r]+", data)), len(data)


def wc(g: Guest, args: list[str]) -> int:
    def show(c: tuple[int, int, int], name: str | None) -> None:
        g.print(f"{c[0]:7d} {c[1]:7d} {c[2]:7d}" + (f" {name}" if name is not None else "") + "\n")

    if not args:
        show(_wc_counts(g.take_stdin()), None)
        return 0
    status, total = 0, (0, 0, 0)
    for name in args:
        opened = g.open(name)
        data = opened if isinstance(opened, Errno) else g.read_all(opened)
        if isinstance(data, Errno):
            g.eprint(f"wc: {name}: {strerror(data)}\n")
            status = 1
            continue
        counts = _wc_counts(data)
        show(counts, name)
        total = (total[0] + counts[0], total[1] + counts[1], total[2] + counts[2])
    if len(args) > 1:
        show(total, "total")
    return status


def ls(g: Guest, args: list[str]) -> int:
    def listing(path: str) -> int:
        opened = g.ov.open(g.rel(path), directory=True) if path else Errno.NOENT
        entries = opened if isinstance(opened, Errno) else g.ov.readdir(opened)
        if isinstance(entries, Errno):
            g.eprint(f"ls: {path}: {strerror(entries)}\n")
            return 1
        g.print(f"{path}:\n")
        subdirs = []
        for entry in entries:
            full = f"{path}/{entry.name}"
            stat = g.ov.stat_path(g.rel(full))
            assert not isinstance(stat, Errno)
            if stat.kind == "dir":
                subdirs.append(full)
                g.print(f"d {entry.name}\n")
            else:
                g.print(f"f {stat.size} {entry.name}\n")
        g.print("\n")
        return max([0, *(listing(full) for full in subdirs)])

    if not args:
        return listing(".")
    return max(listing(path) for path in args)


def sort(g: Guest, args: list[str]) -> int:
    reverse = unique = numeric = False
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        for option in args[i][1:]:
            if option not in "run":
                g.eprint(f"sort: unknown option -{option}\n")
                return 2
            reverse, unique, numeric = reverse or option == "r", unique or option == "u", numeric or option == "n"
        i += 1
    text = b""
    if i == len(args):
        text = g.take_stdin()
    for name in args[i:]:
        if name == "-":
            text += g.take_stdin()
            continue
        opened = g.open(name)
        data = opened if isinstance(opened, Errno) else g.read_all(opened)
        if isinstance(data, Errno):
            g.eprint(f"sort: {name}: {strerror(data)}\n")
            return 2
        text += data
    lines = [line.split(b"\0")[0] for line in text.split(b"\n")]  # C strings stop at NUL
    if text.endswith(b"\n") or not text:
        lines.pop()

    def key(line: bytes) -> tuple[int, bytes]:
        return (strtoll_prefix(line) if numeric else 0, line)

    ordered = sorted(lines, key=key, reverse=reverse)
    for n, line in enumerate(ordered):
        if unique and n > 0 and ordered[n - 1] == line:
            continue
        g.print(line + b"\n")
    return 0


def envargs(g: Guest, args: list[str], argv0: str, env: dict[str, str]) -> int:
    def shown(text: str) -> str:
        return "<" + text.replace("\n", "\\n") + ">"

    if args[:1] == ["-g"]:
        for name in args[1:]:
            g.print(f"{name}={shown(env[name])}\n" if name in env else f"{name} unset\n")
        return 0
    g.print(f"argc {len(args) + 1}\n")
    for n, arg in enumerate([argv0, *args]):
        g.print(f"argv[{n}] = {shown(arg)}\n")
    entries = sorted((f"{k}={v}" for k, v in env.items()), key=lambda e: e.encode("utf-8"))
    g.print(f"envc {len(entries)}\n")
    for entry in entries:
        g.print(f"env {shown(entry)}\n")
    return 0


def walk(g: Guest, args: list[str]) -> int:
    def descend(path: str) -> bool:
        opened = g.ov.open(g.rel(path), directory=True) if path else Errno.NOENT
        entries = opened if isinstance(opened, Errno) else g.ov.readdir(opened)
        if isinstance(entries, Errno):
            number, text = ERRNO[entries.value]
            g.eprint(f"walk: {path}: {text} (os error {number})\n")
            return True
        failed = False
        for entry in entries:
            full = f"{path}/{entry.name}"
            if entry.kind == "dir":
                g.print(f"d {full}\n")
                failed |= descend(full)
            else:
                handle = g.ov.open(g.rel(full))
                assert isinstance(handle, Handle)
                data = g.read_all(handle)
                assert isinstance(data, bytes)
                g.print(f"f {len(data)} {fnv64(data):016x} {full}\n")
        return failed

    failed = False
    for root in args or ["."]:
        failed |= descend(root)
    return 1 if failed else 0


FSOPS_ARITY = {
    **dict.fromkeys(["write", "append", "truncate", "rename", "unlinkopen"], 2),
    **dict.fromkeys(["pwrite", "big", "pread", "renameopen"], 3),
    "seekwrite": 4,
    **dict.fromkeys(["create", "read", "sum", "stat", "ls", "mkdir", "rmdir", "unlink"], 1),
}


def fsops(g: Guest, args: list[str]) -> int:
    failures = 0

    def number(text: str) -> int:
        value = strtoll_whole(text)
        if value is None:
            g.eprint(f"fsops: not a number: {text}\n")
            raise Exit(2)
        return value

    def fail(errno: Errno) -> None:
        nonlocal failures
        g.print(f": error {strerror(errno)}\n")
        failures += 1

    def opened(path: str, **flags: bool) -> Handle | None:
        handle = g.open(path, **flags)
        if isinstance(handle, Errno):
            fail(handle)
            return None
        return handle

    def shown(data: bytes | Errno, text: Callable[[bytes], str]) -> None:
        if isinstance(data, Errno):
            fail(data)
        else:
            g.print(f": ok {text(data)}\n")

    def simple(result: Errno | None) -> None:
        if result is None:
            g.print(": ok\n")
        else:
            fail(result)

    i = 0
    while i < len(args):
        op = args[i]
        need = FSOPS_ARITY.get(op)
        if need is None:
            g.eprint(f"fsops: unknown operation: {op}\n")
            return 2
        if i + need >= len(args):
            g.eprint(f"fsops: {op} needs {need} argument(s)\n")
            return 2
        a = args[i + 1 : i + 1 + need]
        g.print(" ".join([op, *a]))
        ov = g.ov
        if op in ("write", "append", "create"):
            h = opened(a[0], write=True, create=True, truncate=op == "write", exclusive=op == "create")
            if h is not None:
                text = a[1].encode() if op != "create" else b""
                ov.write(h, g.size(h) if op == "append" else 0, text)
                ov.close(h)
                g.print(": ok\n")
        elif op == "pwrite":
            offset = number(a[1])
            h = opened(a[0], write=True)
            if h is not None:
                written = ov.write(h, offset, a[2].encode()) if offset >= 0 else Errno.INVAL
                simple(written) if isinstance(written, Errno) else g.print(f": ok {written}\n")
                ov.close(h)
        elif op == "seekwrite":
            offset = number(a[1])
            if a[2] not in ("set", "cur", "end"):
                g.eprint(f"fsops: whence is set, cur or end: {a[2]}\n")
                raise Exit(2)
            h = opened(a[0], write=True)
            if h is not None:
                at = offset + (g.size(h) if a[2] == "end" else 0)
                if at < 0:
                    fail(Errno.INVAL)
                else:
                    ov.write(h, at, a[3].encode())
                    g.print(f": ok {at}\n")
                ov.close(h)
        elif op == "truncate":
            size = number(a[1])
            h = opened(a[0], write=True)
            if h is not None:
                simple(ov.set_size(h, size) if size >= 0 else Errno.INVAL)
                ov.close(h)
        elif op == "big":
            size, seed = number(a[1]), number(a[2])
            h = opened(a[0], write=True, create=True, truncate=True)
            if h is not None:
                ov.write(h, 0, bytes(c_remainder(n * 7 + seed, 251) & 0xFF for n in range(max(size, 0))))
                ov.close(h)
                g.print(": ok\n")
        elif op in ("read", "pread"):
            offset, length = (number(a[1]), number(a[2])) if op == "pread" else (-1, 0)
            h = opened(a[0])
            if h is not None:
                data: bytes | Errno
                if offset < 0:
                    data = g.read_all(h)
                elif length < 0 or length > 1 << 24:
                    data = Errno.INVAL
                else:
                    data = Errno.BADF if g.is_dir(h) else ov.read(h, offset, length)
                shown(data, lambda d: f"{len(d)} {c_escaped(d)}")
                ov.close(h)
        elif op == "sum":
            h = opened(a[0])
            if h is not None:
                shown(g.read_all(h), lambda d: f"{len(d)} {fnv64(d):016x}")
                ov.close(h)
        elif op == "stat":
            stat = ov.stat_path(g.rel(a[0])) if a[0] else Errno.NOENT
            if isinstance(stat, Errno):
                fail(stat)
            else:
                g.print(": ok dir\n" if stat.kind == "dir" else f": ok file {stat.size}\n")
        elif op == "ls":
            h = ov.open(g.rel(a[0]), directory=True) if a[0] else Errno.NOENT
            entries = h if isinstance(h, Errno) else ov.readdir(h)
            if isinstance(entries, Errno):
                fail(entries)
            else:
                g.print(": ok" + "".join(f" {e.name}" for e in entries[:4096]) + "\n")
        elif op in ("mkdir", "rmdir", "unlink"):
            call = {"mkdir": ov.mkdir, "rmdir": ov.rmdir, "unlink": ov.unlink}[op]
            simple(call(g.rel(a[0])) if a[0] else Errno.NOENT)
        elif op == "rename":
            simple(ov.rename(g.rel(a[0]), g.rel(a[1])) if a[0] and a[1] else Errno.NOENT)
        elif op == "unlinkopen":
            h = opened(a[0], write=True)
            if h is not None:
                gone = ov.unlink(g.rel(a[0]))
                if gone is not None:
                    fail(gone)
                else:
                    ov.write(h, 0, a[1].encode())
                    data = g.read_all(h)
                    assert isinstance(data, bytes)
                    g.print(f": ok {c_escaped(data)}\n")
                ov.close(h)
        elif op == "renameopen":
            h = opened(a[0], write=True)
            if h is not None:
                moved = ov.rename(g.rel(a[0]), g.rel(a[1])) if a[1] else Errno.NOENT
                if moved is not None:
                    fail(moved)
                else:
                    ov.write(h, g.size(h), a[2].encode())
                    g.print(": ok\n")
                ov.close(h)
        i += need + 1
    return 1 if failures else 0


def clockrand(g: Guest, args: list[str]) -> int:
    if args[:1] == ["-v"]:
        raise NotImplementedError("clockrand -v prints the values it read: no oracle can know them")
    g.print("clock ok\nsleep ok\nrandom ok\n")
    return 0


def hello(g: Guest, args: list[str]) -> int:
    g.print("hello, world\n")
    return 0


def writeloop(g: Guest, args: list[str]) -> int:
    count = strtoll_prefix(args[0].encode()) if args else 1000
    g.print("x" * max(count, 0))
    return 0


def readfile(g: Guest, args: list[str]) -> int:
    if not args:
        g.eprint("usage: readfile PATH [BUFSIZE]\n")
        return 2
    opened = g.open(args[0])
    data = opened if isinstance(opened, Errno) else g.read_all(opened)
    if isinstance(data, Errno):
        g.eprint(f"readfile: {args[0]}: {strerror(data)}\n")
        return 1
    g.print(f"{len(data)} {sum(data[::4096])}\n")
    return 0


def commit(g: Guest, args: list[str]) -> int:
    mode = args[0] if args else ""
    for path, text, close in (("kept.txt", b"kept", True), ("pending.txt", b"pending", False)):
        opened = g.open(path, write=True, create=True, truncate=True)
        if isinstance(opened, Errno):
            g.eprint(f"{path}: {strerror(opened)}\n")
            raise Exit(1)
        g.ov.write(opened, 0, text)
        if close:
            g.ov.close(opened)
    if mode == "exit":
        raise Exit(3)
    if mode in ("sync", "trap"):
        raise Trapped(ABORT)
    if mode == "wait":
        g.print("waiting\n")
        g.take_stdin()
        return 0
    if mode == "flood":
        raise NotImplementedError("commit flood writes forever: only an output cap ends it (a fixture case)")
    g.eprint("usage: commit exit|sync|trap|wait|flood\n")
    return 2


def sleep(g: Guest, args: list[str]) -> int:
    if not args:
        g.eprint("usage: sleep MS\n")
        return 2
    ms = max(-(2**31), min(2**31 - 1, strtoll_prefix(args[0].encode())))  # strtol: a wasm32 long
    if c_remainder(ms, 1000) < 0:  # a negative tv_nsec: nanosleep says EINVAL (a negative tv_sec alone sleeps 0)
        g.eprint("sleep: Invalid argument\n")
        return 1
    g.print(f"slept {ms}\n")
    return 0


def spew(g: Guest, args: list[str]) -> int:
    if not 3 <= len(args) <= 4:
        return 2
    target: Handle | None = None
    if args[0] not in ("1", "2"):  # a file, created or truncated before the numbers are read
        opened = g.open(args[0], write=True, create=True, truncate=True)
        if isinstance(opened, Errno):
            return 1
        target = opened
    numbers = [strtoll_whole(text) for text in args[1:]]
    bounds = [(0, 2**30), (1, 2**26), (1, 1024)]
    if any(n is None or not least <= n <= most for n, (least, most) in zip(numbers, bounds, strict=False)):
        return 2
    count, size, iovs = (*numbers, 1) if len(numbers) == 2 else numbers
    assert count is not None and size is not None and iovs is not None
    data = b"".join((bytes([97 + i % 26]) * (size - 1) + b"\n") * iovs for i in range(count))
    if target is not None:
        g.ov.write(target, 0, data)
    elif args[0] == "1":
        g.out += data
    else:
        g.err += data
    return 0


def oracle(case: WasiCase) -> WasiOutcome:
    """The outcome ``case`` must have, by the program it runs (guests/c/NAME.wasm)."""
    name = case.wasm.stem
    if name == "envargs":
        return run(case, lambda g, args: envargs(g, args, case.argv[0], dict(case.env)))
    programs: dict[str, Callable[[Guest, list[str]], int]] = {
        "cat": cat,
        "wc": wc,
        "ls": ls,
        "sort": sort,
        "walk": walk,
        "fsops": fsops,
        "clockrand": clockrand,
        "hello": hello,
        "writeloop": writeloop,
        "readfile": readfile,
        "commit": commit,
        "sleep": sleep,
        "spew": spew,
    }
    return run(case, programs[name])
