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

Runs that drafted (MTP) are also kept apart, in the same scopes with ``drafts`` set, and a frontier that serves
points with drafts quotes that record beside the general one: speculative decoding adds a cost the plain runs never
exercise (the drafts' passes, the verify step, and the framework's handling of both), and its record differs.
SGLang's drafts are the case in point: its plain runs read within 10% on every batch, its drafting runs read
slower as batches grow (``bench_sim_validation.py`` view 1p's table by users), so a general record that its
drafted points borrowed would claim a certainty they have not earned.
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
ScopeKey = tuple[str | None, str | None, str | None, Pricing | None, bool]   # model, system, framework, pricing, drafts


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
    drafts: bool = False           # True: only the runs that drafted (MTP)
    covers: tuple[str, ...]        # the systems whose runs it holds
    tpot: MetricRecord
    ttft: MetricRecord | None      # public points on a stated deployment give no TTFT
    tput: MetricRecord | None

    def scope(self) -> str:
        """What the record spans, as a reader says it ("deepseek-r1 on h200 under sglang")."""
        drafted = " with MTP drafts" if self.drafts else ""
        if self.pricing is not None:
            return f"systems priced from their datasheets ({', '.join(self.covers)}){drafted}"
        if self.model is not None:
            return f"{self.model} on {self.hardware} under {self.framework}{drafted}"
        if self.framework is not None:
            return f"{self.hardware} under {self.framework}{drafted} (every model)"
        return f"{self.hardware}{drafted} (every model and framework)"

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

    def closest(self, model: str, hw: Hardware, framework: str, drafts: bool = False) -> ScopeRecord | None:
        """The most specific record of a prediction's scope with at least ``MIN_RUNS`` runs (module docstring); with
        ``drafts``, of the runs that drafted only."""
        found = {(r.model, r.hardware, r.framework, r.pricing, r.drafts): r for r in self.records}
        for key in scope_keys(model, hw, framework, drafts):
            record = found.get(key)
            if record is not None and record.tpot.runs >= MIN_RUNS:
                return record
        return None


def scope_keys(model: str, hw: Hardware, framework: str, drafts: bool = False) -> list[ScopeKey]:
    """The scopes a prediction (or a run) of ``model`` on ``hw`` under ``framework`` belongs to, most specific
    first: (model, system, framework), (system, framework), (system), and every datasheet-priced system; with
    ``drafts``, the same scopes of the runs that drafted."""
    keys: list[ScopeKey] = [(model, hw.name, framework, None, drafts), (None, hw.name, framework, None, drafts),
                            (None, hw.name, None, None, drafts)]
    if pricing_of(hw) == "datasheet":
        keys.append((None, None, None, "datasheet", drafts))
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


def quote(model: str, hw: Hardware, framework: str, drafted: bool = False) -> str:
    """The sentence ``simulate`` prints and a simulated run's manifest keeps (``target.track_record``): the record
    of the closest scope of ``model`` (its architecture's name) on ``hw`` under ``framework``, or that no measured
    run has checked that system; where some predicted points draft (``drafted``), the record of the runs that
    drafted beside it."""
    book = load_track_record()
    record = book.closest(model, hw, framework)
    if record is None:
        said = (f"track record: no measured runs of {hw.name} to check these predictions against (scoville "
                "calibrate fits a profile to your own)")
    else:
        said = (f"track record of {record.scope()}, on measured runs none was fitted to: "
                f"{record.summary(book.tolerance)}")
    if not drafted:
        return said
    drafting = book.closest(model, hw, framework, drafts=True)
    if drafting is None:
        return f"{said}. Its points with MTP drafts: no measured runs of {hw.name} with drafts to check them against"
    return f"{said}. Its points with MTP drafts, by the runs of {drafting.scope()}: {drafting.summary(book.tolerance)}"
