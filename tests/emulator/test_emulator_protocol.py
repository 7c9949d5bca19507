"""Request validation: precise 400s for what the emulator cannot honour, acceptance of what only affects sampling."""

import pytest

from scoville.emulator.protocol import APIError, parse


def ok(body, chat=False):
    return parse(body, chat=chat)


def bad(body, chat=False) -> APIError:
    with pytest.raises(APIError) as e:
        parse(body, chat=chat)
    assert e.value.status == 400
    return e.value


def test_completion_fields_are_read():
    r = ok({"model": "m", "prompt": [5, 6, 7], "max_tokens": 9, "min_tokens": 3, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "temperature": 0, "top_p": 1.0, "seed": 4})
    assert (r.prompt_ids, r.max_tokens, r.min_tokens, r.ignore_eos, r.stream, r.include_usage,
            r.continuous_usage, r.seed) == ([5, 6, 7], 9, 3, True, True, True, True, 4)
    assert ok({"model": "m", "prompt": ["hello"]}).prompt_text == "hello"
    assert ok({"model": "m", "prompt": [[1, 2]]}).prompt_ids == [1, 2]


def test_chat_messages_and_max_completion_tokens():
    r = ok({"model": "m", "messages": [{"role": "system", "content": "be brief"},
                                       {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "max_completion_tokens": 5, "max_tokens": 99}, chat=True)
    assert r.messages == [("system", "be brief"), ("user", "hi")] and r.max_tokens == 5


@pytest.mark.parametrize("body, param, words", [
    ({"model": "m", "prompt": "x", "frobnicate": 1}, "frobnicate", "unknown field 'frobnicate'"),
    ({"prompt": "x"}, "model", "'model' is required"),
    ({"model": "m", "prompt": "x", "n": 2}, "n", "n=2 is not supported"),
    ({"model": "m", "prompt": "x", "max_tokens": 0}, "max_tokens", "must be >= 1"),
    ({"model": "m", "prompt": "x", "max_tokens": "5"}, "max_tokens", "must be an integer"),
    ({"model": "m", "prompt": "x", "max_tokens": 2, "min_tokens": 3}, "min_tokens", "exceeds max_tokens"),
    ({"model": "m", "prompt": "x", "stream_options": {"include_usage": True}}, "stream_options",
     "only allowed when 'stream' is true"),
    ({"model": "m", "prompt": "x", "stream": True, "stream_options": {"bogus": 1}}, "stream_options",
     "stream_options.bogus"),
    ({"model": "m", "prompt": ["a", "b"]}, "prompt", "batched prompts"),
    ({"model": "m", "prompt": []}, "prompt", "'prompt' is required"),
    ({"model": "m", "prompt": "x", "logprobs": 2}, "logprobs", "logprobs"),
    ({"model": "m", "prompt": "x", "ignore_eos": "yes"}, "ignore_eos", "true or false"),
])
def test_rejections_name_the_field(body, param, words):
    e = bad(body)
    assert e.param == param and words in e.message
    assert e.body()["error"]["type"] == "invalid_request_error"


def test_chat_rejections():
    assert "messages" in bad({"model": "m", "messages": []}, chat=True).message
    assert "text content parts" in bad({"model": "m", "messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, chat=True).message
    both = {"model": "m", "prompt": "x", "messages": [{"role": "user", "content": "a"}]}
    assert bad(both, chat=True).param == "prompt"
    assert "JSON object" in bad([1, 2]).message
