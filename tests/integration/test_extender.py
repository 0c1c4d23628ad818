"""Upstream's test/integration/scheduler/extender/extender_test.go, end to end on the embedded
cluster: TestSchedulerExtender, with its three extenders served over real HTTP on loopback.

Upstream's extenders are table-free functions of the nodes they are sent: ``machine1_2_3Predicate``
and ``machine2_3_5Predicate`` keep those machines (the others are "extender failed: <name>"),
``machine2Prioritizer`` and ``machine3Prioritizer`` give that machine 10 and the others 1, each
multiplied by the prioritizer's own weight inside the extender. The second extender binds the pods
it is interested in through the API (``pods/binding``), as upstream's does through its clientset;
the third is node-cache-capable and is sent node names only."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubesched.api.apierrors import APIError
from tests.integration.embedded import Cluster, configuration, embedded, run
from tests.integration.wrappers import node, pod
from tests.scheduler.loopback_extender import LoopbackExtender, node_names, serving

EXTENDED_RESOURCE = "foo.com/bar"
Answer = Callable[[dict[str, Any]], Any]


def predicate_filter(name: str, machines: set[str]) -> Answer:
    """Upstream's ``Extender.Filter`` with one predicate keeping ``machines``: a NodeList back
    when sent Nodes, names back when node-cache-capable (``filterUsingNodeCache``)."""

    def answer(args: dict[str, Any]) -> dict[str, Any]:
        sent = node_names(args)
        failed = {n: f"extender failed: {name}" for n in sent if n not in machines}
        if args.get("NodeNames") is not None:
            return {"Nodes": None, "NodeNames": [n for n in sent if n in machines], "FailedNodes": failed}
        kept = [n for n in args["Nodes"]["items"] if n["metadata"]["name"] in machines]
        return {"Nodes": {"items": kept}, "NodeNames": None, "FailedNodes": failed}

    return answer


def prioritizer(best: str, weight: int) -> Answer:
    """Upstream's ``Extender.Prioritize`` with one prioritizer favouring ``best`` (10, else 1),
    times the prioritizer's ``weight``."""
    return lambda args: [{"Host": n, "Score": (10 if n == best else 1) * weight} for n in node_names(args)]


def binder(cluster: Cluster, loop: asyncio.AbstractEventLoop) -> Answer:
    """Upstream's ``Extender.Bind``: bind through the API server. The handler runs in the HTTP
    server's thread, so the binding is handed to the cluster's loop and awaited there."""

    def answer(args: dict[str, Any]) -> dict[str, Any]:
        async def bind() -> None:
            cluster.store.bind(args["PodNamespace"], args["PodName"], args["Node"], uid=args["PodUID"])

        try:
            asyncio.run_coroutine_threadsafe(bind(), loop).result(timeout=30)
        except APIError as e:  # the answer carries the API server's refusal, as upstream's does
            return {"Error": str(e)}
        return {"Error": ""}

    return answer


def test_scheduler_extender() -> None:
    """Extender 1 keeps machines 1-3 and favours machine2 (weight 3), extender 2 keeps machines 2,
    3 and 5, favours machine3 (weight 4) and binds, extender 3 (node names only) keeps machines 1-3
    and favours machine2 five times over (weight 10): the pod, asking for a resource extender 2
    manages and the scheduler ignores, lands on machine2, bound by extender 2."""

    async def scenario() -> tuple[str, list[str], list[str], bool]:
        loop = asyncio.get_running_loop()
        extender2 = LoopbackExtender({})
        with serving(LoopbackExtender({"filter": predicate_filter("extender1", {"machine1", "machine2", "machine3"}),
                                       "prioritize": prioritizer("machine2", 1)})) as es1, \
             serving(extender2) as es2, \
             serving(LoopbackExtender({"filter": predicate_filter("extender3", {"machine1", "machine2", "machine3"}),
                                       "prioritize": prioritizer("machine2", 5)})) as es3:
            config = configuration(extenders=[
                {"urlPrefix": es1.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 3},
                {"urlPrefix": es2.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "bindVerb": "bind",
                 "weight": 4, "managedResources": [{"name": EXTENDED_RESOURCE, "ignoredByScheduler": True}]},
                {"urlPrefix": es3.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 10,
                 "nodeCacheCapable": True},
            ])
            async with embedded(config, [node(f"machine{i}") for i in range(1, 6)]) as cluster:
                extender2.verbs.update({"filter": predicate_filter("extender2", {"machine2", "machine3", "machine5"}),
                                        "prioritize": prioritizer("machine3", 1), "bind": binder(cluster, loop)})
                test_pod = pod("extender-test-pod")
                test_pod["spec"]["containers"][0]["resources"] = {"limits": {EXTENDED_RESOURCE: "1"}}
                cluster.create(test_pod)
                where = await cluster.scheduled("extender-test-pod")
                cluster.delete("Pod", "extender-test-pod", "default")
                gone = not cluster.exists("extender-test-pod")
            bound = [args["Node"] for args in es2.args("bind")]
            third_sent = [n for args in es3.args("filter") for n in (args.get("NodeNames") or [])]
        return where, bound, third_sent, gone

    where, bound, third_sent, gone = run(scenario)
    assert where == "machine2"
    assert bound == ["machine2"]
    # Each extender filters what the previous ones kept; the node-cache-capable one gets names only.
    assert third_sent == ["machine2", "machine3"]
    assert gone

