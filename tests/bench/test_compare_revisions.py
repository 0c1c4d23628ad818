"""The reference-revision comparison: a revision checked out beside the working tree, the same
bench runs on both, interleaved, and medians and speedups computed pair by pair."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kubesched.bench import compare_revisions as cr

REPO = Path(__file__).resolve().parents[2]


def doc(average: float | None, overall: float, rss_mib: int) -> dict[str, Any]:
    return {"throughput": None if average is None else {"average": average}, "overall_pods_per_second": overall,
            "peak_rss_bytes": rss_mib * 2**20}


def result_of(ref: list[dict[str, Any]], work: list[dict[str, Any]]) -> cr.CaseResult:
    return cr.CaseResult("SchedulingBasic", cr.Side("ref", REPO, ref), cr.Side("work", REPO, work))


@pytest.mark.parametrize(("ref", "work", "expected"), [
    pytest.param([doc(100, 90, 200)], [doc(300, 270, 100)], {"avg pods/s": 3.0, "overall pods/s": 3.0, "peak RSS MiB": 2.0},
                 id="faster-and-smaller-is-above-one"),
    pytest.param([doc(100, 100, 100), doc(50, 50, 100), doc(100, 100, 100)],
                 [doc(200, 200, 100), doc(100, 100, 100), doc(100, 100, 100)],
                 {"avg pods/s": 2.0, "overall pods/s": 2.0, "peak RSS MiB": 1.0},
                 id="median-of-pair-ratios-cancels-drift-between-pairs"),
    pytest.param([doc(None, 10, 100)], [doc(None, 20, 100)], {"avg pods/s": None, "overall pods/s": 2.0, "peak RSS MiB": 1.0},
                 id="a-run-too-short-for-throughput-samples-has-no-average-speedup"),
])
def test_speedup_is_the_median_of_per_pair_ratios(ref: list, work: list, expected: dict[str, float | None]) -> None:
    rows = cr.summary([result_of(ref, work)])
    assert {r["figure"]: r["speedup"] for r in rows} == expected


def test_medians_are_reported_per_side_in_mebibytes_for_memory() -> None:
    rows = {r["figure"]: r for r in cr.summary([result_of([doc(100, 90, 200), doc(120, 95, 300)], [doc(10, 9, 50), doc(30, 11, 70)])])}
    assert (rows["avg pods/s"]["reference"], rows["avg pods/s"]["working"]) == (110, 20)
    assert (rows["peak RSS MiB"]["reference"], rows["peak RSS MiB"]["working"]) == (250, 60)


def test_an_unknown_reference_revision_is_a_clear_error(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert cr.main(["--ref", "no-such-revision-here", "--case", "SchedulingBasic"]) == 1
    assert "error: git rev-parse --verify no-such-revision-here^{commit} failed" in capsys.readouterr().err


def test_head_against_the_working_tree_runs_both_interleaved_and_removes_the_checkout(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    code = cr.main(["--ref", "HEAD", "--runs", "1", "--timeout", "120", "-o", "json",
                    "--case", "SchedulingBasic --nodes 10 --init-pods 0 --pods 20"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert [r["figure"] for r in report["rows"]] == ["avg pods/s", "overall pods/s", "peak RSS MiB"]
    memory = report["rows"][2]
    assert memory["runs"] == 1 and memory["reference"] > 0 and memory["working"] > 0
    lines = err.splitlines()
    assert [line.split(":")[0] for line in lines] == ["ref HEAD", "working tree", "[1/1] ref HEAD", "[1/1] working tree"]
    checkout = lines[0].split(": ", 1)[1]
    assert lines[1] == f"working tree: {REPO}"
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert checkout not in worktrees and not Path(checkout).exists()
