"""Before a sweep: is the server there, which model does it serve, which request fields does it take.

Fails fast with one line naming the URL when nothing answers, so a typo in
``--url`` costs a second, not a sweep of timeouts. Reads the served model's
context window (``max_model_len``, which vLLM lists in ``/v1/models``) so
session workloads can be shaped to fit it. Detects whether the server
accepts vLLM's extension fields (``ignore_eos``, ``min_tokens``,
``continuous_usage_stats``) by sending one tiny request with them and, on a
4xx, one without; the answer is kept in ``ClientConfig.extensions`` and the
manifest.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from scoville.client.config import ClientConfig
from scoville.client.driver import new_loop
from scoville.client.errors import ClientError
from scoville.client.request import Prompts
from scoville.client.sse import SSEError, StreamParser
from scoville.client.text import WORDS
from scoville.results.schema import MAX_COUNT
from scoville.workload.spec import RequestSpec

_PROBE = RequestSpec(request_id="probe", input_tokens=8, output_tokens=2, prompt_seed=7)
# Fewer one-token words than this make prompts too repetitive to trust; the full list is used instead.
MIN_PROMPT_WORDS = 16


def _why(e: aiohttp.ClientError) -> str:
    """One line naming an aiohttp failure (its messages carry newlines and caret diagrams)."""
    detail = getattr(e, "message", None) or str(e)
    return f"{type(e).__name__}: {' '.join(str(detail).split())[:100]}"


def _context_window(entry: dict[str, Any]) -> int | None:
    """A model entry's ``max_model_len`` when it is a sane token count (anything else is ignored)."""
    value = entry.get("max_model_len")
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 < value <= MAX_COUNT else None


async def _models(http: aiohttp.ClientSession, cfg: ClientConfig) -> dict[str, int | None]:
    """Served model ids, each with its context window when the server says it."""
    try:
        async with http.get(f"{cfg.base_url}/v1/models", headers=cfg.headers()) as resp:
            if resp.status == 401:
                raise ClientError(f"{cfg.base_url} wants an API key (HTTP 401); pass --api-key")
            if resp.status != 200:
                return {}
            data = await resp.json(content_type=None)
            listed = data.get("data") if isinstance(data, dict) else None
            return {str(m["id"]): _context_window(m) for m in listed or [] if isinstance(m, dict) and m.get("id")}
    except (TimeoutError, aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError) as e:
        raise ClientError(f"cannot reach {cfg.base_url}: is the server running? ({type(e).__name__}: {e})") from None
    except (aiohttp.ContentTypeError, ValueError):
        return {}
    except aiohttp.ClientError as e:  # something answered, but not as an HTTP server (wrong port?)
        raise ClientError(f"{cfg.base_url} did not answer as an HTTP server; check --url ({_why(e)})") from None


async def _try(http: aiohttp.ClientSession, cfg: ClientConfig) -> tuple[int, str]:
    body = Prompts(cfg).build(_PROBE)[0]
    async with http.post(cfg.endpoint, data=body, headers=cfg.headers()) as resp:
        if resp.status != 200:
            return resp.status, " ".join((await resp.text()).split())[:200]
        parser = StreamParser()
        try:
            async for data in resp.content.iter_any():
                parser.feed(data, 0.0)
            parser.close(0.0)
        except SSEError as e:
            return 200, f"malformed stream: {e}"
        return 200, ""


async def _token_count(http: aiohttp.ClientSession, cfg: ClientConfig, text: str) -> int | None:
    """Tokens of ``text`` by the server's vLLM-style ``/tokenize`` (None when it has none or says no)."""
    body = {"model": cfg.model, "prompt": text, "add_special_tokens": False}
    async with http.post(f"{cfg.base_url}/tokenize", json=body, headers=cfg.headers()) as resp:
        if resp.status != 200:
            return None
        data = await resp.json(content_type=None)
    count = data.get("count") if isinstance(data, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


async def _one_token_words(http: aiohttp.ClientSession, cfg: ClientConfig) -> tuple[str, ...]:
    """The chat prompt words the server's tokenizer reads as one token each after a space (() without /tokenize)."""
    if cfg.api != "chat" or cfg.tokenizer:
        return ()
    try:
        if await _token_count(http, cfg, " " + WORDS[0]) is None:
            return ()
        counts = await asyncio.gather(*(_token_count(http, cfg, " " + w) for w in WORDS))
    except (TimeoutError, aiohttp.ClientError, ValueError):
        return ()
    words = tuple(w for w, n in zip(WORDS, counts, strict=True) if n == 1)
    return words if len(words) >= MIN_PROMPT_WORDS else ()


async def _probe(cfg: ClientConfig) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=60, sock_connect=5)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        models = await _models(http, cfg)
        if not cfg.model:
            if not models:
                raise ClientError(f"{cfg.base_url} lists no models at /v1/models; pass --model NAME")
            cfg.model = next(iter(models))
        elif models and cfg.model not in models:
            raise ClientError(f"{cfg.base_url} does not serve model {cfg.model!r}; it serves: {', '.join(models)}")
        try:
            status, text = await _try(http, cfg)
            if cfg.extensions and 400 <= status < 500 and status not in (401, 404, 429):
                cfg.extensions = False
                status, text = await _try(http, cfg)
        except (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError) as e:
            raise ClientError(f"cannot reach {cfg.base_url}: is the server running? ({e})") from None
        except TimeoutError:
            raise ClientError(f"{cfg.endpoint} did not answer a 2-token request within 60 s") from None
        except aiohttp.ClientError as e:
            raise ClientError(f"{cfg.endpoint} broke off a test request ({_why(e)})") from None
        if status == 401:
            raise ClientError(f"{cfg.base_url} wants an API key (HTTP 401); pass --api-key")
        if status == 404:
            other = "completions" if cfg.api == "chat" else "chat"
            raise ClientError(f"{cfg.endpoint} not found (HTTP 404); try --api {other}")
        if status != 200 or text:
            raise ClientError(f"{cfg.endpoint} rejected a test request (HTTP {status}): {cfg.redact(text)}")
        cfg.prompt_words = await _one_token_words(http, cfg)
    return {"models": list(models), "extensions": cfg.extensions, "max_model_len": models.get(cfg.model)}


def probe(cfg: ClientConfig) -> dict[str, Any]:
    """Check the target and settle ``cfg.model``, ``cfg.extensions`` and ``cfg.prompt_words``; ClientError when
    unusable.

    Returns ``models`` (served ids), ``extensions`` and ``max_model_len`` (the
    model's context window, None when the server does not list it).
    """
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(_probe(cfg))
