
"""SimEngine behaviour a user relies on: batching limits, KV capacity, preemption, prefix caching,
host offload, disaggregation, speculative decoding, and that both output modes tell one story."""

from __future__ import annotations

import copy
import itertools

import msgspec
import numpy as np
import pytest

from scoville.load import LoadPoint
from scoville.sim.config import SimConfig, SimConfigError, SpeculativeConfig
from scoville.sim.driver import simulate_point
from scoville.sim.engine import SimEngine, block_keys, step_cost
from scoville.sim.frameworks import load_framework, overridden
from scoville.workload.sessions import chat_multiturn
from scoville.workload.spec import RequestSpec

BASE = dict(hardware="h200", model="llama-3.1-8b")


def spec(i: int, isl: int = 1000, osl: int = 100, **kw) -> RequestSpec:
    return RequestSpec(request_id=f"r{i}", input_tokens=isl, output_tokens=osl, **kw)


def run_events(engine: SimEngine, specs: list[RequestSpec], t: float = 0.0, watch=None) -> list:
    for s in specs:
        engine.submit(s, t)
    events = []
    while not engine.idle():
        nxt = engine.next_event_time()
        assert nxt is not None
        events += engine.advance(nxt)
        if watch:
            watch(engine)
    return events


def burst(engine: SimEngine, cfg: SimConfig, specs: list[RequestSpec]) -> None:
    """Submit ``specs`` together at t=0 and run until the last has reached the scheduler, plus one step: the
    front end hands a burst over one request time apart."""
    for s in specs:
        engine.submit(s, 0.0)
    engine.advance(len(specs) * load_framework(cfg.framework).request_overhead_ms * 1e-3)
    engine.advance(engine.next_event_time())


def per_request(events) -> dict[str, list]:
    out: dict[str, list] = {}
    for e in events:
        out.setdefault(e.request_id, []).append(e)
    return out


def test_every_request_gets_exactly_its_tokens_in_time_order():
    eng = SimEngine(SimConfig(**BASE, max_num_seqs=8))
    specs = [spec(i, isl=500 + 37 * i, osl=20 + 3 * i) for i in range(20)]
    events = run_events(eng, specs)
    assert [e.t for e in events] == sorted(e.t for e in events)
    by = per_request(events)
    for s in specs:
        evs = by[s.request_id]
        assert sum(e.count for e in evs) == s.output_tokens
        assert evs[-1].finished and not any(e.finished for e in evs[:-1])
        assert all(b.t > a.t for a, b in itertools.pairwise(evs))  # one token per step without spec decode
    st = eng.stats()
    assert st.generation_tokens_total == sum(s.output_tokens for s in specs)
    assert st.prompt_tokens_total == sum(s.input_tokens for s in specs)
    assert st.running == 0 and st.waiting == 0


@pytest.mark.parametrize("opts", [
    dict(max_num_seqs=4, max_num_batched_tokens=2048),
    dict(max_num_seqs=64, kv_capacity_tokens=12000),                 # KV pressure: preemptions
    dict(replicas=3, kv_capacity_tokens=10000, max_num_batched_tokens=1024),
])
def test_event_mode_and_record_mode_produce_identical_timelines(opts):
    # record mode advances decoding requests lazily as a group; the emulator's event mode steps each one
    cfg = SimConfig(**BASE, **opts)
    specs = [spec(i, isl=700 + 230 * (i % 7), osl=40 + 7 * i) for i in range(40)]
    events = run_events(SimEngine(cfg, token_events=True), specs)
    rec = SimEngine(cfg, token_events=False)
    for s in specs:
        rec.submit(s, 0.0)
    done = [e.request_id for e in rec.advance(1e9) if e.finished]
    assert sorted(done) == sorted(s.request_id for s in specs)
    by = per_request(events)
    for s in specs:
        tr = rec.pop_trace(s.request_id)
        assert np.allclose(tr.times, [e.t for e in by[s.request_id]])
        assert tr.counts.tolist() == [e.count for e in by[s.request_id]]


def test_max_num_seqs_and_token_budget_bound_each_step():
    cfg = SimConfig(**BASE, max_num_seqs=3, max_num_batched_tokens=1024)
    eng = SimEngine(cfg)
    seen = []
    run_events(eng, [spec(i, isl=4000, osl=30) for i in range(8)],
               watch=lambda e: seen.append(e.stats().running))
    assert max(seen) <= 3
    # 4000-token prompts under a 1024-token budget take several chunks: TTFT of the first is >= 4 steps
    eng2 = SimEngine(cfg)
    first = per_request(run_events(eng2, [spec(0, isl=4000, osl=2)]))["r0"][0].t
    one_step = step_cost(cfg, cfg.parallel).step_time(1024, 1, 1024 * 1025 / 2, 1024)
    assert first > 3.5 * one_step


