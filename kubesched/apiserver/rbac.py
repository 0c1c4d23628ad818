"""Authorization: request attributes as kube-apiserver derives them, and the RBAC authorizer over
the stored Roles, ClusterRoles, RoleBindings and ClusterRoleBindings.

As kube-apiserver with ``--authorization-mode=RBAC``: members of ``system:masters`` are allowed
everything before RBAC is asked (the privileged-group authorizer); otherwise a request is allowed
when a rule of a role bound to the user, one of its groups, or its service account matches it.
Cluster roles with an ``aggregationRule`` get the rules of the cluster roles their selectors
match, as the aggregation controller would have written them. The bindings are indexed by
subject once and the index is dropped whenever an RBAC object changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kubesched.api.apierrors import BadRequest, Forbidden
from kubesched.api.kinds import Kind, kind_for
from kubesched.api.selectors import InvalidSelector, parse_label_selector
from kubesched.api.watch import WatchEvent
from kubesched.apiserver.authn import ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS, MASTERS, UserInfo
from kubesched.apiserver.store import ObjectStore

RBAC_V1 = "rbac.authorization.k8s.io/v1"


def _rbac_kind(name: str) -> Kind:
    kind = kind_for(RBAC_V1, name)
    assert kind is not None, name
    return kind


CLUSTER_ROLE = _rbac_kind("ClusterRole")
CLUSTER_ROLE_BINDING = _rbac_kind("ClusterRoleBinding")
ROLE = _rbac_kind("Role")
ROLE_BINDING = _rbac_kind("RoleBinding")
RBAC_KINDS = frozenset((CLUSTER_ROLE, CLUSTER_ROLE_BINDING, ROLE, ROLE_BINDING))
_SPECIAL_VERBS = ("proxy", "watch")
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
#: Decisions ``RBACAuthorizer`` keeps (all dropped when more are made, or when an RBAC object changes).
_DECISIONS_KEPT = 4096
_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class Attributes(NamedTuple):
    """``authorizer.Attributes`` of one request (a tuple: every request builds one, and a frozen
    dataclass costs several times as much to build)."""

    user: UserInfo
    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def request_attributes(user: UserInfo, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """``RequestInfoFactory.NewRequestInfo``: which verb, resource, subresource, namespace and name a
    request is about (``/api/...`` and ``/apis/...`` paths naming a resource), else a non-resource
    request whose verb is the lower-cased HTTP method."""
    parts = [p for p in path.split("/") if p]
    plain = Attributes(user, method.lower(), False, path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return plain
    rest = parts[1:]
    group = ""
    if parts[0] == "apis":
        if len(rest) < 3:
            return plain
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            return plain
        verb, rest = rest[0], rest[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch", "").lower() in ("1", "true") else "list"
        name = _exact_name(query.get("fieldSelector", ""))
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(user, verb, True, path=path, api_group=group, api_version=version, resource=resource,
                      subresource=subresource, namespace=namespace, name=name)


def _exact_name(selector: str) -> str:
    """The name a field selector pins with ``metadata.name=X`` (or ``==``), else ""."""
    for term in selector.split(","):
        key, op, value = term.partition("==") if "==" in term else term.partition("=")
        if op and key.strip() == "metadata.name" and not key.endswith("!"):
            return value.strip()
    return ""


def forbidden(attrs: Attributes, reason: str = "") -> Forbidden:
    """``responsewriters.Forbidden``: kube-apiserver's 403 for a request the authorizer refused."""
    name = attrs.user.name
    if not attrs.resource_request:
        detail = f'User "{name}" cannot {attrs.verb} path "{attrs.path}"'
    else:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        detail = f'User "{name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" {where}'
    if reason:
        detail = f"{detail}: {reason}"
    if not attrs.resource_request:
        return Forbidden(f"forbidden: {detail}")
    return Forbidden.of(attrs.resource, attrs.name, detail, attrs.api_group)


