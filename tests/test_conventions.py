"""Each tool's convention on hand-computed records (scoville.conventions, docs/conventions.md), and that
`recompute --as`/`--diff` never touch the run's points.parquet."""

from __future__ import annotations

import hashlib
import json

import pyarrow.parquet as pq
import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from analysis.runs_factory import BASELINE_POINTS, make_run
from scoville.cli import runs_cmd
from scoville.conventions import (
    CONVENTIONS,
    convention_diff,
    convention_points,
    point_under,
)
from scoville.metrics import PointContext, point_metrics, run_metrics
from scoville.results.schema import RequestRecord, records_to_table
from scoville.results.store import POINT_METRICS


def rec(i, sent, first, done, times, counts, out, ok=True, warmup=False):
    return RequestRecord(point=0, request_id=f"r{i}", t_sent=sent, t_first_token=first, t_done=done,
                         token_times=times, token_counts=counts, output_tokens=out, ok=ok, warmup=warmup)


# r0: TTFT 1.0; decode TPOT (2-1)/2 = 0.5; with the first token's wait 2/3; chunk gaps 0.5, 0.5
# r1: TTFT 1.5; decode (3.5-2)/3 = 0.5; with wait 3/4 = 0.75; chunk gap 1.5 (then a 3-token chunk: 2 zero gaps)
# r2: TTFT 0.5; decode (5.5-1.5)/2 = 2.0; with wait 4.5/3 = 1.5; chunk gaps 1.0, 3.0
# a failed request sent at 6.0 (no t_done) and a warm-up one that every convention ignores
# 10 output tokens; successful span 0 .. 5.5; every measured request's span 0 .. 6.0
RECORDS = records_to_table([
    rec(0, 0.0, 1.0, 2.0, [1.0, 1.5, 2.0], [1, 1, 1], 3),
    rec(1, 0.5, 2.0, 3.5, [2.0, 3.5], [1, 3], 4),
    rec(2, 1.0, 1.5, 5.5, [1.5, 2.5, 5.5], [1, 1, 1], 3),
    RequestRecord(point=0, request_id="f", t_sent=6.0, ok=False, error="HTTP 500"),
    rec(9, 10.0, 11.0, 99.0, [11.0, 99.0], [1, 1], 2, warmup=True),
])

