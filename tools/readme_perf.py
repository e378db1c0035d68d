"""Write the README's Performance tables from one ``tools/bench.py --json`` run.

## The one decision
Every figure in the README's Performance section comes from a single ``tools/bench.py`` run,
copied by this script and never typed by hand: the tables between ``<!-- bench:begin -->`` and
``<!-- bench:end -->`` are replaced whole, headed by the machine, the date, the command and the
load average at start and end of the run and of each section. The verdict column is computed
from each row's goal (``≤ 2×``, ``≥ 1 GB/s``, ``≤ +200 µs``, ``≥ 10,000/s``, or several joined by
commas): ✓ met, ✗ not met, blank when the goal is not a comparison this script reads (then the
goal text is still shown). Prose outside the markers explains the figures and must not repeat them.

    .venv/bin/python tools/bench.py --json /tmp/bench.json
    .venv/bin/python tools/readme_perf.py /tmp/bench.json          # rewrites README.md in place
    .venv/bin/python tools/readme_perf.py /tmp/bench.json --check  # exit 1 if README.md differs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"

TITLES = {
    "calls": "Host calls through the capability gate",
    "invocation": "Warm invocation",
    "startup": "Start-up of the `kuro` command",
    "ledger": "Ledger",
    "import": "Importing files into kuro.fs",
    "fs_read": "Guest reads through the gate",
    "overlay": "Overlay (WASI's writable view of kuro.fs)",
    "deadline": "Deadlines",
    "cache": "Module cache",
    "concurrency": "Threads",
    "dirs": "Directories (HAMT)",
    "gateway": "Trustless gateway",
    "components": "Components",
    "wasi": "WASI preview 1 commands",
    "batch": "Batches (`run_many`, `kuro batch`)",
    "workers": 'Worker processes (`isolation="process"`)',
    "store": "Block store",
}

# unit → (dimension, factor to the dimension's base unit)
_UNITS: dict[str, tuple[str, float]] = {
    "ns": ("time", 1e-9),
    "µs": ("time", 1e-6),
    "us": ("time", 1e-6),
    "ms": ("time", 1e-3),
    "s": ("time", 1.0),
    "B/s": ("rate", 1.0),
    "kB/s": ("rate", 1e3),
    "MB/s": ("rate", 1e6),
    "GB/s": ("rate", 1e9),
}
_CHECK = re.compile(r"^(≤|≥|<|>)\s*(\+)?([\d][\d,]*(?:\.\d+)?)\s*([^\s(]*)")


def _convert(value: float, unit: str, to: str) -> float | None:
    """``value`` in ``unit`` expressed in ``to``; None when they do not convert (different dimensions)."""
    if unit == to:
        return value
    a, b = _UNITS.get(unit), _UNITS.get(to)
    if a is None or b is None or a[0] != b[0]:
        return None
    return value * a[1] / b[1]


def verdict(row: dict[str, Any]) -> str:
    """✓ / ✗ for a row's goal, or "" when the goal is not a comparison read here.

    >>> verdict({"goal": "≤ 2×", "ratio": 1.5, "value": 3.0, "unit": "µs", "anchor_value": 2.0})
    '✓'
    >>> verdict({"goal": "≥ 1 GB/s, ≥ 0.5×", "ratio": 0.4, "value": 2.0, "unit": "GB/s", "anchor_value": 5.0})
    '✗'
    >>> verdict({"goal": "≥ 10,000/s", "ratio": 0.7, "value": 4569.0, "unit": "/s", "anchor_value": 6066.0})
    '✗'
    >>> verdict({"goal": "≤ +200 µs", "ratio": 5.0, "value": 555.0, "unit": "µs", "anchor_value": 96.0})
    '✗'
    >>> verdict({"goal": "≤ 5 ms", "ratio": None, "value": 0.018, "unit": "s", "anchor_value": None})
    '✗'
    >>> verdict({"goal": "≈ 1× (linear)", "ratio": 1.0, "value": 1.0, "unit": "µs", "anchor_value": 1.0})
    ''
    """
    goal = str(row.get("goal") or "")
    if not goal:
        return ""
    results = []
    for part in re.split(r",\s*(?=[≤≥<>])", goal):
        match = _CHECK.match(part.strip())
        if match is None:
            return ""
        op, plus, number, unit = match.groups()
        target = float(number.replace(",", ""))
        value, anchor, ratio = row.get("value"), row.get("anchor_value"), row.get("ratio")
        if unit == "×":
            got = ratio
        elif value is None:
            got = None
        elif plus:
            if anchor is None:
                return ""
            got = _convert(value - anchor, row["unit"], unit)
        elif unit == row["unit"] or (unit.startswith("/") and row["unit"].endswith(unit) and row["unit"] not in _UNITS):
            got = value  # a count per second ("/s", "req/s") against a goal in "/s"
        else:
            got = _convert(value, row["unit"], unit)
        if got is None:
            return ""
        results.append({"≤": got <= target, "≥": got >= target, "<": got < target, ">": got > target}[op])
    return "✓" if all(results) else "✗"


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit in ("µs", "ms", "us"):
        text = f"{value:,.1f}" if value >= 10 else f"{value:.3g}"
    elif unit == "s":
        text = f"{value:.3g}"
    elif unit == "×":
        text = f"{value:.3g}"
    else:
        text = f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
    return f"{text} {unit}".strip() if unit != "×" else f"{text}×"


def _ratio(ratio: float | None) -> str:
    if ratio is None:
        return "—"
    if ratio < 0.01:
        return f"1/{1 / ratio:,.0f}"
    return f"{ratio:.3g}×"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(data: dict[str, Any], command: str) -> str:
    """The Markdown that goes between the markers."""
    facts = data["machine"]
    start, end = facts.get("load_average_start"), facts.get("load_average_end")
    loads = f"load average (1 min) {start[0]:.1f} at start, {end[0]:.1f} at end" if start and end else ""
    head = (
        f"Figures from one run: `{command}` on {facts.get('date', '?')}, {facts.get('nproc')} × {facts.get('cpu')}, "
        f"Python {facts.get('python')}, wasmtime {facts.get('wasmtime')}, "
        f"extism {facts.get('extism') or 'not installed'}, node {facts.get('node') or 'not installed'}; {loads}."
        + (" **QUICK (smoke sizes): not figures to quote.**" if data.get("quick") else "")
    )
    out = [head, ""]
    by_section: dict[str, list[dict[str, Any]]] = {}
    for row in data["rows"]:
        by_section.setdefault(row.get("section") or "other", []).append(row)
    timing = {s["section"]: s for s in data.get("sections", [])}
    for name, rows in by_section.items():
        t = timing.get(name)
        where = f" — load {t['load_start']:.1f} → {t['load_end']:.1f}, {t['seconds']:.0f} s" if t else ""
        out.append(f"**{TITLES.get(name, name)}** (`--only {name}`{where})")
        out.append("")
        out.append("| figure | kuro | anchor (same run) | ratio | goal | note |")
        out.append("|---|---|---|---|---|---|")
        for row in rows:
            anchor = (
                row["anchor"]
                if row.get("anchor_value") is None
                else f"{row['anchor']}: {_num(row['anchor_value'], row['unit'])}"
            )
            goal = row.get("goal") or ""
            mark = verdict(row)
            cells = [row["figure"], _num(row.get("value"), row["unit"]), anchor, _ratio(row.get("ratio")),
                     f"{goal} {mark}".strip(), row.get("note") or ""]  # fmt: skip
            out.append("| " + " | ".join(_cell(str(c)) for c in cells) + " |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def replace_between(text: str, body: str) -> str:
    """``text`` with what lies between the markers replaced by ``body``. Raises ValueError: no markers."""
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        raise ValueError(f"README.md has no {BEGIN} … {END} block")
    return text[: a + len(BEGIN)] + "\n" + body + text[b:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", help="a tools/bench.py --json file")
    parser.add_argument("--readme", default=str(ROOT / "README.md"))
    parser.add_argument("--command", default=".venv/bin/python tools/bench.py", help="the bench command, as run")
    parser.add_argument("--check", action="store_true", help="exit 1 if the README differs, write nothing")
    args = parser.parse_args(argv)
    try:
        data = json.loads(Path(args.json).read_text(encoding="utf-8"))
        readme = Path(args.readme).read_text(encoding="utf-8")
        new = replace_between(readme, render(data, args.command))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"readme_perf: {exc}", file=sys.stderr)
        return 2
    if args.check:
        return 0 if new == readme else 1
    Path(args.readme).write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
