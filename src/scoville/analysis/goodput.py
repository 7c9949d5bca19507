"""Goodput under service-level objectives, recomputed from the raw request records.

A run records no SLO verdicts: whether a request was "good" depends on the
SLO the reader cares about, so goodput is always recomputed from requests with
the metrics module's own definition (scoville.metrics.PointContext.slo).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from scoville.errors import UserError
from scoville.metrics import context_from_manifest, point_metrics
from scoville.results.catalog import load_manifest
from scoville.results.store import read_power, read_requests
from scoville.slo import Slo

SLO_KEYS = ("ttft_s", "tpot_s", "e2e_s")


def parse_slo(text: str) -> dict[str, float]:
    """Per-request goodput thresholds of an SLO text (``scoville.slo``, the one parser): ``"ttft_s=2,tpot_s=0.05"``
    -> {"ttft_s": 2.0, "tpot_s": 0.05}; a statistic limit such as ``tpot_p90=50ms`` serves as ``tpot_s=0.05``."""
    thresholds = Slo.parse(text).per_request()
    if not thresholds:
        raise UserError(f"SLO {text!r} has no per-request limit (ITL has none); give ttft, tpot or e2e limits")
    return thresholds


def goodput(run_dir: Path, slo: dict[str, float]) -> list[dict[str, Any]]:
    """Per load point: goodput (requests/s meeting every SLO) and SLO attainment (fraction)."""
    bad = set(slo) - set(SLO_KEYS)
    if bad or not slo:
        raise UserError(f"SLO keys must be among {', '.join(SLO_KEYS)} (got {sorted(slo) or 'none'})")
    manifest = load_manifest(run_dir)
    requests = read_requests(run_dir)
    power = read_power(run_dir)
    out = []
    for point in manifest.load_plan.points:
        subset = requests.filter(pc.equal(requests.column("point"), point.index))
        if subset.num_rows == 0:
            continue
        ctx = dataclasses.replace(context_from_manifest(manifest, point), slo=dict(slo))
        m = point_metrics(subset, ctx, power)
        out.append({"point": point.index, "concurrency": point.concurrency, "rate": point.rate,
                    "interactivity": m.get("interactivity"), "request_throughput": m.get("request_throughput"),
                    "goodput": m.get("goodput"), "slo_attainment": m.get("slo_attainment")})
    return out
