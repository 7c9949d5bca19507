"""Pacing of the emulator's real-time loop: how late tokens leave versus the engine's schedule.

Two engines behind the emulator's HTTP server:

* ``--engine lockstep`` (default): every admitted request gets one token per
  fixed interval, as a decode batch of constant step time would, so the
  schedule is known exactly and only the HTTP layer and its loop are measured;
* ``--engine sim``: the real SimEngine (llama-3.1-8b on 8 x B200, tp 8, whose
  decode step at 64 sequences is ~2.2 ms), so step planning is included.

The figure is the server's ``scoville_emulator_token_release_lag_seconds``
histogram (send time of each token minus the time the engine scheduled it) in
steady state (from 20 ms after the last stream connected), plus the client's
view: the aggregate rate, tokens per chunk (coalescing) and, for ``sim``, the
step time it saw. The server runs in a child process (like
``spawn_emulator``), the load in another, so neither shares a GIL.

    python bench/bench_emulator_pacing.py                     # 64 streams, intervals 8,4,2,1,0.5 ms
    python bench/bench_emulator_pacing.py --engine sim --streams 16,32,64
    python bench/bench_emulator_pacing.py --streams 64 --intervals 2 --tokens 500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scoville.sim.engine_api import EngineStats, TokenEvent  # noqa: E402
from scoville.workload.spec import RequestSpec  # noqa: E402

# --engine sim: a real SimEngine whose decode step at 64 sequences is about 2.2 ms (the 64 x 2 ms case).
SIM_HARDWARE, SIM_MODEL = "b200", "llama-3.1-8b"
SIM_CONFIG = {"parallel": {"tp": 8}}


class LockstepEngine:
    """Every running request decodes one token each ``interval`` seconds, all in one batch."""

    def __init__(self, interval: float, streams: int) -> None:
        self.interval = interval
        self.streams = streams
        self.running: dict[str, list] = {}   # id -> [remaining, spec]
        self.next_t: float | None = None
        self.prompt_total = 0
        self.gen_total = 0

    def submit(self, spec: RequestSpec, now: float) -> None:
        self.running[spec.request_id] = [spec.output_tokens, spec]
        self.prompt_total += spec.input_tokens
        if self.next_t is None:
            self.next_t = now + self.interval

    def cancel(self, request_id: str, now: float) -> None:
        self.running.pop(request_id, None)
        if not self.running:
            self.next_t = None

    def next_event_time(self) -> float | None:
        return self.next_t

    def peek(self, until: float) -> list[TokenEvent]:
        if self.next_t is None or self.next_t > until:
            return []
        return [TokenEvent(request_id=rid, t=self.next_t, count=1, finished=r[0] <= 1)
                for rid, r in self.running.items()]

    def advance(self, until: float) -> list[TokenEvent]:
        out: list[TokenEvent] = []
        while self.next_t is not None and self.next_t <= until:
            t = self.next_t
            for rid, r in list(self.running.items()):
                r[0] -= 1
                fin = r[0] <= 0
                out.append(TokenEvent(request_id=rid, t=t, count=1, finished=fin))
                if fin:
                    del self.running[rid]
            self.gen_total += len(out)
            self.next_t = t + self.interval if self.running else None
        return out

    def stats(self) -> EngineStats:
        return EngineStats(running=len(self.running), waiting=0, kv_usage=0.0,
                           prompt_tokens_total=self.prompt_total, generation_tokens_total=self.gen_total)


def set_priority(kind: str) -> None:
    """``high``: what ``scoville serve --high-priority`` does (nice -20); ``fifo``: SCHED_FIFO, to show why not."""
    if kind == "high":
        from scoville.emulator.run import raise_priority

        raise_priority()
    elif kind == "fifo":
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))


def serve_child(engine_kind: str, interval: float, streams: int, uvloop: bool, horizon: float) -> None:
    from scoville.emulator.prom import Histogram
    from scoville.emulator.run import serve
    from scoville.emulator.server import Emulator, EmulatorOptions

    if engine_kind == "lockstep":
        engine = LockstepEngine(interval, streams)
        emu = Emulator(engine, EmulatorOptions(served_model_names=["lockstep"], max_model_len=1 << 20,
                                               vocab_size=32000), spin_horizon_s=horizon)
    else:
        from scoville.emulator.build import build_emulator, pinned_config

        emu = build_emulator(pinned_config(SIM_HARDWARE, SIM_MODEL, SIM_CONFIG), served_model_name="lockstep",
                             spin_horizon_s=horizon)
    # Steady state only: ignore tokens released while the streams were still connecting (ramp-up).
    submitted: list[float] = []
    submit = emu.engine.submit

    def counting_submit(spec: RequestSpec, now: float) -> None:
        submitted.append(now)
        submit(spec, now)

    emu.engine.submit = counting_submit  # type: ignore[method-assign]
    now = emu.loop.now
    settle_s = 0.02  # after the last stream connected: prefills and the first steps are past

    class SteadyHistogram(Histogram):
        __slots__ = ()

        def observe(self, value: float, n: int = 1) -> None:
            if len(submitted) >= streams and now() > submitted[streams - 1] + settle_s:
                super().observe(value, n)

    old = emu.metrics.lag
    emu.metrics.lag = SteadyHistogram(old.name, old.help, old.bounds)
    serve(emu, "127.0.0.1", 0, uvloop=uvloop)


def _client(url: str, streams: int, tokens: int, q: mp.Queue) -> None:
    import aiohttp

    async def one(session: aiohttp.ClientSession) -> tuple[int, float]:
        body = {"model": "lockstep", "prompt": [1000] * 16, "max_tokens": tokens, "ignore_eos": True,
                "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
        chunks, first, last = 0, 0.0, 0.0
        async with session.post(url + "/v1/completions", json=body) as r:
            async for line in r.content:
                if line.startswith(b"data: {") and b'"choices":[{' in line:
                    last = time.perf_counter()
                    first = first or last
                    chunks += 1
        return chunks, (last - first) / max(tokens - 1, 1)

    async def main() -> None:
        conn = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=conn) as s:
            t = time.perf_counter()
            res = await asyncio.gather(*[one(s) for _ in range(streams)])
            tpots = sorted(tp for _, tp in res)
            q.put({"wall_s": time.perf_counter() - t, "chunks": sum(c for c, _ in res), "tokens": streams * tokens,
                   "tpot_s": tpots[len(tpots) // 2]})

    asyncio.run(main())


def lag_quantiles(metrics_text: str) -> dict[str, float]:
    buckets = []
    for m in re.finditer(r'scoville_emulator_token_release_lag_seconds_bucket\{[^}]*le="([^"]+)"\} (\d+)',
                         metrics_text):
        buckets.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), int(m.group(2))))
    total = buckets[-1][1]

    def q(p: float) -> float:
        target, prev_b, prev_c = p * total, 0.0, 0
        for b, c in buckets:
            if c >= target:
                if b == float("inf"):
                    return prev_b
                return prev_b + (b - prev_b) * (target - prev_c) / max(c - prev_c, 1)
            prev_b, prev_c = b, c
        return prev_b

    le1 = next(c for b, c in buckets if b == 0.001)
    return {"events": total, "p50_ms": q(0.5) * 1e3, "p99_ms": q(0.99) * 1e3, "within_1ms": le1 / max(total, 1)}


def cpu_times() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs from /proc/stat: steal is time the hypervisor ran someone else."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[7] if len(fields) > 7 else 0, sum(fields[:8])


def run_point(engine: str, streams: int, interval_ms: float, tokens: int, uvloop: bool, horizon: float,
              priority: str = "normal") -> dict[str, float]:
    child = subprocess.Popen([sys.executable, __file__, "--serve", engine, str(interval_ms / 1e3), str(streams),
                              str(int(uvloop)), str(horizon), priority], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None  # stdout=PIPE
        url = json.loads(child.stdout.readline())["url"]
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=_client, args=(url, streams, tokens, q))
        steal0, total0 = cpu_times()
        p.start()
        client = q.get(timeout=600)
        steal1, total1 = cpu_times()
        p.join()
        with urllib.request.urlopen(url + "/metrics") as r:
            lag = lag_quantiles(r.read().decode())
    finally:
        child.terminate()
        child.wait()
    step_ms = interval_ms if engine == "lockstep" else client["tpot_s"] * 1e3
    return {"streams": streams, "interval_ms": step_ms, "target_tok_s": streams / (step_ms / 1e3),
            "achieved_tok_s": client["tokens"] / client["wall_s"],
            "tokens_per_chunk": client["tokens"] / max(client["chunks"], 1),
            "steal": (steal1 - steal0) / max(total1 - total0, 1), **lag}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        set_priority(sys.argv[7])
        serve_child(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), bool(int(sys.argv[5])), float(sys.argv[6]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["lockstep", "sim"], default="lockstep",
                    help="lockstep: a fixed per-token interval (--intervals); sim: the real SimEngine serving "
                         f"{SIM_MODEL} on {SIM_HARDWARE} with {SIM_CONFIG} (its own step time; --intervals unused)")
    ap.add_argument("--streams", default="64", help="comma-separated stream counts")
    ap.add_argument("--intervals", default="8,4,2,1,0.5", help="per-token intervals in ms (lockstep)")
    ap.add_argument("--tokens", type=int, default=1000, help="tokens per stream")
    ap.add_argument("--loop", choices=["asyncio", "uvloop", "both"], default="uvloop")
    ap.add_argument("--spin-horizon-ms", type=float, default=5.0,
                    help="the loop stays on the CPU when the next event is this close (RealTimeLoop.spin_horizon_s)")
    ap.add_argument("--priority", choices=["normal", "high", "fifo"], default="normal",
                    help="high = as `scoville serve --high-priority` (nice -20, root); fifo = SCHED_FIFO (root)")
    args = ap.parse_args()
    loops = {"asyncio": [False], "uvloop": [True], "both": [False, True]}[args.loop]
    intervals = [float(iv) for iv in args.intervals.split(",")] if args.engine == "lockstep" else [0.0]
    grid = [(int(n), iv) for n in args.streams.split(",") for iv in intervals]
    print(f"engine {args.engine}; load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"server priority {args.priority}; spin horizon {args.spin_horizon_ms} ms")
    print(f"{'loop':8} {'streams':>7} {'ms/tok':>7} {'target tok/s':>12} {'got tok/s':>10} {'tok/chunk':>9} "
          f"{'lag p50 ms':>10} {'lag p99 ms':>10} {'<=1ms':>7} {'steal':>6}")
    best: dict[str, float] = {}
    for uv in loops:
        for n, iv in grid:
            r = run_point(args.engine, n, iv, args.tokens, uv, args.spin_horizon_ms / 1e3, args.priority)
            name = "uvloop" if uv else "asyncio"
            print(f"{name:8} {r['streams']:7d} {r['interval_ms']:7.2f} {r['target_tok_s']:12.0f} "
                  f"{r['achieved_tok_s']:10.0f} {r['tokens_per_chunk']:9.2f} {r['p50_ms']:10.3f} {r['p99_ms']:10.3f} "
                  f"{r['within_1ms']:7.1%} {r['steal']:6.1%}", flush=True)
            if r["p99_ms"] < 1.0:
                best[name] = max(best.get(name, 0.0), r["target_tok_s"])
    for name, rate in best.items():
        print(f"{name}: highest aggregate token rate with p99 lag < 1 ms: {rate:.0f} tokens/s")
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
