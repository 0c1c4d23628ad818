"""``decode_field``: a status write's status is type-checked alone, with the errors and the
normalisation decoding the whole object gives it."""

from __future__ import annotations

import copy

import pytest

from kubesched.api.schema_validation import DecodeError, decode, decode_field

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


def outcome(decoder, obj: dict) -> tuple[str, object]:
    try:
        decoder(obj)
    except DecodeError as e:
        return "error", (str(e), e.path)
    return "ok", ("status" in obj, obj.get("status"))


@pytest.mark.parametrize(("name", "status"), [
    ("a running pod's status", {"phase": "Running", "podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}],
                                "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0, "image": "i", "imageID": ""}]}),
    ("unknown fields are dropped", {"phase": "Running", "bogus": 1, "conditions": [{"type": "Ready", "extra": "x"}]}),
    ("null fields are unset, null times kept", {"phase": None, "conditions": [{"type": "Ready", "lastProbeTime": None}]}),
    ("a field of the wrong type", {"phase": 3}),
    ("a list item of the wrong type", {"conditions": ["Ready"]}),
    ("a number out of range", {"containerStatuses": [{"name": "c", "restartCount": 2**40}]}),
    ("a time that is not RFC 3339", {"startTime": "yesterday"}),
    ("a status that is not an object", ["Running"]),
    ("a null status", None),
])
def test_status_decodes_as_in_the_whole_object(name, status):
    whole, alone = copy.deepcopy({**POD, "status": status}), copy.deepcopy({**POD, "status": status})
    assert outcome(lambda o: decode(o, "v1", "Pod"), whole) == outcome(lambda o: decode_field(o, "v1", "Pod", "status"), alone), name


def test_other_fields_are_left_as_they_are():
    obj = copy.deepcopy({**POD, "status": {"phase": "Running"}, "spec": {"containers": "not a list"}})
    decode_field(obj, "v1", "Pod", "status")
    assert obj["spec"] == {"containers": "not a list"}
