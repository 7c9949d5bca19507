"""The target server's own Prometheus figures: parsing, window deltas, and the per-point columns they give.

Why: the client measures what a user sees; the server's histograms say what the engine saw. Their difference
is the HTTP and network overhead (TTFT) or a sign that one side measures something else (TPOT), and the
gauges (queue, KV cache, preemptions) say *why* a point looks as it does. See docs/server-metrics.md.

No HTTP here (``client.scrape`` fetches the text): this module turns exposition text into typed samples and
a point's stored samples into per-point columns, so it is tested on hand-written cases.

Engine metric names, and where they come from (looked up in each project's source or docs):

* vLLM: ``vllm/v1/metrics/loggers.py`` (V1) and the v0 ``vllm/engine/metrics.py``; also the real vLLM 0.32
  CPU server's /metrics (``/work/realvllm/metrics-after.txt``). ``vllm:time_per_output_token_seconds`` is the
  older name of the per-token gap histogram (now ``vllm:inter_token_latency_seconds``);
  ``vllm:request_time_per_output_token_seconds`` is per request; ``vllm:gpu_cache_usage_perc`` is the older
  ``vllm:kv_cache_usage_perc``.
* SGLang: ``python/sglang/srt/metrics/collector.py`` and ``docs/references/production_metrics.md``
  (``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:token_usage``, ``sglang:queue_time_seconds``,
  ``sglang:cached_tokens_total``, ``sglang:num_requests_total``; ``sglang:time_per_output_token_seconds`` is the
  older per-token gap histogram, now ``sglang:inter_token_latency_seconds``).
* TensorRT-LLM: ``tensorrt_llm/metrics/collector.py`` (prefix ``trtllm_``; Dynamo re-exports them as
  ``trtllm:``). trtllm-serve serves them on ``/prometheus/metrics``: its ``/metrics`` is JSON iteration stats.
* Dynamo frontend: the Dynamo metrics catalog (docs.nvidia.com/dynamo, "Metrics Catalog") and
  ``lib/runtime/src/metrics/prometheus_names.rs`` (``dynamo_frontend_*``; ``dynamo_component_kvstats_*`` for
  the workers).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from prometheus_client.parser import text_string_to_metric_families

from scoville.latency import request_tpot
from scoville.results.server_store import SERVER_SCHEMA

Kind = Literal["counter", "histogram", "gauge"]


@dataclass(frozen=True)
class Canonical:
    """One engine quantity under all the names servers give it (the first name present in a window wins)."""

    key: str
    kind: Kind
    names: tuple[str, ...]
    combine: Literal["sum", "mean"] = "sum"   # across label sets of a gauge: counts add up, ratios do not


CANONICAL: tuple[Canonical, ...] = (
    Canonical("ttft", "histogram", ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds",
                                    "trtllm_time_to_first_token_seconds", "trtllm:time_to_first_token_seconds",
                                    "dynamo_frontend_time_to_first_token_seconds")),
    Canonical("itl", "histogram", ("vllm:inter_token_latency_seconds", "sglang:inter_token_latency_seconds",
                                   "dynamo_frontend_inter_token_latency_seconds",
                                   "vllm:time_per_output_token_seconds", "sglang:time_per_output_token_seconds")),
    Canonical("tpot", "histogram", ("vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds",
                                    "sglang:time_per_output_token_seconds", "trtllm_time_per_output_token_seconds",
                                    "trtllm:time_per_output_token_seconds")),
    Canonical("e2e", "histogram", ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds",
                                   "trtllm_e2e_request_latency_seconds", "trtllm:e2e_request_latency_seconds",
                                   "dynamo_frontend_request_duration_seconds")),
    Canonical("queue", "histogram", ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds",
                                     "trtllm_request_queue_time_seconds", "trtllm:request_queue_time_seconds")),
    Canonical("prefill", "histogram", ("vllm:request_prefill_time_seconds",)),
    Canonical("requests", "counter", ("vllm:request_success", "sglang:num_requests", "trtllm_request_success",
                                      "trtllm:request_success", "dynamo_frontend_requests")),
    Canonical("running", "gauge", ("vllm:num_requests_running", "sglang:num_running_reqs",
                                   "trtllm_num_requests_running", "trtllm:num_requests_running",
                                   "dynamo_frontend_inflight_requests")),
    Canonical("waiting", "gauge", ("vllm:num_requests_waiting", "sglang:num_queue_reqs",
                                   "trtllm_num_requests_waiting", "trtllm:num_requests_waiting",
                                   "dynamo_frontend_queued_requests")),
    Canonical("kv_usage", "gauge", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                                    "trtllm_kv_cache_utilization", "trtllm:kv_cache_utilization",
                                    "dynamo_component_kvstats_gpu_cache_usage_percent"), combine="mean"),
    Canonical("prefix_queries", "counter", ("vllm:prefix_cache_queries", "sglang:prompt_tokens")),
    Canonical("prefix_hits", "counter", ("vllm:prefix_cache_hits", "sglang:cached_tokens")),
    Canonical("preemptions", "counter", ("vllm:num_preemptions",)),
    Canonical("prompt_tokens", "counter", ("vllm:prompt_tokens", "sglang:prompt_tokens", "trtllm_prompt_tokens",
                                           "trtllm:prompt_tokens")),
    Canonical("generation_tokens", "counter", ("vllm:generation_tokens", "sglang:generation_tokens",
                                               "trtllm_generation_tokens", "trtllm:generation_tokens",
                                               "dynamo_frontend_output_tokens")),
)


def _sample_names(c: Canonical, name: str) -> tuple[str, ...]:
    """The sample names a family is exposed under (a counter with or without ``_total``)."""
    if c.kind == "histogram":
        return (name + "_sum", name + "_count")
    if c.kind == "counter":
        return (name + "_total", name)
    return (name,)


# Every sample name kept; everything else (buckets, ``_created``, Python GC figures) is dropped before parsing.
KNOWN_SAMPLES: frozenset[str] = frozenset(s for c in CANONICAL for n in c.names for s in _sample_names(c, n))
MODEL_LABELS = ("model_name", "model")


class NotPrometheus(ValueError):
    """The text is not Prometheus exposition text (an HTML page, JSON stats)."""


@dataclass(frozen=True)
class Sample:
    """One exposed sample: its sample name (``..._sum``, ``..._total``), labels as sorted JSON, and value."""

    metric: str
    labels: str
    value: float


class SampleParser:
    """Parses the /metrics answers of one server, with prometheus_client's own text parser.

    Lines of other families are dropped first: a vLLM /metrics page is ~650 lines, mostly histogram buckets
    that the window means do not need. Each kept series (name and labels, exactly as written) goes through
    the real parser the first time it is seen; after that only its value changes, so later scrapes read
    the value alone. That keeps a scrape well under a millisecond of CPU (bench/bench_server_scrape.py).
    """

    def __init__(self) -> None:
        self._series: dict[str, tuple[str, str]] = {}   # series text -> (sample name, labels JSON)

    def _learn(self, line: str, key: str) -> tuple[str, str] | None:
        try:
            families = list(text_string_to_metric_families(line + "\n"))
        except ValueError as e:
            raise NotPrometheus(str(e)[:120]) from None
        samples = [s for f in families for s in f.samples if s.name in KNOWN_SAMPLES]
        if len(samples) != 1:
            return None
        self._series[key] = (samples[0].name, json.dumps(samples[0].labels, sort_keys=True))
        return self._series[key]

    def parse(self, text: str) -> list[Sample]:
        """The known engine samples of one answer (non-finite values left out). Raises NotPrometheus when
        the text is not the exposition format (JSON, HTML) or a kept line does not parse."""
        if text.lstrip()[:1] in ("{", "[", "<"):
            raise NotPrometheus("JSON or HTML, not Prometheus text")
        out: list[Sample] = []
        for line in text.splitlines():
            brace = line.find("{")
            name = line[:brace] if brace >= 0 else (line.split(None, 1) or [""])[0]
            if name not in KNOWN_SAMPLES:
                continue
            end = line.rfind("}") + 1 if brace >= 0 else len(name)   # values and timestamps hold no "}"
            key = line[:end]
            series = self._series.get(key) or self._learn(line, key)
            if series is None:
                continue
            try:
                value = float(line[end:].split(None, 1)[0])
            except (ValueError, IndexError):
                raise NotPrometheus(f"no number in {line[:80]!r}") from None
            if math.isfinite(value):
                out.append(Sample(series[0], series[1], value))
        return out


def parse_samples(text: str) -> list[Sample]:
    """The known engine samples of one /metrics answer (``SampleParser`` without its memory)."""
    return SampleParser().parse(text)


# --- window arithmetic ---------------------------------------------------------------------------------------

Scrape = dict[tuple[str, str], float]   # (sample name, labels JSON) -> value, at one scrape


def scrapes_of(table: pa.Table) -> list[Scrape]:
    """A point's stored samples grouped by scrape, in time order."""
    if table.num_rows == 0:
        return []
    t = table.column("t").to_numpy()
    metric = table.column("metric").to_pylist()
    labels = table.column("labels").to_pylist()
    value = table.column("value").to_numpy()
    by_t: dict[float, Scrape] = defaultdict(dict)
    for ti, m, lab, v in zip(t.tolist(), metric, labels, value.tolist(), strict=True):
        by_t[ti][(m, lab)] = v
    return [by_t[k] for k in sorted(by_t)]


