"""The VolumeRestrictions plugin (upstream ``framework/plugins/volumerestrictions``)."""

from kubesched.scheduler.plugins.names import VolumeRestrictions as Name
from kubesched.scheduler.plugins.volumerestrictions.volume_restrictions import VolumeRestrictions

__all__ = ["Name", "VolumeRestrictions"]
