"""How aggregate chunk rate scales from 1 to 2 Ray client workers on this machine.

A loopback streaming server (its own process, uvloop when installed) answers
each request with ``--osl`` one-token SSE events, written ``--batch`` events
per socket write so that the server costs little and the clients' receive and
parse path is what is measured. The same closed-loop point is then driven by
a local Ray cluster with 1 and with 2 client workers (the sweep ``scoville sweep
--executor ray`` runs: ``client.sweep.run_sweep`` through ``scoville.client.ray_pool``,
the real client code in each worker); the figures come from the run
directories it wrote: received chunks / measured window.

    python bench/bench_ray_scaling.py [--concurrency 64] [--requests 512] [--osl 2000] [--batch 8]

On a 2-core machine the server, the coordinator and the workers share the two
cores, so the ratio says how much headroom a second worker finds here, not
what a cluster of client nodes would reach.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path


def serve(port_out: multiprocessing.Queue[int], batch: int) -> None:
    """The server process: stream as fast as the socket takes it."""
    from aiohttp import web

    def event(i: int, last: bool) -> bytes:
        chunk = {"choices": [{"index": 0, "text": "x", "finish_reason": "length" if last else None}]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    async def complete(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        n = int(body.get("max_tokens", 16))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        plain = event(0, False)
        for start in range(0, n, batch):
            k = min(batch, n - start)
            last = start + k == n
            await resp.write(plain * (k - 1) + (event(n - 1, True) if last else plain))
        usage = {"choices": [], "usage": {"prompt_tokens": len(body.get("prompt") or []), "completion_tokens": n}}
        await resp.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "bench", "object": "model"}]})

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/completions", complete)
        app.router.add_get("/v1/models", models)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        port_out.put(runner.addresses[0][1])
        await asyncio.Event().wait()

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux /proc), to see whether the server was the limit."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(base_url: str, server_pid: int, workers: int, args: argparse.Namespace,
            runs_root: Path) -> dict[str, float]:
    import pyarrow.compute as pc

    from scoville.client.config import ClientConfig
    from scoville.client.sweep import Sweep, run_sweep
    from scoville.load import concurrency_sweep
    from scoville.power.sources import PowerPlan
    from scoville.results.store import read_requests
    from scoville.workload.synthetic import SyntheticWorkload

    cfg = ClientConfig(base_url=base_url, model="bench")
    workload = SyntheticWorkload(isl=16, osl=args.osl, range_ratio=1.0, seed=0)
    points = concurrency_sweep([args.concurrency], num_requests=args.requests, warmup_requests=0)
    sweep = Sweep(cfg=cfg, workload=workload, points=points, power=PowerPlan("none", "chip"),
                  system={"hardware": "loopback", "accelerators": 1}, model={"name": "bench"},
                  scrape_interval=0.0, executor="ray", ray_workers=workers)
    cpu0, wall = cpu_seconds(server_pid), time.perf_counter()
    run_dir = run_sweep(sweep, runs_root).run_dir
    wall, cpu1 = time.perf_counter() - wall, cpu_seconds(server_pid)
    table = read_requests(run_dir)
    ok = table.filter(table.column("ok"))
    chunks = int(pc.sum(pc.list_value_length(ok.column("token_times"))).as_py() or 0)
    window = pc.max(ok.column("t_done")).as_py() - pc.min(ok.column("t_sent")).as_py()
    return {"workers": workers, "requests_ok": ok.num_rows, "errors": table.num_rows - ok.num_rows,
            "chunks": chunks, "window_s": window, "chunks_per_s": chunks / window, "sweep_wall_s": wall,
            # Server CPU over the whole sweep (incl. start-up idle), as cores busy during the window.
            "server_cores": None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / window}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--osl", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=8, help="SSE events per server socket write")
    parser.add_argument("--repeats", type=int, default=3, help="runs per worker count (best is reported)")
    args = parser.parse_args()

    ctx = multiprocessing.get_context("spawn")
    ports: multiprocessing.Queue[int] = ctx.Queue()
    server = ctx.Process(target=serve, args=(ports, args.batch), daemon=True)
    server.start()
    assert server.pid is not None  # set by start()
    server_pid = server.pid
    base_url = f"http://127.0.0.1:{ports.get(timeout=30)}"

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    results = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for workers in (1, 2):
                runs = [measure(base_url, server_pid, workers, args, Path(tmp)) for _ in range(args.repeats)]
                results.append(max(runs, key=lambda r: r["chunks_per_s"]))
    finally:
        ray.shutdown()
        server.terminate()

    print(f"aggregate chunk rate, closed loop c={args.concurrency}, {args.requests} requests x {args.osl} tokens, "
          f"{os.cpu_count()} CPUs, server batch {args.batch} events/write, best of {args.repeats}")
    print(f"{'workers':>7} {'ok':>5} {'err':>4} {'chunks':>9} {'window s':>9} {'chunks/s':>10} {'wall s':>7} "
          f"{'server cores':>12}")
    for r in results:
        cores = "n/a" if r["server_cores"] is None else f"{r['server_cores']:.2f}"
        print(f"{r['workers']:>7} {r['requests_ok']:>5} {r['errors']:>4} {r['chunks']:>9} {r['window_s']:>9.3f} "
              f"{r['chunks_per_s']:>10.0f} {r['sweep_wall_s']:>7.2f} {cores:>12}")
    print(f"ratio 2 workers / 1 worker: {results[1]['chunks_per_s'] / results[0]['chunks_per_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
