"""Small builders for test objects (kept terse: tests read better with one-line nodes and pods)."""

from __future__ import annotations

from typing import Any


def make_node(name: str, cpu: str = "4", memory: str = "32Gi", pods: str = "110", labels: dict | None = None,
              taints: list | None = None, unschedulable: bool = False, extra: dict | None = None,
              images: list | None = None) -> dict:
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    node: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }
    if taints:
        node["spec"]["taints"] = taints
    if unschedulable:
        node["spec"]["unschedulable"] = True
    if images:
        node["status"]["images"] = images
    return node


def make_pod(name: str, cpu: str | None = None, memory: str | None = None, namespace: str = "default",
             labels: dict | None = None, node: str | None = None, priority: int | None = None, uid: str | None = None,
             **spec: Any) -> dict:
    requests = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    container: dict[str, Any] = {"name": "c", "image": "nginx"}
    if requests:
        container["resources"] = {"requests": requests}
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}, "uid": uid or f"uid-{namespace}-{name}"},
        "spec": {"containers": [container], **spec},
    }
    if node:
        pod["spec"]["nodeName"] = node
    if priority is not None:
        pod["spec"]["priority"] = priority
    return pod
