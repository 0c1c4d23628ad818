"""The latest scheduling explanation of each pod of a live cluster (``kubesched up``), as data.

The scheduler reports every attempt (``Scheduler(on_attempt=...)``) and every preemption decision
(a ``PreemptionObserver``); this keeps, per pod, the last attempt (with the preemption decision
that followed it, if any) and, when the pod preempted, the last attempt whose preemption nominated
a node (later attempts may only wait for the victims to go: "not eligible due to a terminating pod
on the nominated node"). That pair is what ``kubesched explain`` renders, and
what the API server serves at
``/apis/kubesched.io/v1alpha1/namespaces/{namespace}/explanations/{pod}``.

Explanations of a big cluster are big (one entry per node), so only the most recently attempted
``capacity`` pods are kept, and attempts are turned into JSON only when read.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from kubesched.scheduler.framework.preemption_report import PreemptionObserver, PreemptionRecord
from kubesched.scheduler.schedule_one import Attempt
from kubesched.simulator.explain import attempt_to_json
from kubesched.utils.clock import Clock, rfc3339

API_VERSION = "kubesched.io/v1alpha1"
KIND = "SchedulingExplanation"
#: Pods whose explanations are kept: the most recently attempted ones.
DEFAULT_CAPACITY = 4096


@dataclass
class _PodAttempts:
    count: int = 0
    latest: Attempt | None = None
    latest_time: float = 0.0
    latest_preemption: PreemptionRecord | None = None
    #: The last attempt whose preemption nominated a node, with it (kept when later attempts come).
    preempting: tuple[Attempt, PreemptionRecord] | None = None


class ExplanationRecorder:
    """Files each attempt under its pod; ``explanation(namespace, name)`` reads one back."""

    def __init__(self, clock: Clock, capacity: int = DEFAULT_CAPACITY) -> None:
        self.clock = clock
        self.capacity = capacity
        self._pods: OrderedDict[str, _PodAttempts] = OrderedDict()

    def on_attempt(self, attempt: Attempt) -> None:
        entry = self._pods.pop(attempt.pod, None) or _PodAttempts()
        entry.count += 1
        entry.latest, entry.latest_time, entry.latest_preemption = attempt, self.clock.wall(), None
        self._pods[attempt.pod] = entry
        while len(self._pods) > self.capacity:
            self._pods.popitem(last=False)

    def on_preemption(self, record: PreemptionRecord) -> None:
        """A preemption decision follows the failed attempt of the same pod (PostFilter runs after it)."""
        entry = self._pods.get(record.preemptor)
        if entry is None or entry.latest is None:
            return
        entry.latest_preemption = record
        if record.node:
            entry.preempting = (entry.latest, record)

    def observer(self) -> PreemptionObserver:
        """The observer to give the scheduler, recording every candidate's criteria."""
        return PreemptionObserver(self.on_preemption, record_candidates=True)

    def explanation(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod's explanation document, None when the scheduler has not attempted it (or it
        was dropped as one of the least recently attempted pods)."""
        entry = self._pods.get(f"{namespace}/{name}")
        if entry is None or entry.latest is None:
            return None
        attempts = []
        if entry.preempting is not None and entry.preempting[0] is not entry.latest:
            attempts.append(attempt_to_json(*entry.preempting))
        attempts.append(attempt_to_json(entry.latest, entry.latest_preemption))
        return {
            "apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"namespace": namespace, "name": name},
            "attemptCount": entry.count,
            "lastAttemptTime": rfc3339(entry.latest_time),
            "attempts": attempts,
        }
