"""Damaged run folders: every catalog command ends in a result or one line, and healthy runs stay visible.

Each case damages one file of one run (or the run folder itself) the way a
crash, a full disk or another tool would, next to a healthy run; then ``ls``,
``sql``, ``show``, ``compare``, ``report`` and ``recompute`` run through the
real Typer commands. None may end in a traceback, the healthy run must stay
listed and comparable, and whatever was skipped is named in a warning or in
the one-line error.

The fast lane (``-m "not slow"``) runs one case per damaged file and per kind
of damage (FAST) plus every case at once through ``ls`` and ``sql``; the full
suite runs every case through every command.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from click import Command
from click.testing import CliRunner

from scoville.cli import compare_cmd, runs_cmd
from scoville.errors import UserError

sys.path.insert(0, str(Path(__file__).resolve().parent / "analysis"))
from runs_factory import make_run  # noqa: E402

GOOD, BAD = "20260101T000000Z-good00", "20260101T000001Z-bad000"
POINTS = [(50.0, 1000.0), (100.0, 500.0)]


# ---- ways to damage a file ---------------------------------------------------------------------

def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _truncated(p: Path) -> None:
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _garbage(p: Path) -> None:
    p.write_bytes(bytes(range(256)) * 3)


def _non_utf8(p: Path) -> None:
    p.write_bytes(b"\xff\xfe{\x00\x81")


def _folder(p: Path) -> None:
    p.unlink()
    p.mkdir()


def _pages(p: Path) -> None:
    """Bytes flipped inside the data pages; the footer (and so the schema) stays readable."""
    data = bytearray(p.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    for i in range(4, len(data) - footer, 3):
        data[i] ^= 0x5A
    p.write_bytes(bytes(data))


def _foreign(p: Path) -> None:
    pq.write_table(pa.table({"x": ["a", "b"], "y": [1.5, 2.5]}), p)


def _no_columns(p: Path) -> None:
    pq.write_table(pa.table({}), p)


def _retyped(column: str) -> Callable[[Path], None]:
    def damage(p: Path) -> None:
        t = pq.read_table(p)
        i = t.schema.get_field_index(column)
        pq.write_table(t.set_column(i, column, pa.array([f"v{v}" for v in t.column(column).to_pylist()])), p)
    return damage


def _json(text: str) -> Callable[[Path], None]:
    return lambda p: p.write_text(text)


def _field(path: str, value: object) -> Callable[[Path], None]:
    """Set a dotted manifest field (``load_plan.points``) to ``value``."""
    def damage(p: Path) -> None:
        m = json.loads(p.read_text())
        *parents, last = path.split(".")
        node = m
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
        p.write_text(json.dumps(m))
    return damage


def _stray_copy(p: Path) -> None:
    shutil.copy(p.parent / "point-0000.parquet", p)


PARQUET_DAMAGE = {"empty": _empty, "truncated": _truncated, "garbage": _garbage, "pages": _pages,
                  "foreign-schema": _foreign, "no-columns": _no_columns, "folder": _folder}
CASES: dict[str, tuple[str | None, Callable[[Path], None] | None]] = {}
for name in ("points.parquet", "requests/point-0000.parquet", "requests/point-0001.parquet", "power.parquet"):
    for how, fn in PARQUET_DAMAGE.items():
        CASES[f"{name}:{how}"] = (name, fn)
CASES["points.parquet:point-as-text"] = ("points.parquet", _retyped("point"))
CASES["points.parquet:latency-as-text"] = ("points.parquet", _retyped("tpot_s_median"))
CASES["points.parquet:interactivity-as-text"] = ("points.parquet", _retyped("interactivity"))
CASES["requests/point-0000.parquet:point-as-text"] = ("requests/point-0000.parquet", _retyped("point"))
CASES["power.parquet:watts-as-text"] = ("power.parquet", _retyped("watts"))
for how, fn in {"non-utf8": _non_utf8, "empty": _empty, "truncated": _truncated, "folder": _folder,
                "array": _json("[1, 2]"), "null": _json("null"), "string": _json('"h200"'), "number": _json("7"),
                "system-is-a-string": _field("system", "h200"), "model-is-a-string": _field("model", "llama"),
                "power-is-a-list": _field("power", [700]), "workload-is-a-number": _field("workload", 5),
                "load-plan-is-a-string": _field("load_plan", "c1"),
                "points-is-a-string": _field("load_plan.points", "c1"),
                "points-are-numbers": _field("load_plan.points", [1, 2]),
                "point-without-index": _field("load_plan.points", [{"concurrency": 1}]),
                "accelerators-is-text": _field("system.accelerators", "eight"),
                "accelerators-overflow": _field("system.accelerators", 10**30),
                "cost-is-text": _field("system.cost_per_accelerator_hour", "cheap"),
                "run-id-is-a-number": _field("run_id", 5), "compat-is-a-list": _field("compat", [1]),
                "compat-unknown": _field("compat", "foo"), "slo-is-a-string": _field("slo", "fast"),
                "status-is-an-object": _field("status", {})}.items():
    CASES[f"manifest.json:{how}"] = ("manifest.json", fn)
for how, fn in {"garbage": _garbage, "non-utf8": _non_utf8, "folder": _folder}.items():
    CASES[f"requests.jsonl:{how}"] = ("requests.jsonl", fn)
CASES["stray point-abc.parquet (a real point file)"] = ("requests/point-abc.parquet", _stray_copy)
CASES["stray point-abc.parquet (garbage)"] = ("requests/point-abc.parquet", _garbage)
CASES["empty run folder"] = (None, None)

# One case per damaged file and per kind of damage: the fast lane's share of the matrix (the rest is marked slow).
FAST = {"points.parquet:truncated", "points.parquet:point-as-text", "requests/point-0000.parquet:pages",
        "requests/point-0001.parquet:folder", "power.parquet:foreign-schema", "manifest.json:non-utf8",
        "manifest.json:points-are-numbers", "requests.jsonl:garbage", "stray point-abc.parquet (garbage)",
        "empty run folder"}
assert CASES.keys() >= FAST

# The journal is read only for points without a Parquet file, and a torn or undecodable journal line is
# skipped by design (a writer killed mid-line): damage there need not be reported when nothing needs it.
UNREPORTED = {"requests.jsonl:garbage", "requests.jsonl:non-utf8", "empty run folder",
              # a metric column of text is shown as text, not skipped: nothing is lost to report
              "points.parquet:latency-as-text", "points.parquet:interactivity-as-text"}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A healthy run and the one to be damaged, both with measured power, built once."""
    root = tmp_path_factory.mktemp("pristine")
    make_run(root, GOOD, POINTS, requests_per_point=2, measured_power=True, accelerators=1)
    bad = make_run(root, BAD, POINTS, requests_per_point=2, measured_power=True, accelerators=1)
    (bad / "requests.jsonl").write_text("")
    return root


