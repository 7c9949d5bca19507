"""Synthetic but real run directories built to given frontier figures.

Each load point is n requests sent together; every request streams O tokens
at exactly 1/I seconds apart (so interactivity = I) and its TTFT is solved so
that total tokens / window / kW equals the wanted throughput per kW exactly.
With ``jitter`` the requests vary (seeded) for charts that look like data;
then the figures are only approximate. ``repeats`` measures every point that
many times, pass after pass, as ``--repeats`` does (each repeat jittered anew).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa

from scoville.metrics import recompute
from scoville.results.manifest import base_manifest
from scoville.results.schema import RequestRecord
from scoville.results.store import RunWriter

OUT_TOKENS = 64


def make_run(root: Path, name: str, points: list[tuple[float, float]], *, hardware: str = "H200",
             accelerators: int = 8, watts: float = 1000.0, source: str = "measured", requests_per_point: int = 4,
             cost: float | None = 2.0, jitter: float = 0.0, measured_power: bool = False, seed: int = 0,
             precision: str | None = "fp8", store_metrics: bool = True, repeats: int = 1) -> Path:
    """A complete run with one load point per (interactivity, total tok/s/kW) pair."""
    # as in a concurrency sweep: index 0 is the lightest load (highest interactivity), then concurrency doubles
    points = sorted(points, key=lambda p: -p[0])
    rng = np.random.default_rng(seed)
    kw = watts * accelerators / 1000.0
    plan = [{"index": i, "concurrency": 2 ** i, "label": f"c{2 ** i}"} for i in range(len(points))]
    if repeats > 1:
        plan = [{**p, "index": k * len(points) + p["index"], "repeat": k + 1, "label": f"{p['label']} #{k + 1}"}
                for k in range(repeats) for p in plan]
    power = ({"source": "nvml", "boundary": "board"} if measured_power
             else {"source": "rated", "boundary": "chip", "watts_per_accelerator": watts})
    manifest = base_manifest(
        source=source, target={"base_url": "http://127.0.0.1:8000", "api": "openai"},
        system={"hardware": hardware, "accelerators": accelerators, "rated_watts_per_accelerator": watts,
                "power_boundary": power["boundary"], "cost_per_accelerator_hour": cost},
        model={"name": "llama-70b", "precision": precision},
        serving={"framework": "vllm", "version": "0.6", "parallelism": {"tp": accelerators}},
        workload={"name": "1k1k", "isl": 1024, "osl": 1024, "seed": 1}, load_plan={"points": plan}, power=power)
    manifest.run_id = name
    w = RunWriter.create(root, manifest, journal=False)
    t = 0.0
    samples: list[tuple[float, str, float]] = []
    n = requests_per_point
    for idx, (inter, per_kw) in ((i, points[i % len(points)]) for i in range(len(plan))):
        decode = (OUT_TOKENS - 1) / inter
        ttft_goal = 0.1 * 2 ** (0.8 * (idx % len(points)))  # queueing grows with load, as in a real sweep
        in_tok = max(1, math.ceil(per_kw * kw * (decode + ttft_goal) / n) - OUT_TOKENS)
        e2e = n * (in_tok + OUT_TOKENS) / (per_kw * kw)
        ttft = e2e - decode
        recs = []
        for r in range(n):
            scale = 1.0 + (jitter * rng.uniform(-1, 1) if jitter else 0.0)
            first = t + ttft * (1.0 + (jitter * rng.uniform(-1, 1) if jitter else 0.0))
            gaps = np.full(OUT_TOKENS - 1, scale / inter)
            if jitter:
                gaps = gaps * rng.lognormal(0.0, jitter, OUT_TOKENS - 1)
            times = np.concatenate([[first], first + np.cumsum(gaps)])
            recs.append(RequestRecord(point=idx, request_id=f"{idx}-{r}", t_sent=t, t_first_token=float(first),
                                      t_done=float(times[-1]), token_times=times.tolist(),
                                      token_counts=[1] * OUT_TOKENS, input_tokens=in_tok,
                                      output_tokens=OUT_TOKENS))
        w.write_point(idx, recs)
        end = max(r.t_done for r in recs)
        if measured_power:
            for ts in np.arange(t, end + 0.25, 0.25):
                for dev in range(accelerators):
                    samples.append((float(ts), f"gpu{dev}", watts * (0.6 + 0.3 * (idx % len(points)) / len(points))
                                    + 20 * math.sin(ts + dev)))
        t = end + 1.0
    if samples:
        w.write_power(pa.table({"t": [s[0] for s in samples], "device": [s[1] for s in samples],
                                "watts": [s[2] for s in samples]}))
    w.finish()
    if store_metrics:
        recompute(w.run_dir)
    return w.run_dir


# The seed publication's figures: a baseline whose frontier ends at 169 tok/s/user with
# 118 tok/s/kW and peaks at 45,000; a contender with 12,258 tok/s/kW at 169 and 85,400 peak.
BASELINE_POINTS = [(12.0, 45_000.0), (25.0, 30_000.0), (60.0, 9_000.0), (110.0, 1_500.0), (169.0, 118.0)]
CONTENDER_POINTS = [(20.0, 85_400.0), (45.0, 60_000.0), (100.0, 30_000.0), (169.0, 12_258.0), (300.0, 2_000.0),
                    (420.0, 400.0)]
