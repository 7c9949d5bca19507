"""One raw journal, every convention: a run's metrics re-derived as other benchmarking tools define them.

"TPOT", "ITL" and "output throughput" mean different things in vLLM's
``bench serve``, NVIDIA AIPerf, GuideLLM, MLPerf Inference and InferenceX: a
different window, a different denominator, per-request averages or pooled
gaps, another percentile set or percentile rule. A ``Convention`` names those
choices; ``convention_points`` applies one to a run's stored request records
(never writing ``points.parquet``), and ``convention_diff`` says how far each
convention moves the headline numbers from the run's own. The definitions and
their sources are in docs/conventions.md. The arithmetic is ``scoville.metrics``'s
(``itl_gaps``, the clean window, tokens inside it); this module only chooses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scoville.errors import UserError
from scoville.latency import request_tpot
from scoville.metrics import _tokens_in_window, _window, itl_gaps
from scoville.results.store import read_manifest, read_requests

Window = Literal["ok_span", "all_span", "steady"]
Tpot = Literal["decode", "with_ttft"]
Itl = Literal["chunk_gaps", "per_token", "per_request", "none"]
PercentileRule = Literal["linear", "nearest_rank"]
Interactivity = Literal["1/median_tpot", "1/p99_tpot", "mean_inverse_itl"]


@dataclass(frozen=True)
class Convention:
    """How one tool turns request records into its headline numbers.

    * ``window``: ``ok_span`` = first send to last finish of the successful requests; ``all_span`` = the same
      over every measured request, failed ones included (the tool's benchmark duration); ``steady`` =
      scoville's clean window (``metrics._window``), counting only tokens that arrived inside it.
    * ``tpot``: ``decode`` = (last token - first token) / (output tokens - 1), requests with more than one
      token; ``with_ttft`` = (last token - send) / output tokens, the first token's wait included.
    * ``itl``: ``chunk_gaps`` = every gap between chunks pooled; ``per_token`` = those plus k-1 zero gaps per
      k-token chunk; ``per_request`` = one decode average per request; ``none`` = not defined.
    * ``percentile_rule``: ``linear`` = numpy's interpolation; ``nearest_rank`` = sorted[floor(n·q)].
    * ``headline``: the statistic (``mean`` or ``pNN``) read as the point's TTFT, TPOT and ITL.
    """

    name: str
    title: str
    window: Window
    tpot: Tpot
    itl: Itl
    percentile_rule: PercentileRule
    percentiles: tuple[float, ...]
    headline: str
    interactivity: Interactivity
    source: str


CONVENTIONS: dict[str, Convention] = {c.name: c for c in (
    Convention("inferencex", "InferenceX dashboard", "ok_span", "decode", "chunk_gaps", "linear", (50, 90, 99),
               "p50", "1/median_tpot", "scoville.metrics (compat inferencex), after InferenceX's use of "
               "vLLM bench serve results"),
    Convention("clean", "scoville clean", "steady", "decode", "per_token", "linear", (50, 90, 99), "p50",
               "1/median_tpot", "scoville.metrics (compat clean)"),
    Convention("vllm", "vLLM bench serve", "all_span", "decode", "chunk_gaps", "linear", (50, 99), "mean",
               "1/median_tpot", "github.com/vllm-project/vllm vllm/benchmarks/serve.py calculate_metrics"),
    Convention("aiperf", "NVIDIA AIPerf", "ok_span", "decode", "per_request", "linear",
               (1, 5, 10, 25, 50, 75, 90, 95, 99), "mean", "mean_inverse_itl",
               "github.com/ai-dynamo/aiperf aiperf/metrics/types/inter_token_latency_metric.py, "
               "benchmark_duration_metric.py, output_token_throughput_per_user_metric.py"),
    Convention("guidellm", "GuideLLM", "all_span", "with_ttft", "per_request", "linear",
               (0.1, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9), "p50", "1/median_tpot",
               "github.com/vllm-project/guidellm src/guidellm/schemas/request_stats.py"),
    Convention("mlperf", "MLPerf Inference (LLM, Server)", "all_span", "decode", "none", "nearest_rank",
               (50, 90, 95, 97, 99, 99.9), "p99", "1/p99_tpot",
               "github.com/mlcommons/inference loadgen/results.cc"),
)}
HEADLINES = ("ttft_s", "tpot_s", "itl_s", "interactivity", "output_throughput")


def convention(name: str) -> Convention:
    if name not in CONVENTIONS:
        raise UserError(f"unknown convention {name!r}; use one of {', '.join(CONVENTIONS)}")
    return CONVENTIONS[name]


def stat_name(q: float) -> str:
    return f"p{q:g}"


def _statistic(values: np.ndarray, stat: str, rule: PercentileRule) -> float | None:
    """``mean`` or ``pNN`` of the finite values under a percentile rule (None when there are none)."""
    values = values[np.isfinite(values)]
    if not values.size:
        return None
    if stat == "mean":
        return float(values.mean())
    q = float(stat[1:])
    if rule == "nearest_rank":  # MLPerf loadgen: sorted[n * percentile], no interpolation
        return float(np.sort(values)[min(int(values.size * q / 100), values.size - 1)])
    return float(np.percentile(values, q))


@dataclass(frozen=True)
class ConventionPoint:
    """One load point under one convention: its headline numbers, every reported statistic, and its window."""

    point: int
    label: str | None
    convention: str
    ttft_s: float | None
    tpot_s: float | None
    itl_s: float | None
    interactivity: float | None
    output_throughput: float | None
    window_s: float | None
    stats: dict[str, float | None]

    def headline(self, key: str) -> float | None:
        return getattr(self, key)


def point_under(records: pa.Table, conv: Convention, *, point: int, label: str | None,
                concurrency: int | None) -> ConventionPoint:
    """One point's numbers under ``conv`` from its request records (warm-up excluded, as every tool does)."""
    measured = records.filter(pc.invert(records.column("warmup")))
    ok = measured.filter(measured.column("ok"))

    def col(table: pa.Table, name: str) -> np.ndarray:
        return table.column(name).to_numpy(zero_copy_only=False).astype(float)

    t_sent, t_first, t_done, out = (col(ok, n) for n in ("t_sent", "t_first_token", "t_done", "output_tokens"))
    ttft = t_first - t_sent
    with np.errstate(divide="ignore", invalid="ignore"):
        decode = request_tpot(t_first, t_done, out)[out > 1]
        tpot = decode if conv.tpot == "decode" else ((t_done - t_sent) / out)[out > 0]
    if conv.itl in ("chunk_gaps", "per_token"):
        itl = itl_gaps(ok.column("token_times"), ok.column("token_counts"),
                       "clean" if conv.itl == "per_token" else "inferencex")
    else:
        itl = decode if conv.itl == "per_request" else np.empty(0)
    stats: dict[str, float | None] = {}
    for prefix, values in (("ttft_s", ttft), ("tpot_s", tpot), ("itl_s", itl), ("e2e_s", t_done - t_sent)):
        if prefix == "itl_s" and conv.itl == "none":
            continue
        for stat in ("mean", *map(stat_name, conv.percentiles)):
            stats[f"{prefix}_{stat}"] = _statistic(values, stat, conv.percentile_rule)
    window, out_tput = _throughput(measured, ok, conv, concurrency)
    return ConventionPoint(point=point, label=label, convention=conv.name,
                           ttft_s=stats.get(f"ttft_s_{conv.headline}"), tpot_s=stats.get(f"tpot_s_{conv.headline}"),
                           itl_s=stats.get(f"itl_s_{conv.headline}"),
                           interactivity=_interactivity(conv, tpot, decode),
                           output_throughput=out_tput, window_s=window, stats=stats)


def _interactivity(conv: Convention, tpot: np.ndarray, decode: np.ndarray) -> float | None:
    """Tokens per second per user, by the convention's estimator."""
    if conv.interactivity == "mean_inverse_itl":  # AIPerf: output token throughput per user, averaged
        inverse = 1.0 / decode[np.isfinite(decode) & (decode > 0)]
        return float(inverse.mean()) if inverse.size else None
    stat = "p50" if conv.interactivity == "1/median_tpot" else "p99"
    value = _statistic(tpot, stat, conv.percentile_rule)
    return 1.0 / value if value else None


def _throughput(measured: pa.Table, ok: pa.Table, conv: Convention,
                concurrency: int | None) -> tuple[float | None, float | None]:
    """(window seconds, output tokens per second) under the convention's window rule."""
    if ok.num_rows == 0:
        return None, None
    t_sent = ok.column("t_sent").to_numpy(zero_copy_only=False).astype(float)
    t_done = ok.column("t_done").to_numpy(zero_copy_only=False).astype(float)
    out_tokens = float(pc.sum(ok.column("output_tokens")).as_py() or 0)
    if conv.window == "all_span":  # a failed request may have no t_done: it ended when it was sent, at the latest
        ends = pc.fill_null(measured.column("t_done"), measured.column("t_sent"))
        start = float(pc.min(measured.column("t_sent")).as_py())
        end = float(pc.max(ends).as_py())
    elif conv.window == "steady":
        start, end = _window(t_sent, t_done, concurrency, "clean")
        if (start, end) != (float(t_sent.min()), float(t_done.max())):
            out_tokens = _tokens_in_window(ok, start, end)[0]
    else:
        start, end = float(t_sent.min()), float(t_done.max())
    window = end - start
    return window, (out_tokens / window if window > 0 else None)


def convention_points(run_dir: Path, name: str) -> list[ConventionPoint]:
    """Every load point of a run under convention ``name``, from its stored records; nothing is written."""
    conv = convention(name)
    manifest = read_manifest(run_dir)
    if manifest.target.fidelity == "analytic":
        raise UserError(f"{run_dir.name} is an analytic prediction: it has no request records to re-derive "
                        "(simulate --fidelity des records them)")
    requests = read_requests(run_dir)
    out = []
    for p in manifest.load_plan.points:
        subset = requests.filter(pc.equal(requests.column("point"), p.index))
        if subset.num_rows:
            out.append(point_under(subset, conv, point=p.index, label=p.label, concurrency=p.concurrency))
    return out


@dataclass(frozen=True)
class Deviation:
    """One convention's headline numbers at one point, and how far each is from the run's own convention's."""

    point: int
    label: str | None
    convention: str
    values: dict[str, float | None]
    relative: dict[str, float | None]   # (value - own) / own


def convention_diff(run_dir: Path, names: list[str] | None = None) -> tuple[str, list[Deviation]]:
    """(the run's own convention, every point under each convention with its deviation from the own one)."""
    own = read_manifest(run_dir).compat
    names = list(dict.fromkeys([own, *(names or CONVENTIONS)]))
    per = {n: convention_points(run_dir, n) for n in names}
    base = {p.point: p for p in per[own]}
    out = []
    for ref in per[own]:
        for n in names:
            p = next(x for x in per[n] if x.point == ref.point)
            values = {k: p.headline(k) for k in HEADLINES}
            out.append(Deviation(p.point, p.label, n, values,
                                 {k: _relative(values[k], base[ref.point].headline(k)) for k in HEADLINES}))
    return own, out


def _relative(value: float | None, own: float | None) -> float | None:
    if value is None or not own or not math.isfinite(own):
        return None
    return (value - own) / own


def as_dict(p: ConventionPoint | Deviation) -> dict[str, Any]:
    """A flat, JSON-ready record (``--json`` and ``-o``)."""
    if isinstance(p, Deviation):
        return {"point": p.point, "label": p.label, "convention": p.convention, **p.values,
                **{f"{k}_deviation": v for k, v in p.relative.items()}}
    conv = CONVENTIONS[p.convention]
    return {"point": p.point, "label": p.label, "convention": p.convention, "headline_statistic": conv.headline,
            "interactivity_estimator": conv.interactivity, **{k: p.headline(k) for k in HEADLINES},
            "window_s": p.window_s, **p.stats}
