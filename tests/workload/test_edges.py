"""Workloads at the edges: fresh prompts per run and point, the server's context window, bounded input."""

import json
import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

from scoville.workload.prompts import prompt_token_ids
from scoville.workload.scenarios import resolve_workload
from scoville.workload.sessions import session_workload_from_dict
from scoville.workload.spec import MAX_REQUEST_TOKENS
from scoville.workload.synthetic import WorkloadError
from scoville.workload.traces import TraceError, load_trace

DATA = Path(str(files("scoville") / "data" / "traces"))


def first_prompt(workload, stream=0):
    return prompt_token_ids(workload.sessions(1, stream=stream)[0].requests[0])


# --- rerunning never re-sends what a server may have cached --------------------------------------


def test_each_point_of_a_session_scenario_has_its_own_shared_prefix():
    """The shared system prompt was one for all points, so every point after the first started warm."""
    w = resolve_workload("chat-multiturn", seed=5)
    a, b = w.sessions(2, stream=0), w.sessions(1, stream=1)
    shared = 512
    assert prompt_token_ids(a[0].requests[0])[:shared] == prompt_token_ids(a[1].requests[0])[:shared]
    assert prompt_token_ids(a[0].requests[0])[:shared] != prompt_token_ids(b[0].requests[0])[:shared]


@pytest.mark.parametrize("name, trace", [("1k1k", None), ("chat-multiturn", None), (None, "mooncake_sample.jsonl"),
                                          (None, "agentx")])
def test_another_seed_sends_other_prompts_and_the_same_seed_the_same(name, trace):
    def make(seed):
        return resolve_workload(name, seed=seed, trace=DATA / trace if trace else None)

    assert first_prompt(make(1)) == first_prompt(make(1))
    assert first_prompt(make(1)) != first_prompt(make(2))


def test_a_salted_prompt_keeps_its_length_and_prefix_structure_but_no_token():
    w = resolve_workload("chat-multiturn", seed=3)
    first, second = w.sessions(1)[0].requests[:2]
    plain = [prompt_token_ids(r) for r in (first, second)]
    salted = [prompt_token_ids(r, salt=7) for r in (first, second)]
    assert [len(p) for p in salted] == [len(p) for p in plain]
    assert salted[1][: len(salted[0])] == salted[0]  # turn 2 still extends turn 1 token for token
    assert salted[0][:64] != plain[0][:64]


@pytest.mark.parametrize("name, trace, expected", [
    ("1k1k", None, False), ("longctx-128k", None, False), ("chat-multiturn", None, True), ("mix-all", None, True),
    (None, "azure_sample.csv", False), (None, "mooncake_sample.jsonl", True),
])
def test_workloads_say_whether_a_server_should_see_cached_tokens(name, trace, expected):
    assert resolve_workload(name, trace=DATA / trace if trace else None).reuses_prefixes is expected


# --- the server's context window ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["chat-multiturn", "mix-chat-agentic"])
def test_sessions_are_shaped_to_the_context_window(name):
    """chat-multiturn grows to 5-8k tokens; fitted to 4,096 every request (input plus output) fits."""
    w = resolve_workload(name, seed=1)
    limit = 4096 if name == "chat-multiturn" else 20000
    before = [r for s in w.sessions(40) for r in s.requests]
    fitted = [r for s in w.fit_context(limit).sessions(40) for r in s.requests]
    assert any(r.input_tokens + r.output_tokens > limit for r in before)
    assert all(r.input_tokens + r.output_tokens <= limit for r in fitted) and len(fitted) >= 40
    rebuilt = session_workload_from_dict(json.loads(json.dumps(w.fit_context(limit).to_dict())))  # --resume
    assert rebuilt.sessions(40)[:] == w.fit_context(limit).sessions(40)[:]


