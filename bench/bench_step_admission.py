"""When does a server take in a request that arrives while a step runs: in the next step, or one step later?

The simulator's ``SimConfig.async_scheduling`` says which: vLLM's async scheduler (SGLang's and TensorRT-LLM's
overlap schedulers too) forms step N+1 while step N runs, so a request arriving during N starts in N+2; a
synchronous scheduler starts it in N+1. This measures it on a real server: short probes (a 4-token prompt, one
output token) go out at random times, first to an idle server, then beside one long stream that keeps it
decoding (a token at the end of every step). Their time to first token grows by the wait for a step to take them
in: half a step on average for a synchronous scheduler, one and a half with a step formed ahead. Where the
server is a vLLM, its own ``vllm:request_prefill_time_seconds`` (scheduled to first token) says the same from
the inside: one step plus output handling, or two.

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
PREFILL = "vllm:request_prefill_time_seconds"


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


def prefill_seconds(url: str) -> tuple[float, float] | None:
    """(sum, count) of vLLM's ``vllm:request_prefill_time_seconds``: from a request's first scheduling to its first
    token, on the engine's clock (one step under a synchronous scheduler, two when the step was formed ahead);
    None where the server exports no such metric. Read with prometheus_client's parser, as sweeps scrape."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode(errors="replace")
    conn.close()
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == PREFILL:
            for sample in family.samples:
                found[sample.name] = found.get(sample.name, 0.0) + sample.value
    total, count = found.get(f"{PREFILL}_sum"), found.get(f"{PREFILL}_count")
    return None if total is None or count is None else (total, count)


def probe_ttfts(url: str, model: str, probes: int, rng: random.Random) -> list[tuple[float, float]]:
    """(send, first token) of ``probes`` short requests, one at a time at random intervals."""
    out = []
    for i in range(probes):
        time.sleep(rng.uniform(0.15, 0.4))
        first: list[float] = []
        sent = stream(url, model, [1, 200 + i % 500, 300 + i % 500, 400 + i % 500], 1, first)
        out.append((sent, first[0]))
    return out


def measure(url: str, model: str, probes: int, seed: int) -> None:
    rng = random.Random(seed)
    idle = statistics.median(first - sent for sent, first in probe_ttfts(url, model, probes // 2, rng))
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
    before = prefill_seconds(url)
    sent_first = probe_ttfts(url, model, probes, rng)
    steps = list(background)
    itl = statistics.median(b - a for a, b in itertools.pairwise(steps))
    ttft = statistics.median(first - sent for sent, first in sent_first)
    print(f"stream: {len(steps)} tokens, a step every {itl * 1e3:.1f} ms (median)")
    print(f"probes: time to first token {idle * 1e3:.1f} ms at an idle server ({probes // 2}), {ttft * 1e3:.1f} ms "
          f"beside the stream ({probes}): {(ttft - idle) / itl:+.2f} steps of waiting (the simulator: +0.5 for the "
          "rest of the step in progress, +1.5 with a step formed ahead)")
    after = prefill_seconds(url)
    if before is not None and after is not None and after[1] > before[1]:
        mean = (after[0] - before[0]) / (after[1] - before[1])
        print(f"server: scheduled to first token {mean * 1e3:.1f} ms a probe ({mean / itl:.2f} steps; "
              f"vllm:request_prefill_time_seconds over {after[1] - before[1]:.0f} requests)")


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
