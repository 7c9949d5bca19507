"""Splitting one load point across N client workers so the aggregate is exactly the plan.

Why a static split and not a shared counter: a shared counter on another node
costs a network round trip per request, which is exactly the bottleneck that
makes one outgrow one machine. Instead each worker gets a fixed share decided
up front, and the shares add up to the plan:

* closed loop, concurrency C: worker i runs ``C_i`` lanes with ``ΣC_i = C``
  (as even as possible), over its own contiguous block of the point's
  sessions; the requests (``N``) and warm-up requests (``W``) are split in
  proportion to ``C_i`` by largest remainder, so ``ΣN_i = N`` and ``ΣW_i = W``
  and every worker finishes at about the same time;
* open loop, rate λ: the plan's own arrival times (``scoville.load.arrival_offsets``
  with the run's seed) are dealt to workers by seeded random thinning. Thinning
  a Poisson process gives independent Poisson streams of rate ``λ/N_workers``
  whose superposition is the plan's process — here it is literally the plan's
  arrival times, for any burstiness, so a distributed run sends at the same
  instants as a local one. The first ``W`` arrivals stay the warm-up ones;
  a max-concurrency cap is split like C.

A share names its sessions by index into ``point_sessions(workload, point)``,
which each worker regenerates from the workload's seed, so no session list
crosses the network.
"""

from __future__ import annotations

import msgspec
import numpy as np

from scoville.load import LoadError, LoadPoint
from scoville.load_policy import request_cap, session_count


class Share(msgspec.Struct, kw_only=True, frozen=True):
    """What one worker sends of one point.

    ``point`` is the plan's point with this share's request and warm-up counts
    (rate, burstiness and index unchanged, so arrival times are the plan's);
    ``sessions`` are indices into the point's session list, taken in order;
    ``lanes`` is the closed-loop concurrency, ``max_in_flight`` the open-loop cap.
    """

    worker: int
    point: LoadPoint
    sessions: tuple[int, ...]
    lanes: int = 0
    max_in_flight: int | None = None
    requests: int | None = None  # this share's request cap; None when only the duration bounds it


def even_split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` integers differing by at most one, larger first."""
    base, extra = divmod(total, parts)
    return [base + (i < extra) for i in range(parts)]


def proportional_split(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` by largest remainder (sums exactly to total)."""
    w = np.asarray(weights, dtype=float)
    exact = total * w / w.sum()
    out = np.floor(exact).astype(int)
    short = total - int(out.sum())
    # Ties broken by position so the split is deterministic.
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[:short]:
        out[i] += 1
    return out.tolist()


def split_point(point: LoadPoint, workers: int, seed: int = 0) -> list[Share]:
    """The shares of ``point`` for ``workers`` client workers (fewer when C < workers)."""
    if workers < 1:
        raise LoadError(f"--workers must be >= 1 (got {workers})")
    if point.rate is None:
        return _split_closed(point, workers)
    return _split_open(point, workers, seed)


def _split_closed(point: LoadPoint, workers: int) -> list[Share]:
    concurrency = point.concurrency or 1
    lanes = [c for c in even_split(concurrency, min(workers, concurrency)) if c > 0]
    cap = request_cap(point)
    n_sessions = session_count(point)
    blocks = proportional_split(n_sessions, lanes)
    measured = proportional_split(point.num_requests, lanes)
    warmup = proportional_split(point.warmup_requests, lanes)
    shares, start = [], 0
    for i, c in enumerate(lanes):
        sub = msgspec.structs.replace(point, concurrency=c, num_requests=measured[i], warmup_requests=warmup[i])
        requests = None if cap is None else measured[i] + warmup[i]
        shares.append(Share(worker=i, point=sub, sessions=tuple(range(start, start + blocks[i])), lanes=c,
                            requests=requests))
        start += blocks[i]
    return shares


def _split_open(point: LoadPoint, workers: int, seed: int) -> list[Share]:
    cap = request_cap(point)
    n_sessions = session_count(point)
    workers = min(workers, n_sessions, point.concurrency or workers)  # every worker gets a cap >= 1
    owner = np.random.default_rng([seed, point.index, 0x5117]).integers(0, workers, size=n_sessions)
    owned = [mine for mine in (np.flatnonzero(owner == i) for i in range(workers)) if mine.size]
    # the cap is split over the workers that drew sessions, so an empty one does not take part of it away
    caps = even_split(point.concurrency, len(owned)) if point.concurrency else [None] * len(owned)
    shares = []
    for i, mine in enumerate(owned):
        warm = int(np.count_nonzero(mine < point.warmup_requests))
        requests = None if cap is None else int(np.count_nonzero(mine < cap))
        measured = 0 if requests is None else requests - warm
        sub = msgspec.structs.replace(point, num_requests=measured, warmup_requests=warm)
        shares.append(Share(worker=i, point=sub, sessions=tuple(int(k) for k in mine), max_in_flight=caps[i],
                            requests=requests))
    return shares
