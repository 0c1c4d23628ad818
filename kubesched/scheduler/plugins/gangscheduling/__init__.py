"""The GangScheduling plugin (upstream ``framework/plugins/gangscheduling``, alpha in 1.35)."""

from kubesched.scheduler.plugins.gangscheduling.gang_scheduling import GangScheduling
from kubesched.scheduler.plugins.names import GangScheduling as Name

__all__ = ["GangScheduling", "Name"]
