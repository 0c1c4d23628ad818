"""What a preemption decided, for whoever listens: the simulator's report and ``--explain``.

Upstream reports preemption only through metrics and events. kubesched's preemption plugins also
file a record per PostFilter call to an observer given to the Scheduler at construction; these
types live in the framework so that the scheduler, the plugins and the simulator share them
without depending on one another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubesched.scheduler.framework.status import Status


@dataclass
class CandidateSummary:
    """One candidate node as the criteria see it."""

    node: str
    victims: list[str]
    num_pdb_violations: int
    highest_priority: int
    priority_sum: int
    earliest_start_time: float | None


@dataclass
class PreemptionRecord:
    """What one PostFilter call of a preemption plugin decided, for ``simulate`` and ``--explain``."""

    preemptor: str
    preemptor_uid: str
    node: str = ""
    victims: list[str] = field(default_factory=list)
    message: str = ""
    decided_by: str = ""
    candidates: list[CandidateSummary] = field(default_factory=list)
    #: Nodes dry-run without becoming candidates, with the reason (when candidates are recorded).
    rejected: list[tuple[str, Status]] = field(default_factory=list)
    time: float = 0.0


@dataclass(frozen=True)
class PreemptionObserver:
    """Who hears of every preemption decision: the simulator's report and ``--explain`` (upstream
    reports preemption only through metrics and events). Given to the Scheduler at construction,
    it reaches each preemption plugin's Evaluator through the framework handle."""

    #: Called with a PreemptionRecord after every PostFilter call of a preemption plugin.
    on_preemption: Callable[[PreemptionRecord], None]
    #: Whether records list every candidate with its criteria (costs a thorough dry run).
    record_candidates: bool = False
