"""Deterministic prompt tokens from a RequestSpec.

Tokens are derived from the spec alone (block hashes, then a per-request seed),
so the same spec always yields the same prompt, two requests sharing leading
block hashes share exactly those leading tokens, and nothing has to be stored.

A non-zero ``salt`` changes every token while keeping which prompts share
which blocks: a resumed attempt at a point sends prompts no server has cached
from the attempt before it, with the same lengths and the same prefix structure.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from scoville.workload.spec import RequestSpec

# Stay clear of special tokens at both ends of typical vocabularies.
_LOW = 1000


def _token_range(vocab_size: int) -> tuple[int, int]:
    high = max(_LOW + 1, vocab_size - 1000)
    return _LOW, high


def _seed(*parts: int, salt: int) -> list[int]:
    return [*parts, salt] if salt else list(parts)


@lru_cache(maxsize=16384)
def block_tokens(block_hash: int, block_size: int, vocab_size: int, salt: int = 0) -> np.ndarray:
    """One prefix block's tokens (read-only). Cached: a conversation resends its whole history every turn, and
    seeding a generator per block was most of the time spent building long prompts (16,384 blocks of 64
    tokens hold 8 MB)."""
    lo, hi = _token_range(vocab_size)
    tokens = np.random.default_rng(_seed(0xB10C, block_hash & 0xFFFFFFFFFFFF, salt=salt)).integers(lo, hi,
                                                                                                    size=block_size)
    tokens.setflags(write=False)
    return tokens


def prompt_token_ids(spec: RequestSpec, vocab_size: int = 32000, salt: int = 0) -> list[int]:
    """The prompt of ``spec`` as exactly ``spec.input_tokens`` token ids."""
    lo, hi = _token_range(vocab_size)
    parts = [block_tokens(h, spec.block_size, vocab_size, salt) for h in spec.block_hashes]
    prefix = np.concatenate(parts)[: spec.input_tokens] if parts else np.empty(0, dtype=np.int64)
    rest = spec.input_tokens - len(prefix)
    tail = np.random.default_rng(_seed(0x7A11, spec.prompt_seed, salt=salt)).integers(lo, hi, size=max(rest, 0))
    return np.concatenate([prefix, tail]).astype(np.int64).tolist()
