"""`scoville sweep --repeats 2` against the built-in emulator: a point per repeat, each with its intervals."""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = pytest.mark.slow   # a whole-CLI subprocess run (the fast lane skips it)


def test_sweep_with_repeats_measures_each_load_twice_with_intervals(tmp_path):
    proc = subprocess.run(["scoville", "sweep", "--isl", "64", "--osl", "8", "--concurrency", "1,2",
                           "--num-requests", "4", "--warmup-requests", "0", "--repeats", "2",
                           "--runs", str(tmp_path), "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    points = out["points"]
    assert [(p["point"], p["label"], p["repeat"], p["load"]) for p in points] == [
        (0, "c=1 #1", 1, "c=1"), (1, "c=2 #1", 1, "c=2"), (2, "c=1 #2", 2, "c=1"), (3, "c=2 #2", 2, "c=2")]
    for p in points:
        assert p["num_ok"] == 4 and p["band_kind"] == "bootstrap 95% over requests"
        assert p["ttft_s_median_lo"] <= p["ttft_s_median"] <= p["ttft_s_median_hi"]
        assert p["e2e_s_p90_lo"] <= p["e2e_s_p90"] <= p["e2e_s_p90_hi"]
    loads = out["loads"]
    assert [(r["label"], r["repeats"], r["repeat_points"], r["num_ok"]) for r in loads] == [
        ("c=1", 2, [0, 2], 8), ("c=2", 2, [1, 3], 8)]
    for r in loads:
        assert r["band_kind"] == "bootstrap 95% over repeats"
        reps = [p["total_throughput_per_accelerator"] for p in points if p["load"] == r["label"]]
        # two repeats: the interval of their mean is the range of the two
        assert (r["total_throughput_per_accelerator_lo"], r["total_throughput_per_accelerator_hi"]) == (
            pytest.approx(min(reps)), pytest.approx(max(reps)))
    from scoville.results.store import read_requests

    ids = read_requests(tmp_path / out["run_id"]).to_pydict()
    by_point = {i: {r for r, p in zip(ids["request_id"], ids["point"], strict=True) if p == i} for i in range(4)}
    assert not by_point[0] & by_point[2] and not by_point[1] & by_point[3]   # each repeat its own requests
