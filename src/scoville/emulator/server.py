"""The OpenAI-compatible HTTP face of the emulator (aiohttp).

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions`` (SSE
streaming and plain JSON), ``GET /v1/models``, ``GET /health``,
``POST /tokenize``, ``POST /detokenize``, ``GET /metrics`` (Prometheus, vLLM
names), ``GET /version`` and ``GET /scoville/info`` (the pinned simulator
configuration and system description, read by :mod:`scoville.emulator.launch`).

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
"""

from __future__ import annotations

import hmac
import itertools
import logging
import os
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
from aiohttp import web

from scoville import __version__
from scoville.emulator.prom import ServerMetrics
from scoville.emulator.protocol import APIError, GenRequest, parse
from scoville.emulator.realtime import RealTimeLoop
from scoville.emulator.tokenizer import LocalTokenizer
from scoville.sim.engine_api import ServingEngine, TokenEvent
from scoville.workload.spec import RequestSpec

log = logging.getLogger("scoville.emulator")
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_DONE = b"data: [DONE]\n\n"
_HASH_MASK = (1 << 62) - 1
# Generated ids stay clear of special tokens, as workload prompts do.
_GEN_LOW = 1000


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


@dataclass
class _Plan:
    spec: RequestSpec
    token_ids: np.ndarray
    finish_reason: str
    prompt_tokens: int


