"""Metric arithmetic against hand-computed cases (docs/architecture.md definitions)."""

import pyarrow as pa
import pytest

from scoville.metrics import PointContext, itl_gaps, mean_power_w, point_metrics
from scoville.results.schema import POWER_SCHEMA, RequestRecord, records_to_table


def rec(i, sent, first, done, times, counts, out, inp=100, warmup=False, ok=True):
    return RequestRecord(point=0, request_id=f"r{i}", t_sent=sent, t_first_token=first, t_done=done,
                         token_times=times, token_counts=counts, input_tokens=inp, output_tokens=out,
                         warmup=warmup, ok=ok)


def two_requests():
    # r0: sent 0, tokens at 1.0, 1.5, 2.0 (one token each) -> TTFT 1, TPOT 0.5, E2E 2
    # r1: sent 0.5, chunk of 1 at 2.0, chunk of 3 at 3.5 -> TTFT 1.5, TPOT (3.5-2)/3 = 0.5, E2E 3
    return [
        rec(0, 0.0, 1.0, 2.0, [1.0, 1.5, 2.0], [1, 1, 1], 3),
        rec(1, 0.5, 2.0, 3.5, [2.0, 3.5], [1, 3], 4),
        rec(2, 10.0, 11.0, 99.0, [11.0], [1], 1, warmup=True),
    ]


def test_latency_metrics_match_hand_computation():
    m = point_metrics(records_to_table(two_requests()), PointContext(accelerators=2))
    assert m["num_requests"] == 2  # warm-up excluded
    assert m["ttft_s_mean"] == pytest.approx(1.25)
    assert m["tpot_s_median"] == pytest.approx(0.5)
    assert m["interactivity"] == pytest.approx(2.0)
    assert m["e2e_s_mean"] == pytest.approx(2.5)
    # window 0 .. 3.5; 7 output tokens, 200 input tokens
    assert m["window_s"] == pytest.approx(3.5)
    assert m["output_throughput"] == pytest.approx(7 / 3.5)
    assert m["total_throughput"] == pytest.approx(207 / 3.5)
    assert m["total_throughput_per_accelerator"] == pytest.approx(207 / 3.5 / 2)


def test_itl_chunk_gaps_vs_per_token():
    table = records_to_table(two_requests())
    chunky = point_metrics(table, PointContext(compat="inferencex"))
    # chunk gaps: 0.5, 0.5 (r0) and 1.5 (r1)
    assert chunky["itl_s_mean"] == pytest.approx((0.5 + 0.5 + 1.5) / 3)
    per_token = point_metrics(table, PointContext(compat="clean"))
    # the 3-token chunk adds two zero gaps
    assert per_token["itl_s_mean"] == pytest.approx((0.5 + 0.5 + 1.5) / 5)


def test_per_token_itl_counts_a_multi_token_first_chunk():
    # tokens at 1.0, 1.0, 1.0 (first chunk of 3) and 2.0 -> per-token gaps 0, 0, 1: one per token after the first,
    # so the mean ITL equals the request's TPOT ((2.0 - 1.0) / 3)
    table = records_to_table([rec(0, 0.0, 1.0, 2.0, [1.0, 2.0], [3, 1], 4)])
    per_token = point_metrics(table, PointContext(compat="clean"))
    assert per_token["itl_s_mean"] == pytest.approx(1.0 / 3)
    assert per_token["itl_s_mean"] == pytest.approx(per_token["tpot_s_mean"])
    assert sorted(itl_gaps(table.column("token_times"), table.column("token_counts"), "clean")) == [0.0, 0.0, 1.0]
    assert itl_gaps(table.column("token_times"), table.column("token_counts"), "inferencex").tolist() == [1.0]


def test_rated_power_and_cost():
    ctx = PointContext(accelerators=2, power_source="rated", watts_per_accelerator=500.0,
                       cost_per_accelerator_hour=3.0)
    m = point_metrics(records_to_table(two_requests()), ctx)
    assert m["power_w"] == 1000.0
    assert m["total_throughput_per_kw"] == pytest.approx(207 / 3.5)
    tokens_per_hour = 207 / 3.5 * 3600
    assert m["usd_per_mtok_total"] == pytest.approx(6.0 / (tokens_per_hour / 1e6))


def test_measured_power_trapezoid_per_device():
    # device a ramps 100->300 W over 0..2 s, device b constant 50 W.
    power = pa.table({"t": [0.0, 2.0, 0.0, 2.0], "device": ["a", "a", "b", "b"],
                      "watts": [100.0, 300.0, 50.0, 50.0]}, schema=POWER_SCHEMA)
    watts, energy = mean_power_w(power, 0.0, 1.0)
    # a: mean over [0,1] of 100+100t = 150; b: 50
    assert watts == pytest.approx(200.0)
    assert energy == pytest.approx(200.0)


def test_errors_are_counted_not_measured():
    recs = two_requests() + [RequestRecord(point=0, request_id="bad", t_sent=0.2, ok=False, error="HTTP 500",
                                           http_status=500)]
    m = point_metrics(records_to_table(recs), PointContext())
    assert m["num_errors"] == 1 and m["num_ok"] == 2
    assert m["ttft_s_mean"] == pytest.approx(1.25)


def test_goodput_under_slo():
    ctx = PointContext(slo={"ttft_s": 1.2})
    m = point_metrics(records_to_table(two_requests()), ctx)
    assert m["slo_attainment"] == pytest.approx(0.5)
    assert m["goodput"] == pytest.approx(1 / 3.5)


def test_clean_mode_goodput_never_exceeds_request_throughput():
    # six 1 s requests sent 1 s apart; at C=2 the clean window (1.0 .. 5.0) is shorter than the span (0 .. 6)
    recs = [rec(i, float(i), i + 0.5, i + 1.0, [i + 0.5, i + 1.0], [1, 1], 2) for i in range(6)]
    m = point_metrics(records_to_table(recs), PointContext(compat="clean", concurrency=2, slo={"e2e_s": 10.0}))
    assert m["window_s"] == pytest.approx(4.0)
    assert m["slo_attainment"] == 1.0
    assert m["goodput"] == pytest.approx(m["request_throughput"]) == pytest.approx(6 / 6.0)


def test_a_point_of_empty_replies_has_no_price_per_output_token():
    # the server answered every request with zero tokens: output throughput 0, no $/Mtok, no crash
    recs = [rec(i, 0.0, 1.0, 2.0, [1.0], [0], 0) for i in range(2)]
    m = point_metrics(records_to_table(recs), PointContext(cost_per_accelerator_hour=2.0))
    assert m["output_throughput"] == 0.0 and m["usd_per_mtok_output"] is None
    assert m["usd_per_mtok_total"] == pytest.approx(2.0 / (200 / 2.0 * 3600 / 1e6))


def test_a_point_cache_hit_rate_counts_only_requests_that_reported_cached_tokens():
    # r0 reports 50 of its 100 input tokens cached, r1 says nothing: the point's rate is 50% (as per turn and
    # per session), not 25% (an unreported count read as zero)
    r0, r1, _ = two_requests()
    r0.cached_tokens = 50
    m = point_metrics(records_to_table([r0, r1]), PointContext(accelerators=1))
    assert m["cached_tokens"] == 50 and m["cache_hit_rate"] == pytest.approx(0.5)
    assert point_metrics(records_to_table(two_requests()[:2]), PointContext(accelerators=1))["cache_hit_rate"] is None
