"""The OpenAI-compatible HTTP face of the emulator (aiohttp).

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions`` (SSE
streaming and plain JSON), ``GET /v1/models``, ``GET /health``,
``POST /tokenize``, ``POST /detokenize``, ``GET /metrics`` (Prometheus, vLLM
names), ``GET /version`` and ``GET /scoville/info`` (the pinned simulator
configuration and system description, read by :mod:`scoville.emulator.launch`); the routes
and error replies live in :mod:`scoville.emulator.routes`.

Each generation request becomes a :class:`RequestSpec` submitted to the engine
through the :class:`RealTimeLoop`; its tokens are written as the engine releases
them. What the emulated model "generates": deterministic pseudo-random token ids
seeded by the prompt (and ``seed``), decoded by the local tokenizer. Without
``ignore_eos`` it stops at a pseudo-random length (geometric, mean
``mean_output_tokens``, never below ``min_tokens``) with ``finish_reason
"stop"``; otherwise, or when ``max_tokens`` comes first, ``"length"``.

The server never dies from a request: every handler error becomes an OpenAI
error response, and a client that disconnects has its request cancelled in the
engine at once (aiohttp handler cancellation is on).

Nor does one client stall the others. Every stream's tokens are written by the
one event loop, so the work a request costs there is bounded before it is
done: a body over ``max_body_bytes`` (from its Content-Length, before reading)
is a 413, a body that does not arrive within ``body_timeout_s`` a 408, one
nested too deep to decode a 400; a text prompt is tokenized in steps that let
the loop pace tokens between them, and only until it is known to exceed the
context. Connections that never complete a request head are closed after
``KEEPALIVE_S`` (aiohttp's keep-alive timer also runs from the connect), and
the listen backlog takes ``BACKLOG`` simultaneous connects.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec
import numpy as np
from aiohttp import HttpVersion11, web

from scoville.emulator.prom import ServerMetrics
from scoville.emulator.protocol import APIError, GenRequest
from scoville.emulator.realtime import RealTimeLoop
from scoville.emulator.routes import create_app, error_response
from scoville.emulator.tokenizer import LocalTokenizer
from scoville.sim.engine_api import ServingEngine, TokenEvent
from scoville.workload.spec import RequestSpec

_encode = msgspec.json.Encoder().encode
_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_DONE = b"data: [DONE]\n\n"
_HASH_MASK = (1 << 62) - 1
# Generated ids stay clear of special tokens, as workload prompts do.
_GEN_LOW = 1000
# Idle time after which a connection with no (complete) request head is closed: uvicorn's default,
# so vLLM's. aiohttp starts this timer at the connect too, which makes it the header-read timeout.
KEEPALIVE_S = 5.0
# Simultaneous connects the kernel queues before the loop accepts them (it caps this at somaxconn).
BACKLOG = 4096
# After refusing a body it did not read (413, 408), how long the server still drains it so the client
# can read the answer before the close (aiohttp's default, 10 s, let a trickling client hold on that long).
_LINGER_S = 2.0
# Body bytes allowed per token of context: a prompt filling the context stays far below this
# (JSON token ids take ~7 B a token, text ~5; escaped CJK ~24), a 10 MB "prompt" does not.
_BODY_BYTES_PER_TOKEN = 32
_MIN_BODY_BYTES = 1 << 20


@dataclass
class EmulatorOptions:
    """Everything about the served model and limits that the HTTP layer needs."""

    served_model_names: list[str]
    max_model_len: int
    vocab_size: int
    block_size: int = 0                   # KV block size for prefix-cache hashes; 0 = no hashes
    api_key: str | None = None
    max_queue: int | None = None          # 429 once this many requests wait to be scheduled
    mean_output_tokens: int = 256         # natural (EOS) length without ignore_eos
    info: dict[str, Any] = field(default_factory=dict)   # served at /scoville/info
    max_body_bytes: int | None = None     # larger request bodies are a 413; None: 32 B per token of context
    body_timeout_s: float = 30.0          # a body still arriving after this is a 408
    reasoning_tokens: int = 0             # leading output tokens of a chat answer sent as reasoning

    @property
    def body_limit(self) -> int:
        if self.max_body_bytes is not None:
            return self.max_body_bytes
        return max(_MIN_BODY_BYTES, _BODY_BYTES_PER_TOKEN * self.max_model_len)


@dataclass
class _Plan:
    spec: RequestSpec
    token_ids: np.ndarray
    finish_reason: str
    prompt_tokens: int


class Emulator:
    """Request handling shared by both generation endpoints."""

    def __init__(self, engine: ServingEngine, options: EmulatorOptions, *,
                 spin_horizon_s: float = 0.005) -> None:
        self.engine = engine
        self.opts = options
        self.loop = RealTimeLoop(engine, spin_horizon_s=spin_horizon_s)
        self.tokenizer = LocalTokenizer(options.vocab_size)
        self.metrics = ServerMetrics(options.served_model_names[0])
        self.loop.advance_seconds = self.metrics.advance
        self._ids = itertools.count()
        self._prefix = os.urandom(4).hex()

    # ---- request -> plan -------------------------------------------------

    async def _prompt_ids(self, req: GenRequest) -> list[int]:
        """The prompt's token ids; a text prompt only until it is past the context (then it is too long anyway).

        Tokenizing pauses every few hundred pieces (see emulator.tokenizer), so the
        streams beside a long text prompt keep their pace.
        """
        if req.prompt_ids is not None:
            return req.prompt_ids
        ids: list[int] = []
        ctx = self.opts.max_model_len
        steps = (self.tokenizer.chat_steps(req.messages, req.add_generation_prompt, ids, ctx) if req.chat
                 else self.tokenizer.text_steps(req.prompt_text or "", ids, ctx))
        for _ in steps:
            await asyncio.sleep(0)
        return ids

    def _id_array(self, req: GenRequest, ids: list[int]) -> np.ndarray:
        """The prompt's ids as one int64 array (converted once: 8k ids take ~0.3 ms), checked against the vocabulary."""
        try:
            arr = np.fromiter(ids, dtype=np.int64, count=len(ids))
        except OverflowError:
            raise APIError(400, "a token id in 'prompt' does not fit in 64 bits; send vocabulary ids",
                           param="prompt") from None
        if req.prompt_ids is not None and len(arr):
            bad = next((int(t) for t in (arr.min(), arr.max()) if not 0 <= t < self.opts.vocab_size), None)
            if bad is not None:
                raise APIError(400, f"token id {bad} in 'prompt' is outside the vocabulary [0, "
                                    f"{self.opts.vocab_size}); send ids below {self.opts.vocab_size}", param="prompt")
        return arr

    def _block_hashes(self, ids: list[int]) -> tuple[int, ...]:
        bs = self.opts.block_size
        if bs <= 0:
            return ()
        out, h = [], 0
        for i in range(0, len(ids) - bs + 1, bs):
            h = hash((h, *ids[i:i + bs])) & _HASH_MASK
            out.append(h)
        return tuple(out)

    async def plan(self, req: GenRequest) -> _Plan:
        if req.model not in self.opts.served_model_names:
            served = ", ".join(f"`{m}`" for m in self.opts.served_model_names)
            raise APIError(400, f"The model `{req.model}` does not exist; this server serves {served} "
                                "(see GET /v1/models)", param="model", code="model_not_found")
        ids = await self._prompt_ids(req)
        n_prompt = len(ids)
        ctx = self.opts.max_model_len
        if n_prompt == 0:
            raise APIError(400, "the prompt is empty; send at least one token", param="prompt")
        limit = req.max_tokens if req.max_tokens is not None else ctx - n_prompt
        if n_prompt + max(limit, 1) > ctx:
            asked = f" and max_tokens={req.max_tokens}" if req.max_tokens is not None else ""
            cut_short = n_prompt > ctx and req.prompt_ids is None  # text is tokenized only until past the context
            counted = f"more than {ctx}" if cut_short else str(n_prompt)
            total = f"over {ctx}" if cut_short else str(n_prompt + max(limit, 1))
            raise APIError(413, f"This model's maximum context length is {ctx} tokens; the request has "
                                f"{counted} prompt tokens{asked} ({total} in all). "
                                "Shorten the prompt or lower max_tokens.", param="prompt",
                           code="context_length_exceeded")
        id_array = self._id_array(req, ids)
        prompt_hash = zlib.crc32(id_array.data)
        rng = np.random.default_rng([prompt_hash, req.seed & 0xFFFFFFFF])
        if req.ignore_eos:
            n_out, reason = limit, "length"
        else:
            natural = max(req.min_tokens, int(rng.geometric(1.0 / max(self.opts.mean_output_tokens, 1))))
            n_out, reason = (natural, "stop") if natural < limit else (limit, "length")
        hi = max(_GEN_LOW + 1, self.opts.vocab_size - _GEN_LOW)
        token_ids = rng.integers(_GEN_LOW, hi, size=n_out)
        rid = f"{'chatcmpl' if req.chat else 'cmpl'}-{self._prefix}{next(self._ids):x}"
        spec = RequestSpec(request_id=rid, input_tokens=n_prompt, output_tokens=n_out,
                           block_hashes=self._block_hashes(ids), block_size=self.opts.block_size)
        return _Plan(spec=spec, token_ids=token_ids, finish_reason=reason, prompt_tokens=n_prompt)

    def check_queue(self) -> None:
        limit = self.opts.max_queue
        if limit is not None and self.engine.stats().waiting >= limit:
            self.metrics.rejected[429] = self.metrics.rejected.get(429, 0) + 1
            raise APIError(429, f"the server's queue is full ({limit} requests waiting to be scheduled); "
                                "retry later or raise --max-queue", type="rate_limit_error",
                           code="queue_full")

    # ---- responses ---------------------------------------------------------

    async def generate(self, request: web.Request, req: GenRequest) -> web.StreamResponse:
        loop = self.loop
        t_arrival = loop.now()
        plan = await self.plan(req)
        self.check_queue()
        resp: web.StreamResponse | None = None
        sink: _Sink | None = None
        if req.stream:
            resp = web.StreamResponse(headers=_SSE_HEADERS)
            chunked = request.version >= HttpVersion11
            if chunked:
                resp.enable_chunked_encoding()
            try:
                await resp.prepare(request)
                await resp.write(b"")  # flush the headers, which aiohttp may hold back until the first body write
            except ConnectionError:  # the client sent its request and left: nothing to stream, nothing to log
                return resp
            sink = _Sink(request.transport, chunked)
        prog = _Progress(self, req, plan, t_arrival, sink)
        try:
            await loop.submit(plan.spec, prog.on_events, prepare=prog.prepare, settle=prog.settle)
        except ConnectionError:
            return resp if resp is not None else web.Response(status=499)
        finally:
            if not prog.over:
                self.metrics.finished["abort"] += 1
                loop.cancel(plan.spec.request_id)
        if resp is not None:
            with contextlib.suppress(ConnectionError):
                await resp.write_eof()
            return resp
        if prog.error is not None:
            return error_response(prog.error)
        return prog.full_response()


