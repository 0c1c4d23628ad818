"""Coscheduling (scheduler-plugins ``pkg/coscheduling``): gang scheduling of PodGroups."""

from kubesched.contrib.coscheduling.args import CoschedulingArgs
from kubesched.contrib.coscheduling.coscheduling import Coscheduling
from kubesched.contrib.coscheduling.pod_group import POD_GROUP_LABEL, PodGroup

__all__ = ["POD_GROUP_LABEL", "Coscheduling", "CoschedulingArgs", "PodGroup"]
