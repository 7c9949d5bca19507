"""Pacing of the emulator's real-time loop: how late tokens leave versus the engine's schedule.

The instrument is a lockstep engine (every admitted request gets one token per
fixed interval, as a decode batch of constant step time would), so the
schedule is known exactly and the only thing measured is the HTTP layer and
its loop: the server's ``scoville_emulator_token_release_lag_seconds``
histogram (send time of each token minus the time the engine scheduled it),
plus the client's own view (chunks received, tokens per chunk = coalescing).

The server runs in a child process (like ``spawn_emulator``), the load in
another, so neither shares a GIL with the other.

    python bench/bench_emulator_pacing.py                # 64 streams, intervals 8,4,2,1,0.5 ms
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


class LockstepEngine:
    """Every running request decodes one token each ``interval`` seconds, all in one batch."""

    def __init__(self, interval: float, streams: int) -> None:
        self.interval = interval
        self.streams = streams
        self.t_full: float | None = None     # when all streams were running (steady state begins)
        self.running: dict[str, list] = {}   # id -> [remaining, spec]
        self.next_t: float | None = None
        self.prompt_total = 0
        self.gen_total = 0

    def submit(self, spec: RequestSpec, now: float) -> None:
        self.running[spec.request_id] = [spec.output_tokens, spec]
        self.prompt_total += spec.input_tokens
        if self.t_full is None and len(self.running) >= self.streams:
            self.t_full = now
        if self.next_t is None:
            self.next_t = now + self.interval

    def cancel(self, request_id: str, now: float) -> None:
        self.running.pop(request_id, None)
        if not self.running:
            self.next_t = None

    def next_event_time(self) -> float | None:
        return self.next_t

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
    """``fifo``: what ``scoville serve --realtime-priority`` does; ``normal``: nothing."""
    if kind == "fifo":
        from scoville.emulator.run import raise_priority

        raise_priority()


def serve_child(interval: float, streams: int, uvloop: bool, margin: float) -> None:
    from scoville.emulator.run import serve
    from scoville.emulator.server import Emulator, EmulatorOptions

    engine = LockstepEngine(interval, streams)
    emu = Emulator(engine, EmulatorOptions(served_model_names=["lockstep"], max_model_len=1 << 20, vocab_size=32000),
                   coarse_margin_s=margin)
    # Steady state only: ignore tokens released while the streams were still connecting (ramp-up).
    from scoville.emulator.prom import Histogram

    now = emu.loop.now

    class SteadyHistogram(Histogram):
        __slots__ = ()

        def observe(self, value: float, n: int = 1) -> None:
            if engine.t_full is not None and now() > engine.t_full + 5 * interval:
                super().observe(value, n)

    old = emu.metrics.lag
    emu.metrics.lag = SteadyHistogram(old.name, old.help, old.bounds)
    serve(emu, "127.0.0.1", 0, uvloop=uvloop)


def _client(url: str, streams: int, tokens: int, q: mp.Queue) -> None:
    import aiohttp

    async def one(session: aiohttp.ClientSession) -> tuple[int, int]:
        body = {"model": "lockstep", "prompt": [1000] * 16, "max_tokens": tokens, "ignore_eos": True,
                "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
        chunks = 0
        async with session.post(url + "/v1/completions", json=body) as r:
            async for line in r.content:
                if line.startswith(b"data: {") and b'"choices":[{' in line:
                    chunks += 1
        return chunks, tokens

    async def main() -> None:
        conn = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=conn) as s:
            t = time.perf_counter()
            res = await asyncio.gather(*[one(s) for _ in range(streams)])
            q.put({"wall_s": time.perf_counter() - t, "chunks": sum(c for c, _ in res),
                   "tokens": sum(k for _, k in res)})

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


def run_point(streams: int, interval_ms: float, tokens: int, uvloop: bool, margin: float,
              priority: str = "normal") -> dict[str, float]:
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(interval_ms / 1e3), str(streams),
                              str(int(uvloop)), str(margin), priority], stdout=subprocess.PIPE, text=True)
    try:
        url = json.loads(child.stdout.readline())["url"]
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=_client, args=(url, streams, tokens, q))
        p.start()
        client = q.get(timeout=600)
        p.join()
        with urllib.request.urlopen(url + "/metrics") as r:
            lag = lag_quantiles(r.read().decode())
    finally:
        child.terminate()
        child.wait()
    rate = streams / (interval_ms / 1e3)
    return {"streams": streams, "interval_ms": interval_ms, "target_tok_s": rate,
            "achieved_tok_s": client["tokens"] / client["wall_s"],
            "tokens_per_chunk": client["tokens"] / max(client["chunks"], 1), **lag}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        set_priority(sys.argv[6])
        serve_child(float(sys.argv[2]), int(sys.argv[3]), bool(int(sys.argv[4])), float(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", default="64", help="comma-separated stream counts")
    ap.add_argument("--intervals", default="8,4,2,1,0.5", help="per-token intervals in ms")
    ap.add_argument("--tokens", type=int, default=400, help="tokens per stream")
    ap.add_argument("--loop", choices=["asyncio", "uvloop", "both"], default="uvloop")
    ap.add_argument("--margin-ms", type=float, default=1.5)
    ap.add_argument("--priority", choices=["normal", "fifo"], default="normal",
                    help="fifo = the server runs as with `scoville serve --realtime-priority` (root)")
    args = ap.parse_args()
    loops = {"asyncio": [False], "uvloop": [True], "both": [False, True]}[args.loop]
    print(f"{'loop':8} {'streams':>7} {'ms/tok':>7} {'target tok/s':>12} {'got tok/s':>10} {'tok/chunk':>9} "
          f"{'lag p50 ms':>10} {'lag p99 ms':>10} {'<=1ms':>7}")
    best = {}
    grid = [(int(n), float(iv)) for n in args.streams.split(",") for iv in args.intervals.split(",")]
    print(f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; server priority "
          f"{args.priority}")
    for uv in loops:
        for n, iv in grid:
            r = run_point(n, iv, args.tokens, uv, args.margin_ms / 1e3, args.priority)
            name = "uvloop" if uv else "asyncio"
            print(f"{name:8} {r['streams']:7d} {iv:7.2f} {r['target_tok_s']:12.0f} {r['achieved_tok_s']:10.0f} "
                  f"{r['tokens_per_chunk']:9.2f} {r['p50_ms']:10.3f} {r['p99_ms']:10.3f} {r['within_1ms']:7.1%}",
                  flush=True)
            if r["p99_ms"] < 1.0:
                best[name] = max(best.get(name, 0.0), r["target_tok_s"])
    for name, rate in best.items():
        print(f"{name}: highest aggregate token rate with p99 lag < 1 ms: {rate:.0f} tokens/s")
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
