"""The measurement rules, checked on fixed inputs: upstream's throughput sampling and percentiles."""

from __future__ import annotations

import pytest

from kubesched.bench.collectors import ThroughputSampler, nearest_rank, summarize


def test_nearest_rank_is_upstreams_ceil_index() -> None:
    values = list(range(1, 11))
    assert nearest_rank(values, 50) == 5
    assert nearest_rank(values, 90) == 9
    assert nearest_rank(values, 99) == 10
    assert nearest_rank([7.0], 99) == 7.0


def test_summarize_reports_average_percentiles_and_count() -> None:
    stats = summarize([3.0, 1.0, 2.0], scale=1000.0)
    assert stats == {"average": 2000.0, "perc50": 2000.0, "perc90": 3000.0, "perc95": 3000.0, "perc99": 3000.0,
                     "max": 3000.0, "samples": 3}
    assert summarize([]) is None


def test_sampler_waits_for_the_first_pod_and_skips_the_first_sample() -> None:
    s = ThroughputSampler()
    s.observe(1.0, 0)
    s.observe(2.0, 40)  # first non-zero count: the baseline, not a sample
    s.observe(3.0, 140)
    s.observe(4.0, 340)
    assert s.samples == [100.0, 200.0]
    assert s.start_time == 2.0


def test_sampler_spreads_a_gap_without_pods_over_every_second_it_covered() -> None:
    s = ThroughputSampler()
    s.observe(1.0, 10)
    s.observe(2.0, 10)
    s.observe(3.0, 10)
    s.observe(4.0, 40)
    assert s.samples == [10.0, 10.0, 10.0]


def test_sampler_uses_the_actual_interval_when_a_tick_is_late() -> None:
    s = ThroughputSampler()
    s.observe(1.0, 1)
    s.observe(2.5, 301)
    assert s.samples == [pytest.approx(200.0)]
