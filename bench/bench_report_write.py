"""Speed of ``write_report`` on an InferenceX-shaped sweep (not a test: prints figures).

The sweep command writes the report after every sweep, so it must stay fast:
target < 2 s for a 7-point run. Each point has 10·C measured requests of 1,024
streamed tokens (C = 1..64: 1,270 requests, 1.3 M token timestamps per run).

    python bench/bench_report_write.py
    python bench/bench_report_write.py --open   # also: time to all charts drawn in headless Chromium, for the
                                                # report as written (plotly.js packed) and an inline copy, paired
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from scoville.metrics import recompute
from scoville.results.manifest import base_manifest
from scoville.results.schema import ARROW_SCHEMA
from scoville.results.store import RunWriter

OSL = 1024


def _ordered(columns: dict) -> pa.Table:
    """Columns in the run schema's order (RunWriter casts by position)."""
    return pa.table({name: columns[name] for name in ARROW_SCHEMA.names})


def sweep_run(root: Path, hardware: str, watts: float, speed: float, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    plan = [{"index": i, "concurrency": 2 ** i, "label": f"c{2 ** i}"} for i in range(7)]
    manifest = base_manifest(source="measured", target={}, system={"hardware": hardware, "accelerators": 8,
                             "cost_per_accelerator_hour": 2.0}, model={"name": "m", "precision": "fp8"}, serving={},
                             workload={"name": "1k1k"}, load_plan={"points": plan},
                             power={"source": "rated", "boundary": "chip", "watts_per_accelerator": watts})
    w = RunWriter.create(root, manifest, journal=False)
    t = 0.0
    for p in plan:
        c = p["concurrency"]
        n = 10 * c
        tpot = 0.01 * (1 + c / 16) / speed
        sent = t + np.arange(n) * (OSL * tpot) / c
        first = sent + 0.05 * (1 + c / 8) * rng.uniform(0.8, 1.2, n)
        gaps = rng.lognormal(np.log(tpot), 0.2, (n, OSL - 1))
        times = np.concatenate([first[:, None], first[:, None] + np.cumsum(gaps, axis=1)], axis=1)
        w.write_point(p["index"], _ordered({
            "point": pa.array([p["index"]] * n, pa.int32()), "request_id": [f"{p['index']}-{i}" for i in range(n)],
            "t_sent": sent, "t_first_token": first, "t_done": times[:, -1],
            "token_times": pa.array(list(times), pa.list_(pa.float64())),
            "token_counts": pa.array([np.ones(OSL, dtype=np.int32)] * n, pa.list_(pa.int32())),
            "input_tokens": pa.array([1024] * n, pa.int64()), "output_tokens": pa.array([OSL] * n, pa.int64()),
            "ok": [True] * n, "warmup": [False] * n, "turn": pa.array([0] * n, pa.int32()),
            "session_id": pa.nulls(n, pa.string()), "cached_tokens": pa.nulls(n, pa.int64()),
            "error": pa.nulls(n, pa.string()), "http_status": pa.array([200] * n, pa.int32()),
            "worker": pa.nulls(n, pa.string()), "token_count_source": ["server"] * n}))
        t = float(times[:, -1].max()) + 1.0
    w.finish()
    recompute(w.run_dir)
    return w.run_dir


def open_times(packed: Path, rounds: int = 4) -> None:
    """Seconds from navigation to every chart drawn, for ``packed`` and a copy with plotly.js inlined as text."""
    from playwright.sync_api import sync_playwright

    from scoville.reporting.html import plotly_js

    text = packed.read_text()
    start = text.index('<script id="plotly-gz"')
    end = text.index("</script>", start) + len("</script>")
    inline = (text[:start] + "<script>" + plotly_js().replace("</script", "<\\/script") + "</script>" + text[end:])
    inline_path = packed.with_name("inline.html")
    inline_path.write_text(inline.replace("loadPlotly().then(", "Promise.resolve().then("))
    times: dict[str, list[float]] = {"packed": [], "inline": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
        for _ in range(rounds):
            for name, path in (("inline", inline_path), ("packed", packed)):
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                t = time.perf_counter()
                page.goto(path.as_uri())
                page.wait_for_selector("body[data-charts-ready=yes]", timeout=60_000)
                times[name].append(time.perf_counter() - t)
                page.close()
        browser.close()
    for name, path in (("packed", packed), ("inline", inline_path)):
        print(f"open in Chromium, {name} ({path.stat().st_size / 1e6:.1f} MB): charts drawn after "
              + ", ".join(f"{t:.2f}" for t in times[name]) + " s")


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="scoville-bench-"))
    a = sweep_run(root, "H200", 700, 1.0, 0)
    b = sweep_run(root, "B200", 1000, 2.0, 1)
    # cold: a fresh interpreter, imports included, as when `scoville sweep` ends
    code = ("import time, sys; t = time.perf_counter(); from pathlib import Path; "
            "from scoville.reporting.html import write_report; "
            f"write_report([Path({str(a)!r})], Path({str(root / 'cold.html')!r})); "
            "print(f'{time.perf_counter() - t:.2f}')")
    cold = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    print(f"write_report, 1 run x 7 points, fresh process incl. imports: {cold} s (target < 2 s)")
    from scoville.reporting.html import write_report

    for label, dirs in (("1 run", [a]), ("2 runs", [a, b])):
        times = []
        for _ in range(3):
            t = time.perf_counter()
            out = write_report(dirs, root / "warm.html")
            times.append(time.perf_counter() - t)
        print(f"write_report, {label} x 7 points, warm: best {min(times):.2f} s of 3; "
              f"{out.stat().st_size / 1e6:.1f} MB")
    if "--open" in sys.argv[1:]:
        open_times(write_report([a], root / "packed.html"))


if __name__ == "__main__":
    main()
