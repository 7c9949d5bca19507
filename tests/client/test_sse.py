"""The SSE parser on byte streams cut at every awkward place a transport can cut them."""

from __future__ import annotations

import json

import pytest

from scoville.client.sse import SSEError, StreamParser


def ev(obj) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def text_chunk(text: str, finish: str | None = None, **extra) -> dict:
    return {"choices": [dict({"index": 0, "text": text, "finish_reason": finish}, **extra)]}


STREAM = (ev(text_chunk("a")) + b": keep-alive\n\n" + ev(text_chunk("")) + ev(text_chunk("b c", token_ids=[5, 6]))
          + ev(text_chunk("d", "length"))
          + ev({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4,
                                         "prompt_tokens_details": {"cached_tokens": 3}}})
          + ev("[DONE]"))


def test_every_split_point_gives_the_same_result():
    whole = StreamParser()
    whole.feed(STREAM, 1.0)
    assert whole.counts == [1, 2, 1]
    assert (whole.usage_completion, whole.usage_prompt, whole.cached_tokens) == (4, 7, 3)
    assert whole.done and whole.finished and whole.keepalives == 1
    for cut in range(1, len(STREAM)):
        p = StreamParser()
        p.feed(STREAM[:cut], 1.0)
        p.feed(STREAM[cut:], 2.0)
        assert p.counts == whole.counts, cut
        assert p.usage_completion == 4 and p.done


def test_each_event_is_stamped_with_the_read_that_completed_it():
    p = StreamParser()
    a, b = ev(text_chunk("x")), ev(text_chunk("y"))
    p.feed(a + b[:5], 1.0)     # first event complete, second only begun
    p.feed(b[5:], 2.5)
    assert p.times == [1.0, 2.5]


def test_crlf_line_endings_and_multiline_data():
    p = StreamParser()
    p.feed(b'data: {"choices": [{"text": "hi"}]}\r\n\r\ndata: [DONE]\r\n\r\n', 0.5)
    assert p.counts == [1] and p.done


def test_cumulative_usage_per_chunk_gives_exact_multi_token_counts():
    p = StreamParser()
    for cum, text in ((1, "a"), (4, "bcd"), (4, ""), (6, "ef")):
        p.feed(ev(dict(text_chunk(text), usage={"prompt_tokens": 9, "completion_tokens": cum})), float(cum))
    assert p.counts == [1, 3, 2] and p.times == [1.0, 4.0, 6.0]
    assert p.count_source == "usage" and p.usage_completion == 6


def test_chat_deltas_role_only_first_chunk_carries_no_token():
    p = StreamParser()
    p.feed(ev({"choices": [{"delta": {"role": "assistant", "content": ""}}]}), 1.0)
    p.feed(ev({"choices": [{"delta": {"content": "Hi"}}]}), 2.0)
    p.feed(ev({"choices": [{"delta": {"reasoning_content": "hmm"}}]}), 3.0)
    assert p.times == [2.0, 3.0]


def test_close_accepts_a_final_event_without_blank_line():
    p = StreamParser()
    p.feed(ev(text_chunk("a", "stop")) + b"data: [DONE]", 1.0)
    assert not p.done
    p.close(1.5)
    assert p.done


@pytest.mark.parametrize("bad, match", [
    (b"data: {not json\n\n", "malformed SSE data"),
    (ev({"error": {"message": "out of memory"}}), "out of memory"),
    (ev({"choices": [], "usage": {"prompt_tokens_details": {"cached_tokens": "lots"}}}),
     r"malformed SSE data .*cached_tokens"),
    (ev({"choices": [], "usage": {"completion_tokens": 2**64 - 1}}), r"malformed SSE data .*completion_tokens"),
    (ev({"choices": [], "usage": {"prompt_tokens": -3}}), r"malformed SSE data .*prompt_tokens"),
])
def test_malformed_input_and_error_events_raise(bad, match):
    p = StreamParser()
    with pytest.raises(SSEError, match=match):
        p.feed(ev(text_chunk("ok")) + bad, 1.0)


# --- where the SSE specification is lenient, so is the parser ------------------------------------


@pytest.mark.parametrize("ending", [b"\r", b"\r\n", b"\n"], ids=["CR", "CRLF", "LF"])
def test_every_line_ending_the_spec_allows_at_every_split(ending):
    stream = STREAM.replace(b"\n", ending)
    for cut in range(1, len(stream)):
        p = StreamParser()
        p.feed(stream[:cut], 1.0)
        p.feed(stream[cut:], 2.0)
        assert p.counts == [1, 2, 1] and p.done and p.keepalives == 1, cut


def test_unknown_fields_and_a_second_done_are_ignored():
    p = StreamParser()
    p.feed(b"event: completion\nid: 7\nnonsense\n" + ev(text_chunk("a", "stop"))[:-1] + b"\n"
           + ev("[DONE]") + ev("[DONE]") + ev(text_chunk("late")), 1.0)
    assert p.counts == [1] and p.done and p.events == 2


