"""When does a server take in a request that arrives while a step runs: in the next step, or one step later?

The simulator's ``SimConfig.async_scheduling`` says which: vLLM's async scheduler (SGLang's and TensorRT-LLM's
overlap schedulers too) forms step N+1 while step N runs, so a request arriving during N starts in N+2; a
synchronous scheduler starts it in N+1. This measures it on a real server: short probes (a 4-token prompt, one
output token) go out at random times, first to an idle server, then beside one long stream that keeps it
decoding (a token at the end of every step). Their time to first token grows by the wait for a step to take them
in: half a step on average for a synchronous scheduler, one and a half with a step formed ahead. Where the
server is a vLLM, its own ``vllm:request_prefill_time_seconds`` (scheduled to first token) says the same from
the inside: one step plus output handling, or two.

Beside the stream the API server is busier too (it streams the other request's tokens), so the front end may take
longer than at an idle server, and that time reads as waiting here; the split the server's histograms give
(queued, scheduled to first token, the rest) shows where it went. On vLLM's CPU backend the flag below is inert:
its platform turns async scheduling off (``SimConfig.schedules_ahead``). There, on 2026-12-06 (Zen 4 slice):
8.8 ms steps, +0.57 steps of waiting, scheduled to first token 9.8 ms idle and 9.7 ms busy (one step: a
synchronous scheduler), outside the engine 4.9 ms idle and 14.5 ms busy; on 2026-12-05 another slice read +1.15.

    python bench/bench_step_admission.py                                       # the real vLLM CPU server
    python bench/bench_step_admission.py --server-arg=--no-async-scheduling    # the same, asked not to
    python bench/bench_step_admission.py --url http://127.0.0.1:8000 --model NAME

Loopback only; 90 probes and one 3,000-token stream, about a minute beside the server's start-up.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realvllm.server import SERVED_NAME, RealVllm, RealVllmError, ensure_model, ensure_venv  # noqa: E402

STREAM_TOKENS = 3000      # the background stream's length (its prompt is 16 tokens; the server holds 4,096)
PREFILL = "vllm:request_prefill_time_seconds"     # a request's first scheduling to its first token
QUEUE = "vllm:request_queue_time_seconds"         # its arrival at the scheduler to its first scheduling
HISTOGRAMS = (PREFILL, QUEUE)


def stream(url: str, model: str, prompt: list[int], max_tokens: int, times: list[float]) -> float:
    """One streamed completion; appends the arrival time of every chunk to ``times``; returns the send time."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=600)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True,
                       "stream": True, "temperature": 0})
    sent = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise SystemExit(f"{url} answered {response.status}: {response.read()[:200]!r}")
    while line := response.readline():
        if line.startswith(b"data: ") and b"[DONE]" not in line:
            times.append(time.perf_counter())
    conn.close()
    return sent


