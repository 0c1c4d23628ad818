"""The fault-injection run, bounded for CI: 300 pods, every fault of the cycle once (API server
restarts with and without its data, dropped and stalled watches, 410 and too-large answers, leader
kill -9 and SIGSTOP, invalid objects, failing and slow bindings). The full run is ``kubesched
chaos`` (docs/reliability.md)."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import orjson
import pytest

from kubesched.bench.chaos import EXPECTED, ChaosOptions, ChaosRun, clear_workdir, failures
from kubesched.bench.faultproxy import FaultProxy, Faults, Ledger, Write, is_lease_write
from kubesched.cli.main import main


def test_a_bounded_fault_injection_run_loses_nothing_and_never_double_drives(tmp_path):
    opts = ChaosOptions(pods=300, workdir=tmp_path / "chaos", fault_interval=2.0, quiesce_timeout=120.0)
    report = asyncio.run(ChaosRun(opts).run())
    assert failures(report) == [], report
    assert {key: report[key] for key in EXPECTED} == EXPECTED
    injected = report["faults injected"]
    assert all(injected.get(name, 0) >= 1 for name in (
        "API server kill -9 and restart without --data", "API server kill -9 and restart with --data", "leader kill -9",
        "leader SIGSTOP past its lease, SIGCONT", "watches dropped", "watches stalled", "410 burst",
        "too large resource version burst", "invalid objects")), injected
    assert report["invalid objects rejected"] == opts.invalid_objects
    # The failover is measured to the new leader's first accepted binding, through its acquisition.
    [failover] = report["failover after leader kill -9 (s)"]
    [acquired] = report["Lease taken after leader kill -9 (s)"]
    assert failover is not None and acquired is not None and acquired <= failover, report


def test_a_rerun_in_the_same_workdir_starts_without_the_earlier_runs_database_and_logs(tmp_path):
    """A durable API server started on an earlier run's database would hold its pods, bound
    already: the run would check nothing."""
    workdir = tmp_path / "chaos"
    (workdir / "state.sqlite.credentials").mkdir(parents=True)
    for name in ("state.sqlite", "state.sqlite-wal", "state.sqlite.credentials/tokens.csv", "replica-0.log",
                 "replica-0.kubeconfig", "kubeconfig.yaml", "notes.txt"):
        (workdir / name).write_text("from an earlier run")
    clear_workdir(workdir)
    assert sorted(p.name for p in workdir.iterdir()) == ["notes.txt"]


def test_a_lease_write_belongs_to_the_epoch_it_was_sent_in():
    """A renewal the old API server answers while it is being replaced by one without its data
    keeps the old epoch: tagged with the new one, its resourceVersion (of the old numbering) would
    sort after the new cluster's acquisition and turn the new leader's bindings into binds without
    the Lease."""
    ledger = Ledger()
    proxy = FaultProxy("replica-0", "http://127.0.0.1:1", Faults(), ledger, random.Random(0))

    async def answered_during_the_restart(request: object, body: bytes) -> tuple[int, bytes, str]:
        ledger.epoch += 1  # the harness starts the new epoch while this renewal is in flight
        lease = {"metadata": {"resourceVersion": "184"}, "spec": {"holderIdentity": "old"}}
        return 200, orjson.dumps(lease), "application/json"

    proxy._send = answered_during_the_restart
    request = SimpleNamespace(method="PUT", path="/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler")
    asyncio.run(proxy._forward(request, b"{}"))
    [write] = ledger.lease_writes
    assert (write.subject, write.order) == ("old", (0, 184))


def test_a_late_answer_to_the_old_leaders_last_renewal_is_not_taken_for_an_acquisition(tmp_path):
    """The API server applied the old leader's renewal (resourceVersion 6) before the new leader's
    acquisition (7), but the answer reached the proxy after it: the new leader's bindings are
    its own, and only the acquisition counts as a takeover."""
    run = ChaosRun(ChaosOptions(workdir=tmp_path / "chaos"))
    run.ledger.lease_writes += [
        Write("replica-0", "old", sent=9.9, answered=10.0, order=(1, 5)),
        Write("replica-1", "new", sent=10.4, answered=10.5, order=(1, 7)),
        Write("replica-0", "old", sent=10.2, answered=11.0, order=(1, 6)),
    ]
    run.ledger.bindings.append(Write("replica-1", "default/pod-1", sent=11.5, answered=11.6))
    assert [(w.replica, w.subject) for w in run._acquisitions()] == [("replica-0", "old"), ("replica-1", "new")]
    assert run.binds_without_lease() == ([], 0)


@pytest.mark.parametrize(("method", "path", "recorded"), [
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler", True),
    # A cluster restarted without its data has no Lease: the first candidate creates it, and that
    # create is its acquisition (left out, the new leader's bindings looked like another's).
    ("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", True),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler", False),
    ("POST", "/api/v1/namespaces/default/pods/p/binding", False),
    ("PUT", "/api/v1/namespaces/default/pods/p/status", False),
])
def test_the_proxy_records_lease_updates_and_creates(method, path, recorded):
    assert is_lease_write(method, path) is recorded


@pytest.mark.parametrize(("argv", "message"), [
    (["--pods", "0"], "error: --pods must be at least 1, got 0"),
    (["--rounds", "-1"], "error: --rounds must be at least 1, got -1"),
    (["--fault-interval", "0"], "error: --fault-interval must be positive, got 0"),
    (["--lease", "15,10"], "error: --lease: want three numbers of seconds separated by commas (DURATION,RENEW,RETRY), got '15,10'"),
    (["--lease", "10,10,2"], "error: --lease 10,10,2: leaseDuration must be greater than renewDeadline"),
    (["--lease", "15,2,2"], "error: --lease 15,2,2: renewDeadline must be greater than retryPeriod*JitterFactor"),
])
def test_kubesched_chaos_refuses_bad_options_naming_the_flag_before_starting_anything(argv, message, tmp_path, capsys):
    assert main(["chaos", "--workdir", str(tmp_path / "chaos"), *argv]) == 1
    assert capsys.readouterr().err.strip() == message
    assert not (tmp_path / "chaos").exists()
