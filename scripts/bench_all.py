#!/usr/bin/env python3
"""Run every ``kubesched bench`` workload at the issue's sizes and print docs/performance.md's rows.

Each workload runs in its own process (``python -m kubesched bench W -o json``), so its peak RSS
is its own, one after the other (never two at once: they would share the cores). The JSON of each
run is written to ``--out`` (default ``$TMPDIR/kubesched-bench``); the Markdown rows go to stdout.

    python scripts/bench_all.py [--mode embedded|http] [--only W1,W2] [--memory] [-- extra bench flags]

``--memory`` adds the memory row: SchedulingBasic with 50k measured pods and no init pods, i.e.
5000 nodes holding 50k bound pods.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubesched.bench.report import MARKDOWN_HEADER, markdown_row
from kubesched.bench.workloads import WORKLOADS, workload

MEMORY_RUN = ("SchedulingBasic", ["--init-pods", "0", "--pods", "50000"])


def run_one(name: str, mode: str, extra: list[str], out: Path) -> dict | None:
    args = [sys.executable, "-m", "kubesched", "bench", name, "--mode", mode, "-o", "json", *extra]
    print(f"running: {' '.join(args[1:])}", file=sys.stderr, flush=True)
    started = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if not proc.stdout.strip():
        print(f"  {name} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}", file=sys.stderr)
        return None
    doc = json.loads(proc.stdout)
    suffix = "-".join(a.strip("-") for a in extra) if extra else "default"
    (out / f"{name}-{mode}-{suffix}.json").write_text(proc.stdout, encoding="utf-8")
    print(f"  {time.monotonic() - started:.0f}s: {markdown_row(doc)}", file=sys.stderr, flush=True)
    return doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("embedded", "http"), default="embedded")
    parser.add_argument("--only", default="", help="comma-separated workload names (default: all)")
    parser.add_argument("--memory", action="store_true", help="also run the 50k-bound-pods memory row")
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "kubesched-bench"), help="directory for each run's JSON")
    parser.add_argument("extra", nargs="*", help="flags passed to every `kubesched bench` run (after --)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [workload(n).name for n in args.only.split(",") if n] or list(WORKLOADS)
    runs = [(name, list(args.extra)) for name in names]
    if args.memory:
        runs.append((MEMORY_RUN[0], MEMORY_RUN[1] + list(args.extra)))
    rows = []
    for name, extra in runs:
        doc = run_one(name, args.mode, extra, out)
        rows.append(markdown_row(doc) if doc else f"| {name} | failed |" + " |" * 10)
    print(MARKDOWN_HEADER)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
