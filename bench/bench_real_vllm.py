"""scoville and `vllm bench serve` against a real vLLM, each judged by the server's own record (issue 14).

A random-weight Llama (built here, ``realvllm/build_model.py``) is served by the CPU build of vLLM in its own
venv (``realvllm/server.py``; ../shared/REAL-VLLM.md). At each load the two clients run back to back, in
alternating order, with fixed lengths, ``ignore_eos`` and no warm-up, so the server's /metrics histograms,
scraped before and after each client run, hold exactly the requests of that run. Per run it prints:

* the client's mean TTFT, TPOT and E2E, and each divided by (or minus) the server's mean for the same requests:
  a client whose TPOT is 1.000 of the server's adds nothing to it; the TTFT difference is transport + client.
  For scoville the server's figures are the ones scoville itself scraped over its point (its probe request
  comes before); for `vllm bench serve`, a scrape before and after the command;
* the client's CPU time (both processes' user + system, import time included; vLLM's CLI imports torch).

Then, unless ``--no-search``, a ``scoville sweep --slo ... --search`` on the same server, seeded by the
simulator's prediction of the calibrated CPU entry, with the points it measured.

    python bench/bench_real_vllm.py                      # ~15 min on 2 cores (server start ~2 min)
    python bench/bench_real_vllm.py --install            # first time: vLLM venv (~4 min) and model (~2 min)
    python bench/bench_real_vllm.py --loads c=1,c=4 --rounds 1

Two shared cores make the absolute figures noisy: compare each client with the server's record of its own
run, never one client's average with the other's (the server itself runs at different speeds run to run).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow.parquet as pq  # noqa: E402

from realvllm.server import SERVED_NAME, RealVllm, RealVllmError, ensure_model, ensure_venv  # noqa: E402
from scoville.server_metrics import Scrape, WindowFigures, parse_samples, server_requests, window_figures  # noqa: E402

DEFAULT_VENV = Path("/work/realvllm/venv")
DEFAULT_MODEL = Path("/work/realvllm/tiny-llama")


@dataclass(frozen=True)
class Load:
    """One load level: closed-loop concurrency ``c=N`` or open-loop rate ``r=X`` (requests/s)."""

    kind: str          # "c" | "r"
    value: float
    requests: int

    @property
    def label(self) -> str:
        return f"c={int(self.value)}" if self.kind == "c" else f"r={self.value:g}/s"


@dataclass(frozen=True)
class ServerSide:
    """The server's own means over one client run's requests, and whose scrapes gave them."""

    requests: int | None
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    window: str                 # "scoville's scrape" (its point window) | "outside" (before/after the run)


@dataclass(frozen=True)
class ClientRun:
    """What one client reported for one run, the CPU it spent, and (scoville) what it scraped from the server."""

    client: str
    load: Load
    completed: int
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    cpu_s: float
    server: ServerSide | None = None


def _ms(v: float | None) -> float:
    return v * 1e3 if v else float("nan")


def parse_loads(text: str, per_stream: int, per_rate: int) -> list[Load]:
    loads = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, value = part.partition("=")
        if kind not in ("c", "r") or not value:
            raise SystemExit(f"bad load {part!r}: write c=N (concurrency) or r=X (requests/s)")
        v = float(value)
        loads.append(Load(kind, v, int(v) * per_stream if kind == "c" else per_rate))
    return loads


def scrape(url: str) -> Scrape:
    """The server's engine samples now, parsed by the same code ``scoville sweep`` scrapes with."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        return {(s.metric, s.labels): s.value for s in parse_samples(r.read().decode())}


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_scoville(url: str, load: Load, isl: int, osl: int, runs: Path, seed: int) -> ClientRun:
    """``scoville run`` of one point, no warm-up; its figures from the run's own points.parquet."""
    flag = ["--concurrency", str(int(load.value))] if load.kind == "c" else ["--rate", f"{load.value:g}"]
    cmd = [sys.executable, "-c", "from scoville.cli import main; main()", "run", "--url", url, "--isl", str(isl),
           "--osl", str(osl), "--range-ratio", "1", *flag, "--num-requests", str(load.requests),
           "--warmup-requests", "0", "--runs", str(runs), "--seed", str(seed), "--json"]
    cpu0 = children_cpu_s()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    cpu = children_cpu_s() - cpu0
    run_dir = Path(json.loads(out)["run_dir"])
    row = pq.read_table(run_dir / "points.parquet").to_pylist()[0]
    # scoville scrapes the server at its point's start and end: that window holds exactly the point's requests
    # (an outside scrape before the command would also hold its probe request)
    server = (ServerSide(row["server_requests"], _ms(row["server_ttft_s_mean"]), _ms(row["server_tpot_s_mean"]),
                         _ms(row["server_e2e_s_mean"]), "scoville's scrape")
              if row.get("server_requests") is not None else None)
    return ClientRun("scoville", load, int(row["num_ok"]), row["ttft_s_mean"] * 1e3, row["tpot_s_mean"] * 1e3,
                     row["e2e_s_mean"] * 1e3, cpu, server)


