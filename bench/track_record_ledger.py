"""Write the simulator's track record (``scoville.sim.track_record``) from the validation bench's pinned views.

Every run the validation set holds on a stated deployment, predicted on it as ``bench_sim_validation.py`` views 1
(aggregated InferenceX runs), 1s (those read as MTP runs), 1g (disaggregated runs on their recipes; the seed
curves that TensorRT-LLM's host costs were fitted on left out), 1b (public points that name their deployment) and
1p (InferenceX's published runs, on the systems silicon_sample.csv does not cover),
grouped by model, system and framework, by system and framework, by system, and over every system priced from
its datasheet, each scope once over every run and once over the runs that drafted (MTP). Nothing here is fitted:
the file only records how often the predictions were right.

    python bench/track_record_ledger.py           # write src/scoville/data/reference/track_record.json
    python bench/track_record_ledger.py --check   # exit 1 if the shipped file is not what the bench gives now
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from importlib.metadata import version
from pathlib import Path

import msgspec
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sim_validation import (  # noqa: E402
    SEED_TAG,
    TOL,
    Cmp,
    pinned,
    pinned_disaggregated,
    pinned_public,
)
from scoville.catalog.hardware import load_hardware  # noqa: E402
from scoville.sim.track_record import (  # noqa: E402
    MetricRecord,
    ScopeKey,
    ScopeRecord,
    TrackRecord,
    load_track_record,
    scope_keys,
    track_record_path,
)
from validation_data import load_silicon  # noqa: E402
from validation_inferencex_api import load_api_runs, pinned_api  # noqa: E402

COMMAND = "python bench/track_record_ledger.py"


def pinned_runs() -> dict[str, list[Cmp]]:
    """Every pinned comparison of the validation set, by metric (module docstring)."""
    rows = [r for r in load_silicon() if not (r.inconsistent or r.beyond_bandwidth)]
    views = [pinned(rows).cmps, pinned(rows, speculative=True).cmps, pinned_disaggregated(rows)[0], pinned_public(),
             api_runs({r.hardware for r in rows})]
    return {m: [c for v in views for c in v.get(m, []) if c.scope is not None and SEED_TAG not in c.group]
            for m in ("tpot", "ttft", "tput")}


def api_runs(silicon_systems: set[str]) -> dict[str, list[Cmp]]:
    """View 1p's runs on the systems silicon_sample.csv does not cover (AMD's): InferenceX's API repeats runs the
    file holds on the others, which would count twice."""
    out: dict[str, list[Cmp]] = {"tpot": [], "ttft": [], "tput": []}
    for c in pinned_api(load_api_runs())[0]:
        if c.scope[1] in silicon_systems:
            continue
        for metric, cmps in out.items():
            cmps.append(Cmp(c.group, "public", c.measured[metric], c.predicted[metric], band=c.bands[metric],
                            scope=c.scope))
    return out


def _metric(cmps: list[Cmp]) -> MetricRecord | None:
    if not cmps:
        return None
    errs = np.array([abs(c.err) for c in cmps])
    hits = [c.covered for c in cmps if c.covered is not None]
    return MetricRecord(runs=len(cmps), within=round(float(np.mean(errs <= TOL)), 3),
                        in_band=round(float(np.mean(hits)), 3) if hits else None)


def ledger() -> TrackRecord:
    """The track record the validation set gives today."""
    grouped: dict[ScopeKey, dict[str, list[Cmp]]] = defaultdict(lambda: defaultdict(list))
    for metric, cmps in pinned_runs().items():
        for c in cmps:
            assert c.scope is not None
            model, hw, fw, drafted = c.scope
            system = load_hardware(hw)
            for key in scope_keys(model, system, fw) + (scope_keys(model, system, fw, drafts=True) if drafted else []):
                grouped[key][metric].append(c)
    records = []
    for key in sorted(grouped, key=lambda k: tuple("" if v is None else str(v) for v in k)):
        by_metric = grouped[key]
        tpot = _metric(by_metric["tpot"])
        if tpot is None:
            continue
        covers = tuple(sorted({c.scope[1] for c in by_metric["tpot"] if c.scope is not None}))
        records.append(ScopeRecord(model=key[0], hardware=key[1], framework=key[2], pricing=key[3], drafts=key[4],
                                   covers=covers, tpot=tpot, ttft=_metric(by_metric["ttft"]),
                                   tput=_metric(by_metric["tput"])))
    return TrackRecord(
        tolerance=TOL, regenerate=COMMAND,
        basis="each run of the validation set on a stated deployment (bench_sim_validation.py views 1, 1s, 1g, 1b "
              "and 1p), predicted on that deployment; no coefficient was fitted to any of them (the seed curves are "
              "left out)",
        aiconfigurator_core=version("aiconfigurator-core"), records=tuple(records))


def _one_record_a_line(record: TrackRecord) -> str:
    """The file's JSON with each scope on one line, so that a regenerated file's diff shows which scopes moved."""
    head = msgspec.to_builtins(record)
    scopes = head.pop("records")
    return (json.dumps(head, indent=1)[:-2] + ',\n "records": [\n'
            + ",\n".join("  " + json.dumps(s) for s in scopes) + "\n ]\n}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped file instead of writing it")
    args = ap.parse_args(argv)
    now = ledger()
    if args.check:
        same = now == load_track_record()
        print("the shipped track record is current" if same else f"the shipped track record is stale: run {COMMAND}")
        return 0 if same else 1
    track_record_path().write_text(_one_record_a_line(now))
    print(f"wrote {track_record_path()} ({len(now.records)} scopes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
