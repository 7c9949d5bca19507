"""Old run directories still open: a run written by schema 1 (the first release) and one by schema 2, each built
here the way those versions wrote it, read through ``open_run``, ``scoville ls`` / ``show`` and the report.

What each version wrote (``git log -p src/scoville/results/schema.py src/scoville/results/manifest.py``):
schema 1 stored the 18 request columns of the first ``ARROW_SCHEMA`` and a manifest without ``point_results``,
``clock``, ``server_metrics`` or ``executor``; schema 2 added ``attempt`` and ``error_kind`` to the records and the
per-point outcomes (then without the host-load shares) to the manifest. Schema 3 added the reasoning and
tokenizer columns. Nothing here is written by the current writer, so a change that stops an old run opening fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

import scoville
from scoville.cli import runs_cmd
from scoville.results.schema import ARROW_SCHEMA, RECORD_SCHEMA, SCHEMA_VERSION

# The request columns of schema 1, as its hand-written ARROW_SCHEMA listed them.
V1_COLUMNS = pa.schema([
    ("point", pa.int32()), ("request_id", pa.string()), ("session_id", pa.string()), ("turn", pa.int32()),
    ("t_sent", pa.float64()), ("t_first_token", pa.float64()), ("t_done", pa.float64()),
    ("token_times", pa.list_(pa.float64())), ("token_counts", pa.list_(pa.int32())),
    ("input_tokens", pa.int64()), ("output_tokens", pa.int64()), ("cached_tokens", pa.int64()),
    ("ok", pa.bool_()), ("error", pa.string()), ("http_status", pa.int32()), ("warmup", pa.bool_()),
    ("worker", pa.string()), ("token_count_source", pa.string()),
])
V2_COLUMNS = pa.schema([*V1_COLUMNS, ("attempt", pa.int32()), ("error_kind", pa.string())])
V3_COLUMNS = pa.schema([*V2_COLUMNS, ("input_tokens_requested", pa.int64()), ("output_tokens_requested", pa.int64()),
                        ("t_first_content", pa.float64()), ("reasoning_tokens", pa.int64()),
                        ("input_tokens_local", pa.int64()), ("output_tokens_local", pa.int64())])


def test_the_request_columns_derived_from_the_record_type_are_the_ones_on_disk():
    """RECORD_SCHEMA is computed from RequestRecord: a field added, retyped or moved changes the Parquet files
    every reader (and DuckDB's union of old and new runs) sees, so it must be a deliberate schema version."""
    assert RECORD_SCHEMA == V3_COLUMNS and SCHEMA_VERSION == 3
    assert ARROW_SCHEMA == V1_COLUMNS


def _requests(point: int, schema: pa.Schema, tpot: float) -> pa.Table:
    """Eight successful requests of 16 tokens each, one streamed chunk per token."""
    rows = []
    for i in range(8):
        t0 = point * 10.0 + i
        times = [t0 + 0.05 + k * tpot for k in range(16)]
        rows.append({"point": point, "request_id": f"{point}-{i}", "session_id": None, "turn": 0, "t_sent": t0,
                     "t_first_token": times[0], "t_done": times[-1], "token_times": times, "token_counts": [1] * 16,
                     "input_tokens": 128, "output_tokens": 16, "cached_tokens": None, "ok": True, "error": None,
                     "http_status": 200, "warmup": False, "worker": None, "token_count_source": "server",
                     "attempt": 0, "error_kind": None})
    return pa.Table.from_pylist([{k: r[k] for k in schema.names} for r in rows], schema=schema)


def _old_run(root: Path, run_id: str, version: int) -> Path:
    run = root / run_id
    (run / "requests").mkdir(parents=True)
    columns = V1_COLUMNS if version == 1 else V2_COLUMNS
    for point, tpot in ((0, 0.01), (1, 0.02)):
        pq.write_table(_requests(point, columns, tpot), run / "requests" / f"point-{point:04d}.parquet")
    # points.parquet as schema 1 wrote it: the metrics of its day, no validity or interval columns
    pq.write_table(pa.Table.from_pylist([
        {"point": p, "label": f"c={c}", "concurrency": c, "rate": None, "compat": "inferencex", "num_requests": 8,
         "num_ok": 8, "num_errors": 0, "accelerators": 1, "power_source": "rated", "power_boundary": "chip",
         "ttft_s_median": 0.05, "tpot_s_median": tpot, "interactivity": 1 / tpot, "request_throughput": 1.0,
         "output_throughput": 16.0 * c, "total_throughput": 144.0 * c, "total_throughput_per_accelerator": 144.0 * c,
         "power_w": 700.0, "total_throughput_per_kw": 144.0 * c / 0.7}
        for p, c, tpot in ((0, 1, 0.01), (1, 2, 0.02))]), run / "points.parquet")
    manifest = {
        "scoville_version": "0.1.0", "source": "measured",
        "target": {"base_url": "http://127.0.0.1:8000", "model": "old-model", "api": "completions",
                   "ignore_eos": True, "timeout_s": 600.0, "vocab_size": 32000, "endpoint":
                   "http://127.0.0.1:8000/v1/completions", "models_served": ["old-model"]},
        "system": {"hardware": "h200", "accelerators": 1, "rated_watts_per_accelerator": 700.0,
                   "power_boundary": "chip", "cost_per_accelerator_hour": None},
        "model": {"name": "old-model"}, "serving": {},
        "workload": {"isl": 128, "osl": 16, "range_ratio": 0.8, "seed": 0, "name": "128/16"},  # no "kind" yet
        "load_plan": {"points": [{"index": 0, "concurrency": 1, "rate": None, "num_requests": 8,
                                  "warmup_requests": 0, "label": "c=1"},
                                 {"index": 1, "concurrency": 2, "rate": None, "num_requests": 8,
                                  "warmup_requests": 0, "label": "c=2"}],
                      "seed": 0, "mode": "concurrency", "workers": 1},
        "power": {"source": "rated", "boundary": "chip", "watts_per_accelerator": 700.0},
        "compat": "inferencex", "slo": {},
        "environment": {"host": "old-host", "platform": "Linux", "python": "3.11.7", "packages": {}},
        "command": ["scoville", "sweep"], "run_id": run_id, "schema_version": version,
        "created_at": "2026-01-01T00:00:00+00:00", "status": "complete",
        "finished_at": "2026-01-01T00:01:00+00:00", "files": {},
        "a_key_no_version_knows": {"kept": "out of the typed manifest, harmlessly"},
    }
    if version == 2:  # per-point outcomes, before the host-load shares were recorded
        manifest["point_results"] = {str(p): {"point": p, "attempt": 0, "t_start": 10.0 * p, "requests": 8, "ok": 8,
                                              "failed": 0, "errors": {}, "top_error": None, "cached_tokens": 0,
                                              "input_tokens": 1024, "unexpected_cache_hits": False}
                                     for p in (0, 1)}
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return run


@pytest.fixture(scope="module")
def old_runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    _old_run(root, "20260101T000000Z-v1aaaa", 1)
    _old_run(root, "20260101T000000Z-v2bbbb", 2)
    return root


@pytest.mark.parametrize(("run_id", "version"), [("20260101T000000Z-v1aaaa", 1), ("20260101T000000Z-v2bbbb", 2)])
def test_an_old_run_opens_typed_with_its_records_in_the_current_schema(old_runs, run_id, version):
    assert version < SCHEMA_VERSION
    run = scoville.open_run(old_runs / run_id)
    m = run.manifest
    assert m.schema_version == version and m.source == "measured" and run.source == "measured"
    assert m.system.hardware == "h200" and m.model.name == "old-model" and m.model.precision is None
    assert [p.label for p in m.load_plan.points] == ["c=1", "c=2"] and m.load_plan.points[1].burstiness == 1.0
    assert m.workload_name == "128/16" and m.power.watts_per_accelerator == 700.0
    assert m.clock is None and m.server_metrics is None and m.executor is None
    outcome = m.point_outcome(1)
    assert (outcome is None) if version == 1 else (outcome.ok == 8 and outcome.client_cpu_share is None)
    requests = run.requests()
    assert requests.schema == RECORD_SCHEMA and requests.num_rows == 16
    assert set(requests.column("attempt").to_pylist()) == {0}                 # filled in for schema 1
    assert requests.column("reasoning_tokens").null_count == 16               # added by schema 3
    assert [round(p.interactivity) for p in run.points] == [100, 50]          # points.parquet of schema 1, typed
    assert run.points[0].valid is None and run.points[0].invalid_reasons is None  # columns it predates


def test_ls_and_show_list_old_runs_beside_each_other(old_runs):
    app = typer.Typer()
    runs_cmd.register(app)
    listed = CliRunner().invoke(app, ["ls", "--runs", str(old_runs), "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {r["run_id"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == {"20260101T000000Z-v1aaaa", "20260101T000000Z-v2bbbb"}
    assert {r["system"] for r in rows.values()} == {"h200 x1"} and {r["workload"] for r in rows.values()} == {"128/16"}
    for run_id in rows:
        shown = CliRunner().invoke(app, ["show", run_id, "--runs", str(old_runs), "--json"])
        assert shown.exit_code == 0, shown.output
        out = json.loads(shown.stdout)
        assert out["manifest"]["run_id"] == run_id and len(out["points"]) == 2
        text = CliRunner().invoke(app, ["show", run_id, "--runs", str(old_runs)])
        assert text.exit_code == 0 and "old-model (checkpoint precision)" in " ".join(text.output.split())


def test_the_report_compares_an_old_run_with_a_new_one(old_runs, tmp_path):
    new = scoville.simulate("h200", "llama-3.1-8b", isl=128, osl=16, concurrency="1,2", runs=tmp_path / "runs")
    out = scoville.report(old_runs / "20260101T000000Z-v1aaaa", new, out=tmp_path / "report.html")
    html = out.read_text()
    assert "20260101T000000Z-v1aaaa" in html and new.id in html and "old-model" in html


def test_every_field_the_writers_record_has_a_typed_home():
    """Keys the Manifest does not know are dropped when a run is read, and a resume writes the manifest back:
    a client option, load-point field or outcome added without its manifest field would vanish on resume."""
    from scoville.client.config import ClientConfig
    from scoville.load import LoadPoint
    from scoville.results.manifest import PlannedPoint, Target

    target = ClientConfig(base_url="http://127.0.0.1:1", model="m", api_key="k").to_manifest()
    assert set(target) <= set(Target.__struct_fields__)
    assert set(LoadPoint.__struct_fields__) <= set(PlannedPoint.__struct_fields__)
