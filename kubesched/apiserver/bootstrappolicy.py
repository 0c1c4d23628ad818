"""The default cluster roles and cluster role bindings kube-apiserver's RBAC bootstrap creates, for
the parts of a cluster kubesched serves (translated from upstream's ``bootstrappolicy`` package).

``cluster-admin`` bound to ``system:masters``; discovery, public-info and basic-user roles so that
any authenticated user can discover the API and ask ``kubectl auth can-i``; the user-facing
``admin``/``edit``/``view`` built by aggregation as upstream; ``system:kube-scheduler`` and
``system:volume-scheduler`` bound to the user ``system:kube-scheduler``; ``system:auth-delegator``
and ``system:monitoring`` for components that delegate authentication or scrape metrics.
Missing ones are created at every start (existing ones are left as the user changed them).
"""

from __future__ import annotations

from typing import Any

READ = ("get", "list", "watch")
READ_UPDATE = ("get", "list", "watch", "update")
WRITE = ("create", "update", "patch", "delete", "deletecollection")
READ_WRITE = READ + WRITE
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"

CORE, APPS, AUTOSCALING, BATCH, EXTENSIONS, POLICY = "", "apps", "autoscaling", "batch", "extensions", "policy"
NETWORKING, DISCOVERY, STORAGE = "networking.k8s.io", "discovery.k8s.io", "storage.k8s.io"
AUTHENTICATION, AUTHORIZATION, RBAC = "authentication.k8s.io", "authorization.k8s.io", "rbac.authorization.k8s.io"
COORDINATION, EVENTS, RESOURCE = "coordination.k8s.io", "events.k8s.io", "resource.k8s.io"


def rule(verbs: tuple[str, ...] | str, groups: tuple[str, ...] | str, *resources: str, names: tuple[str, ...] = ()) -> dict:
    """A resource ``PolicyRule`` (``rbacv1helpers.NewRule(...).Groups(...).Resources(...)``)."""
    out: dict[str, Any] = {
        "verbs": [verbs] if isinstance(verbs, str) else list(verbs),
        "apiGroups": [groups] if isinstance(groups, str) else list(groups),
        "resources": list(resources),
    }
    if names:
        out["resourceNames"] = list(names)
    return out


def url_rule(verbs: tuple[str, ...] | str, *urls: str) -> dict:
    """A non-resource ``PolicyRule``."""
    return {"verbs": [verbs] if isinstance(verbs, str) else list(verbs), "nonResourceURLs": list(urls)}


def _events_rule() -> dict:
    return rule(("create", "update", "patch"), (CORE, EVENTS), "events")


def _view_rules() -> list[dict]:
    return [
        rule(READ, CORE, "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
             "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
        rule(READ, CORE, "limitranges", "resourcequotas", "bindings", "events", "pods/status", "resourcequotas/status",
             "namespaces/status", "replicationcontrollers/status", "pods/log"),
        rule(READ, CORE, "namespaces"),
        rule(READ, DISCOVERY, "endpointslices"),
        rule(READ, APPS, "controllerrevisions", "statefulsets", "statefulsets/scale", "statefulsets/status", "daemonsets",
             "daemonsets/status", "deployments", "deployments/scale", "deployments/status", "replicasets",
             "replicasets/scale", "replicasets/status"),
        rule(READ, AUTOSCALING, "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
        rule(READ, BATCH, "cronjobs", "cronjobs/status", "jobs", "jobs/status"),
        rule(READ, EXTENSIONS, "daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
             "ingresses", "ingresses/status", "networkpolicies", "replicasets", "replicasets/scale", "replicasets/status",
             "replicationcontrollers/scale"),
        rule(READ, POLICY, "poddisruptionbudgets", "poddisruptionbudgets/status"),
        rule(READ, NETWORKING, "ingresses", "ingresses/status", "networkpolicies"),
    ]


def _edit_rules() -> list[dict]:
    return [
        rule("impersonate", CORE, "serviceaccounts"),
        rule(WRITE, CORE, "pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
        rule("create", CORE, "pods/eviction"),
        rule(WRITE, CORE, "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
             "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events"),
        rule("create", CORE, "serviceaccounts/token"),
        rule(WRITE, APPS, "statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
             "deployments/rollback", "replicasets", "replicasets/scale"),
        rule(WRITE, AUTOSCALING, "horizontalpodautoscalers"),
        rule(WRITE, BATCH, "jobs", "cronjobs"),
        rule(WRITE, EXTENSIONS, "daemonsets", "deployments", "deployments/scale", "deployments/rollback", "ingresses",
             "replicasets", "replicasets/scale", "replicationcontrollers/scale", "networkpolicies"),
        rule(WRITE, POLICY, "poddisruptionbudgets"),
        rule(WRITE, NETWORKING, "networkpolicies", "ingresses"),
        rule(READ, CORE, "pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
    ]


def _admin_rules() -> list[dict]:
    return [
        rule("create", AUTHORIZATION, "localsubjectaccessreviews"),
        rule(READ_WRITE, RBAC, "rolebindings", "roles"),
    ]


def _kube_scheduler_rules() -> list[dict]:
    return [
        _events_rule(),
        rule("create", COORDINATION, "leases"),
        rule(("get", "update"), COORDINATION, "leases", names=("kube-scheduler",)),
        rule(READ, CORE, "nodes"),
        rule(("get", "list", "watch", "delete"), CORE, "pods"),
        rule("create", CORE, "pods/binding", "bindings"),
        rule(("patch", "update"), CORE, "pods/status"),
        rule(READ, CORE, "services", "replicationcontrollers"),
        rule(READ, (APPS, EXTENSIONS), "replicasets"),
        rule(READ, APPS, "statefulsets"),
        rule(READ, POLICY, "poddisruptionbudgets"),
        rule(READ, CORE, "persistentvolumeclaims", "persistentvolumes"),
        rule("create", AUTHENTICATION, "tokenreviews"),
        rule("create", AUTHORIZATION, "subjectaccessreviews"),
        rule(READ, STORAGE, "csinodes"),
        rule(READ, CORE, "namespaces"),
        rule(READ, STORAGE, "csidrivers"),
        rule(READ, STORAGE, "csistoragecapacities"),
        rule(READ, STORAGE, "volumeattachments"),
        rule(READ_UPDATE, RESOURCE, "resourceclaims", "resourceclaims/status"),
        rule(READ, RESOURCE, "deviceclasses", "resourceslices"),
        # Upstream grants this with GenericWorkload on; the roles here are built once, and the rule
        # is inert while the alpha API is not served.
        rule(READ, "scheduling.k8s.io", "workloads"),
    ]


def _cluster_role(name: str, rules: list[dict], *, labels: dict[str, str] | None = None,
                  aggregate: str | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "labels": {**BOOTSTRAP_LABELS, **(labels or {})}, "annotations": dict(AUTOUPDATE)}
    role: dict[str, Any] = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta, "rules": rules}
    if aggregate:
        role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {f"{AGGREGATE_TO}{aggregate}": "true"}}]}
    return role


