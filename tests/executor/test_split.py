"""Splitting a load point across client workers adds up to exactly the plan."""

from __future__ import annotations

import numpy as np
import pytest

from scoville.executor.split import even_split, proportional_split, split_point
from scoville.load import LoadError, LoadPoint, arrival_offsets, concurrency_sweep, rate_sweep


def test_even_and_proportional_splits_sum_exactly():
    assert even_split(7, 3) == [3, 2, 2]
    assert proportional_split(10, [3, 2, 2]) == [4, 3, 3]  # 4.29, 2.86, 2.86: largest remainders round up
    for total in range(0, 50):
        for weights in ([1], [1, 1], [3, 2, 2], [5, 1]):
            parts = proportional_split(total, weights)
            assert sum(parts) == total and min(parts) >= 0


@pytest.mark.parametrize("c,workers", [(1, 2), (2, 2), (5, 2), (64, 3), (7, 8)])
def test_closed_loop_split_is_the_plan(c, workers):
    point = concurrency_sweep([c])[0]  # 10·C measured after 2·C warm-up
    shares = split_point(point, workers)
    assert len(shares) == min(c, workers)
    assert sum(s.lanes for s in shares) == c
    assert sum(s.requests for s in shares) == point.total_requests
    assert sum(s.point.warmup_requests for s in shares) == point.warmup_requests
    assert sum(s.point.num_requests for s in shares) == point.num_requests
    sessions = [k for s in shares for k in s.sessions]
    assert sorted(sessions) == list(range(point.total_requests))  # disjoint, nothing missing
    assert all(s.point.concurrency == s.lanes for s in shares)


def test_duration_only_closed_point_splits_lanes_without_a_request_cap():
    point = LoadPoint(index=0, concurrency=4, duration_s=2.0)
    shares = split_point(point, 2)
    assert [s.requests for s in shares] == [None, None]
    assert sum(s.lanes for s in shares) == 4


def test_open_loop_split_deals_the_plans_own_arrivals():
    point = rate_sweep([8.0], num_requests=200, warmup_requests=20, burstiness=0.5, max_concurrency=9)[0]
    shares = split_point(point, 3, seed=11)
    owned = sorted(k for s in shares for k in s.sessions)
    assert owned == list(range(point.total_requests))
    # Warm-up stays the first W arrivals of the plan, wherever they went.
    assert sum(s.point.warmup_requests for s in shares) == 20
    for s in shares:
        assert s.point.warmup_requests == sum(1 for k in s.sessions if k < 20)
        assert s.requests == len(s.sessions)
        # Rate and burstiness untouched: each worker computes the plan's arrival times.
        assert (s.point.rate, s.point.burstiness, s.point.index) == (8.0, 0.5, 0)
        np.testing.assert_array_equal(arrival_offsets(s.point, point.total_requests, 11),
                                      arrival_offsets(point, point.total_requests, 11))
    assert sum(s.max_in_flight for s in shares) == 9
    assert split_point(point, 3, seed=11) == shares  # seeded: a rerun splits the same way
    assert split_point(point, 3, seed=12) != shares


def test_open_loop_split_thins_into_streams_of_about_equal_rate():
    point = rate_sweep([10.0], num_requests=3000)[0]
    shares = split_point(point, 2, seed=0)
    sizes = [len(s.sessions) for s in shares]
    assert abs(sizes[0] - sizes[1]) < 0.1 * 3000  # binomial(3000, 1/2): far inside 10 %


def test_open_loop_cap_never_rounds_to_zero():
    point = rate_sweep([5.0], num_requests=20, max_concurrency=1)[0]
    shares = split_point(point, 4)
    assert len(shares) == 1 and shares[0].max_in_flight == 1


def test_open_loop_cap_is_kept_whole_when_a_worker_draws_no_sessions():
    # 3 sessions thinned over 3 workers: often one worker gets none; its share of the cap must not vanish.
    point = rate_sweep([5.0], num_requests=3, max_concurrency=4)[0]
    for seed in range(20):
        shares = split_point(point, 4, seed=seed)
        assert sum(s.max_in_flight for s in shares) == 4, seed
        assert all(s.max_in_flight >= 1 for s in shares)


def test_bad_worker_count_is_a_user_error():
    with pytest.raises(LoadError, match="--workers"):
        split_point(concurrency_sweep([2])[0], 0)
