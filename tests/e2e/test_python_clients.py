"""The official Python client (``kubernetes``) and lightkube run the same smoke test against
``kubesched up``, each loading the kubeconfig ``up`` wrote: create a namespace, a node and a pod,
list, watch the pod until the scheduler binds it, patch, delete."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest

from .test_kubectl import Up

CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "110"}
REQUESTS = {"cpu": "100m"}
IMAGE = "registry.k8s.io/pause:3.10"
WATCH_TIMEOUT = 20.0


class Smoke(Protocol):
    """What the smoke test asks of a client library."""

    def create_namespace(self, name: str) -> None: ...
    def create_node(self, name: str) -> None: ...
    def create_pod(self, namespace: str, name: str, node: str) -> str: ...
    def pod_names(self, namespace: str) -> tuple[list[str], str]: ...
    def watch_pod(self, namespace: str, name: str, since: str) -> Iterator[tuple[str, dict]]: ...
    def label_pod(self, namespace: str, name: str, labels: dict[str, str]) -> dict[str, str]: ...
    def delete_pod(self, namespace: str, name: str) -> None: ...
    def delete_node(self, name: str) -> None: ...
    def delete_namespace(self, name: str) -> None: ...
    def node_exists(self, name: str) -> bool: ...


class Official:
    """``kubernetes``: ``config.new_client_from_config`` and the generated CoreV1Api and models."""

    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import client, config

        self.models = client
        self.core = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))

    def create_namespace(self, name: str) -> None:
        self.core.create_namespace(self.models.V1Namespace(metadata=self.models.V1ObjectMeta(name=name)))

    def create_node(self, name: str) -> None:
        m = self.models
        self.core.create_node(m.V1Node(metadata=m.V1ObjectMeta(name=name, labels={"kubernetes.io/hostname": name}),
                                       status=m.V1NodeStatus(capacity=CAPACITY, allocatable=CAPACITY)))

    def create_pod(self, namespace: str, name: str, node: str) -> str:
        m = self.models
        container = m.V1Container(name="c", image=IMAGE, resources=m.V1ResourceRequirements(requests=REQUESTS))
        pod = m.V1Pod(metadata=m.V1ObjectMeta(name=name, namespace=namespace),
                      spec=m.V1PodSpec(node_selector={"kubernetes.io/hostname": node}, containers=[container]))
        created = self.core.create_namespaced_pod(namespace, pod)
        assert created.metadata is not None and created.metadata.uid is not None
        return created.metadata.uid

    def pod_names(self, namespace: str) -> tuple[list[str], str]:
        listed = self.core.list_namespaced_pod(namespace)
        assert listed.metadata is not None and listed.metadata.resource_version is not None
        return [str(p.metadata.name) for p in listed.items if p.metadata is not None], listed.metadata.resource_version

    def watch_pod(self, namespace: str, name: str, since: str) -> Iterator[tuple[str, dict]]:
        from kubernetes import watch

        stream = watch.Watch().stream(self.core.list_namespaced_pod, namespace, resource_version=since,
                                      field_selector=f"metadata.name={name}", timeout_seconds=int(WATCH_TIMEOUT))
        for event in stream:
            yield event["type"], self.core.api_client.sanitize_for_serialization(event["object"])

    def label_pod(self, namespace: str, name: str, labels: dict[str, str]) -> dict[str, str]:
        patched = self.core.patch_namespaced_pod(name, namespace, {"metadata": {"labels": labels}})
        assert patched.metadata is not None
        return dict(patched.metadata.labels or {})

    def delete_pod(self, namespace: str, name: str) -> None:
        self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    def delete_node(self, name: str) -> None:
        self.core.delete_node(name)

    def delete_namespace(self, name: str) -> None:
        self.core.delete_namespace(name)

    def node_exists(self, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.read_node(name)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return True


class Lightkube:
    """lightkube: ``KubeConfig.from_file`` and its typed resources and models."""

    def __init__(self, kubeconfig: Path) -> None:
        from lightkube import Client, KubeConfig

        self.client = Client(config=KubeConfig.from_file(str(kubeconfig)))

    def create_namespace(self, name: str) -> None:
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.core_v1 import Namespace

        self.client.create(Namespace(metadata=ObjectMeta(name=name)))

    def create_node(self, name: str) -> None:
        from lightkube.models.core_v1 import NodeStatus
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.core_v1 import Node

        self.client.create(Node(metadata=ObjectMeta(name=name, labels={"kubernetes.io/hostname": name}),
                                status=NodeStatus(capacity=CAPACITY, allocatable=CAPACITY)))

    def create_pod(self, namespace: str, name: str, node: str) -> str:
        from lightkube.models.core_v1 import Container, PodSpec, ResourceRequirements
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.core_v1 import Pod

        container = Container(name="c", image=IMAGE, resources=ResourceRequirements(requests=REQUESTS))
        pod = Pod(metadata=ObjectMeta(name=name, namespace=namespace),
                  spec=PodSpec(nodeSelector={"kubernetes.io/hostname": node}, containers=[container]))
        created = self.client.create(pod, namespace=namespace)
        assert created.metadata is not None and created.metadata.uid is not None
        return created.metadata.uid

    def pod_names(self, namespace: str) -> tuple[list[str], str]:
        from lightkube.resources.core_v1 import Pod

        listed = self.client.list(Pod, namespace=namespace)
        names = [str(p.metadata.name) for p in listed if p.metadata is not None]
        return names, str(listed.resourceVersion)

    def watch_pod(self, namespace: str, name: str, since: str) -> Iterator[tuple[str, dict]]:
        from lightkube.resources.core_v1 import Pod

        for kind, obj in self.client.watch(Pod, namespace=namespace, fields={"metadata.name": name}, resource_version=since):
            yield kind, obj.to_dict()

    def label_pod(self, namespace: str, name: str, labels: dict[str, str]) -> dict[str, str]:
        from lightkube.resources.core_v1 import Pod

        patched = self.client.patch(Pod, name, {"metadata": {"labels": labels}}, namespace=namespace)
        assert patched.metadata is not None
        return dict(patched.metadata.labels or {})

    def delete_pod(self, namespace: str, name: str) -> None:
        from lightkube.resources.core_v1 import Pod

        self.client.delete(Pod, name, namespace=namespace, grace_period=0)

    def delete_node(self, name: str) -> None:
        from lightkube.resources.core_v1 import Node

        self.client.delete(Node, name)

    def delete_namespace(self, name: str) -> None:
        from lightkube.resources.core_v1 import Namespace

        self.client.delete(Namespace, name)

    def node_exists(self, name: str) -> bool:
        from lightkube import ApiError
        from lightkube.resources.core_v1 import Node

        try:
            self.client.get(Node, name)
        except ApiError as e:
            if e.status.code == 404:
                return False
            raise
        return True


@pytest.fixture(scope="module")
def up(tmp_path_factory) -> Iterator[Up]:
    cluster = Up(tmp_path_factory.mktemp("python-clients"))
    cluster.start()
    yield cluster
    cluster.stop()


def events_until(stream: Iterator[tuple[str, dict]], done: Callable[[str, dict], bool]) -> list[tuple[str, dict]]:
    """The stream's events up to the first one ``done`` accepts, read in a daemon thread so that a
    watch that never delivers fails the test after WATCH_TIMEOUT instead of hanging it."""
    seen: queue.Queue[tuple[str, dict] | None] = queue.Queue()

    def read() -> None:
        for event in stream:
            seen.put(event)
            if done(*event):
                break
        seen.put(None)

    threading.Thread(target=read, daemon=True).start()
    events: list[tuple[str, dict]] = []
    while True:
        try:
            event = seen.get(timeout=WATCH_TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"the watch delivered {[kind for kind, _ in events]} and then nothing") from None
        if event is None:
            return events
        events.append(event)
        if done(*event):
            return events


@pytest.mark.parametrize("make", [Official, Lightkube], ids=["kubernetes", "lightkube"])
def test_client_smoke(up, make):
    client: Smoke = make(up.kubeconfig)
    namespace, node, pod = f"smoke-{make.__name__.lower()}", f"smoke-node-{make.__name__.lower()}", "smoke-pod"
    client.create_namespace(namespace)
    client.create_node(node)
    names, since = client.pod_names(namespace)
    assert names == []
    uid = client.create_pod(namespace, pod, node)
    assert client.pod_names(namespace)[0] == [pod]
    events = events_until(client.watch_pod(namespace, pod, since),
                          lambda kind, obj: kind == "MODIFIED" and (obj.get("spec") or {}).get("nodeName") == node)
    assert events[0][0] == "ADDED" and events[0][1]["metadata"]["uid"] == uid
    assert events[-1][1]["spec"]["nodeName"] == node
    assert client.label_pod(namespace, pod, {"smoke": "patched"}) == {"smoke": "patched"}
    client.delete_pod(namespace, pod)
    client.delete_node(node)
    client.delete_namespace(namespace)
    assert not client.node_exists(node)


def test_the_simulated_kubelets_nodes_decode_in_the_official_clients_models(up):
    """Nodes as the fake kubelet reports them carry every field kube-apiserver always serves
    (``nodeInfo.kubeProxyVersion`` among them), which the official client's models require."""
    from kubernetes import client, config
    from lightkube import Client, KubeConfig
    from lightkube.resources.core_v1 import Node

    core = client.CoreV1Api(config.new_client_from_config(str(up.kubeconfig)))
    name = "decoded-node"
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name)))
    try:
        deadline = time.monotonic() + WATCH_TIMEOUT
        while core.read_node(name).status.node_info is None:
            assert time.monotonic() < deadline, "the simulated kubelet posted no node status"
            time.sleep(0.1)
        assert core.read_node(name).status.node_info.kubelet_version == "v1.35.0"
        assert name in [n.metadata.name for n in core.list_node().items]
        assert name in [n.metadata.name for n in Client(KubeConfig.from_file(str(up.kubeconfig))).list(Node)]
    finally:
        core.delete_node(name)
