"""Authentication, RBAC authorization and the review kinds of the API server: 401 for callers it
cannot identify, 403 with kube-apiserver's message for callers RBAC does not allow, and the
bootstrap roles (discovery for every authenticated user, aggregated admin/edit/view)."""

from __future__ import annotations

import base64
import datetime as dt
import ssl
from pathlib import Path

import aiohttp
import orjson
import pytest
import yaml

from kubesched.apiserver import APIServer
from kubesched.apiserver.authn import TokenTable, UserInfo
from kubesched.apiserver.rbac import ROLE, ROLE_BINDING, Attributes, RBACAuthorizer, request_attributes, rule_allows
from kubesched.apiserver.security import SecurityOptions
from kubesched.apiserver.store import ObjectStore
from kubesched.client.kube import KubeClient
from tests.apiserver.conftest import pod

TEAM = "/api/v1/namespaces/team"
ALICE = UserInfo("alice", groups=("system:authenticated",))


def rbac(kind: str, name: str, namespace: str | None = None, **fields) -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, **fields}


def binding(kind: str, name: str, role_kind: str, role: str, subject: tuple[str, str], namespace: str | None = None) -> dict:
    return rbac(kind, name, namespace, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
                subjects=[{"kind": subject[0], "name": subject[1], "apiGroup": "rbac.authorization.k8s.io"}])


class Caller:
    """Requests to the fixture's server as one identity (``token`` None: no credentials at all)."""

    def __init__(self, server: APIServer, token: str | None, ssl_context: ssl.SSLContext | None = None) -> None:
        self.server = server
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        context = ssl_context or server.security.client_ssl_context()
        self.session = aiohttp.ClientSession(headers=headers, connector=aiohttp.TCPConnector(ssl=context))

    async def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict | bytes]:
        data = None if body is None else orjson.dumps(body)
        async with self.session.request(method, self.server.url + path, data=data,
                                        headers={"Content-Type": "application/json"}) as resp:
            payload = await resp.read()
            return resp.status, orjson.loads(payload) if payload[:1] == b"{" else payload

    async def close(self) -> None:
        await self.session.close()


@pytest.fixture
async def team(api):
    """Namespace ``team`` with pod ``p`` and a secret; ``alice`` may only get pods there."""
    for obj in ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
                rbac("Role", "pod-reader", "team", rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
                binding("RoleBinding", "alice-reads-pods", "Role", "pod-reader", ("User", "alice"), "team"),
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "team"}}):
        api.server.rest.create_object(obj)
    api.server.rest.create_object({**pod("p"), "metadata": {"name": "p", "namespace": "team"}})
    callers = {"anonymous": Caller(api.server, None), "wrong-token": Caller(api.server, "not-a-token"),
               "limited": Caller(api.server, api.server.mint_token("alice")),
               "admin": Caller(api.server, api.server.admin_token)}
    yield callers
    for caller in callers.values():
        await caller.close()


REQUESTS = {
    "get a pod in its namespace": ("GET", f"{TEAM}/pods/p", None),
    "list pods in its namespace": ("GET", f"{TEAM}/pods", None),
    "get a pod elsewhere": ("GET", "/api/v1/namespaces/default/pods/p", None),
    "read a secret": ("GET", f"{TEAM}/secrets/s", None),
    "create a pod": ("POST", f"{TEAM}/pods", {**pod("q"), "metadata": {"name": "q"}}),
    "delete the pod": ("DELETE", f"{TEAM}/pods/p", None),
    "discovery": ("GET", "/api", None),
    "health": ("GET", "/readyz", None),
}
EXPECTED = {
    "anonymous":   {"health": 200, **{r: 401 for r in REQUESTS if r != "health"}},
    "wrong-token": {r: 401 for r in REQUESTS},
    "limited":     {"get a pod in its namespace": 200, "list pods in its namespace": 403, "get a pod elsewhere": 403,
                    "read a secret": 403, "create a pod": 403, "delete the pod": 403, "discovery": 200, "health": 200},
    "admin":       {"get a pod in its namespace": 200, "list pods in its namespace": 200, "get a pod elsewhere": 404,
                    "read a secret": 200, "create a pod": 201, "delete the pod": 200, "discovery": 200, "health": 200},
}


@pytest.mark.parametrize("identity", list(EXPECTED))
async def test_each_identity_gets_401_403_or_its_answer_on_reads_and_writes(team, identity):
    caller = team[identity]
    got = {name: (await caller.call(*request))[0] for name, request in REQUESTS.items()}
    assert got == EXPECTED[identity]


