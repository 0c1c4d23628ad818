"""The pods of the cluster view, trimmed to what it draws: ``GET /ui/api/pods``.

A list of 10,000 whole pods is some 17 MB of JSON, most of it managed fields, container statuses
and conditions the overview never reads; the page spends more time fetching and parsing it than
drawing. This list has the same shape (a ``PodList`` with its resourceVersion, to watch
``/api/v1/pods`` from) with each pod cut down to the fields the view uses: where it runs, its
phase, its scheduling condition, what it requests, whether a drain evicts it. The request is
authorized as the ``list`` of pods it stands for.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from kubesched.api.kinds import POD
from kubesched.apiserver.store import ObjectStore

#: Where the trimmed list is served, and the request it is authorized as.
PODS_PATH = "/ui/api/pods"
AUTHORIZED_AS = "/api/v1/pods"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def slim_pod(pod: dict) -> dict:
    """``pod`` with only the fields the cluster view reads."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    slim_meta: dict[str, Any] = {key: meta[key] for key in ("namespace", "name", "uid", "resourceVersion", "deletionTimestamp")
                                 if key in meta}
    owners = [{"kind": o.get("kind"), "name": o.get("name"), "controller": o.get("controller")}
              for o in meta.get("ownerReferences") or [] if o.get("controller")]
    if owners:
        slim_meta["ownerReferences"] = owners
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        slim_meta["annotations"] = {MIRROR_ANNOTATION: meta["annotations"][MIRROR_ANNOTATION]}
    slim_spec: dict[str, Any] = {"containers": [_requests(c) for c in spec.get("containers") or []]}
    if spec.get("initContainers"):
        slim_spec["initContainers"] = [{**_requests(c), **({"restartPolicy": c["restartPolicy"]} if c.get("restartPolicy") else {})}
                                       for c in spec["initContainers"]]
    for key in ("nodeName", "overhead"):
        if spec.get(key):
            slim_spec[key] = spec[key]
    slim_status: dict[str, Any] = {}
    if status.get("phase"):
        slim_status["phase"] = status["phase"]
    scheduled = [c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "PodScheduled"]
    if scheduled:
        slim_status["conditions"] = scheduled
    return {"metadata": slim_meta, "spec": slim_spec, "status": slim_status}


def _requests(container: dict) -> dict:
    requests = (container.get("resources") or {}).get("requests")
    return {"resources": {"requests": requests}} if requests else {}


def pod_list(store: ObjectStore) -> web.Response:
    """Every pod, trimmed, as one ``PodList`` at the store's current resourceVersion."""
    items, rv = store.list(POD)
    body = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}, "items": [slim_pod(p) for p in items]}
    return web.Response(body=orjson.dumps(body), headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"})
