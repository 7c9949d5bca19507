"""The emulator over real loopback HTTP: endpoints, streaming shape, errors, limits, disconnects, timing."""

from __future__ import annotations

import asyncio
import bisect
import json
import random

import aiohttp
import pytest
from emulator_support import API_KEY, run

from scoville.emulator.build import build_emulator
from scoville.emulator.launch import EmulatorStartError, spawn_emulator
from scoville.emulator.protocol import parse
from scoville.sim.config import SimConfig
from scoville.sim.engine import step_cost


async def _post(url: str, path: str, body: dict, headers: dict | None = None) -> tuple[int, dict | str]:
    async with aiohttp.ClientSession() as s, s.post(url + path, json=body, headers=headers) as r:
        text = await r.text()
        try:
            return r.status, json.loads(text)
        except json.JSONDecodeError:
            return r.status, text


async def _stream(url: str, path: str, body: dict, headers: dict | None = None) -> list[dict | str]:
    """Every SSE data payload, parsed (the literal '[DONE]' kept as a string)."""
    out: list[dict | str] = []
    async with aiohttp.ClientSession() as s, s.post(url + path, json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        assert r.headers["Content-Type"].startswith("text/event-stream")
        async for line in r.content:
            line = line.strip()
            if line.startswith(b"data: "):
                data = line[6:].decode()
                out.append(data if data == "[DONE]" else json.loads(data))
    return out


async def _get(url: str, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(url + path) as r:
        return r.status, await r.text()


def test_handle_describes_the_served_system(emu):
    assert emu.base_url.startswith("http://127.0.0.1:")
    assert emu.model == "llama-3.1-8b"
    assert emu.system["hardware"] == "h200" and emu.system["accelerators"] == 1
    assert emu.system["rated_watts_per_accelerator"] > 0 and emu.system["power_boundary"] == "chip"
    assert SimConfig.parse(emu.config).model == "llama-3.1-8b"
    assert run(_get(emu.base_url, "/health"))[0] == 200
    status, body = run(_get(emu.base_url, "/v1/models"))
    models = json.loads(body)["data"]
    assert status == 200 and [m["id"] for m in models] == ["llama-3.1-8b"] and models[0]["max_model_len"] > 8192


def test_streaming_completion_with_token_ids(emu):
    prompt = list(range(2000, 2300))
    events = run(_stream(emu.base_url, "/v1/completions", {
        "model": emu.model, "prompt": prompt, "max_tokens": 12, "ignore_eos": True, "stream": True,
        "stream_options": {"include_usage": True}, "temperature": 0}))
    assert events[-1] == "[DONE]"
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"]["prompt_tokens"] == 300
    assert usage["usage"]["completion_tokens"] == 12 and usage["usage"]["total_tokens"] == 312
    chunks = events[:-2]
    # One token per engine step, one chunk per step, unless a late wake-up (a loaded host) sent several together.
    assert 1 <= len(chunks) <= 12 and sum(len(c["choices"][0]["text"].split()) for c in chunks) == 12
    assert all(c["object"] == "text_completion" and c["model"] == emu.model for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * (len(chunks) - 1) + ["length"]
    # Same prompt, same "greedy" output; the text is the local tokenizer's decoding of generated ids.
    again = run(_post(emu.base_url, "/v1/completions", {"model": emu.model, "prompt": prompt, "max_tokens": 12,
                                                         "ignore_eos": True, "return_token_ids": True}))[1]
    assert again["choices"][0]["text"] == "".join(c["choices"][0]["text"] for c in chunks)
    assert len(again["choices"][0]["token_ids"]) == 12


def test_continuous_usage_counts_each_chunk(emu):
    events = run(_stream(emu.base_url, "/v1/completions", {
        "model": emu.model, "prompt": [1234] * 50, "max_tokens": 6, "ignore_eos": True, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}}))
    chunks = events[:-2]
    counts = [e["usage"]["completion_tokens"] for e in chunks]
    words = [len(e["choices"][0]["text"].split()) for e in chunks]
    # a running total that grows by each chunk's tokens (several per chunk when a loaded host coalesced steps)
    assert counts == [sum(words[:i + 1]) for i in range(len(words))] and counts[-1] == 6 and min(words) >= 1


def test_chat_streaming_and_plain(emu):
    body = {"model": emu.model, "messages": [{"role": "user", "content": "Say something nice."}],
            "max_tokens": 5, "ignore_eos": True}
    events = run(_stream(emu.base_url, "/v1/chat/completions",
                         dict(body, stream=True, stream_options={"include_usage": True})))
    chunks = events[:-2]
    assert chunks[0]["object"] == "chat.completion.chunk" and chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert sum(len(c["choices"][0]["delta"]["content"].split()) for c in chunks) == 5
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    status, plain = run(_post(emu.base_url, "/v1/chat/completions", body))
    assert status == 200 and plain["object"] == "chat.completion"
    assert plain["choices"][0]["message"]["role"] == "assistant"
    assert plain["usage"]["completion_tokens"] == 5
    assert plain["usage"]["prompt_tokens"] == events[-2]["usage"]["prompt_tokens"]
    status, tok = run(_post(emu.base_url, "/tokenize", {"messages": body["messages"]}))
    assert tok["count"] == plain["usage"]["prompt_tokens"]


def test_text_prompt_counts_match_tokenize_and_detokenize(emu):
    status, tok = run(_post(emu.base_url, "/tokenize", {"prompt": "The emulator counts tokens locally."}))
    assert status == 200 and tok["count"] == len(tok["tokens"]) > 0
    _, out = run(_post(emu.base_url, "/v1/completions", {"model": emu.model, "prompt": "The emulator counts "
                                                         "tokens locally.", "max_tokens": 1}))
    assert out["usage"]["prompt_tokens"] == tok["count"]
    # Text from /detokenize comes back as exactly those ids: how a client sends an exact-length text prompt.
    ids = list(range(5000, 5400))
    _, text = run(_post(emu.base_url, "/detokenize", {"tokens": ids}))
    _, back = run(_post(emu.base_url, "/tokenize", {"prompt": text["prompt"]}))
    assert back["tokens"] == ids


def test_without_ignore_eos_the_model_stops_on_its_own_but_not_before_min_tokens(emu):
    body = {"model": emu.model, "prompt": [4321] * 20, "max_tokens": 4000, "min_tokens": 3}
    _, a = run(_post(emu.base_url, "/v1/completions", body))
    _, b = run(_post(emu.base_url, "/v1/completions", body))
    n = a["usage"]["completion_tokens"]
    assert a["choices"][0]["finish_reason"] == "stop" and 3 <= n < 4000
    assert b["usage"]["completion_tokens"] == n  # deterministic for a given prompt and seed
    _, c = run(_post(emu.base_url, "/v1/completions", dict(body, min_tokens=n + 7, max_tokens=n + 7)))
    assert c["usage"]["completion_tokens"] == n + 7 and c["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("path, body, status, words", [
    ("/v1/completions", {"model": "gpt-4", "prompt": "x"}, 400, "The model `gpt-4` does not exist"),
    ("/v1/completions", {"model": "llama-3.1-8b", "prompt": "x", "bogus": 1}, 400, "unknown field 'bogus'"),
    ("/v1/completions", {"model": "llama-3.1-8b", "prompt": "x", "n": 3}, 400, "n=3 is not supported"),
    ("/v1/completions", {"model": "llama-3.1-8b", "prompt": [7] * 10, "max_tokens": 131070}, 413,
     "maximum context length is 131072"),
    ("/v1/completions", {"model": "llama-3.1-8b", "prompt": [200000]}, 400, "outside the vocabulary"),
    ("/v1/chat/completions", {"model": "llama-3.1-8b", "messages": "hi"}, 400, "'messages' is required"),
])
def test_errors_have_the_openai_shape(emu, path, body, status, words):
    got, err = run(_post(emu.base_url, path, body))
    assert got == status
    assert words in err["error"]["message"] and err["error"]["type"]


def test_malformed_json_and_unknown_routes(emu):
    async def go():
        async with aiohttp.ClientSession() as s:
            async with s.post(emu.base_url + "/v1/completions", data=b"{not json") as r:
                assert r.status == 400 and "not valid JSON" in (await r.json())["error"]["message"]
            async with s.get(emu.base_url + "/v1/nothing") as r:
                assert r.status == 404 and "error" in await r.json()
    run(go())
    assert run(_get(emu.base_url, "/health"))[0] == 200  # still alive


def test_metrics_use_vllm_names_and_count_tokens(emu):
    run(_post(emu.base_url, "/v1/completions", {"model": emu.model, "prompt": [99] * 64, "max_tokens": 4,
                                               "ignore_eos": True}))
    status, text = run(_get(emu.base_url, "/metrics"))
    assert status == 200
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:gpu_cache_usage_perc", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:num_preemptions_total",
                 "vllm:time_to_first_token_seconds_bucket", "vllm:e2e_request_latency_seconds_count",
                 "scoville_emulator_token_release_lag_seconds_bucket", "scoville_emulator_gc_seconds_total"):
        assert name in text, name
    values = {ln.split("{")[0]: float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln and ln[0] != "#"}
    assert values["vllm:generation_tokens_total"] >= 4 and values["vllm:prompt_tokens_total"] >= 64
    assert values["vllm:time_to_first_token_seconds_count"] >= 1