async def test_401_is_kube_apiservers_unauthorized_status(team):
    status, body = await team["wrong-token"].call("GET", f"{TEAM}/pods")
    assert (status, body) == (401, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401})


FORBIDDEN = [
    ("list in a namespace", "GET", f"{TEAM}/pods",
     'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "team"', {"kind": "pods"}),
    ("named object", "GET", "/api/v1/namespaces/default/pods/p",
     'pods "p" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "default"',
     {"name": "p", "kind": "pods"}),
    ("cluster scope", "GET", "/api/v1/nodes",
     'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope', {"kind": "nodes"}),
    ("subresource", "POST", f"{TEAM}/pods/p/binding",
     'pods "p" is forbidden: User "alice" cannot create resource "pods/binding" in API group "" in the namespace "team"',
     {"name": "p", "kind": "pods"}),
    ("named group", "GET", "/apis/coordination.k8s.io/v1/namespaces/team/leases",
     'leases.coordination.k8s.io is forbidden: User "alice" cannot list resource "leases" in API group '
     '"coordination.k8s.io" in the namespace "team"', {"group": "coordination.k8s.io", "kind": "leases"}),
    ("watch", "GET", f"{TEAM}/pods?watch=1",
     'pods is forbidden: User "alice" cannot watch resource "pods" in API group "" in the namespace "team"', {"kind": "pods"}),
    ("non-resource path", "GET", "/metrics", 'forbidden: User "alice" cannot get path "/metrics"', None),
]


@pytest.mark.parametrize(("case", "method", "path", "message", "details"), FORBIDDEN, ids=[c[0] for c in FORBIDDEN])
async def test_403_has_kube_apiservers_message(team, case, method, path, message, details):
    status, body = await team["limited"].call(method, path, {"apiVersion": "v1", "kind": "Binding"} if method == "POST" else None)
    assert status == 403 and isinstance(body, dict)
    assert (body["reason"], body["message"], body.get("details")) == ("Forbidden", message, details)


async def test_cluster_role_bindings_and_aggregated_roles_grant_what_upstream_does(api, team):
    api.server.rest.create_object(binding("RoleBinding", "alice-views", "ClusterRole", "view", ("User", "alice"), "team"))
    alice = team["limited"]
    assert (await alice.call("GET", f"{TEAM}/pods"))[0] == 200  # view (via system:aggregate-to-view)
    assert (await alice.call("GET", "/apis/apps/v1/namespaces/team/deployments"))[0] == 200
    assert (await alice.call("GET", f"{TEAM}/secrets"))[0] == 403  # view never reads secrets
    assert (await alice.call("GET", "/api/v1/namespaces/default/pods"))[0] == 403  # only where bound
    api.server.rest.create_object(binding("ClusterRoleBinding", "alice-admin", "ClusterRole", "admin", ("User", "alice")))
    assert (await alice.call("GET", "/api/v1/namespaces/default/secrets"))[0] == 200  # admin aggregates edit
    assert (await alice.call("GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings"))[0] == 200
    assert (await alice.call("GET", "/api/v1/nodes"))[0] == 403  # admin is namespaced power only


def _whoami(caller: Caller):
    return caller.call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                       {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})


