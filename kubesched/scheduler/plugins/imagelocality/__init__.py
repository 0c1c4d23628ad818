"""The ImageLocality plugin (upstream ``framework/plugins/imagelocality``)."""

from kubesched.scheduler.plugins.imagelocality.image_locality import ImageLocality
from kubesched.scheduler.plugins.names import ImageLocality as Name

__all__ = ["ImageLocality", "Name"]
