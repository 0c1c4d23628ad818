"""QOSSort (scheduler-plugins ``pkg/qos``): a queue sort that breaks priority ties by QoS class."""

from kubesched.contrib.qossort.queue_sort import QOSSort

__all__ = ["QOSSort"]
