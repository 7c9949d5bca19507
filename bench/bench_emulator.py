"""Emulator fidelity and peer agreement (issue 3), figures printed, nothing asserted.

(a) fidelity — one system/model, an 8k/1k closed-loop sweep (concurrency
    1..64, few requests a point): the emulator measured over real HTTP with
    scoville's client vs ``scoville.sim.driver.simulate_run`` with the same
    pinned SimConfig, workload and load plan. Per point: median TPOT and
    output / total throughput, and their ratios (target: within 5%).
(b) pacing — see bench/bench_emulator_pacing.py (lag of each token against
    the engine's schedule); this script also prints the release-lag
    quantiles the emulator recorded during (a), i.e. with the real engine.
(c) peer — ``aiperf`` (PyPI; in its own venv, default /tmp/peer-venv,
    created with --install-peer) runs unchanged against the emulator with the
    same concurrency / lengths as one scoville point; TTFT, ITL/TPOT and
    output throughput side by side (target: within 5%).

    python bench/bench_emulator.py                       # (a) + (c), ~5 minutes on 2 cores
    python bench/bench_emulator.py --part fidelity --requests-per-point 2
    python bench/bench_emulator.py --part peer --install-peer
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scoville.client.config import ClientConfig  # noqa: E402
from scoville.client.sweep import Sweep, run_sweep  # noqa: E402
from scoville.emulator.build import pinned_config  # noqa: E402
from scoville.emulator.launch import spawn_emulator  # noqa: E402
from scoville.load import LoadPoint  # noqa: E402
from scoville.power.sources import plan_power  # noqa: E402
from scoville.results.store import read_point_metrics  # noqa: E402
from scoville.sim.driver import simulate_run  # noqa: E402
from scoville.workload.synthetic import scenario  # noqa: E402

HW, MODEL = "h200", "llama-3.1-8b"
CONFIG = {"max_num_seqs": 256, "max_num_batched_tokens": 8192}


def lag_quantiles(base_url: str, name: str = "scoville_emulator_token_release_lag_seconds") -> dict[str, float]:
    with urllib.request.urlopen(base_url + "/metrics") as r:
        text = r.read().decode()
    buckets = [(float("inf") if m.group(1) == "+Inf" else float(m.group(1)), int(m.group(2))) for m in re.finditer(
        name + r'_bucket\{[^}]*le="([^"]+)"\} (\d+)', text)]
    total = buckets[-1][1] or 1

    def q(p: float) -> float:
        prev_b, prev_c = 0.0, 0
        for b, c in buckets:
            if c >= p * total:
                if b == float("inf"):
                    return prev_b
                return prev_b + (b - prev_b) * (p * total - prev_c) / max(c - prev_c, 1)
            prev_b, prev_c = b, c
        return prev_b

    within = next(c for b, c in buckets if b == 0.001) / total
    return {"events": buckets[-1][1], "p50_ms": q(0.5) * 1e3, "p99_ms": q(0.99) * 1e3, "within_1ms": within}


def server_ttft(base_url: str) -> tuple[float, int]:
    """(sum, count) of the emulator's own TTFT histogram: arrival to first token written."""
    with urllib.request.urlopen(base_url + "/metrics") as r:
        text = r.read().decode()

    def sample(name: str) -> str:
        m = re.search(name + r"\{[^}]*\} (\S+)", text)
        if m is None:
            raise SystemExit(f"{base_url}/metrics has no {name} sample: the emulator no longer exports vLLM's "
                             "TTFT histogram under that name; update server_ttft to match")
        return m.group(1)

    return float(sample("vllm:time_to_first_token_seconds_sum")), int(sample("vllm:time_to_first_token_seconds_count"))


def measure(handle, workload, points: list[LoadPoint], runs: Path) -> list[dict]:
    cfg = ClientConfig(base_url=handle.base_url, model=handle.model, vocab_size=32000)
    plan = plan_power("rated", hardware=HW, accelerators=handle.system["accelerators"])
    sweep = Sweep(cfg=cfg, workload=workload, points=points, power=plan, system=handle.system,
                  model={"name": handle.model}, emulator={"hardware": HW, "model": MODEL, "config": handle.config})
    return run_sweep(sweep, runs).rows


