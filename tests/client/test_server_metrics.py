"""Server-side truth: the server's Prometheus /metrics scraped around every point, stored, and reduced to
per-point columns beside the client's (docs/server-metrics.md)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import msgspec
import pyarrow.compute as pc
import pytest
import typer
from aiohttp import web
from client_support import Behaviour, FakeServer, Served, raw_socket_server
from typer.testing import CliRunner

from scoville.cli import runs_cmd
from scoville.client.config import ClientConfig
from scoville.client.scrape import Scraper
from scoville.client.sweep import Sweep, run_sweep, sweep_from_manifest
from scoville.load import concurrency_sweep
from scoville.power.sources import plan_power, system_info
from scoville.reporting.html import render
from scoville.results.schema import RequestRecord, records_to_table
from scoville.results.server_store import (
    SERVER_METRICS,
    read_server_metrics,
    write_server_point,
)
from scoville.results.store import read_manifest, read_point_metrics, read_requests
from scoville.server_metrics import (
    NotPrometheus,
    Sample,
    counter_delta,
    parse_samples,
    point_server_columns,
    samples_table,
    ttft_gap_threshold,
    window_figures,
)
from scoville.workload.synthetic import SyntheticWorkload

WL = SyntheticWorkload(isl=24, osl=6, range_ratio=1.0, seed=2, name="tiny")
M = '{"engine": "0", "model_name": "m"}'
M1 = '{"engine": "1", "model_name": "m"}'


# --- delta arithmetic on hand cases ------------------------------------------------------------------------------

@pytest.mark.parametrize("values, delta", [
    ([10.0, 15.0, 21.0], 11.0),
    ([10.0, 15.0, 3.0, 5.0], 5.0 + 3.0 + 2.0),       # the server restarted after 15: count from the new value
    ([None, 4.0, 6.0], 6.0),                          # the series was created inside the window: from 0
    ([5.0, None, 9.0], 4.0),                          # absent from one scrape: skipped
    ([7.0], 0.0),
    ([], 0.0),
])
def test_counter_delta(values, delta):
    assert counter_delta(values) == delta


def test_histograms_sum_label_sets_and_survive_a_restart():
    h = "vllm:time_to_first_token_seconds"
    scrapes = [
        {(f"{h}_sum", M): 10.0, (f"{h}_count", M): 100.0, (f"{h}_sum", M1): 1.0, (f"{h}_count", M1): 10.0},
        {(f"{h}_sum", M): 12.0, (f"{h}_count", M): 110.0, (f"{h}_sum", M1): 2.0, (f"{h}_count", M1): 20.0},
        # engine 0 restarted: its counters start again from zero
        {(f"{h}_sum", M): 0.5, (f"{h}_count", M): 5.0, (f"{h}_sum", M1): 3.0, (f"{h}_count", M1): 30.0},
    ]
    fig = window_figures(scrapes)
    assert fig.counts["ttft"] == (10 + 5) + (10 + 10)
    assert fig.means["ttft"] == pytest.approx(((2.0 + 0.5) + (1.0 + 1.0)) / 35)
    assert fig.names["ttft"] == h


def test_missing_series_are_none_never_a_crash():
    e2e = "vllm:e2e_request_latency_seconds"
    scrapes = [{(f"{e2e}_sum", M): 1.0, (f"{e2e}_count", M): 1.0}, {(f"{e2e}_sum", M): 3.0, (f"{e2e}_count", M): 3.0}]
    records = records_to_table([_record(0.0, 0.1, 1.0, 5)])
    row = point_server_columns(samples_table(_rows(scrapes, point=0)), 0, records, "m")
    assert row["server_requests"] == 2 and row["server_e2e_s_mean"] == pytest.approx(1.0)
    for key in ("server_ttft_s_mean", "server_tpot_s_mean", "server_queue_s_mean", "server_running_mean",
                "server_kv_usage_max", "server_prefix_hit_rate", "server_preemptions", "client_minus_server_ttft_s",
                "ttft_gap_large", "client_server_tpot_ratio"):
        assert row[key] is None, key
    assert window_figures([]).counts == {} and window_figures(scrapes[:1]).means == {}
    assert point_server_columns(samples_table([]), 0, records, "m") == {}


def test_vllm_prefill_time_is_read_beside_queue_time():
    """vLLM's request_prefill_time (scheduled to first token) and request_queue_time split its TTFT: calibrate
    takes the front end as client TTFT less both (docs/calibrate.md)."""
    q, p = "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds"
    scrapes = [{(f"{q}_sum", M): 0.0, (f"{q}_count", M): 0.0, (f"{p}_sum", M): 0.0, (f"{p}_count", M): 0.0},
               {(f"{q}_sum", M): 0.004, (f"{q}_count", M): 2.0, (f"{p}_sum", M): 0.106, (f"{p}_count", M): 2.0}]
    records = records_to_table([_record(0.0, 0.1, 1.0, 5)])
    row = point_server_columns(samples_table(_rows(scrapes, point=0)), 0, records, "m")
    assert row["server_queue_s_mean"] == pytest.approx(0.002) and row["server_prefill_s_mean"] == pytest.approx(0.053)


def test_a_histogram_without_observations_has_no_mean():
    h = "vllm:request_queue_time_seconds"
    fig = window_figures([{(f"{h}_sum", M): 2.0, (f"{h}_count", M): 4.0}] * 2)
    assert fig.counts["queue"] == 0 and fig.means["queue"] is None


def test_gauges_are_read_inside_the_window_counts_add_and_ratios_average():
    run, kv = "vllm:num_requests_running", "vllm:kv_cache_usage_perc"
    idle = {(run, M): 0.0, (run, M1): 0.0, (kv, M): 0.0, (kv, M1): 0.0}
    busy = [{(run, M): 3.0, (run, M1): 5.0, (kv, M): 0.2, (kv, M1): 0.4},
            {(run, M): 1.0, (run, M1): 1.0, (kv, M): 0.6, (kv, M1): 0.8}]
    fig = window_figures([idle, *busy, idle])
    assert fig.gauge_mean["running"] == pytest.approx(5.0) and fig.gauge_max["running"] == 8.0
    assert fig.gauge_mean["kv_usage"] == pytest.approx(0.5) and fig.gauge_max["kv_usage"] == pytest.approx(0.7)
    assert "running" not in window_figures([idle, idle]).gauge_mean   # no scrape inside the window


def test_older_names_and_the_requested_model_are_chosen():
    tpot, kv = "vllm:time_per_output_token_seconds", "vllm:gpu_cache_usage_perc"
    other = '{"model_name": "other"}'
    mine = '{"model_name": "m"}'

    def scrape(n: float, used: float) -> dict:
        return {(f"{tpot}_sum", mine): 0.01 * n, (f"{tpot}_count", mine): n, (kv, mine): used,
                (f"{tpot}_sum", other): 5.0 * n, (f"{tpot}_count", other): n, (kv, other): 0.9}

    fig = window_figures([scrape(0, 0.0), scrape(10, 0.3), scrape(20, 0.0)], model="m")
    assert fig.names == {"tpot": tpot, "itl": tpot, "kv_usage": kv}
    assert fig.means["tpot"] == pytest.approx(0.01) and fig.gauge_max["kv_usage"] == pytest.approx(0.3)


def test_sglang_trtllm_and_dynamo_names_map_to_the_same_columns():
    for ttft, reqs in (("sglang:time_to_first_token_seconds", "sglang:num_requests_total"),
                       ("trtllm_time_to_first_token_seconds", "trtllm_request_success_total"),
                       ("dynamo_frontend_time_to_first_token_seconds", "dynamo_frontend_requests_total")):
        scrapes = [{(f"{ttft}_sum", M): 1.0, (f"{ttft}_count", M): 2.0, (reqs, M): 2.0},
                   {(f"{ttft}_sum", M): 1.5, (f"{ttft}_count", M): 7.0, (reqs, M): 7.0}]
        fig = window_figures(scrapes)
        assert fig.means["ttft"] == pytest.approx(0.1) and fig.deltas["requests"] == 5.0, ttft


def _record(t_sent: float, ttft: float, t_done: float, out: int, *, warmup: bool = False) -> RequestRecord:
    return RequestRecord(request_id=f"r{t_sent}", point=0, t_sent=t_sent, t_first_token=t_sent + ttft,
                         t_done=t_done, input_tokens=10, output_tokens=out, ok=True, warmup=warmup)


def _rows(scrapes: list[dict], point: int) -> list[tuple[float, int, Sample]]:
    return [(float(i), point, Sample(m, lab, v)) for i, s in enumerate(scrapes) for (m, lab), v in s.items()]


def test_client_comparison_uses_every_ok_record_warmup_included_and_flags_a_large_gap():
    h, t = "vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds"
    scrapes = [{(f"{h}_sum", M): 0.0, (f"{h}_count", M): 0.0, (f"{t}_sum", M): 0.0, (f"{t}_count", M): 0.0},
               {(f"{h}_sum", M): 0.2, (f"{h}_count", M): 2.0, (f"{t}_sum", M): 0.02, (f"{t}_count", M): 2.0}]
    # client: TTFT 0.15 and 0.25 (mean 0.2, server 0.1); TPOT (1.1-0.15)/9 and (2.25-0.25)/9
    records = records_to_table([_record(0.0, 0.15, 1.1, 10, warmup=True), _record(1.0, 0.25, 3.25, 10)])
    row = point_server_columns(samples_table(_rows(scrapes, point=0)), 0, records, "m")
    assert row["client_all_requests"] == 2 and row["client_all_ttft_s_mean"] == pytest.approx(0.2)
    assert row["client_minus_server_ttft_s"] == pytest.approx(0.1) and row["ttft_gap_large"] is True
    assert row["client_server_tpot_ratio"] == pytest.approx(((0.95 + 2.0) / 18) / 0.01)
    assert ttft_gap_threshold(0.1) == 0.025 and ttft_gap_threshold(1.0) == pytest.approx(0.1)


# --- parsing -----------------------------------------------------------------------------------------------------

VLLM_TEXT = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 3.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 4.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 3.5
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 40.0
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 123.0
"""


