"""Session workloads: prompts extend byte for byte, prefixes share exactly, draws are seeded."""

import itertools

import msgspec
import pytest

from scoville.workload.prompts import prompt_token_ids
from scoville.workload.sessions import (
    SessionWorkload,
    agentic_coding,
    chat_multiturn,
    fixed,
    longctx_128k,
    mix,
    parse_mix,
)
from scoville.workload.synthetic import WorkloadError


def full_blocks(spec):
    return spec.block_hashes[: spec.input_tokens // spec.block_size]


def assert_extends(session):
    """Each turn's prompt starts with the previous prompt, then room for the previous reply."""
    prev = None
    for spec in session.requests:
        tokens = prompt_token_ids(spec)
        assert len(tokens) == spec.input_tokens
        if prev is not None:
            prev_spec, prev_tokens = prev
            assert tokens[: len(prev_tokens)] == prev_tokens
            assert spec.input_tokens > prev_spec.input_tokens + prev_spec.output_tokens
        prev = (spec, tokens)


def test_chat_turns_extend_the_previous_prompt_byte_for_byte():
    sessions = chat_multiturn(seed=3).sessions(3, stream=1)
    for s in sessions:
        assert [r.turn for r in s.requests] == list(range(10))
        assert s.requests[0].think_s == 0 and all(r.think_s > 0 for r in s.requests[1:])
        assert_extends(s)


def test_agentic_context_grows_past_96k_and_extends_byte_for_byte():
    (s,) = agentic_coding(seed=1).sessions(1)
    assert len(s.requests) >= 10
    last = s.requests[-1]
    assert last.input_tokens > 60_000 and last.input_tokens + last.output_tokens <= 131072
    assert max(r.output_tokens for r in s.requests) < 2049  # short tool calls
    assert_extends(s)


def test_shared_prefix_is_identical_across_sessions_and_the_rest_is_private():
    a, b = agentic_coding(seed=5).sessions(2)
    shared = 16384 // 64
    assert a.requests[0].block_hashes[:shared] == b.requests[0].block_hashes[:shared]
    assert a.requests[0].block_hashes[shared] != b.requests[0].block_hashes[shared]
    ta, tb = prompt_token_ids(a.requests[0]), prompt_token_ids(b.requests[0])
    assert ta[:16384] == tb[:16384] and ta[16384:16448] != tb[16384:16448]


def test_hand_worked_prefix_cache_hits():
    # Shared 128 tokens (2 blocks of 64), first message 100, then 50 per turn, replies of 30:
    # inputs 228, 308, 388. A cache that keeps the full blocks of every prompt it has seen
    # (what vLLM does: the synthesised history never matches the model's real reply beyond them).
    w = SessionWorkload(name="hand", turns=fixed(3), shared_prefix_tokens=128, first_message=fixed(100),
                        message=fixed(50), output=fixed(30), think=fixed(1.0))
    s1, s2 = w.sessions(2)
    assert [r.input_tokens for r in s1.requests] == [228, 308, 388]
    cache: set[int] = set()
    hits = []
    for spec in (*s1.requests, s2.requests[0]):
        n = 0
        for h in full_blocks(spec):
            if h not in cache:
                break
            n += 1
        hits.append(n * 64)
        cache.update(full_blocks(spec))
    # turn 0 cold; turn 1 hits 228 // 64 = 3 blocks; turn 2 hits 308 // 64 = 4 blocks;
    # the next session's first turn hits the 2 shared system-prompt blocks.
    assert hits == [0, 192, 256, 128]


def test_sessions_are_deterministic_and_independent_of_count():
    w = chat_multiturn(seed=7)
    def enc(sessions):
        return msgspec.json.encode(list(sessions))

    assert enc(w.sessions(4, stream=2)) == enc(chat_multiturn(seed=7).sessions(4, stream=2))
    assert enc(w.sessions(5)[:3]) == enc(w.sessions(3))
    assert enc(w.sessions(2, stream=0)) != enc(w.sessions(2, stream=1))
    assert enc(w.sessions(2)) != enc(chat_multiturn(seed=8).sessions(2))
    assert len({r.request_id for s in w.sessions(5) for r in s.requests}) == 50


def test_longctx_is_single_turn_within_a_128k_window():
    sessions = longctx_128k().sessions(20)
    for s in sessions:
        (r,) = s.requests
        assert 104039 <= r.input_tokens <= 130048 and 820 <= r.output_tokens <= 1024
        assert r.input_tokens + r.output_tokens <= 131072
    assert len({s.requests[0].input_tokens for s in sessions}) > 1


def test_mix_draws_scenarios_by_weight_and_keeps_their_sessions():
    w = mix(parse_mix("chat-multiturn=3,longctx-128k=1"), name="m", seed=2)
    sessions = w.sessions(400)
    single = sum(len(s.requests) == 1 for s in sessions)
    assert 60 < single < 140  # about a quarter
    picks = w.choices(400)
    for i in (0, 1, 2):
        assert msgspec.json.encode(sessions[i]) == msgspec.json.encode(w.components[picks[i]].session(i, 0))
    assert msgspec.json.encode(w.to_dict()) == msgspec.json.encode(
        mix(parse_mix("chat-multiturn=3,longctx-128k=1"), name="m", seed=2).to_dict())


def test_think_scale_scales_think_time():
    base = chat_multiturn().sessions(1)[0].requests
    fast = chat_multiturn(think_scale=0.1).sessions(1)[0].requests
    assert [r.think_s * 0.1 for r in base] == pytest.approx([r.think_s for r in fast])


@pytest.mark.parametrize("spec", ["nope=1", "chat-multiturn=x", ""])
def test_bad_mixes_are_user_errors(spec):
    with pytest.raises(WorkloadError):
        parse_mix(spec)


@pytest.mark.parametrize("spec", ["chat-multiturn=nan,agentic-coding=1", "chat-multiturn=inf"])
def test_non_finite_mix_weights_are_user_errors(spec):
    from scoville.workload.scenarios import resolve_workload

    with pytest.raises(WorkloadError, match="finite"):
        resolve_workload(f"mix:{spec}")


@pytest.mark.parametrize("recorded", [{"kind": "sessions", "name": "x"}, {"kind": "mix", "name": "m"},
                                      {"kind": "trace", "format": "azure"}])
def test_an_edited_manifest_workload_is_a_user_error(recorded):
    from scoville.workload.sessions import session_workload_from_dict

    with pytest.raises(WorkloadError, match="manifest"):
        session_workload_from_dict(recorded)


def test_bad_parameters_are_user_errors():
    with pytest.raises(WorkloadError, match="think-scale"):
        chat_multiturn(think_scale=-1)
    with pytest.raises(WorkloadError, match="think-scale"):
        chat_multiturn(think_scale=float("nan"))
    with pytest.raises(WorkloadError, match="no room"):
        SessionWorkload(name="x", turns=fixed(1), first_message=fixed(1), message=fixed(1), output=fixed(1),
                        think=fixed(0), shared_prefix_tokens=100, context_limit=50)


def test_simulator_block_keys_hit_where_token_hashing_would():
    """The simulator keys blocks from block_hashes; a real server hashes token ids. They must agree."""
    from scoville.sim.engine import block_keys

    def token_keys(spec, bs):
        ids, keys, prev = prompt_token_ids(spec), [], 0
        for j in range(len(ids) // bs):
            prev = hash((prev, *ids[j * bs:(j + 1) * bs]))
            keys.append(prev)
        return keys

    def common(a, b):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    s1, s2 = chat_multiturn(seed=11).sessions(2)
    for engine_bs in (16, 48):
        pairs = list(itertools.pairwise(s1.requests)) + [(s1.requests[0], s2.requests[0])]
        for a, b in pairs:
            sim = common(block_keys(a, engine_bs), block_keys(b, engine_bs))
            real = common(token_keys(a, engine_bs), token_keys(b, engine_bs))
            assert sim == real > 0
