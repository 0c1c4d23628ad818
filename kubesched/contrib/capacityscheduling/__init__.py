"""CapacityScheduling (scheduler-plugins ``pkg/capacityscheduling``): elastic quotas per namespace."""

from kubesched.contrib.capacityscheduling.capacity_scheduling import CapacityScheduling
from kubesched.contrib.capacityscheduling.elasticquota import ElasticQuotaInfo, ElasticQuotaInfos

__all__ = ["CapacityScheduling", "ElasticQuotaInfo", "ElasticQuotaInfos"]