def test_parse_keeps_the_engine_samples_and_drops_buckets_and_the_rest():
    samples = parse_samples(VLLM_TEXT)
    assert {s.metric for s in samples} == {"vllm:num_requests_running", "vllm:e2e_request_latency_seconds_count",
                                           "vllm:e2e_request_latency_seconds_sum", "vllm:prompt_tokens_total"}
    assert all(json.loads(s.labels) == {"engine": "0", "model_name": "m"} for s in samples)
    assert parse_samples("# HELP up x\nup 1\n") == [] and parse_samples("  \n\t\n") == []
    assert parse_samples('vllm:num_requests_running{model_name="m"} +Inf\n') == []   # not finite: left out


@pytest.mark.parametrize("body", ['{"iter": 1, "gpuMemUsage": 2}', "<html><body>Not Found</body></html>",
                                  'vllm:num_requests_running{model_name="m" 2.0'])
def test_what_is_not_prometheus_text_is_said_so(body):
    with pytest.raises(NotPrometheus):
        parse_samples(body)


# --- storage -----------------------------------------------------------------------------------------------------

def test_a_point_written_again_replaces_its_samples(tmp_path):
    assert read_server_metrics(tmp_path).num_rows == 0
    write_server_point(tmp_path, 0, samples_table([(0.0, 0, Sample("a", "{}", 1.0))]))
    write_server_point(tmp_path, 1, samples_table([(5.0, 1, Sample("a", "{}", 2.0))]))
    write_server_point(tmp_path, 0, samples_table([(9.0, 0, Sample("a", "{}", 3.0))]))
    table = read_server_metrics(tmp_path).sort_by("point")
    assert table.column("point").to_pylist() == [0, 1] and table.column("value").to_pylist() == [3.0, 2.0]


