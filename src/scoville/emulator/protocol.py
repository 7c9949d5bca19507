"""OpenAI request bodies -> one validated generation request, and the OpenAI error shape.

Validation is strict where a silent fallback would mislead a benchmark (an
unknown field, ``n > 1``, logprobs the emulator cannot produce, a wrong type)
and lenient where the field only changes *what* a real model would sample,
not *how long* it takes (temperature, top_p, penalties, stop strings...): those
are accepted and have no effect, as sampling has no cost in the engine's model.
Every rejection names the field and says what to send instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

# Fields accepted and ignored: they change what is sampled, not how long it takes.
_SAMPLING = {
    "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
    "length_penalty", "logit_bias", "stop", "stop_token_ids", "include_stop_str_in_output", "user",
    "skip_special_tokens", "spaces_between_special_tokens", "seed", "best_of", "logprobs", "priority",
    "request_id", "truncate_prompt_tokens", "add_special_tokens", "cache_salt", "metadata", "store",
    "service_tier", "response_format", "use_beam_search", "allowed_token_ids", "bad_words", "vllm_xargs",
    "kv_transfer_params", "return_tokens_as_token_ids", "detokenize",
}
_COMMON = _SAMPLING | {
    "model", "stream", "stream_options", "max_tokens", "min_tokens", "ignore_eos", "n", "return_token_ids",
}
COMPLETION_FIELDS = _COMMON | {"prompt", "echo", "suffix", "prompt_logprobs"}
CHAT_FIELDS = _COMMON | {
    "messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
    "chat_template", "chat_template_kwargs", "add_generation_prompt", "continue_final_message", "echo",
    "reasoning_effort", "documents", "mm_processor_kwargs", "modalities",
}
_STREAM_OPTIONS = {"include_usage", "continuous_usage_stats"}


class APIError(Exception):
    """An error answered in the OpenAI shape: ``{"error": {message, type, param, code}}``."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass
class GenRequest:
    """What the emulator needs from either endpoint, after validation."""

    chat: bool
    model: str
    prompt_ids: list[int] | None = None      # completions with token ids
    prompt_text: str | None = None           # completions with text
    messages: list[tuple[str, str]] = field(default_factory=list)
    add_generation_prompt: bool = True
    stream: bool = False
    include_usage: bool = False
    continuous_usage: bool = False
    max_tokens: int | None = None
    min_tokens: int = 0
    ignore_eos: bool = False
    seed: int = 0
    return_token_ids: bool = False


def _bad(message: str, param: str | None = None) -> APIError:
    return APIError(400, message, param=param)


def _int(body: dict[str, Any], name: str, *, minimum: int) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(f"'{name}' must be an integer (got {v!r})", name)
    if v < minimum:
        raise _bad(f"'{name}' must be >= {minimum} (got {v})", name)
    return v


def _bool(body: dict[str, Any], name: str, default: bool = False) -> bool:
    v = body.get(name, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _bad(f"'{name}' must be true or false (got {v!r})", name)
    return v


def _text_of(content: Any, where: str) -> str:
    """Message content: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _bad(f"{where}: only text content parts ({{'type': 'text', 'text': ...}}) are supported",
                           "messages")
            texts.append(part["text"])
        return "\n".join(texts)
    raise _bad(f"{where}: 'content' must be a string or a list of text parts", "messages")


def parse(body: Any, *, chat: bool) -> GenRequest:
    """Validate an OpenAI completions (``chat=False``) or chat-completions body."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    allowed = CHAT_FIELDS if chat else COMPLETION_FIELDS
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise _bad(f"unknown field '{unknown[0]}' in the request body; remove it "
                   f"(see the OpenAI {'chat ' if chat else ''}completions API for accepted fields)", unknown[0])
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required: a string naming a served model (see GET /v1/models)", "model")
    req = GenRequest(chat=chat, model=model)

    n = _int(body, "n", minimum=1)
    if n not in (None, 1):
        raise _bad(f"n={n} is not supported by the emulator; send n=1 (one choice per request)", "n")
    best_of = _int(body, "best_of", minimum=1)
    if best_of not in (None, 1):
        raise _bad(f"best_of={best_of} is not supported by the emulator; omit it or send 1", "best_of")
    if body.get("logprobs") not in (None, False, 0):
        raise _bad("logprobs are not produced by the emulator; omit 'logprobs'", "logprobs")
    if body.get("echo"):
        raise _bad("echo=true is not supported by the emulator; omit 'echo'", "echo")
    for name in ("prompt_logprobs", "top_logprobs", "suffix", "tools"):
        if body.get(name) not in (None, [], 0):
            raise _bad(f"'{name}' is not supported by the emulator; omit it", name)

    req.stream = _bool(body, "stream")
    opts = body.get("stream_options")
    if opts is not None:
        if not isinstance(opts, dict):
            raise _bad("'stream_options' must be an object, e.g. {\"include_usage\": true}", "stream_options")
        if not req.stream:
            raise _bad("'stream_options' is only allowed when 'stream' is true", "stream_options")
        extra = sorted(set(opts) - _STREAM_OPTIONS)
        if extra:
            raise _bad(f"unknown field 'stream_options.{extra[0]}'; accepted: include_usage, continuous_usage_stats",
                       "stream_options")
        req.include_usage = _bool(opts, "include_usage")
        req.continuous_usage = _bool(opts, "continuous_usage_stats")

    max_tokens = _int(body, "max_tokens", minimum=1)
    if chat:
        mct = _int(body, "max_completion_tokens", minimum=1)
        max_tokens = mct if mct is not None else max_tokens
    req.max_tokens = max_tokens
    req.min_tokens = _int(body, "min_tokens", minimum=0) or 0
    if max_tokens is not None and req.min_tokens > max_tokens:
        raise _bad(f"min_tokens={req.min_tokens} exceeds max_tokens={max_tokens}; lower min_tokens", "min_tokens")
    req.ignore_eos = _bool(body, "ignore_eos")
    req.return_token_ids = _bool(body, "return_token_ids")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise _bad(f"'seed' must be an integer (got {seed!r})", "seed")
    req.seed = seed or 0

    if chat:
        _parse_messages(body, req)
    else:
        _parse_prompt(body, req)
    return req


def _parse_prompt(body: dict[str, Any], req: GenRequest) -> None:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]            # a batch of one prompt
    if isinstance(prompt, str):
        req.prompt_text = prompt
    elif isinstance(prompt, list) and prompt and int_list(prompt):
        req.prompt_ids = prompt
    elif isinstance(prompt, list) and len(prompt) > 1 and all(isinstance(p, (str, list)) for p in prompt):
        raise _bad("batched prompts are not supported by the emulator; send one prompt per request", "prompt")
    else:
        raise _bad("'prompt' is required: a string or a non-empty list of token ids", "prompt")


def int_list(values: list[Any]) -> bool:
    """All plain ints (not bools)? msgspec checks in C: an 8k-token prompt in ~30 µs, not ~500."""
    try:
        msgspec.convert(values, list[int], strict=True)
    except msgspec.ValidationError:
        return False
    return True


def _parse_messages(body: dict[str, Any], req: GenRequest) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' is required: a non-empty list of {'role': ..., 'content': ...}", "messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"messages[{i}] must be an object with a string 'role'", "messages")
        req.messages.append((m["role"], _text_of(m.get("content"), f"messages[{i}]")))
    req.add_generation_prompt = _bool(body, "add_generation_prompt", True)
