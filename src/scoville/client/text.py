"""Text prompts for the chat API from the workload's token ids.

With a local tokenizer (``--tokenizer PATH`` to a ``tokenizer.json`` or a folder
holding one; needs the optional ``tokenizers`` package) the ids are decoded
into text and the prompt's length is the tokenizer's count of that text.
Without one, each id maps to a word from a fixed list of short common English
words, which nearly every LLM tokenizer encodes as one token each (after a
space), and the length is the spec's count, marked as an estimate. Either way
the server's usage field, when it reports one, replaces the count (see
``request.finish``), and the record says which source was used.
"""

from __future__ import annotations

from pathlib import Path

from scoville.client.errors import ClientError

_WORDS = (
    "the of and to in is for on that with as was by at from it be this are or an have not which but all "
    "they were one had can there their more when will would been has if some out so about what up into "
    "time them only other new then than these two may first any like now my such make over our even most "
    "me state after also made many did well way down should because long where each just see much how "
    "before good through year must back work still take people world life know water three place same "
    "under last never while might great old small day both off year found part high left line end game "
    "city house light night side order hand point few week kind case head group home room book word"
).split()


class PromptText:
    """Renders token ids as prompt text and counts its tokens."""

    def __init__(self, tokenizer: str | None, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self._tok = _load_tokenizer(tokenizer) if tokenizer else None

    def render(self, ids: list[int]) -> tuple[str, int, str]:
        """(text, input-token count, count source: "tokenizer" or "estimate")."""
        if self._tok is not None:
            text = self._tok.decode(ids)
            return text, len(self._tok.encode(text, add_special_tokens=False).ids), "tokenizer"
        n = len(_WORDS)
        return " ".join(_WORDS[i % n] for i in ids), len(ids), "estimate"


def _load_tokenizer(path: str):  # -> tokenizers.Tokenizer
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ClientError("--tokenizer needs the 'tokenizers' package: pip install tokenizers") from None
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise ClientError(f"no tokenizer at {path}; pass a tokenizer.json file or a folder holding one")
    try:
        return Tokenizer.from_file(str(p))
    except Exception as e:  # the tokenizers package raises bare Exceptions on bad files
        raise ClientError(f"{p}: not a tokenizer.json the tokenizers package can read ({e})") from None
