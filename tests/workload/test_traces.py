"""Trace readers and replay: the shipped samples, prefix structure, timing options, AgentX replay, errors."""

import itertools
import json
from importlib.resources import files
from pathlib import Path

import msgspec
import numpy as np
import pytest

from scoville.workload.prompts import prompt_token_ids
from scoville.workload.sessions import chat_multiturn
from scoville.workload.synthetic import WorkloadError
from scoville.workload.traces import TraceError, detect_format, load_trace, write_scoville_trace

DATA = Path(str(files("scoville") / "data" / "traces"))


def shares_prefix(a, b, blocks):
    n = blocks * a.block_size
    return prompt_token_ids(a)[:n] == prompt_token_ids(b)[:n]


@pytest.mark.parametrize("name, fmt, sessions, requests", [
    ("agentx", "agentx", 3, 49),
    ("mooncake_sample.jsonl", "mooncake", 40, 40),
    ("azure_sample.csv", "azure", 40, 40),
    ("scoville_sample.jsonl", "scoville", 4, 16),
])
def test_shipped_samples_parse(name, fmt, sessions, requests):
    w = load_trace(DATA / name)
    assert w.format == detect_format(DATA / name) == fmt
    s = w.summary()
    assert (s["sessions"], s["requests"]) == (sessions, requests)
    replay = w.sessions(sessions)
    assert sum(len(x.requests) for x in replay) == requests
    assert w.to_dict()["sha256"] == load_trace(DATA / name).to_dict()["sha256"]


