"""The REST verbs over the object store, independent of the HTTP library: a parsed ``Call`` in, a
``Reply`` (status code and JSON-able body) out. ``kubesched.apiserver.server`` does the HTTP.

Semantics follow kube-apiserver's generic registry: create/update/patch/delete with dryRun,
preconditions and fieldManager; list with label and field selectors, ``limit``/``continue`` and
Table output; the ``status``, ``scale``, ``binding``, ``eviction`` and ``finalize`` subresources;
and a garbage collector for ``ownerReferences`` (what kube-controller-manager's would do).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from kubesched.api import crd as crdapi
from kubesched.api import schema_validation
from kubesched.api.apierrors import APIError, BadRequest, Conflict, Invalid, MethodNotAllowed, NotFound
from kubesched.api.events import core_to_v1, v1_to_core
from kubesched.api.kinds import EVENT, NAMESPACE, CustomKind, Kind, kind_for, known_kind
from kubesched.api.meta import json_copy
from kubesched.apiserver import apply as ssa
from kubesched.apiserver import bounds, codec, eviction, fieldvalidation, selectors, tables
from kubesched.apiserver.codec import Output
from kubesched.apiserver.defaults import Defaulter
from kubesched.apiserver.patch import PATCH_TYPES, UnsupportedPatch, apply_patch
from kubesched.apiserver.store import ObjectStore
from kubesched.utils.clock import rfc3339

log = logging.getLogger(__name__)

EVENTS_V1 = kind_for("events.k8s.io/v1", "Event")
PDB = known_kind("PodDisruptionBudget")
SCALABLE = {"Deployment", "ReplicaSet", "StatefulSet", "ReplicationController"}
OWNER_KINDS = {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ReplicationController", "Job", "CronJob",
               "Service", "Node", "Namespace", "PersistentVolumeClaim", "ResourceClaim"}
APPLY_PATCH = "application/apply-patch+yaml"
#: Not served for custom resources (their schema has no patch strategies), as kube-apiserver.
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class ServerError(APIError):
    code = 500
    reason = "InternalError"


class NotFoundPath(APIError):
    code = 404
    reason = "NotFound"

    def __init__(self) -> None:
        super().__init__("the server could not find the requested resource")

    def status(self) -> dict:
        out = super().status()
        out["details"] = {}
        return out


def method_not_allowed() -> MethodNotAllowed:
    return MethodNotAllowed("the server does not allow this method on the requested resource")


class View:
    """A served kind and how its objects map to the stored ones (events.k8s.io events are stored
    once, as core/v1 events, and converted on the way in and out; a custom resource's objects are
    stored at its storage version, and served at another by their ``apiVersion``, as the CRD
    conversion strategy ``None`` converts)."""

    __slots__ = ("api_version", "converted", "kind", "store_kind")

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.converted = kind == EVENTS_V1
        self.store_kind = EVENT if self.converted else kind
        self.api_version = kind.api_version if isinstance(kind, CustomKind) else None

    def out(self, obj: dict) -> dict:
        if self.api_version is not None:  # objects stored before the storage version changed keep theirs
            return obj if obj.get("apiVersion") == self.api_version else {**obj, "apiVersion": self.api_version}
        return core_to_v1(obj) if self.converted else obj

    def into(self, obj: dict) -> dict:
        return v1_to_core(obj) if self.converted else obj

    def not_found(self, name: str) -> NotFound:
        return NotFound.of(self.kind.resource, name, self.kind.group)


@dataclass
class Call:
    method: str
    view: View
    namespace: str | None
    name: str | None
    subresource: str | None
    query: Mapping[str, str]
    body: bytes = b""
    content_type: str = codec.JSON
    output: Output = codec.OBJECT
    user_agent: str = ""
    #: Who makes the request (``authn.UserInfo``; None when the server authenticates nobody).
    user: Any = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


SUCCESS_201 = orjson.dumps(codec.status_success(201))


class RestAPI:
    def __init__(self, store: ObjectStore, *, garbage_collect: bool = True) -> None:
        self.store = store
        self.defaulter = Defaulter(store)
        self.garbage_collect = garbage_collect
        #: Checks a write by ``call.user`` of the final object before it is stored (RBAC's
        #: escalation check); raises to refuse it.
        self.guard: Callable[[Call, dict], None] | None = None

    def _guard(self, call: Call, obj: dict) -> None:
        if self.guard is not None:
            self.guard(call, obj)

    # --- helpers ----------------------------------------------------------------------------
    def now(self) -> str:
        return rfc3339(self.store.clock.wall())

    def _get(self, view: View, namespace: str | None, name: str) -> dict:
        obj = self.store.try_get(view.store_kind, namespace, name)
        if obj is None:
            raise view.not_found(name)
        return obj

    def _decode_object(self, call: Call, options_kind: str) -> dict:
        """The body as an object of the endpoint's kind, type-checked and with unknown or
        duplicate fields handled as ``fieldValidation`` says (before anything reads it)."""
        kind = call.view.kind
        mode = fieldvalidation.directive(call.query, options_kind)
        obj = codec.decode_body(call.body, call.content_type, kind.kind, duplicates=mode != fieldvalidation.IGNORE)
        if not isinstance(obj, dict):
            raise BadRequest(f"the object provided is unrecognized (must be of type {kind.kind}): couldn't get version/kind; "
                             f"json parse error: json: cannot unmarshal {type(obj).__name__} into Go value of type struct")
        api_version, obj_kind = obj.get("apiVersion"), obj.get("kind")
        if (api_version and api_version != kind.api_version) or (obj_kind and obj_kind != kind.kind):
            raise BadRequest(f'{obj_kind or kind.kind} in version "{api_version or kind.api_version}" cannot be handled as a '
                             f'{kind.kind}: no kind "{obj_kind}" is registered for version "{api_version}" in scheme '
                             f'"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30"')
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        call.warnings += check_decoded(kind, obj, mode, specs=self.store.specs)
        obj.setdefault("metadata", {})
        return obj

    @staticmethod
    def _reply(call: Call, status: int, body: Any) -> Reply:
        """A write's reply, with the ``Warning`` headers its decoding earned."""
        if not call.warnings:
            return Reply(status, body)
        return Reply(status, body, {"Warning": fieldvalidation.warning_header(call.warnings)})

    def _check_namespace(self, call: Call, obj: dict) -> None:
        if not call.view.kind.namespaced:
            return
        meta = obj["metadata"]
        if meta.get("namespace") and call.namespace and meta["namespace"] != call.namespace:
            raise BadRequest("the namespace of the provided object does not match the namespace sent on the request")
        if call.namespace:
            meta["namespace"] = call.namespace

    def _dry_run(self, call: Call, options: Mapping | None = None) -> bool:
        values = [call.query.get("dryRun", "")]
        if options and options.get("dryRun"):
            values += list(options["dryRun"])
        for value in values:
            if value and value != "All":
                raise BadRequest(f'unsupported dry run value "{value}": supported values: "All"')
        return any(values)

    def _manager(self, call: Call) -> str | None:
        """``fieldManager``, or for kubectl (which leaves it out on some verbs, e.g. scale) the
        User-Agent's product, as upstream derives it. Other clients without one are not tracked,
        which keeps the scheduler's hot paths free of field-set bookkeeping."""
        manager = call.query.get("fieldManager")
        if manager is not None and len(manager) > 128:
            raise BadRequest("fieldManager: Too long: may not be more than 128 bytes")
        if manager is None and call.user_agent.startswith("kubectl/"):
            manager = "kubectl"
        return manager

    def _record(self, call: Call, old: dict | None, new: dict, subresource: str = "") -> None:
        manager = self._manager(call)
        if manager:
            ssa.record_update(old, new, manager, call.view.kind.api_version, call.view.kind.kind, self.now(), subresource)

    # --- reads --------------------------------------------------------------------------------
    def get(self, call: Call) -> Reply:
        assert call.name is not None
        obj = call.view.out(self._get(call.view, call.namespace, call.name))
        if call.subresource == "scale":
            return Reply(200, self._scale_of(call.view, obj))
        if call.output.form == "table":
            rv = obj["metadata"].get("resourceVersion", "")
            return Reply(200, tables.to_table(call.view.kind, [obj], {"resourceVersion": rv}, call.query.get("includeObject", "PartialObjectMetadata"),
                                              row_source=self._row_source(call.view)))
        if call.output.form == "partial":
            return Reply(200, tables.partial_metadata(obj))
        return Reply(200, obj)

    def _row_source(self, view: View) -> Callable[[dict], dict] | None:
        return v1_to_core if view.converted else None

    def predicate(self, call: Call) -> Callable[[dict], bool] | None:
        """Label and field selectors of the request, over stored objects."""
        labels = selectors.label_predicate(call.query.get("labelSelector"))
        fields = selectors.field_predicate(call.view.kind, call.query.get("fieldSelector"))
        if fields is not None and call.view.converted:
            on_served = fields

            def fields(obj: dict) -> bool:
                return on_served(core_to_v1(obj))

        return selectors.combine(labels, fields)

    def list(self, call: Call) -> Reply:
        view = call.view
        predicate = self.predicate(call)
        rv = self.store.rv
        name = selectors.single_name(call.query.get("fieldSelector"))
        if name is not None and (call.namespace is not None or not view.kind.namespaced):
            one = self.store.try_get(view.store_kind, call.namespace, name)
            items = [one] if one is not None and (predicate is None or predicate(one)) else []
        else:
            items, rv = self.store.list(view.store_kind, call.namespace, predicate)
            items.sort(key=_sort_key)
        limit = int_param(call.query, "limit")
        token = call.query.get("continue")
        list_rv = rv
        if token:
            list_rv, start = _decode_continue(token)
            items = [o for o in items if _sort_key(o) > start]
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if limit and limit > 0 and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
            meta["continue"] = _encode_continue(list_rv, _sort_key(items[-1]))
            meta["remainingItemCount"] = remaining
        served = [view.out(o) for o in items] if view.converted or view.api_version is not None else items
        if call.output.form == "table":
            return Reply(200, tables.to_table(view.kind, served, meta, call.query.get("includeObject", "PartialObjectMetadata"),
                                              row_source=self._row_source(view)))
        if call.output.form == "partial":
            return Reply(200, {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                               "items": [tables.partial_metadata(o) for o in served]})
        return Reply(200, {"kind": f"{view.kind.kind}List", "apiVersion": view.kind.api_version, "metadata": meta, "items": served})

    # --- writes -------------------------------------------------------------------------------
    def create(self, call: Call) -> Reply:
        obj = self._decode_object(call, "CreateOptions")
        self._check_namespace(call, obj)
        dry = self._dry_run(call)
        self._admit(call.view.kind, obj)
        self._guard(call, obj)
        self._record(call, None, obj)
        # ``_decode_object`` type-checked the body against this very kind: the store need not again
        # (a converted body, an events.k8s.io Event stored as a core one, is another kind's object).
        stored = self.store.create(call.view.store_kind, call.view.into(obj), namespace=call.namespace, dry_run=dry,
                                   decoded=not call.view.converted)
        return self._reply(call, 201, call.view.out(stored))

    def create_object(self, obj: dict) -> dict:
        """Create ``obj`` as a POST would (defaulting included), for in-process callers."""
        kind = self.store.custom.resolve(obj.get("apiVersion", ""), obj.get("kind", ""))
        if kind is None:
            raise NotFound(f'no matches for kind "{obj.get("kind")}" in version "{obj.get("apiVersion")}"')
        view = View(kind)
        self._admit(kind, obj)
        return view.out(self.store.create(view.store_kind, view.into(obj)))

    def _admit(self, kind: Kind, obj: dict, subresource: str | None = "") -> None:
        """Defaulting at decode time, as every write of a main resource gets it (subresources carry
        only their part of the object); the store validates the result."""
        if not subresource:
            self.defaulter.apply(kind, obj)

    def replace(self, call: Call) -> Reply:
        assert call.name is not None
        if call.subresource == "scale":
            obj = codec.decode_body(call.body, call.content_type, "Scale")
            if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
                raise BadRequest("the object provided is unrecognized (must be of type Scale)")
            obj.setdefault("metadata", {})
        else:
            obj = self._decode_object(call, "UpdateOptions")
        meta = obj["metadata"]
        if meta.get("name") and meta["name"] != call.name:
            raise BadRequest(f"the name of the object ({meta['name']}) does not match the name on the URL ({call.name})")
        meta["name"] = call.name
        self._check_namespace(call, obj)
        dry = self._dry_run(call)
        if call.subresource == "scale":
            return self._write_scale(call, obj, dry)
        current = self._get(call.view, call.namespace, call.name)
        served = call.view.out(current)
        if "managedFields" not in meta and (served["metadata"].get("managedFields")):
            meta["managedFields"] = served["metadata"]["managedFields"]
        if call.subresource == "finalize":
            return self._finalize(call, current, obj, dry)
        self._admit(call.view.kind, obj, call.subresource)
        self._guard(call, obj)
        self._record(call, served, obj, call.subresource or "")
        stored = self.store.update(call.view.store_kind, call.view.into(obj), status_only=call.subresource == "status", dry_run=dry)
        return self._reply(call, 200, call.view.out(stored))

    def patch(self, call: Call) -> Reply:
        assert call.name is not None
        media = codec.media_type(call.content_type)
        mode = fieldvalidation.directive(call.query, "PatchOptions")
        if media == APPLY_PATCH:
            return self._apply(call, mode)
        if media not in PATCH_TYPES:
            raise UnsupportedPatch(media)
        if isinstance(call.view.kind, CustomKind) and media == STRATEGIC_MERGE:
            raise _unsupported_for_custom(media)
        body = codec.decode_body(call.body, media, duplicates=mode != fieldvalidation.IGNORE)
        dry = self._dry_run(call)
        current = self._get(call.view, call.namespace, call.name)
        served = call.view.out(current)
        if call.subresource == "scale":
            scale = apply_patch(media, self._scale_of(call.view, served), body, "Scale")
            return self._write_scale(call, scale, dry)
        patched = apply_patch(media, json_copy(served), body, call.view.kind.kind)
        if not isinstance(patched, dict):
            raise BadRequest(f"the patched object is not a {call.view.kind.kind}")
        patched["apiVersion"], patched["kind"] = call.view.kind.api_version, call.view.kind.kind
        call.warnings += check_decoded(call.view.kind, patched, mode, body)
        meta = patched.setdefault("metadata", {})
        meta["name"] = served["metadata"]["name"]
        if call.view.kind.namespaced:
            meta["namespace"] = served["metadata"].get("namespace")
        meta.setdefault("resourceVersion", served["metadata"]["resourceVersion"])
        self._admit(call.view.kind, patched, call.subresource)
        self._guard(call, patched)
        self._record(call, served, patched, call.subresource or "")
        stored = self.store.update(call.view.store_kind, call.view.into(patched), status_only=call.subresource == "status", dry_run=dry)
        return self._reply(call, 200, call.view.out(stored))

    def _apply(self, call: Call, mode: str) -> Reply:
        assert call.name is not None
        manager = self._manager(call)
        if not manager:
            raise BadRequest("PATCH request with apply-patch+yaml content type requires fieldManager")
        applied = codec.decode_body(call.body, "yaml", duplicates=mode != fieldvalidation.IGNORE)
        if not isinstance(applied, dict):
            raise BadRequest("error decoding YAML: the applied configuration is not an object")
        kind = call.view.kind
        if applied.get("apiVersion") != kind.api_version or applied.get("kind") != kind.kind:
            raise BadRequest(f"apply configuration must be of kind {kind.kind} in version {kind.api_version}, "
                             f"got {applied.get('kind')} in {applied.get('apiVersion')}")
        call.warnings += check_decoded(kind, applied, mode)
        meta = applied.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != call.name:
            raise BadRequest(f"the name of the object ({meta['name']}) does not match the name on the URL ({call.name})")
        meta["name"] = call.name
        self._check_namespace(call, applied)
        dry = self._dry_run(call)
        force = codec.query_bool(call.query.get("force"))
        current = self.store.try_get(call.view.store_kind, call.namespace, call.name)
        if current is None:
            if call.subresource:
                raise call.view.not_found(call.name)
            obj = ssa.server_side_apply(None, applied, manager, force, kind.kind, self.now())
            check_decoded(kind, obj)
            self._admit(kind, obj)
            self._guard(call, obj)
            stored = self.store.create(call.view.store_kind, call.view.into(obj), namespace=call.namespace, dry_run=dry)
            return self._reply(call, 201, call.view.out(stored))
        served = call.view.out(current)
        obj = ssa.server_side_apply(served, applied, manager, force, kind.kind, self.now())
        check_decoded(kind, obj)
        obj["metadata"]["resourceVersion"] = served["metadata"]["resourceVersion"]
        self._admit(kind, obj, call.subresource)
        self._guard(call, obj)
        stored = self.store.update(call.view.store_kind, call.view.into(obj), status_only=call.subresource == "status", dry_run=dry)
        return self._reply(call, 200, call.view.out(stored))

    def delete(self, call: Call) -> Reply:
        assert call.name is not None
        options = self._delete_options(call)
        dry = self._dry_run(call, options)
        grace, policy = self._delete_policy(call, options)
        pre = options.get("preconditions") or {}
        current = self._get(call.view, call.namespace, call.name)
        result = self.store.delete(call.view.store_kind, call.namespace, call.name, grace_period=grace, uid=pre.get("uid"),
                                   resource_version=pre.get("resourceVersion"), dry_run=dry)
        if not dry:
            self._collect_later(call.view.kind, current, policy)
        return Reply(200, call.view.out(result))

    def delete_collection(self, call: Call) -> Reply:
        options = self._delete_options(call)
        dry = self._dry_run(call, options)
        predicate = self.predicate(call)
        items, _ = self.store.list(call.view.store_kind, call.namespace, predicate)
        deleted = []
        grace, policy = self._delete_policy(call, options)
        for obj in sorted(items, key=_sort_key):
            meta = obj["metadata"]
            try:
                deleted.append(self.store.delete(call.view.store_kind, meta.get("namespace"), meta["name"], grace_period=grace, dry_run=dry))
            except NotFound:
                continue
            if not dry:
                self._collect_later(call.view.kind, obj, policy)
        return Reply(200, {"kind": f"{call.view.kind.kind}List", "apiVersion": call.view.kind.api_version,
                           "metadata": {"resourceVersion": str(self.store.rv)}, "items": [call.view.out(o) for o in deleted]})

    @staticmethod
    def _delete_policy(call: Call, options: dict) -> tuple[int | None, str]:
        """The grace period and propagation policy of a delete, query parameters first."""
        grace = int_param(call.query, "gracePeriodSeconds")
        if grace is None and options.get("gracePeriodSeconds") is not None:
            grace = int(options["gracePeriodSeconds"])
        policy = call.query.get("propagationPolicy") or options.get("propagationPolicy") or "Background"
        if options.get("orphanDependents") is True or codec.query_bool(call.query.get("orphanDependents")):
            policy = "Orphan"
        return grace, policy

    def _delete_options(self, call: Call) -> dict:
        if not call.body or not call.body.strip():
            return {}
        options = codec.decode_body(call.body, call.content_type, "DeleteOptions")
        if not isinstance(options, dict):
            raise BadRequest("the body of a DELETE must be a DeleteOptions object")
        check_options(options, "", "DeleteOptions")
        return options

    # --- subresources -------------------------------------------------------------------------
    def bind(self, call: Call) -> Reply:
        """POST pods/<name>/binding (or the legacy POST bindings)."""
        body = codec.decode_body(call.body, call.content_type, "Binding")
        if not isinstance(body, dict):
            raise BadRequest("the object provided is unrecognized (must be of type Binding)")
        check_options(body, "", "Binding")
        meta = body.get("metadata") or {}
        name = call.name or meta.get("name")
        if not name:
            raise BadRequest("name is required for a binding")
        if call.name and meta.get("name") and meta["name"] != call.name:
            raise BadRequest(f"the name of the object ({meta['name']}) does not match the name on the URL ({call.name})")
        target = body.get("target") or {}
        if not target.get("name"):
            raise Invalid(f'Binding "{name}" is invalid: target.name: Required value', kind="Binding", name=name,
                          causes=[{"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}])
        self.store.bind(call.namespace or "default", name, target["name"], uid=meta.get("uid"), annotations=meta.get("annotations"),
                        resource_version=meta.get("resourceVersion"), dry_run=self._dry_run(call))
        return Reply(201, SUCCESS_201)

    def evict(self, call: Call) -> Reply:
        """POST pods/<name>/eviction: delete unless it would violate a PodDisruptionBudget."""
        assert call.name is not None and call.namespace is not None
        body = (codec.decode_body(call.body, call.content_type, "Eviction") if call.body.strip() else None) or {}
        if not isinstance(body, dict):
            raise BadRequest("the object provided is unrecognized (must be of type Eviction)")
        check_options(body, "policy", "Eviction")
        options = (body or {}).get("deleteOptions") or {}
        dry = self._dry_run(call, options)
        pre = options.get("preconditions") or {}
        grace = options.get("gracePeriodSeconds")
        eviction.evict(self.store, call.namespace, call.name, grace_period=None if grace is None else int(grace),
                       uid=pre.get("uid"), resource_version=pre.get("resourceVersion"), dry_run=dry)
        return Reply(201, SUCCESS_201)

    def _scale_paths(self, kind: Kind) -> Mapping[str, str] | None:
        """The CRD version's ``subresources.scale`` (None for a built-in kind)."""
        if not isinstance(kind, CustomKind):
            return None
        paths = crdapi.scale_paths(self.store.custom.definition(kind), kind.version)
        if paths is None:
            raise NotFoundPath()
        return paths

    def _scale_of(self, view: View, obj: dict) -> dict:
        custom = self._scale_paths(view.kind)
        if custom is None and view.kind.kind not in SCALABLE:
            raise NotFoundPath()
        spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj["metadata"]
        if custom is not None:
            # scaleFromCustomResource: absent values read as zero replicas and no selector
            selector = crdapi.value_at(obj, custom["labelSelectorPath"]) if custom.get("labelSelectorPath") else None
            spec = {"replicas": crdapi.value_at(obj, custom["specReplicasPath"]) or 0}
            status = {"replicas": crdapi.value_at(obj, custom["statusReplicasPath"]) or 0}
            selector = selector if isinstance(selector, str) else ""
        elif view.kind.kind == "ReplicationController":
            selector = selectors.format_labels(spec.get("selector"))
            selector = "" if selector == "<none>" else selector
        else:
            selector = selectors.format_label_selector(spec.get("selector"))
            selector = "" if selector == "<none>" else selector
        scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta}
        scale_status = {"replicas": status.get("replicas", 0), "selector": selector}
        if custom is not None and not selector:
            del scale_status["selector"]  # omitempty: a CRD without labelSelectorPath has none
        return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta,
                "spec": {"replicas": spec.get("replicas", 0)}, "status": scale_status}

    def _write_scale(self, call: Call, scale: dict, dry: bool) -> Reply:
        assert call.name is not None
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            detail = f"Invalid value: {replicas}: must be greater than or equal to 0"
            raise Invalid(f'Scale.autoscaling "{call.name}" is invalid: spec.replicas: {detail}', kind="Scale", name=call.name,
                          group="autoscaling", causes=[{"reason": "FieldValueInvalid", "message": detail, "field": "spec.replicas"}])
        expect_rv = (scale.get("metadata") or {}).get("resourceVersion")
        current = self._get(call.view, call.namespace, call.name)
        if expect_rv and expect_rv != current["metadata"]["resourceVersion"]:
            raise Conflict.of(call.view.kind.resource, call.name,
                              "the object has been modified; please apply your changes to the latest version and try again", call.view.kind.group)
        new = json_copy(current)
        custom = self._scale_paths(call.view.kind)
        crdapi.set_value_at(new, custom["specReplicasPath"] if custom else ".spec.replicas", replicas)
        self._record(call, current, new, "scale")
        stored = self.store.update(call.view.store_kind, new, dry_run=dry)
        return Reply(200, self._scale_of(call.view, stored))

    def _finalize(self, call: Call, current: dict, obj: dict, dry: bool) -> Reply:
        finalizers = list((obj.get("spec") or {}).get("finalizers") or [])

        def set_finalizers(ns: dict) -> None:
            ns.setdefault("spec", {})["finalizers"] = finalizers

        if dry:
            return Reply(200, current)
        return Reply(200, self.store.mutate(NAMESPACE, None, current["metadata"]["name"], set_finalizers))

    # --- garbage collection ---------------------------------------------------------------------
    def _collect_later(self, kind: Kind, owner: dict, policy: str) -> None:
        if not self.garbage_collect or kind.kind not in OWNER_KINDS:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.collect(owner, policy)
            return
        loop.call_soon(self.collect, owner, policy)

    def collect(self, owner: dict, policy: str) -> None:
        """Delete (or, for Orphan, release) the objects ``owner`` owns, recursively."""
        uid = owner["metadata"].get("uid")
        namespace = owner["metadata"].get("namespace")
        for kind in list(self.store.kinds()):
            if namespace and not kind.namespaced:
                continue
            for obj in list(self.store.iter_all(kind)):
                meta = obj["metadata"]
                refs = meta.get("ownerReferences") or []
                if not any(r.get("uid") == uid for r in refs):
                    continue
                if namespace and meta.get("namespace") != namespace:
                    continue
                try:
                    self._collect_one(kind, obj, uid, policy)
                except APIError as e:
                    log.debug("garbage collection of %s/%s: %s", kind.resource, meta.get("name"), e)

    def _collect_one(self, kind: Kind, obj: dict, owner_uid: str, policy: str) -> None:
        meta = obj["metadata"]
        if policy == "Orphan":
            self.store.mutate(kind, meta.get("namespace"), meta["name"], lambda o: _drop_owner(o, owner_uid))
            return
        others = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != owner_uid]
        if others and any(self._owner_exists(r, meta.get("namespace")) for r in others):
            self.store.mutate(kind, meta.get("namespace"), meta["name"], lambda o: _drop_owner(o, owner_uid))
            return
        self.store.delete(kind, meta.get("namespace"), meta["name"])
        if kind.kind in OWNER_KINDS:
            self.collect(obj, policy)

    def _owner_exists(self, ref: Mapping, namespace: str | None) -> bool:
        owner_kind = self.store.custom.resolve(ref.get("apiVersion", ""), ref.get("kind", ""))
        if owner_kind is None:
            return False
        found = self.store.try_get(owner_kind, namespace if owner_kind.namespaced else None, ref.get("name", ""))
        return found is not None and found["metadata"].get("uid") == ref.get("uid")


