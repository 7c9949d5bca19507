"""Cost per million tokens and tokens per dollar (docs/architecture.md, section 5).

Kept apart from metrics.py so a comparison can price a run that was recorded
without a price (e.g. with a public $/GPU-hour preset) without rewriting it.
"""

from __future__ import annotations

from typing import Any


def usd_per_mtok(tokens_per_s: float, accelerators: int, cost_per_accelerator_hour: float) -> float | None:
    """$ per million tokens = $/accelerator-hour × accelerators / (tokens per hour / 1e6)."""
    if not tokens_per_s or tokens_per_s <= 0:
        return None
    return cost_per_accelerator_hour * accelerators / (tokens_per_s * 3600 / 1e6)


def tokens_per_usd(tokens_per_s: float, accelerators: int, cost_per_accelerator_hour: float) -> float | None:
    """Tokens bought by one dollar of accelerator time: the higher-better "per dollar" throughput."""
    dollars_per_hour = cost_per_accelerator_hour * accelerators
    if not dollars_per_hour or dollars_per_hour <= 0 or tokens_per_s is None:
        return None
    return tokens_per_s * 3600 / dollars_per_hour


def add_cost_columns(row: dict[str, Any], cost_per_accelerator_hour: float | None) -> dict[str, Any]:
    """``usd_per_mtok_{total,output}`` and ``tokens_per_usd_{total,output}`` of one metrics row."""
    if not cost_per_accelerator_hour:
        return {}
    n = int(row.get("accelerators") or 1)
    out: dict[str, Any] = {}
    for kind in ("total", "output"):
        tput = row.get(f"{kind}_throughput")
        if tput:
            out[f"usd_per_mtok_{kind}"] = usd_per_mtok(tput, n, cost_per_accelerator_hour)
            out[f"tokens_per_usd_{kind}"] = tokens_per_usd(tput, n, cost_per_accelerator_hour)
    return out
