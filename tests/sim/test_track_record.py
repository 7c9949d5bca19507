"""The simulator's track record: which scope a prediction quotes, that the shipped file is what the validation set
gives today, and that `scoville simulate` says it."""

import html
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from scoville.catalog.hardware import load_hardware
from scoville.cli import main
from scoville.results.store import read_manifest
from scoville.sim.track_record import (
    MIN_RUNS,
    MetricRecord,
    ScopeRecord,
    TrackRecord,
    load_track_record,
    quote,
)

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _record(model, hardware, framework, runs, pricing=None, within=0.9, drafts=False):
    metric = MetricRecord(runs=runs, within=within, in_band=0.8)
    return ScopeRecord(model=model, hardware=hardware, framework=framework, pricing=pricing, drafts=drafts,
                       covers=(hardware or "mi325x",), tpot=metric, ttft=None, tput=metric)


def _book(*records):
    return TrackRecord(tolerance=0.35, regenerate="-", basis="-", aiconfigurator_core="-", records=records)


def test_a_prediction_quotes_the_most_specific_scope_that_holds_enough_runs():
    h200 = load_hardware("h200")
    book = _book(_record("deepseek-r1", "h200", "sglang", MIN_RUNS, within=0.5),
                 _record("gpt-oss-120b", "h200", "sglang", MIN_RUNS - 1),
                 _record(None, "h200", "sglang", 40, within=0.7),
                 _record(None, "h200", None, 90, within=0.8))
    assert book.closest("deepseek-r1", h200, "sglang").tpot.within == 0.5
    assert book.closest("gpt-oss-120b", h200, "sglang").tpot.within == 0.7     # too few runs of its own
    assert book.closest("kimi-k2.5", h200, "trtllm").tpot.within == 0.8        # the system under any framework


def test_a_system_priced_from_its_datasheet_falls_back_to_every_such_system_and_a_measured_one_to_nothing():
    book = _book(_record(None, None, None, 23, pricing="datasheet", within=0.4))
    assert book.closest("deepseek-r1", load_hardware("jalapeno"), "trtllm").scope().startswith(
        "systems priced from their datasheets")
    assert book.closest("deepseek-r1", load_hardware("b200"), "trtllm") is None   # nothing has checked it


def test_the_runs_that_drafted_keep_a_record_of_their_own_that_only_drafted_points_quote():
    h200 = load_hardware("h200")
    book = _book(_record("deepseek-r1", "h200", "sglang", 40, within=0.95),
                 _record("deepseek-r1", "h200", "sglang", MIN_RUNS, within=0.5, drafts=True),
                 _record(None, "h200", None, 90, within=0.8, drafts=True))
    assert book.closest("deepseek-r1", h200, "sglang").tpot.within == 0.95
    drafted = book.closest("deepseek-r1", h200, "sglang", drafts=True)
    assert drafted.tpot.within == 0.5 and drafted.scope() == "deepseek-r1 on h200 under sglang with MTP drafts"
    assert book.closest("kimi-k2.5", h200, "trtllm", drafts=True).scope() == (
        "h200 with MTP drafts (every model and framework)")
    assert book.closest("deepseek-r1", load_hardware("b200"), "sglang", drafts=True) is None


def test_a_frontier_with_drafted_points_quotes_both_records_and_a_system_without_drafted_runs_says_so():
    book, b200 = load_track_record(), load_hardware("b200")
    general = quote("deepseek-r1", b200, "sglang")
    drafting = book.closest("deepseek-r1", b200, "sglang", drafts=True)
    assert drafting is not None and drafting.drafts
    assert quote("deepseek-r1", b200, "sglang", drafted=True) == (
        f"{general}. Its points with MTP drafts, by the runs of {drafting.scope()}: {drafting.summary(book.tolerance)}")
    assert quote("llama-3.1-8b", load_hardware("epyc-zen4-2vcpu"), "vllm", drafted=True).endswith(
        "Its points with MTP drafts: no measured runs of epyc-zen4-2vcpu with drafts to check them against")


def test_simulate_quotes_the_drafted_record_only_when_its_points_draft(tmp_path, capsys):
    jalapeno = load_hardware("jalapeno")
    for mtp, drafted in (("1", True), ("off", False)):
        main(["simulate", "--hardware", "jalapeno", "--model", "deepseek-r1", "--scenario", "1k1k",
              "--concurrency", "4", "--mtp", mtp, "--no-disagg", "--runs", str(tmp_path / mtp)])
        run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
        assert read_manifest(run_dir).target.track_record == quote("deepseek-r1", jalapeno, "vllm", drafted=drafted)


def test_the_shipped_track_record_is_what_the_validation_set_gives_today():
    try:
        installed = version("aiconfigurator-core")
    except PackageNotFoundError:
        pytest.skip("the validation set is aiconfigurator-core's silicon_sample.csv (scoville[silicon])")
    shipped = load_track_record()
    if installed != shipped.aiconfigurator_core:
        pytest.skip(f"the track record was priced on aiconfigurator-core {shipped.aiconfigurator_core}, "
                    f"{installed} is installed: run {shipped.regenerate}")
    sys.path.insert(0, str(BENCH))
    try:
        from track_record_ledger import ledger
    finally:
        sys.path.remove(str(BENCH))
    assert ledger() == shipped, f"the simulator moved since the track record was written: run {shipped.regenerate}"


def test_simulate_prints_the_track_record_of_its_scope_and_its_run_and_report_keep_it(tmp_path, capsys):
    main(["simulate", "--hardware", "jalapeno", "--model", "llama-3.1-8b", "--scenario", "1k1k",
          "--concurrency", "4", "--no-disagg", "--report", "--runs", str(tmp_path / "runs")])
    captured = capsys.readouterr()
    said = quote("llama-3.1-8b", load_hardware("jalapeno"), "vllm")
    assert said.startswith("track record of systems priced from their datasheets")
    assert said in " ".join(captured.err.split())
    run_dir = Path(captured.out.strip().splitlines()[-1])
    assert read_manifest(run_dir).target.track_record == said
    assert html.escape(said, quote=False) in (run_dir / "report.html").read_text()


def test_a_system_no_run_has_checked_says_so():
    assert quote("llama-3.1-8b", load_hardware("epyc-zen4-2vcpu"), "vllm").startswith(
        "track record: no measured runs of epyc-zen4-2vcpu")
