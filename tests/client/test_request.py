
"""One streamed request against a real loopback server: timing, token counting, every error path."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time

import aiohttp
import numpy as np
import pytest
from client_support import Behaviour

from scoville.client.config import ClientConfig
from scoville.client.driver import make_connector, make_timeout
from scoville.client.fastpath import FastHTTP
from scoville.client.request import Prompts, send_request, send_request_fast
from scoville.metrics import PointContext, point_metrics
from scoville.results.schema import RequestRecord, records_to_table
from scoville.workload.prompts import prompt_token_ids
from scoville.workload.spec import RequestSpec

TRANSPORT = {"name": "fast"}


@pytest.fixture(autouse=True, params=["fast", "aiohttp"])
def transport(request):
    """Every test here runs over both transports: the raw-socket fast path and aiohttp (https, non-Linux)."""
    TRANSPORT["name"] = request.param
    yield request.param


def one(server, behaviour: Behaviour, *, isl: int = 16, osl: int = 8, **cfg_kw) -> RequestRecord:
    server.set(behaviour)
    cfg = ClientConfig(base_url=server.base_url, model="test-model", **cfg_kw)
    return send(cfg, RequestSpec(request_id="r0", input_tokens=isl, output_tokens=osl, prompt_seed=3))


def send(cfg: ClientConfig, spec: RequestSpec) -> RequestRecord:
    async def go() -> RequestRecord:
        t0 = time.perf_counter()
        if TRANSPORT["name"] == "fast":
            fast = FastHTTP(cfg.base_url, t0)
            try:
                return await send_request_fast(fast, cfg, Prompts(cfg), spec, point=0, t0=t0)
            finally:
                fast.close()
        async with aiohttp.ClientSession(timeout=make_timeout(cfg)) as http:
            return await send_request(http, cfg, Prompts(cfg), spec, point=0, t0=t0)

    return asyncio.run(go())


def test_completions_body_is_the_inferencex_request(server):
    rec = one(server, Behaviour(), isl=32, osl=5)
    body = server.bodies[0]
    spec = RequestSpec(request_id="r0", input_tokens=32, output_tokens=5, prompt_seed=3)
    assert body["prompt"] == prompt_token_ids(spec)
    assert body["max_tokens"] == 5 and body["min_tokens"] == 5 and body["ignore_eos"] is True
    assert body["temperature"] == 0 and body["stream"] is True
    assert body["stream_options"]["include_usage"] is True
    assert rec.ok and rec.output_tokens == 5 and rec.input_tokens == 32 and rec.token_count_source == "server"


def test_single_token_chunks_give_one_time_per_token(server):
    rec = one(server, Behaviour(interval_s=0.002, keepalive_every=2, empty_first=True), osl=6)
    assert rec.ok, rec.error
    assert rec.token_counts == [1] * 6 and len(rec.token_times) == 6
    assert rec.t_sent < rec.t_first_token == rec.token_times[0] <= rec.token_times[-1] <= rec.t_done
    assert all(b >= a for a, b in itertools.pairwise(rec.token_times))


def test_multi_token_chunks_count_k_tokens_at_their_arrival(server):
    rec = one(server, Behaviour(chunk_sizes=[1, 3, 2, 4], continuous_usage=True, interval_s=0.002), osl=10)
    assert rec.ok and rec.token_counts == [1, 3, 2, 4] and rec.output_tokens == 10
    ids = one(server, Behaviour(chunk_sizes=[2, 2, 1], token_ids=True, usage=False), osl=5)
    assert ids.ok and ids.token_counts == [2, 2, 1] and ids.output_tokens == 5
    assert ids.token_count_source == "chunks"


def test_server_usage_is_authoritative_for_output_tokens(server):
    # Text-only multi-token chunks: the client can only count pieces, the usage event says 6.
    rec = one(server, Behaviour(per_chunk=3), osl=6)
    assert rec.token_counts == [1, 1] and rec.output_tokens == 6 and rec.token_count_source == "server"


def test_cached_tokens_come_from_usage(server):
    assert one(server, Behaviour(cached_tokens=12), isl=16).cached_tokens == 12


def test_ttft_includes_the_server_delay(server):
    rec = one(server, Behaviour(ttft_s=0.05))
    assert rec.t_first_token - rec.t_sent >= 0.05


def test_metrics_through_the_client_match_hand_computation(server):
    recs = [one(server, Behaviour(chunk_sizes=[1, 2, 1, 4], continuous_usage=True, interval_s=0.003), osl=8)
            for _ in range(3)]
    m = point_metrics(records_to_table(recs), PointContext(accelerators=2, watts_per_accelerator=500.0))
    tpot = [(r.t_done - r.t_first_token) / 7 for r in recs]
    ttft = [r.t_first_token - r.t_sent for r in recs]
    gaps = [b - a for r in recs for a, b in itertools.pairwise(r.token_times)]
    window = max(r.t_done for r in recs) - min(r.t_sent for r in recs)
    assert m["tpot_s_median"] == pytest.approx(float(np.median(tpot)))
    assert m["ttft_s_mean"] == pytest.approx(float(np.mean(ttft)))
    assert m["itl_s_p90"] == pytest.approx(float(np.percentile(gaps, 90)))
    assert m["output_throughput"] == pytest.approx(24 / window)
    assert m["total_throughput_per_accelerator"] == pytest.approx((24 + 48) / window / 2)
    assert m["total_throughput_per_kw"] == pytest.approx((24 + 48) / window / 1.0)
    assert m["interactivity"] == pytest.approx(1 / float(np.median(tpot)))


def test_chat_api_sends_text_and_takes_counts_from_usage(server):
    rec = one(server, Behaviour(), api="chat", isl=20, osl=4)
    msg = server.bodies[0]["messages"][0]
    assert msg["role"] == "user" and len(msg["content"].split()) == 20
    assert rec.ok and rec.input_tokens == 20 and rec.output_tokens == 4 and rec.token_count_source == "server"
    no_usage = one(server, Behaviour(usage=False), api="chat", isl=20, osl=4)
    assert no_usage.ok and no_usage.token_count_source == "chunks+estimate-input"


def test_api_key_is_sent_as_bearer(server):
    server.require_key = "sekrit"
    assert one(server, Behaviour(), api_key="sekrit").ok
    denied = one(server, Behaviour())
    assert not denied.ok and denied.http_status == 401


@pytest.mark.parametrize("behaviour, status, match", [
    (Behaviour(status=500), 500, "HTTP 500: .*boom"),
    (Behaviour(status=429, error_body='{"error": "rate limited"}'), 429, "HTTP 429"),
    (Behaviour(malformed_after=2), 200, "malformed SSE data"),
    (Behaviour(error_event_after=1), 200, "engine died"),
    (Behaviour(disconnect_after=2), 200, "disconnected|ended before"),
    (Behaviour(done=False, finish=False), 200, "ended before the server finished"),
    (Behaviour(tokens=0, usage=False), 200, "no tokens"),
])
def test_errors_are_recorded_not_raised(server, behaviour, status, match):
    rec = one(server, behaviour, osl=6)
    assert not rec.ok and rec.http_status == status
    assert rec.error and __import__("re").search(match, rec.error), rec.error
    assert rec.t_done is not None and rec.t_done >= rec.t_sent


def test_disconnect_keeps_the_tokens_received_before_it(server):
    rec = one(server, Behaviour(disconnect_after=3), osl=6)
    assert not rec.ok and rec.token_counts == [1, 1, 1]


@pytest.mark.parametrize("stale_server", ["on-reuse", "after-answer"], indirect=True)
def test_a_stale_pooled_connection_never_fails_a_request(stale_server):
    """Two pooled connections both gone stale: the retry must take a fresh connection, not the other stale one."""
    cfg = ClientConfig(base_url=stale_server.base_url, model="m")
    specs = [RequestSpec(request_id=f"r{i}", input_tokens=4, output_tokens=2) for i in range(6)]

    async def go() -> list[RequestRecord]:
        t0 = time.perf_counter()
        if TRANSPORT["name"] == "fast":
            fast = FastHTTP(cfg.base_url, t0)
            send_one = lambda spec: send_request_fast(fast, cfg, Prompts(cfg), spec, point=0, t0=t0)  # noqa: E731
            close = fast.close
        else:
            http = aiohttp.ClientSession(connector=make_connector(), timeout=make_timeout(cfg))
            send_one = lambda spec: send_request(http, cfg, Prompts(cfg), spec, point=0, t0=t0)  # noqa: E731
            close = http.close
        try:
            out = list(await asyncio.gather(send_one(specs[0]), send_one(specs[1])))  # two pooled connections
            for spec in specs[2:]:
                out.append(await send_one(spec))
            return out
        finally:
            await close() if asyncio.iscoroutinefunction(close) else close()

    recs = asyncio.run(go())
    assert [r.error for r in recs] == [None] * 6 and all(r.ok for r in recs)
    assert stale_server.answered == 6 and stale_server.dropped >= 2  # both pooled connections died


def test_an_idle_connection_past_the_keep_alive_limit_is_not_reused(server):
    """Sockets idle longer than the limit (uvicorn closes at 5 s; the client stops at 4 s) are closed, not reused."""
    server.set(Behaviour())
    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    spec = RequestSpec(request_id="r", input_tokens=4, output_tokens=2)

    async def go() -> tuple[int, int]:
        t0 = time.perf_counter()
        fast = FastHTTP(cfg.base_url, t0, idle_s=0.2)
        try:
            await send_request_fast(fast, cfg, Prompts(cfg), spec, point=0, t0=t0)
            pooled = fast._pooled()
            assert pooled is not None  # young: reused
            fast._idle.append((pooled, time.monotonic()))
            await asyncio.sleep(0.3)
            return len(fast._idle), int(fast._pooled() is None)
        finally:
            fast.close()

    if TRANSPORT["name"] == "fast":
        assert asyncio.run(go()) == (1, 1)


def test_kernel_stamps_are_on_the_run_clock(server):
    before = time.perf_counter()
    rec = one(server, Behaviour(interval_s=0.002), osl=5)
    assert rec.ok and 0 <= rec.t_sent < rec.token_times[0] <= time.perf_counter() - before + 0.01


def test_stalled_stream_times_out(server):
    rec = one(server, Behaviour(stall_after=2), osl=6, read_timeout_s=0.3)
    assert not rec.ok and "timeout" in rec.error and rec.token_counts == [1, 1]


def test_unreachable_server_is_an_error_record():
    rec = send(ClientConfig(base_url="http://127.0.0.1:9", model="m"),
               RequestSpec(request_id="r", input_tokens=4, output_tokens=2))
    assert not rec.ok and "cannot connect" in rec.error


def test_unresolvable_host_is_an_error_record():
    """A name that does not resolve (.invalid never does) is a record, as a refused connection is."""
    rec = send(ClientConfig(base_url="http://no-such-host.invalid:8000", model="m"),
               RequestSpec(request_id="r", input_tokens=4, output_tokens=2))
    assert not rec.ok and "cannot connect" in rec.error


def test_chunked_decoder_handles_every_split_and_the_final_crlf():
    from scoville.client.fastpath import _Response

    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (b"data: a\n\n", b"data: bb\n\n", b"x" * 300))
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n"
    for cut in range(1, len(raw)):
        got: list[bytes] = []
        resp = _Response(lambda d, t, got=got: got.append(d), None)
        resp.feed(raw[:cut], 1.0)
        assert not resp.body_done
        resp.feed(raw[cut:], 2.0)
        assert resp.body_done and resp.buf == b"" and b"".join(got) == b"data: a\n\ndata: bb\n\n" + b"x" * 300, cut
    held = _Response(lambda d, t: None, None)
    held.feed(raw[:-2], 1.0)
    assert not held.body_done  # waits for the empty line that ends the message


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\ndata: x\n\n\r\n0\r\n\r\n",
], ids=["status", "content-length", "chunk-size"])
def test_garbled_http_response_is_an_error_record(raw):
    """A server answering with a malformed status line, length or chunk size fails that request, not the sweep."""
    rec = raw_answer(raw)
    assert not rec.ok and rec.error and rec.token_times == []


def test_bodiless_204_is_an_http_error_at_once_not_a_read_timeout():
    """A 204 has no body; waiting for the connection to close would end in a misleading read timeout."""
    rec = raw_answer(b"HTTP/1.1 204 No Content\r\n\r\n", close=False, read_timeout_s=5.0)
    assert not rec.ok and rec.error.startswith("HTTP 204") and rec.http_status == 204


def raw_answer(raw: bytes, *, close: bool = True, **cfg_kw) -> RequestRecord:
    """One request against a TCP server that answers ``raw`` bytes (then closes, or holds the connection)."""

    async def go() -> RequestRecord:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(65536)
            writer.write(raw)
            await writer.drain()
            if close:
                writer.close()
            else:
                await reader.read()  # hold the connection open until the client closes it

        srv = await asyncio.start_server(answer, "127.0.0.1", 0)
        cfg = ClientConfig(base_url=f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}", model="m", **cfg_kw)
        spec = RequestSpec(request_id="r", input_tokens=4, output_tokens=2)
        t0 = time.perf_counter()
        try:
            if TRANSPORT["name"] == "fast":
                fast = FastHTTP(cfg.base_url, t0)
                try:
                    return await send_request_fast(fast, cfg, Prompts(cfg), spec, point=0, t0=t0)
                finally:
                    fast.close()
            async with aiohttp.ClientSession(timeout=make_timeout(cfg)) as http:
                return await send_request(http, cfg, Prompts(cfg), spec, point=0, t0=t0)
        finally:
            srv.close()

    return asyncio.run(go())


def test_ipv6_target_gets_a_bracketed_host_header():
    """``http://[::1]:PORT`` must send ``Host: [::1]:PORT``; a bare ``::1:PORT`` is not a valid Host."""
    import socket

    from aiohttp import web

    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    seen: list[str] = []

    async def go() -> int:
        async def echo(request: web.Request) -> web.Response:
            seen.append(request.headers["Host"])
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_post("/v1/completions", echo)
        runner = web.AppRunner(app)
        await runner.setup()
        try:
            await web.TCPSite(runner, "::1", 0).start()
        except OSError:
            await runner.cleanup()
            pytest.skip("cannot listen on ::1")
        port = runner.addresses[0][1]
        fast = FastHTTP(f"http://[::1]:{port}", time.perf_counter())
        try:
            await fast.post_stream("/v1/completions", b"{}", {}, lambda d, t: None, timeout_s=10, read_timeout_s=10)
        finally:
            fast.close()
            await runner.cleanup()
        return port

    port = asyncio.run(go())
    assert seen == [f"[::1]:{port}"]


