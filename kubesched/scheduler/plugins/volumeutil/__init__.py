"""Volume helpers shared by the volume plugins (VolumeBinding, VolumeRestrictions, VolumeZone,
NodeVolumeLimits) and by DynamicResources: claim and PersistentVolume lookups (``helpers``) and the
per-cycle batch of volume objects they read (``batch``). Upstream keeps these in ``pkg/volume/util``
and ``volumebinding``."""
