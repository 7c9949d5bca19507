"""Generate the small traces shipped in src/scoville/data/traces/ (tests and examples use them).

Every file is produced by scoville's own seeded session generator, written in
each public format, so the repository needs no third-party corpus:

* ``agentx/*.json`` — AgentX session traces (one JSON per session, 64-token
  blocks, local hash-id scope, a subagent nested in each session);
* ``mooncake_sample.jsonl`` — Mooncake JSONL (ms timestamps, 512-token blocks,
  shared prefixes between requests);
* ``azure_sample.csv`` — Azure LLM inference trace CSV;
* ``scoville_sample.jsonl`` — the scoville trace format.

Run ``python scripts/make_traces.py`` (deterministic: rerunning rewrites the same bytes).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from scoville.workload.sessions import SessionWorkload, fixed, lognormal, uniform
from scoville.workload.spec import Session
from scoville.workload.traces import write_scoville_trace

OUT = Path(__file__).resolve().parents[1] / "src" / "scoville" / "data" / "traces"
SEED = 2026


def small_agentic(block_size: int) -> SessionWorkload:
    """agentic-coding's shape at 1/16 the size, so files stay a few kB."""
    return SessionWorkload(name="small-agentic", turns=fixed(40), shared_prefix_tokens=1024,
                           first_message=lognormal(200, 0.5, 32, 1024), message=lognormal(300, 0.8, 16, 2048),
                           output=lognormal(60, 0.6, 8, 512), think=lognormal(0.8, 1.0, 0.05, 20.0),
                           max_context=uniform(5000, 8000), block_size=block_size, seed=SEED)


def service_time(n_in: int, n_out: int) -> float:
    """A plausible recorded API time: prefill at 20k tok/s, decode at 60 tok/s."""
    return round(n_in / 20000 + n_out / 60, 4)


def local_ids(hashes: tuple[int, ...], table: dict[int, int]) -> list[int]:
    """Hashes -> small ints numbered by first appearance (AgentX's local scope)."""
    return [table.setdefault(h, len(table) + 1) for h in hashes]


def agentx_session(parent: Session, child: Session, trace_id: str) -> dict:
    table: dict[int, int] = {}
    t = 0.0
    requests: list[dict] = []
    spawn_at = len(parent.requests) // 2
    for k, r in enumerate(parent.requests):
        t += r.think_s
        api = service_time(r.input_tokens, r.output_tokens)
        requests.append({"t": round(t, 4), "type": "n", "model": "scoville-synthetic", "in": r.input_tokens,
                         "out": r.output_tokens, "hash_ids": local_ids(r.block_hashes, table),
                         "input_types": ["text"], "output_types": ["text"], "stop": "tool_use",
                         "api_time": api, "think_time": round(r.think_s, 4)})
        t += api
        if k == spawn_at:  # a subagent explores, sharing the parent's system prompt blocks
            inner, ts = [], t
            for c in child.requests[:4]:
                ts += c.think_s
                inner.append({"t": round(ts, 4), "type": "n", "model": "scoville-synthetic-small",
                              "in": c.input_tokens, "out": c.output_tokens,
                              "hash_ids": local_ids(c.block_hashes, table), "api_time":
                              service_time(c.input_tokens, c.output_tokens), "think_time": round(c.think_s, 4)})
                ts += inner[-1]["api_time"]
            requests.append({"t": round(t, 4), "type": "subagent", "agent_id": f"{trace_id}-explore",
                             "subagent_type": "Explore", "duration_ms": int((ts - t) * 1000),
                             "status": "completed", "requests": inner, "models": ["scoville-synthetic-small"]})
    return {"id": trace_id, "models": ["scoville-synthetic", "scoville-synthetic-small"], "block_size": 64,
            "hash_id_scope": "local", "requests": requests}


def write_agentx(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    w = small_agentic(64)
    sessions = w.sessions(6, stream=0)
    for i in range(3):
        doc = agentx_session(sessions[2 * i], sessions[2 * i + 1], f"agentx-sample-{i}")
        lines = ",\n".join("    " + json.dumps(r, separators=(",", ":")) for r in doc["requests"])
        head = {k: v for k, v in doc.items() if k != "requests"}
        text = json.dumps(head)[:-1] + ', "requests": [\n' + lines + "\n]}\n"
        (out / f"session-{i}.json").write_text(text)


def write_mooncake(path: Path) -> None:
    w = small_agentic(512)
    rng = np.random.default_rng(SEED)
    rows, t = [], 0.0
    for s in w.sessions(8, stream=1):
        for r in s.requests[:5]:
            t += rng.exponential(0.4)
            rows.append((t, r))
    rows.sort(key=lambda x: x[0])
    table: dict[int, int] = {}
    with path.open("w") as f:
        for t, r in rows:
            f.write(json.dumps({"timestamp": int(t * 1000), "input_length": r.input_tokens,
                                "output_length": r.output_tokens, "hash_ids": local_ids(r.block_hashes, table)})
                    + "\n")


def write_azure(path: Path) -> None:
    rng = np.random.default_rng(SEED + 1)
    t0 = datetime(2023, 11, 16, 18, 15, 46)
    t = 0.0
    with path.open("w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for _ in range(40):
            t += rng.exponential(0.25)
            stamp = (t0 + timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S.%f") + "0"  # 7 digits, as Azure's
            f.write(f"{stamp},{int(rng.lognormal(np.log(1200), 0.8)) + 1},{int(rng.lognormal(np.log(150), 0.7)) + 1}\n")


def write_native(path: Path) -> None:
    w = SessionWorkload(name="small-chat", turns=fixed(4), shared_prefix_tokens=128,
                        first_message=lognormal(120, 0.5, 8, 512), message=lognormal(60, 0.6, 8, 256),
                        output=lognormal(40, 0.5, 4, 256), think=lognormal(1.0, 0.5, 0.1, 5.0), seed=SEED)
    sessions = w.sessions(4, stream=0)
    write_scoville_trace(path, sessions, arrivals=[0.0, 0.5, 1.25, 3.0])


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write_agentx(OUT / "agentx")
    write_mooncake(OUT / "mooncake_sample.jsonl")
    write_azure(OUT / "azure_sample.csv")
    write_native(OUT / "scoville_sample.jsonl")
    for p in sorted(OUT.rglob("*")):
        if p.is_file():
            print(f"{p.relative_to(OUT)}  {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