@pytest.fixture(scope="module")
def app() -> Command:
    """The catalog commands as one Click command, built once (typer's runner rebuilds it on every invoke)."""
    a = typer.Typer()
    runs_cmd.register(a)
    compare_cmd.register(a)
    return typer.main.get_command(a)


def damaged_copy(pristine: Path, dest: Path, case: str) -> Path:
    root = dest / "runs"
    shutil.copytree(pristine, root)
    name, damage = CASES[case]
    if name is None:
        shutil.rmtree(root / BAD)
        (root / BAD).mkdir()
    else:
        damage(root / BAD / name)
    return root


def invoke(app: Command, *args: str) -> tuple[str, str, str | None]:
    """(stdout, stderr, the one-line error or None) of one command, asserting it never ends in a traceback."""
    res = CliRunner().invoke(app, list(args))
    e = res.exception
    assert e is None or isinstance(e, UserError), f"{args[0]} raised {type(e).__name__}: {e}\n{res.output}"
    assert "Traceback" not in res.output
    for line in res.stderr.splitlines():
        assert line.startswith("warning: skipping "), f"{args[0]}: not a one-line warning: {line}"
    assert e is None or "\n" not in str(e), f"{args[0]}: a multi-line error: {e}"
    return res.stdout, res.stderr, None if e is None else str(e)


@pytest.mark.parametrize("case", [c if c in FAST else pytest.param(c, marks=pytest.mark.slow) for c in CASES])
def test_damaged_run_is_skipped_and_named_without_hiding_healthy_runs(pristine, app, tmp_path, case):
    root = damaged_copy(pristine, tmp_path, case)
    runs = ["--runs", str(root)]
    said: list[str] = []

    def run(*args: str) -> tuple[str, str | None]:
        out, warned, err = invoke(app, *args, *runs)
        said.append(warned + (err or ""))
        return out, err

    out, err = run("ls", "--json")
    assert err is None and GOOD in [r["run_id"] for r in json.loads(out)]
    out, err = run("sql", f"SELECT (SELECT count(*) FROM points WHERE run_id = '{GOOD}') AS p, "
                          f"(SELECT count(*) FROM requests WHERE run_id = '{GOOD}') AS r, "
                          f"(SELECT count(*) FROM power WHERE run_id = '{GOOD}') > 0 AS w", "--json")
    if err is None:  # pages damaged behind an intact footer fail the query itself, in one line
        assert json.loads(out) == [{"p": 2, "r": 4, "w": True}]
    out, err = run("show", GOOD)
    assert err is None and GOOD in out
    out, err = run("compare", GOOD, "--json")
    assert err is None and json.loads(out)["systems"][0]["runs"] == [GOOD]

    run("show", BAD)
    run("compare", GOOD, BAD, "--json")
    report = tmp_path / "report.html"
    _, err = run("report", GOOD, BAD, "-o", str(report))
    assert err is not None or report.stat().st_size > 0
    run("recompute", BAD)
    if case not in UNREPORTED:
        name = Path(CASES[case][0]).name
        assert any(name in s for s in said), f"nothing named the damaged {name}:\n" + "\n".join(said)


def test_many_damaged_runs_at_once_leave_the_healthy_one_listed(pristine, app, tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    shutil.copytree(pristine / GOOD, root / GOOD)
    for i, case in enumerate(CASES):
        one = damaged_copy(pristine, tmp_path / f"case{i}", case)
        os.rename(one / BAD, root / f"20260102T000000Z-{i:06d}")
    out, _, err = invoke(app, "ls", "--json", "--runs", str(root))
    assert err is None and GOOD in [r["run_id"] for r in json.loads(out)]
    out, _, err = invoke(app, "sql", "SELECT count(*) AS n FROM requests WHERE run_id = 'GOOD'".replace("GOOD", GOOD),
                      "--json", "--runs", str(root))
    assert err is None or "SQL error" in err
