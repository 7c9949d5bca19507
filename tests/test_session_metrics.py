"""Session and cache metrics against a hand-worked run, read back from a real run directory."""

import pytest

from scoville.results.manifest import base_manifest
from scoville.results.schema import RequestRecord, records_to_table
from scoville.results.store import RunWriter, read_requests
from scoville.session_metrics import run_session_metrics, session_metrics, session_table, turn_metrics


def rec(sid, turn, sent, first, done, n_in, n_out, cached, *, ok=True, warmup=False, point=0):
    return RequestRecord(point=point, request_id=f"{sid}-t{turn}{'-w' if warmup else ''}", session_id=sid,
                         turn=turn, t_sent=sent, t_first_token=first if ok else None, t_done=done if ok else None,
                         token_times=[first, done] if ok else [], token_counts=[1, n_out - 1] if ok else [],
                         input_tokens=n_in, output_tokens=n_out if ok else 0, cached_tokens=cached, ok=ok,
                         error=None if ok else "HTTP 500", warmup=warmup)


# Session A: three turns; the server reports cached prompt tokens (0, 96, 144).
# Session B: a cache-priming warm-up request, then turn 1 whose server did not report cached tokens.
# Session C: a single failed request.
RECORDS = [
    rec("A", 0, 0.0, 0.5, 1.5, 100, 11, 0),
    rec("A", 1, 3.0, 3.2, 4.2, 150, 11, 96),
    rec("A", 2, 6.0, 6.1, 6.6, 200, 6, 144),
    rec("B", 0, 0.0, 0.9, 1.0, 1000, 1, 0, warmup=True),
    rec("B", 1, 1.0, 2.0, 4.0, 50, 21, None),
    rec("C", 0, 2.0, 0.0, 0.0, 80, 10, None, ok=False),
]


@pytest.fixture
def table():
    return records_to_table(RECORDS)


def test_cache_hit_rate_counts_only_reported_cached_tokens(table):
    m = session_metrics(table)
    assert m["cached_tokens"] == 240
    assert m["cache_hit_rate"] == pytest.approx(240 / 450)  # A's turns only: B's turn reported nothing
    assert m["cached_tokens_reported_fraction"] == pytest.approx(3 / 4)


def test_sessions_completion_and_failure(table):
    m = session_metrics(table)
    assert m["num_sessions"] == 3 and m["num_sessions_failed"] == 1
    assert m["num_ok"] == 4 and m["num_requests"] == 5  # the warm-up row is not measured
    # A: 0.0 -> 6.6 (think time included); B: its measured turn 1.0 -> 4.0 (warm-up excluded).
    assert m["session_completion_s_mean"] == pytest.approx((6.6 + 3.0) / 2)
    assert m["turns_per_session_mean"] == pytest.approx(2.0)


def test_e2e_normalised_interactivity_is_one_over_p90_of_e2e_per_output_token(table):
    m = session_metrics(table)
    per_token = sorted([1.5 / 11, 1.2 / 11, 0.6 / 6, 3.0 / 21])
    p90 = per_token[2] + 0.7 * (per_token[3] - per_token[2])  # linear interpolation at rank 2.7
    assert m["e2e_per_output_token_p90_s"] == pytest.approx(p90)
    assert m["interactivity_e2e"] == pytest.approx(1 / p90)


def test_throughput_per_accelerator_separates_cached_input(table):
    m = session_metrics(table, accelerators=2)
    window = 6.6  # first measured send (0.0) to last finish (6.6)
    assert m["window_s"] == pytest.approx(window)
    assert m["output_tok_s_per_accelerator"] == pytest.approx(49 / window / 2)
    assert m["input_cached_tok_s_per_accelerator"] == pytest.approx(240 / window / 2)
    assert m["input_computed_tok_s_per_accelerator"] == pytest.approx((500 - 240) / window / 2)
    assert m["total_tok_s_per_accelerator"] == pytest.approx(549 / window / 2)


