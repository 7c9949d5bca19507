"""The lazy decode group of one instance (record mode, no speculative decoding).

Decoding requests take exactly one token in every step, so their state is a function of how many steps ran
since they joined. The group advances all of them in O(1) per step — one end time appended, one context sum
bumped — and brings a member's own fields up to date ("materialises" it) only when it finishes, leaves, or the
group dissolves. Finishes and block boundaries are found from heaps and a per-phase count instead of a scan.
"""

from __future__ import annotations

import heapq
import itertools

import numpy as np

from scoville.sim.request import Req, flush


class DecodeGroup:
    """Decoding requests advanced together, one token per step, in join order (oldest first)."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.members: dict[Req, None] = {}                  # insertion-ordered: the newest is preempted first
        self.times: list[float] = []                        # end time of each group step
        self.ctx = 0                                        # sum of members' KV lengths
        self._fin: list[tuple[int, int, Req]] = []          # (group step of last token, gid, req)
        # Each member needs a new block every block_size steps, so members are counted by the phase
        # (step mod block_size) of their block boundary: a step's new blocks are one lookup, not a scan.
        self._phase = [0] * block_size
        self._ph: dict[Req, int] = {}
        self._block: list[tuple[int, int, Req]] = []        # (first block step, gid, req) when > block_size away
        self._gids = itertools.count()

    def __len__(self) -> int:
        return len(self.members)

    def __contains__(self, r: Req) -> bool:
        return r in self.members

    def join(self, r: Req) -> None:
        """Add a decoding request; its finish step and first block boundary go on the heaps."""
        q = len(self.times)
        r.group_start, r.group_serial = q, next(self._gids)
        self.members[r] = None
        self.ctx += r.computed
        heapq.heappush(self._fin, (q + r.target - r.generated, r.group_serial, r))
        bs = self.block_size
        j1 = r.n_blocks * bs - r.computed + 1   # its first group step that crosses into a new block
        if j1 <= bs:
            self._settle(r, (q + j1) % bs)
        else:
            heapq.heappush(self._block, (q + j1, r.group_serial, r))

    def _settle(self, r: Req, phase: int) -> None:
        """Count ``r`` under the phase of its block boundary (from then on it recurs every block_size steps)."""
        self._phase[phase] += 1
        self._ph[r] = phase

    def materialize(self, r: Req) -> None:
        """Bring a member up to date (tokens, KV length, blocks) and take it out of the group's sums."""
        k = len(self.times) - r.group_start
        if k:
            if r.pending_times:
                flush(r)
            r.times.append(np.array(self.times[r.group_start:], dtype=np.float64))
            r.counts.append(np.ones(k, dtype=np.int64))
            r.computed += k
            r.num_tokens += k
            r.generated += k
            r.n_blocks = max(r.n_blocks, -(-r.computed // self.block_size))
        self.ctx -= r.computed
        ph = self._ph.pop(r, None)
        if ph is not None:
            self._phase[ph] -= 1
        r.group_start, r.group_serial = -1, -1

    def leave(self, r: Req) -> None:
        """Take one member out, up to date (a cancel, a finish, a preemption)."""
        self.materialize(r)
        del self.members[r]

    def dissolve(self) -> list[Req]:
        """Every member, oldest first and up to date, with the group emptied (they go back to single steps)."""
        members = list(self.members)
        for r in members:
            self.materialize(r)
        self.clear()
        return members

    def clear(self) -> None:
        """Forget every member and step (once nobody is left the group restarts from step 0)."""
        self.members.clear()
        self._fin, self._block = [], []
        self._phase = [0] * self.block_size
        self._ph.clear()
        self.times = []
        self.ctx = 0

    def steps_to_first_finish(self) -> int | None:
        """Steps until the next member's last token (None when no live member is due), dropping stale heap entries."""
        fin = self._fin
        while fin and fin[0][2].group_serial != fin[0][1]:
            heapq.heappop(fin)
        if not fin:
            return None
        return fin[0][0] - len(self.times)

    def last_step_s(self) -> float | None:
        """Duration of the latest group step (None until two steps ran): the group's step-time estimate."""
        if len(self.times) < 2:
            return None
        return self.times[-1] - self.times[-2]

    def blocks_due(self, q: int) -> tuple[int, list[Req]]:
        """New blocks the group needs in group step ``q``, and members whose boundary becomes periodic."""
        heap, late = self._block, []
        while heap and heap[0][0] <= q:
            _, gid, r = heapq.heappop(heap)
            if r.group_serial == gid:
                late.append(r)
        return self._phase[q % self.block_size] + len(late), late

    def pop_newest(self, q: int, late: list[Req]) -> tuple[Req, int]:
        """Take out the latest member to join (a preemption victim); the group's new need for step ``q``."""
        victim = next(reversed(self.members))
        self.leave(victim)
        if victim in late:
            late.remove(victim)
        return victim, self._phase[q % self.block_size] + len(late)

    def settle(self, q: int, late: list[Req]) -> None:
        """Members whose first boundary falls in step ``q`` join the per-phase count once their block is taken."""
        ph = q % self.block_size
        for r in late:
            self._settle(r, ph)

    def advance(self, end: float) -> list[Req]:
        """Every member took one token in a step ending at ``end``; the members that finished, taken out."""
        self.times.append(end)
        self.ctx += len(self.members)
        q = len(self.times)
        fin = self._fin
        done: list[Req] = []
        while fin and fin[0][0] <= q:
            _, gid, r = heapq.heappop(fin)
            if r.group_serial != gid:
                continue
            self.leave(r)
            done.append(r)
        return done
