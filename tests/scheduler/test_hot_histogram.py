"""``HotHistogram`` (the scheduler's histograms) exposes exactly what ``prometheus_client``'s
Histogram exposes for the same observations."""

from __future__ import annotations

import math
import random

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from kubesched.scheduler.metrics import HotHistogram, _exponential


def _exposition(registry: CollectorRegistry) -> list[bytes]:
    return [line for line in generate_latest(registry).splitlines() if b"_created" not in line]


def test_observations_land_in_the_same_buckets_with_the_same_sum():
    plain, hot = CollectorRegistry(), CollectorRegistry()
    buckets = _exponential(0.0001, 2, 12)
    reference = Histogram("latency", "help", ["point"], registry=plain, buckets=buckets)
    subject = HotHistogram("latency", "help", ["point"], registry=hot, buckets=buckets)
    unlabelled = (Histogram("attempts", "help", registry=plain, buckets=_exponential(1, 2, 5)),
                  HotHistogram("attempts", "help", registry=hot, buckets=_exponential(1, 2, 5)))
    rng = random.Random(7)
    edges = [0, 0.0001, 0.0002, 0.2048, 1e9, -1.0, math.inf, math.nan, *buckets]
    for _ in range(5000):
        value = rng.choice(edges) if rng.random() < 0.3 else rng.random() * 0.5
        point = rng.choice(["Filter", "Score"])
        reference.labels(point).observe(value)
        subject.labels(point).observe(value)
        for histogram in unlabelled:
            histogram.observe(int(value * 40) if value == value and abs(value) < math.inf else 3)
    assert _exposition(hot) == _exposition(plain)


def test_a_labelled_histogram_refuses_observations_without_its_labels():
    histogram = HotHistogram("latency", "help", ["point"], registry=CollectorRegistry())
    with pytest.raises(ValueError, match="missing label values"):
        histogram.observe(1.0)
