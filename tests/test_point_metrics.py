"""points.parquet as a typed record: PointMetrics, the Arrow schema derived from it, old and foreign files."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import scoville
import scoville.metrics
import scoville.sim.analytic
from scoville.load import concurrency_sweep
from scoville.results.catalog import DamagedRunWarning, read_stored_points
from scoville.results.points import POINTS_SCHEMA, InvalidReason, PointMetrics
from scoville.results.store import POINT_METRICS, read_point_metrics, read_points, write_point_metrics
from scoville.sim.config import SimConfig
from scoville.sim.driver import simulate_run
from scoville.workload.synthetic import scenario

NULL_TYPES = (pa.null(), pa.list_(pa.null()))


def _legacy_table(rows: Sequence[Mapping[str, object]]) -> pa.Table:
    """points.parquet as the writer encoded it before PointMetrics: every key of every row, types guessed."""
    names = list(dict.fromkeys(k for r in rows for k in r))
    return pa.table({k: [r.get(k) for r in rows] for k in names})


def _capture(monkeypatch: pytest.MonkeyPatch, module: object) -> list[list[Mapping[str, object]]]:
    """The rows each call of ``module.write_point_metrics`` is given (the call still writes them)."""
    seen: list[list[Mapping[str, object]]] = []

    def recording(run_dir: Path, rows: Sequence[Mapping[str, object]]) -> None:
        seen.append(list(rows))
        write_point_metrics(run_dir, rows)

    monkeypatch.setattr(module, "write_point_metrics", recording)
    return seen


def _assert_same_file(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    """The stored file has the legacy encoding's columns in its order and its values; each column's type is
    POINTS_SCHEMA's, which is the legacy one wherever the legacy writer could see a value to type."""
    new = pq.read_table(path)
    legacy = pq.read_table(_write(path.parent / "legacy.parquet", _legacy_table(rows)))
    assert new.column_names == legacy.column_names
    assert new.to_pylist() == legacy.to_pylist()
    for old, now in zip(legacy.schema, new.schema, strict=True):
        assert now.type == POINTS_SCHEMA.field(now.name).type
        assert now.type == old.type or old.type in NULL_TYPES, now.name


def _write(path: Path, table: pa.Table) -> Path:
    pq.write_table(table, path)
    return path


def test_an_analytic_simulated_run_stores_the_columns_and_values_it_did_before(tmp_path, monkeypatch):
    seen = _capture(monkeypatch, scoville.sim.analytic)
    run = scoville.simulate("h200", "llama-3.1-8b", scenario="1k1k", concurrency="1-8", disaggregation=False,
                            runs=tmp_path)
    (rows,) = seen
    _assert_same_file(run.path / POINT_METRICS, rows)
    names = pq.read_table(run.path / POINT_METRICS).column_names
    assert "rate" in names and "ttft_s_p99" in names       # set to None by the writer: kept, as before
    assert "server_engine" not in names                     # never set: not a column of this run


def test_a_replayed_simulated_run_stores_the_columns_and_values_it_did_before(tmp_path, monkeypatch):
    seen = _capture(monkeypatch, scoville.metrics)
    cfg = SimConfig(hardware="h200", model="llama-3.1-8b")
    run = simulate_run(cfg, scenario("1k1k"), concurrency_sweep([1, 4], num_requests=12, warmup_requests=3),
                       tmp_path, seed=1)
    (rows,) = seen
    _assert_same_file(run / POINT_METRICS, rows)
    points = read_points(run)
    assert [p.concurrency for p in points] == [1, 4] and all(p.valid for p in points)
    assert points[0].invalid_reasons == [] and points[0].num_ok == 12


def test_the_arrow_schema_is_one_typed_column_per_field():
    assert POINTS_SCHEMA.names == list(PointMetrics.__struct_fields__)
    assert POINTS_SCHEMA.field("num_ok").type == pa.int64() and POINTS_SCHEMA.field("rate").type == pa.float64()
    assert POINTS_SCHEMA.field("invalid_reasons").type == pa.list_(
        pa.struct([("code", pa.string()), ("detail", pa.string())]))


def test_a_writer_cannot_store_an_undeclared_column_or_a_wrong_type(tmp_path):
    with pytest.raises(msgspec.ValidationError, match="no_such_metric"):
        write_point_metrics(tmp_path, [{"point": 0, "no_such_metric": 1.0}])
    with pytest.raises(msgspec.ValidationError, match="num_ok"):
        write_point_metrics(tmp_path, [{"point": 0, "num_ok": "twelve"}])
    assert not (tmp_path / POINT_METRICS).exists()


def test_rows_round_trip_typed_with_nested_reasons(tmp_path):
    reasons = [{"code": "errors", "detail": "3 of 10 requests failed"}]
    write_point_metrics(tmp_path, [{"point": 0, "num_ok": 7, "valid": False, "invalid_reasons": reasons},
                                   {"point": 1, "num_ok": 10, "valid": True, "invalid_reasons": []}])
    first, second = read_points(tmp_path)
    assert first == PointMetrics(point=0, num_ok=7, valid=False,
                                 invalid_reasons=[InvalidReason(code="errors", detail="3 of 10 requests failed")])
    assert second.invalid_reasons == [] and second.interactivity is None
    assert read_point_metrics(tmp_path)[0]["invalid_reasons"] == reasons    # the by-name view: plain dicts


def test_an_old_file_reads_with_its_types_cast_and_unknown_columns_left_out(tmp_path):
    # an older writer: int throughput (types guessed from values), no validity columns, and a column this
    # version does not know (a newer scoville's, or one added by hand)
    _write(tmp_path / POINT_METRICS, pa.table({"point": [0], "concurrency": [2], "total_throughput": [100],
                                               "from_the_future": ["x"]}))
    (p,) = read_points(tmp_path)
    assert p == PointMetrics(point=0, concurrency=2, total_throughput=100.0)
    assert isinstance(p.total_throughput, float) and p.valid is None
    assert read_point_metrics(tmp_path) == [{"point": 0, "concurrency": 2, "total_throughput": 100.0}]
    assert pq.read_table(tmp_path / POINT_METRICS).column_names[-1] == "from_the_future"   # the file keeps it


def test_a_column_that_cannot_be_read_as_its_type_leaves_the_file_out_with_a_warning(tmp_path):
    _write(tmp_path / POINT_METRICS, pa.table({"point": [0], "concurrency": ["four"]}))
    with pytest.raises(pa.ArrowInvalid):
        read_points(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_stored_points(tmp_path) is None
    assert any(issubclass(w.category, DamagedRunWarning) and POINT_METRICS in str(w.message) for w in caught)
