"""--repeats in the load plan: pass after pass, own indices and labels, fresh prompts per repeat."""

from pathlib import Path

import pytest

from scoville.errors import UserError
from scoville.load import LoadPoint, load_plan
from scoville.load_policy import point_sessions
from scoville.workload.prompts import prompt_token_ids
from scoville.workload.scenarios import resolve_workload

TRACES = Path(__file__).resolve().parents[1] / "src" / "scoville" / "data" / "traces"


def test_repeats_measure_every_load_once_per_pass_with_their_own_index_and_label():
    plain = load_plan("1,4", None)
    points = load_plan("1,4", None, repeats=3)
    assert [p.index for p in points] == list(range(6))
    assert [p.describe() for p in points] == ["c=1 #1", "c=4 #1", "c=1 #2", "c=4 #2", "c=1 #3", "c=4 #3"]
    assert [p.load_label() for p in points] == ["c=1", "c=4"] * 3
    assert [p.repeat for p in points] == [1, 1, 2, 2, 3, 3]
    # every repeat is the same load: only the index and the repeat number differ
    for p in points:
        base = plain[p.index % 2]
        assert (p.concurrency, p.num_requests, p.warmup_requests) == (base.concurrency, base.num_requests,
                                                                      base.warmup_requests)
    # no repeats: the plan an unrepeated command always had
    assert [p.describe() for p in plain] == ["c=1", "c=4"] and all(p.repeat is None for p in plain)
    assert load_plan("1,4", None, repeats=1) == plain


def test_run_repeats_its_one_rate_point():
    points = load_plan(None, "2", single=True, num_requests=5, repeats=2)
    assert [(p.index, p.rate, p.describe()) for p in points] == [(0, 2.0, "rate=2/s #1"), (1, 2.0, "rate=2/s #2")]


@pytest.mark.parametrize("repeats", [0, -1, 101])
def test_repeats_out_of_range_are_one_line_user_errors(repeats):
    with pytest.raises(UserError, match="--repeats must be between 1 and 100"):
        load_plan("1", None, repeats=repeats)


def _prompts(workload, point: LoadPoint) -> list[tuple[int, ...]]:
    return [tuple(prompt_token_ids(spec)) for s in point_sessions(workload, point) for spec in s.requests]


@pytest.mark.parametrize("workload", [
    resolve_workload(None, isl=64, osl=4, seed=7),
    resolve_workload("chat-multiturn", seed=7),
    resolve_workload(None, trace=TRACES / "mooncake_sample.jsonl", seed=7),
], ids=["synthetic", "sessions", "trace"])
def test_each_repeat_sends_prompts_no_other_repeat_sent(workload):
    first, second = load_plan("2", None, num_requests=3, warmup_requests=0, repeats=2)
    a, b = _prompts(workload, first), _prompts(workload, second)
    assert a and b
    assert not set(a) & set(b)
    assert _prompts(workload, first) == a  # and the same plan sends the same prompts again (seeded)


def test_repeats_survive_the_manifest_round_trip():
    from scoville.client.sweep import load_plan as manifest_plan
    from scoville.client.sweep import sweep_from_manifest
    from scoville.results.manifest import Manifest, Target

    points = load_plan("1,2", None, repeats=2)
    manifest = Manifest(load_plan=manifest_plan(points, seed=3, workers=1),
                        target=Target(base_url="http://127.0.0.1:1", model="m"),
                        workload=resolve_workload(None, isl=8, osl=2).to_dict())
    assert [p.label for p in manifest.load_plan.points] == ["c=1 #1", "c=2 #1", "c=1 #2", "c=2 #2"]
    assert sweep_from_manifest(manifest).points == points