# --- a scripted server whose /metrics changes per scrape ---------------------------------------------------------

class MetricsServer(FakeServer):
    """A FakeServer with a vLLM-style /metrics rendered from what it has served so far (and another model's
    series that must not be counted)."""

    def __init__(self, metrics_path: str | None = "/metrics", json_metrics: bool = False) -> None:
        super().__init__()
        self.metrics_path, self.json_metrics = metrics_path, json_metrics
        self.finished = 0
        self.scrape_headers: list[dict] = []

    async def _stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        resp = await super()._stream(request, body)
        self.finished += 1   # after the last byte: the scraper's end scrape has to wait for it
        return resp

    async def _metrics(self, request: web.Request) -> web.Response:
        self.scrape_headers.append(dict(request.headers))
        n, lab = self.finished, 'model_name="test-model"'
        text = "\n".join([
            "# TYPE vllm:e2e_request_latency_seconds histogram",
            f"vllm:e2e_request_latency_seconds_count{{{lab}}} {n}",
            f"vllm:e2e_request_latency_seconds_sum{{{lab}}} {0.5 * n}",
            'vllm:e2e_request_latency_seconds_count{model_name="other"} 1000',
            'vllm:e2e_request_latency_seconds_sum{model_name="other"} 9000',
            "# TYPE vllm:time_to_first_token_seconds histogram",
            f"vllm:time_to_first_token_seconds_count{{{lab}}} {n}",
            f"vllm:time_to_first_token_seconds_sum{{{lab}}} {0.01 * n}",
            "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{lab}}} {self.in_flight}", ""])
        return web.Response(text=text, content_type="text/plain")

    async def _json(self, request: web.Request) -> web.Response:
        return web.json_response([{"iter": 1}])

    def app(self) -> web.Application:
        app = super().app()
        if self.json_metrics:
            app.router.add_get("/metrics", self._json)
        if self.metrics_path:
            app.router.add_get(self.metrics_path, self._metrics)
        return app


