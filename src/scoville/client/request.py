"""One streamed request: build the body, send it, time every chunk, return its RequestRecord.

Every failure a server or network can cause (HTTP errors, 429, timeouts,
disconnects, malformed SSE, error events), and any fault of this client on one
request, ends in a record with ``ok=False``, ``error_kind``, ``error`` (one line,
secrets removed) and ``http_status``; only cancellation and ``ClientLimitError``
(this machine is out of sockets: every further request would fail the same way)
propagate, so one bad request can never stop a sweep.
"""

from __future__ import annotations

import errno
import time
from typing import Any

import aiohttp
import msgspec

from scoville.client.config import ClientConfig
from scoville.client.fastpath import ClientLimitError, FastHTTP, HTTPStreamError
from scoville.client.localcount import LocalCounter
from scoville.client.sse import SSEError, StreamParser
from scoville.client.text import PromptText
from scoville.results.schema import MAX_COUNT, RequestRecord
from scoville.workload.prompts import prompt_token_ids
from scoville.workload.spec import RequestSpec

_encode = msgspec.json.Encoder().encode
_ERROR_BODY_BYTES = 300
_ERROR_CHARS = 300


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
    """Turns specs into what goes on the wire, and says how input tokens will be counted.

    ``salt`` is the attempt number of the run: a resumed attempt sends prompts
    the server cannot have cached from the attempt it replaces. ``counter`` is
    the ``--tokenizer`` count check (None without one).
    """

    def __init__(self, cfg: ClientConfig, salt: int = 0) -> None:
        self.cfg, self.salt = cfg, salt
        self.text = (PromptText(cfg.tokenizer, cfg.vocab_size, cfg.prompt_words, checked=True)
                     if cfg.api == "chat" else None)
        self.counter: LocalCounter | None = None
        if cfg.tokenizer:
            loaded = self.text.tokenizer if self.text is not None else None
            self.counter = LocalCounter(loaded) if loaded is not None else LocalCounter.load(cfg.tokenizer)

    def build(self, spec: RequestSpec) -> tuple[bytes, int, str]:
        """(encoded body, input-token count, that count's source) of one request."""
        ids = prompt_token_ids(spec, self.cfg.vocab_size, self.salt)
        if self.text is None:
            return _encode(request_body(self.cfg, spec, ids)), len(ids), "exact"
        text, n, source = self.text.render(ids)
        return _encode(request_body(self.cfg, spec, text)), n, source


def _sent_record(spec: RequestSpec, n_in: int, *, point: int, t0: float, warmup: bool,
                 worker: str | None) -> RequestRecord:
    """The record of a request about to go out, stamped with its send time on the run clock."""
    return RequestRecord(point=point, request_id=spec.request_id, session_id=spec.session_id, turn=spec.turn,
                         t_sent=time.perf_counter() - t0, input_tokens=n_in, warmup=warmup, worker=worker,
                         input_tokens_requested=spec.input_tokens, output_tokens_requested=spec.output_tokens)


def _fail(rec: RequestRecord, kind: str, error: str) -> None:
    rec.ok, rec.error_kind, rec.error = False, kind, error


def _http_error(rec: RequestRecord, status: int, body: bytes, t_done: float) -> RequestRecord:
    """A non-200 answer: the status and the start of the server's error body."""
    _fail(rec, "http", f"HTTP {status}: {body.decode('utf-8', 'replace')}")
    rec.t_done = t_done
    return rec


def _timeout_message(cfg: ClientConfig) -> str:
    return (f"timeout (no data for {cfg.read_timeout_s:g}s or over {cfg.timeout_s:g}s total; "
            "--read-timeout and --timeout set them)")


def _seal(rec: RequestRecord, cfg: ClientConfig) -> RequestRecord:
    """The error as it is stored: secrets the server echoed removed, on one line, bounded."""
    if rec.error is not None:
        rec.error = " ".join(cfg.redact(rec.error).split())[:_ERROR_CHARS]
    return rec


async def _stream_aiohttp(http: aiohttp.ClientSession, cfg: ClientConfig, body: bytes, rec: RequestRecord,
                          parser: StreamParser, t0: float) -> bool:
    """One POST over aiohttp; False when the server answered with an error status (already recorded)."""
    perf = time.perf_counter
    async with http.post(cfg.endpoint, data=body, headers=cfg.headers()) as resp:
        rec.http_status = resp.status
        if resp.status != 200:
            _http_error(rec, resp.status, await resp.content.read(_ERROR_BODY_BYTES), perf() - t0)
            return False
        feed = parser.feed
        async for data in resp.content.iter_any():
            feed(data, perf() - t0)
        parser.close(perf() - t0)
    return True


def _unanswered(e: BaseException, rec: RequestRecord) -> bool:
    """A connection that broke before any answer came: possibly a pooled one the server had closed."""
    return (isinstance(e, (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError))
            and not isinstance(e, aiohttp.ClientConnectorError) and rec.http_status is None)


async def _post_aiohttp(http: aiohttp.ClientSession, cfg: ClientConfig, body: bytes, rec: RequestRecord,
                        parser: StreamParser, t0: float) -> bool:
    """``_stream_aiohttp``, retried once on a fresh connection when a reused one was found dead.

    aiohttp retries only idempotent methods itself, and a POST on a connection
    the server closed while it idled fails before any byte comes back; a
    one-off connector with ``force_close`` guarantees the retry a new socket.
    """
    try:
        return await _stream_aiohttp(http, cfg, body, rec, parser, t0)
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as e:
        if not _unanswered(e, rec):
            raise
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True), timeout=http.timeout,
                                     auto_decompress=False, skip_auto_headers=("User-Agent",)) as fresh:
        return await _stream_aiohttp(fresh, cfg, body, rec, parser, t0)