def test_per_turn_and_per_session_rows(table):
    turns = {r["turn"]: r for r in turn_metrics(table)}
    assert sorted(turns) == [0, 1, 2]
    assert turns[0]["requests"] == 1 and turns[1]["requests"] == 2
    assert turns[1]["ttft_s_mean"] == pytest.approx((0.2 + 1.0) / 2)
    assert turns[1]["cache_hit_rate"] == pytest.approx(96 / 150)
    assert turns[2]["cache_hit_rate"] == pytest.approx(144 / 200)
    assert turns[0]["tpot_s_median"] == pytest.approx(0.1)

    s = {r["session_id"]: r for r in session_table(table).to_pylist()}
    assert set(s) == {"A", "B"}
    assert s["A"]["turns"] == 3 and s["A"]["completion_s"] == pytest.approx(6.6)
    assert s["A"]["cache_hit_rate"] == pytest.approx(240 / 450)
    assert s["B"]["cache_hit_rate"] is None
    assert s["A"]["ttft_s_mean"] == pytest.approx((0.5 + 0.2 + 0.1) / 3)
    m = session_metrics(table)
    assert m["session_ttft_s_mean"] == pytest.approx(((0.5 + 0.2 + 0.1) / 3 + 1.0) / 2)


def test_no_cached_tokens_reported_gives_no_hit_rate():
    t = records_to_table([rec("X", 0, 0.0, 0.1, 1.0, 10, 5, None)])
    m = session_metrics(t)
    assert m["cache_hit_rate"] is None and m["cached_tokens_reported_fraction"] == 0.0


def test_single_turn_requests_without_session_are_their_own_sessions():
    records = [RequestRecord(point=0, request_id=f"r{i}", t_sent=float(i), t_first_token=i + 0.1, t_done=i + 1.0,
                             input_tokens=10, output_tokens=5, cached_tokens=0) for i in range(4)]
    m = session_metrics(records_to_table(records))
    assert m["num_sessions"] == 4 and m["session_completion_s_median"] == pytest.approx(1.0)


def test_run_session_metrics_reads_points_from_a_run_directory(tmp_path):
    manifest = base_manifest(source="simulated", target={}, system={"hardware": "t", "accelerators": 4},
                             model={"name": "m"}, serving={}, workload={"name": "chat-multiturn"},
                             load_plan={"points": [{"index": 0}, {"index": 1}]}, power={"source": "none"})
    w = RunWriter.create(tmp_path, manifest)
    w.write_point(0, RECORDS)
    for r in RECORDS[:3]:
        w.record(RequestRecord(**{**{f: getattr(r, f) for f in r.__struct_fields__}, "point": 1}))
    w.finish()
    rows = run_session_metrics(w.run_dir)
    assert [r["point"] for r in rows] == [0, 1]
    assert rows[0]["accelerators"] == 4
    assert rows[0] == {"point": 0, **session_metrics(read_requests(w.run_dir).filter(
        read_requests(w.run_dir).column("point").to_numpy() == 0), accelerators=4)}
    assert rows[1]["num_sessions"] == 1 and rows[1]["cache_hit_rate"] == pytest.approx(240 / 450)


def test_a_points_own_accelerator_count_wins_over_the_system_size(tmp_path):
    # a config search records each point's winning configuration; its size divides that point's throughput
    manifest = base_manifest(source="simulated", target={}, system={"hardware": "t", "accelerators": 8},
                             model={"name": "m"}, serving={}, workload={"name": "chat-multiturn"},
                             load_plan={"points": [{"index": 0, "accelerators": 2}, {"index": 1}]},
                             power={"source": "none"})
    w = RunWriter.create(tmp_path, manifest)
    w.write_point(0, RECORDS)
    for r in RECORDS:
        w.record(RequestRecord(**{**{f: getattr(r, f) for f in r.__struct_fields__}, "point": 1}))
    w.finish()
    rows = run_session_metrics(w.run_dir)
    assert [r["accelerators"] for r in rows] == [2, 8]
    assert rows[0]["total_tok_s_per_accelerator"] == pytest.approx(4 * rows[1]["total_tok_s_per_accelerator"])
