"""The report opened in real headless Chromium: renders offline, no errors, every chart drawn."""

from pathlib import Path

import pytest

from scoville.reporting.html import write_report

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium not installed at /usr/bin/chromium"),
]


def test_report_renders_in_headless_chromium_without_errors_or_network(report_runs, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    _, runs = report_runs
    out = write_report(runs, tmp_path / "report.html", title="H200 vs GB300 (sim) vs B200")
    errors: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(out.as_uri())
            page.wait_for_selector("body[data-charts-ready=yes]", timeout=30_000)
            charts = page.evaluate("""() => Array.from(document.querySelectorAll('.chart')).map(el => ({
                id: el.id,
                names: (el.data || []).map(t => t.name),
                drawn: el.querySelectorAll('.scatterlayer .trace').length,
                xtitle: (el.querySelector('.xtitle') || {}).textContent || '',
                ytitle: (el.querySelector('.ytitle') || {}).textContent || '',
                tools: Array.from(el.querySelectorAll('.modebar-btn')).map(b => b.getAttribute('data-title')),
            }))""")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "report-full.png"), full_page=True)
            page.locator("#frontier-kw-interactivity").screenshot(path=str(ARTIFACTS / "frontier-kw-interactivity.png"))
        finally:
            browser.close()
    assert errors == []
    assert requests == [out.as_uri()]
    by_id = {c["id"]: c for c in charts}
    labels = ["H200 ×8", "GB300 NVL72 (sim)", "B200 ×8"]
    for x in ("interactivity", "e2e", "ttft"):
        acc = by_id[f"frontier-accelerator-{x}"]
        assert acc["names"] == [n for label in labels for n in (f"{label} points", label)]
        assert acc["drawn"] == 6
        assert by_id[f"frontier-kw-{x}"]["drawn"] == 6
    assert "tok/s/user" in by_id["frontier-kw-interactivity"]["xtitle"]
    assert "tok/s/kW" in by_id["frontier-kw-interactivity"]["ytitle"]
    for run in ("20261202T100000Z-base00", "20261202T100001Z-cont00", "20261202T100002Z-meas00"):
        for kind in ("ttft", "tpot", "itl"):
            c = by_id[f"cdf-{kind}-{run}"]
            assert c["drawn"] == len(c["names"]) > 0
    assert by_id["power-20261202T100002Z-meas00"]["drawn"] == 8
    assert by_id["ratio-kw-interactivity"]["drawn"] == 3  # parity + two contenders
    assert len(charts) == 2 + 6 + 9 + 1
    # a short toolbar that clears the titles, and nothing that would send an offline report's data anywhere
    assert all(c["tools"] == ["Download plot as a PNG", "Zoom", "Reset axes"] for c in charts)
    assert (ARTIFACTS / "report-full.png").stat().st_size > 10_000


def test_the_decision_control_reads_every_systems_frontier_where_it_is_dragged(report_runs, tmp_path):
    """Two systems: drag the interactivity slider and read the table; every figure is what compare would read."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from scoville.analysis.frontier import frontier
    from scoville.analysis.runs import load_systems
    from scoville.reporting.decision import decision_grid

    _, runs = report_runs
    out = write_report(runs[:2], tmp_path / "two.html")
    systems = load_systems([[runs[0]], [runs[1]]])
    grid = decision_grid(systems)
    index = grid.start // 2   # inside both frontiers: values, not bounds
    x = grid.xs[index]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            for width in (1400, 800):
                page = browser.new_page(viewport={"width": width, "height": 1000})
                page.goto(out.as_uri())
                page.wait_for_selector("body[data-charts-ready=yes]", timeout=30_000)
                page.eval_on_selector("#decide-x", "(el, i) => { el.value = String(i); "
                                      "el.dispatchEvent(new Event('input')); }", index)
                shown_x = float(page.get_attribute("body", "data-decide-x"))
                table = page.eval_on_selector_all("#decide-body tr", "rows => rows.map(r => "
                                                  "Array.from(r.cells).map(c => c.textContent))")
                shapes = page.evaluate("() => document.getElementById('frontier-kw-interactivity').layout.shapes"
                                       ".map(s => s.x0)")
                ARTIFACTS.mkdir(exist_ok=True)
                page.locator("#decide").screenshot(path=str(ARTIFACTS / f"decide-{width}.png"))
                page.close()
        finally:
            browser.close()
    assert shown_x == pytest.approx(x)
    assert x in shapes                      # the dotted line moved to the chosen interactivity
    rows = {r[0]: r[1:] for r in table}
    per_acc = rows["throughput per accelerator (tok/s)"]
    expect = [frontier(s.rows, "interactivity", "total_throughput_per_accelerator").at(x) for s in systems]
    for cell, value in zip(per_acc[:2], expect, strict=True):
        assert float(cell.replace(",", "")) == pytest.approx(value, rel=0.01)
    assert float(per_acc[2].rstrip("×")) == pytest.approx(expect[1] / expect[0], rel=0.01)
    # energy: lower is better (the row says so) and the ratio is still the other's over the baseline's; here the
    # baseline's every point is faster than x and its most frugal one bounds it ("≤"), as decision_grid read it
    energy = rows["energy per output token (J/tok, lower is better)"]
    j = [grid.readings["joules_per_output_token"][k][index] for k in range(2)]
    for cell, reading in zip(energy[:2], j, strict=True):
        assert cell.startswith("≤ ") == (reading.bound == "at most")
        assert float(cell.lstrip("≤ ").replace(",", "")) == pytest.approx(reading.value, rel=0.01)
    assert float(energy[2].rstrip("×")) == pytest.approx(j[1].value / j[0].value, rel=0.01)
