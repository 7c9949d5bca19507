"""Text prompts for the chat API from the workload's token ids.

With a local tokenizer (``--tokenizer PATH`` to a ``tokenizer.json`` or a folder
holding one; needs the optional ``tokenizers`` package) the ids are decoded
into text and the text is fitted to the requested length: random ids decoded
and encoded again come back 10-25 % longer (neighbouring pieces merge
differently), so the re-encoded ids are cut to the length and decoded again
until the text encodes to exactly that many tokens. Without one, each id maps
to a word from a list of short common English words, one token each after a
space; when the server has vLLM's ``/tokenize``, the probe keeps only the words
its tokenizer reads as one token (``ClientConfig.prompt_words``), otherwise the
length is the spec's count, marked as an estimate. Either way the server's
usage field, when it reports one, replaces the count (see ``request.finish``),
and the record keeps the requested count beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scoville.client.errors import ClientError

_WORD_TEXT = (
    "the of and to in is for on that with as was by at from it be this are or an have not which but all "
    "they were one had can there their more when will would been has if some out so about what up into "
    "time them only other new then than these two may first any like now my such make over our even most "
    "me state after also made many did well way down should because long where each just see much how "
    "before good through year must back work still take people world life know water three place same "
    "under last never while might great old small day both off year found part high left line end game "
    "city house light night side order hand point few week kind case head group home room book word"
)
WORDS = tuple(_WORD_TEXT.split())


# Decode-encode rounds when fitting text to a length; one is nearly always enough.
_FIT_ROUNDS = 4


class PromptText:
    """Renders token ids as prompt text of as many tokens, and counts them.

    ``words``: the word list of the no-tokenizer path; ``checked`` says a
    server's tokenizer confirmed each is one token (the count is then exact
    up to the first word, which has no space before it).
    """

    def __init__(self, tokenizer: str | None, vocab_size: int, words: tuple[str, ...] = (),
                 checked: bool = False) -> None:
        self.vocab_size = vocab_size
        self._tok = load_tokenizer(tokenizer) if tokenizer else None
        self._words = words or WORDS
        self._source = "tokenize" if checked and words else "estimate"

    @property
    def tokenizer(self) -> Any:
        """The loaded ``tokenizers.Tokenizer`` (None without ``--tokenizer``), shared with the count check."""
        return self._tok

    def render(self, ids: list[int]) -> tuple[str, int, str]:
        """(text, input-token count, count source: "tokenizer", "tokenize" or "estimate")."""
        if self._tok is not None:
            return self._fit(ids)
        n = len(self._words)
        return " ".join(self._words[i % n] for i in ids), len(ids), self._source

    def _fit(self, ids: list[int]) -> tuple[str, int, str]:
        """Text that the tokenizer encodes to ``len(ids)`` tokens (or as near as a few rounds get)."""
        assert self._tok is not None
        want = len(ids)
        text = self._tok.decode(ids)
        for _ in range(_FIT_ROUNDS):
            got = self._tok.encode(text, add_special_tokens=False).ids
            if len(got) == want:
                return text, want, "tokenizer"
            # Cut the re-encoded ids to the length (or top them up with the prompt's own) and decode again.
            ids = got[:want] if len(got) > want else got + ids[len(got):want]
            text = self._tok.decode(ids)
        return text, len(self._tok.encode(text, add_special_tokens=False).ids), "tokenizer"


def load_tokenizer(path: str) -> Any:  # a tokenizers.Tokenizer (the package is optional)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ClientError("--tokenizer needs the 'tokenizers' package: pip install 'scoville[tokenizer]'") from None
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise ClientError(f"no tokenizer at {path}; pass a tokenizer.json file or a folder holding one")
    try:
        return Tokenizer.from_file(str(p))
    except Exception as e:  # the tokenizers package raises bare Exceptions on bad files
        raise ClientError(f"{p}: not a tokenizer.json the tokenizers package can read ({e})") from None