# convention: (TTFT, TPOT, ITL, tok/s/user, output tok/s), each worked out above by hand
EXPECTED = {
    # medians; ITL = median of the pooled gaps [0.5, 0.5, 1.5, 1.0, 3.0]; 1/median TPOT; 10 tokens / 5.5 s
    "inferencex": (1.0, 0.5, 1.0, 2.0, 10 / 5.5),
    # the clean window needs a concurrency; without one it is the full span. ITL gains the 2 zero gaps
    "clean": (1.0, 0.5, 0.5, 2.0, 10 / 5.5),
    # means; ITL = mean of the pooled gaps 6.5 / 5; duration covers the failed request: 10 / 6
    "vllm": (1.0, 1.0, 1.3, 2.0, 10 / 6),
    # means; ITL per request = decode TPOT [0.5, 0.5, 2.0]; tok/s/user = mean(1/ITL) = (2 + 2 + 0.5) / 3
    "aiperf": (1.0, 1.0, 1.0, 1.5, 10 / 5.5),
    # medians; TPOT includes the wait for the first token: median(2/3, 0.75, 1.5) = 0.75
    "guidellm": (1.0, 0.75, 0.5, 1 / 0.75, 10 / 6),
    # p99 by nearest rank: sorted[int(3 * 0.99)] = the largest; no ITL; tok/s/user = 1/p99 TPOT
    "mlperf": (1.5, 2.0, None, 0.5, 10 / 6),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_convention_on_hand_computed_records(name):
    p = point_under(RECORDS, CONVENTIONS[name], point=0, label="c=1", concurrency=None)
    got = (p.ttft_s, p.tpot_s, p.itl_s, p.interactivity, p.output_throughput)
    assert got == pytest.approx(EXPECTED[name])


def test_reported_statistics_follow_each_percentile_set_and_rule():
    vllm = point_under(RECORDS, CONVENTIONS["vllm"], point=0, label=None, concurrency=None).stats
    assert set(vllm) == {f"{m}_{s}" for m in ("ttft_s", "tpot_s", "itl_s", "e2e_s") for s in ("mean", "p50", "p99")}
    assert vllm["tpot_s_p99"] == pytest.approx(0.5 + 0.98 * 1.5)   # linear: rank 0.99 * 2 = 1.98
    mlperf = point_under(RECORDS, CONVENTIONS["mlperf"], point=0, label=None, concurrency=None).stats
    assert mlperf["tpot_s_p99"] == 2.0 and mlperf["tpot_s_p50"] == 0.5 and "itl_s_mean" not in mlperf
    assert "ttft_s_p99.9" in mlperf and "ttft_s_p97" in mlperf
    guidellm = point_under(RECORDS, CONVENTIONS["guidellm"], point=0, label=None, concurrency=None).stats
    assert guidellm["ttft_s_p0.1"] == pytest.approx(0.5 + 0.002 * 0.5) and "ttft_s_p99.9" in guidellm
    aiperf = point_under(RECORDS, CONVENTIONS["aiperf"], point=0, label=None, concurrency=None).stats
    assert aiperf["itl_s_p95"] == pytest.approx(0.5 + 0.9 * 1.5)   # rank 0.95 * 2 = 1.9


@pytest.mark.parametrize("compat", ["inferencex", "clean"])
def test_the_run_own_conventions_agree_with_the_stored_metrics(tmp_path, compat):
    run = make_run(tmp_path, "r", BASELINE_POINTS, jitter=0.3, requests_per_point=12)
    m = json.loads((run / "manifest.json").read_text())
    m["compat"] = compat
    (run / "manifest.json").write_text(json.dumps(m))
    rows = run_metrics(run)
    for row, p in zip(rows, convention_points(run, compat), strict=True):
        assert (p.ttft_s, p.tpot_s, p.itl_s, p.interactivity, p.output_throughput) == pytest.approx(
            (row["ttft_s_median"], row["tpot_s_median"], row["itl_s_median"], row["interactivity"],
             row["output_throughput"]))
        assert p.window_s == pytest.approx(row["window_s"])


def test_clean_counts_only_tokens_inside_its_steady_window():
    # C = 2; sends 0, 0.2, 1, 1.2, 2, 2.2, each a token at +0.5 and +1.0. The window runs from the 2nd send
    # (0.2) to the 2nd-last finish (3.0); of the 12 tokens only the one at 3.2 falls outside: 11 / 2.8
    sends = [0.0, 0.2, 1.0, 1.2, 2.0, 2.2]
    records = records_to_table([rec(i, s, s + 0.5, s + 1.0, [s + 0.5, s + 1.0], [1, 1], 2)
                                for i, s in enumerate(sends)])
    p = point_under(records, CONVENTIONS["clean"], point=0, label=None, concurrency=2)
    assert p.window_s == pytest.approx(2.8) and p.output_throughput == pytest.approx(11 / 2.8)
    row = point_metrics(records, PointContext(concurrency=2, compat="clean"))
    assert p.output_throughput == pytest.approx(row["output_throughput"])
    full = point_under(records, CONVENTIONS["inferencex"], point=0, label=None, concurrency=2)
    assert full.output_throughput == pytest.approx(12 / 3.2)


def test_diff_measures_each_convention_from_the_run_own(tmp_path):
    run = make_run(tmp_path, "r", BASELINE_POINTS[:2], jitter=0.2)
    own, rows = convention_diff(run)
    assert own == "inferencex"
    assert [d.convention for d in rows[:len(CONVENTIONS)]] == list(CONVENTIONS)  # the run's own first
    mine = {d.point: d for d in rows if d.convention == own}
    for d in rows:
        base = mine[d.point].values
        for key, rel in d.relative.items():
            if d.values[key] is None:
                assert rel is None
            else:
                assert rel == pytest.approx((d.values[key] - base[key]) / base[key])
        if d.convention == own:
            assert all(r == 0 for r in d.relative.values())


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_recompute_as_and_diff_leave_points_parquet_unchanged(tmp_path, monkeypatch):
    run = make_run(tmp_path, "20260101T000000Z-aaaaaa", BASELINE_POINTS[:3], jitter=0.2)
    before = _digest(run / POINT_METRICS)
    monkeypatch.setattr(runs_cmd, "console", Console(width=80))
    app = typer.Typer()
    runs_cmd.register(app)
    invoke = CliRunner().invoke
    for args in (["--as", "vllm"], ["--as", "mlperf", "--json"], ["--diff"], ["--diff", "--as", "guidellm"],
                 ["--as", "aiperf", "-o", str(tmp_path / "aiperf.parquet")]):
        r = invoke(app, ["recompute", run.name, "--runs", str(tmp_path), *args])
        assert r.exit_code == 0, r.output
        assert max(len(line) for line in r.output.splitlines()) <= 80, r.output
    assert _digest(run / POINT_METRICS) == before
    written = pq.read_table(tmp_path / "aiperf.parquet").to_pylist()
    assert [w["convention"] for w in written] == ["aiperf"] * 3 and "itl_s_p95" in written[0]
    # -o into the run's folder is refused: it could replace points.parquet with another convention's numbers
    r = invoke(app, ["recompute", run.name, "--runs", str(tmp_path), "--as", "vllm", "-o", str(run / POINT_METRICS)])
    assert r.exit_code != 0 and _digest(run / POINT_METRICS) == before
    r = invoke(app, ["recompute", run.name, "--runs", str(tmp_path), "--as", "lmperf"])
    assert r.exit_code != 0 and "unknown convention 'lmperf'" in str(r.exception or r.output)
