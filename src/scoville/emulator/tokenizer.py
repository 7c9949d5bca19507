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

Encoding runs in the server, on the event loop that paces every stream's
tokens, on text any client may send. So it is linear in the text: trailing
whitespace is cut before the pieces are found (``\\s*\\S+`` backtracks
quadratically through whitespace with nothing after it: 30 KB of trailing
spaces held the loop for 12.8 s), and the text is split in windows of
``_WINDOW`` characters at piece boundaries so a 10 MB prompt is never one
list of millions of pieces. It stops as soon as a prompt is known to be too
long (``limit``), and it proceeds in steps (``text_steps``/``chat_steps``
yield every ``_STEP_PIECES`` pieces, or ``_STEP_IDS`` ids of one long piece)
so the server can let the loop pace tokens between them.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from functools import lru_cache

BOS, START_HEADER, END_HEADER, EOT = 1, 2, 3, 4
NUM_SPECIAL = 16
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwxyz" for v in "aeiou"]
_SYLLABLE_INDEX = {s: i for i, s in enumerate(_SYLLABLES)}
_BASE = len(_SYLLABLES)
_PIECE = re.compile(r"\s*\S+")
_CHUNK = 4
_PIECE_CACHE = 1 << 18  # pieces remembered by a tokenizer before it starts over
_CACHED_CHARS = 64      # longer pieces are neither cached nor looked up as words: they are rare, and may be huge
_WORD_CHARS = 12        # no id below 2**31 has a longer word (5 syllables reach 100**5)
_WINDOW = 1 << 14       # characters of text split into pieces at once
_STEP_PIECES = 128      # pieces between the pauses of a stepwise encoding (~0.4 ms of uncached words)
_STEP_IDS = 512         # ids of one long piece between pauses


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
        if (lead == 1 and piece[0] == " " or lead == 0 and at_start) and len(body) <= _WORD_CHARS:
            tid = word_id(body)
            if tid is not None and NUM_SPECIAL <= tid < self.vocab_size:
                return (tid,)
        # The leading whitespace rides on the first chunk, as BPE vocabularies fold it into the word.
        return (self._hashed(piece[:lead + _CHUNK]),
                *(self._hashed(body[i:i + _CHUNK]) for i in range(_CHUNK, len(body), _CHUNK)))

    def text_steps(self, text: str, ids: list[int], limit: int | None = None) -> Iterator[None]:
        """Append ``text``'s ids to ``ids``, yielding every ``_STEP_PIECES`` pieces (see the module doc).

        Stops once ``ids`` holds more than ``limit`` ids (then not all of the
        text's ids are there). Draining it is ``encode``; the server pauses at
        each yield instead.
        """
        cache, first = self._pieces, True
        for pieces in _windows(text):
            for i in range(0, len(pieces), _STEP_PIECES):
                for piece in pieces[i:i + _STEP_PIECES]:
                    if len(piece) > _CACHED_CHARS:
                        yield from self._long_piece_steps(piece, ids, limit)
                    elif first:  # only the first piece can start the text
                        ids.extend(self._piece_ids(piece, True))
                    else:
                        got = cache.get(piece)
                        if got is None:
                            if len(cache) >= _PIECE_CACHE:
                                cache.clear()
                            got = cache[piece] = self._piece_ids(piece, False)
                        ids.extend(got)
                    first = False
                if limit is not None and len(ids) > limit:
                    return
                yield

    def _long_piece_steps(self, piece: str, ids: list[int], limit: int | None) -> Iterator[None]:
        """Append a long piece's ids (what ``_piece_ids`` gives), pausing every ``_STEP_IDS``, stopping past
        ``limit``."""
        body = piece.lstrip()
        lead = len(piece) - len(body)
        ids.append(self._hashed(piece[:lead + _CHUNK]))
        for start in range(_CHUNK, len(body), _CHUNK * _STEP_IDS):
            if limit is not None and len(ids) > limit:
                return
            stop = min(len(body), start + _CHUNK * _STEP_IDS)
            ids.extend(self._hashed(body[i:i + _CHUNK]) for i in range(start, stop, _CHUNK))
            yield

    def chat_steps(self, messages: list[tuple[str, str]], add_generation_prompt: bool, ids: list[int],
                   limit: int | None = None) -> Iterator[None]:
        """``text_steps`` for ``(role, content)`` messages under the Llama-3-shaped template."""
        ids.append(BOS)
        for role, content in messages:
            ids.append(START_HEADER)
            yield from self.text_steps(role, ids, limit)
            ids.append(END_HEADER)
            yield from self.text_steps(content, ids, limit)
            ids.append(EOT)
            if limit is not None and len(ids) > limit:
                return
        if add_generation_prompt:
            ids.append(START_HEADER)
            yield from self.text_steps("assistant", ids, limit)
            ids.append(END_HEADER)

    def encode(self, text: str, limit: int | None = None) -> list[int]:
        """The ids of ``text`` (with ``limit``: stops once more than ``limit`` are found)."""
        ids: list[int] = []
        for _ in self.text_steps(text, ids, limit):
            pass
        return ids

    def decode(self, ids: list[int]) -> str:
        return "".join([" " + word(t) for t in ids if t >= NUM_SPECIAL])

    def encode_chat(self, messages: list[tuple[str, str]], add_generation_prompt: bool = True,
                    limit: int | None = None) -> list[int]:
        """Token ids of ``(role, content)`` messages under the Llama-3-shaped template."""
        ids: list[int] = []
        for _ in self.chat_steps(messages, add_generation_prompt, ids, limit):
            pass
        return ids


def _windows(text: str) -> Iterator[list[str]]:
    """The whitespace-led pieces of ``text`` (a word with the whitespace before it), a window at a time.

    Trailing whitespace is no piece, and cutting it first keeps ``findall``
    linear: every whitespace run left is followed by a word.
    """
    end, pos = len(text.rstrip()), 0
    while pos < end:
        # the end of the piece under pos + _WINDOW: whitespace follows it (or the text ends)
        m = _PIECE.match(text, pos + _WINDOW, end) if pos + _WINDOW < end else None
        cut = m.end() if m is not None else end
        yield _PIECE.findall(text, pos, cut)
        pos = cut