@pytest.mark.parametrize("framework, prefill_steps", [("vllm", 1), ("sglang", 4)])
def test_each_attention_rank_schedules_its_own_token_budget(framework, prefill_steps):
    """Under data-parallel attention a prompt lives on one rank and each rank spends its own budget: vLLM's
    --max-num-batched-tokens holds per rank, so four 4000-token prompts start together on DP4 with a 4096 budget
    and prefill in one step, where TP4 runs them one a step; SGLang divides its flag by the DP size (1024 a
    rank), so its four ranks take four chunked steps, still together. Prompts reach the scheduler at once."""
    with overridden(msgspec.structs.replace(load_framework(framework), request_overhead_ms=0.0)):
        for parallel, together in (({"tp": 4}, False), ({"tp": 1, "dp": 4}, True)):
            cfg = SimConfig(**BASE, framework=framework, parallel=parallel, max_num_batched_tokens=4096)
            eng = SimEngine(cfg)
            firsts = {r: evs[0].t for r, evs in per_request(run_events(eng, [spec(i, isl=4000, osl=2)
                                                                             for i in range(4)])).items()}
            assert (len(set(firsts.values())) == 1) == together, parallel
            if together:
                assert eng.counters()["steps"] == prefill_steps + 1      # the prefill steps, then one decode


def test_a_burst_reaches_the_scheduler_one_request_time_apart():
    # vLLM's API server hands simultaneous requests to the engine one by one (docs/calibrate.md): the k-th of a
    # burst cannot start before k request times, while one request alone pays a single request time
    cfg = SimConfig(**BASE, max_num_seqs=64)
    request_s = load_framework(cfg.framework).request_overhead_ms * 1e-3
    burst = [spec(i, isl=16, osl=2) for i in range(6)]
    firsts = sorted(e[0].t for e in per_request(run_events(SimEngine(cfg), burst)).values())
    assert all(t >= (k + 1) * request_s for k, t in enumerate(firsts))
    alone = per_request(run_events(SimEngine(cfg), [spec(0, isl=16, osl=2)], t=1.0))["r0"][0].t - 1.0
    assert request_s <= alone < 2 * request_s


@pytest.mark.parametrize("async_scheduling", [True, False])
def test_a_request_arriving_mid_step_starts_one_step_later_under_async_scheduling(async_scheduling):
    # vLLM's async scheduler (and SGLang's and TensorRT-LLM's overlap schedulers) forms each step while the one
    # before runs: a request reaching a busy instance during a step misses the step already formed after it
    cfg = SimConfig(**BASE, async_scheduling=async_scheduling)
    request_s = load_framework(cfg.framework).request_overhead_ms * 1e-3
    engine = SimEngine(cfg)
    engine.submit(spec(0, isl=16, osl=400), 0.0)
    events = engine.advance(0.2)
    step = events[-1].t - events[-2].t
    sent = events[-1].t + 0.5 * step - request_s         # reaches the scheduler half-way through a step
    engine.submit(spec(1, isl=16, osl=4), sent)
    events += run_events(engine, [])
    steps = [e.t for e in per_request(events)["r0"]]      # r0 takes a token every step: the steps' ends
    in_progress = next(k for k, t in enumerate(steps) if t > sent + request_s)
    first = per_request(events)["r1"][0].t                 # its prompt's step ends with its first token
    assert first == pytest.approx(steps[in_progress + 1 + async_scheduling])


@pytest.mark.parametrize(("framework", "hardware", "setting", "ahead"), [
    ("vllm", "h100", None, True),
    ("vllm", "epyc-zen4-2vcpu", None, False),   # vLLM's CPU platform turns async scheduling off
    ("sglang", "epyc-zen4-2vcpu", None, True),
    ("vllm", "epyc-zen4-2vcpu", True, True),    # a config that says so wins
    ("vllm", "h100", False, False),
])
def test_steps_are_formed_ahead_as_the_framework_runs_on_that_hardware(framework, hardware, setting, ahead):
    cfg = SimConfig(hardware=hardware, model="llama-3.1-8b", framework=framework, async_scheduling=setting)
    assert cfg.schedules_ahead() is ahead