# --- both transports agree, and are lenient where the specifications are ----------------------------

_SSE = (b'data: {"choices":[{"text":" a","finish_reason":null}]}\n\n'
        b'data: {"choices":[{"text":" b","finish_reason":"length"}]}\n\n'
        b'data: {"choices":null,"usage":{"prompt_tokens":4,"completion_tokens":2}}\n\n'
        b"data: [DONE]\n\ndata: [DONE]\n\n")


def chunked(*pieces: bytes, after: bytes = b"\r\n") -> bytes:
    body = b"".join(b"%x\r\n%s%s" % (len(p), p, after) for p in pieces) + b"0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + body


@pytest.mark.parametrize("raw", [
    chunked(_SSE),
    chunked(_SSE.replace(b"\n", b"\r")),                 # bare-CR line endings are valid SSE
    chunked(_SSE[:50], _SSE[50:], after=b"\n"),          # a bare LF after chunk data: both parsers take it
], ids=["null-choices-and-second-done", "bare-cr", "chunk-then-lf"])
def test_finished_answers_in_every_form_the_specs_allow_are_ok(raw):
    rec = raw_answer(raw)
    assert rec.ok, rec.error
    assert rec.output_tokens == 2 and rec.input_tokens == 4 and rec.token_counts == [1, 1]


