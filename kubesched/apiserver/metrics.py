"""The API server's ``/metrics``: its own series, then those of the components that registered a
source (``kubesched up`` registers the in-process scheduler's, so ``kubectl get --raw /metrics``
shows every ``scheduler_*`` family without a second port).

The API server's own series is kube-apiserver's ``apiserver_storage_objects``: the number of
stored objects per resource (``pods``, ``deployments.apps``, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kubesched.apiserver.store import ObjectStore

CONTENT_TYPE = CONTENT_TYPE_LATEST


class StorageObjects:
    """A collector reading the store's object counts at scrape time."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("apiserver_storage_objects", "Number of stored objects at the time of last check split by kind.",
                                   labels=["resource"])
        for kind in sorted(self.store.kinds(), key=lambda k: (k.group, k.resource)):
            resource = f"{kind.resource}.{kind.group}" if kind.group else kind.resource
            family.add_metric([resource], self.store.count(kind))
        yield family


def render(store: ObjectStore, extra: Iterable[bytes]) -> bytes:
    """The exposition text: the API server's series, then the ``extra`` texts (other components')."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StorageObjects(store))
    return b"".join([generate_latest(registry), *extra])
