"""CustomResourceDefinitions as kube-apiserver's apiextensions serves them: the CRD validated and
established, then its objects served at their paths (CRUD, selectors, watch, status), pruned,
defaulted and validated against the schema, in discovery and OpenAPI, printed with the printer
columns, authorized by RBAC, persisted, and deleted with their CRD."""

from __future__ import annotations

import copy
import re

import aiohttp
import orjson
import pytest

from kubesched.api.apierrors import NotFound
from kubesched.api.kinds import CRD, custom_resource_kind
from kubesched.apiserver import APIServer
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore

from .conftest import ADMIN_TOKEN

GROUP = "scheduling.x-k8s.io"
PODGROUPS = f"/apis/{GROUP}/v1alpha1/namespaces/default/podgroups"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
QUANTITY = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"

#: The shape of scheduler-plugins' PodGroup CRD, with a few constraints more to exercise the schema.
PODGROUP_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"podgroups.{GROUP}"},
    "spec": {
        "group": GROUP, "scope": "Namespaced",
        "names": {"kind": "PodGroup", "listKind": "PodGroupList", "plural": "podgroups", "singular": "podgroup",
                  "shortNames": ["pg", "pgs"]},
        "versions": [{
            "name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
            "additionalPrinterColumns": [
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                {"name": "MinMember", "type": "integer", "jsonPath": ".spec.minMember"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
            "schema": {"openAPIV3Schema": {
                "type": "object", "description": "PodGroup is a collection of Pod; used for batch workload.",
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                    "spec": {"type": "object", "required": ["minMember"], "properties": {
                        "minMember": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 1000},
                        "minResources": {"type": "object", "additionalProperties": {
                            "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY,
                            "x-kubernetes-int-or-string": True}},
                        "scheduleTimeoutSeconds": {"type": "integer", "format": "int32", "default": 60},
                        "queue": {"type": "string", "enum": ["batch", "interactive"], "maxLength": 16},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
                    "status": {"type": "object", "properties": {
                        "phase": {"type": "string"}, "running": {"type": "integer"}}}}}},
        }],
    },
}


def podgroup(name: str, **spec) -> dict:
    return {"apiVersion": f"{GROUP}/v1alpha1", "kind": "PodGroup", "metadata": {"name": name, "labels": {"team": name[:1]}},
            "spec": {"minMember": 2, **spec}}


@pytest.fixture
async def crd(api):
    status, body, _ = await api.call("POST", CRDS, PODGROUP_CRD)
    assert status == 201, body
    return body


async def test_a_created_crd_is_named_accepted_and_established(crd):
    conditions = {c["type"]: (c["status"], c["reason"]) for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": ("True", "NoConflicts"), "Established": ("True", "InitialNamesAccepted")}
    assert crd["status"]["acceptedNames"]["shortNames"] == ["pg", "pgs"]
    assert crd["status"]["storedVersions"] == ["v1alpha1"]
    assert crd["spec"]["conversion"] == {"strategy": "None"}


def _invalid_crd(change) -> dict:
    crd = copy.deepcopy(PODGROUP_CRD)
    change(crd)
    return crd


def _second_version(crd: dict, storage: bool) -> None:
    crd["spec"]["versions"].append({**copy.deepcopy(crd["spec"]["versions"][0]), "name": "v1beta1", "storage": storage})


INVALID_CRDS = {
    "name is not plural.group": (lambda c: c["metadata"].update(name="groups.scheduling.x-k8s.io"), "metadata.name",
                                 'must be spec.names.plural+"."+spec.group'),
    "no storage version": (lambda c: c["spec"]["versions"][0].update(storage=False), "spec.versions",
                           "must have exactly one version marked as storage version"),
    "two storage versions": (lambda c: _second_version(c, storage=True), "spec.versions",
                             "must have exactly one version marked as storage version"),
    "no served version": (lambda c: c["spec"]["versions"][0].update(served=False), "spec.versions",
                          "must have at least one version marked as served"),
    "no schema": (lambda c: c["spec"]["versions"][0].pop("schema"), "spec.versions[0].schema.openAPIV3Schema",
                  "schemas are required"),
    "a field without a type": (lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].pop("type"),
                               "spec.versions[0].schema.openAPIV3Schema.properties[spec].type",
                               "must not be empty for specified object fields"),
    "a root that is no object": (lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"].update(type="string"),
                                 "spec.versions[0].schema.openAPIV3Schema.type", "must be object at the root"),
    "an unknown scope": (lambda c: c["spec"].update(scope="Everywhere"), "spec.scope", 'supported values: "Cluster", "Namespaced"'),
    "a selectable field that is no scalar": (lambda c: c["spec"]["versions"][0].update(selectableFields=[{"jsonPath": ".spec.extra"}]),
                                             "spec.versions[0].selectableFields[0].jsonPath",
                                             "must point to a field of type string, boolean or integer"),
    "a selectable field the schema lacks": (lambda c: c["spec"]["versions"][0].update(selectableFields=[{"jsonPath": ".spec.colour"}]),
                                            "spec.versions[0].selectableFields[0].jsonPath", "does not refer to a field in the schema"),
    "a group without a dot": (lambda c: (c["spec"].update(group="scheduling"), c["metadata"].update(name="podgroups.scheduling")),
                              "spec.group", "should be a domain with at least one dot"),
}


@pytest.mark.parametrize("case", list(INVALID_CRDS))
async def test_an_invalid_crd_is_refused_naming_the_field(api, case):
    change, field, message = INVALID_CRDS[case]
    status, body, _ = await api.call("POST", CRDS, _invalid_crd(change))
    assert status == 422, body
    causes = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert field in causes and message in causes[field], causes


async def test_a_crd_whose_names_another_crd_holds_is_established_once_they_are_free(api, crd):
    rival = _invalid_crd(lambda c: (c["metadata"].update(name=f"pgroups.{GROUP}"),
                                    c["spec"]["names"].update(plural="pgroups", singular="pgroup")))
    status, body, _ = await api.call("POST", CRDS, rival)
    assert status == 201
    conditions = {c["type"]: (c["status"], c["reason"], c["message"]) for c in body["status"]["conditions"]}
    assert conditions["NamesAccepted"] == ("False", "NameConflict", '"pg" is already in use')
    assert conditions["Established"][0] == "False"
    status, _, _ = await api.call("GET", f"/apis/{GROUP}/v1alpha1/namespaces/default/pgroups")
    assert status == 404
    await api.call("DELETE", f"{CRDS}/podgroups.{GROUP}")
    _, freed, _ = await api.call("GET", f"{CRDS}/pgroups.{GROUP}")
    assert {c["type"]: c["status"] for c in freed["status"]["conditions"]} == {"NamesAccepted": "True", "Established": "True"}
    assert (await api.call("GET", f"/apis/{GROUP}/v1alpha1/namespaces/default/pgroups"))[0] == 200


async def test_custom_objects_are_created_read_listed_by_selector_updated_and_deleted(api, crd):
    for name in ("alpha", "beta"):
        status, body, _ = await api.call("POST", PODGROUPS, podgroup(name))
        assert status == 201, body
    status, got, _ = await api.call("GET", f"{PODGROUPS}/alpha")
    assert (status, got["kind"], got["apiVersion"], got["spec"]["minMember"]) == (200, "PodGroup", f"{GROUP}/v1alpha1", 2)
    _, listed, _ = await api.call("GET", PODGROUPS, params={"labelSelector": "team=b"})
    assert listed["kind"] == "PodGroupList" and [o["metadata"]["name"] for o in listed["items"]] == ["beta"]
    _, listed, _ = await api.call("GET", f"/apis/{GROUP}/v1alpha1/podgroups", params={"fieldSelector": "metadata.name=alpha"})
    assert [o["metadata"]["name"] for o in listed["items"]] == ["alpha"]
    status, patched, _ = await api.call("PATCH", f"{PODGROUPS}/alpha", {"spec": {"minMember": 5}},
                                        content_type="application/merge-patch+json")
    assert (status, patched["spec"]["minMember"], patched["metadata"]["generation"]) == (200, 5, 2)
    status, _, _ = await api.call("PATCH", f"{PODGROUPS}/alpha", {"spec": {"minMember": 6}},
                                  content_type="application/strategic-merge-patch+json")
    assert status == 415
    status, _, _ = await api.call("DELETE", f"{PODGROUPS}/alpha")
    assert status == 200
    status, _, _ = await api.call("GET", f"{PODGROUPS}/alpha")
    assert status == 404


async def test_field_selectors_select_on_the_versions_selectable_fields(api):
    crd = _invalid_crd(lambda c: c["spec"]["versions"][0].update(selectableFields=[{"jsonPath": ".spec.queue"}]))
    assert (await api.call("POST", CRDS, crd))[0] == 201
    await api.call("POST", PODGROUPS, podgroup("alpha", queue="batch"))
    await api.call("POST", PODGROUPS, podgroup("beta", queue="interactive"))
    _, listed, _ = await api.call("GET", PODGROUPS, params={"fieldSelector": "spec.queue=batch"})
    assert [o["metadata"]["name"] for o in listed["items"]] == ["alpha"]
    _, listed, _ = await api.call("GET", PODGROUPS, params={"fieldSelector": "spec.queue!=batch"})
    assert [o["metadata"]["name"] for o in listed["items"]] == ["beta"]
    assert (await api.call("GET", PODGROUPS, params={"fieldSelector": "spec.minMember=2"}))[0] == 400


async def test_a_watch_sees_custom_objects_added_modified_and_deleted(api, crd):
    _, listed, _ = await api.call("GET", PODGROUPS)
    await api.call("POST", PODGROUPS, podgroup("alpha"))
    await api.call("PATCH", f"{PODGROUPS}/alpha", {"spec": {"minMember": 3}}, content_type="application/merge-patch+json")
    await api.call("DELETE", f"{PODGROUPS}/alpha")
    events = await api.watch_lines(PODGROUPS, {"resourceVersion": listed["metadata"]["resourceVersion"]}, count=3)
    assert [(e["type"], e["object"]["kind"]) for e in events] == [("ADDED", "PodGroup"), ("MODIFIED", "PodGroup"),
                                                                    ("DELETED", "PodGroup")]


async def test_the_status_subresource_alone_writes_the_status(api, crd):
    _, created, _ = await api.call("POST", PODGROUPS, {**podgroup("alpha"), "status": {"phase": "Running"}})
    assert "status" not in created
    status, updated, _ = await api.call("PUT", f"{PODGROUPS}/alpha/status", {**created, "status": {"phase": "Scheduling"},
                                                                             "spec": {"minMember": 9}})
    assert (status, updated["status"], updated["spec"]["minMember"]) == (200, {"phase": "Scheduling"}, 2)


SCHEMA_VIOLATIONS = {
    "a value of the wrong type": ({"minMember": "two"}, "spec.minMember",
                                  'Invalid value: "string": spec.minMember in body must be of type integer: "string"'),
    "a required field missing": ({"minMember": None}, "spec.minMember", "Required value"),
    "below the minimum": ({"minMember": 0}, "spec.minMember",
                          "Invalid value: 0: spec.minMember in body should be greater than or equal to 1"),
    "above the maximum": ({"minMember": 1001}, "spec.minMember",
                          "Invalid value: 1001: spec.minMember in body should be less than or equal to 1000"),
    "a value outside the enum": ({"queue": "urgent"}, "spec.queue", 'Unsupported value: "urgent": supported values: "batch", "interactive"'),
    "a string not matching the pattern": ({"minResources": {"cpu": "lots"}}, "spec.minResources.cpu",
                                          f"Invalid value: \"lots\": spec.minResources.cpu in body should match '{QUANTITY}'"),
}


@pytest.mark.parametrize("case", list(SCHEMA_VIOLATIONS))
async def test_an_object_against_its_schema_is_refused_naming_the_field(api, crd, case):
    spec, field, message = SCHEMA_VIOLATIONS[case]
    obj = podgroup("alpha", **spec)
    obj["spec"] = {k: v for k, v in obj["spec"].items() if v is not None}
    status, body, _ = await api.call("POST", PODGROUPS, obj)
    assert status == 422, body
    assert body["message"].startswith('PodGroup.scheduling.x-k8s.io "alpha" is invalid: ')
    causes = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert causes == {field: message}


@pytest.mark.parametrize("directive, status, warned", [("Strict", 400, False), ("Warn", 201, True), ("Ignore", 201, False)])
async def test_unknown_fields_are_pruned_or_refused_as_field_validation_says(api, crd, directive, status, warned):
    obj = podgroup("alpha", colour="blue", extra={"anything": {"goes": 1}})
    got, body, headers = await api.call("POST", PODGROUPS, obj, params={"fieldValidation": directive})
    assert got == status, body
    if directive == "Strict":
        assert body["message"] == ('PodGroup in version "v1alpha1" cannot be handled as a PodGroup: '
                                   'strict decoding error: unknown field "spec.colour"')
        return
    assert "colour" not in body["spec"] and body["spec"]["extra"] == {"anything": {"goes": 1}}
    assert ('unknown field \\"spec.colour\\"' in headers.get("Warning", "")) is warned


async def test_schema_defaults_fill_absent_fields(api, crd):
    _, body, _ = await api.call("POST", PODGROUPS, podgroup("alpha"))
    assert body["spec"]["scheduleTimeoutSeconds"] == 60


async def test_discovery_lists_the_custom_group_and_its_resource(api, crd):
    _, groups, _ = await api.call("GET", "/apis")
    entry = next(g for g in groups["groups"] if g["name"] == GROUP)
    assert entry["preferredVersion"] == {"groupVersion": f"{GROUP}/v1alpha1", "version": "v1alpha1"}
    _, resources, _ = await api.call("GET", f"/apis/{GROUP}/v1alpha1")
    assert [(r["name"], r["kind"], r.get("shortNames")) for r in resources["resources"]] == [
        ("podgroups", "PodGroup", ["pg", "pgs"]), ("podgroups/status", "PodGroup", None)]
    _, aggregated, _ = await api.call("GET", "/apis", accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    group = next(g for g in aggregated["items"] if g["metadata"]["name"] == GROUP)
    assert group["versions"][0]["resources"][0]["subresources"][0]["subresource"] == "status"


async def test_openapi_documents_carry_the_custom_schema(api, crd):
    _, root, _ = await api.call("GET", "/openapi/v3")
    assert f"apis/{GROUP}/v1alpha1" in root["paths"]
    _, doc, _ = await api.call("GET", f"/openapi/v3/apis/{GROUP}/v1alpha1")
    schema = doc["components"]["schemas"]["io.x-k8s.scheduling.v1alpha1.PodGroup"]
    assert schema["properties"]["spec"]["properties"]["minMember"]["minimum"] == 1
    assert schema["x-kubernetes-group-version-kind"] == [{"group": GROUP, "version": "v1alpha1", "kind": "PodGroup"}]
    patch = doc["paths"][f"{PODGROUPS.replace('default', '{namespace}')}/{{name}}"]["patch"]
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]  # kubectl then merge-patches
    _, v2, _ = await api.call("GET", "/openapi/v2")
    resources = v2["definitions"]["io.x-k8s.scheduling.v1alpha1.PodGroup"]["properties"]["spec"]["properties"]["minResources"]
    assert "anyOf" not in resources["additionalProperties"] and "type" not in resources["additionalProperties"]


async def test_tables_show_the_printer_columns(api, crd):
    created = podgroup("alpha")
    await api.call("POST", PODGROUPS, created)
    await api.call("PUT", f"{PODGROUPS}/alpha/status", {**created, "status": {"phase": "Running"}})
    _, table, _ = await api.call("GET", PODGROUPS, accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Phase", "MinMember", "Age"]
    name, phase, members, age = table["rows"][0]["cells"]
    assert (name, phase, members) == ("alpha", "Running", 2) and age.endswith("s")


async def test_deleting_a_crd_deletes_its_objects_and_stops_serving_them(api, crd):
    await api.call("POST", PODGROUPS, podgroup("alpha"))
    status, _, _ = await api.call("DELETE", f"{CRDS}/podgroups.{GROUP}")
    assert status == 200
    assert (await api.call("GET", PODGROUPS))[0] == 404
    await api.call("POST", CRDS, PODGROUP_CRD)
    _, listed, _ = await api.call("GET", PODGROUPS)
    assert listed["items"] == []


async def test_every_served_version_reads_the_same_objects(api):
    crd = copy.deepcopy(PODGROUP_CRD)
    _second_version(crd, storage=False)
    await api.call("POST", CRDS, crd)
    beta = PODGROUPS.replace("v1alpha1", "v1beta1")
    status, created, _ = await api.call("POST", beta, {**podgroup("alpha"), "apiVersion": f"{GROUP}/v1beta1"})
    assert (status, created["apiVersion"]) == (201, f"{GROUP}/v1beta1")
    _, stored, _ = await api.call("GET", f"{PODGROUPS}/alpha")
    assert stored["apiVersion"] == f"{GROUP}/v1alpha1"
    _, listed, _ = await api.call("GET", beta)
    assert (listed["apiVersion"], [o["apiVersion"] for o in listed["items"]]) == (f"{GROUP}/v1beta1", [f"{GROUP}/v1beta1"])
    _, groups, _ = await api.call("GET", f"/apis/{GROUP}")
    assert groups["preferredVersion"]["version"] == "v1beta1"


async def test_rbac_rules_apply_to_custom_resources(api, crd):
    reader = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "pg-reader", "namespace": "default"},
              "rules": [{"apiGroups": [GROUP], "resources": ["podgroups"], "verbs": ["get", "list"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "alice-reads", "namespace": "default"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pg-reader"},
               "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}
    for obj in (reader, binding, podgroup("alpha")):
        api.server.rest.create_object(obj)
    token = api.server.mint_token("alice")
    async with api.server.client_session(token=token) as alice:
        async with alice.get(api.server.url + f"{PODGROUPS}/alpha") as resp:
            assert resp.status == 200
        async with alice.post(api.server.url + PODGROUPS, data=orjson.dumps(podgroup("beta")),
                              headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 403


async def test_crds_and_their_objects_survive_a_restart_with_data(tmp_path, security):
    data = tmp_path / "cluster.sqlite"
    for round_ in ("write", "read"):
        server = APIServer(ObjectStore(), port=0, data=data, security=security)
        await server.start()
        try:
            async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                                             connector=aiohttp.TCPConnector(ssl=server.security.client_ssl_context())) as session:
                if round_ == "write":
                    for path, obj in ((CRDS, PODGROUP_CRD), (PODGROUPS, podgroup("alpha"))):
                        async with session.post(server.url + path, data=orjson.dumps(obj),
                                                headers={"Content-Type": "application/json"}) as resp:
                            assert resp.status == 201
                else:
                    async with session.get(server.url + f"{PODGROUPS}/alpha") as resp:
                        assert resp.status == 200
                        assert (await resp.json())["spec"]["minMember"] == 2
        finally:
            await server.stop()


async def test_the_scheduler_clients_read_and_write_status_of_custom_objects_by_group_version_plural(api, crd):
    kind = custom_resource_kind(GROUP, "v1alpha1", "podgroups")
    store = ObjectStore()
    store.create(CRD, copy.deepcopy(PODGROUP_CRD))
    for client in (api.kube_client(), MemoryClient(store)):
        await client.create(kind, podgroup("alpha"))
        items, _ = await client.list(kind)
        changed = {**copy.deepcopy(items[0]), "status": {"phase": "Running"}}
        updated = await client.update_status(kind, changed)
        assert (updated["kind"], updated["status"]) == ("PodGroup", {"phase": "Running"})
        assert (await client.get(kind, "default", "alpha"))["status"] == {"phase": "Running"}
        await client.close()


def _cluster_scoped_crd() -> dict:
    """scheduler-plugins' ElasticQuota shape made cluster-scoped: a quota object per tenant."""
    crd = copy.deepcopy(PODGROUP_CRD)
    crd["metadata"]["name"] = f"tenantquotas.{GROUP}"
    crd["spec"]["scope"] = "Cluster"
    crd["spec"]["names"] = {"kind": "TenantQuota", "plural": "tenantquotas"}
    return crd


async def test_the_scheduler_clients_create_cluster_scoped_custom_objects_by_group_version_plural(api):
    await api.call("POST", CRDS, _cluster_scoped_crd())
    kind = custom_resource_kind(GROUP, "v1alpha1", "tenantquotas")
    store = ObjectStore()
    store.create(CRD, _cluster_scoped_crd())
    for client in (api.kube_client(), MemoryClient(store)):
        quota = {**podgroup("team-a"), "kind": "TenantQuota"}
        created = await client.create(kind, quota)
        assert "namespace" not in created["metadata"]
        assert (await client.get(kind, None, "team-a"))["spec"]["minMember"] == 2
        items, _ = await client.list(kind)
        assert [o["metadata"]["name"] for o in items] == ["team-a"]
        await client.close()
    _, listed, _ = await api.call("GET", f"/apis/{GROUP}/v1alpha1/tenantquotas")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["team-a"]


async def test_the_http_client_names_a_custom_resource_the_server_does_not_serve(api, crd):
    client = api.kube_client()
    try:
        for version, plural in (("v1beta1", "podgroups"), ("v1alpha1", "tenantquotas")):
            with pytest.raises(NotFound, match=rf"could not find the requested resource \({plural}.{version}.{GROUP}\)"):
                await client.create(custom_resource_kind(GROUP, version, plural), podgroup("alpha"))
    finally:
        await client.close()


def _crd_with_rules(*rules: dict) -> dict:
    crd = copy.deepcopy(PODGROUP_CRD)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = list(rules)
    return crd


async def test_cel_rules_refuse_a_write_naming_the_field_and_the_message(api):
    rules = ({"rule": "self.minMember <= 10 || self.queue == 'batch'", "message": "more than 10 members need the batch queue",
              "fieldPath": ".queue"},
             {"rule": "self.minMember >= oldSelf.minMember", "message": "minMember may not decrease"})
    assert (await api.call("POST", CRDS, _crd_with_rules(*rules)))[0] == 201
    status, body, _ = await api.call("POST", PODGROUPS, podgroup("big", minMember=20, queue="interactive"))
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == ('PodGroup.scheduling.x-k8s.io "big" is invalid: spec.queue: Invalid value: '
                               "more than 10 members need the batch queue")
    status, created, _ = await api.call("POST", PODGROUPS, podgroup("small", minMember=5))
    assert status == 201
    status, body, _ = await api.call("PUT", f"{PODGROUPS}/small", {**created, "spec": {"minMember": 4}})
    assert (status, body["details"]["causes"][0]["field"]) == (422, "spec")
    assert "minMember may not decrease" in body["message"]


async def test_a_crd_whose_rule_does_not_compile_is_refused(api):
    status, body, _ = await api.call("POST", CRDS, _crd_with_rules({"rule": "self.minMember > limit"}))
    assert status == 422
    assert body["message"].endswith("spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: "
                                    "Invalid value: \"self.minMember > limit\": compilation failed: undeclared reference to 'limit' (in container '')")


def scaled_crd() -> dict:
    """A Worker pool CRD with the ``scale`` subresource (the shape of upstream's scale tests)."""
    crd = copy.deepcopy(PODGROUP_CRD)
    crd["metadata"]["name"] = f"workerpools.{GROUP}"
    crd["spec"]["names"] = {"kind": "WorkerPool", "plural": "workerpools", "shortNames": ["wp"]}
    version = crd["spec"]["versions"][0]
    version["subresources"] = {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                                                       "labelSelectorPath": ".status.selector"}}
    version["additionalPrinterColumns"] = []
    version["schema"]["openAPIV3Schema"]["properties"] = {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer", "maximum": 10}}},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "selector": {"type": "string"}}}}
    return crd


WORKERPOOLS = f"/apis/{GROUP}/v1alpha1/namespaces/default/workerpools"


async def test_the_scale_subresource_reads_and_writes_the_replicas_paths(api):
    assert (await api.call("POST", CRDS, scaled_crd()))[0] == 201
    pool = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "WorkerPool", "metadata": {"name": "gpu"}, "spec": {"replicas": 2}}
    await api.call("POST", WORKERPOOLS, pool)
    _, current, _ = await api.call("GET", f"{WORKERPOOLS}/gpu")
    await api.call("PUT", f"{WORKERPOOLS}/gpu/status", {**current, "status": {"replicas": 2, "selector": "pool=gpu"}})
    status, scale, _ = await api.call("GET", f"{WORKERPOOLS}/gpu/scale")
    assert (status, scale["apiVersion"], scale["kind"]) == (200, "autoscaling/v1", "Scale")
    assert (scale["spec"], scale["status"]) == ({"replicas": 2}, {"replicas": 2, "selector": "pool=gpu"})
    status, scaled, _ = await api.call("PUT", f"{WORKERPOOLS}/gpu/scale", {**scale, "spec": {"replicas": 5}})
    assert (status, scaled["spec"]["replicas"]) == (200, 5)
    status, _, _ = await api.call("PATCH", f"{WORKERPOOLS}/gpu/scale", {"spec": {"replicas": 6}},
                                  content_type="application/merge-patch+json")
    _, stored, _ = await api.call("GET", f"{WORKERPOOLS}/gpu")
    assert (status, stored["spec"]["replicas"]) == (200, 6)
    status, refused, _ = await api.call("PATCH", f"{WORKERPOOLS}/gpu/scale", {"spec": {"replicas": 11}},
                                        content_type="application/merge-patch+json")
    assert (status, "spec.replicas in body should be less than or equal to 10" in refused["message"]) == (422, True)
    assert (await api.call("GET", f"{PODGROUPS}/any/scale"))[0] == 404  # PodGroups declare no scale
    _, resources, _ = await api.call("GET", f"/apis/{GROUP}/v1alpha1")
    scale_entry = next(r for r in resources["resources"] if r["name"] == "workerpools/scale")
    assert (scale_entry["group"], scale_entry["version"], scale_entry["kind"]) == ("autoscaling", "v1", "Scale")


@pytest.mark.parametrize(("scale", "field", "detail"), [
    ({"statusReplicasPath": ".status.replicas"}, "specReplicasPath", "Required value"),
    ({"specReplicasPath": ".status.replicas", "statusReplicasPath": ".status.replicas"}, "specReplicasPath",
     "should be a json path under .spec"),
    ({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".metadata.labels"},
     "labelSelectorPath", "should be a json path under .spec or .status"),
])
async def test_an_invalid_scale_subresource_refuses_the_crd(api, scale, field, detail):
    crd = scaled_crd()
    crd["spec"]["versions"][0]["subresources"]["scale"] = scale
    status, body, _ = await api.call("POST", CRDS, crd)
    assert status == 422 and f"spec.versions[0].subresources.scale.{field}: " in body["message"] and detail in body["message"]


async def test_a_deleted_crd_terminates_then_goes_once_its_objects_are_deleted(api, crd):
    await api.call("POST", PODGROUPS, podgroup("alpha"))
    rv = crd["metadata"]["resourceVersion"]
    status, terminating, _ = await api.call("DELETE", f"{CRDS}/podgroups.{GROUP}")
    assert status == 200 and terminating["metadata"]["deletionTimestamp"]
    assert terminating["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    assert {c["type"]: (c["status"], c["reason"]) for c in terminating["status"]["conditions"]}["Terminating"] == \
        ("True", "InstanceDeletionInProgress")
    events = await api.watch_lines(CRDS, {"resourceVersion": rv, "fieldSelector": f"metadata.name=podgroups.{GROUP}"}, count=3)
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED", "DELETED"]
    finished = {c["type"]: (c["status"], c["reason"]) for c in events[1]["object"]["status"]["conditions"]}
    assert finished["Terminating"] == ("False", "InstanceDeletionCompleted")
    assert [e["object"]["metadata"].get("finalizers") for e in events] == [
        ["customresourcecleanup.apiextensions.k8s.io"], ["customresourcecleanup.apiextensions.k8s.io"], None]
    assert (await api.call("GET", f"{CRDS}/podgroups.{GROUP}"))[0] == 404


async def test_the_openapi_document_of_a_scaled_crd_defines_what_its_scale_path_references(api):
    await api.call("POST", CRDS, scaled_crd())
    _, doc, _ = await api.call("GET", f"/openapi/v3/apis/{GROUP}/v1alpha1")
    scale = doc["paths"][f"{WORKERPOOLS.replace('default', '{namespace}')}/{{name}}/scale"]
    referenced = set(re.findall(r'"#/components/schemas/([^"]+)"', orjson.dumps(doc["paths"]).decode()))
    assert "io.k8s.api.autoscaling.v1.Scale" in referenced and set(scale) >= {"get", "put", "patch"}
    assert referenced <= set(doc["components"]["schemas"])