def _engine_schedule(config: dict, body: dict) -> list[tuple[float, int]]:
    """(seconds after submit, tokens so far) of each token event the emulator's engine plans for ``body``.

    The same engine the server runs, driven in virtual time: what "on time" means for the live stream.
    """
    offline = build_emulator(SimConfig.parse(config))
    plan = asyncio.run(offline.plan(parse(body, chat=False)))
    engine = offline.engine
    engine.submit(plan.spec, 0.0)
    schedule, done = [], 0
    while (t := engine.next_event_time()) is not None:
        for ev in engine.advance(t):
            done += ev.count
            schedule.append((ev.t, done))
    return schedule


def test_lone_request_streams_at_the_engines_step_time(emu):
    """Tokens leave when the engine says: never before (exactly), and not far after (a bound a loaded host keeps)."""
    n = 300
    body = {"model": emu.model, "prompt": random.Random().sample(range(2000, 30000), 1000), "max_tokens": n,
            "ignore_eos": True, "stream": True}  # a fresh prompt: no prefix-cache hit can shorten the prefill
    schedule = _engine_schedule(emu.config, body)
    assert schedule[-1][1] == n
    # The schedule itself: a lone decode step takes the cost model's decode step time.
    cfg = SimConfig.parse(emu.config)
    ctx = 1000 + n / 2
    tpot = (schedule[-1][0] - schedule[0][0]) / (n - 1)
    assert tpot == pytest.approx(float(step_cost(cfg, cfg.parallel).step_time(1, 1, ctx, ctx)), rel=0.05)

    async def go() -> tuple[float, list[tuple[float, int]]]:
        loop = asyncio.get_running_loop()
        seen, tokens = [], 0
        async with aiohttp.ClientSession() as s:
            t_sent = loop.time()
            async with s.post(emu.base_url + "/v1/completions", json=body) as r:
                async for line in r.content:
                    if line.startswith(b"data: {"):
                        tokens += len(json.loads(line[6:])["choices"][0]["text"].split())
                        seen.append((loop.time() - t_sent, tokens))
        return t_sent, seen

    _, seen = run(go())
    assert seen[-1][1] == n
    totals = [tokens for _, tokens in schedule]
    for t_seen, tokens in seen:  # the server got the request after it was sent, and never sends a token early
        due = schedule[bisect.bisect_left(totals, tokens)][0]
        assert t_seen >= due - 1e-3, (tokens, t_seen, due)
    assert seen[-1][0] <= 1.25 * schedule[-1][0] + 0.5  # lateness does not add up: each token is due on the clock


