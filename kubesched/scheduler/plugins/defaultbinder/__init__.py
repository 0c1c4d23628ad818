"""The DefaultBinder plugin (upstream ``framework/plugins/defaultbinder``)."""

from kubesched.scheduler.plugins.defaultbinder.default_binder import DefaultBinder
from kubesched.scheduler.plugins.names import DefaultBinder as Name

__all__ = ["DefaultBinder", "Name"]
