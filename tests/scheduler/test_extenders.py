"""Scheduler extenders over real HTTP on loopback, in ``simulate`` (upstream's extender tests:
``TestSchedulerWithExtenders``, ``TestIsInterested``, the preemption and binding ones, translated):
filter verdicts and their FitError reasons, prioritize weights, bind and preempt extenders,
ignorable and non-ignorable failures and timeouts, managed resources."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.config import default_configuration
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.extender import HTTPExtender, build_extenders
from kubesched.scheduler.framework.extender import ExtenderError
from kubesched.simulator.explain import attempt_to_json
from kubesched.simulator.simulate import SimulationResult, simulate
from kubesched.utils.certs import generate
from tests.helpers import make_node, make_pod
from tests.scheduler.loopback_extender import LoopbackExtender, Reply, keep, node_names, prefer, serving
from tests.scheduler.test_preemption import CLASSES, by_name, condition, events, p

NODES = [make_node("node1"), make_node("node2"), make_node("node3")]
NAMES = ["node1", "node2", "node3"]
GPU = "example.com/gpu"


def pod(name: str = "pod", **kwargs: Any) -> dict:
    out = make_pod(name, cpu="100m", **kwargs)
    out["metadata"].pop("uid")
    return out


def gpu_pod(name: str) -> dict:
    out = pod(name)
    out["spec"]["containers"][0]["resources"]["limits"] = {GPU: "1"}
    out["spec"]["containers"][0]["resources"]["requests"][GPU] = "1"
    return out


def config(*extenders: dict[str, Any]) -> SchedulerConfiguration:
    cfg = default_configuration()
    cfg.extenders = list(extenders)
    return cfg


def run(objects: list[dict], *extenders: dict[str, Any], explain: bool = False) -> SimulationResult:
    return simulate([*NODES, *objects], config(*extenders), seed=1, explain=explain)


def node_of(result: SimulationResult, name: str) -> str | None:
    found = by_name(result, name)
    assert found is not None
    return found["spec"].get("nodeName")


def scheduled_condition(result: SimulationResult, name: str) -> dict:
    found = by_name(result, name)
    assert found is not None
    cond = condition(found, "PodScheduled")
    assert cond is not None
    return cond


# --- filter ------------------------------------------------------------------------------------
@pytest.mark.parametrize("node_cache_capable", [False, True], ids=["whole nodes", "node names only"])
def test_filter_removes_nodes_and_the_pod_lands_on_one_it_kept(node_cache_capable):
    with serving(LoopbackExtender({"filter": keep("node2", failed={"node1": "no GPU left"})})) as ext:
        result = run([pod()], {"urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": node_cache_capable},
                     explain=True)
    assert node_of(result, "pod") == "node2"
    # The explanation names the extender as the filter that removed node1 (with its reason) and node3 (without).
    verdicts = {n["name"]: n["filter"] for n in attempt_to_json(result.attempts[0])["nodes"]}
    assert verdicts == {"node1": {"passed": False, "plugin": ext.url, "code": "Unschedulable", "reasons": ["no GPU left"]},
                        "node2": {"passed": True},
                        "node3": {"passed": False, "plugin": ext.url, "code": "UnschedulableAndUnresolvable", "reasons": []}}
    [args] = ext.args("filter")
    assert args["Pod"]["metadata"]["name"] == "pod"
    if node_cache_capable:
        assert args["Nodes"] is None and sorted(args["NodeNames"]) == ["node1", "node2", "node3"]
    else:
        assert args["NodeNames"] is None and sorted(n["metadata"]["name"] for n in args["Nodes"]["items"]) == NAMES


def test_rejected_nodes_give_their_reasons_in_the_fit_error_unresolvable_ones_first():
    answer = keep(failed={"node1": "no GPU left", "node2": "no GPU left", "node3": "rack is draining"},
                  unresolvable={"node3": "node(s) are not in the GPU pool"})
    with serving(LoopbackExtender({"filter": answer})) as ext:
        result = run([pod()], {"urlPrefix": ext.url, "filterVerb": "filter"})
    assert node_of(result, "pod") is None
    cond = scheduled_condition(result, "pod")
    assert cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/3 nodes are available: 1 node(s) are not in the GPU pool, 2 no GPU left.")


def test_extenders_filter_in_turn_on_what_the_previous_ones_kept():
    """Upstream "test 4": one keeps node2 only, the next node1 only: nothing is left."""
    with serving(LoopbackExtender({"filter": keep("node2")})) as first, \
            serving(LoopbackExtender({"filter": keep("node1")})) as second:
        result = run([pod()], {"urlPrefix": first.url, "filterVerb": "filter"}, {"urlPrefix": second.url, "filterVerb": "filter"})
    assert node_of(result, "pod") is None
    assert node_names(second.args("filter")[0]) == ["node2"]


def test_an_answer_naming_a_node_it_was_not_given_fails_the_attempt():
    claims = {"NodeNames": ["node9"]}
    with serving(LoopbackExtender({"filter": lambda args: claims})) as ext:
        result = run([pod()], {"urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": True})
    cond = scheduled_condition(result, "pod")
    assert cond["reason"] == "SchedulerError"
    assert cond["message"] == f'extender "{ext.url}" claims a filtered node "node9" which is not found in the input node list'


def test_an_error_in_the_answer_fails_the_attempt_with_that_error():
    with serving(LoopbackExtender({"filter": lambda args: {"Error": "GPU inventory unavailable"}})) as ext:
        result = run([pod()], {"urlPrefix": ext.url, "filterVerb": "filter"})
    assert scheduled_condition(result, "pod")["message"] == "GPU inventory unavailable"


# --- failures, timeouts, ignorable ------------------------------------------------------------------
def fail(args: dict[str, Any]) -> Any:
    raise Reply(500)


def test_a_non_ignorable_filter_failure_fails_the_attempt_with_upstreams_message():
    """Upstream "test 1": an extender in error makes scheduling fail."""
    with serving(LoopbackExtender({"filter": fail})) as ext:
        result = run([pod()], {"urlPrefix": ext.url, "filterVerb": "filter"})
    assert node_of(result, "pod") is None
    cond = scheduled_condition(result, "pod")
    assert (cond["reason"], cond["message"]) == ("SchedulerError", f"failed filter with extender at URL {ext.url}filter, code 500")


def test_an_ignorable_filter_failure_is_skipped_and_the_next_extender_decides():
    """Upstream "test 9": the ignorable extender errs, the other keeps node1 only."""
    with serving(LoopbackExtender({"filter": fail})) as broken, serving(LoopbackExtender({"filter": keep("node1")})) as ext:
        result = run([pod()], {"urlPrefix": broken.url, "filterVerb": "filter", "ignorable": True},
                     {"urlPrefix": ext.url, "filterVerb": "filter"})
    assert node_of(result, "pod") == "node1"
    # Ignorable extenders are called last, whatever the configuration's order.
    assert len(ext.args("filter")) == 1 and len(broken.args("filter")) == 1
    assert [e.name for e in build_extenders([{"urlPrefix": broken.url, "ignorable": True}, {"urlPrefix": ext.url}])] == [
        ext.url, broken.url]


@pytest.mark.parametrize("ignorable", [False, True], ids=["non-ignorable fails the attempt", "ignorable is skipped"])
def test_a_filter_that_exceeds_the_http_timeout(ignorable):
    """The first call answers after the timeout, later ones in time: an ignorable extender's pod
    binds at once, another's first attempt fails with the timeout and a retry binds it."""
    slow = LoopbackExtender({"filter": keep("node3")}, delays={"filter": 1.0})
    with serving(slow) as ext:
        result = run([pod()], {"urlPrefix": ext.url, "filterVerb": "filter", "httpTimeout": 0.2, "ignorable": ignorable})
    failures = [e["message"] for e in events(result.store, "FailedScheduling")]
    if ignorable:
        assert failures == []
        assert node_of(result, "pod") in NAMES
    else:
        assert len(failures) == 1
        assert failures[0].startswith(f'Post "{ext.url}filter": context deadline exceeded (Client.Timeout exceeded')
        assert node_of(result, "pod") == "node3"


