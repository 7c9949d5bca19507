"""What one request asks for, independent of how it is sent or simulated.

Every workload — single-turn synthetic, multi-turn session, agentic tree or
trace replay — is a list of *sessions*, each an ordered list of requests. A
single-turn scenario is sessions of one request each. Drivers (client, simulator)
run a session's turns in order, waiting ``think_s`` after the previous turn
finished; concurrency counts concurrent sessions. That one shape lets the
closed-loop driver, the simulator and the emulator handle every workload alike.
"""

from __future__ import annotations

import msgspec

# The most tokens one request may ask for, in or out. No model's window comes near it, and it
# keeps a typo or a corrupt trace (1e13 tokens) a one-line error instead of a terabyte allocation.
MAX_REQUEST_TOKENS = 1 << 24


class RequestSpec(msgspec.Struct, kw_only=True, frozen=True):
    request_id: str
    input_tokens: int
    output_tokens: int
    session_id: str | None = None
    turn: int = 0
    think_s: float = 0.0
    # Prefix structure: hash id of each ``block_size``-token block of the prompt.
    # Equal ids mean identical tokens, so prefix caches (real or simulated) hit.
    block_hashes: tuple[int, ...] = ()
    block_size: int = 0
    # Seed for the tokens of the prompt beyond its hashed blocks (unique per request).
    prompt_seed: int = 0
    # Sent but excluded from metrics (e.g. the request that primes a trace replay's prefix
    # cache); drivers set RequestRecord.warmup when this or the point's warm-up count says so.
    warmup: bool = False


class Session(msgspec.Struct, kw_only=True, frozen=True):
    session_id: str
    requests: tuple[RequestSpec, ...]
