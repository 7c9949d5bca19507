"""A scheduler step's decision, as data: vLLM v1's ``SchedulerOutput`` for the simulator.

The scheduler first *decides* a step — which sequences decode, which prompt chunks of how many tokens run,
whom it preempted — then the cost model prices exactly that batch, then the step's outcome is applied. Keeping
the decision a value between those phases is what lets each phase be read (and tested) on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from scoville.sim.request import Req


class StepTimer(Protocol):
    """The slice of ``scoville.sim.cost.StepCost`` the scheduler uses."""

    def step_time(self, num_tokens: Any, num_seqs: Any, attn_ctx_tokens: Any, kv_tokens: Any,
                  decode_seqs: Any = None, decode_kv: Any = None) -> Any: ...


class Batch(NamedTuple):
    """The ``StepTimer.step_time`` arguments of one step: the shape of the batch that ran."""

    num_tokens: int
    num_seqs: int
    attn_ctx_tokens: float
    kv_tokens: float
    decode_seqs: int
    decode_kv: float


@dataclass
class StepPlan:
    """What one step runs.

    ``group`` decoding requests advance lazily as the decode group (one token each, their summed context is
    the group's); ``scheduled`` holds every other sequence as ``(request, tokens, decodes)`` in the order the
    step feeds them — a decode takes 1 token (1 + drafts with speculative decoding), a prompt chunk or a
    recompute any number up to the token budget. ``preempted`` lists the victims evicted to make room, newest
    first; once anyone was preempted nothing waiting is admitted in the same step.
    """

    group: int = 0
    scheduled: list[tuple[Req, int, bool]] = field(default_factory=list)
    preempted: list[Req] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Nothing to run this step (the instance idles until an arrival or a copy is due)."""
        return not self.scheduled and not self.group

    @property
    def decode_tokens(self) -> int:
        """Tokens the step feeds decoding sequences: the group's and the scheduled decodes' (with their drafts)."""
        return self.group + sum(n for _, n, dec in self.scheduled if dec)

    def batch(self, group_ctx: int) -> Batch:
        """Token, sequence and attention-context totals the cost model prices (``group_ctx``: the group's KV)."""
        gn = self.group
        nt = ns = nd = gn
        attn = kvt = kvd = float(group_ctx + gn)
        for r, n, dec in self.scheduled:
            nt += n
            ns += 1
            attn += n * r.computed + n * (n + 1) / 2
            kvt += r.computed + n
            if dec:
                nd += 1
                kvd += r.computed + n
        return Batch(nt, ns, attn, kvt, nd, kvd)
