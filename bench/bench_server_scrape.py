"""What scraping the server's /metrics costs the client (issue 14: under 1% of the client's CPU at 256 streams).

Starts the built-in emulator once (a child process, vLLM metric names), then runs the same sweep (one
closed-loop point at ``--concurrency``, default 256) with scraping off and with it on, alternating
``--reps`` times. Client CPU is user+system time of this process plus its reaped worker processes (the
emulator stays alive throughout, so its CPU is never counted). In the scraping run, the scraper's own CPU
time is also counted directly, per thread (``time.thread_time`` around the probe, every scrape, and the
per-point store), so the ratio scraper / client comes from one run and not from the difference of two noisy
totals.

    python bench/bench_server_scrape.py                      # c=256, 3 requests per stream, 1 s interval
    python bench/bench_server_scrape.py --interval 0.25 --reps 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scoville.client import scrape  # noqa: E402
from scoville.client.config import ClientConfig  # noqa: E402
from scoville.client.sweep import Sweep, run_sweep  # noqa: E402
from scoville.emulator.launch import spawn_emulator  # noqa: E402
from scoville.load import concurrency_sweep  # noqa: E402
from scoville.power.sources import plan_power, system_info  # noqa: E402
from scoville.results.store import read_point_metrics  # noqa: E402
from scoville.workload.synthetic import SyntheticWorkload  # noqa: E402

T = TypeVar("T")


class CountingScraper(scrape.Scraper):
    """The sweep's scraper, with the CPU time of everything it does added up per thread."""

    cpu_s = 0.0
    scrapes = 0
    lock = threading.Lock()

    def _timed(self, fn: Callable[..., T], *args: object) -> T:
        t = time.thread_time()
        try:
            return fn(*args)
        finally:
            with CountingScraper.lock:
                CountingScraper.cpu_s += time.thread_time() - t

    def probe(self) -> bool:
        return self._timed(super().probe)

    def _scrape(self) -> bool:
        CountingScraper.scrapes += 1
        if threading.current_thread().name == "scoville-scrape":   # start/stop scrapes are timed by their caller
            return bool(self._timed(super()._scrape))
        return super()._scrape()   # its result decides which end scrapes the real scraper keeps

    def start(self, point: int) -> None:
        self._timed(super().start, point)

    def stop(self, run_dir: Path, finished: int) -> pa.Table | None:
        return self._timed(super().stop, run_dir, finished)


def cpu_now() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def one_run(url: str, model: str, args: argparse.Namespace, interval: float, root: Path) -> tuple[float, float, dict]:
    plan = plan_power("rated", hardware="h200", accelerators=1)
    sweep = Sweep(cfg=ClientConfig(base_url=url, model=model), workload=SyntheticWorkload(
                      isl=args.isl, osl=args.osl, range_ratio=1.0, seed=1, name="scrape-bench"),
                  points=concurrency_sweep([args.concurrency], num_requests=args.concurrency * args.per_stream,
                                           warmup_requests=0),
                  power=plan, system=system_info("h200", 1, plan, None), scrape_interval=interval)
    CountingScraper.cpu_s, CountingScraper.scrapes = 0.0, 0
    c0, w0 = cpu_now(), time.perf_counter()
    result = run_sweep(sweep, root)
    cpu, wall = cpu_now() - c0, time.perf_counter() - w0
    return cpu, wall, read_point_metrics(result.run_dir)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--per-stream", type=int, default=3, help="requests per stream (the point sends C times this)")
    ap.add_argument("--isl", type=int, default=128)
    ap.add_argument("--osl", type=int, default=256)
    ap.add_argument("--interval", type=float, default=1.0, help="--scrape-interval of the scraping runs")
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args()
    scrape.Scraper = CountingScraper  # type: ignore[misc]
    import scoville.client.sweep as sweep_mod

    sweep_mod.Scraper = CountingScraper  # type: ignore[misc]
    with spawn_emulator("h200", "llama-3.1-8b") as handle, tempfile.TemporaryDirectory() as tmp:
        print(f"emulator h200/llama-3.1-8b; c={args.concurrency}, {args.concurrency * args.per_stream} requests "
              f"of {args.isl}/{args.osl} tokens per run, scrape interval {args.interval:g} s")
        print(f"{'scraping':>9} {'wall s':>7} {'client CPU s':>13} {'scraper CPU s':>14} {'scrapes':>8} "
              f"{'scraper/client':>15} {'srv req':>8} {'client req':>11}")
        totals: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.reps):
            for on in (False, True):
                cpu, wall, row = one_run(handle.base_url, handle.model, args, args.interval if on else 0.0,
                                         Path(tmp))
                totals[on].append(cpu)
                share = CountingScraper.cpu_s / cpu if on else 0.0
                print(f"{'on' if on else 'off':>9} {wall:7.2f} {cpu:13.3f} {CountingScraper.cpu_s:14.4f} "
                      f"{CountingScraper.scrapes:8d} {share:15.3%} {row.get('server_requests', '—')!s:>8} "
                      f"{row.get('client_all_requests', row.get('num_ok'))!s:>11}")
        off, on_ = sum(totals[False]) / len(totals[False]), sum(totals[True]) / len(totals[True])
        print(f"mean client CPU: off {off:.3f} s, on {on_:.3f} s, on/off {on_ / off:.4f} "
              "(the difference of two totals; noisy on a shared machine)")


if __name__ == "__main__":
    main()
