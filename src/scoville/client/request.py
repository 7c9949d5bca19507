"""One streamed request: build the body, send it, time every chunk, return its RequestRecord.

Every failure a server or network can cause (HTTP errors, 429, timeouts,
disconnects, malformed SSE, error events) ends in a record with ``ok=False``,
``error`` and ``http_status``; only cancellation propagates, so one bad request
can never stop a sweep.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import msgspec

from scoville.client.config import ClientConfig
from scoville.client.fastpath import FastHTTP, HTTPStreamError
from scoville.client.sse import SSEError, StreamParser
from scoville.client.text import PromptText
from scoville.results.schema import RequestRecord
from scoville.workload.prompts import prompt_token_ids
from scoville.workload.spec import RequestSpec

_encode = msgspec.json.Encoder().encode
_ERROR_BODY_BYTES = 300


def request_body(cfg: ClientConfig, spec: RequestSpec, prompt: list[int] | str) -> dict[str, Any]:
    """The JSON body InferenceX's method sends (token ids on completions, text on chat)."""
    body: dict[str, Any] = {
        "model": cfg.model,
        "max_tokens": spec.output_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if cfg.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if cfg.extensions:
        body["stream_options"]["continuous_usage_stats"] = True
        if cfg.ignore_eos:
            body["ignore_eos"] = True
            body["min_tokens"] = spec.output_tokens
    return body


class Prompts:
    """Turns specs into what goes on the wire, and says how input tokens will be counted."""

    def __init__(self, cfg: ClientConfig) -> None:
        self.cfg = cfg
        self.text = PromptText(cfg.tokenizer, cfg.vocab_size) if cfg.api == "chat" else None

    def build(self, spec: RequestSpec) -> tuple[bytes, int, str]:
        """(encoded body, input-token count, that count's source) of one request."""
        ids = prompt_token_ids(spec, self.cfg.vocab_size)
        if self.text is None:
            return _encode(request_body(self.cfg, spec, ids)), len(ids), "exact"
        text, n, source = self.text.render(ids)
        return _encode(request_body(self.cfg, spec, text)), n, source


def _sent_record(spec: RequestSpec, n_in: int, *, point: int, t0: float, warmup: bool,
                 worker: str | None) -> RequestRecord:
    """The record of a request about to go out, stamped with its send time on the run clock."""
    return RequestRecord(point=point, request_id=spec.request_id, session_id=spec.session_id, turn=spec.turn,
                         t_sent=time.perf_counter() - t0, input_tokens=n_in, warmup=warmup, worker=worker)


def _http_error(rec: RequestRecord, status: int, body: bytes, t_done: float) -> RequestRecord:
    """A non-200 answer: the status and the start of the server's error body, on one line."""
    text = body.decode("utf-8", "replace")
    rec.ok, rec.error, rec.t_done = False, f"HTTP {status}: {' '.join(text.split())[:200]}", t_done
    return rec


def _timeout_message(cfg: ClientConfig) -> str:
    return (f"timeout (no data for {cfg.read_timeout_s:g}s or over {cfg.timeout_s:g}s total; "
            "--read-timeout and --timeout set them)")


async def send_request(
    http: aiohttp.ClientSession,
    cfg: ClientConfig,
    prompts: Prompts,
    spec: RequestSpec,
    *,
    point: int,
    t0: float,
    warmup: bool = False,
    worker: str | None = None,
) -> RequestRecord:
    """Send ``spec`` and stream its answer; times are ``perf_counter() - t0`` (the run clock)."""
    body, n_in, in_source = prompts.build(spec)
    perf = time.perf_counter
    parser = StreamParser()
    rec = _sent_record(spec, n_in, point=point, t0=t0, warmup=warmup, worker=worker)
    try:
        async with http.post(cfg.endpoint, data=body, headers=cfg.headers()) as resp:
            rec.http_status = resp.status
            if resp.status != 200:
                return _http_error(rec, resp.status, await resp.content.read(_ERROR_BODY_BYTES), perf() - t0)
            feed = parser.feed
            async for data in resp.content.iter_any():
                feed(data, perf() - t0)
            parser.close(perf() - t0)
    except SSEError as e:
        rec.ok, rec.error = False, str(e)
    except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
        rec.ok, rec.error = False, _timeout_message(cfg)
    except aiohttp.ClientConnectorError as e:
        rec.ok, rec.error = False, f"cannot connect to {cfg.base_url}: {e.os_error or e}"
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError) as e:
        rec.ok, rec.error = False, f"disconnected mid-stream: {type(e).__name__}: {str(e)[:150]}"
    except aiohttp.ClientError as e:
        rec.ok, rec.error = False, f"{type(e).__name__}: {str(e)[:200]}"
    finish(rec, parser, n_in, in_source, perf() - t0)
    return rec


async def send_request_fast(
    fast: FastHTTP,
    cfg: ClientConfig,
    prompts: Prompts,
    spec: RequestSpec,
    *,
    point: int,
    t0: float,
    warmup: bool = False,
    worker: str | None = None,
) -> RequestRecord:
    """``send_request`` over the raw-socket path: chunk times are the kernel's arrival stamps."""
    body, n_in, in_source = prompts.build(spec)
    perf = time.perf_counter
    parser = StreamParser()
    rec = _sent_record(spec, n_in, point=point, t0=t0, warmup=warmup, worker=worker)
    try:
        def on_status(code: int) -> None:
            rec.http_status = code

        status, error_body = await fast.post_stream(fast_path(cfg), body, cfg.headers(), parser.feed,
                                                    timeout_s=cfg.timeout_s, read_timeout_s=cfg.read_timeout_s,
                                                    on_status=on_status)
        if status != 200:
            return _http_error(rec, status, error_body, perf() - t0)
        parser.close(perf() - t0)
    except SSEError as e:
        rec.ok, rec.error = False, str(e)
    except HTTPStreamError as e:
        rec.ok = False
        if e.kind == "timeout":
            rec.error = _timeout_message(cfg)
        elif e.kind == "connect":
            rec.error = str(e)
        elif e.kind == "disconnect":
            rec.error = f"disconnected mid-stream: {e}"
        else:
            rec.error = f"bad HTTP response: {e}"
    finish(rec, parser, n_in, in_source, perf() - t0)
    return rec


def fast_path(cfg: ClientConfig) -> str:
    return "/v1/chat/completions" if cfg.api == "chat" else "/v1/completions"


def finish(rec: RequestRecord, parser: StreamParser, n_in: int, in_source: str, t_end: float) -> None:
    """Fill a record's timing and token fields from what the parser saw."""
    rec.token_times = parser.times
    rec.token_counts = parser.counts
    rec.t_first_token = parser.times[0] if parser.times else None
    rec.t_done = parser.t_last if parser.t_last is not None else t_end
    if parser.usage_completion is not None:
        rec.output_tokens = parser.usage_completion
        out_source = "server"
    else:
        rec.output_tokens = sum(parser.counts)
        out_source = parser.count_source
    if parser.usage_prompt is not None:
        rec.input_tokens, in_source = parser.usage_prompt, "server"
    rec.cached_tokens = parser.cached_tokens
    rec.token_count_source = out_source if in_source in ("exact", "server") else f"{out_source}+{in_source}-input"
    if not rec.ok:
        return
    if not (parser.done or parser.finished):
        rec.ok, rec.error = False, "stream ended before the server finished (no finish_reason or [DONE])"
    elif not parser.times:
        rec.ok, rec.error = False, "response carried no tokens"
