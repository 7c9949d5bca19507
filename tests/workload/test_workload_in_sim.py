"""Session workloads through the simulator: the cache hits the workload promises, priming excluded."""

from importlib.resources import files
from pathlib import Path

from scoville.load import LoadPoint
from scoville.session_metrics import session_metrics, turn_metrics
from scoville.sim.config import SimConfig
from scoville.sim.point import simulate_point
from scoville.workload.scenarios import resolve_workload
from scoville.workload.sessions import agentic_coding, fixed

AGENTX = Path(str(files("scoville") / "data" / "traces" / "agentx"))


def config(caching: bool) -> SimConfig:
    return SimConfig.parse({"hardware": "h200", "model": "llama-3.1-8b", "enable_prefix_caching": caching},
                           where="test")


def test_agentic_sessions_hit_the_prefix_cache_and_cut_ttft():
    w = agentic_coding(turns=fixed(6), seed=1)
    point = LoadPoint(index=0, concurrency=4, num_requests=48)
    on = simulate_point(config(True), w, point).table
    off = simulate_point(config(False), w, point).table
    m_on, m_off = session_metrics(on), session_metrics(off)
    assert m_off["cache_hit_rate"] == 0.0
    assert m_on["cache_hit_rate"] > 0.8
    assert m_on["ttft_s_median"] < m_off["ttft_s_median"] / 2
    # Each later turn re-sends the previous prompt, so it hits at least that prompt's full 16-token
    # blocks (the engine's block size), and at most those plus the previous reply's (the simulator
    # models a server that also cached the generated blocks of the session's last turn).
    rows = {(r["session_id"], r["turn"]): r for r in on.to_pylist()}
    later = [(rows[(sid, k - 1)], r) for (sid, k), r in rows.items() if k >= 1]
    assert len(later) > 30
    for prev, r in later:
        lo = prev["input_tokens"] // 16 * 16
        assert lo <= r["cached_tokens"] <= (prev["input_tokens"] + prev["output_tokens"]) // 16 * 16
    assert {r["turn"] for r in turn_metrics(on)} == set(range(6))


def test_agentx_replay_primes_are_sent_but_not_measured():
    w = resolve_workload(None, trace=AGENTX, replay="agentx")
    table = simulate_point(config(True), w, LoadPoint(index=0, concurrency=3, num_requests=30)).table
    warm = table.filter(table.column("warmup"))
    assert warm.num_rows >= 3
    assert all(rid.endswith("-prime") for rid in warm.column("request_id").to_pylist())
    m = session_metrics(table)
    assert m["num_requests"] == table.num_rows - warm.num_rows
    # Local hash scope: lanes share nothing, so without its priming request a lane's first
    # measured turn would be cold. Primed, it finds at least the 1024-token system prompt cached.
    firsts = {}
    for r in table.to_pylist():
        if not r["warmup"]:
            firsts.setdefault(r["session_id"], r)
    assert len(firsts) >= 3 and all(r["cached_tokens"] >= 1024 for r in firsts.values())
