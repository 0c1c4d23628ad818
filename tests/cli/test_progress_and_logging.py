"""Progress on stderr (nothing for short runs, a live bar on a terminal, a plain or JSON line at a
low rate elsewhere) and ``--logging-format json`` as kube-scheduler's structured logs."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from kubesched.cli.logs import JSONFormatter, caller, klog_v, python_level
from kubesched.cli.main import build_parser, main
from kubesched.cli.progress import ProgressReporter, counts, format_duration

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(ROOT / "examples" / "cluster")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def reporter(**kwargs) -> tuple[ProgressReporter, io.StringIO, FakeClock]:
    stream, clock = io.StringIO(), FakeClock()
    return ProgressReporter(stream, clock=clock, thread=False, delay=2.0, interval=5.0, **kwargs), stream, clock


@pytest.mark.parametrize(("steps", "lines"), [
    pytest.param([(1.0, 10)], [], id="nothing for a run shorter than the delay"),
    pytest.param([(2.5, 10)], ["kubesched: scheduling: 10/100 pods bound (10%), 2s elapsed"], id="a first line once the delay is over"),
    pytest.param([(2.5, 10), (4.0, 20), (6.0, 30)], ["kubesched: scheduling: 10/100 pods bound (10%), 2s elapsed"],
                 id="no second line within the interval"),
    pytest.param([(2.5, 10), (7.5, 60), (8.0, 70), (12.5, 100)],
                 ["kubesched: scheduling: 10/100 pods bound (10%), 2s elapsed", "kubesched: scheduling: 60/100 pods bound (60%), 7s elapsed",
                  "kubesched: scheduling: 100/100 pods bound (100%), 12s elapsed"], id="one line per interval"),
])
def test_plain_progress_lines_come_at_a_low_rate(steps, lines):
    progress, stream, clock = reporter(terminal=False)
    progress.phase("scheduling", 100, "pods bound")
    for at, done in steps:
        clock.now = 100.0 + at
        progress.update(done)
        progress.tick()
    assert stream.getvalue().splitlines() == lines


def test_a_phase_without_counts_shows_its_elapsed_time():
    progress, stream, clock = reporter(terminal=False)
    progress.phase("loading manifests (52.4 MB in 1 file)")
    clock.now += 65
    progress.tick()
    assert stream.getvalue() == "kubesched: loading manifests (52.4 MB in 1 file): 1m5s elapsed\n"


def test_json_progress_lines_are_structured_log_records():
    progress, stream, clock = reporter(terminal=False, json_lines=True)
    progress("scheduling", 5, 10)
    clock.now += 3
    progress.tick()
    record = json.loads(stream.getvalue())
    assert list(record) == ["ts", "caller", "msg", "v", "phase", "done", "total", "elapsed"]
    assert (record["msg"], record["v"], record["phase"], record["done"], record["total"], record["elapsed"]) == \
        ("Progress", 0, "scheduling", 5, 10, "3s")
    assert record["caller"].startswith("cli/progress.py:")


def test_on_a_terminal_a_live_bar_is_drawn_and_removed():
    progress, stream, clock = reporter(terminal=True)
    progress("scheduling", 40, 100)
    clock.now += 3
    progress.tick()
    progress.close()
    drawn = stream.getvalue()
    assert "scheduling" in drawn and "40/100" in drawn


def test_the_drawing_thread_stops_with_the_reporter():
    with ProgressReporter(io.StringIO(), terminal=False) as progress:
        progress.phase("loading manifests")
    assert progress._thread is not None and not progress._thread.is_alive()


@pytest.mark.parametrize(("seconds", "text"), [(0.4, "0s"), (35, "35s"), (65, "1m5s"), (3723, "1h2m3s")])
def test_durations_read_like_go(seconds, text):
    assert format_duration(seconds) == text


def test_counts_without_a_total_are_left_out():
    assert (counts(3, None, "pods"), counts(3, 0, "pods"), counts(1, 3, "")) == ("", "", "1/3 (33%), ")


# --- logging ------------------------------------------------------------------------------------------
def record(level: int, msg: str, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("kubesched.scheduler", level, "/src/kubesched/cluster/kubelet.py", 83, msg, (), exc_info)


@pytest.mark.parametrize(("level", "exc", "tail"), [
    (logging.WARNING, None, {"v": 0}),
    (logging.INFO, None, {"v": 1}),
    (logging.DEBUG, None, {"v": 4}),
    (logging.ERROR, None, {}),
    (logging.ERROR, ValueError("boom"), {"err": "boom"}),
], ids=["warning at level 0", "info at the command's info level", "debug at 4", "error without an exception",
        "error with its exception as err"])
def test_json_records_have_klogs_keys_in_zaps_order(level, exc, tail):
    entry = json.loads(JSONFormatter(info_v=1).format(record(level, "hello", exc)))
    assert list(entry)[:4] == ["ts", "logger", "caller", "msg"]
    assert (entry["logger"], entry["caller"], entry["msg"]) == ("kubesched.scheduler", "cluster/kubelet.py:83", "hello")
    assert {k: v for k, v in entry.items() if k not in ("ts", "logger", "caller", "msg")} == tail
    assert isinstance(entry["ts"], float)


@pytest.mark.parametrize(("verbosity", "info_v", "level"), [
    (0, 1, logging.WARNING), (1, 1, logging.INFO), (0, 0, logging.INFO), (4, 1, logging.DEBUG), (9, 0, logging.DEBUG),
])
def test_verbosity_maps_to_python_levels(verbosity, info_v, level):
    assert python_level(verbosity, info_v) == level
    assert klog_v(level, info_v) <= max(verbosity, 0) or level == logging.WARNING


def test_caller_is_the_file_with_its_directory():
    assert (caller("/a/b/kubesched/cli/main.py", 7), caller("main.py", 7)) == ("cli/main.py:7", "main.py:7")


@pytest.mark.parametrize(("argv", "verbosity", "fmt"), [
    (["-v", "3", "simulate", "-f", "x"], 3, "text"),
    (["simulate", "-f", "x", "-v", "2", "--logging-format", "json"], 2, "json"),
    (["--logging-format", "json", "run"], 0, "json"),
    (["config", "validate", "-f", "x", "--v=4"], 4, "text"),
], ids=["before the command", "after the command", "json for run", "on a nested command"])
def test_logging_flags_on_every_command(argv, verbosity, fmt):
    args = build_parser().parse_args(argv)
    assert (args.verbosity, args.logging_format) == (verbosity, fmt)


UNREACHABLE_EXTENDER = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
- urlPrefix: http://127.0.0.1:1/
  filterVerb: filter
"""


@pytest.mark.parametrize(("fmt", "error_line"), [
    ("json", lambda line: json.loads(line)["msg"].startswith("Error selecting node for pod ")),
    ("text", lambda line: line.startswith("E kubesched.scheduler.scheduler] Error selecting node for pod ")),
])
def test_a_commands_errors_follow_the_logging_format(fmt, error_line, tmp_path, capsys):
    """An extender nobody listens for fails every attempt: the scheduler's error lines (and, in
    JSON, every line, progress included, is a record)."""
    config = tmp_path / "config.yaml"
    config.write_text(UNREACHABLE_EXTENDER)
    main(["simulate", "-f", CLUSTER, "--config", str(config), "--logging-format", fmt])
    lines = capsys.readouterr().err.splitlines()
    if fmt == "json":
        assert all("msg" in json.loads(line) for line in lines)
    errors = [line for line in lines if "Error selecting node" in line]
    assert errors and all(error_line(line) for line in errors)
