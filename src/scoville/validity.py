"""Whether a measured load point can be trusted, and if not, why (docs/architecture.md, "Validity").

A number is only as good as the conditions it was measured under: a point
whose requests failed, whose client ran out of CPU, whose server answered
from a warm prefix cache, stopped early at EOS, or whose power meter said
nothing, still yields figures, and they look like any other. Each point's
metrics row therefore carries ``valid`` and ``invalid_reasons`` (a list of
``{"code", "detail"}``: a short machine-readable code and one sentence), plus
``validity_basis``, which says what was checked. Every reader (the sweep's
summary, ``show``, the report, ``compare``) shows them.

Simulated runs are valid by construction: there is no client to saturate, no
cache left from a previous run and no meter; nothing here is checked for them.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scoville.results.manifest import Manifest, Target
from scoville.results.schema import PointOutcome

# Defaults; docs/architecture.md ("Validity") gives the reasons for each.
ERROR_SHARE_MAX = 0.01          # failed / measured requests
CLIENT_CPU_MAX = 0.90           # busiest client process's CPU time / wall time (1.0 = one core)
STEAL_SHARE_MAX = 0.05          # CPU time the hypervisor gave to other guests / all CPU time
SHORT_OUTPUT_MAX = 0.01         # ok measured requests that returned fewer tokens than requested
CLIENT_TPOT_RATIO_MIN = 0.90   # client ÷ server per-request TPOT: below it the client read tokens late
POWER_FLOOR_W = 5.0             # per accelerator: below it the meter read (nearly) nothing
# Mean power above factor x rated watts x accelerators is implausible; a node or rack boundary
# also holds CPUs, memory, fans and network, which the accelerators' rating leaves out.
POWER_CEILING_FACTOR = {"chip": 1.5, "board": 1.5, "node": 2.5, "rack": 3.0}
SAMPLED_POWER = ("nvml", "csv")
SIMULATED_BASIS = "simulated: valid by construction (no client, cache or meter to check)"


@dataclass(frozen=True)
class Reason:
    """Why a point is not valid: a stable code for machines and one sentence for people."""

    code: str
    detail: str


def _error_share(row: dict[str, Any]) -> Reason | None:
    n, errors = row.get("num_requests") or 0, row.get("num_errors") or 0
    if n and errors / n > ERROR_SHARE_MAX:
        return Reason("errors", f"{errors} of {n} measured requests failed ({errors / n:.1%}; "
                                f"limit {ERROR_SHARE_MAX:.0%})")
    return None


def _client_cpu(outcome: PointOutcome) -> Reason | None:
    share = outcome.client_cpu_share
    if share is not None and share > CLIENT_CPU_MAX:
        return Reason("client_cpu", f"a client process used {share:.0%} of a core (limit {CLIENT_CPU_MAX:.0%}): "
                                    "its timestamps lag; add --workers")
    return None


def _steal(outcome: PointOutcome) -> Reason | None:
    share = outcome.steal_share
    if share is not None and share > STEAL_SHARE_MAX:
        return Reason("steal", f"the hypervisor stole {share:.1%} of the host's CPU time "
                               f"(limit {STEAL_SHARE_MAX:.0%}): the client was descheduled")
    return None


def is_loopback(url: str | None) -> bool:
    """Whether ``url`` names this machine (localhost or a loopback address)."""
    host = urlsplit(url or "").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _client_lag(row: dict[str, Any], loopback: bool, fixed_lengths: bool) -> Reason | None:
    """The client saw the server's tokens later than the server sent them, by the server's own histograms.

    Why: another process on the client's machine (a build, a test run) can take the CPU from a client whose
    own CPU use stays low, so neither ``client_cpu`` nor ``steal`` sees it; tokens then wait in the socket
    and arrive in bunches. Seen on the 2-core development machine: client TTFT 338 ms against the server's
    53 ms, client TPOT a third of the server's. A client TPOT well below the server's says so on any network,
    where outputs have the lengths asked for (``fixed_lengths``: a server histogram of per-token gaps, which
    some engines publish as TPOT, weighs long answers more than the client's per-request mean does); a large
    TTFT gap says so only over loopback, where no network can explain it.
    """
    ratio = row.get("client_server_tpot_ratio")
    if fixed_lengths and ratio is not None and ratio < CLIENT_TPOT_RATIO_MIN:
        return Reason("client_lag", f"the client's TPOT is {ratio:.2f} of the server's own (limit "
                                    f"{CLIENT_TPOT_RATIO_MIN:g}): tokens reached it late and bunched; another process "
                                    "took its CPU, so measure on a quiet machine")
    gap = row.get("client_minus_server_ttft_s")
    if loopback and row.get("ttft_gap_large") and gap is not None:
        return Reason("client_lag", f"over loopback the client's TTFT is {gap * 1e3:.0f} ms above the server's own: "
                                    "its first tokens reached it late; another process took its CPU, so measure on "
                                    "a quiet machine")
    return None


def _prefix_cache(outcome: PointOutcome) -> Reason | None:
    if outcome.unexpected_cache_hits:
        share = outcome.cached_tokens / outcome.input_tokens if outcome.input_tokens else 0.0
        return Reason("prefix_cache", f"the server reported cached prompt tokens ({share:.0%} of input) on a "
                                      "workload meant to be uncached: TTFT is too low")
    return None


def _short_output(records: pa.Table, target: Target) -> Reason | None:
    """Ok measured requests that returned fewer tokens than they asked for, when exact lengths were asked."""
    if not target.ignore_eos or "output_tokens_requested" not in records.column_names:
        return None
    ok = records.filter(pc.and_(records.column("ok"), pc.invert(records.column("warmup"))))
    asked = ok.column("output_tokens_requested").to_numpy(zero_copy_only=False).astype(float)
    got = ok.column("output_tokens").to_numpy(zero_copy_only=False).astype(float)
    # a count of chunks is no count of tokens (a chunk may carry several): only server-counted outputs are judged
    chunks = pc.fill_null(pc.starts_with(ok.column("token_count_source"), "chunks"), False)
    counted = ~chunks.to_numpy(zero_copy_only=False)
    known = ~np.isnan(asked) & counted
    if not known.any():
        return None
    short = int((got[known] < asked[known]).sum())
    share = short / int(known.sum())
    if share <= SHORT_OUTPUT_MAX:
        return None
    why = ("the server did not honour ignore_eos/min_tokens" if target.extensions is not False
           else "the server refused vLLM's ignore_eos/min_tokens fields, so requests stopped at EOS")
    return Reason("short_output", f"{short} of {int(known.sum())} requests returned fewer tokens than requested "
                                  f"({share:.0%}; limit {SHORT_OUTPUT_MAX:.0%}): {why}")


def _power(row: dict[str, Any], manifest: Manifest, power: pa.Table | None) -> Reason | None:
    """A sampled power source with no sample in the point's window, or a mean outside what the hardware can draw."""
    source = manifest.power.source
    start, end = row.get("window_start_s"), row.get("window_end_s")
    if source not in SAMPLED_POWER or start is None or end is None:
        return None
    if power is None or power.num_rows == 0:
        return Reason("power_missing", f"power source {source} recorded no samples at all")
    t = power.column("t").to_numpy()
    if not ((t >= start) & (t <= end)).any():
        return Reason("power_missing", f"power source {source} recorded no sample inside the point's window "
                                       f"({start:.1f}-{end:.1f} s)")
    watts = row.get("power_w")
    system = manifest.system
    boundary = manifest.power.boundary or system.power_boundary or "chip"
    accelerators = row.get("accelerators") or system.accelerators or 1
    rated = system.rated_watts_per_accelerator
    if watts is None:
        return None
    if watts < POWER_FLOOR_W * accelerators:
        return Reason("power_implausible", f"mean power {watts:.0f} W is below {POWER_FLOOR_W:g} W per accelerator: "
                                           "the meter read (nearly) nothing")
    factor = POWER_CEILING_FACTOR.get(boundary, max(POWER_CEILING_FACTOR.values()))
    if rated and watts > factor * rated * accelerators:
        return Reason("power_implausible", f"mean power {watts:.0f} W exceeds {factor:g} x the rated "
                                           f"{rated:g} W x {accelerators} accelerators ({boundary} boundary)")
    return None


def simulated_validity() -> dict[str, Any]:
    """The validity columns of a simulated point (replayed or analytic): valid, and why that needs no check."""
    return {"valid": True, "invalid_reasons": [], "validity_basis": SIMULATED_BASIS}


def point_validity(manifest: Manifest, row: dict[str, Any], records: pa.Table,
                   power: pa.Table | None) -> dict[str, Any]:
    """``valid``, ``invalid_reasons`` and ``validity_basis`` of one point's metrics row.

    ``records`` are the point's request records (warm-up included), ``power`` the run's samples.
    """
    if manifest.source != "measured":
        return simulated_validity()
    outcome = manifest.point_outcome(int(row["point"]))
    checks = [("errors", _error_share(row))]
    # unknown for runs from before they were recorded, Ray's remote clients, and hosts without /proc
    if outcome is not None and outcome.client_cpu_share is not None:
        checks.append(("client CPU", _client_cpu(outcome)))
    if outcome is not None and outcome.steal_share is not None:
        checks.append(("steal", _steal(outcome)))
    if outcome is not None:
        checks.append(("prefix cache", _prefix_cache(outcome)))
    if row.get("server_ttft_s_mean") is not None or row.get("server_tpot_s_mean") is not None:
        checks.append(("client vs server", _client_lag(row, is_loopback(manifest.target.base_url),
                                                        bool(manifest.target.ignore_eos))))
    if manifest.target.ignore_eos:
        checks.append(("output length", _short_output(records, manifest.target)))
    if manifest.power.source in SAMPLED_POWER:
        checks.append(("power", _power(row, manifest, power)))
    reasons = [r for _, r in checks if r is not None]
    return {"valid": not reasons, "invalid_reasons": [{"code": r.code, "detail": r.detail} for r in reasons],
            "validity_basis": "measured: checked " + ", ".join(name for name, _ in checks)}



def basis_text(rows: list[dict[str, Any]]) -> str | None:
    """What was checked, once when every point shares it, else per point (None for rows without the stamp)."""
    bases = {str(r.get("label") or r.get("point")): r["validity_basis"] for r in rows if r.get("validity_basis")}
    if len(set(bases.values())) <= 1:
        return next(iter(bases.values()), None)
    return "; ".join(f"{label}: {basis}" for label, basis in bases.items())