def fidelity(args: argparse.Namespace, runs: Path) -> None:
    workload = scenario("8k1k", seed=args.seed)
    conc = [int(c) for c in args.concurrency.split(",")]
    points = [LoadPoint(index=i, concurrency=c, num_requests=max(args.min_requests, args.requests_per_point * c))
              for i, c in enumerate(conc)]
    cfg = pinned_config(HW, MODEL, CONFIG)
    t = time.perf_counter()
    sim_dir = simulate_run(cfg, workload, points, runs, seed=args.seed)
    t_sim = time.perf_counter() - t
    sim = {r["point"]: r for r in read_point_metrics(sim_dir)}
    t = time.perf_counter()
    with spawn_emulator(HW, MODEL, CONFIG, high_priority=args.high_priority,
                        spin_horizon_ms=args.spin_horizon_ms) as handle:
        rows = measure(handle, workload, points, runs)
        lag = lag_quantiles(handle.base_url)
        adv = lag_quantiles(handle.base_url, "scoville_emulator_engine_advance_seconds")
    t_emu = time.perf_counter() - t
    print(f"\n(a) fidelity: {HW} / {MODEL} / 8k1k, config {CONFIG}, requests per point = "
          f"max({args.min_requests}, {args.requests_per_point}×C); simulate {t_sim:.1f} s, emulator {t_emu:.0f} s")
    print(f"{'C':>4} {'n':>4} {'TPOT sim ms':>11} {'TPOT emu ms':>11} {'ratio':>6} {'out tok/s sim':>13} "
          f"{'out tok/s emu':>13} {'ratio':>6} {'tot tok/s ratio':>15} {'TTFT sim s':>10} {'TTFT emu s':>10}")
    worst = 0.0
    for p, r in zip(points, rows, strict=False):
        s = sim[p.index]
        rt = r["tpot_s_median"] / s["tpot_s_median"]
        ro = r["output_throughput"] / s["output_throughput"]
        rtot = r["total_throughput"] / s["total_throughput"]
        worst = max(worst, abs(rt - 1), abs(ro - 1), abs(rtot - 1))
        print(f"{p.concurrency:4d} {r['num_ok']:4d} {s['tpot_s_median'] * 1e3:11.3f} {r['tpot_s_median'] * 1e3:11.3f} "
              f"{rt:6.3f} {s['output_throughput']:13.1f} {r['output_throughput']:13.1f} {ro:6.3f} {rtot:15.3f} "
              f"{s['ttft_s_median']:10.3f} {r['ttft_s_median']:10.3f}")
    print(f"worst deviation of TPOT / output / total throughput: {worst:.1%} (target < 5%)")
    print(f"token release lag during (a), real engine: {lag['events']} events, p50 {lag['p50_ms']:.3f} ms, "
          f"p99 {lag['p99_ms']:.3f} ms, {lag['within_1ms']:.1%} within 1 ms; engine.advance() calls: "
          f"{adv['events']}, p50 {adv['p50_ms']:.3f} ms, p99 {adv['p99_ms']:.3f} ms; load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def peer_python(venv: Path) -> Path | None:
    return venv / "bin" / "python" if (venv / "bin" / "aiperf").exists() else None


def make_tokenizer(py: Path, folder: Path) -> None:
    """A local WordLevel tokenizer over the emulator's own words (nothing from a hub).

    aiperf's ``--prompt-corpus random`` decodes random ids of this vocabulary
    into text; the emulator's tokenizer maps each such word back to one token,
    so the prompt lengths aiperf intends are the ones the server counts.
    """
    from scoville.emulator.tokenizer import NUM_SPECIAL, word

    words = {word(i): i for i in range(NUM_SPECIAL, NUM_SPECIAL + 4000)}
    code = f"""
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
vocab = {{"[UNK]": 0, **{words!r}}}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained({str(folder)!r})
"""
    subprocess.run([str(py), "-c", code], check=True, capture_output=True)


def run_aiperf(venv: Path, handle, conc: int, n: int, warmup: int, isl: int, osl: int, work: Path) -> dict:
    py = peer_python(venv)
    if py is None:
        return {"error": f"aiperf not installed in {venv}; run with --install-peer"}
    make_tokenizer(py, work / "tok")
    cmd = [str(venv / "bin" / "aiperf"), "profile", "--model", handle.model, "--url", handle.base_url,
           "--endpoint-type", "completions", "--streaming", "--tokenizer", str(work / "tok"),
           "--prompt-corpus", "random", "--concurrency", str(conc), "--request-count", str(n),
           "--synthetic-input-tokens-mean", str(isl), "--synthetic-input-tokens-stddev", "0",
           "--output-tokens-mean", str(osl), "--output-tokens-stddev", "0",
           "--extra-inputs", "ignore_eos:true", "--extra-inputs", f"min_tokens:{osl}", "--use-server-token-count",
           "--ui-type", "none", "--no-gpu-telemetry", "--no-server-metrics",
           "--artifact-dir", str(work / "artifacts"), "--random-seed", "1"]
    if warmup:
        cmd += ["--warmup-request-count", str(warmup)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    found = list((work / "artifacts").rglob("profile_export_aiperf.json"))
    if proc.returncode != 0 or not found:
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-4:])
        return {"error": f"aiperf exit {proc.returncode}: {tail[:400]}"}
    data = json.loads(found[0].read_text())

    def metric(name: str, stat: str = "p50") -> float | None:
        m = data.get(name) or next((x for x in data.get("records", []) if x.get("tag") == name), None)
        return None if m is None else m.get(stat, m.get("avg"))

    ttft, ttft_mean, itl = (metric("time_to_first_token"), metric("time_to_first_token", "avg"),
                            metric("inter_token_latency"))
    if ttft is None or ttft_mean is None or itl is None:
        return {"error": f"{found[0]} lacks time_to_first_token or inter_token_latency: aiperf's export format "
                         "changed; update run_aiperf's metric names"}
    return {"ttft_s": ttft / 1e3, "ttft_mean_s": ttft_mean / 1e3, "itl_s": itl / 1e3,
            "output_throughput": metric("output_token_throughput", "avg"),
            "isl": metric("input_sequence_length", "avg"), "osl": metric("output_sequence_length", "avg"),
            "requests": metric("request_count", "avg")}