def test_agentx_tree_is_one_lane_in_time_order_and_subagent_shares_the_system_prompt():
    w = load_trace(DATA / "agentx")
    trace = w.trace_sessions[0]
    times = [t.t for t in trace.turns]
    assert times == sorted(times)
    lanes = {t.lane for t in trace.turns}
    assert lanes == {"", "sa1"}
    (session,) = w.sessions(1)
    root = session.requests[0]
    sub = next(r for r in session.requests if r.request_id.endswith("-sa1"))
    # The shipped sessions' 1024-token system prompt is 16 shared blocks (same local ids).
    assert shares_prefix(root, sub, 16)
    assert prompt_token_ids(root)[1024:1088] != prompt_token_ids(sub)[1024:1088]
    # Successive root requests of an agent extend one another where the trace says so.
    roots = [r for r in session.requests if not r.request_id.endswith("-sa1")]
    assert shares_prefix(roots[0], roots[1], roots[0].input_tokens // 64)


def test_mooncake_hash_ids_become_shared_prefixes_and_timestamps_arrivals():
    w = load_trace(DATA / "mooncake_sample.jsonl")
    lines = [json.loads(x) for x in (DATA / "mooncake_sample.jsonl").read_text().splitlines()]
    sessions = w.sessions(len(lines))

    def common(x, y):
        n = 0
        while n < min(len(x), len(y)) and x[n] == y[n]:
            n += 1
        return n

    # Two requests whose block ids agree on a prefix and then diverge (two sessions, one system prompt).
    i, j = next((i, j) for i in range(len(lines)) for j in range(i + 1, len(lines))
                if 1 <= common(lines[i]["hash_ids"], lines[j]["hash_ids"])
                < min(len(lines[i]["hash_ids"]), len(lines[j]["hash_ids"])) - 1)
    a, b = sessions[i].requests[0], sessions[j].requests[0]
    n = common(lines[i]["hash_ids"], lines[j]["hash_ids"])
    assert a.block_size == 512
    assert shares_prefix(a, b, n)
    assert prompt_token_ids(a)[n * 512:(n + 1) * 512] != prompt_token_ids(b)[n * 512:(n + 1) * 512]
    t = np.array([x["timestamp"] for x in lines]) / 1000
    assert w.arrivals(len(lines)) == pytest.approx(t - t[0])


def test_time_scale_idle_gap_cap_and_sub_sampling():
    base = load_trace(DATA / "azure_sample.csv").arrivals(40)
    half = load_trace(DATA / "azure_sample.csv", time_scale=0.5).arrivals(40)
    assert half == pytest.approx(base / 2)
    capped = load_trace(DATA / "azure_sample.csv", idle_gap_cap_s=0.1).arrivals(40)
    assert np.diff(capped).max() <= 0.1 + 1e-12 and np.diff(base).max() > 0.1
    assert np.diff(capped) == pytest.approx(np.minimum(np.diff(base), 0.1))
    some = load_trace(DATA / "azure_sample.csv", sample=0.5, seed=1)
    assert 8 < len(some.trace_sessions) < 32
    assert len(load_trace(DATA / "azure_sample.csv", max_sessions=5).sessions(5)) == 5
    think = load_trace(DATA / "scoville_sample.jsonl", idle_gap_cap_s=0.5).sessions(4)
    assert max(r.think_s for s in think for r in s.requests) <= 0.5


def test_recycled_and_next_point_replays_carry_a_cache_bust_marker():
    w = load_trace(DATA / "scoville_sample.jsonl")
    first, *_, again = w.sessions(5)
    assert again.session_id.endswith("-r1")
    assert [r.input_tokens for r in first.requests] == [r.input_tokens for r in again.requests]
    assert not set(first.requests[0].block_hashes) & set(again.requests[0].block_hashes)
    other_point = w.sessions(1, stream=1)[0]
    assert not set(first.requests[0].block_hashes) & set(other_point.requests[0].block_hashes)
    arr = w.arrivals(5)
    assert arr[4] > arr[3]  # the second round starts after the first ends


def test_agentx_replay_starts_mid_trace_after_a_priming_warmup():
    w = load_trace(DATA / "agentx", replay="agentx", seed=4)
    lanes = w.sessions(6)
    assert len({s.session_id for s in lanes}) == 6
    by_key = {s.key: s for s in w.trace_sessions}
    for lane in lanes:
        prime, first = lane.requests[0], lane.requests[1]
        key = lane.session_id.removeprefix("p0-").split("-r")[0]
        length = len(by_key[key].turns)
        assert prime.warmup and prime.output_tokens == 1 and not any(r.warmup for r in lane.requests[1:])
        assert int(0.25 * length) <= first.turn <= int(0.75 * length) and prime.turn == first.turn - 1
        assert prime.input_tokens == by_key[key].turns[first.turn - 1].input_tokens
        assert len(lane.requests) == length - first.turn + 1
    assert msgspec.json.encode(list(lanes)) == msgspec.json.encode(
        list(load_trace(DATA / "agentx", replay="agentx", seed=4).sessions(6)))
    assert msgspec.json.encode(lanes[4]) == msgspec.json.encode(w.sessions(9)[4])  # independent of the count
    with pytest.raises(WorkloadError, match="closed-loop"):
        w.arrivals(3)


def test_scoville_format_round_trips_a_generated_workload(tmp_path):
    sessions = chat_multiturn(seed=1).sessions(3)
    path = tmp_path / "t.jsonl"
    assert write_scoville_trace(path, sessions, arrivals=[0.0, 1.0, 2.5]) == 30
    w = load_trace(path)
    assert w.arrivals(3) == pytest.approx([0.0, 1.0, 2.5])
    replay = w.sessions(3)
    for orig, back in zip(sessions, replay, strict=True):
        assert [(r.input_tokens, r.output_tokens) for r in orig.requests] == \
               [(r.input_tokens, r.output_tokens) for r in back.requests]
        assert [r.think_s for r in orig.requests] == pytest.approx([r.think_s for r in back.requests])
        for a, b in itertools.pairwise(back.requests):
            assert prompt_token_ids(b)[: a.input_tokens] == prompt_token_ids(a)
    # The shared system prompt stays shared across sessions.
    assert shares_prefix(replay[0].requests[0], replay[1].requests[0], 8)


def test_writing_a_trace_with_arrivals_that_do_not_pair_with_its_sessions_is_one_error_before_any_file(tmp_path):
    path = tmp_path / "t.jsonl"
    with pytest.raises(TraceError, match="2 arrival times for 3 sessions"):
        write_scoville_trace(path, chat_multiturn(seed=1).sessions(3), arrivals=[0.0, 1.0])
    assert not path.exists()


# --- malformed traces: file, line and field ------------------------------------------------------


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("name, text, where, field", [
    ("m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
                '{"timestamp": 5, "input_length": "ten", "output_length": 2}\n', ":2:", "input_length"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n\n'
                '{"timestamp": 5, "input_length": 10}\n', ":3:", "output_length"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [1, 2, 3]}\n',
     ":1:", "hash_ids"),
    ("m.jsonl", '{"timestamp": -1, "input_length": 6, "output_length": 2}\n', ":1:", "timestamp"),
    ("s.jsonl", '{"format": "scoville-trace", "version": 1, "block_size": 16}\n'
                '{"input_tokens": 10, "output_tokens": 1, "hash_ids": [1, 2]}\n', ":2:", "hash_ids"),
    ("s.jsonl", '{"format": "scoville-trace", "version": 9}\n', ":1:", "version"),
    ("s.jsonl", '{"input_tokens": 0, "output_tokens": 1}\n', ":1:", "input_tokens"),
    ("s.jsonl", '{"input_tokens": 5, "output_tokens": 1, "think_s": "soon"}\n', ":1:", "think_s"),
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,10,2\nyesterday,10,2\n",
     ":3:", "TIMESTAMP"),
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,10,-2\n", ":2:", "GeneratedTokens"),
    ("a.csv", "TIMESTAMP,Context\n2023-11-16 18:15:46.1,10\n", ":1:", "ContextTokens"),
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,10,2\n"
              "2023-11-16 18:15:47.1+00:00,10,2\n", ":3:", "TIMESTAMP"),  # mixed zones: was a TypeError
])
def test_malformed_lines_name_file_line_and_field(tmp_path, name, text, where, field):
    path = write(tmp_path, name, text)
    with pytest.raises(TraceError) as e:
        load_trace(path, "mooncake" if name.startswith("m") else None)
    msg = str(e.value)
    assert msg.startswith(f"{path}{where}") and repr(field) in msg
    assert e.value.field == field


