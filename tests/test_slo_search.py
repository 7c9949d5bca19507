"""The SLO parser and the bracket/bisect/repeat search on known curves (no HTTP)."""

from __future__ import annotations

import math

import pytest

from scoville.load import LoadPoint
from scoville.slo import Slo, SloError
from scoville.slo_search import (
    GUIDED_STEPS,
    SEED_FACTOR,
    LevelSearch,
    SeedInfo,
    SloSearch,
    blind_levels,
)

# ---- parser -------------------------------------------------------------------------------------------------

def test_percentile_keys_with_units_and_the_old_per_request_keys_parse_together():
    slo = Slo.parse("ttft_p90=2s, tpot_p90=50ms,e2e_p99=10,itl_median=20ms,ttft_mean=1.5s,e2e_s=30")
    assert slo.to_dict() == pytest.approx({"ttft_p90": 2.0, "tpot_p90": 0.05, "e2e_p99": 10.0,
                                           "itl_median": 0.02, "ttft_mean": 1.5, "e2e_s": 30.0})
    assert [lim.column for lim in slo.statistic_limits] == ["ttft_s_p90", "tpot_s_p90", "e2e_s_p99",
                                                            "itl_s_median", "ttft_s_mean"]
    # goodput thresholds: the tightest limit per metric, ITL left out
    assert slo.per_request() == pytest.approx({"ttft_s": 1.5, "tpot_s": 0.05, "e2e_s": 10.0})
    assert Slo.parse(",".join(f"{k}={v!r}" for k, v in slo.to_dict().items())) == slo   # a stored SLO reads back


@pytest.mark.parametrize("text, says", [
    ("latency=3", "METRIC_STAT=LIMIT"),
    ("ttft_p95=2s", "'p95' is not a statistic"),
    ("ttft_p90=2h", "not a duration"),
    ("ttft_p90=0", "positive"),
    ("ttft_p90=nan", "not a duration"),
    ("tpot_p90", "METRIC_STAT=LIMIT"),
    ("itl_s=0.05", "ITL has no per-request value"),
    ("ttft_p90=1,ttft_p90=2", "given twice"),
    (" , ", "empty SLO"),
])
def test_bad_slo_parts_are_named_on_one_line_with_the_fix(text, says):
    with pytest.raises(SloError, match=says) as err:
        Slo.parse(text)
    assert "\n" not in str(err.value)


def test_a_row_meets_the_slo_only_when_every_statistic_is_within_its_limit_and_nothing_failed():
    slo = Slo.parse("ttft_p90=2s,tpot_p90=50ms")
    good = {"ttft_s_p90": 1.0, "tpot_s_p90": 0.05, "num_errors": 0}
    assert slo.check(good).passed
    assert not slo.check({**good, "tpot_s_p90": 0.051}).passed
    assert not slo.check({**good, "num_errors": 1}).passed
    assert not slo.check({"ttft_s_p90": 1.0}).passed and not slo.check(None).passed   # missing statistic / row
    check = slo.check({**good, "ttft_s_p90": 1.9, "tpot_s_p90": 0.01})
    assert check.near(0.1) and not check.near(0.04)


# ---- the level search on known monotone curves ---------------------------------------------------------------

def run(search: LevelSearch, boundary: int) -> list[int]:
    """Measure against 'passes iff level <= boundary' (never near a limit); returns the levels measured."""
    while (level := search.next_level()) is not None:
        search.record(level, level <= boundary)
    return [a.level for a in search.attempts]


def test_blind_search_doubles_then_bisects_to_adjacent_levels():
    search = LevelSearch(1024)
    assert run(search, 24) == [1, 2, 4, 8, 16, 32, 24, 28, 26, 25]
    assert search.done and search.answer == 24 and search.hi == 25