def test_api_key_is_required_when_set(tight_emu):
    body = {"model": "tiny", "prompt": [5] * 8, "max_tokens": 1}
    status, err = run(_post(tight_emu.base_url, "/v1/completions", body))
    assert status == 401 and "API key" in err["error"]["message"]
    status, _ = run(_post(tight_emu.base_url, "/v1/completions", body, {"Authorization": "Bearer wrong"}))
    assert status == 401
    status, ok = run(_post(tight_emu.base_url, "/v1/completions", body, {"Authorization": f"Bearer {API_KEY}"}))
    assert status == 200 and ok["usage"]["completion_tokens"] == 1
    assert run(_get(tight_emu.base_url, "/health"))[0] == 200       # probes stay open
    assert run(_get(tight_emu.base_url, "/v1/models"))[0] == 401


def test_context_limit_follows_the_kv_cache(tight_emu):
    status, err = run(_post(tight_emu.base_url, "/v1/completions", {"model": "tiny", "prompt": [5] * 4000,
                                                                    "max_tokens": 200},
                            {"Authorization": f"Bearer {API_KEY}"}))
    assert status == 413 and "maximum context length is 4096" in err["error"]["message"]


def test_prefix_cache_hits_are_reported_as_cached_tokens(tight_emu):
    auth = {"Authorization": f"Bearer {API_KEY}"}
    body = {"model": "tiny", "prompt": list(range(1000, 1640)), "max_tokens": 2, "ignore_eos": True}
    _, first = run(_post(tight_emu.base_url, "/v1/completions", body, auth))
    _, second = run(_post(tight_emu.base_url, "/v1/completions", body, auth))
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= 512


