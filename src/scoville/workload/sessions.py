"""Multi-turn, agentic and long-context session workloads.

A session is a conversation whose every turn re-sends the whole context so far:
the shared system (and tool) prompt, every earlier message, every earlier reply,
then one new user message or tool result. The context of a session is one
growing list of block hashes, and each turn's prompt is its first
``input_tokens`` tokens (see ``scoville.workload.prompts``), so turn *k+1*'s
prompt is turn *k*'s prompt followed by turn *k*'s reply and the new message —
token for token — and a prefix cache, simulated or real, hits exactly on the
part that was sent before.

Cache accounting convention (for the simulator and the emulator): a block
hash fixes all ``block_size`` tokens of its block, and a prompt usually ends
inside its last block, so consecutive turns share that last hash while only
the earlier turn's *first tokens* of it were sent. A cache must therefore key
each of its blocks on the content up to that block's end (as
``scoville.sim.engine.block_keys`` does, or as a real server does by hashing
token ids); then the next turn hits exactly the cached blocks that lie inside
the previous prompt, as vLLM does. The previous reply's blocks never hit: a real
server's reply differs from the synthesised history.

Every draw comes from ``numpy`` generators seeded by ``(seed, scenario, stream,
session index)``, so a session's content does not depend on how many sessions
are drawn, and a mix can pick sessions from several scenarios independently.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from typing import Any, overload

import msgspec
import numpy as np

from scoville.workload.spec import MAX_REQUEST_TOKENS, RequestSpec, Session
from scoville.workload.synthetic import WorkloadError

HASH_SPACE = 1 << 48  # prompts.block_tokens reads the low 48 bits of a hash
DIST_KINDS = ("fixed", "uniform", "lognormal", "exponential")


class Dist(msgspec.Struct, kw_only=True, frozen=True):
    """A one-dimensional distribution of token counts or seconds.

    ``fixed``: always ``a``. ``uniform``: on ``[a, b]``. ``lognormal``: median
    ``a``, log-space sigma ``b`` (the shape of real message and tool-output
    lengths: most short, a long tail). ``exponential``: mean ``a``. Draws are
    clipped to ``[lo, hi]`` when given.
    """

    kind: str
    a: float
    b: float = 0.0
    lo: float | None = None
    hi: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in DIST_KINDS:
            raise WorkloadError(f"unknown distribution {self.kind!r}; use one of {', '.join(DIST_KINDS)}")
        if self.a < 0 or self.b < 0 or (self.kind == "uniform" and self.b < self.a):
            raise WorkloadError(f"bad {self.kind} distribution parameters a={self.a}, b={self.b}")

    def sample(self, rng: np.random.Generator, size: int | None = None) -> Any:
        if self.kind == "fixed":
            x = np.full(size, self.a) if size is not None else self.a
        elif self.kind == "uniform":
            x = rng.uniform(self.a, self.b, size)
        elif self.kind == "lognormal":
            x = self.a * np.exp(self.b * rng.standard_normal(size))
        else:
            x = rng.exponential(self.a, size)
        if self.lo is not None or self.hi is not None:
            x = np.clip(x, self.lo if self.lo is not None else -np.inf, self.hi if self.hi is not None else np.inf)
        return x

    def describe(self) -> str:
        if self.kind == "fixed":
            body = f"{self.a:g}"
        elif self.kind == "uniform":
            body = f"uniform[{self.a:g}, {self.b:g}]"
        elif self.kind == "lognormal":
            body = f"lognormal(median {self.a:g}, sigma {self.b:g})"
        else:
            body = f"exponential(mean {self.a:g})"
        if self.lo is not None or self.hi is not None:
            lo = self.lo if self.lo is not None else "-"
            hi = self.hi if self.hi is not None else "-"
            body += f" clipped to [{lo}, {hi}]"
        return body


class LazySessions(Sequence[Session]):
    """The sessions of one point, each built when a driver first asks for it.

    Drivers draw sessions for a whole point up front (up to 100k when only a
    duration bounds it); an agentic session holds tens of thousands of block
    hashes, so building them all eagerly would take gigabytes. Every session is
    a pure function of its index, so building on access changes nothing else:
    ``len``, indexing, slicing and iteration behave as on a list.
    """

    def __init__(self, count: int, build: Callable[[int], Session]) -> None:
        self._count, self._build = count, build

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> Session: ...
    @overload
    def __getitem__(self, i: slice) -> list[Session]: ...

    def __getitem__(self, i: int | slice) -> Session | list[Session]:
        if isinstance(i, slice):
            return [self._build(j) for j in range(*i.indices(self._count))]
        if not -self._count <= i < self._count:
            raise IndexError(f"session {i} of {self._count}")
        return self._build(i % self._count)

    def __repr__(self) -> str:
        return f"LazySessions({self._count})"


def fixed(x: float) -> Dist:
    return Dist(kind="fixed", a=x)


def uniform(a: float, b: float) -> Dist:
    return Dist(kind="uniform", a=a, b=b)


def lognormal(median: float, sigma: float, lo: float | None = None, hi: float | None = None) -> Dist:
    return Dist(kind="lognormal", a=median, b=sigma, lo=lo, hi=hi)


def _salt(name: str) -> int:
    return zlib.crc32(name.encode())


def _tokens(x: float) -> int:
    return max(1, min(MAX_REQUEST_TOKENS, int(round(float(x)))))


class SessionWorkload(msgspec.Struct, kw_only=True, frozen=True):
    """Sessions of turns that grow one context; one generator for every built-in scenario.

    Per session: draw a turn count from ``turns`` and a context ceiling from
    ``max_context`` (capped by ``context_limit``, the model's window for input
    plus output). Turn 0 sends the shared prefix plus ``first_message`` tokens;
    each later turn appends the previous reply (``output`` tokens) and
    ``message`` tokens (a user message or a tool result) and is sent
    ``think`` seconds (times ``think_scale``) after the previous reply ended.
    A session ends after its turns or before the turn that would overflow its
    context ceiling. The shared prefix (system and tool prompt, identical
    across every session of the scenario) is rounded up to whole blocks so the
    first private message starts on a block boundary.
    """

    name: str
    turns: Dist
    first_message: Dist
    message: Dist
    output: Dist
    think: Dist
    shared_prefix_tokens: int = 0
    max_context: Dist | None = None
    context_limit: int = 131072
    block_size: int = 64
    think_scale: float = 1.0
    seed: int = 0
    description: str = ""
    kind: str = "sessions"

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise WorkloadError(f"block size must be >= 1 token (got {self.block_size})")
        if not self.think_scale >= 0:  # nan included
            raise WorkloadError(f"--think-scale must be >= 0 (got {self.think_scale})")
        if self.shared_prefix_tokens < 0 or self.context_limit <= self.shared_prefix_tokens + 1:
            raise WorkloadError(f"{self.name}: a {self.context_limit}-token context window leaves no room after its "
                                f"{self.shared_prefix_tokens}-token shared prefix; serve a larger max_model_len or "
                                "pick another scenario")

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @property
    def reuses_prefixes(self) -> bool:
        """Whether prompts repeat earlier tokens (a shared prefix, or later turns re-sending the context)."""
        return self.shared_prefix_tokens > 0 or self.turns.kind != "fixed" or self.turns.a >= 1.5

    def fit_context(self, limit: int) -> SessionWorkload:
        """Sessions shaped for a ``limit``-token window: each ends before the turn that would not fit."""
        return msgspec.structs.replace(self, context_limit=min(self.context_limit, limit))

    def parameters(self) -> dict[str, str]:
        """Human-readable parameters, as ``scoville scenarios`` prints them."""
        bs = self.block_size
        shared = -(-self.shared_prefix_tokens // bs) * bs
        out = {
            "turns": self.turns.describe() + (" at most (until the context ceiling)" if self.max_context else ""),
            "shared prefix tokens": f"{shared} (identical in every session)",
            "first message tokens": self.first_message.describe(),
            "later message tokens": self.message.describe(),
            "output tokens per turn": self.output.describe(),
            "think / tool time s": (self.think.describe()
                                    + (f" x {self.think_scale:g}" if self.think_scale != 1 else "")),
            "context limit": str(self.context_limit),
            "block size": str(bs),
        }
        if self.max_context is not None:
            out["context ceiling per session"] = self.max_context.describe()
        return out

    def _shared_hashes(self, stream: int) -> list[int]:
        """The shared prefix of point ``stream``: one per point, so no point starts on a prefix the last one cached."""
        n = -(-self.shared_prefix_tokens // self.block_size)
        rng = np.random.default_rng([self.seed, _salt(self.name), 0x5EED, stream])
        return rng.integers(0, HASH_SPACE, size=n).tolist()

    def session(self, index: int, stream: int = 0, shared: list[int] | None = None) -> Session:
        """Session ``index`` of point ``stream``; independent of every other session's draws."""
        rng = np.random.default_rng([self.seed, _salt(self.name), stream, index])
        bs = self.block_size
        hashes = list(self._shared_hashes(stream) if shared is None else shared)
        context = len(hashes) * bs
        n_turns = max(1, int(round(float(self.turns.sample(rng)))))
        ceiling = self.context_limit
        if self.max_context is not None:
            ceiling = min(ceiling, _tokens(self.max_context.sample(rng)))
        sid = f"p{stream}-s{index}"
        specs: list[RequestSpec] = []
        for turn in range(n_turns):
            message = _tokens((self.first_message if turn == 0 else self.message).sample(rng))
            output = _tokens(self.output.sample(rng))
            think = 0.0 if turn == 0 else float(self.think.sample(rng)) * self.think_scale
            if context + message + output > ceiling:
                if turn > 0:
                    break
                # A first turn always fits: shorten it to the room left (a long-context request at the limit).
                room = ceiling - context
                output = min(output, max(1, room // 2))
                message = max(1, min(message, room - output))
            input_tokens = context + message
            needed = -(-input_tokens // bs)
            if needed > len(hashes):
                hashes.extend(rng.integers(0, HASH_SPACE, size=needed - len(hashes)).tolist())
            specs.append(RequestSpec(
                request_id=f"{sid}-t{turn}",
                input_tokens=input_tokens,
                output_tokens=output,
                session_id=sid,
                turn=turn,
                think_s=think,
                block_hashes=tuple(hashes[:needed]),
                block_size=bs,
                prompt_seed=(self.seed << 40) ^ (stream << 28) ^ (index << 8) ^ turn,
            ))
            context = input_tokens + output
        return Session(session_id=sid, requests=tuple(specs))

    def sessions(self, count: int, stream: int = 0) -> LazySessions:
        """``count`` sessions of point ``stream`` (each point draws its own, sharing only the shared prefix)."""
        shared = self._shared_hashes(stream)
        return LazySessions(count, lambda i: self.session(i, stream, shared))


class MixWorkload(msgspec.Struct, kw_only=True, frozen=True):
    """Sessions drawn from several scenarios by weight (e.g. 70 % chat, 30 % agentic).

    Session ``i`` comes from the component chosen by a seeded draw and is that
    component's own session ``i``, so adding sessions never changes earlier ones.
    """

    name: str
    components: tuple[SessionWorkload, ...]
    weights: tuple[float, ...]
    seed: int = 0
    description: str = ""
    kind: str = "mix"

    def __post_init__(self) -> None:
        if not self.components or len(self.components) != len(self.weights):
            raise WorkloadError("a mix needs one weight per scenario, e.g. mix:chat-multiturn=3,agentic-coding=1")
        if not all(math.isfinite(w) and w >= 0 for w in self.weights) or sum(self.weights) <= 0:
            raise WorkloadError(f"mix weights must be finite, >= 0 and not all zero (got {list(self.weights)})")

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @property
    def reuses_prefixes(self) -> bool:
        return any(c.reuses_prefixes for c in self.components)

    def fit_context(self, limit: int) -> MixWorkload:
        return msgspec.structs.replace(self, components=tuple(c.fit_context(limit) for c in self.components))

    def parameters(self) -> dict[str, str]:
        total = sum(self.weights)
        return {c.name: f"{w / total:.0%} of sessions" for c, w in zip(self.components, self.weights, strict=True)}

    def choices(self, count: int, stream: int = 0) -> np.ndarray:
        p = np.asarray(self.weights, dtype=float)
        rng = np.random.default_rng([self.seed, _salt(self.name), stream])
        return rng.choice(len(self.components), size=count, p=p / p.sum())

    def sessions(self, count: int, stream: int = 0) -> LazySessions:
        shared = [c._shared_hashes(stream) for c in self.components]
        picks = self.choices(count, stream).tolist()
        return LazySessions(count, lambda i: self.components[picks[i]].session(i, stream, shared[picks[i]]))


CONTEXT_128K = 131072


def _build(seed: int, opts: dict[str, Any], **defaults: Any) -> SessionWorkload:
    """A scenario's defaults with any field overridden (e.g. ``turns=fixed(8)`` for a shorter bench)."""
    unknown = sorted(set(opts) - set(SessionWorkload.__struct_fields__))
    if unknown:
        raise WorkloadError(f"unknown session option(s) {', '.join(unknown)}")
    return SessionWorkload(**{**defaults, **opts, "seed": seed})


def chat_multiturn(seed: int = 0, **opts: Any) -> SessionWorkload:
    """``chat-multiturn``: 10-turn conversations.

    Shared system prompt 512 tokens; first user message lognormal (median 400,
    sigma 0.7, 16-4096); later messages lognormal (median 200, sigma 0.8,
    8-4096); replies lognormal (median 300, sigma 0.6, 16-2048); user think
    time lognormal (median 4 s, sigma 0.6, 0.5-30 s). A session ends near 5-8k
    tokens of context, so the cache reuses most of every later prompt.
    """
    return _build(
        seed, opts,
        name="chat-multiturn",
        description="10-turn chat conversations: 512-token shared system prompt, short user messages, "
                    "~300-token replies, a few seconds of user think time",
        turns=fixed(10),
        shared_prefix_tokens=512,
        first_message=lognormal(400, 0.7, 16, 4096),
        message=lognormal(200, 0.8, 8, 4096),
        output=lognormal(300, 0.6, 16, 2048),
        think=lognormal(4.0, 0.6, 0.5, 30.0),
    )


def agentic_coding(seed: int = 0, **opts: Any) -> SessionWorkload:
    """``agentic-coding``: a coding agent's tool loop.

    Shared system + tool-schema prompt 16384 tokens (identical across every
    session, as one agent product's prompt is); task message lognormal (median
    800, sigma 0.6, 64-8192); then each turn is a short tool call (reply
    lognormal median 160, sigma 0.7, 16-2048) followed by a large tool result
    (lognormal median 2000, sigma 0.9, 64-24576) and tool execution time
    (lognormal median 0.8 s, sigma 1.0, 0.05-30 s). Up to 200 turns, ending
    before the context passes a per-session ceiling uniform on [96k, 124k]
    tokens (128k window): typically about 30 turns.
    """
    return _build(
        seed, opts,
        name="agentic-coding",
        description="coding-agent sessions: 16k-token shared system+tool prompt, many short tool-call "
                    "replies each followed by a large tool result, context growing to 96k-124k tokens",
        turns=fixed(200),
        shared_prefix_tokens=16384,
        first_message=lognormal(800, 0.6, 64, 8192),
        message=lognormal(2000, 0.9, 64, 24576),
        output=lognormal(160, 0.7, 16, 2048),
        think=lognormal(0.8, 1.0, 0.05, 30.0),
        max_context=uniform(98304, 126976),
        context_limit=CONTEXT_128K,
    )


def longctx_128k(seed: int = 0, **opts: Any) -> SessionWorkload:
    """``longctx-128k``: single-turn long-context requests, no prefix reuse (unique prompts)."""
    # Input and output lengths on [0.8 L, L] as InferenceX draws them, with L chosen so
    # that input plus output fit a 128k (131072-token) window.
    osl = 1024
    isl = CONTEXT_128K - osl
    return _build(
        seed, opts,
        name="longctx-128k",
        description=f"single-turn long-context requests: input uniform [{math.ceil(0.8 * isl)}, {isl}], "
                    f"output uniform [{math.ceil(0.8 * osl)}, {osl}] (fits a 128k window)",
        turns=fixed(1),
        first_message=uniform(math.ceil(0.8 * isl), isl),
        message=fixed(1),
        output=uniform(math.ceil(0.8 * osl), osl),
        think=fixed(0),
        context_limit=CONTEXT_128K,
    )


SESSION_SCENARIOS = {
    "chat-multiturn": chat_multiturn,
    "agentic-coding": agentic_coding,
    "longctx-128k": longctx_128k,
}

NAMED_MIXES: dict[str, tuple[str, dict[str, float]]] = {
    "mix-chat-agentic": ("70% chat-multiturn and 30% agentic-coding sessions",
                         {"chat-multiturn": 0.7, "agentic-coding": 0.3}),
    "mix-all": ("50% chat-multiturn, 35% agentic-coding, 15% longctx-128k sessions",
                {"chat-multiturn": 0.5, "agentic-coding": 0.35, "longctx-128k": 0.15}),
}


def parse_mix(spec: str) -> dict[str, float]:
    """``"chat-multiturn=3,agentic-coding=1"`` into weights by scenario."""
    weights: dict[str, float] = {}
    for part in spec.split(","):
        name, sep, value = part.strip().partition("=")
        try:
            weights[name.strip()] = float(value) if sep else 1.0
        except ValueError:
            raise WorkloadError(f"cannot read mix weight {part!r}; "
                                "write e.g. mix:chat-multiturn=3,agentic-coding=1") from None
    unknown = [n for n in weights if n not in SESSION_SCENARIOS]
    if unknown or not weights:
        raise WorkloadError(f"unknown scenario in mix: {', '.join(unknown) or spec!r}; "
                            f"mix any of {', '.join(SESSION_SCENARIOS)}")
    return weights


def mix(weights: dict[str, float], *, name: str, seed: int = 0, description: str = "", **opts: Any) -> MixWorkload:
    components = tuple(SESSION_SCENARIOS[n](seed=seed, **opts) for n in weights)
    return MixWorkload(name=name, components=components, weights=tuple(weights.values()), seed=seed,
                       description=description)


def session_workload_from_dict(d: dict[str, Any]) -> Any:
    """Rebuild a session, mix or trace workload from the ``to_dict()`` a manifest recorded (``--resume``)."""
    kind = d.get("kind")
    if kind in ("sessions", "mix"):
        try:
            return msgspec.convert(d, SessionWorkload if kind == "sessions" else MixWorkload)
        except msgspec.ValidationError as e:
            raise WorkloadError(f"the manifest's {kind} workload cannot be rebuilt ({e}); was manifest.json "
                                "edited?") from None
    if kind == "trace":
        if "path" not in d:
            raise WorkloadError("the manifest's trace workload records no trace path; was manifest.json edited?")
        from scoville.workload.traces import TraceOptions, load_trace

        options = {k: d[k] for k in TraceOptions.__struct_fields__ if k in d}
        w = load_trace(d["path"], d.get("format"), **options)
        if d.get("sha256") and w.sha256 != d["sha256"]:
            raise WorkloadError(f"{d['path']} changed since the run recorded it (sha256 differs); "
                                "restore the original trace to resume")
        return w
    raise WorkloadError(f"cannot rebuild a workload of kind {kind!r}")
