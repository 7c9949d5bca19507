"""Run directories: journal survives a torn write, parquet wins over journal, recompute reproduces."""

import json

import pytest

from scoville.metrics import recompute, run_metrics
from scoville.results.catalog import query
from scoville.results.manifest import base_manifest
from scoville.results.schema import RequestRecord
from scoville.results.store import RunWriter, read_manifest, read_requests


def manifest():
    return base_manifest(source="measured", target={"url": "http://127.0.0.1:1", "api_key": "sk-secret"},
                         system={"hardware": "test", "accelerators": 1}, model={"name": "m"},
                         serving={}, workload={"name": "w"},
                         load_plan={"points": [{"index": 0, "concurrency": 1}, {"index": 1, "concurrency": 2}]},
                         power={"source": "rated", "watts_per_accelerator": 700.0})


def rec(point, i, t):
    return RequestRecord(point=point, request_id=f"{point}-{i}", t_sent=t, t_first_token=t + 0.1,
                         t_done=t + 1.0, token_times=[t + 0.1, t + 1.0], token_counts=[1, 1],
                         input_tokens=10, output_tokens=2)


def test_secrets_never_reach_the_manifest(tmp_path):
    w = RunWriter.create(tmp_path, manifest())
    w.finish()
    text = (w.run_dir / "manifest.json").read_text()
    assert "sk-secret" not in text
    assert json.loads(text)["target"]["url"] == "http://127.0.0.1:1"


def test_journal_keeps_finished_records_after_torn_write(tmp_path):
    w = RunWriter.create(tmp_path, manifest())
    for i in range(3):
        w.record(rec(0, i, float(i)))
    # simulate kill -9 in the middle of writing a line
    with (w.run_dir / "requests.jsonl").open("ab") as f:
        f.write(b'{"point":0,"request_id":"torn"')
    table = read_requests(w.run_dir)
    assert table.num_rows == 3
    assert read_manifest(w.run_dir)["status"] == "running"


def test_point_parquet_replaces_journal_rows(tmp_path):
    w = RunWriter.create(tmp_path, manifest())
    w.record(rec(0, 0, 0.0))  # an earlier, interrupted attempt of point 0
    w.write_point(0, [rec(0, i, float(i)) for i in range(4)])
    w.record(rec(1, 0, 10.0))
    table = read_requests(w.run_dir)
    assert table.num_rows == 5
    assert sorted(set(table.column("point").to_pylist())) == [0, 1]


def test_recompute_reproduces_stored_metrics_and_catalog_sees_them(tmp_path):
    w = RunWriter.create(tmp_path, manifest())
    w.write_point(0, [rec(0, i, float(i)) for i in range(4)])
    w.write_point(1, [rec(1, i, 10.0 + i / 2) for i in range(4)])
    w.finish()
    first = recompute(w.run_dir)
    again = run_metrics(w.run_dir)
    assert first == again
    assert first[0]["total_throughput_per_kw"] == pytest.approx(first[0]["total_throughput"] / 0.7)
    cols, rows = query(tmp_path, "SELECT run_id, count(*) FROM points GROUP BY run_id")
    assert rows == [(w.run_dir.name, 2)]
    cols, rows = query(tmp_path, "SELECT count(*) FROM requests")
    assert rows == [(8,)]


@pytest.mark.parametrize("sql", ["SELECT nope FROM runs", "SELECT CAST('x' AS INTEGER)", "SELECT error('boom')"])
def test_sql_errors_are_user_errors_whenever_duckdb_raises_them(tmp_path, sql):
    # the last two fail only when rows are fetched, not when the statement is prepared
    from scoville.errors import UserError

    with pytest.raises(UserError, match="SQL error"):
        query(tmp_path, sql)


def test_a_corrupt_manifest_is_skipped_not_fatal_for_the_catalog(tmp_path):
    good = RunWriter.create(tmp_path, manifest())
    good.write_point(0, [rec(0, 0, 0.0)])
    good.finish()
    bad = tmp_path / "20260101T000000Z-bad000"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json")
    with pytest.warns(UserWarning, match="bad000"):
        cols, rows = query(tmp_path, "SELECT run_id FROM runs")
    assert rows == [(good.run_dir.name,)]
