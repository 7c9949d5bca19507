"""Prometheus text exposition for ``/metrics``, under the metric names vLLM uses.

Dashboards and autoscalers built against vLLM read ``vllm:num_requests_running``,
``vllm:kv_cache_usage_perc`` and friends; naming them the same lets those tools
point at the emulator unchanged. Written by hand (the format is a few lines of
text) so the hot path adds no dependency and no locking: everything runs on the
server's one event loop.
"""

from __future__ import annotations

import bisect

from scoville.emulator.collector import SlackCollector
from scoville.sim.engine_api import EngineStats

# vLLM's bucket boundaries for the latency histograms.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
               480.0, 960.0, 1920.0, 7680.0)
# Emulator-only: how late each token left the server relative to the engine's schedule.
LAG_BUCKETS = (0.00005, 0.0001, 0.0002, 0.0003, 0.0004, 0.0005, 0.0006, 0.0007, 0.0008, 0.0009, 0.001, 0.0015,
               0.002, 0.003, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


def _label_value(value: str) -> str:
    """A label value as the exposition format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Histogram:
    """Cumulative-bucket histogram in the Prometheus sense."""

    __slots__ = ("name", "help", "bounds", "counts", "total", "count")

    def __init__(self, name: str, help: str, bounds: tuple[float, ...]) -> None:
        self.name, self.help, self.bounds = name, help, bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float, n: int = 1) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += n
        self.total += value * n
        self.count += n

    def render(self, labels: str) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        cum = 0
        for bound, c in zip(self.bounds, self.counts, strict=False):
            cum += c
            out.append(f'{self.name}_bucket{{{labels},le="{bound}"}} {cum}')
        out.append(f'{self.name}_bucket{{{labels},le="+Inf"}} {self.count}')
        out.append(f"{self.name}_sum{{{labels}}} {self.total}")
        out.append(f"{self.name}_count{{{labels}}} {self.count}")
        return out


class ServerMetrics:
    """Counters and histograms the HTTP layer observes; gauges come from the engine."""

    def __init__(self, model_name: str) -> None:
        self.labels = f'engine="0",model_name="{_label_value(model_name)}"'
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Time to first token in seconds.", TTFT_BUCKETS)
        self.tpot = Histogram("vllm:time_per_output_token_seconds", "Time per output token in seconds.",
                              TPOT_BUCKETS)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Inter-token latency in seconds.", TPOT_BUCKETS)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency in seconds.",
                             E2E_BUCKETS)
        self.lag = Histogram("scoville_emulator_token_release_lag_seconds",
                             "Send time of each token minus the time the engine scheduled it.", LAG_BUCKETS)
        self.advance = Histogram("scoville_emulator_engine_advance_seconds",
                                 "Wall time of each engine advance call.", LAG_BUCKETS)
        self.finished: dict[str, int] = {"stop": 0, "length": 0, "abort": 0, "error": 0}
        self.rejected: dict[int, int] = {}

    def render(self, stats: EngineStats, gc: SlackCollector | None = None) -> str:
        """The exposition text; ``gc``: the pacing loop's collector, whose pauses explain lag outliers."""
        lab = self.labels

        def scalar(name: str, kind: str, help: str, value: float) -> list[str]:
            return [f"# HELP {name} {help}", f"# TYPE {name} {kind}", f"{name}{{{lab}}} {value}"]

        lines: list[str] = []
        lines += scalar("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
                        stats.running)
        lines += scalar("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
                        stats.waiting)
        lines += scalar("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                        stats.kv_usage)
        lines += scalar("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.",
                        stats.kv_usage)
        lines += scalar("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
                        stats.prompt_tokens_total)
        lines += scalar("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
                        stats.generation_tokens_total)
        lines += scalar("vllm:prefix_cache_queries_total", "counter",
                        "Prefix-cache queries, in tokens.", stats.prefix_cache_queries)
        lines += scalar("vllm:prefix_cache_hits_total", "counter", "Prefix-cache hits, in tokens.",
                        stats.prefix_cache_hits)
        lines += scalar("vllm:num_preemptions_total", "counter", "Cumulative number of preemptions.",
                        stats.preemptions_total)
        lines += ["# HELP vllm:request_success_total Count of finished requests by finish reason.",
                  "# TYPE vllm:request_success_total counter"]
        lines += [f'vllm:request_success_total{{{lab},finished_reason="{k}"}} {v}' for k, v in self.finished.items()]
        lines += ["# HELP scoville_emulator_rejected_total Requests refused before scheduling, by HTTP status.",
                  "# TYPE scoville_emulator_rejected_total counter"]
        lines += [f'scoville_emulator_rejected_total{{{lab},status="{k}"}} {v}' for k, v in
                  sorted(self.rejected.items())]
        if gc is not None:
            for name, kind, help, values in (
                    ("scoville_emulator_gc_collections_total", "counter",
                     "Cyclic garbage collections run by the pacing loop, by generation.", gc.collections),
                    ("scoville_emulator_gc_seconds_total", "counter",
                     "Seconds the pacing loop spent in garbage collection, by generation.", gc.seconds)):
                lines += [f"# HELP {name} {help}", f"# TYPE {name} {kind}"]
                lines += [f'{name}{{{lab},generation="{g}"}} {v}' for g, v in enumerate(values)]
        for h in (self.ttft, self.tpot, self.itl, self.e2e, self.lag, self.advance):
            lines += h.render(lab)
        return "\n".join(lines) + "\n"
