"""The components of the embedded cluster that run beside the scheduler: the one list that both
``kubesched simulate`` (virtual time, in-memory client) and ``kubesched up`` (real time, behind
the HTTP API server) start, so the two cannot drift apart.

In start order:

* ``kubelet``: every node's fake kubelet (node status and Lease heartbeats, pod admission, Running
  pods, NoExecute taint eviction, PodGC of orphans), ``kubesched.simulator.kubelet``;
* ``node-lifecycle``: kube-controller-manager's node lifecycle controller (nodes whose heartbeats
  stop become unreachable, tainted, and lose their pods), ``kubesched.simulator.nodelifecycle``;
* ``persistentvolume``: the PersistentVolume controller and a provisioner, ``kubesched.simulator.volumes``;
* ``resourceclaim``: the ResourceClaim controller (claims from templates), ``kubesched.simulator.resourceclaims``;
* ``controllers``: Deployment, ReplicaSet, ReplicationController, StatefulSet, disruption and
  the garbage collector, ``kubesched.simulator.controllers``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kubesched.apiserver.store import ObjectStore
from kubesched.simulator.controllers import build as build_controllers
from kubesched.simulator.kubelet import FakeKubelet
from kubesched.simulator.nodelifecycle import NodeLifecycleController
from kubesched.simulator.nodestatus import LEASE_RENEW_INTERVAL
from kubesched.simulator.resourceclaims import FakeResourceClaimController
from kubesched.simulator.volumes import FakeVolumeController


class Component(Protocol):
    """What the cluster needs of a component: start in the running loop, stop, and say whether
    it still has work pending (so a simulation can tell when the cluster is quiet)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    def idle(self) -> bool: ...


@dataclass(frozen=True)
class ComponentOptions:
    """Which components run, and how.

    ``kubelet`` and ``controllers`` can be turned off (benchmarks of the bare API server; the
    kubelet switch covers the node lifecycle controller, which would otherwise find every node
    silent, and the controllers switch covers the volume and claim controllers). ``collect_dangling`` lets the garbage collector delete objects whose owners never
    existed (off for manifests exported from another cluster, whose owner uids cannot match).
    ``termination_delay`` is how long a deleted running pod takes to stop (None: its grace period).
    ``lease_renew_interval`` is how often the kubelets renew their node Leases. ``kubelet_batch``
    is the most watch events the kubelets handle before yielding to the event loop (None: all).
    """

    kubelet: bool = True
    controllers: bool = True
    collect_dangling: bool = True
    termination_delay: float | None = None
    lease_renew_interval: float = LEASE_RENEW_INTERVAL
    kubelet_batch: int | None = None


@dataclass
class Components:
    """The components, by name, in start order."""

    items: dict[str, Component]

    def start(self) -> None:
        for component in self.items.values():
            component.start()

    async def stop(self) -> None:
        """Stop in reverse order, so nothing reacts to a component already gone."""
        for component in reversed(list(self.items.values())):
            await component.stop()

    def idle(self) -> bool:
        return all(component.idle() for component in self.items.values())

    def names(self) -> list[str]:
        return list(self.items)

    def __getitem__(self, name: str) -> Component:
        return self.items[name]

    def get(self, name: str) -> Component | None:
        return self.items.get(name)


def build_components(store: ObjectStore, options: ComponentOptions | None = None) -> Components:
    """The components ``options`` asks for, on ``store``, not started."""
    options = options or ComponentOptions()
    items: dict[str, Component] = {}
    if options.kubelet:
        items["kubelet"] = FakeKubelet(store, termination_delay=options.termination_delay,
                                       lease_renew_interval=options.lease_renew_interval, batch_limit=options.kubelet_batch)
        items["node-lifecycle"] = NodeLifecycleController(store)
    if options.controllers:
        items["persistentvolume"] = FakeVolumeController(store)
        items["resourceclaim"] = FakeResourceClaimController(store)
        items["controllers"] = build_controllers(store, collect_dangling=options.collect_dangling)
    return Components(items)


def start_components(store: ObjectStore, options: ComponentOptions | None = None) -> Components:
    """Build and start the components in the running event loop."""
    components = build_components(store, options)
    components.start()
    return components
