"""Reasoning metrics (TTFOT, reasoning/answer split), the --tokenizer count check, and schema-2 runs read as v3."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scoville.cli.point_table import reasoning_table
from scoville.metrics import PointContext, point_metrics, recompute
from scoville.results.catalog import query
from scoville.results.manifest import base_manifest
from scoville.results.schema import RECORD_SCHEMA, RequestRecord, records_to_table
from scoville.results.store import JOURNAL, RunWriter, point_file, read_point_metrics, read_requests
from scoville.token_metrics import count_check_lines

NEW_IN_V3 = ("output_tokens_requested", "t_first_content", "reasoning_tokens", "input_tokens_local",
             "output_tokens_local")


def rec(i: int, sent: float, first: float, done: float, out: int, point: int = 0, **kw) -> RequestRecord:
    return RequestRecord(point=point, request_id=f"r{i}", t_sent=sent, t_first_token=first, t_done=done,
                         token_times=[first, done], token_counts=[1, out - 1], input_tokens=10, output_tokens=out,
                         **kw)


def test_reasoning_points_get_ttfot_and_the_split():
    recs = [rec(0, 0.0, 0.1, 2.0, 10, t_first_content=0.5, reasoning_tokens=6),
            rec(1, 1.0, 1.2, 3.0, 8, t_first_content=2.2, reasoning_tokens=4),
            rec(2, 1.0, 1.2, 3.0, 8, t_first_content=None, reasoning_tokens=8),   # cut short while thinking
            rec(3, 9.0, 9.1, 9.5, 4, t_first_content=9.3, reasoning_tokens=2, warmup=True)]
    m = point_metrics(records_to_table(recs), PointContext())
    assert m["ttft_s_mean"] == pytest.approx((0.1 + 0.2 + 0.2) / 3)             # any first token, unchanged
    assert m["ttfot_s_mean"] == pytest.approx((0.5 + 1.2) / 2)                  # requests that answered
    assert m["ttfot_s_median"] == pytest.approx(0.85)
    assert m["reasoning_tokens_mean"] == pytest.approx(6.0)
    assert m["content_tokens_mean"] == pytest.approx((4 + 4 + 0) / 3)


@pytest.mark.parametrize("reasoning", [0, None], ids=["plain-model", "schema-2"])
def test_points_without_reasoning_or_local_counts_get_no_such_columns(reasoning):
    recs = [rec(0, 0.0, 0.1, 2.0, 10, t_first_content=0.1 if reasoning == 0 else None, reasoning_tokens=reasoning)]
    m = point_metrics(records_to_table(recs), PointContext())
    assert not [k for k in m if k.startswith(("ttfot", "reasoning", "content_tokens")) or "_tokens_mismatch" in k
                or "_tokens_diff" in k]
    assert reasoning_table([{"label": "c1", **m}]) is None


def test_count_check_on_hand_cases():
    recs = [rec(0, 0.0, 0.1, 1.0, 10, input_tokens_local=10, output_tokens_local=10),   # agree
            rec(1, 0.0, 0.1, 1.0, 10, input_tokens_local=10, output_tokens_local=8),    # server counted 2 more
            rec(2, 0.0, 0.1, 1.0, 10, input_tokens_local=10, output_tokens_local=11),   # server counted 1 fewer
            rec(3, 0.0, 0.1, 1.0, 10, input_tokens_local=10, output_tokens_local=10)]
    m = point_metrics(records_to_table(recs), PointContext())
    assert m["output_tokens_mismatch"] == pytest.approx(0.5)
    assert m["output_tokens_diff_mean"] == pytest.approx((0 + 2 - 1 + 0) / 4)
    assert m["output_tokens_diff_max_abs"] == 2
    assert (m["input_tokens_mismatch"], m["input_tokens_diff_mean"], m["input_tokens_diff_max_abs"]) == (0, 0, 0)
    lines = count_check_lines([{"label": "c4", **m}])
    assert lines == ["point c4: the server's output token counts differ from --tokenizer's on 50% of requests "
                     "(server minus local: mean +0.25, at most 2 apart)"]


def test_requests_without_a_local_count_are_left_out_of_the_check():
    recs = [rec(0, 0.0, 0.1, 1.0, 10, output_tokens_local=7), rec(1, 0.0, 0.1, 1.0, 10)]
    m = point_metrics(records_to_table(recs), PointContext())
    assert m["output_tokens_mismatch"] == 1.0 and m["output_tokens_diff_mean"] == 3.0
    assert "input_tokens_mismatch" not in m


# --- run directories ---------------------------------------------------------------------------------------

def _manifest(points: int) -> dict:
    return base_manifest(source="measured", target={"url": "http://127.0.0.1:1"},
                         system={"hardware": "test", "accelerators": 1}, model={"name": "m"}, serving={},
                         workload={"name": "w"},
                         load_plan={"points": [{"index": i, "concurrency": 1, "label": f"c{i}"}
                                               for i in range(points)]},
                         power={"source": "rated", "watts_per_accelerator": 700.0})


def test_a_schema_2_run_reads_and_recomputes(tmp_path):
    """A run written before schema 3: a Parquet point and a journal line, both without the new columns."""
    w = RunWriter.create(tmp_path, _manifest(2))
    w.finish()
    old = records_to_table([rec(i, float(i), i + 0.1, i + 1.0, 4) for i in range(3)])
    old = old.drop_columns(list(NEW_IN_V3))
    point_file(w.run_dir, 0).parent.mkdir(exist_ok=True)
    pq.write_table(old, point_file(w.run_dir, 0))
    line = {"point": 1, "request_id": "j0", "t_sent": 0.0, "t_first_token": 0.1, "t_done": 1.0,
            "token_times": [0.1, 1.0], "token_counts": [1, 3], "input_tokens": 10, "output_tokens": 4, "attempt": 0}
    (w.run_dir / JOURNAL).write_text(json.dumps(line) + "\n")
    table = read_requests(w.run_dir)
    assert table.schema == RECORD_SCHEMA and table.num_rows == 4
    for name in NEW_IN_V3:
        assert table.column(name).null_count == 4, name
    rows = recompute(w.run_dir)
    assert [r["num_ok"] for r in rows] == [3, 1] and not any("ttfot_s_median" in r for r in rows)
    assert query(tmp_path, "SELECT count(*) FROM requests WHERE reasoning_tokens IS NULL")[1] == [(4,)]


def test_a_column_only_a_later_point_has_reaches_points_parquet(tmp_path):
    """points.parquet used to take its columns from the first row alone: point 1's TTFOT was dropped."""
    w = RunWriter.create(tmp_path, _manifest(2))
    w.write_point(0, [rec(0, 0.0, 0.1, 1.0, 4, t_first_content=0.1, reasoning_tokens=0)])
    w.write_point(1, [rec(0, 5.0, 5.1, 6.0, 4, point=1, t_first_content=5.5, reasoning_tokens=2)])
    w.finish()
    recompute(w.run_dir)
    stored = read_point_metrics(w.run_dir)
    assert stored[0]["ttfot_s_median"] is None and stored[1]["ttfot_s_median"] == pytest.approx(0.5)
    assert pa.Table.from_pylist(stored).num_columns == len(stored[1])