def impersonated(authorizer: RBACAuthorizer, user: UserInfo, headers: Mapping[str, str],
                 groups: list[str]) -> UserInfo:
    """The user a request acts as (``kubectl --as``): kube-apiserver's impersonation filter. The
    caller must be allowed to ``impersonate`` the ``users`` (or ``serviceaccounts``) and every
    ``groups`` it names (403 otherwise); the result gets ``system:authenticated`` as upstream adds it."""
    name, uid = headers.get("Impersonate-User"), headers.get("Impersonate-Uid")
    if name is None:
        if groups or uid:
            raise BadRequest("requested impersonation of groups or uid without impersonating a user")
        return user
    checks = [("users", name, "")] if not name.startswith("system:serviceaccount:") else \
        [("serviceaccounts", name.split(":")[3] if name.count(":") >= 3 else name,
          name.split(":")[2] if name.count(":") >= 3 else "")]
    checks += [("groups", g, "") for g in groups]
    for resource, target, namespace in checks:
        attrs = Attributes(user, "impersonate", True, resource=resource, name=target, namespace=namespace)
        if not authorizer.authorize(attrs):
            raise forbidden(attrs)
    if uid:
        attrs = Attributes(user, "impersonate", True, api_group="authentication.k8s.io", resource="uids", name=uid)
        if not authorizer.authorize(attrs):
            raise forbidden(attrs)
    added = ALL_UNAUTHENTICATED if name == ANONYMOUS else ALL_AUTHENTICATED
    return UserInfo(name, uid or "", tuple(groups) + (() if added in groups else (added,)))


# --- rule matching ------------------------------------------------------------------------------
def rule_allows(attrs: Attributes, rule: Mapping[str, Any]) -> bool:
    """``rbac.RuleAllows``: verbs, then API groups, resources (``*``, ``res/sub``, ``*/sub``) and
    resource names for a resource request; verbs and non-resource URLs (``/path*``) otherwise."""
    if not _allows_but_names(attrs, rule):
        return False
    names = _names_of(attrs, rule)
    return not names or attrs.name in names


def _names_of(attrs: Attributes, rule: Mapping[str, Any]) -> Iterable[str]:
    """The resource names ``rule`` restricts a request like ``attrs`` to (none: any name)."""
    return rule.get("resourceNames") or () if attrs.resource_request else ()


def _allows_but_names(attrs: Attributes, rule: Mapping[str, Any]) -> bool:
    """``rule_allows`` short of its last check, the resource names."""
    if not _matches(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule.get("nonResourceURLs") or (), attrs.path)
    if not _matches(rule.get("apiGroups"), attrs.api_group):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    return _resource_matches(rule.get("resources") or (), combined, attrs.subresource)


def _matches(values: Iterable[str] | None, wanted: str) -> bool:
    return any(v == "*" or v == wanted for v in values or ())


def _resource_matches(resources: Iterable[str], combined: str, subresource: str) -> bool:
    for resource in resources:
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def _url_matches(urls: Iterable[str], path: str) -> bool:
    for url in urls:
        if url in ("*", path):
            return True
        if url.endswith("*") and path.startswith(url.rstrip("*")):
            return True
    return False


# --- the authorizer -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Grant:
    """A binding of some subject: where it applies ("" = everywhere) and the role it refers to."""

    namespace: str
    role_kind: str
    role_name: str
    #: How upstream names the grant in an allowed decision's reason.
    description: str


