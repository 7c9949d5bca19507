"""scoville.sim beside NVIDIA's AIConfigurator on the same 8k/1k scenarios, with the InferenceX reference.

    python bench/bench_sim_vs_aiconfigurator.py [--aic /tmp/aic-venv/bin/aiconfigurator] [--only gb200]

AIConfigurator (PyPI ``aiconfigurator``; install it in its own venv if it conflicts:
``python -m venv /tmp/aic-venv && /tmp/aic-venv/bin/pip install aiconfigurator``) predicts from measured
per-operator databases for H100/H200/B200/B300/GB200/GB300. Both tools run here in the same process
tree, one scenario after the other, each timed; both are asked for their whole frontier (AIC with its
TTFT/TPOT SLA opened to 100 s / 1 s so it filters nothing) and the same three yardsticks are read off:

* peak throughput per rated kW, in TOTAL (input + output) tokens/s per GPU — InferenceX's convention.
  AIC reports *output* tokens/s/GPU (``tokens/s = seq/s x OSL`` in its pareto.csv), so its figure is
  multiplied by (ISL + OSL) / OSL;
* highest interactivity (tokens/s/user = 1 / TPOT);
* lowest end-to-end request latency.

Differences that are not the models': AIC uses fixed ISL/OSL (8192/1024) while scoville uses InferenceX's
uniform [0.8 L, L] draws (means ~7,373/922); AIC runs DeepSeek-R1 from the FP8 checkpoint (it ships no
NVFP4 DeepSeek config and its default mode has no quantization override), scoville runs the precision
InferenceX used; AIC searches up to --aic-gpus GPUs.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_sim_calibration as cal  # noqa: E402  (shares the default search and its yardsticks)
from scoville.catalog.hardware import load_hardware  # noqa: E402
from scoville.sim.frameworks import load_framework  # noqa: E402

ISL, OSL = 8192, 1024
AIC_SYSTEMS = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "b300": "b300_sxm", "gb200": "gb200",
               "gb300": "gb300"}
AIC_MODELS = {"gpt-oss-120b": "openai/gpt-oss-120b", "deepseek-r1": "deepseek-ai/DeepSeek-R1",
              "kimi-k2.5": "nvidia/Kimi-K2.5-NVFP4"}
# (model, hardware, precision scoville runs): the brief's both-can-do set, then the reference systems.
SCENARIOS = [
    ("gpt-oss-120b", "h200", None), ("gpt-oss-120b", "b200", None), ("gpt-oss-120b", "gb200", None),
    ("deepseek-r1", "h200", None), ("deepseek-r1", "b200", "nvfp4"), ("deepseek-r1", "gb200", "nvfp4"),
    ("deepseek-r1", "gb300", "nvfp4"), ("kimi-k2.5", "gb300", "nvfp4"),
]


def run_aic(aic: str, model: str, hw: str, gpus: int, timeout: int) -> tuple[dict[str, float] | None, float, str]:
    """AIC's frontier yardsticks (per rated kW of scoville's catalog entry), its wall time, and a note."""
    out = Path(tempfile.mkdtemp(prefix="aic-"))
    cmd = [aic, "cli", "default", "--model-path", AIC_MODELS[model], "--system", AIC_SYSTEMS[hw],
           "--total-gpus", str(gpus), "--isl", str(ISL), "--osl", str(OSL), "--ttft", "100000", "--tpot", "1000",
           "--save-dir", str(out), "--no-color", "--log-level", "ERROR"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - t0, f"timed out after {timeout} s"
    wall = time.perf_counter() - t0
    rows: list[dict[str, str]] = []
    for f in out.rglob("pareto.csv"):
        with f.open() as fh:
            rows += list(csv.DictReader(fh))
    shutil.rmtree(out, ignore_errors=True)
    if not rows:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, wall, f"no frontier (rc={proc.returncode}): {tail[0][:120]}"
    kw = load_hardware(hw).rated_watts / 1000
    num = lambda r, k: float(r[k])  # noqa: E731
    return {
        "peak_tput_per_kw": max(num(r, "tokens/s/gpu") for r in rows) * (ISL + OSL) / OSL / kw,
        "max_interactivity": max(num(r, "tokens/s/user") for r in rows),
        "min_e2e_s": min(num(r, "request_latency") for r in rows) / 1000,
    }, wall, f"{len(rows)} frontier rows"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--aic", default=shutil.which("aiconfigurator") or "/tmp/aic-venv/bin/aiconfigurator")
    ap.add_argument("--aic-gpus", type=int, default=8, help="AIC's --total-gpus (NVL72 systems get 2x)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per AIC run")
    ap.add_argument("--only", default=None, help="run only scenarios whose hardware or model contains this")
    args = ap.parse_args(argv)
    ref = cal.reference()
    refs = {(p["model"], p["hardware"]): p for p in ref["points"]}
    have_aic = Path(args.aic).exists()
    if not have_aic:
        print(f"AIConfigurator not found at {args.aic}: install it (pip install aiconfigurator) or pass --aic")
    keys = ("peak_tput_per_kw", "max_interactivity", "min_e2e_s")
    print(f"{'scenario':24s} {'metric':20s} {'InferenceX':>10s} {'scoville':>10s} {'AIC':>10s}   time scoville / AIC")
    for model, hw_name, prec in SCENARIOS:
        if args.only and args.only not in hw_name and args.only not in model:
            continue
        hw = load_hardware(hw_name)
        t0 = time.perf_counter()
        fig = cal.predict(model, hw_name, prec, load_framework("trtllm"))
        sc = {k: getattr(fig, k) for k in keys}
        t_sc = time.perf_counter() - t0
        gpus = args.aic_gpus * (2 if hw.scaleup_domain > 8 else 1)
        aic, t_aic, note = run_aic(args.aic, model, hw_name, gpus, args.timeout) if have_aic else (None, 0.0, "n/a")
        r = refs.get((model, hw_name), {})
        for i, k in enumerate(keys):
            ref_v = f"{r[k]:10.4g}" if k in r else f"{'-':>10s}"
            a = f"{aic[k]:10.4g}" if aic else f"{'-':>10s}"
            timing = f"   {t_sc:6.2f} s / {t_aic:6.1f} s ({note})" if i == 0 else ""
            label = f"{model} {hw_name}" if i == 0 else ""
            print(f"{label:24s} {k:20s} {ref_v} {sc.get(k, float('nan')):10.4g} {a}{timing}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
