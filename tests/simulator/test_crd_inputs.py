"""Custom resources in the embedded cluster: CRDs in the input are created first whatever their
place, custom objects are validated against them, plugins install the CRDs they declare, read
the objects through ``Framework.custom_objects`` and are told of their changes by cluster events."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from kubesched.api.types import PodInfo
from kubesched.apiserver import APIServer
from kubesched.apiserver.security import SecurityOptions
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config import load_text
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, Resource
from kubesched.scheduler.framework.interface import EnqueueExtensions, PreFilterPlugin, PreFilterResult
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeBatch
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.simulator.crds import plugin_crds, plugin_rbac
from kubesched.simulator.scenario import load_scenario
from kubesched.simulator.simulate import InputRejected, simulate
from kubesched.simulator.up import create_objects
from tests.apiserver.test_crd import PODGROUP_CRD, podgroup
from tests.helpers import make_node, make_pod

GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class NeedsPodGroup(PreFilterPlugin, EnqueueExtensions):
    """Rejects a pod whose PodGroup does not exist yet; a PodGroup added brings it back."""

    name = "NeedsPodGroup"
    crds: ClassVar[tuple[str, ...]] = ()

    def __init__(self, args: object = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.pod_groups = self.framework.custom_objects(GROUP, VERSION, PLURAL)  # synced with the other informers

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        group = pod.labels.get(GROUP_LABEL)
        if group is None:
            return None, None
        if self.pod_groups.get(pod.namespace, group) is None:
            return None, Status(Code.UnschedulableAndUnresolvable, f'PodGroup "{group}" not found')
        return None, None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(Resource.custom(GROUP, VERSION, PLURAL), ActionType.Add))]


def config_and_registry(crd_file: Path | None = None):
    plugin = type("NeedsPodGroupWithCRD", (NeedsPodGroup,), {"crds": (str(crd_file),) if crd_file else ()})
    registry = {**in_tree_registry(), "NeedsPodGroup": plugin}
    text = yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                           "profiles": [{"schedulerName": "default-scheduler",
                                         "plugins": {"preFilter": {"enabled": [{"name": "NeedsPodGroup"}]}}}]})
    return load_text(text, registry=registry), registry


def grouped_pod(name: str, group: str) -> dict:
    return make_pod(name, cpu="1", labels={GROUP_LABEL: group})


def phases(result) -> dict[str, str]:
    return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or "" for p in result.pods()}


def test_crds_are_created_before_the_objects_they_define_whatever_the_file_order():
    config, registry = config_and_registry()
    result = simulate([grouped_pod("p", "pg1"), podgroup("pg1"), make_node("n1"), PODGROUP_CRD], config, registry=registry)
    assert phases(result) == {"p": "n1"}
    assert result.not_acted_on() == {}


def test_a_custom_object_its_schema_refuses_is_an_error_naming_the_object_and_field():
    config, registry = config_and_registry()
    with pytest.raises(InputRejected, match=r'PodGroup pg1: PodGroup.scheduling.x-k8s.io "pg1" is invalid: '
                                            r"spec.minMember: Invalid value: 0"):
        simulate([make_node("n1"), PODGROUP_CRD, podgroup("pg1", minMember=0)], config, registry=registry)


def test_a_custom_object_without_its_crd_is_not_created_and_says_why():
    config, registry = config_and_registry()
    result = simulate([make_node("n1"), podgroup("pg1")], config, registry=registry)
    assert [o["metadata"]["name"] for o in result.ignored] == ["pg1"]
    from kubesched.cli.simulate import not_acted_on_lines

    assert not_acted_on_lines(result) == [
        "PodGroup pg1: kind scheduling.x-k8s.io/v1alpha1 PodGroup is not served: no CustomResourceDefinition in the input defines it"]


def test_a_plugin_installs_the_crds_it_declares(tmp_path):
    crd_file = tmp_path / "podgroups.yaml"
    crd_file.write_text(yaml.safe_dump(PODGROUP_CRD))
    config, registry = config_and_registry(crd_file)
    assert [c["metadata"]["name"] for c in plugin_crds(config, registry)] == [f"podgroups.{GROUP}"]
    result = simulate([make_node("n1"), podgroup("pg1"), grouped_pod("p", "pg1")], config, registry=registry)
    assert phases(result) == {"p": "n1"}


def test_a_custom_object_added_later_brings_the_rejected_pod_back(tmp_path):
    config, registry = config_and_registry()
    scenario_file = tmp_path / "scenario.yaml"
    scenario_file.write_text(yaml.safe_dump({"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario",
                                             "steps": [{"at": "30s", "apply": {"objects": [podgroup("pg1")]}}]}))
    result = simulate([make_node("n1"), PODGROUP_CRD, grouped_pod("p", "pg1")], config, registry=registry,
                      scenario=load_scenario(scenario_file))
    assert phases(result) == {"p": "n1"}
    bound = [e for e in result.timeline or () if e.event == "bound"]
    assert bound and 30 <= bound[0].seconds < 60  # the event, not the unschedulable pods' five-minute flush


def test_up_creates_crds_first_and_names_a_custom_object_without_its_crd():
    server = APIServer(ObjectStore(), port=0, security=SecurityOptions(allow_anonymous=True))
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    created, problems = create_objects(server, [podgroup("pg1"), widget, PODGROUP_CRD])
    assert created == 2
    assert problems == ["Widget w: kind example.com/v1 Widget is not served: no CustomResourceDefinition in the input defines it"]
    assert server.store.custom.for_object(f"{GROUP}/{VERSION}", "PodGroup") is not None


def test_up_lets_the_scheduler_use_the_custom_resources_of_the_plugins_crds(tmp_path):
    crd_file = tmp_path / "podgroups.yaml"
    crd_file.write_text(yaml.safe_dump(PODGROUP_CRD))
    config, registry = config_and_registry(crd_file)
    role, binding = plugin_rbac(plugin_crds(config, registry))
    assert role["rules"] == [
        {"apiGroups": [GROUP], "resources": ["podgroups"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": [GROUP], "resources": ["podgroups/status"], "verbs": ["get", "update", "patch"]}]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-scheduler"}]