async def test_token_review_and_self_subject_review_name_the_user(api, team):
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": api.server.admin_token}}
    status, body, _ = await api.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", review)
    assert status == 201 and body["status"]["authenticated"] is True
    assert body["status"]["user"]["username"] == "kubesched-admin"
    assert body["status"]["user"]["groups"] == ["system:masters", "system:authenticated"]
    _, body, _ = await api.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {**review, "spec": {"token": "nope"}})
    assert body["status"] == {"authenticated": False, "user": {}, "error": "invalid bearer token"}
    status, body = await _whoami(team["limited"])
    assert status == 201 and body["status"]["userInfo"] == {"username": "alice", "uid": "alice", "groups": ["system:authenticated"]}
    assert (await team["limited"].call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", review))[0] == 403


SAR_CASES = [
    ("allowed by a role binding", {"resourceAttributes": {"namespace": "team", "verb": "get", "resource": "pods"}, "user": "alice"},
     {"allowed": True, "reason": 'RBAC: allowed by RoleBinding "alice-reads-pods/team" of Role "pod-reader" to User "alice"'}),
    ("denied", {"resourceAttributes": {"namespace": "team", "verb": "list", "resource": "pods"}, "user": "alice"}, {"allowed": False}),
    ("a group's non-resource rule", {"nonResourceAttributes": {"path": "/apis/apps", "verb": "get"}, "groups": ["system:authenticated"]},
     {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" '
                                 'to Group "system:authenticated"'}),
    ("the scheduler binds pods", {"resourceAttributes": {"namespace": "x", "verb": "create", "resource": "pods",
                                                         "subresource": "binding"}, "user": "system:kube-scheduler"},
     {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "system:kube-scheduler" of ClusterRole '
                                 '"system:kube-scheduler" to User "system:kube-scheduler"'}),
    ("the scheduler reads no secrets", {"resourceAttributes": {"namespace": "x", "verb": "get", "resource": "secrets"},
                                        "user": "system:kube-scheduler"}, {"allowed": False}),
]


@pytest.mark.parametrize(("case", "spec", "expected"), SAR_CASES, ids=[c[0] for c in SAR_CASES])
async def test_subject_access_review_answers_as_rbac(api, team, case, spec, expected):
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    status, body, _ = await api.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert (status, body["status"]) == (201, expected)


async def test_self_subject_access_review_asks_about_the_caller_and_bad_reviews_are_4xx(team):
    alice = team["limited"]
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

    def ssar(**attrs):
        return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": attrs}

    _, body = await alice.call("POST", path, ssar(resourceAttributes={"namespace": "team", "verb": "get", "resource": "pods"}))
    assert body["status"]["allowed"] is True
    _, body = await alice.call("POST", path, ssar(resourceAttributes={"namespace": "team", "verb": "delete", "resource": "pods"}))
    assert body["status"] == {"allowed": False}
    status, body = await alice.call("POST", path, ssar())
    assert status == 422 and body["message"].endswith(
        "spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified")
    assert (await alice.call("GET", path))[0] == 403  # authorization comes first: alice may not list them
    assert (await team["admin"].call("GET", path))[0] == 405


async def test_discovery_lists_the_review_kinds_as_create_only(api):
    _, doc, _ = await api.call("GET", "/apis/authorization.k8s.io/v1")
    verbs = {r["name"]: r["verbs"] for r in doc["resources"]}
    assert verbs == {"subjectaccessreviews": ["create"], "selfsubjectaccessreviews": ["create"],
                     "localsubjectaccessreviews": ["create"], "selfsubjectrulesreviews": ["create"]}


ATTRIBUTE_CASES = [
    ("GET", "/api/v1/namespaces/ns/pods", {}, ("list", "", "pods", "", "ns", "")),
    ("GET", "/api/v1/namespaces/ns/pods", {"watch": "true"}, ("watch", "", "pods", "", "ns", "")),
    ("GET", "/api/v1/watch/namespaces/ns/pods/p", {}, ("watch", "", "pods", "", "ns", "p")),
    ("GET", "/api/v1/pods", {"fieldSelector": "metadata.name=p"}, ("list", "", "pods", "", "", "p")),
    ("DELETE", "/api/v1/namespaces/ns/pods", {}, ("deletecollection", "", "pods", "", "ns", "")),
    ("PATCH", "/api/v1/namespaces/ns/pods/p/status", {}, ("patch", "", "pods", "status", "ns", "p")),
    ("GET", "/api/v1/namespaces/ns", {}, ("get", "", "namespaces", "", "ns", "ns")),
    ("PUT", "/api/v1/namespaces/ns/finalize", {}, ("update", "", "namespaces", "finalize", "ns", "ns")),
    ("POST", "/apis/apps/v1/namespaces/ns/deployments", {}, ("create", "apps", "deployments", "", "ns", "")),
]


@pytest.mark.parametrize(("method", "path", "query", "expected"), ATTRIBUTE_CASES, ids=[f"{c[0]} {c[1]}" for c in ATTRIBUTE_CASES])
def test_request_attributes_follow_kube_apiservers_request_info(method, path, query, expected):
    attrs = request_attributes(ALICE, method, path, query)
    assert attrs.resource_request
    assert (attrs.verb, attrs.api_group, attrs.resource, attrs.subresource, attrs.namespace, attrs.name) == expected


@pytest.mark.parametrize("path", ["/api", "/api/v1", "/apis/apps", "/apis/apps/v1", "/version", "/openapi/v3/api/v1"])
def test_discovery_and_other_paths_are_non_resource_requests(path):
    attrs = request_attributes(ALICE, "GET", path, {})
    assert (attrs.resource_request, attrs.verb, attrs.path) == (False, "get", path)


def _attrs(verb="get", group="", resource="pods", sub="", name="", path="") -> Attributes:
    if path:
        return Attributes(ALICE, verb, False, path=path)
    return Attributes(ALICE, verb, True, api_group=group, resource=resource, subresource=sub, name=name)


RULE_CASES = [
    ("everything wildcards", {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, _attrs(sub="binding"), True),
    ("a resource rule does not cover its subresources", {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
     _attrs(sub="status"), False),
    ("resource/subresource", {"verbs": ["get"], "apiGroups": [""], "resources": ["pods/status"]}, _attrs(sub="status"), True),
    ("*/subresource", {"verbs": ["get"], "apiGroups": [""], "resources": ["*/status"]}, _attrs(resource="nodes", sub="status"), True),
    ("resource names restrict", {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
     _attrs(name="b"), False),
    ("resource names match", {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
     _attrs(name="a"), True),
    ("the API group must match", {"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]}, _attrs(), False),
    ("the verb must match", {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}, _attrs(), False),
    ("a URL prefix", {"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}, _attrs(path="/apis/apps/v1"), True),
    ("an exact URL", {"verbs": ["get"], "nonResourceURLs": ["/version"]}, _attrs(path="/version/x"), False),
    ("URL rules never grant resources", {"verbs": ["*"], "nonResourceURLs": ["*"]}, _attrs(), False),
]


@pytest.mark.parametrize(("case", "rule", "attrs", "allowed"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_rule_matching_follows_rbac(case, rule, attrs, allowed):
    assert rule_allows(attrs, rule) is allowed


def test_kept_rbac_decisions_follow_resource_names_and_rbac_writes():
    """Decisions are kept per request but for its name, except where a rule's resourceNames
    decided (then each name is decided on its own), and an RBAC write drops them."""
    store = ObjectStore(auto_create_namespaces=True)
    store.create(ROLE, rbac("Role", "one-pod", "team", rules=[
        {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
        {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}]))
    store.create(ROLE_BINDING, binding("RoleBinding", "alice", "Role", "one-pod", ("User", "alice"), "team"))
    authz = RBACAuthorizer(store)

    def allowed(verb: str, name: str = "") -> bool:
        return authz.authorize(Attributes(ALICE, verb, True, resource="pods", namespace="team", name=name))

    assert [allowed("get", "a"), allowed("get", "b"), allowed("get", "a"), allowed("get", "b")] == [True, False, True, False]
    assert allowed("list") and allowed("list") and not allowed("watch")
    store.create(ROLE, rbac("Role", "watcher", "team", rules=[{"verbs": ["get", "watch"], "apiGroups": [""], "resources": ["pods"]}]))
    store.create(ROLE_BINDING, binding("RoleBinding", "alice-2", "Role", "watcher", ("User", "alice"), "team"))
    assert allowed("watch") and allowed("get", "b")
    store.delete(ROLE_BINDING, "team", "alice")
    assert not allowed("list") and allowed("get", "a")


def test_token_files_are_read_in_kube_apiservers_csv_format_and_bad_lines_are_named(tmp_path):
    good = tmp_path / "tokens.csv"
    good.write_text('# token,user,uid,groups\nt1,alice,u1,"dev,ops"\nt2,bob,u2\n\n,nobody,u3\n')
    table = TokenTable()
    assert table.load_file(good) == 2
    assert table.lookup("t1") == UserInfo("alice", "u1", ("dev", "ops"))
    assert table.lookup("t2") == UserInfo("bob", "u2")
    bad = tmp_path / "bad.csv"
    bad.write_text("t1,alice,u1\nt2,bob\n")
    with pytest.raises(ValueError, match=r"bad\.csv, record 2: must have at least 3 columns \(token, user name, user uid\), found 2"):
        TokenTable().load_file(bad)


def _issue(ca_key, ca_name, subject, key):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1))
               .not_valid_after(now + dt.timedelta(days=1)))
    if subject == ca_name:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    return builder.sign(ca_key, hashes.SHA256())


def client_certificate(tmp_path: Path, user: str, groups: list[str]) -> tuple[Path, Path, Path]:
    """A CA, and a client certificate it signed for ``user`` (CN) in ``groups`` (O): (ca, cert, key) files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-client-ca")])
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)]
                        + [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups])
    paths = tmp_path / "ca.crt", tmp_path / "client.crt", tmp_path / "client.key"
    paths[0].write_bytes(_issue(ca_key, ca_name, ca_name, ca_key).public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(_issue(ca_key, ca_name, subject, key).public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


async def test_client_certificates_authenticate_as_cn_in_the_groups_of_o(tmp_path):
    ca, cert, key = client_certificate(tmp_path, "carol", ["team-readers"])
    server = APIServer(ObjectStore(), port=0, security=SecurityOptions(client_ca_file=str(ca)))
    await server.start()
    server.rest.create_object(binding("ClusterRoleBinding", "readers", "ClusterRole", "view", ("Group", "team-readers")))
    context = ssl.create_default_context(cadata=server.security.ca_data.decode())
    context.load_cert_chain(cert, key)
    carol = Caller(server, None, context)
    try:
        status, body = await _whoami(carol)
        assert status == 201 and body["status"]["userInfo"] == {"username": "carol", "groups": ["team-readers", "system:authenticated"]}
        assert (await carol.call("GET", "/api/v1/namespaces/default/pods"))[0] == 200
        assert (await carol.call("POST", "/api/v1/namespaces/default/pods", pod("x")))[0] == 403
        conf = server.kubeconfig()
        conf["users"][0]["user"] = {"client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
                                    "client-key-data": base64.b64encode(key.read_bytes()).decode()}
        (tmp_path / "carol.kubeconfig").write_text(yaml.safe_dump(conf))
        client = KubeClient(kubeconfig=tmp_path / "carol.kubeconfig")  # the scheduler's client, from a kubeconfig
        try:
            status, body = await client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                                body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
            assert status == 201 and orjson.loads(body)["status"]["userInfo"]["username"] == "carol"
        finally:
            await client.close()
    finally:
        await carol.close()
        await server.stop()


async def test_insecure_allow_anonymous_serves_plain_http_to_anyone():
    server = APIServer(ObjectStore(), port=0, security=SecurityOptions(allow_anonymous=True))
    await server.start()
    anyone = Caller(server, None)
    try:
        assert server.url.startswith("http://") and server.admin_token == ""
        assert (await anyone.call("POST", "/api/v1/namespaces/default/pods", pod("x")))[0] == 201
        assert (await anyone.call("GET", "/api/v1/namespaces/default/secrets"))[0] == 200
        _, body = await anyone.call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}})
        assert body["status"] == {"allowed": True}
    finally:
        await anyone.close()
        await server.stop()


@pytest.mark.parametrize(("options", "message"), [
    (SecurityOptions(tls_cert_file="a.crt"), "--tls-cert-file and --tls-private-key-file must be given together"),
    (SecurityOptions(token_auth_file="/nonexistent/tokens.csv"), "--token-auth-file: /nonexistent/tokens.csv is not a readable file"),
    (SecurityOptions(allow_anonymous=True, token_auth_file=__file__), "cannot be combined with --token-auth-file"),
])
def test_contradictory_or_missing_security_flags_are_refused(options, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        options.check()


async def test_a_restarted_server_keeps_its_credentials_with_its_data(tmp_path):
    first = APIServer(ObjectStore(), port=0, data=tmp_path / "state.sqlite")
    await first.start()
    token, ca = first.admin_token, first.security.ca_data
    await first.stop()
    second = APIServer(ObjectStore(), port=0, data=tmp_path / "state.sqlite")
    await second.start()
    try:
        assert (second.admin_token, second.security.ca_data) == (token, ca)
        assert oct((tmp_path / "state.sqlite.credentials" / "tokens.csv").stat().st_mode & 0o777) == "0o600"
    finally:
        await second.stop()


async def test_up_runs_its_scheduler_as_system_kube_scheduler_and_it_binds_pods():
    import asyncio

    from kubesched.api.kinds import POD
    from kubesched.simulator.up import Cluster, UpOptions

    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
    options = UpOptions(port=0, kubeconfig_out=None, objects=[node, pod("p")], controllers=False)
    async with Cluster(options) as cluster:
        assert cluster.scheduler is not None
        user = cluster.server.security.tokens.lookup(cluster.scheduler.spec.token)
        assert user == UserInfo("system:kube-scheduler", "system:kube-scheduler")
        for _ in range(100):
            if cluster.store.get(POD, "default", "p")["spec"].get("nodeName"):
                break
            await asyncio.sleep(0.05)
        assert cluster.store.get(POD, "default", "p")["spec"]["nodeName"] == "n1"


async def test_impersonation_needs_the_impersonate_verb_and_then_acts_as_that_user(api, team):
    async def as_(caller: Caller, user: str, path: str) -> tuple[int, dict | bytes]:
        async with caller.session.get(caller.server.url + path, headers={"Impersonate-User": user}) as resp:
            return resp.status, orjson.loads(await resp.read())

    status, body = await as_(team["admin"], "alice", f"{TEAM}/pods")
    assert status == 403 and body["message"].startswith('pods is forbidden: User "alice" cannot list')
    assert (await as_(team["admin"], "alice", f"{TEAM}/pods/p"))[0] == 200
    status, body = await as_(team["limited"], "bob", f"{TEAM}/pods/p")
    assert status == 403
    assert body["message"] == 'users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope'


async def test_self_subject_rules_review_lists_the_callers_rules_in_a_namespace(team):
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "team"}}
    path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
    status, body = await team["limited"].call("POST", path, review)
    assert status == 201 and body["status"]["incomplete"] is False
    assert {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]} in body["status"]["resourceRules"]
    assert {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]} in body["status"]["resourceRules"]
    assert any("/apis/*" in r["nonResourceURLs"] for r in body["status"]["nonResourceRules"])
    _, body = await team["limited"].call("POST", path, {**review, "spec": {"namespace": "default"}})
    assert {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]} not in body["status"]["resourceRules"]
    _, body = await team["admin"].call("POST", path, review)
    assert body["status"]["resourceRules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]


async def test_nobody_grants_rbac_rights_they_do_not_hold(api, team):
    """A namespace admin may write roles and bindings, but only with rights it holds itself (or
    the escalate/bind verbs), as kube-apiserver's RBAC storage checks."""
    api.server.rest.create_object(binding("RoleBinding", "alice-admin", "ClusterRole", "admin", ("User", "alice"), "team"))
    alice = team["limited"]
    roles, bindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles", \
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings"
    held = rbac("Role", "reads-secrets", rules=[{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])
    assert (await alice.call("POST", roles, held))[0] == 201  # admin reads secrets in team
    status, body = await alice.call("POST", roles, rbac("Role", "nodes", rules=[
        {"apiGroups": [""], "resources": ["nodes", "secrets"], "verbs": ["get", "list"]}]))
    assert status == 403 and isinstance(body, dict)
    assert body["message"] == (
        'roles.rbac.authorization.k8s.io "nodes" is forbidden: user "alice" (groups=["system:authenticated"]) is '
        "attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}\n{APIGroups:[""], Resources:["nodes"], Verbs:["list"]}')
    to_admin = binding("RoleBinding", "bob-admin", "ClusterRole", "admin", ("User", "bob"))
    assert (await alice.call("POST", bindings, to_admin))[0] == 201  # she holds admin's rules in team
    to_cluster_admin = binding("RoleBinding", "bob-root", "ClusterRole", "cluster-admin", ("User", "bob"))
    status, body = await alice.call("POST", bindings, to_cluster_admin)
    assert status == 403 and "is attempting to grant RBAC permissions not currently held" in body["message"]
    api.server.rest.create_object(rbac("ClusterRole", "binder", rules=[{"apiGroups": ["rbac.authorization.k8s.io"],
                                  "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["cluster-admin"]}]))
    api.server.rest.create_object(binding("RoleBinding", "alice-binds", "ClusterRole", "binder", ("User", "alice"), "team"))
    assert (await alice.call("POST", bindings, to_cluster_admin))[0] == 201  # the bind verb allows it
    assert (await team["admin"].call("POST", roles, rbac("Role", "anything", rules=[
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}])))[0] == 201  # system:masters may


def test_insecure_allow_anonymous_warns_on_stderr_and_bad_flags_are_refused_before_start(tmp_path, capsys):
    import argparse

    from kubesched.cli.apiserver import add_server_args, security_from
    from kubesched.cli.main import main

    parser = argparse.ArgumentParser()
    add_server_args(parser)
    assert security_from(parser.parse_args(["--insecure-allow-anonymous"])).allow_anonymous
    assert "WARNING: --insecure-allow-anonymous: serving plain HTTP without authentication" in capsys.readouterr().err
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("t,u\n")
    assert main(["apiserver", "--port", "0", "--token-auth-file", str(tokens)]) == 2
    assert f"error: token file {tokens}, record 1: must have at least 3 columns" in capsys.readouterr().err
