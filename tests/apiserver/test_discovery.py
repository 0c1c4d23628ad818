"""Discovery documents, as kubectl reads them."""

from kubesched.apiserver import discovery


def resources(group_version):
    return {r["name"]: r for r in discovery.resource_list(group_version)["resources"]}


def test_core_resources_with_subresources_short_names_and_categories():
    core = resources("v1")
    assert core["pods"]["shortNames"] == ["po"] and core["pods"]["categories"] == ["all"]
    assert core["pods/binding"]["kind"] == "Binding" and core["pods/binding"]["verbs"] == ["create"]
    assert core["pods/eviction"]["group"] == "policy" and core["pods/eviction"]["kind"] == "Eviction"
    assert core["nodes"]["namespaced"] is False
    assert "watch" in core["events"]["verbs"]


def test_scale_subresource_is_autoscaling_v1():
    scale = resources("apps/v1")["deployments/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")


def test_group_list_and_unknown_group_version():
    names = [g["name"] for g in discovery.api_group_list()["groups"]]
    assert {"apps", "policy", "scheduling.k8s.io", "storage.k8s.io", "coordination.k8s.io", "events.k8s.io"} <= set(names)
    assert discovery.resource_list("apps/v2") is None


def test_aggregated_discovery():
    core = discovery.aggregated(True)["items"]
    assert len(core) == 1 and core[0]["versions"][0]["version"] == "v1"
    pods = next(r for r in core[0]["versions"][0]["resources"] if r["resource"] == "pods")
    assert pods["scope"] == "Namespaced" and {s["subresource"] for s in pods["subresources"]} == {
        "status", "binding", "eviction", "log", "exec", "attach", "portforward", "proxy"}
    assert discovery.wants_aggregated("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json") == "v2"
    assert discovery.wants_aggregated("application/json, */*") is None