def cluster_roles() -> list[dict]:
    """The bootstrap ClusterRoles (``bootstrappolicy.ClusterRoles``, the parts kubesched serves)."""
    discovery_urls = ("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz",
                      "/version", "/version/")
    to = AGGREGATE_TO
    return [
        _cluster_role("cluster-admin", [rule("*", "*", "*"), url_rule("*", "*")]),
        _cluster_role("system:discovery", [url_rule("get", *discovery_urls)]),
        _cluster_role("system:public-info-viewer", [url_rule("get", "/healthz", "/livez", "/readyz", "/version", "/version/")]),
        _cluster_role("system:basic-user", [rule("create", AUTHORIZATION, "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
                                            rule("create", AUTHENTICATION, "selfsubjectreviews")]),
        _cluster_role("system:monitoring", [url_rule("get", "/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz",
                                                     "/livez/*", "/readyz/*", "/healthz/*")]),
        _cluster_role("admin", [], labels={}, aggregate="admin"),
        _cluster_role("edit", [], labels={f"{to}admin": "true"}, aggregate="edit"),
        _cluster_role("view", [], labels={f"{to}edit": "true"}, aggregate="view"),
        _cluster_role("system:aggregate-to-admin", _admin_rules(), labels={f"{to}admin": "true"}),
        _cluster_role("system:aggregate-to-edit", _edit_rules(), labels={f"{to}edit": "true"}),
        _cluster_role("system:aggregate-to-view", _view_rules(), labels={f"{to}view": "true"}),
        _cluster_role("system:auth-delegator", [rule("create", AUTHENTICATION, "tokenreviews"),
                                                rule("create", AUTHORIZATION, "subjectaccessreviews")]),
        _cluster_role("system:kube-scheduler", _kube_scheduler_rules()),
        _cluster_role("system:volume-scheduler", [rule(READ_UPDATE, CORE, "persistentvolumes"),
                                                  rule(READ, STORAGE, "storageclasses"),
                                                  rule(READ_UPDATE, CORE, "persistentvolumeclaims")]),
    ]


def _binding(name: str, role: str, *subjects: tuple[str, str]) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS), "annotations": dict(AUTOUPDATE)},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC, "kind": kind, "name": who} for kind, who in subjects],
    }


def cluster_role_bindings() -> list[dict]:
    """The bootstrap ClusterRoleBindings (``bootstrappolicy.ClusterRoleBindings``, same selection)."""
    authenticated, unauthenticated = ("Group", "system:authenticated"), ("Group", "system:unauthenticated")
    return [
        _binding("cluster-admin", "cluster-admin", ("Group", "system:masters")),
        _binding("system:monitoring", "system:monitoring", ("Group", "system:monitoring")),
        _binding("system:discovery", "system:discovery", authenticated),
        _binding("system:basic-user", "system:basic-user", authenticated),
        _binding("system:public-info-viewer", "system:public-info-viewer", authenticated, unauthenticated),
        _binding("system:kube-scheduler", "system:kube-scheduler", ("User", "system:kube-scheduler")),
        _binding("system:volume-scheduler", "system:volume-scheduler", ("User", "system:kube-scheduler")),
    ]


def bootstrap_objects() -> list[dict]:
    """Every bootstrap RBAC object, roles before bindings."""
    return cluster_roles() + cluster_role_bindings()
