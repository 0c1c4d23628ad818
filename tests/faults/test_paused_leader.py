"""A leader paused (SIGSTOP) past its lease while a standby takes the Lease must not bind a single pod
once resumed (SIGCONT): it cannot prove it still holds the Lease (its last renewal is older than
the renew deadline on its monotonic clock), so it stops scheduling at once and exits with status 1.

The standby serves another profile on the same Lease, so any binding of the leader's pods after
the takeover can only come from the paused leader."""

from __future__ import annotations

import signal

from tests.run.harness import FAST_LEASE, NODE, POD, Scheduler, scheduler_config, until

LEASE_SECONDS = float(FAST_LEASE["leaseDuration"].rstrip("s"))


def pods(*names: str, scheduler: str = "kubesched") -> str:
    return "---".join(POD.format(name=n, cpu="10m", scheduler=scheduler) for n in names)


def test_a_leader_resumed_after_a_standby_took_the_lease_binds_nothing_and_exits(api, processes, tmp_path):
    api.start()
    leader = Scheduler(tmp_path, "leader", scheduler_config(tmp_path / "leader.yaml", leader_elect=True), api.kubeconfig)
    standby = Scheduler(tmp_path, "standby", scheduler_config(tmp_path / "standby.yaml", leader_elect=True,
                                                              scheduler_name="standby-profile"), api.kubeconfig)
    processes.extend([leader, standby])
    leader.start()
    until(leader.leading, 15, lambda: f"the first replica never led:\n{leader.output()}")
    standby.start()
    holder = api.lease("kubesched")["spec"]["holderIdentity"]
    api.apply(NODE.format(name="n1", cpu="64"))
    api.apply(pods("warm-up"))
    until(lambda: api.nodes_of_pods().get("warm-up"), 20, lambda: f"the leader did not bind:\n{leader.output()}")

    leader.signal(signal.SIGSTOP)
    until(standby.leading, LEASE_SECONDS * 4, lambda: f"the standby never took over:\n{standby.output()}")
    assert api.lease("kubesched")["spec"]["holderIdentity"] not in ("", holder)
    paused = [f"p{i}" for i in range(20)]
    api.apply(pods(*paused))  # the paused leader's informers will deliver these the moment it resumes
    api.apply(pods("standby-pod", scheduler="standby-profile"))
    until(lambda: api.nodes_of_pods().get("standby-pod"), 20, lambda: f"the new leader did not bind:\n{standby.output()}")

    leader.signal(signal.SIGCONT)
    assert leader.wait(20) == 1, leader.output()
    placed = api.nodes_of_pods()
    assert [name for name in paused if placed.get(name)] == [], f"bound by a replica without the Lease:\n{leader.output()}"
    assert "another replica may be leading" in leader.output() or "Leaderelection lost" in leader.output()
