"""The embedded object store behaves like kube-apiserver for what the scheduler observes."""

import asyncio

import pytest

from kubesched.api.apierrors import AlreadyExists, Conflict, Forbidden, Gone, Invalid, NotFound
from kubesched.api.kinds import NAMESPACE, NODE, POD, PRIORITY_CLASS, kind_named
from kubesched.apiserver.store import ObjectStore
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import ManualClock


def new_pod(name="p", **spec):
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


@pytest.fixture
def store():
    return ObjectStore(ManualClock(), seed=1)


def test_create_assigns_identity_and_increasing_resource_versions(store):
    a = store.create(POD, new_pod("a"))
    b = store.create(POD, new_pod("b"))
    assert a["metadata"]["uid"] and a["metadata"]["creationTimestamp"]
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    with pytest.raises(AlreadyExists, match='pods "a" already exists'):
        store.create(POD, new_pod("a"))


def test_pod_defaulting_and_admission(store):
    pod = store.create(POD, new_pod(containers=[{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}]))
    spec = pod["spec"]
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["priority"] == 0
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert {t["key"] for t in spec["tolerations"]} == {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    assert pod["status"]["phase"] == "Pending"


def test_a_gated_pod_is_created_with_the_scheduling_gated_condition(store):
    gated = store.create(POD, new_pod("gated", schedulingGates=[{"name": "example.com/wait"}]))
    (condition,) = gated["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == \
        ("PodScheduled", "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")
    assert "conditions" not in store.create(POD, new_pod("free"))["status"]
    told = new_pod("told", schedulingGates=[{"name": "example.com/wait"}])
    told["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    assert [c["reason"] for c in store.create(POD, told)["status"]["conditions"]] == ["Unschedulable"]


def test_priority_class_resolution(store):
    store.create(PRIORITY_CLASS, {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"})
    store.create(PRIORITY_CLASS, {"metadata": {"name": "default"}, "value": 10, "globalDefault": True})
    high = store.create(POD, new_pod("h", priorityClassName="high"))
    assert (high["spec"]["priority"], high["spec"]["preemptionPolicy"]) == (1000, "Never")
    plain = store.create(POD, new_pod("d"))
    assert (plain["spec"]["priority"], plain["spec"]["priorityClassName"]) == (10, "default")
    critical = store.create(POD, new_pod("c", priorityClassName="system-node-critical"))
    assert critical["spec"]["priority"] == 2000001000
    with pytest.raises(Forbidden, match="no PriorityClass with name missing was found"):
        store.create(POD, new_pod("x", priorityClassName="missing"))


def test_namespaces_must_exist_unless_auto_created(store):
    with pytest.raises(NotFound, match='namespaces "team" not found'):
        store.create(POD, {**new_pod(), "metadata": {"name": "p", "namespace": "team"}})
    auto = ObjectStore(ManualClock(), auto_create_namespaces=True)
    auto.create(POD, {**new_pod(), "metadata": {"name": "p", "namespace": "team"}})
    assert auto.try_get(NAMESPACE, None, "team") is not None


def test_optimistic_concurrency(store):
    node = store.create(NODE, {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "1"}}})
    stale = dict(node, metadata=dict(node["metadata"]))
    store.update(NODE, dict(node, metadata=dict(node["metadata"]), spec={"unschedulable": True}))
    with pytest.raises(Conflict, match="the object has been modified"):
        store.update(NODE, stale)


def test_binding_rules(store):
    store.create(POD, new_pod("p"))
    store.create(POD, new_pod("gated", schedulingGates=[{"name": "g"}]))
    bound = store.bind("default", "p", "n1")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["status"]["conditions"][0]["type"] == "PodScheduled"
    with pytest.raises(Conflict, match='pod p is already assigned to node "n1"'):
        store.bind("default", "p", "n2")
    with pytest.raises(Conflict, match=r"non-empty \.spec\.schedulingGates"):
        store.bind("default", "gated", "n1")


def test_validation_rejects_bad_objects(store):
    with pytest.raises(Invalid, match=r"spec.containers\[0\].image: Required value"):
        store.create(POD, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})


def test_watch_replays_from_a_resource_version_and_expires_old_ones():
    store = ObjectStore(ManualClock(), history_limit=3)
    for i in range(5):
        store.create(POD, new_pod(f"p{i}"))
    rv = store.rv
    with pytest.raises(Gone, match="too old resource version"):
        store.watch(POD, since=1)
    w = store.watch(POD, since=rv - 1)
    assert [e.object["metadata"]["name"] for e in w.drain()] == ["p4"]
    w.stop()


def test_watch_resumed_mid_history_replays_the_later_events_of_its_kind_in_order(store):
    store.create(POD, new_pod("before"))
    since = store.rv
    for i in range(3):
        store.create(POD, new_pod(f"p{i}"))
        store.create(NODE, {"metadata": {"name": f"n{i}"}})
    store.bind("default", "p0", "n0")
    w = store.watch(POD, since=since)
    assert [(e.type, e.object["metadata"]["name"]) for e in w.drain()] == \
        [("ADDED", "p0"), ("ADDED", "p1"), ("ADDED", "p2"), ("MODIFIED", "p0")]
    assert store.watch(POD, since=store.rv).drain() == []


def test_watch_with_predicate_turns_selector_changes_into_added_and_deleted(store):
    store.create(POD, new_pod("p"))
    w = store.watch(POD, since=store.rv, predicate=lambda o: bool(o["spec"].get("nodeName")))
    store.bind("default", "p", "n1")
    store.delete(POD, "default", "p", grace_period=0)
    assert [e.type for e in w.drain()] == ["ADDED", "DELETED"]


def test_bound_pods_are_deleted_gracefully_on_the_clock():
    async def scenario():
        from kubesched.utils.clock import LoopClock

        store = ObjectStore(LoopClock(asyncio.get_running_loop()))
        store.create(POD, new_pod("p", terminationGracePeriodSeconds=30))
        store.bind("default", "p", "n1")
        store.delete(POD, "default", "p")
        terminating = store.get(POD, "default", "p")
        assert terminating["metadata"]["deletionTimestamp"]
        await asyncio.sleep(29)
        assert store.try_get(POD, "default", "p") is not None
        await asyncio.sleep(2)
        return store.try_get(POD, "default", "p")

    assert run_virtual(scenario()) is None


def test_namespace_deletion_cascades(store):
    store.create(NAMESPACE, {"metadata": {"name": "team"}})
    store.create(POD, {**new_pod(), "metadata": {"name": "p", "namespace": "team"}})
    store.delete(NAMESPACE, None, "team")
    assert store.try_get(POD, "team", "p") is None
    assert store.try_get(NAMESPACE, None, "team") is None


def test_namespaces_carry_their_name_label():
    store = ObjectStore(ManualClock(), auto_create_namespaces=True)
    store.create(NAMESPACE, {"metadata": {"name": "team", "labels": {"tier": "a"}}})
    store.create(NAMESPACE, {"metadata": {"generateName": "gen-"}})
    store.create(POD, {**new_pod(), "metadata": {"name": "p", "namespace": "auto"}})
    for ns in store.iter_all(NAMESPACE):
        assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == ns["metadata"]["name"]
    assert {"default", "kube-system", "team", "auto"} <= {ns["metadata"]["name"] for ns in store.iter_all(NAMESPACE)}
    assert store.get(NAMESPACE, None, "team")["metadata"]["labels"]["tier"] == "a"


def test_admission_names_a_pod_by_its_generate_name(store):
    with pytest.raises(Forbidden) as e:
        store.create(POD, {**new_pod(priorityClassName="missing"), "metadata": {"generateName": "web-5d4f-"}})
    assert e.value.message == 'pods "web-5d4f-" is forbidden: no PriorityClass with name missing was found'
    assert store.create(POD, {**new_pod(), "metadata": {"generateName": "web-"}})["metadata"]["name"].startswith("web-")


PDB = kind_named("PodDisruptionBudget")
DEPLOYMENT = kind_named("Deployment")


def deployment(labels: dict | None = None) -> dict:
    return {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "d"}},
                                                "template": {"metadata": {"labels": labels or {"app": "d"}},
                                                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


@pytest.mark.parametrize(("kind", "obj"), [
    pytest.param(POD, new_pod(), id="pod"),
    pytest.param(DEPLOYMENT, deployment(), id="deployment"),
    pytest.param(PDB, {"metadata": {"name": "b"}, "spec": {"minAvailable": 1}}, id="pdb"),
])
def test_an_update_of_the_main_resource_keeps_the_status(store, kind, obj):
    created = store.create(kind, obj)
    store.update(kind, {**created, "status": {"phase": "Succeeded", "disruptionsAllowed": 5}}, status_only=True)
    written = store.get(kind, "default", created["metadata"]["name"])
    stale = {**created, "metadata": {**created["metadata"], "labels": {"x": "y"}}}
    stale["metadata"].pop("resourceVersion")
    updated = store.update(kind, {**stale, "status": {"phase": "Failed"}})
    assert updated["status"] == written["status"] and updated["metadata"]["labels"] == {"x": "y"}


def test_workloads_are_defaulted_and_validated(store):
    created = store.create(DEPLOYMENT, deployment())
    assert (created["spec"]["replicas"], created["spec"]["strategy"]["type"]) == (1, "RollingUpdate")
    with pytest.raises(Invalid, match="`selector` does not match template `labels`"):
        store.create(DEPLOYMENT, {**deployment({"app": "other"}), "metadata": {"name": "e"}})
    broken = {**created, "spec": {**created["spec"], "template": deployment({"app": "other"})["spec"]["template"]}}
    with pytest.raises(Invalid, match="`selector` does not match template `labels`"):
        store.update(DEPLOYMENT, broken)
    with_null = {**created, "spec": {**created["spec"], "replicas": None}}
    assert store.update(DEPLOYMENT, with_null)["spec"]["replicas"] == 1


def gated_pod() -> dict:
    return new_pod("p", schedulingGates=[{"name": "a"}, {"name": "b"}], nodeSelector={"zone": "a"},
                   activeDeadlineSeconds=100, tolerations=[{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                                           "tolerationSeconds": 10}])


def change_spec(pod: dict, **changes) -> dict:
    return {**pod, "spec": {**pod["spec"], **changes}}


@pytest.mark.parametrize(("change", "error"), [
    pytest.param(lambda s: change_spec(s, containers=[{**s["spec"]["containers"][0], "image": "nginx:2"}]), None, id="image"),
    pytest.param(lambda s: change_spec(s, activeDeadlineSeconds=50), None, id="lower deadline"),
    pytest.param(lambda s: change_spec(s, activeDeadlineSeconds=200),
                 "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value", id="raise deadline"),
    pytest.param(lambda s: change_spec(s, tolerations=[{**s["spec"]["tolerations"][0], "tolerationSeconds": 5},
                                                       *s["spec"]["tolerations"][1:], {"key": "new", "operator": "Exists"}]),
                 None, id="add toleration, change seconds"),
    pytest.param(lambda s: change_spec(s, tolerations=s["spec"]["tolerations"][1:]),
                 "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds",
                 id="remove toleration"),
    pytest.param(lambda s: change_spec(s, schedulingGates=[{"name": "b"}]), None, id="remove gate"),
    pytest.param(lambda s: change_spec(s, schedulingGates=[{"name": "a"}, {"name": "b"}, {"name": "c"}]),
                 "spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but found new scheduling gate 'c'",
                 id="add gate"),
    pytest.param(lambda s: change_spec(s, nodeSelector={"zone": "a", "disk": "ssd"}), None, id="gated: narrow nodeSelector"),
    pytest.param(lambda s: change_spec(s, nodeSelector={"zone": "b"}),
                 'spec.nodeSelector: Invalid value: map[string]string{"zone":"b"}: only additions to spec.nodeSelector are '
                 "allowed (no mutations or deletions)", id="gated: change nodeSelector"),
    pytest.param(lambda s: change_spec(s, nodeName="n1"),
                 "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`", id="nodeName"),
    pytest.param(lambda s: change_spec(s, containers=[*s["spec"]["containers"], {"name": "d", "image": "i"}]),
                 "spec.containers: Forbidden: pod updates may not add or remove containers", id="add container"),
])
def test_pod_spec_updates_are_limited_to_the_mutable_fields(store, change, error):
    pod = store.create(POD, gated_pod())
    if error is None:
        store.update(POD, change(pod))
        return
    with pytest.raises(Invalid) as e:
        store.update(POD, change(pod))
    assert e.value.message.startswith(f'Pod "p" is invalid: {error}')
    assert e.value.causes[0]["reason"] == {"I": "FieldValueInvalid", "F": "FieldValueForbidden"}[error.split(": ")[1][0]]


def test_a_pod_update_may_leave_out_what_admission_and_defaulting_set(store):
    pod = store.create(POD, new_pod("p"))
    sent = change_spec(pod)
    for field in ("priority", "preemptionPolicy", "tolerations", "securityContext", "schedulerName"):
        sent["spec"].pop(field)
    assert store.update(POD, sent)["spec"] == pod["spec"]


def test_only_one_priority_class_may_be_the_global_default(store):
    store.create(PRIORITY_CLASS, {"metadata": {"name": "first"}, "value": 10, "globalDefault": True})
    with pytest.raises(Forbidden) as e:
        store.create(PRIORITY_CLASS, {"metadata": {"name": "second"}, "value": 20, "globalDefault": True})
    assert e.value.code == 403
    assert e.value.message == ('priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass first is already '
                               "marked as default. Only one default can exist")
    other = store.create(PRIORITY_CLASS, {"metadata": {"name": "other"}, "value": 20})
    with pytest.raises(Forbidden, match="PriorityClass first is already marked as default"):
        store.update(PRIORITY_CLASS, {**other, "globalDefault": True})
    first = store.get(PRIORITY_CLASS, None, "first")
    assert store.update(PRIORITY_CLASS, {**first, "description": "still the default"})["globalDefault"]


def test_mutate_writes_the_status_through_its_subresource(store):
    pod = store.create(POD, new_pod("p"))

    def change(p: dict) -> None:
        p["metadata"]["labels"] = {"a": "b"}
        p["status"]["phase"] = "Running"

    updated = store.mutate(POD, "default", "p", change)
    assert (updated["metadata"]["labels"], updated["status"]["phase"]) == ({"a": "b"}, "Running")
    assert int(updated["metadata"]["resourceVersion"]) == int(pod["metadata"]["resourceVersion"]) + 2


def test_invalid_causes_use_the_api_cause_types(store):
    with pytest.raises(Invalid) as e:
        store.create(POD, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}],
                                                               "tolerations": [{"key": "k", "operator": "Sometimes"}]}})
    assert [c["reason"] for c in e.value.causes] == ["FieldValueRequired", "FieldValueNotSupported"]
    assert e.value.causes[0] == {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers[0].image"}


@pytest.mark.parametrize(("first", "second", "left"), [
    pytest.param(-5, None, 1, id="a negative grace period is one second"),
    pytest.param(30, 10, 10, id="a shorter grace period moves the deletion earlier"),
    pytest.param(10, 30, 10, id="a longer one changes nothing"),
])
def test_grace_periods(first, second, left):
    async def scenario():
        from kubesched.utils.clock import LoopClock

        store = ObjectStore(LoopClock(asyncio.get_running_loop()))
        store.create(POD, new_pod("p", terminationGracePeriodSeconds=30))
        store.bind("default", "p", "n1")
        store.delete(POD, "default", "p", grace_period=first)
        if second is not None:
            store.delete(POD, "default", "p", grace_period=second)
        assert store.get(POD, "default", "p")["metadata"]["deletionGracePeriodSeconds"] == left
        await asyncio.sleep(left - 1)  # deletionTimestamp has whole seconds: the deadline may come up to 1s early
        assert store.try_get(POD, "default", "p") is not None
        await asyncio.sleep(2)
        return store.try_get(POD, "default", "p")

    assert run_virtual(scenario()) is None