def test_a_usage_chunk_with_null_choices_is_a_usage_chunk():
    p = StreamParser()
    p.feed(ev(text_chunk("a", "stop")) + ev({"choices": None, "usage": {"prompt_tokens": 5, "completion_tokens": 1}})
           + ev("[DONE]"), 1.0)
    assert p.counts == [1] and (p.usage_prompt, p.usage_completion) == (5, 1) and p.done


def test_an_event_without_end_is_scanned_once_and_capped():
    """8 MB without a blank line, in 1 KiB reads: linear work (was a rescan per read), then refused past the cap."""
    import time

    from scoville.client.sse import MAX_EVENT_BYTES

    p = StreamParser()
    piece = b"x" * 1024
    cpu = time.process_time()
    for _ in range(8 * 1024):
        p.feed(piece, 1.0)
    assert time.process_time() - cpu < 2.0  # quadratic scanning took minutes here; linear takes milliseconds
    with pytest.raises(SSEError, match="without its blank line"):
        for _ in range(MAX_EVENT_BYTES // len(piece)):
            p.feed(piece, 1.0)


# --- reasoning models: thinking and answer apart -------------------------------------------------------

def delta(**fields) -> bytes:
    return ev({"choices": [{"index": 0, "delta": fields, "finish_reason": None}]})


# Two reasoning chunks (both field names servers use), the turn to answering in one chunk, two answer
# chunks, a usage event that gives no reasoning count.
THINKING = (delta(role="assistant", content="") + delta(reasoning_content="Let me")
            + delta(reasoning=" think") + delta(reasoning_content=".", content="The")
            + delta(content=" answer") + ev({"choices": [{"delta": {"content": "."}, "finish_reason": "stop"}]})
            + ev({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 6}}) + ev("[DONE]"))


def test_reasoning_and_answer_chunks_are_told_apart():
    p = StreamParser()
    for i, event in enumerate(THINKING.split(b"\n\n")[:-1]):
        p.feed(event + b"\n\n", float(i))
    # The mixed chunk counts two tokens (one text piece each): one reasoning, one answer.
    assert p.times == [1.0, 2.0, 3.0, 4.0, 5.0] and p.counts == [1, 1, 2, 1, 1]
    assert p.reasoning == 3 and p.t_first_content == 3.0
    assert p.usage_reasoning is None and p.usage_completion == 6


def test_reasoning_is_split_the_same_at_every_cut():
    whole = StreamParser()
    whole.feed(THINKING, 1.0)
    for cut in range(1, len(THINKING)):
        p = StreamParser()
        p.feed(THINKING[:cut], 1.0)
        p.feed(THINKING[cut:], 2.0)
        assert (p.counts, p.reasoning) == (whole.counts, whole.reasoning) == ([1, 1, 2, 1, 1], 3), cut


def test_the_servers_reasoning_count_is_read_from_usage():
    p = StreamParser()
    p.feed(delta(reasoning_content="hmm") + delta(content="ok")
           + ev({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 40,
                                          "completion_tokens_details": {"reasoning_tokens": 38}}}), 1.0)
    assert p.usage_reasoning == 38 and p.reasoning == 1


def test_per_chunk_usage_gives_each_part_its_exact_tokens():
    """With continuous usage a chunk's count is the usage increase; a textless chunk stays in its part."""
    p = StreamParser()
    steps = [(3, {"reasoning_content": "abc"}), (5, {"reasoning_content": ""}), (7, {"reasoning_content": "d",
                                                                                     "content": "e"}),
             (9, {"content": "fg"})]
    for t, (cum, fields) in enumerate(steps):
        p.feed(ev({"choices": [{"delta": fields}], "usage": {"prompt_tokens": 1, "completion_tokens": cum}}), float(t))
    assert p.counts == [3, 2, 2, 2]
    # 3 + 2 (the textless chunk follows reasoning) + 1 of the mixed chunk's 2; the mixed chunk is the first answer.
    assert p.reasoning == 6 and p.t_first_content == 2.0


def test_a_plain_model_has_no_reasoning_and_answers_with_its_first_token():
    p = StreamParser()
    p.feed(STREAM, 1.0)
    assert p.reasoning == 0 and p.t_first_content == p.times[0]


def test_text_is_kept_only_when_asked():
    assert StreamParser().answer_text is None
    p = StreamParser(keep_text=True)
    p.feed(THINKING, 1.0)
    assert "".join(p.reasoning_text) == "Let me think." and "".join(p.answer_text) == "The answer."
    q = StreamParser(keep_text=True)
    q.feed(STREAM, 1.0)
    assert "".join(q.answer_text) == "ab cd" and q.reasoning_text == []