class Warnings:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def start_point(self, *a) -> None: ...
    def record(self, rec) -> None: ...
    def end_point(self, *a) -> None: ...

    def warn(self, message: str) -> None:
        self.lines.append(message)


def _sweep(url: str, points, *, interval: float = 0.05, api_key: str | None = None) -> Sweep:
    plan = plan_power("rated", hardware="h200", accelerators=1)
    return Sweep(cfg=ClientConfig(base_url=url, model="test-model", api_key=api_key), workload=WL, points=points,
                 power=plan, system=system_info("h200", 1, plan, None), workers=1, scrape_interval=interval)


@pytest.fixture
def metrics_server():
    s = Served(MetricsServer())
    yield s.server
    s.stop()


def test_a_sweep_scrapes_each_point_and_the_server_counts_what_the_client_sent(metrics_server, tmp_path):
    metrics_server.set(Behaviour(interval_s=0.02))          # 6 tokens: ~0.1 s a request, several scrapes a point
    observer = Warnings()
    result = run_sweep(_sweep(metrics_server.base_url, concurrency_sweep([1, 2], num_requests=4, warmup_requests=1),
                              api_key="sk-scrape"), tmp_path, observer=observer)
    run = result.run_dir
    assert observer.lines == []
    assert msgspec.to_builtins(read_manifest(run).server_metrics) == {"path": "/metrics", "interval_s": 0.05,
                                                                "status": "scraped"}
    assert SERVER_METRICS in read_manifest(run).files
    assert all(h.get("Authorization") == "Bearer sk-scrape" for h in metrics_server.scrape_headers)
    stored = read_server_metrics(run)
    requests = read_requests(run)
    rows = {r["point"]: r for r in read_point_metrics(run)}
    for point in (0, 1):
        mine = stored.filter(pc.equal(stored.column("point"), point))
        times = sorted(set(mine.column("t").to_pylist()))
        sent = requests.filter(pc.equal(requests.column("point"), point))
        t_sent = pc.min(sent.column("t_sent")).as_py()
        t_done = pc.max(sent.column("t_done")).as_py()
        assert times[0] <= t_sent and times[-1] >= t_done and len(times) >= 3   # start, inside, end
        row = rows[point]
        assert row["server_requests"] == row["client_all_requests"] == sent.num_rows == 5   # warm-up included
        assert row["server_ttft_s_mean"] == pytest.approx(0.01) and row["server_e2e_s_mean"] == pytest.approx(0.5)
        assert row["client_minus_server_ttft_s"] == pytest.approx(row["client_all_ttft_s_mean"] - 0.01)
    assert set(stored.column("metric").to_pylist()) >= {"vllm:e2e_request_latency_seconds_count",
                                                        "vllm:num_requests_running"}