def run_vllm_bench(venv: Path, model: Path, url: str, load: Load, isl: int, osl: int, seed: int) -> ClientRun:
    """``vllm bench serve`` of one point with the same lengths; its figures from its saved result JSON."""
    flag = (["--max-concurrency", str(int(load.value))] if load.kind == "c"
            else ["--request-rate", f"{load.value:g}"])
    with tempfile.TemporaryDirectory(prefix="scoville-vllm-bench-") as tmp:
        cmd = [str(venv / "bin" / "vllm"), "bench", "serve", "--backend", "vllm", "--base-url", url,
               "--model", SERVED_NAME, "--tokenizer", str(model), "--dataset-name", "random",
               "--random-input-len", str(isl), "--random-output-len", str(osl), "--random-range-ratio", "0",
               "--ignore-eos", "--num-warmups", "0", *flag, "--num-prompts", str(load.requests),
               "--percentile-metrics", "ttft,tpot,itl,e2el", "--seed", str(seed),
               "--save-result", "--result-dir", tmp, "--result-filename", "result.json"]
        cpu0 = children_cpu_s()
        subprocess.run(cmd, check=True, capture_output=True, text=True,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        cpu = children_cpu_s() - cpu0
        result = json.loads((Path(tmp) / "result.json").read_text())
    return ClientRun("vllm bench", load, int(result["completed"]), result["mean_ttft_ms"], result["mean_tpot_ms"],
                     result["mean_e2el_ms"], cpu)


def outside(fig: WindowFigures) -> ServerSide:
    return ServerSide(server_requests(fig), _ms(fig.means.get("ttft")), _ms(fig.means.get("tpot")),
                      _ms(fig.means.get("e2e")), "outside")


def judged(run: ClientRun, server: ServerSide) -> str:
    """One table row: the client's means beside the server's for the same requests."""
    return (f"| {run.load.label} | {run.client} | {run.completed} / {server.requests} | {server.window} | "
            f"{run.ttft_ms:.1f} | {run.ttft_ms - server.ttft_ms:+.1f} | {run.tpot_ms:.2f} | "
            f"{run.tpot_ms / server.tpot_ms:.4f} | {run.e2e_ms:.0f} | {run.e2e_ms / server.e2e_ms:.4f} | "
            f"{run.cpu_s:.1f} |")


def measure_clients(server: RealVllm, venv: Path, model: Path, loads: list[Load], rounds: int, isl: int, osl: int,
                    runs: Path) -> list[str]:
    rows = ["| load | client | done client / server | server window | TTFT ms | client − server TTFT ms | "
            "TPOT ms | TPOT ÷ server | E2E ms | E2E ÷ server | client CPU s |", "|" + " --- |" * 11]
    for rnd in range(rounds):
        for i, load in enumerate(loads):
            order = ("scoville", "vllm bench") if (i + rnd) % 2 == 0 else ("vllm bench", "scoville")
            for client in order:
                seed = 1000 * rnd + 10 * i + (client == "scoville")
                before = scrape(server.url)
                run = (run_scoville(server.url, load, isl, osl, runs, seed) if client == "scoville"
                       else run_vllm_bench(venv, model, server.url, load, isl, osl, seed))
                time.sleep(0.5)   # the server records a request's histograms just after its last byte
                rows.append(judged(run, run.server or outside(window_figures([before, scrape(server.url)]))))
                print(rows[-1], flush=True)
    return rows


def slo_search(server: RealVllm, runs: Path, isl: int, osl: int, slo: str, predict: str) -> str:
    """``scoville sweep --slo ... --search`` on the real server, seeded by the simulator; its one-line answer."""
    cmd = [sys.executable, "-c", "from scoville.cli import main; main()", "sweep", "--url", server.url,
           "--isl", str(isl), "--osl", str(osl), "--range-ratio", "1", "--slo", slo, "--search",
           "--predict", predict, "--runs", str(runs)]
    print("$ scoville " + " ".join(cmd[3:]), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return f"search failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}"
    return "\n".join(line for line in done.stdout.splitlines() if line.strip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="vLLM's own venv (never scoville's)")
    ap.add_argument("--install", action="store_true", help="create the venv and build the model when missing")
    ap.add_argument("--model-dir", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--port", type=int, default=8370)
    ap.add_argument("--loads", default="c=1,c=4,c=16,r=2")
    ap.add_argument("--per-stream", type=int, default=8, help="requests per concurrency step (c=N sends N·this)")
    ap.add_argument("--per-rate", type=int, default=40, help="requests of an open-loop point")
    ap.add_argument("--rounds", type=int, default=2, help="times each load is measured by each client")
    ap.add_argument("--isl", type=int, default=512)
    ap.add_argument("--osl", type=int, default=128)
    ap.add_argument("--slo", default="tpot_p90=30ms,ttft_p90=3s")
    ap.add_argument("--predict", default="xeon-icx-2vcpu/" + str(DEFAULT_MODEL / "config.json"))
    ap.add_argument("--no-search", action="store_true")
    ap.add_argument("--nice", type=int, default=0, help="server niceness (negative needs root)")
    ap.add_argument("--runs", type=Path, default=None, help="where scoville's runs go (default: a temp folder)")
    args = ap.parse_args(argv)

    try:
        venv = ensure_venv(args.venv, install=args.install)
        model = ensure_model(venv, args.model_dir)
    except RealVllmError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    runs = args.runs or Path(tempfile.mkdtemp(prefix="scoville-real-vllm-"))
    loads = parse_loads(args.loads, args.per_stream, args.per_rate)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; runs in {runs}", flush=True)
    try:
        with RealVllm(venv, model, port=args.port, log_dir=runs, nice=args.nice) as server:
            rows = measure_clients(server, venv, model, loads, args.rounds, args.isl, args.osl, runs)
            answer = None if args.no_search else slo_search(server, runs, args.isl, args.osl, args.slo, args.predict)
    except RealVllmError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"\n{args.isl} in / {args.osl} out, fixed lengths, ignore_eos, no warm-up; server = vLLM's /metrics "
          f"histogram deltas over each run\n")
    print("\n".join(rows))
    if answer is not None:
        print(f"\nSLO search ({args.slo}, seeded by {args.predict}):\n{answer}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
