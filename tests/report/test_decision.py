"""The report's decision control: its grid holds exactly what each system's frontier reads at each speed."""

from scoville.analysis.frontier import frontier
from scoville.analysis.runs import load_systems
from scoville.reporting.decision import decision_grid


def test_the_grid_starts_where_every_system_reaches_and_reads_each_frontier(report_runs):
    _, runs = report_runs
    systems = load_systems([[r] for r in runs])
    grid = decision_grid(systems)
    fronts = [frontier(s.rows, "interactivity", "total_throughput_per_accelerator") for s in systems]
    assert grid.xs[grid.start] == min(f.reach for f in fronts)            # compare's "common"
    assert grid.xs == sorted(grid.xs) and grid.xs[0] == min(f.xs[0] for f in fronts)
    assert grid.xs[-1] == max(f.reach for f in fronts)
    readings = grid.readings["total_throughput_per_accelerator"]
    for k, f in enumerate(fronts):
        for i, x in enumerate(grid.xs):
            r = readings[k][i]
            if f.at(x) is not None:
                assert r.value == f.at(x) and r.bound is None
            elif f.why_undefined(x) == "below range":
                assert (r.value, r.bound) == (f.points[0].y, "at least")
            else:
                assert r.value is None                                    # beyond reach: no number at all


def test_measures_no_system_has_are_left_out(report_runs):
    _, runs = report_runs
    systems = load_systems([[runs[0]]])
    for s in systems:
        for r in s.rows:
            r.pop("total_throughput_per_kw", None)
            r.pop("joules_per_output_token", None)
    keys = [m.key for m in decision_grid(systems).measures]
    assert "total_throughput_per_kw" not in keys and "joules_per_output_token" not in keys
    assert "total_throughput_per_accelerator" in keys


def test_catalog_power_bases_scale_the_per_accelerator_frontier_by_the_catalogs_watts(report_runs):
    from scoville.power.sources import catalog_watts

    _, runs = report_runs
    systems = load_systems([[runs[0]], [runs[1]]])     # H200 is in the catalog, "GB300 NVL72" is not
    grid = decision_grid(systems)
    keys = [m.key for m in grid.measures]
    assert keys.index("per_kw_rated") == keys.index("total_throughput_per_kw") + 1
    watts = catalog_watts("H200")
    per_acc = grid.readings["total_throughput_per_accelerator"]
    for basis in ("rated", "all-in"):
        rows = grid.readings[f"per_kw_{basis}"]
        i = grid.start
        assert rows[0][i].value == per_acc[0][i].value * 1000 / watts[basis]
        assert all(r.value is None for r in rows[1])                      # not in the catalog: no figure