def test_scrape_interval_survives_a_resume_manifest(metrics_server, tmp_path):
    result = run_sweep(_sweep(metrics_server.base_url, concurrency_sweep([1], num_requests=1), interval=0.5), tmp_path)
    assert sweep_from_manifest(read_manifest(result.run_dir)).scrape_interval == 0.5


class HtmlMetricsServer(FakeServer):
    """Answers /metrics 200 with a web page, as a proxy or another app on the port might."""

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(text="<html><body>hello</body></html>", content_type="text/html")

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_get("/metrics", self._page)
        return app


@pytest.mark.parametrize("kind, why", [("no-route", "/metrics: HTTP 404"), ("html", "/metrics: not Prometheus text")])
def test_a_server_without_metrics_is_one_warning_and_the_run_completes(tmp_path, kind, why):
    served = Served(FakeServer() if kind == "no-route" else HtmlMetricsServer())
    try:
        served.server.set(Behaviour(interval_s=0.001))
        observer = Warnings()
        result = run_sweep(_sweep(served.server.base_url, concurrency_sweep([1, 2], num_requests=3)), tmp_path,
                           observer=observer)
    finally:
        served.stop()
    assert result.status == "complete"
    assert len(observer.lines) == 1 and "no server-side metrics" in observer.lines[0] and why in observer.lines[0]
    assert read_manifest(result.run_dir).server_metrics.status.startswith("unavailable: " + why)
    assert not (result.run_dir / SERVER_METRICS).exists()
    assert all("server_requests" not in r for r in result.rows)


def test_a_refused_connection_is_one_warning():
    warned: list[str] = []
    scraper = Scraper(ClientConfig(base_url="http://127.0.0.1:9", model="m"), lambda: 0.0, 1.0, warned.append)
    assert scraper.probe() is False and not scraper.active
    assert len(warned) == 1 and "refused" in warned[0].lower()
    scraper.start(0)
    assert scraper.stop(Path("/nonexistent"), 3) is None   # off: start and stop do nothing


def test_json_metrics_fall_back_to_the_prometheus_route_as_trtllm_serve_has():
    s = Served(MetricsServer(metrics_path="/prometheus/metrics", json_metrics=True))
    try:
        warned: list[str] = []
        scraper = Scraper(ClientConfig(base_url=s.server.base_url, model="test-model"), lambda: 0.0, 1.0,
                          warned.append)
        assert scraper.probe() and scraper.path == "/prometheus/metrics" and warned == []
    finally:
        s.stop()


def test_scrape_interval_zero_turns_scraping_off(metrics_server, tmp_path):
    result = run_sweep(_sweep(metrics_server.base_url, concurrency_sweep([1], num_requests=2), interval=0), tmp_path)
    assert metrics_server.scrape_headers == [] and not (result.run_dir / SERVER_METRICS).exists()
    assert read_manifest(result.run_dir).server_metrics.status == "off"


# --- shown by `scoville show` and the report, only when scraped -------------------------------------------------

def test_show_and_report_have_a_server_side_table_only_when_the_run_scraped(metrics_server, tmp_path):
    scraped = run_sweep(_sweep(metrics_server.base_url, concurrency_sweep([1], num_requests=2)), tmp_path).run_dir
    plain = run_sweep(_sweep(metrics_server.base_url, concurrency_sweep([1], num_requests=2), interval=0),
                      tmp_path).run_dir
    app = typer.Typer()
    runs_cmd.register(app)
    for run, present in ((scraped, True), (plain, False)):
        out = CliRunner().invoke(app, ["show", run.name, "--runs", str(tmp_path)], env={"COLUMNS": "80"}).output
        assert ("server side, means" in out) is present and ("server side, load" in out) is present
        assert max(len(line) for line in out.splitlines()) <= 80
        assert ("<h3>Server-side</h3>" in render([[Path(run)]])) is present


