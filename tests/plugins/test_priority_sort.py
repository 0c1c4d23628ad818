"""PrioritySort: higher priority first, then the pod queued earlier."""

from __future__ import annotations

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
from kubesched.scheduler.plugins.queuesort.priority_sort import PrioritySort
from tests.helpers import make_pod


def queued(name: str, priority: int | None, timestamp: float) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo(make_pod(name, priority=priority)), timestamp)


@pytest.mark.parametrize("name,a,b,less", [
    ("higher priority goes first", (100, 2.0), (10, 1.0), True),
    ("lower priority goes later", (10, 1.0), (100, 2.0), False),
    ("equal priority: earlier timestamp first", (5, 1.0), (5, 2.0), True),
    ("equal priority and timestamp: not less", (5, 1.0), (5, 1.0), False),
    ("unset priority counts as 0", (None, 1.0), (1, 2.0), False),
], ids=lambda v: v if isinstance(v, str) else "")
def test_less(name, a, b, less):
    assert PrioritySort().less(queued("a", *a), queued("b", *b)) is less
