"""The TaintToleration plugin (upstream ``framework/plugins/tainttoleration``)."""

from kubesched.scheduler.plugins.names import TaintToleration as Name
from kubesched.scheduler.plugins.tainttoleration.taint_toleration import TaintToleration

__all__ = ["Name", "TaintToleration"]