def engine_seconds(url: str) -> dict[str, tuple[float, float]]:
    """(sum, count) of each of vLLM's HISTOGRAMS the server exports (none from another server): on the engine's
    clock, scheduled to first token is one step under a synchronous scheduler, two when the step was formed
    ahead. Read with prometheus_client's parser, as sweeps scrape."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode(errors="replace")
    conn.close()
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name in HISTOGRAMS:
            for sample in family.samples:
                found[sample.name] = found.get(sample.name, 0.0) + sample.value
    return {name: (found[f"{name}_sum"], found[f"{name}_count"]) for name in HISTOGRAMS
            if f"{name}_sum" in found and f"{name}_count" in found}


def probe_ttfts(url: str, model: str, probes: int, rng: random.Random) -> list[float]:
    """Time to first token of ``probes`` short requests, one at a time at random intervals."""
    out = []
    for i in range(probes):
        time.sleep(rng.uniform(0.15, 0.4))
        first: list[float] = []
        sent = stream(url, model, [1, 200 + i % 500, 300 + i % 500, 400 + i % 500], 1, first)
        out.append(first[0] - sent)
    return out


def split(url: str, ttfts: list[float], before: dict[str, tuple[float, float]]) -> str:
    """The probes' mean TTFT split as the server saw it: queued, scheduled to first token, and the rest (the front
    end: HTTP, tokenising, the wait for the engine to take the request in, streaming back), from the histograms'
    change since ``before``; only the mean where the server exports no such histograms."""
    mean = statistics.fmean(ttfts)
    after = engine_seconds(url)
    part = {name: (after[name][0] - before[name][0]) / (after[name][1] - before[name][1]) for name in HISTOGRAMS
            if name in after and name in before and after[name][1] > before[name][1]}
    if len(part) < len(HISTOGRAMS):
        return f"mean {mean * 1e3:.1f} ms"
    rest = mean - part[QUEUE] - part[PREFILL]
    return (f"mean {mean * 1e3:.1f} ms = queued {part[QUEUE] * 1e3:.1f} + scheduled to first token "
            f"{part[PREFILL] * 1e3:.1f} + outside the engine {rest * 1e3:.1f}")


def measure(url: str, model: str, probes: int, seed: int) -> None:
    rng = random.Random(seed)
    before = engine_seconds(url)
    idle_ttfts = probe_ttfts(url, model, probes // 2, rng)
    idle_split = split(url, idle_ttfts, before)
    background: list[float] = []
    failure: list[str] = []

    def keep_decoding() -> None:
        try:
            stream(url, model, [1, *range(100, 115)], STREAM_TOKENS, background)
        except (OSError, SystemExit) as e:     # a thread's exception would otherwise vanish
            failure.append(str(e))

    worker = threading.Thread(target=keep_decoding, daemon=True)
    worker.start()
    while len(background) < 20:
        if not worker.is_alive():
            raise SystemExit(f"the background stream stopped after {len(background)} tokens: "
                             f"{failure[0] if failure else 'the server ended it'} (it asks for {STREAM_TOKENS} "
                             "tokens after a 16-token prompt; serve with --max-model-len of at least 3016)")
        time.sleep(0.05)
    before = engine_seconds(url)
    busy_ttfts = probe_ttfts(url, model, probes, rng)
    busy_split = split(url, busy_ttfts, before)
    steps = list(background)
    itl = statistics.median(b - a for a, b in itertools.pairwise(steps))
    idle, busy = statistics.median(idle_ttfts), statistics.median(busy_ttfts)
    print(f"stream: {len(steps)} tokens, a step every {itl * 1e3:.1f} ms (median)")
    print(f"probes: time to first token {idle * 1e3:.1f} ms at an idle server ({probes // 2}), {busy * 1e3:.1f} ms "
          f"beside the stream ({probes}): {(busy - idle) / itl:+.2f} steps of waiting (the simulator: +0.5 for the "
          "rest of the step in progress, +1.5 with a step formed ahead)")
    print(f"  idle: {idle_split}\n  beside the stream: {busy_split}")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--url", help="a running OpenAI-compatible server on loopback (default: start the real vLLM)")
    ap.add_argument("--model", default=SERVED_NAME)
    ap.add_argument("--port", type=int, default=8391, help="port for the real vLLM this starts")
    ap.add_argument("--probes", type=int, default=60, help="probes beside the stream (half as many idle)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--venv", type=Path, default=Path("/work/realvllm/venv"), help="the real vLLM's own venv")
    ap.add_argument("--install", action="store_true", help="install vLLM's CPU build into --venv first (~4 min)")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="an extra `vllm serve` argument for the server this starts (repeatable), "
                         "e.g. --server-arg=--no-async-scheduling")
    args = ap.parse_args()
    if args.url:
        if urlsplit(args.url).hostname not in ("127.0.0.1", "localhost"):
            raise SystemExit(f"--url must be on loopback (127.0.0.1 or localhost), got {args.url}")
        measure(args.url, args.model, args.probes, args.seed)
        return 0
    try:
        venv = ensure_venv(args.venv, install=args.install)
        model = ensure_model(venv, Path("/work/realvllm/tiny-llama"))
        with RealVllm(venv, model, port=args.port, log_dir=Path("/tmp"), extra_args=tuple(args.server_arg)) as server:
            measure(server.url, args.model, args.probes, args.seed)
    except RealVllmError as e:
        raise SystemExit(f"bench_step_admission: {e}") from None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
