"""From a pinned SimConfig to an Emulator: engine, served-model limits and the system description.

The emulator and ``scoville simulate`` must agree by construction, so both
build the same ``SimEngine`` from the same ``SimConfig``; the HTTP limits
(context length, vocabulary, KV block size for prefix hashes) are read from
the same model and cost catalogs the engine uses.
"""

from __future__ import annotations

from typing import Any

from scoville.emulator.server import Emulator, EmulatorOptions
from scoville.errors import UserError
from scoville.power.sources import DEFAULT_COST_PRESET
from scoville.sim.config import SimConfig, pinned_config  # noqa: F401  (the emulator's entry point to it)


def system_info(cfg: SimConfig) -> dict[str, Any]:
    """The manifest ``system`` block for runs measured against this emulator (chip power, as simulate)."""
    from scoville.catalog.hardware import load_hardware

    hw = load_hardware(cfg.hardware)
    return {
        "hardware": hw.name,
        "accelerators": cfg.accelerators,
        "rated_watts_per_accelerator": hw.rated_watts,
        "power_boundary": "chip",
        "cost_per_accelerator_hour": hw.cost_per_hour.get(DEFAULT_COST_PRESET),
    }


def build_emulator(cfg: SimConfig, *, served_model_name: str | None = None, api_key: str | None = None,
                   max_queue: int | None = None, mean_output_tokens: int = 256,
                   spin_horizon_s: float = 0.005, reasoning_tokens: int = 0) -> Emulator:
    """An Emulator serving ``cfg``'s model with a fresh SimEngine.

    ``reasoning_tokens`` N streams the first N output tokens of each chat answer as reasoning, so a
    reasoning model's timing (first token vs first answer token) can be checked end to end.
    """
    from scoville.catalog.models import load_model
    from scoville.sim.engine import SimEngine

    if max_queue is not None and max_queue < 1:
        raise UserError(f"--max-queue must be >= 1 (got {max_queue}); omit it for an unbounded queue")
    if not spin_horizon_s >= 0:  # also refuses nan
        raise UserError(f"--spin-horizon-ms must be >= 0 (got {spin_horizon_s * 1e3:g}); 0 never spins")
    if reasoning_tokens < 0:
        raise UserError(f"--reasoning-tokens must be >= 0 (got {reasoning_tokens}); 0 streams no reasoning")
    engine = SimEngine(cfg)
    arch = load_model(cfg.model)
    name = served_model_name or cfg.model
    max_len = int(arch.max_context)
    kv_cap = _kv_capacity(engine)
    if kv_cap is not None:
        max_len = min(max_len, kv_cap)
    opts = EmulatorOptions(
        served_model_names=[name], max_model_len=max_len, vocab_size=int(arch.vocab_size),
        block_size=cfg.block_size if cfg.enable_prefix_caching else 0, api_key=api_key, max_queue=max_queue,
        mean_output_tokens=mean_output_tokens, reasoning_tokens=reasoning_tokens,
        info={"model": name, "config": cfg.model_dump(mode="json"), "system": system_info(cfg),
              "max_model_len": max_len},
    )
    return Emulator(engine, opts, spin_horizon_s=spin_horizon_s)


def _kv_capacity(engine: Any) -> int | None:
    """Tokens of KV one instance holds: a request longer than this could never be scheduled."""
    cap = getattr(engine, "kv_capacity_tokens", None)
    if callable(cap):
        cap = cap()
    return int(cap) if cap else None
