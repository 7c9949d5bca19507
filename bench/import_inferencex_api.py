"""Write ``bench/data/inferencex_api_dsr1.csv`` from InferenceX's published benchmark rows.

The InferenceX dashboard serves its results through an API whose rows name everything a prediction needs: the
system, the serving stack and its image, the weights, MTP on or off, the layout (tensor and expert parallelism,
attention DP, disaggregated pools and their workers), lengths, concurrency, the run's date and GitHub Actions run,
and the measured medians. The dashboard's end-to-end tests keep two captures of that API as fixtures
(SemiAnalysisAI/InferenceX-app ``packages/app/cypress/fixtures/api/benchmarks.json``, the latest run of each
configuration, and ``benchmarks-history.json``; read at vngcloud/InferenceX-app @ 7fe6d62 (2026-08-15), whose
fixtures were last refreshed by InferenceX-app PR #458 of 2026-06-14). This script keeps their DeepSeek-R1 rows as
facts (one per run, deployment, lengths and concurrency), the fields ``validation_inferencex_api`` reads:

    python bench/import_inferencex_api.py benchmarks.json benchmarks-history.json

The rows write a deployment's GPU count as ``tp`` (InferenceX's convention: attention DP runs over those GPUs,
``ep`` splits the experts over them); their ``num_*_gpu`` fields multiply it by ``ep`` (the same artifact
``validation_data`` undoes in silicon_sample.csv), while ``tput_per_gpu`` divides by ``tp``: throughput × tp
matches concurrency × mean request length / median end-to-end latency within 3% at the median (0.97) on every
aggregated row, with and without expert parallelism.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "inferencex_api_dsr1.csv"
FIELDS = ["date", "run_id", "hardware", "framework", "image", "precision", "spec", "disagg", "isl", "osl", "conc",
          "tp", "ep", "dp_attention", "prefill_tp", "prefill_ep", "prefill_dp_attention", "prefill_workers",
          "decode_workers", "ttft_ms", "tpot_ms", "interactivity", "tput_per_gpu", "output_tput_per_gpu"]


def _row(r: dict) -> dict[str, object]:
    """One published run as the CSV keeps it (medians in milliseconds, throughput per GPU in tok/s)."""
    m = r["metrics"]
    run = re.search(r"/runs/(\d+)", r.get("run_url") or "")
    return {"date": r["date"], "run_id": run.group(1) if run else "", "hardware": r["hardware"],
            "framework": r["framework"], "image": r.get("image") or "", "precision": r["precision"],
            "spec": r["spec_method"], "disagg": int(bool(r["disagg"])), "isl": r["isl"], "osl": r["osl"],
            "conc": r["conc"], "tp": r["decode_tp"], "ep": r["decode_ep"],
            "dp_attention": int(bool(r["decode_dp_attention"])), "prefill_tp": r["prefill_tp"],
            "prefill_ep": r["prefill_ep"], "prefill_dp_attention": int(bool(r["prefill_dp_attention"])),
            "prefill_workers": r["prefill_num_workers"], "decode_workers": r["decode_num_workers"],
            "ttft_ms": round(m["median_ttft"] * 1e3, 3), "tpot_ms": round(m["median_tpot"] * 1e3, 4),
            "interactivity": round(m["median_intvty"], 3), "tput_per_gpu": round(m["tput_per_gpu"], 3),
            "output_tput_per_gpu": round(m.get("output_tput_per_gpu") or 0.0, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("fixtures", nargs="+", type=Path, help="the API captures (JSON lists of benchmark rows)")
    args = ap.parse_args()
    rows: dict[tuple, dict[str, object]] = {}
    for path in args.fixtures:
        for r in json.loads(path.read_text()):
            if r.get("model") != "dsr1":
                continue
            row = _row(r)
            # the run and its deployment, lengths and concurrency (the history capture leaves the image out)
            key = tuple(row[f] for f in FIELDS[:19] if f != "image")
            if key not in rows or not rows[key]["image"]:
                rows[key] = row
    OUT.parent.mkdir(exist_ok=True)
    with OUT.open("w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for key in sorted(rows, key=str):
            w.writerow(rows[key])
    print(f"{len(rows)} runs -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
