"""``python -m kubesched.bench.compare_revisions``: the same ``kubesched bench`` runs on a reference
revision and on the working tree, interleaved, several times; prints each figure's median on both
sides and the speedup.

Machines differ, and drift during a session, by several times, so an absolute pods/s figure says
little on its own; a speedup over a fixed revision measured in the same session on the same
machine does. The reference revision is checked out beside the working tree (``git worktree add
--detach`` into a temporary directory, removed at the end) and both run with the same interpreter
and installed dependencies, each tree first on ``PYTHONPATH``. Runs alternate reference, working
tree, working tree, reference, ... so that a slow phase of the machine hits both sides alike; the
speedup is the median of the per-pair ratios, as a drift between pairs cancels inside each pair.

    python -m kubesched.bench.compare_revisions                      # every workload, 3 pairs
    python -m kubesched.bench.compare_revisions --runs 5 \\
        --case 'SchedulingBasic' --case 'SchedulingBasic --mode http'
    python -m kubesched.bench.compare_revisions --ref HEAD --case 'SchedulingBasic --nodes 100 --pods 200'
    python -m kubesched.bench.compare_revisions --case RunStartup --case UpThroughput --case SimulateEndToEnd

kubesched's whole-process rows (``RunStartup``, ``UpThroughput``, ``SimulateEndToEnd``) are timed by
the working tree's harness on both sides: only the process they time comes from each side's tree
(``KUBESCHED_BENCH_SUBJECT``), so that a row the reference revision lacks still measures its
``kubesched run``, ``up`` or ``simulate``. Each row compares its own figures (seconds to the first
binding, pods/s, create p99, ...); upstream's workloads compare throughput and peak RSS. Without
``--case``, every upstream workload runs (the whole-process rows only when named).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.bench import subject, wholeprocess
from kubesched.bench.wholeprocess import figure
from kubesched.bench.workloads import WORKLOADS

#: The revision whose figures docs/performance.md's "today" column quotes.
REFERENCE_REVISION = "2813cd5"
#: The figures compared for upstream's workloads; a whole-process row names its own.
FIGURES: tuple[wholeprocess.Figure, ...] = (
    wholeprocess.Figure("avg pods/s", "throughput.average", True),
    wholeprocess.Figure("overall pods/s", "overall_pods_per_second", True),
    wholeprocess.RSS,
)


class CompareError(Exception):
    """The comparison cannot run (not a git checkout, an unknown revision, a failed run)."""


@dataclass
class Side:
    """One tree to run: a label for the output and the directory put first on ``PYTHONPATH``."""

    label: str
    tree: Path
    docs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class CaseResult:
    case: str
    ref: Side
    work: Side


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CompareError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout.strip()


@contextlib.contextmanager
def checked_out(repo: Path, revision: str) -> Iterator[Path]:
    """``revision`` in a detached git worktree in a temporary directory, removed afterwards."""
    commit = git(repo, "rev-parse", "--verify", f"{revision}^{{commit}}")
    parent = Path(tempfile.mkdtemp(prefix="kubesched-ref-"))
    tree = parent / commit[:12]
    git(repo, "worktree", "add", "--detach", str(tree), commit)
    try:
        yield tree
    finally:
        with contextlib.suppress(CompareError):
            git(repo, "worktree", "remove", "--force", str(tree))
        with contextlib.suppress(OSError):
            parent.rmdir()


def figures_of(case: str) -> tuple[wholeprocess.Figure, ...]:
    """The figures compared for ``case``: its whole-process row's, else upstream workloads'."""
    argv = shlex.split(case)
    row = wholeprocess.row(argv[0]) if argv else None
    return row.figures if row is not None else FIGURES


def run_bench(side: Side, case: Sequence[str], timeout: float, harness: Path | None = None) -> dict[str, Any]:
    """One ``kubesched bench`` run; its JSON document. Upstream's workloads run ``side``'s tree;
    a whole-process row runs ``harness``'s tree timing ``side``'s processes (its subject)."""
    row = wholeprocess.row(case[0]) if case else None
    code = harness if row is not None and harness is not None else side.tree
    extra = {subject.SUBJECT_ENV: str(side.tree)} if row is not None else {}
    env = {**os.environ, **extra,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH", "")]))}
    args = [sys.executable, "-m", "kubesched", "bench", *case, "-o", "json"]
    try:
        proc = subprocess.run(args, cwd=code, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise CompareError(f"{side.label}: `kubesched bench {shlex.join(case)}` took longer than {timeout:g}s") from e
    if not proc.stdout.strip():
        raise CompareError(f"{side.label}: `kubesched bench {shlex.join(case)}` failed (exit {proc.returncode}): "
                           f"{proc.stderr.strip()[-1500:]}")
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def compare(ref: Side, work: Side, cases: Sequence[str], runs: int, timeout: float, log: Any = None,
            harness: Path | None = None) -> list[CaseResult]:
    """Run every case ``runs`` times on both sides, pair by pair, alternating which side goes first;
    ``harness``: the tree whose harness times the whole-process rows (default: each side's own)."""
    results = []
    for case in cases:
        argv = shlex.split(case)
        result = CaseResult(case, Side(ref.label, ref.tree), Side(work.label, work.tree))
        for i in range(runs):
            order = (result.ref, result.work) if i % 2 == 0 else (result.work, result.ref)
            for side in order:
                if log is not None:
                    print(f"[{i + 1}/{runs}] {side.label}: kubesched bench {case}", file=log, flush=True)
                side.docs.append(run_bench(side, argv, timeout, harness))
        results.append(result)
    return results


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def speedup(result: CaseResult, key: str, higher_is_better: bool) -> float | None:
    """The median over run pairs of working tree / reference (reference / working tree when lower
    is better), so that above 1 always means the working tree is better."""
    ratios = []
    for ref_doc, work_doc in zip(result.ref.docs, result.work.docs, strict=True):
        ref_value, work_value = figure(ref_doc, key), figure(work_doc, key)
        if ref_value and work_value:
            ratios.append(work_value / ref_value if higher_is_better else ref_value / work_value)
    return _median(ratios)


def summary(results: Sequence[CaseResult]) -> list[dict[str, Any]]:
    rows = []
    for result in results:
        for f in figures_of(result.case):
            scale = 2**20 if f.key == "peak_rss_bytes" else 1
            ref = _median([figure(d, f.key) for d in result.ref.docs])
            work = _median([figure(d, f.key) for d in result.work.docs])
            rows.append({"case": result.case, "figure": f.label, "runs": len(result.work.docs),
                         "reference": None if ref is None else ref / scale,
                         "working": None if work is None else work / scale,
                         "speedup": speedup(result, f.key, f.higher_is_better)})
    return rows


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown(rows: Sequence[dict[str, Any]], ref_label: str, work_label: str) -> str:
    lines = [f"| case | figure | runs | {ref_label} (median) | {work_label} (median) | speedup (median of pairs) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        digits = 3 if max(abs(r["reference"] or 0), abs(r["working"] or 0)) < 10 else 1
        lines.append(f"| `{r['case']}` | {r['figure']} | {r['runs']} | {_fmt(r['reference'], digits)} | "
                     f"{_fmt(r['working'], digits)} | {_fmt(r['speedup'], 2)}x |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubesched.bench.compare_revisions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", default=REFERENCE_REVISION, help=f"reference revision (default {REFERENCE_REVISION})")
    parser.add_argument("--against", metavar="REVISION",
                        help="compare this revision instead of the working tree (uncommitted changes included)")
    parser.add_argument("--case", action="append", metavar="'WORKLOAD [FLAGS]'",
                        help="a `kubesched bench` command line without `-o` (repeatable; default: every workload)")
    parser.add_argument("--runs", type=int, default=3, help="run pairs per case (default 3)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one bench run may take (default 1800)")
    parser.add_argument("-o", "--output", choices=("markdown", "json"), default="markdown")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    cases = args.case or list(WORKLOADS)
    try:
        work_tree = Path(git(Path.cwd(), "rev-parse", "--show-toplevel"))
        with contextlib.ExitStack() as stack:
            ref = Side(f"ref {args.ref}", stack.enter_context(checked_out(work_tree, args.ref)))
            work = (Side(f"rev {args.against}", stack.enter_context(checked_out(work_tree, args.against)))
                    if args.against else Side("working tree", work_tree))
            for side in (ref, work):
                print(f"{side.label}: {side.tree}", file=sys.stderr, flush=True)
            results = compare(ref, work, cases, args.runs, args.timeout, log=sys.stderr, harness=work_tree)
    except CompareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    rows = summary(results)
    if args.output == "json":
        print(json.dumps({"reference": args.ref, "against": args.against or "working tree", "runs": args.runs,
                          "rows": rows, "machine": results[0].work.docs[0].get("machine") if results else None}, indent=2))
    else:
        print(markdown(rows, ref.label, work.label))
    return 0


if __name__ == "__main__":
    sys.exit(main())