def _model_filter(scrapes: list[Scrape], names: set[str], model: str | None) -> set[str]:
    """Label sets of ``names`` to keep: those naming ``model`` when any does, else all (one model served)."""
    all_labels = {lab for s in scrapes for (m, lab) in s if m in names}
    if not model:
        return all_labels
    mine = {lab for lab in all_labels if any(json.loads(lab).get(k) == model for k in MODEL_LABELS)}
    return mine or all_labels


def counter_delta(values: list[float | None]) -> float:
    """Increase of one counter series over consecutive scrapes (None: absent from that scrape).

    A drop means the server restarted and the counter began again from zero, so the post-reset value is
    the increase since the restart. A series absent at the first scrape and present later was created
    during the window (Prometheus clients create a labelled series at its first event), so it counts from 0.
    """
    total, prev = 0.0, 0.0 if values and values[0] is None else None
    for v in values:
        if v is None:
            continue
        if prev is not None:
            total += v - prev if v >= prev else v
        prev = v
    return total


def _series_delta(scrapes: list[Scrape], name: str, keep: set[str]) -> float | None:
    """Summed increase of every kept series of one sample name; None when no scrape has it."""
    labels = sorted({lab for s in scrapes for (m, lab) in s if m == name and lab in keep})
    if not labels:
        return None
    return sum(counter_delta([s.get((name, lab)) for s in scrapes]) for lab in labels)