def test_an_extender_not_interested_in_the_pod_is_not_called():
    """Upstream "test 8": it manages a resource the pod does not ask for."""
    with serving(LoopbackExtender({"filter": fail, "prioritize": fail})) as ext:
        result = run([pod()], {"urlPrefix": ext.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 1,
                               "managedResources": [{"name": GPU}]})
    assert node_of(result, "pod") in NAMES
    assert ext.calls == []


def test_resources_ignored_by_the_scheduler_are_left_to_the_extender():
    """No node advertises the GPU; NodeResourcesFit ignores it and the extender places the pod."""
    with serving(LoopbackExtender({"filter": keep("node2")})) as ext:
        result = run([gpu_pod("trainer")], {"urlPrefix": ext.url, "filterVerb": "filter",
                                            "managedResources": [{"name": GPU, "ignoredByScheduler": True}]})
    assert node_of(result, "trainer") == "node2"
    with serving(LoopbackExtender({"filter": keep("node2")})) as ext:
        result = run([gpu_pod("trainer")], {"urlPrefix": ext.url, "filterVerb": "filter", "managedResources": [{"name": GPU}]})
    assert node_of(result, "trainer") is None
    assert "3 Insufficient example.com/gpu" in scheduled_condition(result, "trainer")["message"]


# --- prioritize -----------------------------------------------------------------------------------
def test_the_heavier_extender_picks_the_winner():
    """Upstream "test 6": weight 1 prefers node1, weight 5 prefers node2: node2 wins."""
    with serving(LoopbackExtender({"prioritize": prefer("node1")})) as light, \
            serving(LoopbackExtender({"prioritize": prefer("node2")})) as heavy:
        result = run([pod()], {"urlPrefix": light.url, "prioritizeVerb": "prioritize", "weight": 1},
                     {"urlPrefix": heavy.url, "prioritizeVerb": "prioritize", "weight": 5}, explain=True)
    assert node_of(result, "pod") == "node2"
    scores = {n["name"]: n["scores"] for n in attempt_to_json(result.attempts[0])["nodes"]}
    # Extender scores are scaled to the plugins' range: score * weight * (100 / 10).
    assert scores["node2"][heavy.url] == {"raw": 10, "normalized": 100, "weight": 5, "weighted": 500}
    assert scores["node2"][light.url] == {"raw": 1, "normalized": 10, "weight": 1, "weighted": 10}


