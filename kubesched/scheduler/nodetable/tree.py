"""The order in which the scheduler visits nodes (upstream ``backend/cache/node_tree.go``).

Nodes are grouped by zone (region + zone labels) in the order zones first appeared, and listed
round-robin across zones, so that sampling the first N feasible nodes spreads over zones.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Upstream reads the deprecated beta labels first and falls back to the GA ones only when absent.
ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone")
REGION_LABELS = ("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region")


def zone_key(labels: Mapping[str, str]) -> str:
    """``utilnode.GetZoneKey``: ``region:\\x00:zone``, empty when the node has neither label."""
    region = next((labels[k] for k in REGION_LABELS if k in labels), "")
    zone = next((labels[k] for k in ZONE_LABELS if k in labels), "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


class NodeTree:
    def __init__(self) -> None:
        self._zones: dict[str, list[str]] = {}
        self._zone_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._zone_of)

    def add(self, name: str, labels: Mapping[str, str]) -> None:
        if name in self._zone_of:
            self.update(name, labels)
            return
        zone = zone_key(labels)
        self._zones.setdefault(zone, []).append(name)
        self._zone_of[name] = zone

    def add_as_in(self, other: NodeTree, name: str) -> None:
        """Add ``name`` to the zone it has in ``other`` (a scratch copy of a node ``other`` holds)."""
        zone = other._zone_of[name]
        self._zones.setdefault(zone, []).append(name)
        self._zone_of[name] = zone

    def remove(self, name: str) -> None:
        zone = self._zone_of.pop(name, None)
        if zone is None:
            return
        names = self._zones[zone]
        names.remove(name)
        if not names:
            del self._zones[zone]

    def update(self, name: str, labels: Mapping[str, str]) -> None:
        zone = zone_key(labels)
        if self._zone_of.get(name) == zone:
            return
        self.remove(name)
        self.add(name, labels)

    def ordered(self) -> list[str]:
        """All node names, round-robin over zones."""
        zones = list(self._zones.values())
        if len(zones) == 1:
            return list(zones[0])
        out: list[str] = []
        depth = 0
        while len(out) < len(self._zone_of):
            for names in zones:
                if depth < len(names):
                    out.append(names[depth])
            depth += 1
        return out