def test_invalid_json_reports_its_line(tmp_path):
    path = write(tmp_path, "m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n{"timestamp": 1,\n')
    with pytest.raises(TraceError, match=r"m\.jsonl:2: not valid JSON"):
        load_trace(path, "mooncake")


def agentx_doc(requests):
    head = '{"id": "x", "block_size": 64, "hash_id_scope": "local", "requests": [\n'
    return head + ",\n".join("  " + json.dumps(r) for r in requests) + "\n]}\n"


GOOD = {"t": 0.0, "type": "n", "in": 100, "out": 5, "hash_ids": [1, 2], "api_time": 0.1}


@pytest.mark.parametrize("bad, line, field", [
    ({**GOOD, "in": -3}, 3, "in"),
    ({**GOOD, "t": None}, 3, "t"),
    ({**GOOD, "type": "weird"}, 3, "type"),
    ({**GOOD, "hash_ids": [1, 2, 3]}, 3, "hash_ids"),
    ({**GOOD, "api_time": "fast"}, 3, "api_time"),
])
def test_agentx_errors_point_at_the_request_line(tmp_path, bad, line, field):
    path = write(tmp_path, "sess.json", agentx_doc([GOOD, GOOD, bad]))
    with pytest.raises(TraceError) as e:
        load_trace(path)
    assert str(e.value).startswith(f"{path}:{line + 1}:") and e.value.field == field


def test_agentx_nested_subagent_error_and_jsonl_corpus(tmp_path):
    sub = {"t": 1.0, "type": "subagent", "agent_id": "a", "requests": [GOOD, {**GOOD, "out": 1.5}]}
    path = write(tmp_path, "sess.json", agentx_doc([GOOD, sub]))
    with pytest.raises(TraceError) as e:
        load_trace(path)
    assert e.value.field == "out" and e.value.line == 3
    corpus = write(tmp_path, "c.jsonl", json.dumps({"id": "a", "requests": [GOOD]}) + "\n"
                   + json.dumps({"id": "b", "requests": [GOOD, {**GOOD, "in": "x"}]}) + "\n")
    with pytest.raises(TraceError, match=r"c\.jsonl:2: field 'in'"):
        load_trace(corpus)
    good = write(tmp_path, "ok.jsonl", json.dumps({"id": "a", "requests": [GOOD, sub]}).replace('1.5', '2') + "\n")
    w = load_trace(good)
    assert w.format == "agentx" and w.summary()["subagent_requests"] == 2


def test_unusable_paths_formats_and_options(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "missing.jsonl")
    odd = write(tmp_path, "odd.jsonl", '{"prompt": "hi"}\n')
    with pytest.raises(TraceError, match="trace-format"):
        load_trace(odd)
    with pytest.raises(TraceError, match="unknown trace format"):
        load_trace(odd, "sharegpt")
    with pytest.raises(TraceError, match="unknown trace option"):
        load_trace(DATA / "azure_sample.csv", speed=2)
    with pytest.raises(WorkloadError, match="time-scale"):
        load_trace(DATA / "azure_sample.csv", time_scale=0)
    with pytest.raises(WorkloadError, match="replay mode"):
        load_trace(DATA / "azure_sample.csv", replay="fast")
    with pytest.raises(WorkloadError, match="idle-gap-cap"):  # a nan cap would turn every arrival into nan
        load_trace(DATA / "azure_sample.csv", idle_gap_cap_s=float("nan"))
    with pytest.raises(TraceError, match="no .json"):
        (tmp_path / "empty").mkdir()
        load_trace(tmp_path / "empty")
    with pytest.raises(WorkloadError, match="no session arrival times"):
        load_trace(DATA / "agentx").arrivals(2)
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(TraceError, match="not a text file"):  # format detection reads it too
        load_trace(binary)


def test_azure_timestamps_keep_their_time_zone(tmp_path):
    # The fraction used to swallow the zone's digits: '.5+01:00' read as a naive '.501000'.
    path = write(tmp_path, "z.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                     "2023-11-16 18:00:00.5+01:00,10,2\n2023-11-16 17:00:01.5+00:00,10,2\n")
    assert list(load_trace(path).arrivals(2)) == [0.0, 1.0]
