"""Token counts by the user's own tokenizer (``--tokenizer``), kept beside the server's to check them.

A server's ``usage`` is what every metric counts (see ``request.finish``), so a
server that counts differently from the model it claims to serve (another
tokenizer, a chat template it does not admit to, tokens it streams but does not
count) skews every per-token figure without a trace. With a local tokenizer the
client counts the prompt it sent and the text it received and records both
counts beside the server's; ``scoville.token_metrics`` reports per point how
often and by how much they differ.

The text is only kept (and encoded once, when the request ends) when a
tokenizer is given: the common path stays free of it.
"""

from __future__ import annotations

from typing import Any

from scoville.client.text import load_tokenizer


class LocalCounter:
    """Counts text with a ``tokenizers.Tokenizer`` (special tokens not added: the stream carries none)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer

    @classmethod
    def load(cls, path: str) -> LocalCounter:
        """From a ``tokenizer.json`` or a folder holding one; ClientError naming the fix when it cannot."""
        return cls(load_tokenizer(path))

    def count(self, pieces: list[str]) -> int:
        """Tokens of the streamed pieces joined (a piece boundary is no token boundary)."""
        if not pieces:
            return 0
        return len(self._tok.encode("".join(pieces), add_special_tokens=False).ids)