@pytest.mark.parametrize("framework, setting, ahead", [
    ("sglang", None, True),      # SGLang's drafts run under its overlap scheduler by default (spec v2, 2026)
    ("sglang", False, False),    # SGLang up to 0.5.9 without SGLANG_ENABLE_SPEC_V2: a config that says so
    ("trtllm", None, True),      # TensorRT-LLM's overlap scheduler runs with MTP
])
def test_drafts_without_the_overlap_scheduler_pay_its_host_work(framework, setting, ahead):
    spec = SpeculativeConfig(num_draft_tokens=2, acceptance_rate=0.75)
    cfg = SimConfig(hardware="b200", model="deepseek-r1", framework=framework, parallel={"tp": 8, "ep": 8},
                    speculative=spec, async_scheduling=setting)
    plain = cfg.model_copy(update={"speculative": None, "async_scheduling": None})   # plain, the default scheduling
    assert cfg.schedules_ahead() is ahead and plain.schedules_ahead()
    cost, plain_cost = step_cost(cfg, cfg.parallel), step_cost(plain, plain.parallel)
    serial_us = cost.framework.serial_host_us if not ahead else 0.0
    assert framework != "sglang" or cost.framework.serial_host_us > 1000   # SGLang's measured figure, in us
    b = 8
    extra = cost.breakdown(3 * b, b, 3 * b * 8000.0, b * 8000.0, b, b * 8000.0)["overhead"] - \
        plain_cost.breakdown(b, b, b * 8000.0, b * 8000.0)["overhead"]
    assert extra == pytest.approx(serial_us * 1e-6)


def test_admission_stops_when_kv_blocks_run_out():
    # 4 prompts of 1000 tokens fit in 4096 tokens of KV (16-token blocks: 63 blocks each), the 5th does not.
    cfg = SimConfig(**BASE, kv_capacity_tokens=4096, max_num_seqs=64)
    eng = SimEngine(cfg)
    burst(eng, cfg, [spec(i, isl=1000, osl=50) for i in range(10)])
    st = eng.stats()
    assert st.running == 4 and st.waiting == 6
    assert st.kv_usage > 0.9


def _without_window_kv(cfg: SimConfig):
    """The same cost model with the sliding-window layers' per-sequence KV zeroed (the control)."""
    def cost_for(p):
        c = copy.copy(step_cost(cfg, p))
        c.kv_bytes_per_seq = 0.0
        return c
    return cost_for


