"""The emulator's HTTP surface: routes, request bodies, API keys and error replies.

Handlers are module-level functions that find the ``Emulator`` on the application (``EMULATOR``), as aiohttp
intends, so each is short and readable on its own; generation itself is ``Emulator.generate``. Every failure a
client can cause ends in an OpenAI-style JSON error (``APIError``), never a bare 500 page.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import TYPE_CHECKING, Any

import msgspec
from aiohttp import web

from scoville import __version__
from scoville.emulator.protocol import APIError, int_list, parse

if TYPE_CHECKING:
    from scoville.emulator.server import Emulator

log = logging.getLogger("scoville.emulator")

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
_PROTECTED = ("/v1/", "/tokenize", "/detokenize")
_DETOKENIZE_STEP = 4096  # ids decoded between pauses of /detokenize

EMULATOR: web.AppKey[Emulator] = web.AppKey("emulator")


def error_response(err: APIError) -> web.Response:
    """The JSON body and status an OpenAI client expects for ``err``."""
    return web.Response(status=err.status, body=_encode(err.body()), content_type="application/json")


def _check_api_key(emu: Emulator, request: web.Request) -> None:
    """Refuse a protected path without the server's key (only when it was started with --api-key)."""
    key = emu.opts.api_key
    if key is None or not request.path.startswith(_PROTECTED):
        return
    got = request.headers.get("Authorization", "")
    if not hmac.compare_digest(got.encode(), f"Bearer {key}".encode()):
        emu.metrics.rejected[401] = emu.metrics.rejected.get(401, 0) + 1
        raise APIError(401, "missing or wrong API key; send the header 'Authorization: Bearer <key>' "
                            "with the key the server was started with (--api-key)",
                       type="authentication_error", code="invalid_api_key")


@web.middleware
async def errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """Every error as a JSON reply; a connection whose body was left unread is closed after it."""
    try:
        _check_api_key(request.app[EMULATOR], request)
        return await handler(request)
    except APIError as e:
        resp = error_response(e)
        if e.status in (408, 413):  # the body was left unread: this connection cannot carry another request
            resp.force_close()
        return resp
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return error_response(APIError(e.status, f"{request.method} {request.path}: {e.reason}", code=str(e.status)))
    except (ConnectionResetError, ConnectionError):
        raise
    except Exception as e:
        log.exception("request %s %s failed", request.method, request.path)
        return error_response(APIError(500, f"internal emulator error: {type(e).__name__}: {e}", type="server_error"))


async def body_of(request: web.Request) -> Any:
    """The decoded JSON body, after checking its size (before reading when the length is declared)."""
    emu = request.app[EMULATOR]
    limit = emu.opts.body_limit
    too_large = APIError(413, f"the request body is over {limit:,} bytes, more than a prompt filling the "
                              f"context ({emu.opts.max_model_len:,} tokens) needs; shorten the prompt",
                         code="request_too_large")
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    try:
        async with asyncio.timeout(emu.opts.body_timeout_s):
            raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise too_large from None
    except TimeoutError:
        raise APIError(408, f"the request body did not arrive within {emu.opts.body_timeout_s:g} s; send it "
                            "whole", code="request_timeout") from None
    try:
        return _decode(raw)
    except msgspec.DecodeError as e:
        raise APIError(400, f"the request body is not valid JSON ({e}); send a JSON object") from None
    except RecursionError:
        raise APIError(400, "the request body is nested too deeply to read; send a flat JSON object") from None


async def completions(request: web.Request) -> web.StreamResponse:
    return await request.app[EMULATOR].generate(request, parse(await body_of(request), chat=False))


async def chat(request: web.Request) -> web.StreamResponse:
    return await request.app[EMULATOR].generate(request, parse(await body_of(request), chat=True))


async def models(request: web.Request) -> web.Response:
    opts = request.app[EMULATOR].opts
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "scoville", "root": name,
             "parent": None, "max_model_len": opts.max_model_len} for name in opts.served_model_names]
    return web.json_response({"object": "list", "data": data})


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": __version__, "emulator": "scoville"})


async def info(request: web.Request) -> web.Response:
    return web.Response(body=_encode(request.app[EMULATOR].opts.info), content_type="application/json")


async def metrics(request: web.Request) -> web.Response:
    emu = request.app[EMULATOR]
    return web.Response(text=emu.metrics.render(emu.engine.stats(), emu.loop.collector), content_type="text/plain")


async def tokenize(request: web.Request) -> web.Response:
    """Token ids of a prompt or a chat, as the emulated server's tokenizer counts them."""
    emu = request.app[EMULATOR]
    body = await body_of(request)
    if not isinstance(body, dict):
        raise APIError(400, "the request body must be a JSON object with 'prompt' or 'messages'")
    ids: list[int] = []
    if "messages" in body:
        msgs = parse({"model": emu.opts.served_model_names[0], "messages": body["messages"],
                      "add_generation_prompt": body.get("add_generation_prompt", True)}, chat=True)
        steps = emu.tokenizer.chat_steps(msgs.messages, msgs.add_generation_prompt, ids)
    elif isinstance(body.get("prompt"), str):
        steps = emu.tokenizer.text_steps(body["prompt"], ids)
    else:
        raise APIError(400, "/tokenize needs 'prompt' (a string) or 'messages' (a chat list)", param="prompt")
    for _ in steps:  # in steps, as for generation: the streams beside it keep their pace
        await asyncio.sleep(0)
    return web.json_response({"count": len(ids), "max_model_len": emu.opts.max_model_len, "tokens": ids})


async def detokenize(request: web.Request) -> web.Response:
    """Text of token ids, decoded in slices so the streams beside it keep their pace."""
    emu = request.app[EMULATOR]
    body = await body_of(request)
    tokens = body.get("tokens") if isinstance(body, dict) else None
    if not isinstance(tokens, list) or not int_list(tokens):
        raise APIError(400, "/detokenize needs 'tokens': a list of token ids", param="tokens")
    vocab = emu.opts.vocab_size
    if tokens and not 0 <= min(tokens) <= max(tokens) < vocab:
        raise APIError(400, f"/detokenize: token ids must lie in [0, {vocab})", param="tokens")
    parts = []
    for i in range(0, len(tokens), _DETOKENIZE_STEP):
        parts.append(emu.tokenizer.decode(tokens[i:i + _DETOKENIZE_STEP]))
        await asyncio.sleep(0)
    return web.json_response({"prompt": "".join(parts)})


async def _on_startup(app: web.Application) -> None:
    app[EMULATOR].loop.start()


async def _on_cleanup(app: web.Application) -> None:
    await app[EMULATOR].loop.stop()


def create_app(emu: Emulator) -> web.Application:
    """The aiohttp application; the engine loop starts and stops with it."""
    app = web.Application(middlewares=[errors], client_max_size=emu.opts.body_limit)
    app[EMULATOR] = emu
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_get("/version", version)
    app.router.add_get("/scoville/info", info)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    app.on_startup.append(_on_startup)
    app.on_cleanup.append(_on_cleanup)
    return app