def test_a_prioritize_failure_gives_no_score_ignorable_or_not():
    """Upstream "test 5": a prioritizer in error does not fail scheduling."""
    with serving(LoopbackExtender({"prioritize": fail})) as ext:
        result = run([pod()], {"urlPrefix": ext.url, "prioritizeVerb": "prioritize", "weight": 10})
    assert node_of(result, "pod") in NAMES
    assert len(ext.args("prioritize")) == 1


def test_extender_scores_are_added_to_the_plugins_totals():
    """Upstream "test 7": plugins and extenders score together; here the plugins prefer the empty
    nodes and the extender the busy one, and the highest sum wins."""
    busy = pod("busy", node="node1")
    busy["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    with serving(LoopbackExtender({"prioritize": prefer("node1")})) as ext:
        result = run([busy, pod()], {"urlPrefix": ext.url, "prioritizeVerb": "prioritize", "weight": 2}, explain=True)
    nodes = [n for n in attempt_to_json(result.attempts[-1])["nodes"] if "total" in n]
    for node in nodes:
        assert node["total"] == sum(part["weighted"] for part in node["scores"].values())
        assert node["scores"][ext.url]["weighted"] == (200 if node["name"] == "node1" else 20)
    assert node_of(result, "pod") == max(nodes, key=lambda n: n["total"])["name"]


# --- bind -----------------------------------------------------------------------------------------
def test_a_bind_extender_binds_the_pods_it_manages_in_place_of_default_binder():
    with serving(LoopbackExtender({"bind": lambda args: {}})) as ext:
        result = run([gpu_pod("trainer"), pod("web")],
                     {"urlPrefix": ext.url, "bindVerb": "bind", "managedResources": [{"name": GPU, "ignoredByScheduler": True}]})
    [args] = ext.args("bind")
    trainer = by_name(result, "trainer")
    assert trainer is not None
    assert args == {"PodName": "trainer", "PodNamespace": "default", "PodUID": trainer["metadata"]["uid"], "Node": args["Node"]}
    # DefaultBinder did not bind the extender's pod (the extender's own API call would), but did bind the other.
    assert trainer["spec"].get("nodeName") is None
    assert node_of(result, "web") in NAMES
    scheduled = {e["involvedObject"]["name"]: e["message"] for e in events(result.store, "Scheduled")}
    assert scheduled["trainer"] == f"Successfully assigned default/trainer to {args['Node']}"


@pytest.mark.parametrize(("ignorable", "bound"), [(False, False), (True, True)],
                         ids=["non-ignorable failure fails the binding", "ignorable failure falls back to DefaultBinder"])
def test_a_failing_bind_extender(ignorable, bound):
    with serving(LoopbackExtender({"bind": lambda args: {"Error": "quota service down"}})) as ext:
        result = run([pod()], {"urlPrefix": ext.url, "bindVerb": "bind", "ignorable": ignorable})
    assert (node_of(result, "pod") is not None) is bound
    failures = [e["message"] for e in events(result.store, "FailedScheduling")]
    assert ("quota service down" in failures[0]) if failures else bound


# --- preempt --------------------------------------------------------------------------------------
def full_cluster() -> list[dict]:
    """node1 holds a younger victim (DefaultPreemption's own pick), node2 two older ones."""
    return [*CLASSES,
            p("young", "4", "low", node="node1", started="2024-01-02T00:00:00Z"),
            p("old-a", "2", "low", node="node2", started="2024-01-01T00:00:00Z"),
            p("old-b", "2", "low", node="node2", started="2024-01-01T00:00:00Z"),
            p("filler", "4", "high", node="node3"),
            p("preemptor", "2", "high")]


def only_on_node2(args: dict[str, Any]) -> dict[str, Any]:
    """Accept node2 only, and only one of its victims (the first sent)."""
    if "NodeNameToMetaVictims" in args and args["NodeNameToMetaVictims"] is not None:
        victims = args["NodeNameToMetaVictims"]["node2"]["Pods"]
    else:
        victims = [{"UID": v["metadata"]["uid"]} for v in args["NodeNameToVictims"]["node2"]["Pods"]]
    return {"NodeNameToMetaVictims": {"node2": {"Pods": victims[:1], "NumPDBViolations": 0}}}


@pytest.mark.parametrize("node_cache_capable", [False, True], ids=["whole pods", "pod UIDs only"])
def test_a_preempt_extender_narrows_the_candidates_and_their_victims(node_cache_capable):
    with serving(LoopbackExtender({"preempt": only_on_node2})) as ext:
        result = simulate([make_node("node1"), make_node("node2"), make_node("node3"), *full_cluster()],
                          config({"urlPrefix": ext.url, "preemptVerb": "preempt", "nodeCacheCapable": node_cache_capable}),
                          seed=1)
    [args] = ext.args("preempt")
    sent = args["NodeNameToMetaVictims"] if node_cache_capable else args["NodeNameToVictims"]
    assert sorted(sent) == ["node1", "node2"]
    [record] = result.preemptions
    assert record.node == "node2" and len(record.victims) == 1
    assert node_of(result, "preemptor") == "node2"
    assert by_name(result, "young") is not None


def test_without_a_preempt_extender_default_preemption_picks_on_its_own():
    result = simulate([make_node("node1"), make_node("node2"), make_node("node3"), *full_cluster()], default_configuration(),
                      seed=1)
    [record] = result.preemptions
    assert record.node == "node1"


@pytest.mark.parametrize(("answer", "ignorable", "message"), [
    (fail, False, "failed preempt with extender at URL {url}preempt, code 500"),
    (lambda args: {"NodeNameToMetaVictims": {"node2": {"Pods": []}}}, False, 'expected at least one victim pod on node "node2"'),
    (lambda args: {"NodeNameToMetaVictims": {"node2": {"Pods": [{"UID": "not-there"}]}}}, False,
     "extender: {url} claims to preempt pod (UID: not-there) on node: node2, but the pod is not found on that node"),
    (fail, True, ""),
], ids=["non-ignorable error fails preemption", "a node without victims fails preemption", "a pod not on the node",
        "ignorable error is skipped"])
def test_preempt_extender_failures(answer, ignorable, message):
    with serving(LoopbackExtender({"preempt": answer})) as ext:
        result = simulate([make_node("node1"), make_node("node2"), make_node("node3"), *full_cluster()],
                          config({"urlPrefix": ext.url, "preemptVerb": "preempt", "ignorable": ignorable}), seed=1)
    first = result.preemption_attempts[0]
    if ignorable:
        assert first.node == "node1"
    else:
        assert first.node == "" and first.message == message.format(url=ext.url)


# --- HTTPS ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A serving pair for 127.0.0.1 and another, unrelated certificate."""
    out: dict[str, str] = {}
    directory = tmp_path_factory.mktemp("tls")
    for name in ("server", "other"):
        cert, key = generate("localhost")
        (directory / f"{name}.crt").write_bytes(cert)
        (directory / f"{name}.key").write_bytes(key)
        out[name] = str(directory / name)
    return out


@pytest.mark.parametrize(("tls", "verified"), [
    ({}, True),
    ({"caData": "server"}, True),
    ({"caFile": "server"}, True),
    ({"caData": "other"}, False),
    ({"caData": "server", "serverName": "localhost"}, True),
    ({"caData": "server", "serverName": "elsewhere.example"}, False),
], ids=["without a CA the server is not verified", "CA data", "CA file", "a CA that did not sign the server's certificate",
        "a server name the certificate carries", "a server name it does not carry"])
def test_an_https_extender(certificates, tls, verified):
    def field(key: str, value: str) -> str:
        if key == "caData":
            return base64.b64encode(Path(certificates[value] + ".crt").read_bytes()).decode()
        return certificates[value] + ".crt" if key == "caFile" else value

    tls_config = {k: field(k, v) for k, v in tls.items()}
    server = certificates["server"]
    with serving(LoopbackExtender({"filter": keep("node2")}), tls=(server + ".crt", server + ".key")) as ext:
        result = run([pod()], {"urlPrefix": ext.url, "filterVerb": "filter", "enableHTTPS": True, "tlsConfig": tls_config})
    if verified:
        assert node_of(result, "pod") == "node2"
    else:
        assert node_of(result, "pod") is None
        assert scheduled_condition(result, "pod")["message"].startswith(f'Post "{ext.url}filter": tls: failed to verify certificate: ')


@pytest.mark.parametrize(("tls", "message"), [
    ({"caData": "%%%"}, "tlsConfig.caData: not base64"),
    ({"caData": base64.b64encode(b"not a certificate").decode()}, "tlsConfig.caData: no usable CA certificate"),
    ({"certFile": "/nonexistent/client.crt", "keyFile": "/nonexistent/client.key"},
     "tlsConfig.certFile/keyFile: no usable client certificate and key"),
], ids=["CA data that is not base64", "CA data that is no certificate", "client certificate files that do not exist"])
def test_bad_tls_settings_name_the_extender_and_the_field(tls, message):
    with pytest.raises(ExtenderError) as e:
        build_extenders([{"urlPrefix": "http://a/"}, {"urlPrefix": "https://b/", "tlsConfig": tls}])
    assert str(e.value).startswith(f"extenders[1] (https://b/): {message}")


# --- the extender's own decisions -----------------------------------------------------------------
@pytest.mark.parametrize(("managed", "resources", "interested"), [
    ([], {}, True),
    (["memory"], {}, False),
    (["memory"], {"containers": {"requests": {"memory": "0"}}}, True),
    (["memory"], {"containers": {"limits": {"memory": "0"}}}, True),
    (["memory"], {"initContainers": {"requests": {"memory": "0"}}}, True),
], ids=["empty managed resources", "managed memory, empty resources", "managed memory, container memory with requests",
        "managed memory, container memory with limits", "managed memory, init container memory"])
def test_is_interested(managed, resources, interested):
    spec: dict[str, Any] = {"containers": [{"name": "app"}]}
    for where, res in resources.items():
        spec.setdefault(where, [{"name": "app"}])[0]["resources"] = res
    extender = HTTPExtender({"urlPrefix": "http://x/", "managedResources": [{"name": m} for m in managed]})
    assert extender.is_interested(PodInfo({"metadata": {"name": "p", "namespace": "d", "uid": "u"}, "spec": spec})) is interested


def test_an_unreachable_extender_is_reported_with_its_url():
    extender = HTTPExtender({"urlPrefix": "http://127.0.0.1:1/", "filterVerb": "filter"})

    async def call() -> None:
        try:
            await extender.filter(PodInfo(make_pod("p")), [])
        finally:
            await extender.close()

    with pytest.raises(ExtenderError, match=r'^Post "http://127\.0\.0\.1:1/filter": dial tcp 127\.0\.0\.1:1: connect: connection refused$'):
        asyncio.run(call())