def test_sliding_window_kv_is_reserved_per_admitted_sequence():
    # gpt-oss keeps 128 tokens x 18 sliding layers per sequence: 8 blocks of its 36 KiB/token full-layer KV.
    # 1024 blocks hold 16 prompts of 1000 tokens (63 blocks) without that term, 14 with it (71 blocks).
    cfg = SimConfig(hardware="h200", model="gpt-oss-120b", kv_capacity_tokens=16384, max_num_seqs=64,
                    max_num_batched_tokens=32768)
    running = {}
    for name, cost_for in (("window", None), ("control", _without_window_kv(cfg))):
        eng = SimEngine(cfg, cost_for=cost_for)
        burst(eng, cfg, [spec(i, isl=1000, osl=50) for i in range(20)])
        seen = [eng.stats().running]
        for _ in range(8):      # a few more steps: admission stops at the KV limit, and no request ends yet
            eng.advance(eng.next_event_time())
            seen.append(eng.stats().running)
        running[name] = max(seen)
    assert running == {"window": 1024 // 71, "control": 1024 // 63}
    eng = SimEngine(cfg)
    assert eng.kv_capacity_tokens == (1024 - 8) * 16


@pytest.mark.parametrize("token_events", [True, False])
def test_sliding_window_reservations_are_returned_when_sequences_leave(token_events):
    cfg = SimConfig(hardware="h200", model="gpt-oss-120b", kv_capacity_tokens=8192, max_num_seqs=64)
    eng = SimEngine(cfg, token_events=token_events)
    specs = [spec(i, isl=600, osl=120) for i in range(24)]
    for s in specs:
        eng.submit(s, 0.0)
    while not eng.idle():
        eng.advance(eng.next_event_time())
    assert eng.stats().preemptions_total > 0          # the pressure was real
    assert eng.stats().kv_usage == 0.0                # every reserved block came back
    eng.submit(spec(99, isl=4000, osl=500), 0.0)
    eng.advance(0.5)
    eng.cancel("r99", 0.5)
    assert eng.stats().kv_usage == 0.0 and eng.idle()


def test_request_that_fits_only_without_its_window_kv_fails_clearly():
    cfg = SimConfig(hardware="h200", model="gpt-oss-120b", kv_capacity_tokens=2048)
    events = run_events(SimEngine(cfg), [spec(0, isl=1990, osl=10)])    # 125 token blocks + 8 > 128
    assert len(events) == 1 and "sliding-window" in events[0].error
    with pytest.raises(SimConfigError, match="sliding-window"):
        SimEngine(SimConfig(hardware="h200", model="gpt-oss-120b", kv_capacity_tokens=64))


def test_preemption_when_decode_outgrows_the_cache_and_every_request_still_completes():
    cfg = SimConfig(**BASE, kv_capacity_tokens=4096, max_num_seqs=64)
    eng = SimEngine(cfg)
    specs = [spec(i, isl=900, osl=400) for i in range(8)]
    by = per_request(run_events(eng, specs))
    assert eng.stats().preemptions_total > 0
    assert eng.counters()["recomputed_tokens"] > 0
    assert all(sum(e.count for e in by[s.request_id]) == s.output_tokens for s in specs)


def test_request_larger_than_the_cache_fails_with_a_clear_error():
    eng = SimEngine(SimConfig(**BASE, kv_capacity_tokens=2048))
    events = run_events(eng, [spec(0, isl=4000, osl=10), spec(1, isl=500, osl=10)])
    err = [e for e in events if e.request_id == "r0"]
    assert len(err) == 1 and err[0].finished and "KV blocks" in err[0].error
    assert sum(e.count for e in events if e.request_id == "r1") == 10


def test_cancel_frees_blocks_at_once():
    eng = SimEngine(SimConfig(**BASE, kv_capacity_tokens=8192))
    eng.submit(spec(0, isl=4000, osl=500), 0.0)
    eng.advance(0.5)
    assert eng.stats().kv_usage > 0.4
    eng.cancel("r0", 0.5)
    assert eng.stats().kv_usage == 0.0 and eng.idle()


def shared_prefix_specs(n: int, prefix_blocks: int = 192, tail: int = 256, groups: int = 6) -> list[RequestSpec]:
    """``n`` requests over ``groups`` distinct system prompts of ``prefix_blocks`` 16-token blocks.

    Popularity is skewed (a few prompts are hot), as with real shared system prompts.
    """
    weights = np.array([2.0 ** -k for k in range(groups)])
    picks = np.random.default_rng(7).choice(groups, size=n, p=weights / weights.sum())
    out = []
    for i in range(n):
        g = int(picks[i])
        hashes = tuple(1_000_000 * (g + 1) + b for b in range(prefix_blocks))
        out.append(RequestSpec(request_id=f"q{i}", input_tokens=prefix_blocks * 16 + tail, output_tokens=8,
                               block_hashes=hashes, block_size=16, prompt_seed=i))
    return out


def serve_one_at_a_time(cfg: SimConfig, specs: list[RequestSpec]) -> tuple[float, float]:
    """Mean TTFT and hit rate when requests arrive one after another (no queueing)."""
    eng = SimEngine(cfg)
    t, ttfts = 0.0, []
    for s in specs:
        eng.submit(s, t)
        evs = []
        while not any(e.finished for e in evs):
            evs += eng.advance(eng.next_event_time())
        ttfts.append(evs[0].t - t)
        t = evs[-1].t
    st = eng.stats()
    return float(np.mean(ttfts)), st.prefix_cache_hits / st.prefix_cache_queries


def test_more_cache_capacity_raises_hit_rate_and_lowers_ttft():
    specs = shared_prefix_specs(60)
    common = dict(BASE, enable_prefix_caching=True)
    # 6 prefixes x 3328 tokens ~ 20k tokens: 8k of KV holds two of them, 32k holds all
    ttft_small, hit_small = serve_one_at_a_time(SimConfig(**common, kv_capacity_tokens=8192), specs)
    ttft_big, hit_big = serve_one_at_a_time(SimConfig(**common, kv_capacity_tokens=32768), specs)
    ttft_off, hit_off = serve_one_at_a_time(SimConfig(**BASE, kv_capacity_tokens=32768), specs)
    assert hit_off == 0.0
    assert 0.0 < hit_small < hit_big
    assert ttft_big < ttft_small < ttft_off


def test_cached_tokens_reported_on_the_first_event():
    eng = SimEngine(SimConfig(**BASE, enable_prefix_caching=True))
    a, b = shared_prefix_specs(2, groups=1)
    first = per_request(run_events(eng, [a]))["q0"][0]
    assert first.cached_tokens == 0
    t = eng.now
    second = per_request(run_events(eng, [b], t=t))["q1"][0]
    assert second.cached_tokens == 192 * 16


def test_block_keys_chain_prefixes_across_block_sizes():
    s1 = RequestSpec(request_id="a", input_tokens=256, output_tokens=1, block_hashes=(1, 2, 3, 4), block_size=64)
    s2 = RequestSpec(request_id="b", input_tokens=256, output_tokens=1, block_hashes=(1, 2, 9, 4), block_size=64)
    k1, k2 = block_keys(s1, 16), block_keys(s2, 16)
    assert len(k1) == 16
    # they diverge at block 3 and stay apart
    assert k1[:8] == k2[:8] and all(x != y for x, y in zip(k1[8:], k2[8:], strict=True))
    assert block_keys(RequestSpec(request_id="c", input_tokens=100, output_tokens=1), 16) == []


def test_host_offload_tier_reduces_recompute():
    specs = [spec(i, isl=900, osl=400) for i in range(8)]
    plain = SimEngine(SimConfig(**BASE, kv_capacity_tokens=4096))
    tier = SimEngine(SimConfig(**BASE, kv_capacity_tokens=4096,
                               host_offload={"capacity_gb": 64, "bandwidth_gbps": 50}))
    by_plain = per_request(run_events(plain, specs))
    by_tier = per_request(run_events(tier, specs))
    assert plain.counters()["recomputed_tokens"] > 0
    assert tier.counters()["swapped_out_blocks"] > 0
    assert tier.counters()["recomputed_tokens"] < plain.counters()["recomputed_tokens"]
    for by in (by_plain, by_tier):
        assert all(sum(e.count for e in by[s.request_id]) == s.output_tokens for s in specs)


def test_prefix_blocks_evicted_to_the_host_tier_are_reloaded():
    specs = shared_prefix_specs(30)
    common = dict(BASE, enable_prefix_caching=True, kv_capacity_tokens=8192)
    ttft_no, hit_no = serve_one_at_a_time(SimConfig(**common), specs)
    ttft_host, hit_host = serve_one_at_a_time(
        SimConfig(**common, host_offload={"capacity_gb": 64, "bandwidth_gbps": 50}), specs)
    assert hit_host > hit_no
    assert ttft_host < ttft_no


def test_speculative_decoding_yields_groups_and_faster_decode():
    plain = SimConfig(**BASE)
    fast = SimConfig(**BASE, speculative={"num_draft_tokens": 3, "acceptance_rate": 0.8})
    specs = [spec(i, isl=1000, osl=300) for i in range(4)]
    ev_plain = per_request(run_events(SimEngine(plain), specs))
    ev_fast = per_request(run_events(SimEngine(fast, seed=3), specs))
    for s in specs:
        assert sum(e.count for e in ev_fast[s.request_id]) == s.output_tokens
        assert max(e.count for e in ev_fast[s.request_id]) == 4
        assert ev_fast[s.request_id][-1].t < ev_plain[s.request_id][-1].t
    counts = [e.count for s in specs for e in ev_fast[s.request_id][1:-1]]
    expect = fast.speculative.mean_acceptance_length
    assert abs(np.mean(counts) - expect) < 0.25


def test_disaggregated_first_token_waits_for_the_kv_transfer_and_the_handover():
    """The KV copy at the link's rate, then the framework's handover (vLLM: the decode side noticing the loaded KV
    and running the forward that emits the first token, PR #51919's measurement)."""
    dis = SimConfig(**BASE, disaggregation={"prefill": {"replicas": 1}, "decode": {"replicas": 1},
                                            "kv_transfer": "scaleout"})
    uni = SimConfig(**BASE)
    s = spec(0, isl=8000, osl=50)
    ttft_uni = per_request(run_events(SimEngine(uni), [s]))["r0"][0].t
    ttft_dis = per_request(run_events(SimEngine(dis), [s]))["r0"][0].t
    cost = step_cost(dis, dis.parallel)
    xfer, handover = cost.kv_transfer_time(8000, True), cost.framework.disagg_handover_ms * 1e-3
    assert xfer > 0 and handover > 0
    assert ttft_dis == pytest.approx(ttft_uni + xfer + handover, rel=1e-6)


def test_the_steady_estimate_adds_the_handover_to_a_lone_users_disaggregated_first_token():
    """One user: the handover lands on the first token whole, less the little prefill queueing the slower request
    rate spares (the estimate's M/D/1 wait)."""
    from scoville.sim.steady import estimate

    dis = SimConfig(**BASE, disaggregation={"prefill": {}, "decode": {}, "kv_transfer": "scaleout"})
    with_handover = estimate(dis, 8000, 50, np.array([1.0])).ttft[0]
    vllm = load_framework("vllm")
    with overridden(msgspec.structs.replace(vllm, disagg_handover_ms=0.0)):
        without = estimate(dis, 8000, 50, np.array([1.0])).ttft[0]
    handover = vllm.disagg_handover_ms * 1e-3
    assert 0.8 * handover < with_handover - without <= handover


def test_round_robin_spreads_requests_over_replicas():
    eng = SimEngine(SimConfig(**BASE, replicas=3, router="round_robin"))
    for i in range(6):
        eng.submit(spec(i), 0.0)
    assert [len(i.arrivals) for i in eng.instances] == [2, 2, 2]


def test_config_that_does_not_fit_is_a_user_error():
    with pytest.raises(SimConfigError, match="does not fit"):
        SimEngine(SimConfig(hardware="h100", model="deepseek-r1"))


def test_reply_blocks_are_reused_only_when_asked():
    """By default the next turn hits only its prompt's shared blocks, as scoville's client sees on a
    server (it resends synthesised history, not the model's own reply)."""
    eng = SimEngine(SimConfig(**BASE, enable_prefix_caching=True))
    t0 = RequestSpec(request_id="s-t0", session_id="s", turn=0, input_tokens=320, output_tokens=100,
                     block_hashes=tuple(range(20)), block_size=16)
    t1 = RequestSpec(request_id="s-t1", session_id="s", turn=1, input_tokens=480, output_tokens=10,
                     block_hashes=tuple(range(20)) + tuple(range(100, 110)), block_size=16)
    run_events(eng, [t0])
    first = per_request(run_events(eng, [t1], t=eng.now))["s-t1"][0]
    assert first.cached_tokens == 20 * 16


def test_next_turn_of_a_session_reuses_the_previous_reply_blocks():
    eng = SimEngine(SimConfig(**BASE, enable_prefix_caching=True, reuse_reply_blocks=True))
    t0 = RequestSpec(request_id="s-t0", session_id="s", turn=0, input_tokens=320, output_tokens=100,
                     block_hashes=tuple(range(20)), block_size=16)
    # the next prompt = previous prompt + reply + a new message; its hashes extend the previous ones
    t1 = RequestSpec(request_id="s-t1", session_id="s", turn=1, input_tokens=480, output_tokens=10,
                     block_hashes=tuple(range(20)) + tuple(range(100, 110)), block_size=16)
    run_events(eng, [t0])
    first = per_request(run_events(eng, [t1], t=eng.now))["s-t1"][0]
    # prompt and reply are cached except the last, partly filled block (419 tokens of KV -> 26 full blocks)
    assert first.cached_tokens == 26 * 16
    # a prompt that does not extend the previous one gets only what its own hashes share
    other = RequestSpec(request_id="s-t2", session_id="s", turn=2, input_tokens=480, output_tokens=10,
                        block_hashes=tuple(range(5)) + tuple(range(200, 225)), block_size=16)
    assert per_request(run_events(eng, [other], t=eng.now))["s-t2"][0].cached_tokens == 5 * 16


def test_prefix_hits_in_the_host_tier_survive_the_evictions_their_own_admission_causes():
    # HBM this small makes admitting a request evict cached blocks into the host tier, whose LRU then had to
    # drop entries: once those were the very prefix blocks the request was about to load (a KeyError)
    cfg = SimConfig(**BASE, enable_prefix_caching=True, reuse_reply_blocks=True, kv_capacity_tokens=16000,
                    host_offload={"capacity_gb": 2, "bandwidth_gbps": 50})
    point = LoadPoint(index=0, concurrency=16, num_requests=60, warmup_requests=4)
    res = simulate_point(cfg, chat_multiturn(seed=3), point, seed=11)
    assert res.table.num_rows == 64 and all(res.table.column("ok").to_pylist())
    assert res.counters["host_hit_tokens"] > 0