class Emulator:
    """Request handling shared by both generation endpoints."""

    def __init__(self, engine: ServingEngine, options: EmulatorOptions, *,
                 coarse_margin_s: float = 0.0015) -> None:
        self.engine = engine
        self.opts = options
        self.loop = RealTimeLoop(engine, coarse_margin_s=coarse_margin_s)
        self.tokenizer = LocalTokenizer(options.vocab_size)
        self.metrics = ServerMetrics(options.served_model_names[0])
        self._ids = itertools.count()
        self._prefix = os.urandom(4).hex()

    # ---- request -> plan -------------------------------------------------

    def _prompt_ids(self, req: GenRequest) -> list[int]:
        if req.chat:
            return self.tokenizer.encode_chat(req.messages, req.add_generation_prompt)
        if req.prompt_ids is not None:
            bad = next((t for t in req.prompt_ids if not 0 <= t < self.opts.vocab_size), None)
            if bad is not None:
                raise APIError(400, f"token id {bad} in 'prompt' is outside the vocabulary [0, "
                                    f"{self.opts.vocab_size}); send ids below {self.opts.vocab_size}", param="prompt")
            return req.prompt_ids
        return self.tokenizer.encode(req.prompt_text or "")

    def _block_hashes(self, ids: list[int]) -> tuple[int, ...]:
        bs = self.opts.block_size
        if bs <= 0:
            return ()
        out, h = [], 0
        for i in range(0, len(ids) - bs + 1, bs):
            h = hash((h, *ids[i:i + bs])) & _HASH_MASK
            out.append(h)
        return tuple(out)

    def plan(self, req: GenRequest) -> _Plan:
        if req.model not in self.opts.served_model_names:
            served = ", ".join(f"`{m}`" for m in self.opts.served_model_names)
            raise APIError(400, f"The model `{req.model}` does not exist; this server serves {served} "
                                "(see GET /v1/models)", param="model", code="model_not_found")
        ids = self._prompt_ids(req)
        n_prompt = len(ids)
        ctx = self.opts.max_model_len
        if n_prompt == 0:
            raise APIError(400, "the prompt is empty; send at least one token", param="prompt")
        limit = req.max_tokens if req.max_tokens is not None else ctx - n_prompt
        if n_prompt + max(limit, 1) > ctx:
            asked = f" and max_tokens={req.max_tokens}" if req.max_tokens is not None else ""
            raise APIError(413, f"This model's maximum context length is {ctx} tokens; the request has "
                                f"{n_prompt} prompt tokens{asked} ({n_prompt + max(limit, 1)} in all). "
                                "Shorten the prompt or lower max_tokens.", param="prompt",
                           code="context_length_exceeded")
        prompt_hash = zlib.crc32(np.asarray(ids, dtype=np.int64).tobytes())
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

    def _usage(self, plan: _Plan, completion: int, cached: int) -> dict[str, Any]:
        return {"prompt_tokens": plan.prompt_tokens, "completion_tokens": completion,
                "total_tokens": plan.prompt_tokens + completion,
                "prompt_tokens_details": {"cached_tokens": cached}}

    def _choice(self, req: GenRequest, text: str, ids: np.ndarray, reason: str | None,
                first: bool) -> dict[str, Any]:
        if req.chat:
            delta: dict[str, Any] = {"content": text}
            if first:
                delta = {"role": "assistant", "content": text}
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        if req.return_token_ids:
            choice["token_ids"] = ids.tolist()
        return choice

    async def generate(self, request: web.Request, req: GenRequest) -> web.StreamResponse:
        plan = self.plan(req)
        self.check_queue()
        loop = self.loop
        t_arrival = loop.now()
        stream = loop.submit(plan.spec)
        rid, created = plan.spec.request_id, int(time.time())
        obj = "chat.completion.chunk" if req.chat else "text_completion"
        head = {"id": rid, "object": obj, "created": created, "model": req.model}
        done_tokens, cached, t_first, t_prev, finished = 0, 0, None, None, False
        text_parts: list[str] = []
        resp: web.StreamResponse | None = None
        m = self.metrics
        try:
            if req.stream:
                resp = web.StreamResponse(headers=_SSE_HEADERS)
                await resp.prepare(request)
            while not finished:
                batch = await stream.take()
                k = 0
                for ev in batch:
                    k += ev.count
                    if ev.cached_tokens:
                        cached = ev.cached_tokens
                    if ev.error is not None:
                        return await self._engine_error(resp, ev, plan)
                    finished = finished or ev.finished
                k = min(k, len(plan.token_ids) - done_tokens)
                if finished:
                    k = len(plan.token_ids) - done_tokens
                ids = plan.token_ids[done_tokens:done_tokens + k]
                text = self.tokenizer.decode(ids.tolist())
                first = done_tokens == 0
                done_tokens += k
                reason = plan.finish_reason if finished else None
                if resp is not None:
                    chunk = dict(head, choices=[self._choice(req, text, ids, reason, first)],
                                 usage=self._usage(plan, done_tokens, cached) if req.continuous_usage else None)
                    await resp.write(b"data: " + _encode(chunk) + b"\n\n")
                else:
                    text_parts.append(text)
                t_sent = loop.now()
                for ev in batch:
                    m.lag.observe(t_sent - ev.t)
                if t_first is None:
                    t_first = t_sent
                    m.ttft.observe(t_sent - t_arrival)
                elif k:
                    m.itl.observe((t_sent - t_prev) / k, k)
                t_prev = t_sent
            m.finished[plan.finish_reason] += 1
            m.e2e.observe(loop.now() - t_arrival)
            if done_tokens > 1 and t_first is not None and t_prev is not None:
                m.tpot.observe((t_prev - t_first) / (done_tokens - 1))
            usage = self._usage(plan, done_tokens, cached)
            if resp is not None:
                if req.include_usage:
                    await resp.write(b"data: " + _encode(dict(head, choices=[], usage=usage)) + b"\n\n")
                await resp.write(_DONE)
                await resp.write_eof()
                return resp
            return self._full_response(req, plan, head, "".join(text_parts), usage)
        finally:
            if not finished:
                m.finished["abort"] += 1
                loop.cancel(rid)

    def _full_response(self, req: GenRequest, plan: _Plan, head: dict[str, Any], text: str,
                       usage: dict[str, Any]) -> web.Response:
        if req.chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                      "logprobs": None, "finish_reason": plan.finish_reason}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": plan.finish_reason}
            obj = "text_completion"
        if req.return_token_ids:
            choice["token_ids"] = plan.token_ids.tolist()
        body = dict(head, object=obj, choices=[choice], usage=usage)
        return web.Response(body=_encode(body), content_type="application/json")

    async def _engine_error(self, resp: web.StreamResponse | None, ev: TokenEvent, plan: _Plan) -> web.StreamResponse:
        self.metrics.finished["error"] += 1
        err = APIError(503, f"the emulated engine dropped request {plan.spec.request_id}: {ev.error}",
                       type="server_error", code="engine_error")
        if resp is None:
            return _error_response(err)
        await resp.write(b"data: " + _encode(err.body()) + b"\n\n")
        await resp.write(_DONE)
        await resp.write_eof()
        return resp