def _present(scrapes: list[Scrape], c: Canonical) -> str | None:
    for name in c.names:
        samples = set(_sample_names(c, name))
        if any(m in samples for s in scrapes for (m, _) in s):
            return name
    return None


@dataclass(frozen=True)
class WindowFigures:
    """What the server's metrics say about one window (a load point, start scrape to end scrape)."""

    scrapes: int
    names: dict[str, str]                          # canonical key -> the family name found
    counts: dict[str, float]                       # histogram key -> observations in the window
    means: dict[str, float | None]                 # histogram key -> mean observation in the window
    deltas: dict[str, float]                       # counter key -> increase in the window
    gauge_mean: dict[str, float]
    gauge_max: dict[str, float]


def window_figures(scrapes: list[Scrape], model: str | None = None) -> WindowFigures:
    """Deltas (histograms, counters) from the first scrape to the last, and mean/max (gauges) over the scrapes
    between them (none when the window was shorter than the scrape interval); absent metrics are left out."""
    names: dict[str, str] = {}
    counts: dict[str, float] = {}
    means: dict[str, float | None] = {}
    deltas: dict[str, float] = {}
    g_mean: dict[str, float] = {}
    g_max: dict[str, float] = {}
    if len(scrapes) < 2:
        return WindowFigures(len(scrapes), names, counts, means, deltas, g_mean, g_max)
    for c in CANONICAL:
        name = _present(scrapes, c)
        if name is None:
            continue
        keep = _model_filter(scrapes, set(_sample_names(c, name)), model)
        if c.kind == "histogram":
            total, n = _series_delta(scrapes, name + "_sum", keep), _series_delta(scrapes, name + "_count", keep)
            if total is None or n is None:
                continue
            counts[c.key], means[c.key] = n, (total / n if n > 0 else None)
        elif c.kind == "counter":
            found = [d for d in (_series_delta(scrapes, s, keep) for s in _sample_names(c, name)) if d is not None]
            if not found:
                continue
            deltas[c.key] = found[0]
        else:  # the start and end scrapes see the server idle between points: read gauges inside the window
            per_scrape = [[v for (m, lab), v in s.items() if m == name and lab in keep] for s in scrapes[1:-1]]
            values = [(sum(vs) if c.combine == "sum" else sum(vs) / len(vs)) for vs in per_scrape if vs]
            if not values:
                continue
            g_mean[c.key], g_max[c.key] = float(np.mean(values)), float(np.max(values))
        names[c.key] = name
    return WindowFigures(len(scrapes), names, counts, means, deltas, g_mean, g_max)


def server_requests(fig: WindowFigures) -> int | None:
    """Requests the server finished in the window: its E2E histogram's count, else its finished-request
    counter (both count every finished request, whatever its finish reason)."""
    n = fig.counts.get("e2e", fig.deltas.get("requests"))
    return None if n is None else round(n)


