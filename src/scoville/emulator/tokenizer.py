"""A small deterministic local tokenizer, so the emulator needs no model files.

The emulator must count prompt tokens of text requests, answer ``/tokenize``
and ``/detokenize``, and turn generated token ids into text, all without a
real vocabulary. This tokenizer is built for that and nothing more:

* **Decoding.** Ids below ``NUM_SPECIAL`` are special tokens and decode to
  nothing. Every other id ``t`` decodes to a space followed by a pronounceable
  word spelled in bijective base 100 with consonant-vowel syllables (``t=16`` is
  " bu", larger ids get longer words). Words are unique per id.
* **Encoding.** Text is split into whitespace-led pieces (``\\s*\\S+``). A piece
  that is exactly one of those words (after one space, or none at the start of
  the text) encodes to its id, so ``encode(decode(ids)) == ids`` for every
  non-special id. Any other piece's word is cut into 4-character chunks (its
  leading whitespace riding on the first), each hashed (CRC-32) to one id: a
  word of up to four characters is one token, about four characters per token
  beyond that, the usual rule of thumb for English BPE vocabularies. Hashing loses the text, which is fine here: the
  emulated model never needs to read it.
* **Chat.** Messages use a Llama-3-shaped template: ``BOS``, then for each
  message ``START role END content EOT``, and ``START assistant END`` when a
  generation prompt is asked for.
"""

from __future__ import annotations

import re
import zlib
from functools import lru_cache

BOS, START_HEADER, END_HEADER, EOT = 1, 2, 3, 4
NUM_SPECIAL = 16
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwxyz" for v in "aeiou"]
_SYLLABLE_INDEX = {s: i for i, s in enumerate(_SYLLABLES)}
_BASE = len(_SYLLABLES)
_PIECE = re.compile(r"\s*\S+")
_CHUNK = 4
_PIECE_CACHE = 1 << 18  # pieces remembered by a tokenizer before it starts over


@lru_cache(maxsize=1 << 18)
def word(token_id: int) -> str:
    """The word of a non-special id, without its leading space (bijective base-100 syllables)."""
    n, parts = token_id, []
    while n > 0:
        n -= 1
        parts.append(_SYLLABLES[n % _BASE])
        n //= _BASE
    return "".join(reversed(parts))


def word_id(text: str) -> int | None:
    """Inverse of :func:`word`; ``None`` when ``text`` is not such a word."""
    if not text or len(text) % 2:
        return None
    n = 0
    for i in range(0, len(text), 2):
        digit = _SYLLABLE_INDEX.get(text[i:i + 2])
        if digit is None:
            return None
        n = n * _BASE + digit + 1
    return n


class LocalTokenizer:
    """Deterministic text <-> token-id mapping over a vocabulary of ``vocab_size`` ids."""

    def __init__(self, vocab_size: int) -> None:
        if vocab_size <= NUM_SPECIAL * 2:
            raise ValueError(f"vocab_size must exceed {NUM_SPECIAL * 2} (got {vocab_size})")
        self.vocab_size = vocab_size
        # Ids of each whitespace-led piece seen (prompts repeat their words): encoding runs on the loop
        # that paces tokens, where 1,024 uncached words cost ~3 ms.
        self._pieces: dict[str, tuple[int, ...]] = {}

    def _hashed(self, chunk: str) -> int:
        return NUM_SPECIAL + zlib.crc32(chunk.encode("utf-8")) % (self.vocab_size - NUM_SPECIAL)

    def _piece_ids(self, piece: str, at_start: bool) -> tuple[int, ...]:
        body = piece.lstrip()
        lead = len(piece) - len(body)
        if lead == 1 and piece[0] == " " or lead == 0 and at_start:
            tid = word_id(body)
            if tid is not None and NUM_SPECIAL <= tid < self.vocab_size:
                return (tid,)
        # The leading whitespace rides on the first chunk, as BPE vocabularies fold it into the word.
        return (self._hashed(piece[:lead + _CHUNK]),
                *(self._hashed(body[i:i + _CHUNK]) for i in range(_CHUNK, len(body), _CHUNK)))

    def encode(self, text: str) -> list[int]:
        pieces = _PIECE.findall(text)
        if not pieces:
            return []
        ids = list(self._piece_ids(pieces[0], True))  # only the first piece can start the text
        cache = self._pieces
        for piece in pieces[1:]:
            got = cache.get(piece)
            if got is None:
                if len(cache) >= _PIECE_CACHE:
                    cache.clear()
                got = cache[piece] = self._piece_ids(piece, False)
            ids.extend(got)
        return ids

    def decode(self, ids: list[int]) -> str:
        return "".join([" " + word(t) for t in ids if t >= NUM_SPECIAL])

    def encode_chat(self, messages: list[tuple[str, str]], add_generation_prompt: bool = True) -> list[int]:
        """Token ids of ``(role, content)`` messages under the Llama-3-shaped template."""
        ids = [BOS]
        for role, content in messages:
            ids.append(START_HEADER)
            ids.extend(self.encode(role))
            ids.append(END_HEADER)
            ids.extend(self.encode(content))
            ids.append(EOT)
        if add_generation_prompt:
            ids.append(START_HEADER)
            ids.extend(self.encode("assistant"))
            ids.append(END_HEADER)
        return ids
