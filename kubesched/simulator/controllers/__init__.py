"""The minimal controllers of the embedded cluster: Deployment, ReplicaSet, ReplicationController,
StatefulSet, disruption (PodDisruptionBudget status), scheduler-plugins' PodGroup and
ElasticQuota status, and the garbage collector, all working directly on the ``ObjectStore`` in
the event loop (see ``manager``). The store defaults and validates the workload kinds
(``kubesched.api.defaults``).

``start_all(store)`` starts them together; ``await controllers.stop()`` stops them and
``controllers.idle()`` says whether anything is still pending, so a simulation can tell when the
cluster is quiet.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubesched.apiserver.store import ObjectStore
from kubesched.simulator.controllers.deployment import DeploymentController
from kubesched.simulator.controllers.disruption import DisruptionController, StaleDisruptionConditionCleaner
from kubesched.simulator.controllers.elasticquota import ElasticQuotaController
from kubesched.simulator.controllers.gc import GarbageCollector
from kubesched.simulator.controllers.manager import Manager
from kubesched.simulator.controllers.podgroup import PodGroupController
from kubesched.simulator.controllers.replicaset import ReplicaSetController, replication_controller
from kubesched.simulator.controllers.statefulset import StatefulSetController

__all__ = ["Controllers", "build", "start_all"]


@dataclass
class Controllers:
    """The running controllers (one manager, one task)."""

    manager: Manager
    deployments: DeploymentController
    replica_sets: ReplicaSetController
    replication_controllers: ReplicaSetController
    stateful_sets: StatefulSetController
    garbage_collector: GarbageCollector
    disruption: DisruptionController
    stale_disruption_conditions: StaleDisruptionConditionCleaner
    pod_groups: PodGroupController
    elastic_quotas: ElasticQuotaController

    def start(self) -> None:
        self.manager.start()

    async def stop(self) -> None:
        await self.manager.stop()

    def idle(self) -> bool:
        return self.manager.idle()


def build(store: ObjectStore, *, events: bool = True, collect_dangling: bool = True, coalesce: float = 0.005) -> Controllers:
    """The controllers, registered but not started (tests drive ``manager`` directly)."""
    manager = Manager(store, coalesce=coalesce)
    return Controllers(
        manager=manager,
        deployments=manager.add(DeploymentController(manager, events=events)),
        replica_sets=manager.add(ReplicaSetController(manager, events=events)),
        replication_controllers=manager.add(replication_controller(manager, events=events)),
        stateful_sets=manager.add(StatefulSetController(manager, events=events)),
        garbage_collector=manager.add(GarbageCollector(manager, collect_dangling=collect_dangling)),
        disruption=manager.add(DisruptionController(manager, events=events)),
        stale_disruption_conditions=manager.add(StaleDisruptionConditionCleaner(manager)),
        pod_groups=manager.add(PodGroupController(manager)),
        elastic_quotas=manager.add(ElasticQuotaController(manager)),
    )


def start_all(store: ObjectStore, *, events: bool = True, collect_dangling: bool = True,
              coalesce: float = 0.005) -> Controllers:
    """Start every controller on ``store`` in the running event loop.

    ``events`` writes core/v1 Events (SuccessfulCreate, ScalingReplicaSet, ...); ``collect_dangling``
    lets the garbage collector delete objects whose owners never existed (upstream behaviour; turn it
    off when loading manifests exported from another cluster, whose owner uids cannot match);
    ``coalesce`` is how long (loop time) the controllers let events accumulate before syncing."""
    controllers = build(store, events=events, collect_dangling=collect_dangling, coalesce=coalesce)
    controllers.manager.start()
    return controllers
