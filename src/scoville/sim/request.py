"""Scheduler-side state of one simulated request, shared by the scheduler, the KV manager, the lazy decode
group and the span planner (each advances a different part of it)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np

from scoville.workload.spec import RequestSpec

if TYPE_CHECKING:
    from scoville.sim.scheduler import Instance


def flush(req: Req) -> None:
    """Pack a request's single-step token times into one array chunk (a span or the group appends whole arrays,
    so the per-step lists are closed first to keep the chunks in time order)."""
    req.times.append(np.array(req.pending_times, dtype=np.float64))
    req.counts.append(np.array(req.pending_counts, dtype=np.int64))
    req.pending_times, req.pending_counts = [], []


class Req:
    """Scheduler-side state of one request.

    ``num_tokens`` = prompt + generated tokens; ``computed`` = tokens whose KV is
    in the cache. A decoding request has ``num_tokens - computed == 1`` (the last
    sampled token is fed at the next step).
    """

    __slots__ = ("spec", "rid", "prompt", "target", "num_tokens", "computed", "generated", "n_blocks",
                 "hashed", "keys", "next_register", "cached_tokens", "admitted", "t_first", "times", "counts",
                 "swapped", "lost", "kv_ready", "instance", "final_keys", "pending_times", "pending_counts",
                 "group_start", "group_serial", "window_blocks", "rank")

    def __init__(self, spec: RequestSpec, keys: list[Hashable]) -> None:
        self.spec = spec
        self.rid = spec.request_id
        self.prompt = spec.input_tokens
        self.target = spec.output_tokens
        self.num_tokens = spec.input_tokens
        self.computed = 0
        self.generated = 0
        self.n_blocks = 0
        self.window_blocks = 0             # blocks held for its per-sequence (sliding-window) KV while admitted
        self.hashed: list[Hashable] = []   # keys of the request's leading shared blocks
        self.keys = keys                   # prefix-cache keys of its full prompt blocks
        self.next_register = 0                       # next key index to register; -1 = stop registering
        self.cached_tokens = 0
        self.admitted = False
        self.t_first: float | None = None
        self.times: list[np.ndarray] = []     # token-time chunks (record mode), one per span or flush
        self.counts: list[np.ndarray] = []
        self.pending_times: list[float] = []              # single-step token times not yet packed into ``times``
        self.pending_counts: list[int] = []
        self.group_start = -1                           # decode-group step count when it joined (-1: not in the group)
        self.group_serial = -1                          # serial of its current group membership
        self.swapped = 0                   # tokens of KV parked in the host tier by a preemption
        self.lost = 0                      # tokens of KV thrown away by a preemption (to recompute)
        self.kv_ready = False              # arrived with its prompt KV (disaggregated decode)
        self.instance: Instance | None = None
        self.final_keys: list[Hashable] = []  # cached keys of its prompt + output blocks, at finish
        self.rank = 0                      # its attention data-parallel rank (only TensorRT-LLM's balance reads it)

    @property
    def decoding(self) -> bool:
        """Whether its next step feeds one sampled token (as opposed to a prompt chunk or a recompute)."""
        return self.generated > 0 and self.num_tokens - self.computed == 1
