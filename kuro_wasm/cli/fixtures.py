"""``kuro fixtures run [DIR]``: run a directory of fixture cases against this host and judge every receipt.

## The one decision
The command is a table over :func:`kuro_wasm.host.fixtures.run_dir` — the same
runner and judge the test suite uses — so another project can point it at its
own cases (``guests/fixtures/schema.json`` is the format) and get the verdict
this project's CI gets. Without ``DIR`` it runs the cases that ship with
kuro-wasm. The exit status is 0 only when no case failed and every file was a
case; a case marked ``unsupported`` on wasmtime is listed with its reason and
fails nothing (it is never skipped silently, and never counted as a pass).

With ``--json`` stdout is one JSON object per case (``case``, ``status``,
``problems``, ``seconds``, ``path`` and, when the guest ran, its ``receipt``
with bytes in DAG-JSON form); the summary line goes to stderr either way.

## Effects
Reads the case files and guests; runs guests (compiled modules cached in the home).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kuro_wasm.cli.context import EXIT_FAILED, Context

__all__ = ["add_fixtures_parsers", "fixtures_run"]

_SHOWN = {"pass": "pass", "fail": "FAIL", "invalid": "INVALID", "unsupported": "n/a"}


def add_fixtures_parsers(group: Any, leaf: Any) -> None:
    """``kuro fixtures run``."""
    run = leaf(
        group,
        "run",
        "run a directory of fixture cases (*.toml, guests/fixtures/schema.json) and print pass/fail per case",
        fixtures_run,
    )
    run.add_argument(
        "dir",
        metavar="DIR",
        nargs="?",
        help="a directory of case files (default: the cases that ship with kuro-wasm)",
    )
    run.add_argument("--json", action="store_true", help="one JSON object per case on stdout (summary on stderr)")


def fixtures_run(args: argparse.Namespace, ctx: Context) -> int:
    """Run every case of ``args.dir`` (or the bundled ones); exit 1 if any failed or was not a case."""
    from kuro_wasm.host.fixtures import bundled_dir, run_dir
    from kuro_wasm.model.receipt import to_json

    where = args.dir if args.dir is not None else str(bundled_dir())
    results = run_dir(where, home=ctx.home)
    width = max((len(r.name) for r in results), default=4)
    for r in results:
        if args.json:
            line = {"case": r.name, "status": r.status, "problems": list(r.problems), "seconds": round(r.seconds, 4)}
            line["path"] = r.path
            if r.receipt is not None:
                line["receipt"] = json.loads(to_json(r.receipt))
            ctx.say(json.dumps(line, ensure_ascii=False, sort_keys=True))
            continue
        detail = "; ".join(r.problems)
        if r.status == "unsupported":
            detail = f"unsupported on wasmtime: {detail}"
        timing = f"{r.seconds * 1000:7.1f} ms" if r.status in ("pass", "fail") else " " * 10
        ctx.say(f"{_SHOWN[r.status]:<7}  {r.name:<{width}}  {timing}  {detail}".rstrip())
    counts = {status: sum(1 for r in results if r.status == status) for status in _SHOWN}
    ctx.note(
        f"{len(results)} case(s) in {where}: {counts['pass']} pass, {counts['fail']} fail, "
        f"{counts['invalid']} invalid, {counts['unsupported']} unsupported here"
    )
    if not results:
        ctx.note(f"kuro: no *.toml case files in {where}")
        return EXIT_FAILED
    return EXIT_FAILED if counts["fail"] or counts["invalid"] else 0
