"""A small, fast parser for OpenAI-style Server-Sent Event streams.

Why our own: the client must timestamp every received chunk and count its
tokens at up to tens of thousands of chunks per second on one core, so the hot
path is a byte split plus one typed msgspec decode per event — no generic SSE
library, no dict building. Bytes arrive as the transport delivers them; an
event may be split across reads or many events may arrive in one read, and
every event is stamped with the time of the read that completed it.

Token counting per event, most exact first:

1. cumulative ``usage.completion_tokens`` on each chunk (vLLM's
   ``continuous_usage_stats``): the chunk carries the increase;
2. token ids in the chunk (``token_ids`` or ``logprobs.tokens``): their number;
3. otherwise one token per non-empty text piece.

A final usage event (empty ``choices``) gives the server's completion and
prompt token counts, which are authoritative for the request's totals.
"""

from __future__ import annotations

from typing import Any

import msgspec


class SSEError(Exception):
    """The stream is not well-formed SSE/JSON; recorded on the request, never raised past it."""


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: dict[str, Any] | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None


class _Logprobs(msgspec.Struct):
    tokens: list[Any] | None = None
    content: list[Any] | None = None


class _Choice(msgspec.Struct):
    text: str | None = None
    delta: _Delta | None = None
    token_ids: list[int] | None = None
    logprobs: _Logprobs | None = None
    finish_reason: str | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = []
    usage: _Usage | None = None
    error: Any = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode


def _choice_tokens(choice: _Choice) -> int:
    if choice.token_ids is not None:
        return len(choice.token_ids)
    lp = choice.logprobs
    if lp is not None:
        if lp.tokens is not None:
            return len(lp.tokens)
        if lp.content is not None:
            return len(lp.content)
    if choice.text:
        return 1
    d = choice.delta
    if d is not None and (d.content or d.reasoning_content):
        return 1
    return 0


class StreamParser:
    """Incremental parser of one response stream.

    ``feed(data, t)`` consumes bytes received at run-clock time ``t``; results
    accumulate on the instance: ``times``/``counts`` (one entry per event that
    carried tokens), ``usage_completion``/``usage_prompt``/``cached_tokens``
    (from the server's usage), ``done`` (``[DONE]`` seen), ``finished`` (a
    ``finish_reason`` seen) and ``t_last`` (time of the last event of any kind).
    """

    __slots__ = ("_buf", "times", "counts", "usage_completion", "usage_prompt", "cached_tokens",
                 "done", "finished", "t_last", "_cum", "events", "keepalives", "count_source")

    def __init__(self) -> None:
        self._buf = b""
        self.times: list[float] = []
        self.counts: list[int] = []
        self.usage_completion: int | None = None
        self.usage_prompt: int | None = None
        self.cached_tokens: int | None = None
        self.done = False
        self.finished = False
        self.t_last: float | None = None
        self._cum = 0  # cumulative completion tokens seen via per-chunk usage
        self.events = 0
        self.keepalives = 0
        self.count_source = "chunks"

    def feed(self, data: bytes, t: float) -> None:
        """Consume ``data``; raises SSEError on malformed events or a server error event."""
        buf = self._buf + data if self._buf else data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        parts = buf.split(b"\n\n")
        self._buf = parts.pop()
        for event in parts:
            if event:
                self._event(event, t)

    def close(self, t: float) -> None:
        """End of body: a complete final event without its blank line still counts."""
        rest, self._buf = self._buf.strip(), b""
        if rest:
            self._event(rest, t)

    def _event(self, event: bytes, t: float) -> None:
        data = None
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                piece = line[5:].lstrip(b" ")
                data = piece if data is None else data + b"\n" + piece
            elif not line or line.startswith(b":") or line.startswith((b"event:", b"id:", b"retry:")):
                continue
            else:
                raise SSEError(f"malformed SSE line {line[:60]!r}")
        if data is None:  # comment-only / keep-alive event
            self.keepalives += 1
            return
        if self.done:
            raise SSEError("data after [DONE]")
        self.t_last = t
        self.events += 1
        if data == b"[DONE]":
            self.done = True
            return
        try:
            chunk = _decode_chunk(data)
        except msgspec.DecodeError as e:
            raise SSEError(f"malformed SSE data {data[:60]!r}: {e}") from None
        if chunk.error is not None:
            msg = chunk.error.get("message", chunk.error) if isinstance(chunk.error, dict) else chunk.error
            raise SSEError(f"server error event: {str(msg)[:200]}")
        n = 0
        for choice in chunk.choices:
            n += _choice_tokens(choice)
            if choice.finish_reason is not None:
                self.finished = True
        usage = chunk.usage
        if usage is not None:
            if usage.completion_tokens is not None:
                if chunk.choices:
                    # Per-chunk cumulative usage: the increase is exact for this chunk.
                    n = usage.completion_tokens - self._cum
                    self._cum = usage.completion_tokens
                    self.count_source = "usage"
                self.usage_completion = usage.completion_tokens
            if usage.prompt_tokens is not None:
                self.usage_prompt = usage.prompt_tokens
            details = usage.prompt_tokens_details
            if details and details.get("cached_tokens") is not None:
                self.cached_tokens = int(details["cached_tokens"])
        if n > 0:
            self.times.append(t)
            self.counts.append(n)
