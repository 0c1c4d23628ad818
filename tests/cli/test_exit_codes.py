"""Every user error is one ``error: <message>`` line on stderr with a documented exit code, and
nothing the cluster did is left out of ``simulate``'s default output (docs/cli.md).

In-process for everything but what needs a real process: a closed stdout, Ctrl-C, a port in use.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from kubesched.cli.main import main
from tests.cli.output import without_progress
from tests.helpers import make_node, make_pod

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(ROOT / "examples" / "cluster")


def deployment(name: str, replicas: int, pod_spec: dict) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}


CONTAINERS = {"containers": [{"name": "c", "image": "nginx"}]}
NODE = make_node("n1")
BOUND_TO_GHOST = {**make_pod("ghosted", node="ghost"), "metadata": {"name": "ghosted", "namespace": "default"}}
PLAIN_POD = {**make_pod("ok"), "metadata": {"name": "ok", "namespace": "default"}}
TOO_BIG = {**make_pod("huge", cpu="64"), "metadata": {"name": "huge", "namespace": "default"}}
DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
             "spec": {"selector": {"matchLabels": {"app": "agent"}},
                      "template": {"metadata": {"labels": {"app": "agent"}}, "spec": CONTAINERS}}}
INGRESS = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web", "namespace": "default"}, "spec": {}}


@dataclass
class Case:
    name: str
    #: Manifests written to one file (None: no file; "" : an empty file; "dir": an empty directory).
    objects: list[dict] | str | None
    argv: list[str]
    code: int
    stderr: list[str] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)


CASES = [
    Case("a missing --config file is one error line", [NODE], ["--config", "/missing.yaml"], 1,
         ["error: --config /missing.yaml: no such file or directory\n"]),
    Case("a --config that is a directory is one error line", [NODE], ["--config", "/"], 1, ["error: --config /: is a directory\n"]),
    Case("an empty manifest file is an error", "", [], 1, ["error: no objects found in "]),
    Case("an empty manifest directory is an error", "dir", [], 1, ["error: no objects found in "]),
    Case("a pod bound to a node that does not exist is shown as removed", [NODE, BOUND_TO_GHOST, PLAIN_POD], [], 0, [],
         ["1/1 pods scheduled, 1 removed.", "Removed pods:\n  default/ghosted: bound to node \"ghost\", which does not exist: "
          "no kubelet runs it, so PodGC deleted it"]),
    Case("a removed pod fails --fail-on-pending", [NODE, BOUND_TO_GHOST, PLAIN_POD], ["--fail-on-pending"], 3),
    Case("a pending pod is a result, not an error", [NODE, TOO_BIG], [], 0, [], ["Pending pods:\n  default/huge: 0/1 nodes are available"]),
    Case("a pending pod fails --fail-on-pending with its own code", [NODE, TOO_BIG], ["--fail-on-pending"], 3),
    Case("every pod running passes --fail-on-pending", [NODE, PLAIN_POD], ["--fail-on-pending"], 0, [], ["1/1 pods scheduled."]),
    Case("a controller that cannot create its pods is a warning in the table and an error",
         [NODE, deployment("web", 2, {**CONTAINERS, "priorityClassName": "nope"})], [], 1,
         ["error: 1 controller(s) could not create the pods the input asks for: ReplicaSet default/web-"],
         ["0/0 pods scheduled.", "Warnings:\n  ReplicaSet default/web-", ": FailedCreate (2 times): Error creating: "
          'pods "web-', 'is forbidden: no PriorityClass with name nope was found']),
    Case("a Deployment whose pod template is invalid is an error naming the field",
         [NODE, deployment("web", 2, {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "-1"}}}]})],
         [], 1, ["error: ", "containers[0].resources.requests[cpu]", "must be greater than or equal to 0"]),
    Case("objects kept but not acted on are listed with the reason", [NODE, PLAIN_POD, DAEMONSET, INGRESS], [], 0, [],
         ["Not acted on:\n  DaemonSet kube-system/agent: the simulation runs no DaemonSet controller, so its pods are not created\n"
          "  Ingress default/web: kind networking.k8s.io/v1 Ingress is not served by kubesched\n"]),
    Case("with -o json the report's sections are warnings on stderr", [NODE, BOUND_TO_GHOST, DAEMONSET], ["-o", "json"], 0,
         ['warning: removed pods: default/ghosted: bound to node "ghost"', "warning: not acted on: DaemonSet kube-system/agent"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_simulate_reports_and_exits_as_documented(case: Case, tmp_path, capsys):
    target = tmp_path / "input.yaml"
    if case.objects == "dir":
        target = tmp_path / "empty"
        target.mkdir()
    elif isinstance(case.objects, list):
        target.write_text(yaml.safe_dump_all(case.objects))
    else:
        target.write_text(case.objects or "")
    code = main(["simulate", "-f", str(target), *case.argv])
    out, err = capsys.readouterr()
    assert code == case.code, (out, err)
    assert "Traceback" not in err
    for expected in case.stderr:
        assert expected in err
    for expected in case.stdout:
        assert expected in out
    if code == 1:
        assert [line for line in err.splitlines() if line.startswith("error: ")] == [err.splitlines()[0]]


@pytest.mark.parametrize("command", [
    ["simulate"], ["explain", "some-pod"], ["up", "--port", "0", "--kubeconfig-out", ""],
], ids=["simulate", "explain", "up"])
def test_every_command_that_reads_manifests_rejects_an_empty_directory(command, tmp_path, capsys):
    code = main([command[0], "-f", str(tmp_path), *command[1:]])
    assert (code, capsys.readouterr().err) == (1, f"error: no objects found in {tmp_path} (expected YAML or JSON manifests: "
                                                   ".yaml, .yml, .json)\n")


@pytest.mark.parametrize("command", [
    ["simulate", "-f", CLUSTER], ["explain", "-f", CLUSTER, "web-1"], ["up", "--port", "0", "--kubeconfig-out", ""],
    ["run", "--kubeconfig", "/k"],
], ids=["simulate", "explain", "up", "run"])
def test_every_command_names_a_missing_config_file(command, capsys):
    assert main([*command, "--config", "/missing.yaml"]) == 1
    assert capsys.readouterr().err == "error: --config /missing.yaml: no such file or directory\n"


@pytest.mark.parametrize(("argv", "code", "stream", "expected"), [
    (["--version"], 0, "out", "kubesched v0.1.0 (kube-scheduler v1.35 behaviour)\n"),
    (["simulate"], 2, "err", "the following arguments are required: -f/--filename"),
    (["simulate", "-f", CLUSTER, "--output", "csv"], 2, "err", "invalid choice: 'csv'"),
], ids=["version at the top level", "a missing flag is a usage error", "a bad choice is a usage error"])
def test_argparse_exits(argv, code, stream, expected, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    captured = capsys.readouterr()
    assert exited.value.code == code
    assert expected in (captured.out if stream == "out" else captured.err)


@pytest.mark.parametrize(("argv", "message"), [
    (["web-1"], 'error: pod "default/web-1" is not in the manifests; did you mean shop/web-1 (-n shop)?\n'),
    (["web"], 'error: pod "default/web" is not in the manifests; pods with similar names: shop/web-1, shop/web-2, shop/web-3, shop/web-4\n'),
    (["web-1", "-n", "nope"], 'error: pod "nope/web-1" is not in the manifests; did you mean shop/web-1 (-n shop)?\n'),
], ids=["same name in another namespace", "similar names", "wrong namespace"])
def test_explain_suggests_the_pods_the_user_may_have_meant(argv, message, capsys):
    assert main(["explain", "-f", CLUSTER, *argv]) == 1
    assert capsys.readouterr().err == message


def test_explain_accepts_namespace_slash_name(capsys):
    assert main(["explain", "-f", CLUSTER, "shop/web-1"]) == 0
    assert capsys.readouterr().out.startswith("Pod shop/web-1: scheduled to node-b1")


def test_explain_of_a_preemptor_shows_the_candidates_and_victims(capsys):
    assert main(["explain", "-f", str(ROOT / "examples" / "preemption"), "web-664fcd4b6c-zwxms"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == [
        "Pod default/web-664fcd4b6c-zwxms: scheduled to node-2 (attempt 2 of 2; 1 feasible of 1 nodes)",
        "Passed every filter: node-2 (not scored: with one feasible node, or no Score plugin, the scheduler skips scoring)"]
    assert "Pod default/web-664fcd4b6c-zwxms: no node fits (attempt 1 of 2; 0 feasible of 3 nodes)" in out
    assert "Preemption: nominated to node-2, evicting default/etl-b1 (decided by: only candidate)" in out
    assert "  * node-2: victims default/etl-b1; PDB violations 1" in out
    assert "    node-1: not a candidate (Insufficient cpu)" in out


def test_simulate_explain_adds_a_line_per_pod_to_the_table(capsys):
    assert main(["simulate", "-f", CLUSTER, "--explain"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("Explanations"):].splitlines()
    assert len(section) == 1 + 11
    assert ("  shop/web-1: scheduled to node-b1 (attempt 1: 3 feasible of 5 nodes; score 692, next node-a1 686; "
            "filtered out by NodeUnschedulable (1), TaintToleration (1))") in section
    assert any(line.startswith("  shop/analytics: no node fits") for line in section)


def test_ctrl_c_while_the_command_loads_is_an_interruption_not_a_traceback(monkeypatch, capsys):
    """A Ctrl-C that lands while the command's modules import (the first fraction of a second)."""
    import kubesched.cli.main as cli_main

    def interrupted(argv: list[str]) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "parse", interrupted)
    assert main(["simulate", "-f", CLUSTER]) == 130
    assert capsys.readouterr().err == "\ninterrupted\n"


