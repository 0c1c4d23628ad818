"""A status write through ``mutate`` type-checks the status alone (the rest is the stored,
already decoded object) and answers as a full status update would."""

from __future__ import annotations

import pytest

from kubesched.api.apierrors import BadRequest
from kubesched.api.kinds import POD
from kubesched.apiserver.store import ObjectStore
from kubesched.utils.clock import ManualClock


def new_store() -> ObjectStore:
    store = ObjectStore(ManualClock(), seed=1)
    store.create(POD, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    return store


@pytest.mark.parametrize(("name", "status"), [
    ("a phase of the wrong type", {"phase": 3}),
    ("conditions that are not objects", {"conditions": ["Ready"]}),
    ("a start time that is not a time", {"startTime": "yesterday"}),
])
def test_a_bad_status_is_refused_as_by_a_status_update(name, status):
    by_update, by_mutate = new_store(), new_store()
    current = by_update.get(POD, "default", "p")
    with pytest.raises(BadRequest) as whole:
        by_update.update(POD, {**current, "status": status}, status_only=True)
    with pytest.raises(BadRequest) as alone:
        by_mutate.mutate(POD, "default", "p", lambda p: p.update(status=status))
    assert str(alone.value) == str(whole.value), name


def test_a_status_write_normalises_the_status_and_keeps_the_rest():
    store = new_store()
    written = store.mutate(POD, "default", "p", lambda p: p["status"].update(phase="Running", bogus=1, podIP=None))
    assert written["status"]["phase"] == "Running" and "bogus" not in written["status"] and "podIP" not in written["status"]
    assert written["spec"] == store.get(POD, "default", "p")["spec"]