def _error_response(err: APIError) -> web.Response:
    return web.Response(status=err.status, body=_encode(err.body()), content_type="application/json")


_PROTECTED = ("/v1/", "/tokenize", "/detokenize")


def create_app(emu: Emulator) -> web.Application:
    """The aiohttp application; the engine loop starts and stops with it."""

    @web.middleware
    async def errors(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            key = emu.opts.api_key
            if key is not None and request.path.startswith(_PROTECTED):
                got = request.headers.get("Authorization", "")
                if not hmac.compare_digest(got.encode(), f"Bearer {key}".encode()):
                    emu.metrics.rejected[401] = emu.metrics.rejected.get(401, 0) + 1
                    raise APIError(401, "missing or wrong API key; send the header 'Authorization: Bearer <key>' "
                                        "with the key the server was started with (--api-key)",
                                   type="authentication_error", code="invalid_api_key")
            return await handler(request)
        except APIError as e:
            return _error_response(e)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            return _error_response(APIError(e.status, f"{request.method} {request.path}: {e.reason}",
                                            code=str(e.status)))
        except (ConnectionResetError, ConnectionError):
            raise
        except Exception as e:
            log.exception("request %s %s failed", request.method, request.path)
            return _error_response(APIError(500, f"internal emulator error: {type(e).__name__}: {e}",
                                            type="server_error"))

    async def body_of(request: web.Request) -> Any:
        raw = await request.read()
        try:
            return _decode(raw)
        except msgspec.DecodeError as e:
            raise APIError(400, f"the request body is not valid JSON ({e}); send a JSON object") from None

    async def completions(request: web.Request) -> web.StreamResponse:
        return await emu.generate(request, parse(await body_of(request), chat=False))

    async def chat(request: web.Request) -> web.StreamResponse:
        return await emu.generate(request, parse(await body_of(request), chat=True))

    async def models(request: web.Request) -> web.Response:
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "scoville", "root": name,
                 "parent": None, "max_model_len": emu.opts.max_model_len} for name in emu.opts.served_model_names]
        return web.json_response({"object": "list", "data": data})

    async def health(request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": __version__, "emulator": "scoville"})

    async def info(request: web.Request) -> web.Response:
        return web.Response(body=_encode(emu.opts.info), content_type="application/json")

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=emu.metrics.render(emu.engine.stats()), content_type="text/plain")

    async def tokenize(request: web.Request) -> web.Response:
        body = await body_of(request)
        if not isinstance(body, dict):
            raise APIError(400, "the request body must be a JSON object with 'prompt' or 'messages'")
        if "messages" in body:
            msgs = parse({"model": emu.opts.served_model_names[0], "messages": body["messages"],
                          "add_generation_prompt": body.get("add_generation_prompt", True)}, chat=True)
            ids = emu.tokenizer.encode_chat(msgs.messages, msgs.add_generation_prompt)
        elif isinstance(body.get("prompt"), str):
            ids = emu.tokenizer.encode(body["prompt"])
        else:
            raise APIError(400, "/tokenize needs 'prompt' (a string) or 'messages' (a chat list)", param="prompt")
        return web.json_response({"count": len(ids), "max_model_len": emu.opts.max_model_len, "tokens": ids})

    async def detokenize(request: web.Request) -> web.Response:
        body = await body_of(request)
        tokens = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise APIError(400, "/detokenize needs 'tokens': a list of token ids", param="tokens")
        return web.json_response({"prompt": emu.tokenizer.decode(tokens)})

    async def on_startup(app: web.Application) -> None:
        emu.loop.start()

    async def on_cleanup(app: web.Application) -> None:
        await emu.loop.stop()

    app = web.Application(middlewares=[errors], client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_get("/version", version)
    app.router.add_get("/scoville/info", info)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    app["emulator"] = emu
    return app


async def start_site(emu: Emulator, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner (for cleanup) and the bound port (useful with port 0)."""
    runner = web.AppRunner(create_app(emu), handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    return runner, bound
