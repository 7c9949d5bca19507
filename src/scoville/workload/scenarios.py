"""One registry for ``--scenario NAME`` (and ``--trace PATH``) across every CLI.

``resolve_workload`` turns what the user typed into a workload object:

* ``1k1k``, ``1k8k``, ``8k1k`` or ``--isl/--osl`` — single-turn synthetic
  (``workload.synthetic``, InferenceX-compatible lengths);
* ``chat-multiturn``, ``agentic-coding``, ``longctx-128k`` — session workloads
  (``workload.sessions``);
* ``mix-chat-agentic``, ``mix-all`` or ``mix:NAME=W,NAME=W`` — weighted mixes
  of session scenarios;
* ``trace=PATH`` — trace replay (``workload.traces``).

Every workload has ``name``, ``kind``, ``to_dict()`` (recorded in the manifest)
and ``sessions(count, stream) -> list[Session]``; trace workloads in timed
replay also have ``arrivals(count, stream)`` (open-loop start times).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from scoville.workload.sessions import NAMED_MIXES, SESSION_SCENARIOS, mix, parse_mix, session_workload_from_dict
from scoville.workload.spec import Session
from scoville.workload.synthetic import NAMED_SCENARIOS, SyntheticWorkload, WorkloadError, scenario
from scoville.workload.traces import load_trace

SESSION_OPTIONS = ("think_scale", "block_size")


@runtime_checkable
class Workload(Protocol):
    # read-only properties: the workloads are frozen structs, which a settable attribute would not match
    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...

    def sessions(self, count: int, stream: int = 0) -> list[Session]: ...


def fit_context(workload: Any, limit: int) -> Any:
    """``workload`` shaped to a server's ``limit``-token context window (input plus output per request).

    Session scenarios and traces end a session before the turn that would not
    fit; a single-turn scenario that cannot fit is a one-line WorkloadError.
    """
    fit = getattr(workload, "fit_context", None)
    return workload if fit is None else fit(limit)


def workload_from_dict(d: dict[str, Any]) -> Workload:
    """The workload a manifest recorded (its ``to_dict()``), rebuilt: what ``--resume`` sends again and what
    ``calibrate`` replays in the simulator. Synthetic here; sessions, mixes and traces by ``workload.sessions``."""
    if d.get("kind", "synthetic") == "synthetic":
        try:
            return SyntheticWorkload(**d)
        except TypeError as e:  # an edited or foreign manifest: say so in one line, not a traceback
            raise WorkloadError(f"the manifest's workload cannot be rebuilt ({e}); start a new run") from None
    return session_workload_from_dict(d)


def list_scenarios() -> list[tuple[str, str]]:
    """(name, one-line description) of every named scenario, in the order ``scoville scenarios`` prints."""
    out = [(name, f"single-turn, input <= {isl} / output <= {osl} tokens, each uniform on [0.8 L, L] (InferenceX)")
           for name, (isl, osl) in NAMED_SCENARIOS.items()]
    out += [(name, factory().description) for name, factory in SESSION_SCENARIOS.items()]
    out += [(name, desc) for name, (desc, _) in NAMED_MIXES.items()]
    out.append(("mix:A=W,B=W", "any weighted mix of session scenarios, e.g. mix:chat-multiturn=3,agentic-coding=1"))
    return out


def describe_scenario(name: str) -> dict[str, str]:
    """Every parameter of a named scenario, human-readable."""
    w = resolve_workload(name)
    params = getattr(w, "parameters", None)
    if params is not None:
        return params()
    return {"input tokens": f"uniform [{w.range_ratio:g} x {w.isl}, {w.isl}]",
            "output tokens": f"uniform [{w.range_ratio:g} x {w.osl}, {w.osl}]", "turns": "1"}


# The CLI flag of each option keyword, so errors name what the user typed.
_FLAG_OF = {"idle_gap_cap_s": "--idle-gap-cap", "block_size": "--trace-block-size"}


def _flags(options: Any) -> str:
    return ", ".join(_FLAG_OF.get(k, "--" + k.replace("_", "-")) for k in sorted(options))


def resolve_workload(name: str | None, *, isl: int | None = None, osl: int | None = None,
                     range_ratio: float | None = None, seed: int = 0, trace: Path | None = None,
                     trace_format: str | None = None, **trace_opts: Any) -> Any:
    """The workload a CLI's ``--scenario`` / ``--isl --osl`` / ``--trace`` options ask for.

    ``trace_opts`` are trace replay options (``time_scale``, ``sample``,
    ``max_sessions``, ``idle_gap_cap_s``, ``replay``, ``block_size``) with
    ``--trace``, or session options (``think_scale``, ``block_size``) with a
    session scenario.
    """
    if trace is not None:
        if name is not None or isl is not None or osl is not None:
            raise WorkloadError("give either --trace or --scenario/--isl/--osl, not both")
        return load_trace(trace, trace_format, seed=seed, **trace_opts)
    if trace_format is not None:
        raise WorkloadError("--trace-format needs --trace PATH")
    is_session = name is not None and (name in SESSION_SCENARIOS or name in NAMED_MIXES or name.startswith("mix:"))
    if not is_session:
        if name is not None and name not in NAMED_SCENARIOS:
            names = ", ".join(n for n, _ in list_scenarios()[:-1])
            raise WorkloadError(f"unknown scenario {name!r}; choose one of {names}, mix:A=W,B=W, "
                                "or give --isl and --osl (`scoville scenarios` lists them)")
        if trace_opts:
            raise WorkloadError(f"option(s) {_flags(trace_opts)} apply to session scenarios and traces, "
                                "not to single-turn synthetic scenarios")
        return scenario(name, isl=isl, osl=osl, range_ratio=range_ratio, seed=seed)
    if isl is not None or osl is not None or range_ratio is not None:
        raise WorkloadError(f"--isl/--osl/--range-ratio set single-turn lengths; scenario {name!r} draws its own "
                            "(see `scoville scenarios`)")
    bad = sorted(set(trace_opts) - set(SESSION_OPTIONS))
    if bad:
        raise WorkloadError(f"option(s) {_flags(bad)} do not apply to scenario {name!r}; "
                            f"session scenarios take {_flags(SESSION_OPTIONS)}")
    assert name is not None
    if name in SESSION_SCENARIOS:
        return SESSION_SCENARIOS[name](seed=seed, **trace_opts)
    if name in NAMED_MIXES:
        desc, weights = NAMED_MIXES[name]
        return mix(weights, name=name, seed=seed, description=desc, **trace_opts)
    return mix(parse_mix(name[len("mix:"):]), name=name, seed=seed, **trace_opts)
