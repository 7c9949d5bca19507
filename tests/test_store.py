"""Run directories: journal survives a torn write, parquet wins over journal, recompute reproduces."""

import json

import pytest

from scoville.metrics import recompute, run_metrics
from scoville.results.catalog import query
from scoville.results.manifest import base_manifest
from scoville.results.schema import RequestRecord
from scoville.results.store import RunError, RunWriter, read_manifest, read_requests


def manifest():
    return base_manifest(source="measured",
                         target={"base_url": "http://user:sk-secret@127.0.0.1:1", "api_key": "sk-secret"},
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
    assert json.loads(text)["target"]["base_url"] == "http://127.0.0.1:1"


def test_the_manifest_file_has_no_null_keys_and_reads_back_the_same(tmp_path):
    # older scoville versions test keys for presence ("slo_search" in manifest), so an unset field is left out
    w = RunWriter.create(tmp_path, manifest())
    w.finish()
    written = json.loads((w.run_dir / "manifest.json").read_text())

    def nulls(v, path=""):
        if isinstance(v, dict):
            return [p for k, x in v.items() for p in ([f"{path}.{k}"] if x is None else nulls(x, f"{path}.{k}"))]
        return [p for i, x in enumerate(v) for p in nulls(x, f"{path}[{i}]")] if isinstance(v, list) else []

    assert nulls(written) == [] and "slo_search" not in written and "resumed_at" not in written
    assert read_manifest(w.run_dir) == w.manifest


def test_a_run_of_a_newer_schema_is_not_resumed_and_keeps_its_manifest(tmp_path):
    w = RunWriter.create(tmp_path, manifest())
    w.finish()
    path = w.run_dir / "manifest.json"
    newer = json.loads(path.read_text()) | {"schema_version": 99, "a_field_from_the_future": 1}
    path.write_text(json.dumps(newer))
    with pytest.raises(RunError, match="newer scoville .*resume it with that version"):
        RunWriter.resume(w.run_dir)
    assert json.loads(path.read_text()) == newer


def test_journal_keeps_finished_records_after_torn_write(tmp_path):
    w = RunWriter.create(tmp_path, manifest())
    for i in range(3):
        w.record(rec(0, i, float(i)))
    # simulate kill -9 in the middle of writing a line
    with (w.run_dir / "requests.jsonl").open("ab") as f:
        f.write(b'{"point":0,"request_id":"torn"')
    table = read_requests(w.run_dir)
    assert table.num_rows == 3
    assert read_manifest(w.run_dir).status == "running"


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


# --- one writer per run, attempts kept apart, torn tails, failed writes ----------------------------


def test_a_second_writer_of_a_run_is_refused_in_one_line(tmp_path, monkeypatch):
    from scoville.results import store
    from scoville.results.store import RunError, writer_alive

    monkeypatch.setattr(store, "_LOCK_WAIT_S", 0.1)   # the refusal, not the patience before it (1 s)

    w = RunWriter.create(tmp_path, manifest())
    assert writer_alive(w.run_dir)
    with pytest.raises(RunError, match="being written by another scoville process") as e:
        RunWriter.resume(w.run_dir)
    assert "\n" not in str(e.value) and f"pid {__import__('os').getpid()}" in str(e.value)
    assert read_manifest(w.run_dir).status == "running" and read_manifest(w.run_dir).resumed_at is None
    w.finish("interrupted")
    assert not writer_alive(w.run_dir)
    again = RunWriter.resume(w.run_dir)  # the lock is free once the first writer finished
    assert writer_alive(w.run_dir)
    again.finish()


def test_a_writer_killed_outright_is_seen_as_gone(tmp_path):
    """A crashed writer leaves "running" in the manifest; writer_alive tells the catalog nobody is writing."""
    import subprocess
    import sys

    from scoville.results.store import writer_alive

    code = ("import sys, time; from pathlib import Path; from scoville.results.store import RunWriter; "
            "from scoville.results.manifest import Manifest; "
            "w = RunWriter(Path(sys.argv[1]), Manifest(source='measured')); print('ready', flush=True); time.sleep(60)")
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", code, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert writer_alive(run)
    finally:
        proc.kill()
        proc.wait(10)
    assert read_manifest(run).status == "running" and not writer_alive(run)


def test_a_point_interrupted_twice_is_measured_from_one_attempt(tmp_path):
    """kill -> resume -> kill inside one point: the metrics see the last attempt only, not both summed."""
    w = RunWriter.create(tmp_path, manifest())
    for i in range(3):
        w.record(rec(0, i, float(i)))
    w.close()  # killed
    again = RunWriter.resume(w.run_dir)
    for i in range(2):
        again.record(rec(0, i, 10.0 + i))
    again.close()  # killed again
    table = read_requests(w.run_dir)
    assert table.num_rows == 2 and table.column("attempt").to_pylist() == [1, 1]
    assert table.column("t_sent").to_pylist() == [10.0, 11.0]


def test_a_torn_journal_tail_does_not_swallow_the_next_record(tmp_path):
    from scoville.results.store import read_journal

    w = RunWriter.create(tmp_path, manifest())
    w.record(rec(0, 0, 0.0))
    w.close()
    with (w.run_dir / "requests.jsonl").open("ab") as f:
        f.write(b'{"point":0,"request_id":"torn","t_se')  # kill -9 in the middle of a line
    again = RunWriter.resume(w.run_dir)
    again.record(rec(0, 1, 5.0))
    again.finish()
    assert [r.request_id for r in read_journal(w.run_dir)] == ["0-0", "0-1"]


def test_an_empty_run_writes_no_zero_column_table(tmp_path):
    """Interrupted before any request: recompute must not leave a points.parquet without columns."""
    from scoville.results.store import POINT_METRICS

    w = RunWriter.create(tmp_path, manifest())
    w.finish("interrupted")
    assert recompute(w.run_dir) == []
    assert not (w.run_dir / POINT_METRICS).exists()
    cols, rows = query(tmp_path, "SELECT run_id, status FROM runs")
    assert rows == [(w.run_dir.name, "interrupted")]


def test_a_full_disk_is_one_line_and_keeps_what_was_written(tmp_path):
    """A write that hits the file size limit (as a full disk would) is one RunError line; records before it stay."""
    import subprocess
    import sys

    from scoville.results.store import read_journal

    code = """if True:
        import resource, signal, sys
        from pathlib import Path
        from scoville.results.manifest import Manifest
        from scoville.results.schema import RequestRecord
        from scoville.results.store import RunError, RunWriter
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill, as ENOSPC would come
        resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
        w = RunWriter(Path(sys.argv[1]), Manifest(source="measured"))
        n = 0
        try:
            while True:
                w.record(RequestRecord(point=0, request_id=f"r{n}", t_sent=float(n), error="x" * 100))
                n += 1
        except RunError as e:
            print(n, e, sep="|")
        w.finish("interrupted")
    """
    run = tmp_path / "run"
    p = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    n, message = p.stdout.strip().split("|")
    assert "\n" not in message and "requests.jsonl: File too large" in message and "ulimit -f" in message
    assert [r.request_id for r in read_journal(run)] == [f"r{i}" for i in range(int(n))]
    assert read_manifest(run).status == "interrupted"


def test_a_journal_that_is_not_a_regular_file_is_refused_not_read_forever(tmp_path):
    from scoville.results.store import RunError, read_journal

    w = RunWriter.create(tmp_path, manifest())
    w.finish("interrupted")
    (w.run_dir / "requests.jsonl").unlink()
    (w.run_dir / "requests.jsonl").symlink_to("/dev/zero")
    with pytest.raises(RunError, match="not a regular file"):
        read_journal(w.run_dir)


def test_a_count_beyond_the_schema_never_reaches_the_journal_reader(tmp_path):
    """A record line with a 2**64 - 1 count (written by anything) is skipped, not a compaction crash."""
    from scoville.results.store import read_journal

    w = RunWriter.create(tmp_path, manifest())
    w.record(rec(0, 0, 0.0))
    with (w.run_dir / "requests.jsonl").open("ab") as f:
        f.write(b'{"point":0,"request_id":"huge","t_sent":1.0,"output_tokens":18446744073709551615}\n')
    w.record(rec(0, 1, 2.0))
    w.finish("interrupted")
    assert [r.request_id for r in read_journal(w.run_dir)] == ["0-0", "0-1"]
    assert read_requests(w.run_dir).num_rows == 2


@pytest.mark.parametrize("damage", ["not-utf8", "directory"])
def test_a_manifest_that_cannot_be_read_is_one_run_error_for_every_reader(tmp_path, damage):
    """resume, simulate --from-run and recompute call read_manifest directly: a damaged file is one line there too."""
    from scoville.results.store import MANIFEST, RunError

    path = tmp_path / MANIFEST
    if damage == "not-utf8":
        path.write_bytes(b'{"status": "\xff\xfe"}')
    else:
        path.mkdir()
    with pytest.raises(RunError, match="manifest") as e:
        read_manifest(tmp_path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)


def test_sql_sees_the_records_an_interrupted_run_holds_only_in_its_journal(tmp_path):
    # point 0 was compacted, point 1 was cut off mid-way: the metrics count both, so must `scoville sql`
    w = RunWriter.create(tmp_path, manifest())
    w.record(rec(0, 0, 0.0))
    w.write_point(0, [rec(0, i, float(i)) for i in range(4)])
    for i in range(3):
        w.record(rec(1, i, 10.0 + i))
    w.finish("interrupted")
    _, rows = query(tmp_path, "SELECT run_id, point, count(*) FROM requests GROUP BY ALL ORDER BY point")
    assert rows == [(w.run_dir.name, 0, 4), (w.run_dir.name, 1, 3)]
    assert read_requests(w.run_dir).num_rows == 7
