"""Property: no body, however broken, makes a write verb fail with anything but a 4xx Status.

The REST handlers are driven in-process (no HTTP) with the mutations the CLI fuzz test uses,
as creates and as merge patches of an existing object, under each ``fieldValidation``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from kubesched.api.apierrors import APIError
from kubesched.api.kinds import kind_for
from kubesched.apiserver.handlers import Call, RestAPI, View
from kubesched.apiserver.store import ObjectStore
from tests.cli.test_fuzz_inputs import DEPLOYMENT, FUZZ, NODE, POD, STATEFULSET, STORAGE, _mutate, _mutation

OBJECTS: list[dict] = [NODE, POD, DEPLOYMENT, STATEFULSET, *STORAGE]


def _call(api: RestAPI, method: str, obj: dict, body: Any, directive: str, content_type: str) -> int:
    kind = kind_for(obj["apiVersion"], obj["kind"])
    assert kind is not None
    namespace = "shop" if kind.namespaced else None
    name = obj["metadata"]["name"] if method == "PATCH" else None
    raw = json.dumps(body, ensure_ascii=False).encode()  # deeper than orjson writes; NaN too
    call = Call(method, View(kind), namespace, name, None, {"fieldValidation": directive}, raw, content_type)
    try:
        reply = api.create(call) if method == "POST" else api.patch(call)
    except APIError as e:
        return e.code
    return reply.status


@settings(max_examples=1000, **FUZZ)
@given(which=st.sampled_from(range(len(OBJECTS))), mutation=_mutation(), key=st.sampled_from(["nodeSelecter", "", "ü"]),
       directive=st.sampled_from(["Strict", "Warn", "Ignore"]), verb=st.sampled_from(["POST", "PATCH"]))
def test_broken_bodies_get_a_client_error_never_a_server_error(which, mutation, key, directive, verb):
    store = ObjectStore(auto_create_namespaces=True)
    api = RestAPI(store)
    original = copy.deepcopy(OBJECTS[which])
    kind = kind_for(original["apiVersion"], original["kind"])
    if kind is not None and kind.namespaced:
        original["metadata"]["namespace"] = "shop"
    mutated = _mutate(copy.deepcopy(original), mutation, key)
    if verb == "PATCH":
        assert _call(api, "POST", original, original, "Strict", "application/json") == 201
        code = _call(api, "PATCH", original, mutated, directive, "application/merge-patch+json")
    else:
        code = _call(api, "POST", original, mutated, directive, "application/json")
    event(f"{verb} {code}")  # --hypothesis-show-statistics shows the mix of outcomes
    assert code in (200, 201) or 400 <= code < 500, code