def test_a_window_too_small_for_a_scenario_is_one_line():
    with pytest.raises(WorkloadError, match="leaves no room after its 16384-token shared prefix"):
        resolve_workload("agentic-coding").fit_context(4096)
    with pytest.raises(WorkloadError, match="exceed the server's 4096-token context window"):
        resolve_workload(None, isl=4000, osl=200).fit_context(4096)
    assert resolve_workload(None, isl=3000, osl=1000).fit_context(4096).isl == 3000


def test_a_trace_is_shaped_to_the_context_window(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [{"session_id": "a", "t": 0, "input_tokens": 3000, "output_tokens": 500},
            {"session_id": "a", "input_tokens": 3600, "output_tokens": 500},
            {"session_id": "b", "t": 1, "input_tokens": 9000, "output_tokens": 3000, "hash_ids": list(range(141))}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    w = load_trace(path).fit_context(4096)
    a, b = w.sessions(2)
    assert [r.input_tokens for r in a.requests] == [3000]  # the turn that would overflow ends the session
    (first,) = b.requests  # a first turn is shortened to fit
    assert first.input_tokens + first.output_tokens <= 4096 and len(first.block_hashes) * 64 >= first.input_tokens
    assert load_trace(path, **{k: v for k, v in w.to_dict().items() if k == "context_limit"}).to_dict() == w.to_dict()


# --- bounded input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name, text, field", [
    ("m.jsonl", '{"timestamp": 0, "input_length": 10000000000000, "output_length": 5}\n', "input_length"),
    ("s.jsonl", '{"input_tokens": 5, "output_tokens": 10000000000000}\n', "output_tokens"),
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,10000000000000,4\n", "ContextTokens"),
    ("x.json", '{"requests": [{"t": 0, "in": 10000000000000, "out": 1}]}', "in"),
])
def test_a_trace_line_asking_for_1e13_tokens_is_refused_before_any_allocation(tmp_path, name, text, field):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceError, match=rf"field '{field}'.*{MAX_REQUEST_TOKENS:,}"):
        load_trace(path)


def test_huge_synthetic_lengths_are_refused():
    with pytest.raises(WorkloadError, match="must be <="):
        resolve_workload(None, isl=10**13, osl=10)


@pytest.mark.timeout(30)   # the bug this guards against read /dev/zero forever
def test_trace_info_refuses_a_device_at_once(capsys, monkeypatch):
    """`trace-info /dev/zero` read a line that never ends; non-regular files are refused before any read."""
    from scoville.cli import main

    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit) as e:
        main(["trace-info", "/dev/zero"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "not a regular file" in err and len(err.strip().splitlines()) == 1


def test_a_pipe_and_an_endless_line_are_refused(tmp_path):
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        load_trace(fifo)
    endless = tmp_path / "endless.jsonl"
    with endless.open("wb") as f:
        f.truncate(65 << 20)  # 65 MiB of NUL bytes and not one newline (sparse: no disk used)
    with pytest.raises(TraceError, match="line longer than 64 MiB"):
        load_trace(endless, "scoville")
    with pytest.raises(TraceError, match="line longer than 64 MiB"):
        load_trace(endless)  # format detection reads a bounded first line too


def test_an_arrival_error_names_a_flag_that_exists(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"input_tokens": 5, "output_tokens": 2}\n')
    with pytest.raises(WorkloadError, match=r"give --rate") as e:
        load_trace(path).arrivals(1)
    assert "--request-rate" not in str(e.value)


def test_export_trace_refuses_a_device():
    from scoville.workload.traces import write_scoville_trace

    w = resolve_workload("chat-multiturn", seed=1)
    with pytest.raises(TraceError, match="not a regular file"):
        write_scoville_trace(Path("/dev/null"), w.sessions(1))


@pytest.mark.slow   # a child process, so that its file-size limit stands in for a full disk
def test_export_trace_survives_a_full_disk(tmp_path):
    code = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); "
            "from scoville.cli import main; main()")
    p = subprocess.run([sys.executable, "-c", code, "export-trace", "chat-multiturn", str(tmp_path / "t.jsonl"),
                        "--sessions", "50"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, COLUMNS="1000"))
    assert p.returncode == 2 and "cannot write the trace (File too large)" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