# --- real processes ---------------------------------------------------------------------------------
def kubesched(*argv: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "kubesched", *argv], cwd=ROOT, env=env, stderr=subprocess.PIPE,
                            text=True, **kwargs)


def test_a_closed_stdout_ends_the_run_quietly(tmp_path):
    """Output far larger than a pipe's buffer, whose reader leaves after the first line."""
    manifests = tmp_path / "many.yaml"
    manifests.write_text(yaml.safe_dump_all([NODE, *(make_pod(f"p{i}", cpu="1m") for i in range(300))]))
    process = kubesched("simulate", "-f", str(manifests), "-o", "json", stdout=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stdout.readline() == "{\n"
    process.stdout.close()  # as `| head -1` does once it has its line
    _, err = process.communicate(timeout=120)
    assert (process.returncode, without_progress(err)) == (141, "")


def _sigint_by_default() -> None:
    """In the child: SIGINT's default action. A suite started in the background by a script
    (``cmd &``) runs with SIGINT ignored, which a child inherits and, as any Unix program, keeps."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_prints_what_was_scheduled_so_far_and_exits_130(tmp_path):
    """A run long enough to show progress (whose first line says the run is under way) is interrupted."""
    objects = [make_node(f"n{i}", cpu="64", pods="500") for i in range(200)]
    objects += [{**make_pod(f"p{i}", cpu="10m"), "metadata": {"name": f"p{i}", "namespace": "default"}} for i in range(30000)]
    manifests = tmp_path / "big.json"
    manifests.write_text("\n".join(map(__import__("json").dumps, objects)))
    process = kubesched("simulate", "-f", str(manifests), stdout=subprocess.DEVNULL, preexec_fn=_sigint_by_default)
    assert process.stderr is not None
    first = process.stderr.readline()
    assert first.startswith("kubesched: ")  # the run is under way (progress is shown after 2 s)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130
    assert "Traceback" not in err
    (summary,) = [line for line in err.splitlines() if line.startswith("interrupted: ")]
    assert summary.endswith(("stopped before scheduling began", "/30000 pods scheduled so far"))


def test_a_port_in_use_is_one_error_line_naming_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = kubesched("apiserver", "--port", str(port), "--kubeconfig-out", str(tmp_path / "kubeconfig"),
                            stdout=subprocess.PIPE)
        _, err = process.communicate(timeout=120)
    assert process.returncode == 1
    assert err == (f"error: cannot listen on 127.0.0.1:{port}: address already in use; another process is listening there: "
                   "pick another --port, or --port 0 for a free one\n")
