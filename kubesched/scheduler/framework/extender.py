"""What the framework and its plugins know of scheduler extenders (upstream ``framework.Extender``).

An extender is an outside service the scheduler consults at fixed points: after the Filter
plugins (filter), beside the Score plugins (prioritize), during preemption (preempt) and in place
of the Bind plugins (bind). The scheduler builds them from the configuration's ``extenders:``;
plugins reach them through their handle (``handle.extenders``), as DefaultPreemption does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kubesched.api.errors import KubeschedError
from kubesched.api.types import NodeInfo, PodInfo

if TYPE_CHECKING:
    from kubesched.scheduler.nodetable.table import NodeTable

#: The name a pod's unschedulable plugins get when an extender rejected nodes (upstream
#: ``framework.ExtenderName``): extenders register no events, so any cluster event requeues it.
EXTENDER_NAME = "Extender"

#: Pods to evict on one node and how many of them violate a PodDisruptionBudget (upstream
#: ``extenderv1.Victims``); preemption's own ``Victims`` tuple has this shape.
VictimPods = tuple[list[PodInfo], int]


class ExtenderError(KubeschedError):
    """An extender call failed: transport, status code, timeout, an ``Error`` answer or an answer
    that names nodes or pods it was never given. ``str()`` is the message upstream reports."""


@dataclass
class FilterOutcome:
    """An extender's filter verdict: the nodes it kept, in its order, and why it dropped others."""

    feasible: list[str]
    failed: dict[str, str] = field(default_factory=dict)
    failed_and_unresolvable: dict[str, str] = field(default_factory=dict)


class Extender(Protocol):
    """The calls the scheduler makes to one extender (upstream ``framework.Extender``)."""

    @property
    def name(self) -> str:
        """How logs, scores and explanations name the extender (its URL prefix)."""
        ...

    @property
    def ignorable(self) -> bool:
        """Whether a failed call is skipped rather than failing the scheduling attempt."""
        ...

    def is_filter(self) -> bool: ...

    def is_prioritizer(self) -> bool: ...

    def is_binder(self) -> bool: ...

    def supports_preemption(self) -> bool: ...

    def is_interested(self, pod: PodInfo) -> bool:
        """Whether ``pod`` requests a resource the extender manages (every pod, if it manages none)."""
        ...

    async def filter(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> FilterOutcome: ...

    async def prioritize(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[list[tuple[str, int]], int]:
        """Host scores in [0, MAX_EXTENDER_PRIORITY] and the extender's weight."""
        ...

    async def process_preemption(self, pod: PodInfo, victims: Mapping[str, VictimPods],
                                 table: NodeTable) -> dict[str, VictimPods]:
        """The candidate nodes the extender accepts, with the victims it chose on each."""
        ...

    async def bind(self, pod: PodInfo, node: str) -> None: ...