# --- the built-in emulator (vLLM's names) ------------------------------------------------------------------------

def test_against_the_emulator_the_server_counts_every_request_of_every_point(emu, tmp_path):
    emulator = emu   # the session's emulator (tests/conftest.py): the counts are per point, whatever it served before
    plan = plan_power("rated", hardware="h200", accelerators=1)
    sweep = Sweep(cfg=ClientConfig(base_url=emulator.base_url, model=emulator.model), workload=WL,
                  points=concurrency_sweep([1, 4], num_requests=8, warmup_requests=2), power=plan,
                  system=system_info("h200", 1, plan, None), workers=1, scrape_interval=0.1)
    result = run_sweep(sweep, tmp_path)
    requests = read_requests(result.run_dir)
    assert len(result.rows) == 2
    for row in result.rows:
        ok = requests.filter(pc.and_(pc.equal(requests.column("point"), row["point"]), requests.column("ok")))
        assert row["server_engine"] == "vllm"
        assert row["server_requests"] == row["client_all_requests"] == ok.num_rows == 10
        # (no sign asserted on the TTFT gap: the client stamps kernel receive times, the server its own sends)
        assert row["client_minus_server_ttft_s"] is not None and row["ttft_gap_large"] is not None
        assert row["client_all_tpot_s_mean"] > 0 and row["server_tpot_s_mean"] > 0
        assert row["server_generation_tokens"] == pc.sum(ok.column("output_tokens")).as_py()


def test_a_kept_alive_connection_the_server_dropped_is_opened_again():
    """A server that closes every connection after answering, although it said keep-alive."""
    body = b'vllm:num_requests_running{model_name="m"} 3\n'
    answered = []

    def reply(request: bytes) -> bytes:
        answered.append(1)   # counted before the answer goes out, so the count never lags the client
        return (b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Type: text/plain\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    listener = raw_socket_server(reply)
    warned: list[str] = []
    scraper = Scraper(ClientConfig(base_url=f"http://127.0.0.1:{listener.getsockname()[1]}", model="m"),
                      lambda: float(len(answered)), 3600.0, warned.append)
    try:
        assert scraper.probe()
        for _ in range(3):
            scraper._scrape()
    finally:
        scraper.close()
        listener.close()
    assert warned == [] and len(answered) == 4
    assert [s.value for _, _, s in scraper._rows] == [3.0, 3.0, 3.0]


def test_the_end_scrape_waits_for_the_server_to_count_the_last_requests_and_keeps_one_scrape(tmp_path):
    """A server whose finished-request count catches up late: the wait ends when it does, and the scrapes
    taken while waiting are not kept (they would read the idle server's gauges as part of the point)."""
    late = Served(MetricsServer())
    try:
        scraper = Scraper(ClientConfig(base_url=late.server.base_url, model="test-model"), _clock(), 3600.0,
                          pytest.fail)
        assert scraper.probe()
        scraper.start(0)
        threading.Timer(0.3, lambda: setattr(late.server, "finished", 2)).start()
        table = scraper.stop(tmp_path, finished=2)
    finally:
        late.stop()
    times = sorted(set(table.column("t").to_pylist()))
    assert len(times) == 2   # the start scrape and one end scrape
    end = table.filter(pc.equal(table.column("t"), times[-1]))
    counts = [v for m, v in zip(end.column("metric").to_pylist(), end.column("value").to_pylist(), strict=True)
              if m == "vllm:e2e_request_latency_seconds_count"]
    assert 2.0 in counts
    assert read_server_metrics(tmp_path).num_rows == table.num_rows


def _clock():
    ticks = iter(range(10_000))
    return lambda: float(next(ticks))