def test_queue_limit_and_disconnect_frees_the_slot(tight_emu):
    """max_num_seqs=1, --max-queue 1: A runs, B waits, C is refused; A's client leaving lets B run at once."""
    auth = {"Authorization": f"Bearer {API_KEY}"}
    long = {"model": "tiny", "prompt": [11] * 32, "max_tokens": 3000, "ignore_eos": True, "stream": True}

    async def go() -> None:
        async with aiohttp.ClientSession() as sa, aiohttp.ClientSession() as sb:
            ra = await sa.post(tight_emu.base_url + "/v1/completions", json=long, headers=auth)
            await ra.content.readline()                       # A has its first token: it is running
            rb = await sb.post(tight_emu.base_url + "/v1/completions", json=dict(long, prompt=[12] * 32),
                               headers=auth)
            if not await _metrics_show(tight_emu.base_url, 'vllm:num_requests_waiting{engine="0",model_name="tiny"} 1'):
                pytest.fail("B never showed up as waiting")           # B is queued behind A
            status, err = await _post(tight_emu.base_url, "/v1/completions", dict(long, stream=False), auth)
            assert status == 429 and "queue is full" in err["error"]["message"]
            ra.close()                                        # A's client goes away mid-stream
            line = await asyncio.wait_for(rb.content.readline(), timeout=30)
            assert line.startswith(b"data: {")                # B got its first token: A's slot was freed
            rb.close()
        if not await _metrics_show(tight_emu.base_url, 'vllm:num_requests_running{engine="0",model_name="tiny"} 0'):
            pytest.fail("cancelled requests kept running")
        _, m = await _get_async(tight_emu.base_url + "/metrics")
        assert 'finished_reason="abort"} 2' in m

    run(go())


async def _metrics_show(base_url: str, sample: str, within_s: float = 30.0) -> bool:
    """Whether /metrics shows ``sample`` within ``within_s`` (polled: returns as soon as it does)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while asyncio.get_running_loop().time() < deadline:
        if sample in (await _get_async(base_url + "/metrics"))[1]:
            return True
        await asyncio.sleep(0.02)
    return False


async def _get_async(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, await r.text()


@pytest.mark.slow   # a child interpreter that fails to start
def test_spawn_reports_a_failed_start_in_one_line():
    with pytest.raises(EmulatorStartError) as e, spawn_emulator("no-such-chip", "llama-3.1-8b"):
        pass
    msg = str(e.value)
    assert "did not start" in msg and "no-such-chip" in msg and "\n" not in msg


def test_the_emulator_caches_prefixes_as_vllm_does_unless_told_not_to(tmp_path):
    from scoville.emulator.build import pinned_config

    assert pinned_config().enable_prefix_caching is True
    assert pinned_config(config={"enable_prefix_caching": False}).enable_prefix_caching is False
    off = tmp_path / "off.yaml"
    off.write_text("enable_prefix_caching: false\n")
    assert pinned_config("h200", "llama-3.1-8b", config=off).enable_prefix_caching is False
