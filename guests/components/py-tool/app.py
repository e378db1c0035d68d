"""Component fixture in Python (componentize-py, world kuro:host/command): a small kuro.fs tool.

run(args): args[0] is the operation, the rest its operands. Results go to stdout,
errors to stderr as "<op>: <error-code>" with exit code 1.

    cat PATH · read-at PATH OFFSET LEN · write PATH TEXT · ls PATH · stat PATH ·
    rm PATH · stdin · echo WORDS… · emit N (N bytes "z" in one output.write) · store PATH N (N bytes "z"
    in one fs.write)
"""

import wit_world
from componentize_py_types import Err
from wit_world.imports import fs, output, stdin, types

OUT = types.Stream.STDOUT
ERR = types.Stream.STDERR


def say(text: str, stream: types.Stream = OUT) -> None:
    output.write(stream, text.encode("utf-8"))


def kind(k: types.EntryKind) -> str:
    return "dir" if k == types.EntryKind.DIR else "file"


def error(e: Err) -> str:
    return str(e.value.name).lower().replace("_", "-")


class WitWorld(wit_world.WitWorld):
    def run(self, args: list[str]) -> int:
        op, rest = (args[0], args[1:]) if args else ("echo", [])
        try:
            if op == "cat":
                output.write(OUT, fs.read(rest[0]))
            elif op == "read-at":
                output.write(OUT, fs.read_at(rest[0], int(rest[1]), int(rest[2])))
            elif op == "write":
                fs.write(rest[0], " ".join(rest[1:]).encode("utf-8"))
            elif op == "ls":
                for e in fs.ls(rest[0]):
                    say(f"{e.name} {kind(e.kind)} {e.size}\n")
            elif op == "stat":
                m = fs.stat(rest[0])
                say(f"{kind(m.kind)} {m.size} {m.cid}\n")
            elif op == "rm":
                fs.rm(rest[0])
            elif op == "stdin":
                while True:
                    chunk = stdin.read(65536)
                    if not chunk:
                        break
                    output.write(OUT, chunk)
            elif op == "emit":
                output.write(OUT, b"z" * int(rest[0]))
            elif op == "store":
                fs.write(rest[0], b"z" * int(rest[1]))
            elif op == "echo":
                say(" ".join(rest) + "\n")
            else:
                say(f"unknown operation {op!r}\n", ERR)
                return 2
        except Err as e:
            say(f"{op}: {error(e)}\n", ERR)
            return 1
        return 0