def test_a_chunk_not_followed_by_crlf_fails_on_both_transports_in_one_line():
    rec = raw_answer(chunked(_SSE[:50], _SSE[50:], after=b"XX"))
    assert not rec.ok and rec.error_kind == "protocol" and "\n" not in rec.error, rec.error


@pytest.mark.parametrize("usage", [b'{"prompt_tokens_details":{"cached_tokens":"lots"}}',
                                   b'{"completion_tokens":18446744073709551615}'])
def test_a_malformed_usage_field_fails_its_request_only(usage):
    """cached_tokens: "lots" used to end the sweep; 2**64 - 1 tokens used to crash compaction later."""
    sse = _SSE.replace(b'{"prompt_tokens":4,"completion_tokens":2}', usage)
    rec = raw_answer(chunked(sse))
    assert not rec.ok and rec.error_kind == "stream" and "malformed SSE data" in rec.error
    assert rec.token_counts == [1, 1]
    records_to_table([rec])  # compacts


def test_an_api_key_echoed_by_the_server_is_not_stored(server):
    rec = one(server, Behaviour(status=401,
                                error_body='{"error": "key sk-live-abcdef123456 is not valid\\n try again"}'),
              api_key="sk-live-abcdef123456")
    assert not rec.ok and "sk-live-abcdef123456" not in rec.error and "<redacted>" in rec.error
    assert "\n" not in rec.error


