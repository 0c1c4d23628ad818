"""``SpecDecodes``: a spec decoded before is taken as it decoded then, and everything else about
decoding (errors, strict problems, normalisation, the rest of the object) is as ``decode``'s."""

from __future__ import annotations

import copy
import datetime

import pytest

from kubesched.api.schema_validation import DecodeError, SpecDecodes, decode


def pod(name: str = "p", **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def decoded_by(specs: SpecDecodes | None, obj: dict) -> tuple[dict, list[str]]:
    obj = copy.deepcopy(obj)
    problems = specs.decode(obj, "v1", "Pod") if specs is not None else decode(obj, "v1", "Pod")
    return obj, problems.messages()


@pytest.mark.parametrize(("spec", "kept"), [
    pytest.param({}, 1, id="a plain spec"),
    pytest.param({"nodeName": None, "tolerations": [None]}, 1, id="a spec that decoding normalises"),
    pytest.param({"priority": 5, "hostname": datetime.date(2024, 1, 2)}, 0, id="a spec with a value JSON cannot spell"),
    pytest.param({"nodeSelector": {1: "a"}}, 0, id="a spec with keys JSON cannot spell"),
    pytest.param({"bogus": 1}, 0, id="a spec with an unknown field"),
])
def test_every_decode_of_a_spec_is_what_decode_gives(spec, kept):
    specs = SpecDecodes()
    expected = decoded_by(None, pod(**spec))
    for name in ("first", "second", "third"):
        obj, problems = decoded_by(specs, {**pod(**spec), "metadata": {"name": name}})
        assert (obj, problems) == ({**expected[0], "metadata": {"name": name}}, expected[1])
        assert list(obj) == list(expected[0])  # the fields keep their order
    assert len(specs) == kept


def test_a_kept_spec_is_handed_out_as_a_fresh_copy_each_time():
    specs = SpecDecodes()
    first, _ = decoded_by(specs, pod(nodeName=None))
    second, _ = decoded_by(specs, pod(nodeName=None))
    second["spec"]["containers"][0]["image"] = "changed by its writer"
    third, _ = decoded_by(specs, pod(nodeName=None))
    assert third == first and third["spec"] is not second["spec"]


def test_the_rest_of_an_object_with_a_kept_spec_is_still_decoded():
    specs = SpecDecodes()
    decoded_by(specs, pod())
    refused = {**pod(), "metadata": {"name": "p", "labels": "not a map"}}
    with pytest.raises(DecodeError, match=r"metadata\.labels"):
        specs.decode(refused, "v1", "Pod")
    assert refused["spec"] == decoded_by(None, pod())[0]["spec"]  # the writer's spec is not lost
    obj, problems = decoded_by(specs, {**pod(), "metadata": {"name": "p", "bogus": 1}})
    assert problems == ['unknown field "metadata.bogus"'] and obj["metadata"] == {"name": "p"}


def test_a_spec_of_the_wrong_type_fails_every_time():
    specs = SpecDecodes()
    for _ in range(2):
        with pytest.raises(DecodeError, match=r"spec\.priority"):
            decoded_by(specs, pod(priority="high"))


def test_only_the_specs_used_last_are_kept():
    specs = SpecDecodes(capacity=2)
    for priority in (1, 2, 3):
        decoded_by(specs, pod(priority=priority))
    assert len(specs) == 2