def _connect_error(cfg: ClientConfig, e: aiohttp.ClientConnectorError) -> str:
    err = e.os_error
    if isinstance(err, OSError) and err.errno in (errno.EMFILE, errno.ENFILE):
        raise ClientLimitError.no_socket(err) from None
    return f"cannot connect to {cfg.base_url}: {err or e}"


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
    rec = _sent_record(spec, 0, point=point, t0=t0, warmup=warmup, worker=worker)
    perf = time.perf_counter
    parser = StreamParser(keep_text=prompts.counter is not None)
    in_source = "exact"
    try:
        body, in_source = _build(prompts, spec, rec)
        rec.t_sent = perf() - t0
        if await _post_aiohttp(http, cfg, body, rec, parser, t0):
            finish(rec, parser, in_source, perf() - t0, prompts.counter)
        return _seal(rec, cfg)
    except SSEError as e:
        _fail(rec, "stream", str(e))
    except (TimeoutError, aiohttp.ServerTimeoutError):
        _fail(rec, "timeout", _timeout_message(cfg))
    except aiohttp.ClientConnectorError as e:
        _fail(rec, "connect", _connect_error(cfg, e))
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError) as e:
        _fail(rec, "disconnect", f"disconnected mid-stream: {type(e).__name__}: {e}")
    except aiohttp.ClientResponseError as e:  # aiohttp's parser refused the response (a bad chunk, a bad header)
        _fail(rec, "protocol", f"bad HTTP response: {e.message}")
    except aiohttp.ClientError as e:
        _fail(rec, "protocol", f"{type(e).__name__}: {e}")
    except ClientLimitError:
        raise
    except Exception as e:  # a fault of this client on this request: recorded, never the sweep's end
        _fail(rec, "client", f"client error: {type(e).__name__}: {e}")
    finish(rec, parser, in_source, perf() - t0, prompts.counter)
    return _seal(rec, cfg)


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
    rec = _sent_record(spec, 0, point=point, t0=t0, warmup=warmup, worker=worker)
    perf = time.perf_counter
    parser = StreamParser(keep_text=prompts.counter is not None)
    in_source = "exact"

    def on_status(code: int) -> None:
        rec.http_status = code

    try:
        body, in_source = _build(prompts, spec, rec)
        rec.t_sent = perf() - t0
        status, error_body = await fast.post_stream(fast_path(cfg), body, cfg.headers(), parser.feed,
                                                    timeout_s=cfg.timeout_s, read_timeout_s=cfg.read_timeout_s,
                                                    on_status=on_status)
        if status != 200:
            return _seal(_http_error(rec, status, error_body, perf() - t0), cfg)
        parser.close(perf() - t0)
    except SSEError as e:
        _fail(rec, "stream", str(e))
    except HTTPStreamError as e:
        _fail(rec, e.kind, {"timeout": _timeout_message(cfg), "connect": str(e),
                            "disconnect": f"disconnected mid-stream: {e}"}.get(e.kind, f"bad HTTP response: {e}"))
    except ClientLimitError:
        raise
    except Exception as e:  # a fault of this client on this request: recorded, never the sweep's end
        _fail(rec, "client", f"client error: {type(e).__name__}: {e}")
    finish(rec, parser, in_source, perf() - t0, prompts.counter)
    return _seal(rec, cfg)


def _build(prompts: Prompts, spec: RequestSpec, rec: RequestRecord) -> tuple[bytes, str]:
    """The request body and its input count's source; the count goes on the record (and, with
    ``--tokenizer``, is the local count too: the prompt was rendered and counted with that tokenizer)."""
    body, rec.input_tokens, in_source = prompts.build(spec)
    if prompts.counter is not None:
        rec.input_tokens_local = rec.input_tokens
    return body, in_source


def fast_path(cfg: ClientConfig) -> str:
    return "/v1/chat/completions" if cfg.api == "chat" else "/v1/completions"


def finish(rec: RequestRecord, parser: StreamParser, in_source: str, t_end: float,
           counter: LocalCounter | None = None) -> None:
    """Fill a record's timing and token fields from what the parser saw.

    Reasoning tokens are the server's count when its usage has one, else the
    parser's, never more than the output. With a ``counter`` the streamed text
    is counted locally (answer and reasoning apart: they were never one text).
    """
    rec.token_times = parser.times
    rec.token_counts = parser.counts
    rec.t_first_token = parser.times[0] if parser.times else None
    rec.t_first_content = parser.t_first_content
    rec.t_done = parser.t_last if parser.t_last is not None else t_end
    if parser.usage_completion is not None:
        rec.output_tokens = parser.usage_completion
        out_source = "server"
    else:
        rec.output_tokens = min(sum(parser.counts), MAX_COUNT)
        out_source = parser.count_source
    if parser.usage_prompt is not None:
        rec.input_tokens, in_source = parser.usage_prompt, "server"
    rec.cached_tokens = parser.cached_tokens
    reasoning = parser.usage_reasoning if parser.usage_reasoning is not None else parser.reasoning
    rec.reasoning_tokens = min(reasoning, rec.output_tokens)
    if counter is not None and parser.answer_text is not None and parser.reasoning_text is not None:
        rec.output_tokens_local = min(counter.count(parser.answer_text) + counter.count(parser.reasoning_text),
                                      MAX_COUNT)
    rec.token_count_source = out_source if in_source in ("exact", "server") else f"{out_source}+{in_source}-input"
    if not rec.ok:
        return
    if not (parser.done or parser.finished):
        _fail(rec, "stream", "stream ended before the server finished (no finish_reason or [DONE])")
    elif not parser.times:
        _fail(rec, "stream", "response carried no tokens")