class _Sink:
    """Writes SSE bytes straight to the connection, synchronously, framed as HTTP chunks when chunked."""

    __slots__ = ("transport", "chunked")

    def __init__(self, transport: Any, chunked: bool) -> None:
        self.transport, self.chunked = transport, chunked

    def write(self, data: bytes) -> None:
        tr = self.transport
        if tr is None or tr.is_closing():
            raise ConnectionResetError("client went away")
        tr.write(b"%x\r\n%b\r\n" % (len(data), data) if self.chunked else data)


class _Rendered(NamedTuple):
    """One chunk's worth of a stream, computed by ``_Progress._render``."""

    error: str | None       # the engine dropped the request
    tokens: int             # output tokens this chunk carries
    finished: bool
    cached: int             # prompt tokens served from the prefix cache
    data: bytes             # the SSE bytes to write (empty when not streaming)
    text: str
    reasoning: str = ""     # the chunk's reasoning text (chat with reasoning_tokens)


class _Progress:
    """One request's state while the engine produces it.

    ``on_events`` runs inside the engine loop at the moment tokens are due, so
    it only renders and writes: the chunk's fixed JSON around the text is built
    once per request, and the last tokens, the usage chunk and ``[DONE]`` leave
    in one write. ``settle`` does the rest (server metrics) once every stream
    due at that moment has been written.
    """

    def __init__(self, emu: Emulator, req: GenRequest, plan: _Plan, t_arrival: float, sink: _Sink | None) -> None:
        self.emu, self.req, self.plan, self.sink = emu, req, plan, sink
        self.token_ids: list[int] = plan.token_ids.tolist()
        self.done_tokens = 0
        self.cached = 0
        self.t_arrival = t_arrival
        self.t_first: float | None = None
        self.t_prev = t_arrival                 # when the last chunk left (read only once one has)
        self.over = False
        self.error: APIError | None = None
        self.created = int(time.time())
        # Set by on_events for settle: when the last chunk left, its events and token count.
        self._t_sent = 0.0
        self._sent_events: list[TokenEvent] = []
        self._sent_tokens = 0
        self._prepared: tuple[list[TokenEvent], _Rendered] | None = None
        model = _encode(req.model)
        obj = b"chat.completion.chunk" if req.chat else b"text_completion"
        self.head = (b'data: {"id":"' + plan.spec.request_id.encode() + b'","object":"' + obj +
                     b'","created":' + str(self.created).encode() + b',"model":' + model)
        self._text_open = self.head + (b',"choices":[{"index":0,"delta":{"content":' if req.chat
                                       else b',"choices":[{"index":0,"text":')
        self._first_open = (self.head + b',"choices":[{"index":0,"delta":{"role":"assistant","content":'
                            if req.chat else self._text_open)
        self._text_close = b'}' if req.chat else b""
        self.text_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        # Output tokens before this index are reasoning (chat only: completions have no field for it).
        self.thinking = min(emu.opts.reasoning_tokens, len(self.token_ids)) if req.chat else 0

    def _usage_json(self, done: int, cached: int) -> bytes:
        """The ``usage`` object as JSON, formatted directly: it goes into every chunk with continuous_usage_stats.
        A reasoning answer also says how many of its tokens were reasoning (OpenAI's
        ``completion_tokens_details.reasoning_tokens``): a chunk that spans the turn from thinking to answering
        (several tokens coalesced under load) cannot say where the turn fell, the server can."""
        p = self.plan.prompt_tokens
        details = (b',"completion_tokens_details":{"reasoning_tokens":%d}' % min(done, self.thinking)
                   if self.thinking else b"")
        return (b'{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,'
                b'"prompt_tokens_details":{"cached_tokens":%d}%s}' % (p, done, p + done, cached, details))

    def _render(self, events: list[TokenEvent]) -> _Rendered:
        """What ``events`` make of this stream, without changing it (so it can be done ahead of time)."""
        finished, k, cached = False, 0, self.cached
        for ev in events:
            k += ev.count
            if ev.cached_tokens:
                cached = ev.cached_tokens
            if ev.error is not None:
                return _Rendered(ev.error, 0, True, cached, b"", "")
            finished = finished or ev.finished
        start, n = self.done_tokens, len(self.token_ids)
        k = n - start if finished else min(k, n - start)
        ids = self.token_ids[start:start + k]
        split = min(max(self.thinking - start, 0), k)   # ids[:split] are reasoning
        thought = self.emu.tokenizer.decode(ids[:split]) if split else ""
        text = self.emu.tokenizer.decode(ids[split:]) if split < k else ""
        if self.sink is None:
            return _Rendered(None, k, finished, cached, b"", text, thought)
        req, done = self.req, start + k
        usage = self._usage_json(done, cached) if req.continuous_usage else b"null"
        if split:
            opening = self._reasoning_open(start == 0, thought, answered=split < k)
            answer = _encode(text) if split < k else b""
        else:
            opening, answer = self._first_open if start == 0 else self._text_open, _encode(text)
        parts = [opening, answer, self._text_close,
                 b',"logprobs":null,"finish_reason":',
                 b'"' + self.plan.finish_reason.encode() + b'"' if finished else b"null",
                 b',"token_ids":' + _encode(ids) if req.return_token_ids else b"",
                 b'}],"usage":', usage, b"}\n\n"]
        if finished:
            if req.include_usage:
                parts += [self.head, b',"choices":[],"usage":', self._usage_json(done, cached), b"}\n\n"]
            parts.append(_DONE)
        return _Rendered(None, k, finished, cached, b"".join(parts), text, thought)

    def _reasoning_open(self, first: bool, thought: str, *, answered: bool) -> bytes:
        """A chat delta up to where its answer text goes: the reasoning, then ``"content":`` when an answer
        follows in the same chunk (the turn from thinking to answering), else the delta ends with the reasoning."""
        role = b'"role":"assistant",' if first else b""
        head = self.head + b',"choices":[{"index":0,"delta":{' + role + b'"reasoning_content":' + _encode(thought)
        return head + b',"content":' if answered else head

    def prepare(self, events: list[TokenEvent]) -> None:
        """Render the chunk of ``events``, which the engine says come due next; ``on_events`` sends it."""
        if self.sink is not None:
            self._prepared = (events, self._render(events))

    def on_events(self, events: list[TokenEvent]) -> bool:
        prepared, self._prepared = self._prepared, None
        r = prepared[1] if prepared is not None and prepared[0] == events else self._render(events)
        if r.error is not None:
            return self._fail(r.error)
        self.cached = r.cached
        self.done_tokens += r.tokens
        if self.sink is not None:
            self.sink.write(r.data)
        else:
            self.text_parts.append(r.text)
            self.reasoning_parts.append(r.reasoning)
        self._t_sent = self.emu.loop.now()
        self._sent_events, self._sent_tokens = events, r.tokens
        self.over = r.finished
        return r.finished

    def settle(self) -> None:
        """Server metrics of the chunk just written: release lag per token, TTFT, ITL, and at the end E2E/TPOT."""
        if self.error is not None:
            return
        m = self.emu.metrics
        t_sent, k = self._t_sent, self._sent_tokens
        for ev in self._sent_events:
            m.lag.observe(t_sent - ev.t)
        if self.t_first is None:
            self.t_first = t_sent
            m.ttft.observe(t_sent - self.t_arrival)
        elif k:
            m.itl.observe((t_sent - self.t_prev) / k, k)
        self.t_prev = t_sent
        if self.over:
            m.finished[self.plan.finish_reason] += 1
            m.e2e.observe(t_sent - self.t_arrival)
            if self.done_tokens > 1:
                m.tpot.observe((t_sent - self.t_first) / (self.done_tokens - 1))

    def _fail(self, why: str) -> bool:
        self.over = True
        self.emu.metrics.finished["error"] += 1
        self.error = APIError(503, f"the emulated engine dropped request {self.plan.spec.request_id}: {why}",
                              type="server_error", code="engine_error")
        if self.sink is not None:
            self.sink.write(b"data: " + _encode(self.error.body()) + b"\n\n" + _DONE)
        return True

    def full_response(self) -> web.Response:
        req, plan = self.req, self.plan
        text = "".join(self.text_parts)
        if req.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if self.thinking:
                message["reasoning_content"] = "".join(self.reasoning_parts)
            choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None,
                                      "finish_reason": plan.finish_reason}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": plan.finish_reason}
            obj = "text_completion"
        if req.return_token_ids:
            choice["token_ids"] = self.token_ids
        body = {"id": plan.spec.request_id, "object": obj, "created": self.created, "model": req.model,
                "choices": [choice], "usage": msgspec.Raw(self._usage_json(self.done_tokens, self.cached))}
        return web.Response(body=_encode(body), content_type="application/json")


async def start_site(emu: Emulator, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner (for cleanup) and the bound port (useful with port 0)."""
    runner = web.AppRunner(create_app(emu), handler_cancellation=True, access_log=None,
                           keepalive_timeout=KEEPALIVE_S, lingering_time=_LINGER_S)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=BACKLOG)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    return runner, bound