def check_decoded(kind: Kind, obj: dict, mode: str = fieldvalidation.IGNORE, patch_body: object = None,
                  specs: schema_validation.SpecDecodes | None = None) -> list[str]:
    """What kube-apiserver's decoder refuses, as it answers (400 naming the kind and the decoder's
    error), and an object past the decoded limits of ``bounds`` (nesting, size). Decodes ``obj`` in
    place (nulls and unknown fields as Go leaves them) and returns the warnings ``mode`` asks for
    (``fieldValidation``; Strict raises them as a 400). ``specs``: the specs decoded before."""
    bounds.check_depth(obj)
    warnings = fieldvalidation.check(kind, obj, mode, patch_body, specs)
    if len(orjson.dumps(obj)) > bounds.MAX_OBJECT:
        raise bounds.too_large()
    return warnings


def check_options(obj: dict, group: str, kind: str) -> None:
    """The decoder's 400 for a request body that is not an object the server stores (DeleteOptions,
    Binding, Eviction): their values reach deletion and binding as typed."""
    try:
        schema_validation.decode(obj, f"{group}/v1" if group else "v1", kind)
    except schema_validation.DecodeError as e:
        raise BadRequest(e.detail) from None


def _unsupported_for_custom(media: str) -> UnsupportedPatch:
    """The 415 of a strategic merge patch of a custom resource, listing what it accepts instead."""
    error = UnsupportedPatch(media)
    error.message = ("the body of the request was in an unknown format - accepted media types include: "
                     "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
    return error


def _drop_owner(obj: dict, uid: str) -> None:
    refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
    if refs:
        obj["metadata"]["ownerReferences"] = refs
    else:
        obj["metadata"].pop("ownerReferences", None)


def _sort_key(obj: dict) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def int_param(query: Mapping[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw) if len(raw) <= 20 else None
    except ValueError:
        value = None
    if value is None or not -(2**63) <= value < 2**63:  # query integers are int64, as strconv.ParseInt reads them
        raise BadRequest(f'invalid value for {name}: "{raw}"')
    return value


def _encode_continue(rv: int, key: tuple[str, str]) -> str:
    start = f"{key[0]}/{key[1]}\x00" if key[0] else f"{key[1]}\x00"
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = orjson.loads(raw)
        start = data["start"].rstrip("\x00")
        rv = int(data["rv"])
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        raise BadRequest("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)") from None
    ns, _, name = start.rpartition("/")
    return rv, (ns, name)
