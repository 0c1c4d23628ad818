"""The DynamicResources plugin (upstream ``framework/plugins/dynamicresources``). Its private helpers:
the CEL subset of device selectors (``_cel``), the structured-parameters allocator (``_allocator``)
and the claim tracker that follows informers (``_manager``)."""

from kubesched.scheduler.plugins.dynamicresources.dynamic_resources import DynamicResources
from kubesched.scheduler.plugins.names import DynamicResources as Name

__all__ = ["DynamicResources", "Name"]
