"""The VolumeBinding plugin (upstream ``framework/plugins/volumebinding``). Its private helper
``_binder`` finds and binds PersistentVolumes for a pod's claims (upstream
``volumebinding/binder.go``)."""

from kubesched.scheduler.plugins.names import VolumeBinding as Name
from kubesched.scheduler.plugins.volumebinding.volume_binding import VolumeBinding

__all__ = ["Name", "VolumeBinding"]
