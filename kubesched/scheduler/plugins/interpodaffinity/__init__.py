"""The InterPodAffinity plugin (upstream ``framework/plugins/interpodaffinity``)."""

from kubesched.scheduler.plugins.interpodaffinity.inter_pod_affinity import InterPodAffinity
from kubesched.scheduler.plugins.names import InterPodAffinity as Name

__all__ = ["InterPodAffinity", "Name"]
