"""A ``kubesched apiserver`` killed and restarted without ``--data`` on the same port while
``kubesched run`` runs: the new server is another cluster, with resourceVersions starting over. The
scheduler must notice (the server's identity changed), relist, and bind the new pods only to nodes
that exist in the new cluster; its cache ends equal to the new server's state."""

from __future__ import annotations

from tests.faults.conftest import InMemoryAPIServer
from tests.run.harness import NODE, POD, Scheduler, scheduler_config, until


def nodes(*names: str, cpu: str = "8") -> str:
    return "---".join(NODE.format(name=n, cpu=cpu) for n in names)


def pods(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def manifests(names: list[str]) -> str:
    return "---".join(POD.format(name=n, cpu="10m", scheduler="kubesched") for n in names)


def test_a_scheduler_binds_no_pod_to_a_node_of_the_cluster_an_in_memory_api_server_lost(memory_api: InMemoryAPIServer,
                                                                                        processes, tmp_path):
    api = memory_api
    api.start()
    sched = Scheduler(tmp_path, "sched", scheduler_config(tmp_path / "sched.yaml"), api.write_kubeconfig())
    processes.append(sched)
    sched.start()
    before = pods("old-", 30)
    api.apply(nodes("gone-1", "gone-2"))
    api.apply(manifests(before))  # many writes: the old server's resourceVersion runs well ahead
    until(lambda: all(api.nodes_of_pods().get(n) for n in before), 30, lambda: f"pods were not bound:\n{sched.output()}")

    api.kill()
    api.start()  # same port, an empty cluster whose resourceVersions start over
    after = pods("new-", 20)
    api.apply(nodes("fresh-1", "fresh-2"))
    api.apply(manifests(after))

    placed = until(lambda: (p := api.nodes_of_pods()) and all(p.get(n) for n in after) and p, 40,
                   lambda: f"the new pods were not bound:\n{api.nodes_of_pods()}\n{sched.output()}")
    assert {placed[n] for n in after} <= {"fresh-1", "fresh-2"}, placed

    def cache_matches() -> dict | None:
        dump = sched.json("/debug/cache")
        present = sorted(name for name, info in dump["nodes"].items() if info["present"])
        cached = {p["name"] for info in dump["nodes"].values() for p in info["pods"]}
        return dump if present == ["fresh-1", "fresh-2"] and cached == set(after) else None

    dump = until(cache_matches, 20, lambda: f"the cache kept the lost cluster:\n{sched.json('/debug/cache')}")
    assert not any(dump["comparer"].values())
    assert sched.metric("scheduler_informer_relists_total", kind="Node", reason="server-changed") >= 1
