"""Feature gates: the 1.35 state of every gate the scheduler consults (upstream kube_features.go)."""

from __future__ import annotations

import pytest

from kubesched.scheduler.features import GATES, FeatureGateError, FeatureGates, parse_flag


@pytest.mark.parametrize(("name", "default", "stage", "locked"), [
    ("DynamicResourceAllocation", True, "GA", True),
    ("InPlacePodVerticalScaling", True, "GA", True),
    ("MatchLabelKeysInPodAffinity", True, "GA", True),
    ("MatchLabelKeysInPodTopologySpread", True, "BETA", False),
    ("MatchLabelKeysInPodTopologySpreadSelectorMerge", True, "BETA", False),
    ("NodeInclusionPolicyInPodTopologySpread", True, "GA", True),
    ("NominatedNodeNameForExpectation", True, "BETA", False),
    ("PodLevelResources", True, "BETA", False),
    ("SchedulerAsyncPreemption", True, "BETA", False),
    ("SchedulerAsyncAPICalls", False, "BETA", False),
    ("SchedulerPopFromBackoffQ", True, "BETA", False),
    ("SchedulerQueueingHints", True, "GA", True),
    ("SidecarContainers", True, "GA", True),
    ("StorageCapacityScoring", False, "ALPHA", False),
    ("VolumeAttributesClass", True, "GA", False),
    ("DRASchedulerFilterTimeout", True, "BETA", False),
    ("DRADeviceBindingConditions", False, "ALPHA", False),
    ("DRAResourceClaimDeviceStatus", True, "BETA", False),
    ("DRAPrioritizedList", True, "BETA", False),
    ("DRAAdminAccess", True, "BETA", False),
    ("GangScheduling", False, "ALPHA", False),
    ("GenericWorkload", False, "ALPHA", False),
    ("NodeDeclaredFeatures", False, "ALPHA", False),
    ("OpportunisticBatching", True, "BETA", False),
    ("TaintTolerationComparisonOperators", False, "ALPHA", False),
])
def test_gate_state_in_1_35(name: str, default: bool, stage: str, locked: bool) -> None:
    gate = GATES[name]
    assert (gate.default, gate.stage, gate.locked) == (default, stage, locked)


def test_locked_gate_cannot_change() -> None:
    with pytest.raises(FeatureGateError, match="cannot set feature gate SchedulerQueueingHints to false, feature is locked to true"):
        FeatureGates({"SchedulerQueueingHints": False})


def test_unlocked_ga_gate_can_be_turned_off() -> None:
    assert not FeatureGates({"VolumeAttributesClass": False}).enabled("VolumeAttributesClass")


def test_flag_parsing() -> None:
    assert parse_flag("A=true, B=false") == {"A": True, "B": False}
