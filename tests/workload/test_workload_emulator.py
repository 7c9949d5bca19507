"""End to end over loopback HTTP: the emulator's measured cache hits are exactly the workload's prefix structure."""

import itertools

import pytest

from scoville.client.config import ClientConfig
from scoville.client.sweep import Sweep, run_sweep
from scoville.emulator.launch import spawn_emulator
from scoville.load import LoadPoint
from scoville.power.sources import plan_power
from scoville.results.store import read_requests
from scoville.workload.sessions import chat_multiturn, fixed

pytestmark = pytest.mark.slow   # starts the emulator in a child process (the fast lane skips it)


def test_measured_hits_equal_the_previous_prompts_full_blocks(tmp_path):
    w = chat_multiturn(seed=5, turns=fixed(3), think_scale=0.0)
    sessions = list(w.sessions(2))
    # Two lanes, one session each: six requests run both sessions to their end.
    point = LoadPoint(index=0, concurrency=2, num_requests=6, warmup_requests=0)
    with spawn_emulator("h200", "llama-3.1-8b", {"enable_prefix_caching": True, "block_size": 16}) as handle:
        cfg = ClientConfig(base_url=handle.base_url, model=handle.model, api="completions", timeout_s=120.0)
        plan = plan_power("none", hardware=None, accelerators=1, rated_watts=None, csv_path=None, boundary="chip")
        sweep = Sweep(cfg=cfg, workload=w, points=[point], power=plan, system=dict(handle.system),
                      model={"name": handle.model}, workers=1)
        run_dir = run_sweep(sweep, tmp_path).run_dir
    rows = {(r["session_id"], r["turn"]): r for r in read_requests(run_dir).to_pylist()}
    assert len(rows) == 6 and all(r["ok"] for r in rows.values())
    for s in sessions:
        for prev, spec in itertools.pairwise(s.requests):
            got = rows[(s.session_id, spec.turn)]
            assert got["input_tokens"] == spec.input_tokens
            # The server hashed the token ids it received: it reuses exactly the previous prompt's full blocks.
            assert got["cached_tokens"] == prev.input_tokens // 16 * 16