class RBACAuthorizer:
    """Decides requests against the RBAC objects of ``store`` (see the module docstring)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._index: dict[tuple[str, str], list[_Grant]] | None = None
        self._aggregated: dict[str, list[dict]] = {}
        #: Decisions that no rule's ``resourceNames`` took part in, by everything of the request
        #: but its name (and, for a resource request, its path): a client repeats the same few
        #: requests, each deciding over every rule bound to it.
        self._decisions: dict[tuple, tuple[bool, str]] = {}
        store.write_hooks.append(self._on_write)

    def _on_write(self, rv: int, kind: Kind, event: WatchEvent) -> None:
        if kind in RBAC_KINDS:
            self._index = None
            self._aggregated = {}
            self._decisions = {}

    def authorize(self, attrs: Attributes) -> bool:
        """Whether ``attrs`` is allowed: ``system:masters``, else some bound rule matches."""
        return self.decide(attrs)[0]

    def decide(self, attrs: Attributes) -> tuple[bool, str]:
        """``(allowed, reason)``; the reason names the binding that allowed it, as RBAC's does."""
        if MASTERS in attrs.user.groups:
            return True, ""
        key = (attrs.user, attrs.verb, attrs.resource_request, "" if attrs.resource_request else attrs.path,
               attrs.api_group, attrs.resource, attrs.subresource, attrs.namespace)
        decision = self._decisions.get(key)
        if decision is None:
            decision, by_name = self._decide(attrs)
            if not by_name:
                if len(self._decisions) >= _DECISIONS_KEPT:
                    self._decisions.clear()
                self._decisions[key] = decision
        return decision

    def _decide(self, attrs: Attributes) -> tuple[tuple[bool, str], bool]:
        """The decision, and whether a rule's ``resourceNames`` took part in it (then it holds
        for this name only)."""
        by_name = False
        for grant in self.grants_for(attrs.user, attrs.namespace):
            for rule in self._role_rules(grant):
                if not _allows_but_names(attrs, rule):
                    continue
                names = _names_of(attrs, rule)
                by_name = by_name or bool(names)
                if not names or attrs.name in names:
                    return (True, f"RBAC: allowed by {grant.description}"), by_name
        return (False, ""), by_name

    def grants_for(self, user: UserInfo, namespace: str) -> Iterable[_Grant]:
        """Every binding of ``user`` (by name or group) that applies in ``namespace``."""
        index = self._subjects()
        keys = [("User", user.name)] + [("Group", g) for g in user.groups]
        for key in keys:
            for grant in index.get(key, ()):
                if not grant.namespace or grant.namespace == namespace:
                    yield grant

    def rules_of(self, grant: _Grant) -> list[dict]:
        """The rules the role of ``grant`` holds (aggregated for an aggregated cluster role)."""
        return self._role_rules(grant)

    def _role_rules(self, grant: _Grant) -> list[dict]:
        if grant.role_kind == "Role":
            role = self.store.try_get(ROLE, grant.namespace, grant.role_name)
            return list((role or {}).get("rules") or ())
        if grant.role_kind == "ClusterRole":
            return self._cluster_role_rules(grant.role_name)
        return []

    def _cluster_role_rules(self, name: str, visiting: frozenset[str] = frozenset()) -> list[dict]:
        """The role's rules plus, for an aggregated role, those of the roles its selectors match
        (recursively: ``admin`` aggregates ``edit``, which aggregates ``view``)."""
        cached = self._aggregated.get(name)
        if cached is not None:
            return cached
        role = self.store.try_get(CLUSTER_ROLE, None, name) or {}
        rules = list(role.get("rules") or ())
        aggregation = role.get("aggregationRule") or {}
        visiting = visiting | {name}
        for spec in aggregation.get("clusterRoleSelectors") or ():
            try:
                selector = parse_label_selector(spec)
            except InvalidSelector:
                continue
            for other in self.store.iter_all(CLUSTER_ROLE):
                meta = other.get("metadata") or {}
                if meta.get("name") not in visiting and selector.matches(meta.get("labels") or {}):
                    rules += self._cluster_role_rules(meta["name"], visiting)
        self._aggregated[name] = rules
        return rules

    def _subjects(self) -> dict[tuple[str, str], list[_Grant]]:
        if self._index is None:
            index: dict[tuple[str, str], list[_Grant]] = {}
            for kind in (CLUSTER_ROLE_BINDING, ROLE_BINDING):
                for binding in self.store.iter_all(kind):
                    self._index_binding(index, binding, kind is ROLE_BINDING)
            self._index = index
        return self._index

    @staticmethod
    def _index_binding(index: dict[tuple[str, str], list[_Grant]], binding: dict, namespaced: bool) -> None:
        meta = binding.get("metadata") or {}
        namespace = meta.get("namespace", "") if namespaced else ""
        ref = binding.get("roleRef") or {}
        role_kind, role_name = ref.get("kind", ""), ref.get("name", "")
        what = f'RoleBinding "{meta.get("name")}/{namespace}"' if namespaced else f'ClusterRoleBinding "{meta.get("name")}"'
        for subject in binding.get("subjects") or ():
            kind, name = subject.get("kind", ""), subject.get("name", "")
            shown = f'{kind} "{name}"'
            if kind == "ServiceAccount":
                sa_namespace = subject.get("namespace") or namespace
                shown = f'{kind} "{name}/{sa_namespace}"'
                kind, name = "User", f"system:serviceaccount:{sa_namespace}:{name}"
            grant = _Grant(namespace, role_kind, role_name, f'{what} of {role_kind} "{role_name}" to {shown}')
            index.setdefault((kind, name), []).append(grant)