def peer(args: argparse.Namespace, runs: Path) -> None:
    conc, n, isl, osl = args.peer_concurrency, args.peer_requests, args.peer_isl, args.peer_osl
    warmup = 2 * conc if args.peer_warmup is None else args.peer_warmup
    workload = scenario(None, isl=isl, osl=osl, range_ratio=1.0, seed=args.seed)
    work = Path(tempfile.mkdtemp(prefix="scoville-peer-"))
    try:
        with spawn_emulator(HW, MODEL, CONFIG, spin_horizon_ms=args.spin_horizon_ms) as handle:
            s0 = server_ttft(handle.base_url)
            row = measure(handle, workload, [LoadPoint(index=0, concurrency=conc, num_requests=n,
                                                       warmup_requests=warmup)], runs)[0]
            s1 = server_ttft(handle.base_url)
            ai = run_aiperf(args.peer_venv, handle, conc, n, warmup, isl, osl, work)
            s2 = server_ttft(handle.base_url)
        # The server's own mean TTFT during each client's run (the probe's request included with scoville's).
        srv_ours = (s1[0] - s0[0]) / max(s1[1] - s0[1], 1)
        srv_peer = (s2[0] - s1[0]) / max(s2[1] - s1[1], 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n(c) peer: aiperf vs scoville client, emulator {HW}/{MODEL}, C={conc}, {n} requests after {warmup} "
          f"warm-up, ISL {isl} OSL {osl}, ignore_eos")
    if "error" in ai:
        print(f"aiperf did not run: {ai['error']}")
        return
    print(f"aiperf measured ISL {ai['isl']:.0f} OSL {ai['osl']:.0f} over {ai['requests']:.0f} requests")
    pairs = [("TTFT p50 s", row["ttft_s_median"], ai["ttft_s"]),
             ("TPOT/ITL p50 s", row["tpot_s_median"], ai["itl_s"]),
             ("output tok/s", row["output_throughput"], ai["output_throughput"])]
    print(f"{'metric':16} {'scoville':>10} {'aiperf':>10} {'ratio':>7}")
    for name, a, b in pairs:
        print(f"{name:16} {a:10.4f} {b:10.4f} {a / b:7.3f}")
    print(f"TTFT mean, client vs the server's own record of each client's requests (warm-ups and the probe "
          f"included on the server's side): scoville {row['ttft_s_mean']:.4f} vs server {srv_ours:.4f} "
          f"({row['ttft_s_mean'] / srv_ours:.3f}); aiperf {ai['ttft_mean_s']:.4f} vs server {srv_peer:.4f} "
          f"({ai['ttft_mean_s'] / srv_peer:.3f}). The server's figures differ when the clients' arrival patterns "
          "do (synchronised waves queue behind each other's prefill); a client/server ratio far above 1 is time "
          "the client spent before its request reached the server.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["fidelity", "peer", "all"], default="all")
    ap.add_argument("--concurrency", default="1,2,4,8,16,32,64")
    ap.add_argument("--requests-per-point", type=int, default=2)
    ap.add_argument("--min-requests", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peer-venv", type=Path, default=Path("/tmp/peer-venv"))
    ap.add_argument("--install-peer", action="store_true")
    ap.add_argument("--high-priority", action="store_true", help="run the emulator at nice -20 (root)")
    ap.add_argument("--spin-horizon-ms", type=float, help="the emulator's --spin-horizon-ms (default: its own)")
    ap.add_argument("--peer-concurrency", type=int, default=8)
    ap.add_argument("--peer-requests", type=int, default=64)
    ap.add_argument("--peer-warmup", type=int, help="warm-up requests for both clients (default 2 x concurrency)")
    ap.add_argument("--peer-isl", type=int, default=1024)
    ap.add_argument("--peer-osl", type=int, default=256)
    args = ap.parse_args()
    if args.install_peer and peer_python(args.peer_venv) is None:
        subprocess.run([sys.executable, "-m", "venv", str(args.peer_venv)], check=True)
        subprocess.run([str(args.peer_venv / "bin" / "pip"), "install", "-q", "aiperf"], check=True)
    runs = Path(tempfile.mkdtemp(prefix="scoville-bench-emu-"))
    print(f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; runs in {runs}")
    try:
        if args.part in ("fidelity", "all"):
            fidelity(args, runs)
        if args.part in ("peer", "all"):
            peer(args, runs)
    finally:
        shutil.rmtree(runs, ignore_errors=True)


if __name__ == "__main__":
    main()