@pytest.mark.parametrize("boundary", [1, 2, 3, 5, 24, 37, 63, 64, 65, 100, 999, 1023])
def test_blind_and_seeded_searches_find_every_boundary(boundary):
    for start in (None, 1, boundary, max(boundary // 3, 1), boundary * 3, 1024):
        search = LevelSearch(1024) if start is None else LevelSearch(1024, start=start, factor=SEED_FACTOR, grow=True)
        levels = run(search, boundary)
        assert search.answer == boundary and search.hi == boundary + 1
        assert len(levels) == len(set(levels))          # no level measured twice without a near verdict


def test_fails_at_one_and_passes_at_the_ceiling():
    search = LevelSearch(64)
    assert run(search, 0) == [1] and search.answer == 0 and search.done
    search = LevelSearch(64)
    assert run(search, 10**6) == [1, 2, 4, 8, 16, 32, 64] and search.answer == 64
    seeded = LevelSearch(64, start=50, factor=SEED_FACTOR, grow=True)
    assert run(seeded, 10**6) == [50, 63, 64] and seeded.answer == 64
    seeded = LevelSearch(64, start=3, factor=SEED_FACTOR, grow=True)
    assert run(seeded, 0) == [3, 2, 1] and seeded.answer == 0


def test_a_good_seed_measures_far_fewer_levels_than_doubling():
    for boundary in (24, 40, 100, 300):
        seeded = LevelSearch(1024, start=boundary, factor=SEED_FACTOR, grow=True)
        assert len(run(seeded, boundary)) * 2 <= len(blind_levels(boundary, 1024))


def test_a_seed_far_from_the_boundary_costs_no_more_than_a_blind_search_can():
    worst_blind = max(len(blind_levels(b, 1024)) for b in range(0, 1025))
    for start in (1, 2, 8, 100, 512, 900, 1024):
        for boundary in (0, 1, 3, 40, 500, 900, 1024):
            seeded = LevelSearch(1024, start=start, factor=SEED_FACTOR, grow=True)
            assert len(run(seeded, boundary)) <= worst_blind, (start, boundary)
    # the growing factor leaves a far seed faster than a fixed one
    grown = run(LevelSearch(1024, start=8, factor=SEED_FACTOR, grow=True), 500)
    fixed = run(LevelSearch(1024, start=8, factor=SEED_FACTOR), 500)
    assert len(grown) < len(fixed)


def test_near_limit_fails_around_a_good_seed_do_not_send_the_search_far_down():
    """A seed one level above the boundary, failing there and below only by noise near the limit: the step down
    stays the base factor, not the grown one (that went from c=37 to c=6 in a bench trial)."""
    search = LevelSearch(1024, start=40, factor=SEED_FACTOR, grow=True)
    for level in (40, 39, 38, 37):
        assert search.next_level() == level
        search.record(level, passed=False, near=True, hint=level - 1)
        while search.next_level() == level:          # the near verdict is repeated for a majority
            search.record(level, passed=False, near=True, hint=level - 1)
    assert search.next_level() == math.floor(37 / SEED_FACTOR)


def test_blind_levels_is_the_blind_search_itself():
    assert blind_levels(24, 1024) == run(LevelSearch(1024), 24)
    assert blind_levels(0, 1024) == [1]


def test_near_verdicts_are_confirmed_at_the_boundary_by_majority_and_a_reversal_moves_the_bracket():
    search = LevelSearch(8, start=4, factor=2.0, repeats=3)
    search.record(4, True, near=True)
    assert search.next_level() == 8                     # on the way, one attempt per level
    search.record(8, False)
    search.record(6, False, near=True)
    search.record(5, True, near=True)
    assert (search.lo, search.hi) == (5, 6) and search.next_level() == 5     # adjacent: confirm 5
    search.record(5, False, near=True)                  # 1-1, a tie fails for now: the bracket is (4, 5)
    assert (search.lo, search.hi) == (4, 5) and search.next_level() == 4
    search.record(4, True, near=True)                   # 2-0: 4 passes for good
    assert search.next_level() == 5
    search.record(5, True, near=True)                   # 2-1: 5 passes after all
    assert (search.lo, search.hi) == (5, 6) and search.next_level() == 6
    search.record(6, False, near=True)                  # 2-0: 6 fails for good
    assert search.done and search.answer == 5
    assert [a.level for a in search.attempts] == [4, 8, 6, 5, 5, 4, 5, 6]
    assert search.decided == [(4, True), (5, True), (6, False), (8, False)]
    with pytest.raises(ValueError, match="not proposed"):
        search.record(7, True)


def test_a_tie_fails_and_repeats_one_never_repeats():
    search = LevelSearch(1, repeats=2)
    search.record(1, True, near=True)
    search.record(1, False, near=True)
    assert search.done and search.answer == 0
    search = LevelSearch(2, repeats=1)
    search.record(1, True, near=True)
    search.record(2, False, near=True)
    assert search.done and search.answer == 1


def test_hints_lead_to_the_other_side_of_the_hinted_boundary():
    search = LevelSearch(1024, start=40, factor=1.25, grow=True)
    search.record(40, False, hint=37)
    assert search.next_level() == 37                    # after a fail: the hint itself, expected to pass
    search.record(37, True, hint=37)
    assert search.next_level() == 38                    # after a pass: one above it, expected to fail
    search.record(38, False, hint=37)
    assert search.done and search.answer == 37 and len(search.attempts) == 3
    search = LevelSearch(1024, start=40, factor=1.25, grow=True)
    search.record(40, True, hint=41)
    assert search.next_level() == 42
    search.record(42, True, hint=43)
    search.record(44, True, hint=45)
    search.record(46, True, hint=47)                    # three hints fell short: no more guidance
    assert search.next_level() == math.ceil(46 * 1.25 ** 8)
    search = LevelSearch(64, start=60, factor=1.25)
    search.record(60, True, hint=500)                   # a hint past the ceiling is not followed
    assert search.next_level() == 64
    search = LevelSearch(1024, start=40, factor=1.25)
    search.record(40, True, hint=39)                    # a hint behind what is known is not followed
    assert search.next_level() == 50


def test_hints_that_keep_landing_on_the_wrong_side_cost_a_bounded_number_of_levels():
    for start, boundary in ((10, 30), (10, 500), (200, 20)):
        plain = run(LevelSearch(1024, start=start, factor=SEED_FACTOR, grow=True), boundary)
        search = LevelSearch(1024, start=start, factor=SEED_FACTOR, grow=True)
        while (level := search.next_level()) is not None:   # each hint says: the boundary is right here
            search.record(level, level <= boundary, hint=level if level <= boundary else level - 1)
        assert search.answer == boundary and len(search.attempts) <= len(plain) + GUIDED_STEPS


# ---- SloSearch: points in, verdicts, summary, the one line -----------------------------------------------------

def knee_rows(knee_c: float):
    """An analytic curve: TPOT p90 = 10 ms · (1 + C/knee_c); the 20 ms limit is met up to C = knee_c."""
    return lambda c: {"tpot_s_p90": 0.010 * (1 + c / knee_c), "num_errors": 0, "goodput": float(c)}


def drive(search: SloSearch, rows) -> None:
    while (point := search.next_point(len(search.measured))) is not None:
        search.observe(point, rows(point.concurrency), seconds=float(point.concurrency))


def make_point(index: int, level: int) -> LoadPoint:
    return LoadPoint(index=index, concurrency=level, num_requests=4 * level)


def test_slo_search_on_an_analytic_curve_reports_the_answer_and_what_seeding_saved():
    slo = Slo.parse("tpot_p90=20ms")
    blind = SloSearch(slo=slo, levels=LevelSearch(1024, repeats=1), make_point=make_point, accelerators=2)
    drive(blind, knee_rows(37.0))
    seeded = SloSearch(slo=slo, levels=LevelSearch(1024, start=40, factor=SEED_FACTOR, repeats=1, grow=True),
                       make_point=make_point, accelerators=2, seed=SeedInfo("h200/llama-3.1-8b", 40),
                       point_seconds=lambda lv: float(lv), knee_hint=lambda lv, check: 37)
    drive(seeded, knee_rows(37.0))
    for s in (blind, seeded):
        assert s.levels.answer == 37
    assert [m.level for m in blind.measured] == blind_levels(37, 1024)
    summary = seeded.summary()
    assert summary["answer"] == summary["answer_load"] == 37 and summary["done"] and not summary["at_ceiling"]
    assert [m.level for m in seeded.measured] == [40, 37, 38]           # a right hint: three loads
    assert summary["points_measured"] == len(seeded.measured) < len(blind.measured)
    assert summary["blind_estimate"]["points"] == len(blind.measured)
    # seconds = level here, so the derived blind time is exactly the blind run's
    assert summary["blind_estimate"]["accelerator_minutes"] == pytest.approx(blind.accelerator_minutes())
    assert seeded.accelerator_minutes() == pytest.approx(sum(m.level for m in seeded.measured) * 2 / 60)
    line = summary["line"]
    assert "\n" not in line and "highest concurrency meeting it c=37" in line and "c=38 fails: tpot_p90" in line
    assert f"a blind search needs {len(blind.measured)} loads (derived)" in line
    assert blind.summary()["blind_estimate"] is None and "blind search needs" not in blind.answer_line()
    assert summary["measured"][0]["goodput"] == 40.0


def test_near_limit_points_are_measured_again_in_the_slo_search():
    # TPOT p90 exactly 5 % under the limit at every level up to 4, far over above: level 4 is repeated
    slo = Slo.parse("tpot_p90=20ms")

    def rows(c: int) -> dict[str, float]:
        return {"tpot_s_p90": 0.019 if c <= 4 else 0.1, "num_errors": 0}

    search = SloSearch(slo=slo, levels=LevelSearch(16, start=4, factor=2.0, repeats=3), make_point=make_point)
    drive(search, rows)
    levels = [m.level for m in search.measured]
    assert levels.count(4) == 2 and search.levels.answer == 4
    assert search.summary()["loads_measured"] == len(set(levels)) < search.summary()["points_measured"]


def test_rate_search_levels_are_steps_of_the_rate():
    slo = Slo.parse("ttft_p90=1s")
    step = 0.5

    def rate_point(index: int, level: int) -> LoadPoint:
        return LoadPoint(index=index, rate=level * step, num_requests=10)

    search = SloSearch(slo=slo, levels=LevelSearch(64, repeats=1), make_point=rate_point, mode="rate", step=step)
    while (point := search.next_point(len(search.measured))) is not None:
        search.observe(point, {"ttft_s_p90": 0.1 if point.rate <= 3.0 else 5.0, "num_errors": 0}, 1.0)
    assert search.levels.answer == 6 and search.summary()["answer_load"] == 3.0
    assert "highest request rate meeting it rate=3/s" in search.answer_line()


def test_fails_at_the_first_load_says_so():
    search = SloSearch(slo=Slo.parse("ttft_p90=1ms"), levels=LevelSearch(64, repeats=1), make_point=make_point)
    drive(search, lambda c: {"ttft_s_p90": 0.5, "num_errors": 0})
    assert search.levels.answer == 0 and "not met even at c=1: ttft_p90 500ms" in search.answer_line()
    assert math.isclose(search.summary()["accelerator_minutes"], 1 / 60)