# --- escalation -------------------------------------------------------------------------------
def check_escalation(authorizer: RBACAuthorizer, user: UserInfo | None, obj: dict) -> None:
    """RBAC's guard on writes of roles and bindings: nobody grants rights they do not hold.

    A Role or ClusterRole may be written by ``system:masters``, by a user allowed to ``escalate``
    it, or by one who holds every rule it lists (in its namespace). A RoleBinding or
    ClusterRoleBinding may be written by ``system:masters``, by a user allowed to ``bind`` the role
    it refers to, or by one who holds every rule of that role. Raises kube-apiserver's 403."""
    kind = obj.get("kind")
    if user is None or kind not in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding") or MASTERS in user.groups:
        return
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace", "") if kind in ("Role", "RoleBinding") else ""
    resource = f"{str(kind).lower()}s"
    if kind in ("Role", "ClusterRole"):
        rules = [r for r in obj.get("rules") or () if isinstance(r, dict)]
        if kind == "ClusterRole" and obj.get("aggregationRule"):
            rules = []  # its rules come from the roles it aggregates, each checked when written
        verb, target, target_name = "escalate", resource, str(meta.get("name", ""))
    else:
        ref = obj.get("roleRef") or {}
        target = "roles" if ref.get("kind") == "Role" else "clusterroles"
        target_name = str(ref.get("name", ""))
        grant = _Grant(namespace if target == "roles" else "", str(ref.get("kind", "")), target_name, "")
        rules, verb = authorizer.rules_of(grant), "bind"
    allowed = Attributes(user, verb, True, api_group="rbac.authorization.k8s.io", resource=target, name=target_name,
                         namespace=namespace)
    if authorizer.authorize(allowed):
        return
    missing = _not_covered(authorizer, user, namespace, rules)
    if missing:
        held = f'user "{user.name}" (groups=[{" ".join(chr(34) + g + chr(34) for g in user.groups)}])'
        detail = f"{held} is attempting to grant RBAC permissions not currently held:\n" + "\n".join(missing)
        raise Forbidden.of(resource, str(meta.get("name", "")), detail, "rbac.authorization.k8s.io")


def _not_covered(authorizer: RBACAuthorizer, user: UserInfo, namespace: str, rules: list[dict]) -> list[str]:
    """``validation.Covers``: each requested rule broken down to one verb, group, resource and
    name; those no rule the user holds in ``namespace`` allows, in upstream's compact form."""
    missing = []
    for rule in rules:
        for verb in rule.get("verbs") or ():
            for url in rule.get("nonResourceURLs") or ():
                if not authorizer.authorize(Attributes(user, verb, False, path=url, namespace=namespace)):
                    missing.append(f'{{NonResourceURLs:["{url}"], Verbs:["{verb}"]}}')
            for group in rule.get("apiGroups") or ():
                for combined in rule.get("resources") or ():
                    resource, _, sub = str(combined).partition("/")
                    for name in rule.get("resourceNames") or ("",):
                        attrs = Attributes(user, verb, True, api_group=group, resource=resource, subresource=sub,
                                           name=name, namespace=namespace)
                        if not authorizer.authorize(attrs):
                            names = f', ResourceNames:["{name}"]' if name else ""
                            missing.append(f'{{APIGroups:["{group}"], Resources:["{combined}"]{names}, Verbs:["{verb}"]}}')
    return missing
