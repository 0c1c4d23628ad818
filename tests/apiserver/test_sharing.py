"""The store keeps one read-only copy of each distinct part of a pod's spec: pods made from one
template share it, nothing can change it in place, and copies of it are ordinary dicts and lists."""

import copy
import json

import orjson
import pytest
import yaml

from kubesched.api.kinds import EVENT, POD
from kubesched.api.meta import json_copy
from kubesched.apiserver.sharing import FrozenDict, FrozenList, PartSharer, freeze
from kubesched.apiserver.store import ObjectStore
from kubesched.utils.clock import ManualClock


def templated_pod(name, image="registry.k8s.io/pause:3.10"):
    return {"metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": "100m"}}}],
                     "tolerations": [{"key": "dedicated", "operator": "Exists"}]}}


@pytest.fixture
def store():
    return ObjectStore(ManualClock(), seed=1)


def test_pods_from_one_template_share_their_spec_parts(store):
    a = store.create(POD, templated_pod("a"))
    b = store.create(POD, templated_pod("b"))
    assert a["spec"]["containers"] is b["spec"]["containers"]
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"]
    assert a["metadata"] is not b["metadata"]


def test_an_events_references_name_one_object_and_are_not_looked_up(store):
    def event(name, pod):
        return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": pod},
                "source": {"component": "default-scheduler"}, "reason": "Scheduled", "type": "Normal"}

    a = store.create(EVENT, event("a.1", "a"))
    b = store.create(EVENT, event("b.1", "b"))
    assert a["source"] is b["source"] and isinstance(a["source"], FrozenDict)
    assert type(a["involvedObject"]) is dict and len(store._parts) == 1  # the source alone


def test_pods_with_different_parts_keep_their_own(store):
    a = store.create(POD, templated_pod("a"))
    b = store.create(POD, templated_pod("b", image="nginx"))
    assert b["spec"]["containers"][0]["image"] == "nginx"
    assert a["spec"]["containers"] is not b["spec"]["containers"]
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"]


def test_binding_keeps_the_parts_shared(store):
    store.create(POD, templated_pod("a"))
    b = store.create(POD, templated_pod("b"))
    bound = store.bind("default", "a", "node-1")
    assert bound["spec"]["nodeName"] == "node-1"
    assert bound["spec"]["containers"] is b["spec"]["containers"]
    assert "nodeName" not in b["spec"]


