"""The SchedulingGates plugin (upstream ``framework/plugins/schedulinggates``)."""

from kubesched.scheduler.plugins.names import SchedulingGates as Name
from kubesched.scheduler.plugins.schedulinggates.scheduling_gates import SchedulingGates

__all__ = ["Name", "SchedulingGates"]