# --- per-point columns -----------------------------------------------------------------------------------------

# Client minus server mean TTFT above this is flagged: max(25 ms, 10% of the server's TTFT). 25 ms is far above
# loopback HTTP plus request parsing (a few ms), and 10% keeps long prefills from being flagged for jitter.
TTFT_GAP_FLOOR_S = 0.025
TTFT_GAP_SHARE = 0.10


def ttft_gap_threshold(server_ttft_s: float) -> float:
    return max(TTFT_GAP_FLOOR_S, TTFT_GAP_SHARE * server_ttft_s)


def client_window_means(records: pa.Table) -> tuple[int, float | None, float | None]:
    """The ok records of a point, warm-up included (the set the server's window covers): count, mean TTFT,
    mean per-request TPOT (requests of more than one output token)."""
    ok = records.filter(records.column("ok"))
    if ok.num_rows == 0:
        return 0, None, None

    def col(name: str) -> np.ndarray:
        return ok.column(name).to_numpy(zero_copy_only=False).astype(float)

    t_sent, t_first, t_done, out = col("t_sent"), col("t_first_token"), col("t_done"), col("output_tokens")
    ttft = t_first - t_sent
    ttft = ttft[np.isfinite(ttft)]
    tpot = request_tpot(t_first, t_done, out)
    tpot = tpot[np.isfinite(tpot)]
    return (ok.num_rows, float(ttft.mean()) if ttft.size else None, float(tpot.mean()) if tpot.size else None)


def _engine(names: dict[str, str]) -> str | None:
    name = names.get("e2e") or names.get("ttft") or next(iter(names.values()), None)
    if name is None:
        return None
    return name.split(":", 1)[0] if ":" in name else name.split("_", 1)[0]


def point_server_columns(samples: pa.Table, point: int, records: pa.Table, model: str | None) -> dict[str, Any]:
    """The server-side columns of one point's metrics row; {} when the run has no server samples for it."""
    if samples.num_rows == 0:
        return {}
    mine = samples.filter(pc.equal(samples.column("point"), point))
    scrapes = scrapes_of(mine)
    if len(scrapes) < 2:
        return {}
    fig = window_figures(scrapes, model)
    t = mine.column("t").to_numpy()
    row: dict[str, Any] = {
        "server_engine": _engine(fig.names), "server_scrapes": fig.scrapes,
        "server_window_s": float(t.max() - t.min()), "server_requests": server_requests(fig),
    }
    for key in ("ttft", "itl", "tpot", "e2e", "queue", "prefill"):
        row[f"server_{key}_s_mean"] = fig.means.get(key)
    for key in ("running", "waiting"):
        row[f"server_{key}_mean"] = fig.gauge_mean.get(key)
    row["server_kv_usage_mean"] = fig.gauge_mean.get("kv_usage")
    row["server_kv_usage_max"] = fig.gauge_max.get("kv_usage")
    queries, hits = fig.deltas.get("prefix_queries"), fig.deltas.get("prefix_hits")
    row["server_prefix_hit_rate"] = hits / queries if queries and hits is not None else None
    for key in ("preemptions", "prompt_tokens", "generation_tokens"):
        row[f"server_{key}"] = fig.deltas.get(key)
    n, c_ttft, c_tpot = client_window_means(records)
    row.update(client_all_requests=n, client_all_ttft_s_mean=c_ttft, client_all_tpot_s_mean=c_tpot)
    s_ttft, s_tpot = row["server_ttft_s_mean"], row["server_tpot_s_mean"]
    gap = c_ttft - s_ttft if c_ttft is not None and s_ttft is not None else None
    row["client_minus_server_ttft_s"] = gap
    row["ttft_gap_large"] = gap > ttft_gap_threshold(s_ttft) if gap is not None else None
    row["client_server_tpot_ratio"] = c_tpot / s_tpot if c_tpot is not None and s_tpot else None
    return row


def samples_table(rows: Iterable[tuple[float, int, Sample]]) -> pa.Table:
    """Stored long form (``SERVER_SCHEMA``) of (t, point, sample) triples."""
    t, point, metric, labels, value = [], [], [], [], []
    for ti, p, s in rows:
        t.append(ti)
        point.append(p)
        metric.append(s.metric)
        labels.append(s.labels)
        value.append(s.value)
    return pa.table({"t": t, "point": point, "metric": metric, "labels": labels, "value": value},
                    schema=SERVER_SCHEMA)
