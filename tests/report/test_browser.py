"""The report opened in real headless Chromium: renders offline, no errors, every chart drawn."""

from pathlib import Path

import pytest

from scoville.report.html import write_report

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
