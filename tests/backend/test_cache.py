"""The scheduler cache: assume, confirm, forget, expire; snapshots updated only where nodes changed."""

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.backend.cache import Cache, CacheError
from kubesched.scheduler.nodetable.table import CPU
from kubesched.utils.clock import ManualClock
from tests.helpers import make_node, make_pod


@pytest.fixture
def cache():
    c = Cache(ManualClock())
    c.add_node(make_node("n1"))
    c.add_node(make_node("n2"))
    c.update_snapshot()
    return c


def assumed(name="p", node="n1", cpu="1"):
    return PodInfo(make_pod(name, cpu=cpu)).bound_to(node)


def test_assume_then_confirm(cache):
    pod = assumed()
    cache.assume_pod(pod)
    assert cache.is_assumed(pod.uid)
    table = cache.update_snapshot()
    assert table.requested[CPU, table.row_of["n1"]] == 1000
    cache.finish_binding(pod)
    cache.add_pod(PodInfo(make_pod("p", cpu="1", node="n1")))
    assert not cache.is_assumed(pod.uid)
    assert cache.update_snapshot().requested[CPU, table.row_of["n1"]] == 1000


def test_forget_releases_resources(cache):
    pod = assumed()
    cache.assume_pod(pod)
    cache.forget_pod(pod)
    assert cache.get_pod(pod.uid) is None
    assert cache.update_snapshot().requested[CPU].sum() == 0
    with pytest.raises(CacheError, match="wasn't assumed"):
        cache.forget_pod(pod)


def test_assuming_twice_is_an_error(cache):
    cache.assume_pod(assumed())
    with pytest.raises(CacheError, match="is in the cache, so can't be assumed"):
        cache.assume_pod(assumed())


def test_confirmation_on_another_node_moves_the_pod(cache):
    cache.assume_pod(assumed(node="n1"))
    cache.add_pod(PodInfo(make_pod("p", cpu="1", node="n2")))
    table = cache.update_snapshot()
    assert table.requested[CPU, table.row_of["n1"]] == 0
    assert table.requested[CPU, table.row_of["n2"]] == 1000


def test_assumed_pods_expire_only_with_a_ttl_after_binding_finished():
    clock = ManualClock()
    cache = Cache(clock, ttl=30)
    cache.add_node(make_node("n1"))
    pod = assumed()
    cache.assume_pod(pod)
    clock.step(60)
    assert cache.cleanup_assumed_pods() == []  # binding not finished yet
    cache.finish_binding(pod)
    clock.step(29)
    assert cache.cleanup_assumed_pods() == []
    clock.step(2)
    assert [p.uid for p in cache.cleanup_assumed_pods()] == [pod.uid]
    assert cache.get_pod(pod.uid) is None


def test_default_ttl_never_expires(cache):
    pod = assumed()
    cache.assume_pod(pod)
    cache.finish_binding(pod)
    cache.clock.step(10**6)
    assert cache.cleanup_assumed_pods() == []


def test_removed_node_keeps_info_while_pods_remain(cache):
    cache.add_pod(PodInfo(make_pod("p", cpu="1", node="n1")))
    cache.remove_node(make_node("n1"))
    table = cache.update_snapshot()
    assert "n1" not in table.row_of
    assert "n1" in cache.nodes
    cache.remove_pod(PodInfo(make_pod("p", cpu="1", node="n1")))
    assert "n1" not in cache.nodes


def test_snapshot_touches_only_changed_nodes(cache):
    table = cache.update_snapshot()
    generation = table.generation
    cache.add_pod(PodInfo(make_pod("p", cpu="1", node="n2")))
    cache.update_snapshot()
    assert table.generation == generation  # a pod delta adjusts a row, no node rewrite
    cache.add_node(make_node("n2", cpu="8"))
    cache.update_snapshot()
    assert table.generation == generation + 1
    assert table.allocatable[CPU, table.row_of["n2"]] == 8000
    assert table.requested[CPU, table.row_of["n2"]] == 1000


def _with_status(pod: dict, **status) -> PodInfo:
    return PodInfo({**pod, "status": status})


def test_a_pod_starting_keeps_the_nodes_totals_and_its_row_and_is_counted(cache):
    """The kubelet's write that starts a pod (phase, start time) keeps the node's totals and its
    row as they are (no version moves: what the cycles keep per row stays), and the table counts
    the start for preemption's kept answers, which order victims by start time. A write that
    changes neither counts nothing."""
    bound = make_pod("p", cpu="1", node="n1")
    pending = _with_status(bound)
    cache.add_pod(pending)
    table = cache.update_snapshot()
    row = table.row_of["n1"]
    version = int(table.row_version[row])
    running = _with_status(bound, phase="Running", startTime="2026-11-30T00:00:00Z")
    cache.update_pod(pending, running)
    table = cache.update_snapshot()
    assert cache.nodes["n1"].pods[running.uid] is running and running.start_time is not None
    assert table.requested[CPU, row] == 1000 and int(table.pod_count[row]) == 1
    assert int(table.row_version[row]) == version and table.pod_starts == {"n1": 1}
    ready = _with_status(bound, phase="Running", startTime="2026-11-30T00:00:00Z",
                         conditions=[{"type": "Ready", "status": "True"}])
    cache.update_pod(running, ready)
    assert cache.update_snapshot().pod_starts == {"n1": 1}


def test_a_kubelet_status_write_keeps_the_nodes_totals_and_a_resize_moves_them(cache):
    """The node's totals are kept when a status write changes nothing they read (the kubelet's
    phase and container states), and computed again when the container statuses carry resources
    (an in-place resize), even with the spec object unchanged."""
    bound = make_pod("p", cpu="1", node="n1")
    pending = _with_status(bound)
    cache.add_pod(pending)
    running = _with_status(bound, phase="Running", containerStatuses=[{"name": "c", "ready": True, "state": {"running": {}}}])
    cache.update_pod(pending, running)
    assert cache.nodes["n1"].pods[running.uid] is running
    table = cache.update_snapshot()
    assert table.requested[CPU, table.row_of["n1"]] == 1000
    resized = _with_status(bound, phase="Running",
                           containerStatuses=[{"name": "c", "resources": {"requests": {"cpu": "3"}}}])
    assert resized.spec is running.spec
    cache.update_pod(running, resized)
    table = cache.update_snapshot()
    assert table.requested[CPU, table.row_of["n1"]] == 3000
