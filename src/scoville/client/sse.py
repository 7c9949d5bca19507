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

Reasoning models stream their thinking apart from the answer: in
``delta.reasoning_content`` (vLLM, SGLang, DeepSeek) or ``delta.reasoning``
(newer vLLM, OpenRouter), the answer in ``delta.content`` (``text`` on
completions). A chunk's tokens are reasoning when it carries reasoning text
and no answer text; one carrying both (the turn from thinking to answering)
gives one token to the answer and the rest to reasoning (a text-counted chunk
of both counts two tokens, one each); a chunk without text (a partial
multi-byte character, bare token ids) belongs to the part it sits in.
``t_first_content`` is the arrival of the first answer token. The server's
``usage.completion_tokens_details.reasoning_tokens``, when given, replaces
the chunk count.
"""

from __future__ import annotations

from typing import Any

import msgspec

from scoville.results.schema import Count

# The longest event the parser holds while waiting for its blank line. A real chunk is a few
# hundred bytes (a few MB with huge logprobs); a stream that never ends its event is refused
# here rather than buffered without bound.
MAX_EVENT_BYTES = 16 << 20


class SSEError(Exception):
    """The stream is not well-formed SSE/JSON; recorded on the request, never raised past it."""


class _Details(msgspec.Struct):
    cached_tokens: Count | None = None


class _OutDetails(msgspec.Struct):
    reasoning_tokens: Count | None = None


class _Usage(msgspec.Struct):
    """Server token counts, type-checked and bounded when decoded (a bad one fails its request only)."""

    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    prompt_tokens_details: _Details | None = None
    completion_tokens_details: _OutDetails | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


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
    choices: list[_Choice] | None = None  # null on some servers' usage chunk
    usage: _Usage | None = None
    error: Any = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode


def _choice_tokens(choice: _Choice, answer: str | None, thought: str | None) -> int:
    """Tokens of one choice: its token ids, else its logprobs, else one per non-empty text piece."""
    if choice.token_ids is not None:
        return len(choice.token_ids)
    lp = choice.logprobs
    if lp is not None:
        if lp.tokens is not None:
            return len(lp.tokens)
        if lp.content is not None:
            return len(lp.content)
    return (1 if answer else 0) + (1 if thought else 0)


def _data(event: bytes) -> bytes | None:
    """The data of one event (its ``data`` lines joined by newlines), None when it has none.

    As the SSE specification reads a line: ``:`` starts a comment, the field
    name ends at the first colon (a line without one is a field with an empty
    value), one space after the colon is dropped, and fields other than
    ``data`` (``event``, ``id``, ``retry``, unknown ones) are ignored.
    """
    data = None
    for line in event.split(b"\n"):
        if not line or line[:1] == b":":
            continue
        name, _, value = line.partition(b":")
        if name != b"data":
            continue
        if value[:1] == b" ":
            value = value[1:]
        data = value if data is None else data + b"\n" + value
    return data


class StreamParser:
    """Incremental parser of one response stream.

    ``feed(data, t)`` consumes bytes received at run-clock time ``t``; results
    accumulate on the instance: ``times``/``counts`` (one entry per event that
    carried tokens), ``usage_completion``/``usage_prompt``/``cached_tokens``/
    ``usage_reasoning`` (from the server's usage), ``reasoning`` (reasoning
    tokens counted from chunks), ``t_first_content`` (first answer token),
    ``done`` (``[DONE]`` seen), ``finished`` (a ``finish_reason`` seen) and
    ``t_last`` (time of the last event of any kind). With ``keep_text`` the
    streamed text is kept too (``answer_text``, ``reasoning_text``: lists of
    pieces), for a local tokenizer to count; otherwise no text is held.

    Each read is scanned once: the search for the blank line that ends an event
    resumes where the last one stopped, so an event arriving in many small reads
    costs linear time (a rescan of the whole pending event per read was quadratic
    and stalled every stream sharing the loop). Lines may end in CRLF, LF or a bare
    CR, as the SSE specification allows. Anything after ``[DONE]`` (a second
    ``[DONE]`` included) is ignored: the answer was already complete.
    """

    __slots__ = ("_buf", "_scan", "_cr", "times", "counts", "usage_completion", "usage_prompt", "cached_tokens",
                 "done", "finished", "t_last", "_cum", "events", "keepalives", "count_source", "usage_reasoning",
                 "reasoning", "t_first_content", "_thinking", "answer_text", "reasoning_text")

    def __init__(self, keep_text: bool = False) -> None:
        self._buf = bytearray()
        self._scan = 0      # no event separator starts before this offset of _buf
        self._cr = False    # the last read ended in CR: a leading LF of the next one belongs to it
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
        self.usage_reasoning: int | None = None
        self.reasoning = 0
        self.t_first_content: float | None = None
        self._thinking = False  # the last chunk with text was reasoning: a textless one that follows is too
        self.answer_text: list[str] | None = [] if keep_text else None
        self.reasoning_text: list[str] | None = [] if keep_text else None

    def feed(self, data: bytes, t: float) -> None:
        """Consume ``data``; raises SSEError on malformed events or a server error event."""
        if self._cr:
            self._cr = False
            if data[:1] == b"\n":
                data = data[1:]
        if b"\r" in data:
            self._cr = data[-1:] == b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        buf += data
        pos, start = 0, self._scan
        while (end := buf.find(b"\n\n", start)) >= 0:
            event = bytes(buf[pos:end])
            pos = start = end + 2
            if event:
                self._event(event, t)
        if pos:
            del buf[:pos]
        self._scan = max(len(buf) - 1, 0)
        if len(buf) > MAX_EVENT_BYTES:
            raise SSEError(f"an SSE event grew past {MAX_EVENT_BYTES >> 20} MiB without its blank line")

    def close(self, t: float) -> None:
        """End of body: a complete final event without its blank line still counts."""
        rest = bytes(self._buf).strip()
        self._buf.clear()
        self._scan = 0
        if rest:
            self._event(rest, t)

    def _event(self, event: bytes, t: float) -> None:
        data = _data(event)
        if data is None:  # comment-only / keep-alive event
            self.keepalives += 1
            return
        if self.done:
            return
        self.t_last = t
        self.events += 1
        if data == b"[DONE]":
            self.done = True
            return
        try:
            chunk = _decode_chunk(data)
        except msgspec.DecodeError as e:  # ValidationError too: a wrong type or an out-of-range count
            raise SSEError(f"malformed SSE data {data[:60]!r}: {e}") from None
        if chunk.error is not None:
            msg = chunk.error.get("message", chunk.error) if isinstance(chunk.error, dict) else chunk.error
            raise SSEError(f"server error event: {str(msg)[:200]}")
        self._count(chunk, t)

    def _count(self, chunk: _Chunk, t: float) -> None:
        choices = chunk.choices or ()
        n = 0
        answered = thought = False
        for choice in choices:
            d = choice.delta   # (answer text, reasoning text), inline: this runs for every chunk
            answer, thinking = (choice.text, None) if d is None else (d.content or choice.text,
                                                                      d.reasoning_content or d.reasoning)
            n += _choice_tokens(choice, answer, thinking)
            answered = answered or bool(answer)
            thought = thought or bool(thinking)
            if self.answer_text is not None and self.reasoning_text is not None:
                if answer:
                    self.answer_text.append(answer)
                if thinking:
                    self.reasoning_text.append(thinking)
            if choice.finish_reason is not None:
                self.finished = True
        usage = chunk.usage
        if usage is not None:
            if usage.completion_tokens is not None:
                if choices:
                    # Per-chunk cumulative usage: the increase is exact for this chunk.
                    n = usage.completion_tokens - self._cum
                    self._cum = usage.completion_tokens
                    self.count_source = "usage"
                self.usage_completion = usage.completion_tokens
            if usage.prompt_tokens is not None:
                self.usage_prompt = usage.prompt_tokens
            details = usage.prompt_tokens_details
            if details is not None and details.cached_tokens is not None:
                self.cached_tokens = details.cached_tokens
            out = usage.completion_tokens_details
            if out is not None and out.reasoning_tokens is not None:
                self.usage_reasoning = out.reasoning_tokens
        if answered or thought:
            self._thinking = thought and not answered
        if n > 0:
            self.times.append(t)
            self.counts.append(n)
            if answered:
                self.reasoning += n - 1 if thought else 0
            elif self._thinking:
                self.reasoning += n
            if self.t_first_content is None and answered:   # a chunk without text may still be reasoning
                self.t_first_content = t