def test_url_credentials_become_basic_auth_and_leave_the_url(server):
    cfg = ClientConfig(base_url=server.base_url.replace("http://", "http://alice:pa%3Ass@") + "/v1", model="m")
    assert cfg.base_url == server.base_url and "alice" not in json.dumps(cfg.to_manifest())
    server.set(Behaviour())
    rec = send(cfg, RequestSpec(request_id="r", input_tokens=4, output_tokens=2))
    assert rec.ok and server.headers[-1]["Authorization"] == "Basic " + base64.b64encode(b"alice:pa:ss").decode()


# --- reasoning models and the --tokenizer count check, on both transports ----------------------------------

def _delta(fields: dict, finish: str | None = None) -> bytes:
    return b"data: " + json.dumps({"choices": [{"delta": fields, "finish_reason": finish}]}).encode() + b"\n\n"


def _thinking_sse(usage: dict) -> bytes:
    return (_delta({"role": "assistant", "reasoning_content": "let me"}) + _delta({"reasoning": " think"})
            + _delta({"content": "the answer"}) + _delta({"content": " is that"}, "stop")
            + b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")


def test_reasoning_tokens_and_the_first_answer_token_are_recorded():
    rec = raw_answer(chunked(_thinking_sse({"prompt_tokens": 4, "completion_tokens": 4})))
    assert rec.ok, rec.error
    assert rec.output_tokens == 4 and rec.reasoning_tokens == 2 and rec.token_counts == [1, 1, 1, 1]
    assert rec.t_first_content == rec.token_times[2] and rec.t_first_token == rec.token_times[0]
    assert rec.output_tokens_requested == 2 and rec.output_tokens_local is None and rec.input_tokens_local is None


def test_the_servers_reasoning_count_wins_but_never_exceeds_the_output():
    usage = {"prompt_tokens": 4, "completion_tokens": 30, "completion_tokens_details": {"reasoning_tokens": 25}}
    assert raw_answer(chunked(_thinking_sse(usage))).reasoning_tokens == 25
    usage["completion_tokens_details"]["reasoning_tokens"] = 99
    assert raw_answer(chunked(_thinking_sse(usage))).reasoning_tokens == 30


def test_a_tokenizer_counts_the_prompt_and_the_streamed_text(tiny_tokenizer):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tiny_tokenizer)
    local = (len(tok.encode("let me think", add_special_tokens=False).ids)
             + len(tok.encode("the answer is that", add_special_tokens=False).ids))
    # The server counts two tokens more than the text it streamed (e.g. <think> and </think>).
    rec = raw_answer(chunked(_thinking_sse({"prompt_tokens": 4, "completion_tokens": local + 2})),
                     tokenizer=tiny_tokenizer)
    assert rec.ok, rec.error
    assert rec.output_tokens_local == local and rec.output_tokens == local + 2
    assert rec.input_tokens_local == 4 == rec.input_tokens          # token-id prompt: 4 ids sent
