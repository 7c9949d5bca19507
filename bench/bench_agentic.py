"""Replay an agentic scenario against the built-in emulator; print prefix-cache hit rate and per-turn TTFT.

The emulator (a child process, ``spawn_emulator``) serves the simulated
engine in real time over the OpenAI API; the real client sends every turn's
full context as token ids, and the emulator hashes those ids into KV blocks,
so cache hits come from the prompts themselves, not from any hint. The same
sessions run twice — prefix caching on, then off — so the printout shows what
the cache buys per turn.

    python bench/bench_agentic.py                       # agentic-coding, 8 sessions x 8 turns, C=4
    python bench/bench_agentic.py --sessions 4 --turns 5 --concurrency 2 --no-baseline
    python bench/bench_agentic.py --trace src/scoville/data/traces/agentx --replay agentx
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scoville.client.config import ClientConfig  # noqa: E402
from scoville.client.sweep import Sweep, run_sweep  # noqa: E402
from scoville.emulator.launch import spawn_emulator  # noqa: E402
from scoville.load import LoadPoint  # noqa: E402
from scoville.power.sources import plan_power  # noqa: E402
from scoville.results.store import read_requests  # noqa: E402
from scoville.session_metrics import session_metrics, turn_metrics  # noqa: E402
from scoville.workload.scenarios import resolve_workload  # noqa: E402
from scoville.workload.sessions import SESSION_SCENARIOS, fixed  # noqa: E402


class FirstSessions:
    """A workload's first ``n`` sessions only, so every replayed session runs to its end.

    (The client draws one session per request slot and stops at the request
    cap, which would cut the last sessions short.)
    """

    def __init__(self, workload: Any, n: int) -> None:
        self.workload, self.n = workload, n
        self.name, self.kind = workload.name, workload.kind

    def to_dict(self) -> dict[str, Any]:
        return {**self.workload.to_dict(), "bench_sessions": self.n}

    def sessions(self, count: int, stream: int = 0) -> Any:
        return self.workload.sessions(min(count, self.n), stream)


def build_workload(args: argparse.Namespace) -> Any:
    if args.trace:
        return resolve_workload(None, trace=args.trace, replay=args.replay, time_scale=args.think_scale, seed=args.seed)
    # The scenario's own sessions, cut to their first --turns turns (a bench must end in seconds).
    return SESSION_SCENARIOS[args.scenario](seed=args.seed, turns=fixed(args.turns), think_scale=args.think_scale)


def measure(workload: Any, args: argparse.Namespace, prefix_caching: bool, runs: Path) -> tuple[dict, list, float]:
    config = {"enable_prefix_caching": prefix_caching}
    workload = FirstSessions(workload, args.sessions)
    n_requests = sum(len(s.requests) for s in workload.sessions(args.sessions))
    point = LoadPoint(index=0, concurrency=args.concurrency, num_requests=n_requests, warmup_requests=0)
    with spawn_emulator(args.hardware, args.model, config) as handle:
        cfg = ClientConfig(base_url=handle.base_url, model=handle.model, api="completions", timeout_s=600.0)
        plan = plan_power("none", hardware=None, accelerators=1, rated_watts=None, csv_path=None, boundary="chip")
        sweep = Sweep(cfg=cfg, workload=workload, points=[point], power=plan,
                      system=dict(handle.system), model={"name": handle.model}, seed=args.seed, workers=1)
        t = time.perf_counter()
        result = run_sweep(sweep, runs)
        wall = time.perf_counter() - t
    table = read_requests(result.run_dir)
    return session_metrics(table, accelerators=int(handle.system.get("accelerators") or 1)), turn_metrics(table), wall


def fmt(v: Any, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if v is None else f"{v * scale:.{digits}f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="agentic-coding", choices=sorted(SESSION_SCENARIOS))
    p.add_argument("--trace", type=Path, help="replay this trace instead of a scenario")
    p.add_argument("--replay", default="agentx", choices=["timed", "agentx"])
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--turns", type=int, default=8, help="turns per session (scenario only)")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--think-scale", type=float, default=0.05, help="multiply think/tool times (0.05 = 20x faster)")
    p.add_argument("--hardware", default="h200")
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-baseline", action="store_true", help="skip the prefix-caching-off run")
    args = p.parse_args()

    workload = build_workload(args)
    modes = [True] if args.no_baseline else [True, False]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for on in modes:
            results[on] = measure(workload, args, on, Path(tmp))

    print(f"{workload.name}: {args.sessions} sessions, concurrency {args.concurrency}, "
          f"emulated {args.model} on {args.hardware}")
    for on in modes:
        m, _, wall = results[on]
        print(f"  prefix caching {'on ' if on else 'off'}: cache hit rate {fmt(m.get('cache_hit_rate'), 100)} % "
              f"(reported on {fmt(m.get('cached_tokens_reported_fraction'), 100, 0)} % of requests), "
              f"TTFT p50 {fmt(m.get('ttft_s_median'), 1000)} ms, p90 {fmt(m.get('ttft_s_p90'), 1000)} ms, "
              f"E2E interactivity {fmt(m.get('interactivity_e2e'))} tok/s, "
              f"session completion p50 {fmt(m.get('session_completion_s_median'), 1, 2)} s, "
              f"cached input {fmt(m.get('input_cached_tok_s_per_accelerator'), 1, 0)} tok/s/acc, "
              f"computed input {fmt(m.get('input_computed_tok_s_per_accelerator'), 1, 0)} tok/s/acc  "
              f"[{m.get('num_ok')} requests, {wall:.1f} s wall]")
    print("\nper-turn TTFT (ms, median) and cache hit rate:")
    header = f"{'turn':>5} {'n':>4} {'input tok':>10} {'TTFT on':>9} {'hit on %':>9}"
    if not args.no_baseline:
        header += f" {'TTFT off':>9} {'speed-up':>9}"
    print(header)
    off = {r["turn"]: r for r in results[False][1]} if not args.no_baseline else {}
    for r in results[True][1]:
        line = (f"{r['turn']:>5} {r['requests']:>4} {r['input_tokens_mean']:>10.0f} "
                f"{fmt(r['ttft_s_median'], 1000):>9} {fmt(r['cache_hit_rate'], 100):>9}")
        if off.get(r["turn"]):
            o = off[r["turn"]]["ttft_s_median"]
            line += f" {fmt(o, 1000):>9} {o / r['ttft_s_median']:>8.1f}x"
        print(line)


if __name__ == "__main__":
    main()
