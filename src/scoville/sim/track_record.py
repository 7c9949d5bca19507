"""How often the simulator has been right before: its error on measured runs, by the scope of a prediction.

A prediction's band says how sure the model is; this says how sure it deserved to be. The validation bench
predicts every public run it holds on that run's own deployment (InferenceX's runs in aiconfigurator-core's
``silicon_sample.csv``, aggregated and disaggregated, and the public points of ``validation_public.yaml`` that name
their deployment), none of which any coefficient was fitted to, and ``bench/track_record_ledger.py`` writes the
shares within 35% and inside the 80% band per model, system and framework to ``data/reference/track_record.json``.
``scoville simulate`` prints the closest scope that holds enough runs: the model on that system under that
framework, else the system under that framework, else the system, else (for a system priced from its datasheet,
as every AMD part and ``jalapeno`` are) every datasheet-priced system's runs. A system with measured kernel tables
but no runs gets no record: nothing has checked it.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

import msgspec

from scoville.catalog.hardware import Hardware

MIN_RUNS = 5          # fewer runs than this say too little to quote
TRACK_RECORD_FILE = "track_record.json"
Pricing = Literal["measured", "datasheet"]
ScopeKey = tuple[str | None, str | None, str | None, Pricing | None]   # model, system, framework, pricing


class MetricRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One metric's record over a scope's runs."""

    runs: int
    within: float                  # share of runs predicted within the file's tolerance
    in_band: float | None          # share measured inside the prediction's 80% band (None: no band was given)


class ScopeRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The record of one scope; a field left None spans every value (``pricing``: how the system is costed)."""

    model: str | None
    hardware: str | None
    framework: str | None
    pricing: Pricing | None
    covers: tuple[str, ...]        # the systems whose runs it holds
    tpot: MetricRecord
    ttft: MetricRecord | None      # public points on a stated deployment give no TTFT
    tput: MetricRecord | None

    def scope(self) -> str:
        """What the record spans, as a reader says it ("deepseek-r1 on h200 under sglang")."""
        if self.pricing is not None:
            return f"systems priced from their datasheets ({', '.join(self.covers)})"
        if self.model is not None:
            return f"{self.model} on {self.hardware} under {self.framework}"
        if self.framework is not None:
            return f"{self.hardware} under {self.framework} (every model)"
        return f"{self.hardware} (every model and framework)"

    def summary(self, tolerance: float) -> str:
        """The shares, TPOT first ("TPOT within 35% on 100% of 15 runs, TTFT 60%, ...")."""
        parts = [f"TPOT within {tolerance:.0%} on {self.tpot.within:.0%} of {self.tpot.runs} runs"]
        parts += [f"{name} {m.within:.0%}" for name, m in (("TTFT", self.ttft), ("tok/s/GPU", self.tput)) if m]
        bands = [f"{name} {m.in_band:.0%}" for name, m in (("TPOT", self.tpot), ("TTFT", self.ttft))
                 if m is not None and m.in_band is not None]
        return ", ".join(parts) + (f"; inside the 80% band: {', '.join(bands)}" if bands else "")


class TrackRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The shipped file: how it was made and every scope's record."""

    tolerance: float
    regenerate: str                # the command that writes it
    basis: str                     # what was predicted, and that nothing was fitted to it
    aiconfigurator_core: str       # the kernel-table release the predictions were priced on
    records: tuple[ScopeRecord, ...]

    def closest(self, model: str, hw: Hardware, framework: str) -> ScopeRecord | None:
        """The most specific record of a prediction's scope with at least ``MIN_RUNS`` runs (module docstring)."""
        found = {(r.model, r.hardware, r.framework, r.pricing): r for r in self.records}
        for key in scope_keys(model, hw, framework):
            record = found.get(key)
            if record is not None and record.tpot.runs >= MIN_RUNS:
                return record
        return None


def scope_keys(model: str, hw: Hardware, framework: str) -> list[ScopeKey]:
    """The scopes a prediction (or a run) of ``model`` on ``hw`` under ``framework`` belongs to, most specific
    first: (model, system, framework), (system, framework), (system), and every datasheet-priced system."""
    keys: list[ScopeKey] = [(model, hw.name, framework, None), (None, hw.name, framework, None),
                            (None, hw.name, None, None)]
    if pricing_of(hw) == "datasheet":
        keys.append((None, None, None, "datasheet"))
    return keys


def pricing_of(hw: Hardware) -> Pricing:
    """How the cost model prices a system's operators: from measured kernel tables, or its datasheet."""
    return "measured" if hw.kernel_tables else "datasheet"


def track_record_path() -> Path:
    return Path(str(resources.files("scoville") / "data" / "reference" / TRACK_RECORD_FILE))


@lru_cache(maxsize=1)
def load_track_record() -> TrackRecord:
    """The shipped track record (``bench/track_record_ledger.py`` writes it)."""
    return msgspec.json.decode(track_record_path().read_bytes(), type=TrackRecord)


def quote(model: str, hw: Hardware, framework: str) -> str:
    """The sentence ``simulate`` prints and a simulated run's manifest keeps (``target.track_record``): the record
    of the closest scope of ``model`` (its architecture's name) on ``hw`` under ``framework``, or that no measured
    run has checked that system."""
    book = load_track_record()
    record = book.closest(model, hw, framework)
    if record is None:
        return (f"track record: no measured runs of {hw.name} to check these predictions against (scoville "
                "calibrate fits a profile to your own)")
    return f"track record of {record.scope()}, on measured runs none was fitted to: {record.summary(book.tolerance)}"
