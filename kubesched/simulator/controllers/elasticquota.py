"""The ElasticQuota controller of scheduler-plugins, for clusters that serve the ElasticQuota CRD
(CapacityScheduling's): it keeps each quota's ``status.used`` equal to what the running pods of
its namespace request. The scheduler reads the quotas' spec only (it counts assumed pods itself);
this controller writes what ``kubectl get elasticquotas`` shows as USED. It does nothing in a
cluster without ElasticQuotas.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubesched.api.kinds import POD, Kind, custom_resource_kind
from kubesched.api.watch import WatchEvent
from kubesched.contrib.capacityscheduling.elasticquota import GROUP, PLURAL, VERSION
from kubesched.contrib.capacityscheduling.status import elastic_quota_used
from kubesched.simulator.controllers.manager import Controller, Key
from kubesched.simulator.controllers.util import meta, status, update_status

ELASTIC_QUOTA = custom_resource_kind(GROUP, VERSION, PLURAL)


class ElasticQuotaController(Controller):
    """Reconciles a namespace's quota whenever the quota or one of the namespace's pods changes
    (keys are namespaces: one quota per namespace, the first listed, as upstream reads it)."""

    name = "elasticquota-controller"
    kinds = (ELASTIC_QUOTA, POD)

    def initial_keys(self) -> Iterable[Key]:
        return [(meta(eq).get("namespace") or "default", "") for eq in self._quotas()]

    def observe(self, kind: Kind, event: WatchEvent) -> None:
        if (kind is POD or kind == POD) and not self._served():
            return
        self.enqueue((meta(event.object).get("namespace") or "default", ""))

    def sync(self, key: Key) -> None:
        if not self._served():
            return
        quotas = self.store.list(ELASTIC_QUOTA, key[0])[0]
        if not quotas:
            return
        quota = quotas[0]
        used = elastic_quota_used(quota, self.store.list(POD, key[0])[0])
        if (status(quota).get("used") or {}) != used:
            update_status(self.store, ELASTIC_QUOTA, quota, {**status(quota), "used": used})

    def _served(self) -> bool:
        """Whether the ElasticQuota CRD is established (custom objects exist only while it is)."""
        return self.store.custom.definition(ELASTIC_QUOTA) is not None  # a lookup: asked at every pod write

    def _quotas(self) -> list[dict]:
        return list(self.store.iter_all(ELASTIC_QUOTA)) if self._served() else []


__all__ = ["ElasticQuotaController"]