def test_changing_a_pod_through_the_store_changes_only_that_pod(store):
    store.create(POD, templated_pod("a"))
    b = store.create(POD, templated_pod("b"))

    def relabel_image(pod):
        pod["spec"]["containers"][0]["image"] = "nginx"
        pod["spec"]["activeDeadlineSeconds"] = 5

    store.mutate(POD, "default", "a", relabel_image)
    assert store.get(POD, "default", "a")["spec"]["containers"][0]["image"] == "nginx"
    assert b["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"
    assert store.get(POD, "default", "b") is b


WRITES_TO_A_SHARED_DICT = {
    "set a new key": lambda d: d.__setitem__("new", 1),
    "set a different value": lambda d: d.__setitem__("image", "other"),
    "delete a key": lambda d: d.__delitem__("image"),
    "pop a key": lambda d: d.pop("image"),
    "popitem": lambda d: d.popitem(),
    "update": lambda d: d.update({"image": "other"}),
    "merge in place": lambda d: d.__ior__({"image": "other"}),
    "clear": lambda d: d.clear(),
    "setdefault a missing key": lambda d: d.setdefault("new", 1),
}

WRITES_TO_A_SHARED_LIST = {
    "append": lambda s: s.append(1),
    "extend": lambda s: s.extend([1]),
    "insert": lambda s: s.insert(0, 1),
    "remove": lambda s: s.remove(s[0]),
    "pop": lambda s: s.pop(),
    "set an item": lambda s: s.__setitem__(0, {}),
    "delete an item": lambda s: s.__delitem__(0),
    "add in place": lambda s: s.__iadd__([1]),
    "multiply in place": lambda s: s.__imul__(2),
    "sort": lambda s: s.sort(key=str),
    "reverse": lambda s: s.reverse(),
    "clear": lambda s: s.clear(),
}


@pytest.mark.parametrize("write", WRITES_TO_A_SHARED_DICT.values(), ids=WRITES_TO_A_SHARED_DICT.keys())
def test_a_shared_dict_refuses_every_change(store, write):
    container = store.create(POD, templated_pod("a"))["spec"]["containers"][0]
    before = json_copy(container)
    with pytest.raises(TypeError, match="read-only: copy it"):
        write(container)
    assert container == before


@pytest.mark.parametrize("write", WRITES_TO_A_SHARED_LIST.values(), ids=WRITES_TO_A_SHARED_LIST.keys())
def test_a_shared_list_refuses_every_change(store, write):
    containers = store.create(POD, templated_pod("a"))["spec"]["containers"]
    before = json_copy(containers)
    with pytest.raises(TypeError, match="read-only: copy it"):
        write(containers)
    assert containers == before


def test_a_shared_dict_allows_writes_that_change_nothing():
    """Defaulting and decoding code set what is already set, and read with setdefault and pop."""
    part = freeze({"image": "nginx"})
    part["image"] = "nginx"
    part.update({"image": "nginx"})
    part |= {}
    assert part.setdefault("image", "other") == "nginx"
    assert part.pop("missing", None) is None
    with pytest.raises(KeyError):
        part.pop("missing")
    assert part == {"image": "nginx"}


COPIES = {
    "json_copy": json_copy,
    "copy.deepcopy": copy.deepcopy,
    "copy.copy": copy.copy,
    "dict": dict,
    "unpacking": lambda d: {**d},
}


@pytest.mark.parametrize("make_copy", COPIES.values(), ids=COPIES.keys())
def test_copies_of_a_shared_part_are_plain_and_changeable(make_copy):
    part = freeze({"image": "nginx", "ports": [{"containerPort": 80}]})
    mine = make_copy(part)
    assert type(mine) is dict and mine == part
    mine["image"] = "other"
    assert part["image"] == "nginx"


def test_deep_copies_are_plain_all_the_way_down():
    part = freeze({"ports": [{"containerPort": 80}]})
    for mine in (json_copy(part), copy.deepcopy(part)):
        assert type(mine["ports"]) is list and type(mine["ports"][0]) is dict
        mine["ports"][0]["containerPort"] = 81
    assert part["ports"][0]["containerPort"] == 80


def test_shared_parts_encode_like_plain_ones():
    plain = {"image": "nginx", "ports": [{"containerPort": 80}], "args": ["a", "b"]}
    part = freeze(json_copy(plain))
    assert orjson.dumps(part) == orjson.dumps(plain)
    assert json.dumps(part) == json.dumps(plain)
    assert yaml.safe_dump(part) == yaml.safe_dump(plain)


def test_parts_equal_in_python_but_not_in_json_are_not_shared():
    sharer = PartSharer()
    one = sharer.share({"value": 1})
    true = sharer.share({"value": True})
    assert one is not true and true["value"] is True


def test_the_table_remembers_the_parts_used_last():
    sharer = PartSharer(capacity=2)
    first = sharer.share([{"name": "a"}])
    second = sharer.share([{"name": "b"}])
    assert sharer.share([{"name": "a"}]) is first  # used last now: "b" is the oldest
    sharer.share([{"name": "c"}])
    assert len(sharer) == 2
    assert sharer.share([{"name": "a"}]) is first
    forgotten = sharer.share([{"name": "b"}])
    assert forgotten == second and forgotten is not second


@pytest.mark.parametrize("value", ["text", 3, None], ids=["string", "number", "null"])
def test_scalars_are_kept_as_they_are(value):
    assert PartSharer().share(value) is value


@pytest.mark.parametrize("empty", [{}, []], ids=["dict", "list"])
def test_empty_parts_are_shared_read_only_too(empty):
    sharer = PartSharer()
    part = sharer.share(empty)
    assert part == empty and part is not empty and sharer.share(type(empty)()) is part
    with pytest.raises(TypeError, match="read-only"):
        part.clear()


def test_freeze_keeps_frozen_parts():
    part = freeze({"a": [1]})
    assert isinstance(part, FrozenDict) and isinstance(part["a"], FrozenList)
    assert freeze(part) is part


def test_labels_and_conditions_are_shared_too(store):
    a = store.bind("default", store.create(POD, templated_pod("a"))["metadata"]["name"], "node-1")
    b = store.bind("default", store.create(POD, templated_pod("b"))["metadata"]["name"], "node-1")
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert a["status"]["conditions"] is b["status"]["conditions"]  # bound in the same second
    assert a["metadata"] is not b["metadata"]


def test_a_whole_spec_or_status_is_shared_when_equal(store):
    a = store.create(POD, templated_pod("a"))
    b = store.create(POD, templated_pod("b"))
    assert a["spec"] is b["spec"] and a["status"] is b["status"]  # waiting pods from one template
    assert a["metadata"] is not b["metadata"]
    a, b = store.bind("default", "a", "node-1"), store.bind("default", "b", "node-1")
    assert a["spec"] is b["spec"] and a["spec"]["nodeName"] == "node-1"
    c = store.bind("default", store.create(POD, templated_pod("c"))["metadata"]["name"], "node-2")
    assert c["spec"] is not a["spec"] and c["spec"]["containers"] is a["spec"]["containers"]


def test_a_section_found_whole_keeps_its_shared_fields(store):
    """A spec found whole is taken as it is: its fields are the ones shared when it was first
    stored, not looked up again."""
    a = store.create(POD, templated_pod("a"))
    b = store.create(POD, templated_pod("b"))
    assert b["spec"] is a["spec"] and b["spec"]["containers"] is a["spec"]["containers"]
    assert isinstance(b["spec"]["containers"], FrozenList)


def test_a_new_section_shares_its_fields_before_it_is_kept(store):
    a = store.create(POD, templated_pod("a"))
    b = store.create(POD, {**templated_pod("b"), "spec": {**templated_pod("b")["spec"], "hostname": "b"}})
    assert b["spec"] is not a["spec"] and b["spec"]["hostname"] == "b"
    assert b["spec"]["containers"] is a["spec"]["containers"]
    assert isinstance(b["spec"], FrozenDict)


def test_a_running_pods_status_names_it_by_its_ips_and_shares_only_its_other_fields(store):
    def running(name, ip):
        pod = store.bind("default", store.create(POD, templated_pod(name))["metadata"]["name"], "node-1")
        status = {**pod["status"], "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIPs": [{"ip": "172.18.0.2"}]}
        return store.update(POD, {**pod, "status": status}, status_only=True)

    parts_before = len(store._parts)
    a, b = running("a", "10.244.0.1"), running("b", "10.244.0.2")
    assert a["status"]["conditions"] is b["status"]["conditions"] and a["status"]["hostIPs"] is b["status"]["hostIPs"]
    assert a["status"]["podIPs"] == [{"ip": "10.244.0.1"}] and type(a["status"]["podIPs"]) is list
    assert type(a["status"]) is dict  # not kept whole: no other pod has these IPs
    kept = [part for part in store._parts._parts.values() if isinstance(part, dict) and "podIP" in part]
    assert kept == [] and len(store._parts) > parts_before
