"""Feature gates of kube-scheduler 1.35 that change scheduling behaviour.

Gates that 1.35 still lets users turn off can be set per run (``featureGates`` in the
configuration, or ``--feature-gates``); gates locked to their default (GA) are always on and
setting them to another value is an error, as upstream's feature gate registry reports it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from kubesched.api.errors import KubeschedError


@dataclass(frozen=True)
class Gate:
    default: bool
    stage: str  # ALPHA, BETA, GA
    locked: bool = False


#: The 1.35 state of each gate the scheduler or its plugins consult (upstream ``pkg/features``,
#: the 1.35 entry of each versioned spec; ``framework/plugins/feature`` and ``default_plugins.go``).
GATES: dict[str, Gate] = {
    "CSIMigrationPortworx": Gate(True, "GA", locked=True),
    "ClearingNominatedNodeNameAfterBinding": Gate(True, "BETA"),
    "DRAAdminAccess": Gate(True, "BETA"),
    "DRAConsumableCapacity": Gate(False, "ALPHA"),
    "DRADeviceBindingConditions": Gate(False, "ALPHA"),
    "DRADeviceTaintRules": Gate(False, "ALPHA"),
    "DRADeviceTaints": Gate(False, "ALPHA"),
    "DRAExtendedResource": Gate(False, "ALPHA"),
    "DRAPartitionableDevices": Gate(False, "ALPHA"),
    "DRAPrioritizedList": Gate(True, "BETA"),
    "DRAResourceClaimDeviceStatus": Gate(True, "BETA"),
    "DRASchedulerFilterTimeout": Gate(True, "BETA"),
    "DynamicResourceAllocation": Gate(True, "GA", locked=True),
    "GangScheduling": Gate(False, "ALPHA"),
    "GenericWorkload": Gate(False, "ALPHA"),
    "InPlacePodLevelResourcesVerticalScaling": Gate(False, "ALPHA"),
    "InPlacePodVerticalScaling": Gate(True, "GA", locked=True),
    "MatchLabelKeysInPodAffinity": Gate(True, "GA", locked=True),
    "MatchLabelKeysInPodTopologySpread": Gate(True, "BETA"),
    "MatchLabelKeysInPodTopologySpreadSelectorMerge": Gate(True, "BETA"),
    "NodeDeclaredFeatures": Gate(False, "ALPHA"),
    "NodeInclusionPolicyInPodTopologySpread": Gate(True, "GA", locked=True),
    "NominatedNodeNameForExpectation": Gate(True, "BETA"),
    "OpportunisticBatching": Gate(True, "BETA"),
    "PodLevelResources": Gate(True, "BETA"),
    "SchedulerAsyncAPICalls": Gate(False, "BETA"),
    "SchedulerAsyncPreemption": Gate(True, "BETA"),
    "SchedulerPopFromBackoffQ": Gate(True, "BETA"),
    "SchedulerQueueingHints": Gate(True, "GA", locked=True),
    "SidecarContainers": Gate(True, "GA", locked=True),
    "StorageCapacityScoring": Gate(False, "ALPHA"),
    "TaintTolerationComparisonOperators": Gate(False, "ALPHA"),
    "VolumeAttributesClass": Gate(True, "GA"),
    "VolumeLimitScaling": Gate(False, "ALPHA"),
}


class FeatureGateError(KubeschedError, ValueError):
    pass


class FeatureGates(Mapping[str, bool]):
    """An immutable view of the gates for one run."""

    def __init__(self, overrides: Mapping[str, bool] | None = None) -> None:
        values = {name: gate.default for name, gate in GATES.items()}
        for name, value in (overrides or {}).items():
            gate = GATES.get(name)
            if gate is None:
                raise FeatureGateError(f"unrecognized feature gate: {name}")
            if not isinstance(value, bool):
                raise FeatureGateError(f"invalid value of {name}={value}, err: must be true or false")
            if gate.locked and value != gate.default:
                raise FeatureGateError(f"cannot set feature gate {name} to {str(value).lower()}, feature is locked to {str(gate.default).lower()}")
            values[name] = value
        self._values = values

    def enabled(self, name: str) -> bool:
        return self._values[name]

    def __getitem__(self, name: str) -> bool:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``, raising ValueError with its message."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"strconv.ParseBool: parsing {json.dumps(text, ensure_ascii=False)}: invalid syntax")


def parse_flag(text: str) -> dict[str, bool]:
    """``--feature-gates=A=true,B=false``, with component-base's ``featureGate.Set`` errors."""
    out: dict[str, bool] = {}
    for item in text.split(","):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {name}")
        raw = raw.strip()
        try:
            out[name] = parse_bool(raw)
        except ValueError as e:
            raise FeatureGateError(f"invalid value of {name}={raw}, err: {e}") from None
    return out


DEFAULT_GATES = FeatureGates()
