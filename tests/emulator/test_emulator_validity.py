"""A point measured against the built-in emulator, which honours every request, is stamped valid."""

from __future__ import annotations

from scoville.client import hostload
from scoville.client.config import ClientConfig
from scoville.client.sweep import Sweep, run_sweep
from scoville.load import concurrency_sweep
from scoville.power.sources import plan_power
from scoville.results.store import read_manifest, read_point_metrics, read_requests
from scoville.workload.synthetic import scenario


def test_a_clean_emulator_point_is_valid(emu, tmp_path, monkeypatch):
    # The test host's own load (other tests, a busy CI box) is no fault of the emulator: read it as idle.
    monkeypatch.setattr(hostload, "client_cpu_share", lambda start, end: 0.0)
    monkeypatch.setattr(hostload, "steal_share", lambda start, end: 0.0)
    sweep = Sweep(cfg=ClientConfig(base_url=emu.base_url, model=emu.model),
                  workload=scenario(None, isl=32, osl=8, seed=20261203),
                  points=concurrency_sweep([1, 2], num_requests=4, warmup_requests=1),
                  power=plan_power("rated", hardware="h200", accelerators=1), system=emu.system,
                  model={"name": emu.model},
                  # the emulator is shared by the module's tests and caches prefixes, as vLLM does: prompts of
                  # their own seed (workload and sweep), so no other test's prompts are in its cache, as a real
                  # sweep draws a fresh seed for both
                  seed=20261203)
    run = run_sweep(sweep, tmp_path).run_dir
    rows = read_point_metrics(run)
    assert [(r["valid"], r["invalid_reasons"]) for r in rows] == [(True, [])] * 2
    assert rows[0]["validity_basis"] == ("measured: checked errors, client CPU, steal, prefix cache, client vs server, "
                                         "output length")
    requests = read_requests(run)  # every request asked for its length and got it (the emulator honours ignore_eos)
    assert requests.column("output_tokens").to_pylist() == requests.column("output_tokens_requested").to_pylist()
    outcome = read_manifest(run).point_results["0"]
    assert outcome.client_cpu_share == 0.0 and outcome.steal_share == 0.0
