"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) as the scheduler uses it.

These are the *internal*, defaulted and validated types; ``kubesched.scheduler.config.load`` turns a v1 file
into them (``kubesched.scheduler.config.defaults`` and ``kubesched.scheduler.config.validation`` hold upstream's rules).
Plugin args are objects of each plugin's ``Args`` type, already defaulted and validated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Extension points in the order upstream lists them in ``v1.Plugins``.
POINTS = (
    "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
    "reserve", "permit", "preBind", "bind", "postBind",
)


@dataclass
class PluginRef:
    name: str
    weight: int = 0


@dataclass
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[PluginRef] = field(default_factory=list)


@dataclass
class Plugins:
    multi_point: PluginSet = field(default_factory=PluginSet)
    points: dict[str, PluginSet] = field(default_factory=lambda: {p: PluginSet() for p in POINTS})

    def get(self, point: str) -> PluginSet:
        if point == "multiPoint":
            return self.multi_point
        return self.points.setdefault(point, PluginSet())


@dataclass
class Profile:
    scheduler_name: str = "default-scheduler"
    percentage_of_nodes_to_score: int | None = None
    plugins: Plugins = field(default_factory=Plugins)
    plugin_config: dict[str, Any] = field(default_factory=dict)
    #: ``pluginConfig`` names in document order, duplicates kept, so validation can report them
    #: (``plugin_config`` keeps the first entry of a name). Empty means ``plugin_config``'s order.
    plugin_config_names: list[str] = field(default_factory=list)


@dataclass
class LeaderElection:
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


@dataclass
class ClientConnection:
    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = "application/vnd.kubernetes.protobuf"
    qps: float = 50.0
    burst: int = 100


@dataclass
class SchedulerConfiguration:
    profiles: list[Profile] = field(default_factory=lambda: [Profile()])
    parallelism: int = 16
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    client_connection: ClientConnection = field(default_factory=ClientConnection)
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    delay_cache_until_active: bool = False
    extenders: list[dict] = field(default_factory=list)
