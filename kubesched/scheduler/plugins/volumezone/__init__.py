"""The VolumeZone plugin (upstream ``framework/plugins/volumezone``)."""

from kubesched.scheduler.plugins.names import VolumeZone as Name
from kubesched.scheduler.plugins.volumezone.volume_zone import VolumeZone

__all__ = ["Name", "VolumeZone"]
