"""The local tokenizer: what /tokenize, /detokenize and text prompts rely on."""

import pytest

from scoville.emulator.tokenizer import BOS, END_HEADER, EOT, NUM_SPECIAL, START_HEADER, LocalTokenizer, word, word_id
from scoville.workload.prompts import prompt_token_ids
from scoville.workload.spec import RequestSpec


def test_decode_then_encode_round_trips_every_non_special_id():
    tok = LocalTokenizer(128256)
    ids = list(range(NUM_SPECIAL, 3000)) + list(range(128256 - 500, 128256))
    assert tok.encode(tok.decode(ids)) == ids
    assert tok.encode(tok.decode(ids).lstrip()) == ids


def test_workload_prompts_keep_their_length_through_text():
    """A client may send a workload prompt as text; the server must count exactly input_tokens."""
    tok = LocalTokenizer(32000)
    spec = RequestSpec(request_id="r", input_tokens=777, output_tokens=1, prompt_seed=42)
    ids = prompt_token_ids(spec, vocab_size=32000)
    assert len(tok.encode(tok.decode(ids))) == 777


def test_words_are_unique_and_invertible():
    words = [word(i) for i in range(1, 20000)]
    assert len(set(words)) == len(words)
    assert all(word_id(w) == i for i, w in enumerate(words, start=1))
    assert word_id("xyz") is None and word_id("") is None and word_id("Ba") is None


def test_plain_text_counts_about_four_characters_per_token_and_is_deterministic():
    tok = LocalTokenizer(32000)
    text = "The quick brown fox jumps over the lazy dog, then naps in the afternoon sun."
    ids = tok.encode(text)
    assert ids == tok.encode(text)
    assert len(text) / 6 < len(ids) < len(text) / 2
    assert all(NUM_SPECIAL <= t < 32000 for t in ids)
    assert tok.encode("") == []


def test_chat_template_frames_each_message():
    tok = LocalTokenizer(32000)
    ids = tok.encode_chat([("user", "hi")], add_generation_prompt=True)
    assert ids[0] == BOS
    assert ids.count(START_HEADER) == 2 and ids.count(END_HEADER) == 2 and ids.count(EOT) == 1
    assert len(tok.encode_chat([("user", "hi")], add_generation_prompt=False)) < len(ids)


def test_tiny_vocabulary_is_refused():
    with pytest.raises(ValueError):
        LocalTokenizer(10)


def test_repeated_words_encode_the_same_from_the_cache():
    tok = LocalTokenizer(32000)
    a, b = word(1000), word(1001)
    text = f"{a} {b} {a}  {b}\t{a}"
    first = tok.encode(text)
    assert tok.encode(text) == first
    assert first[:3] == [1000, 1001, 1000]               # a word's id does not depend on where it stands
    assert first[3] != 1001 and first[4] != 1000          # after two spaces or a tab it is hashed, as before
