"""End to end over real HTTP: `scoville sweep --tokenizer` against the emulator streaming reasoning, then `show`."""

from __future__ import annotations

import pytest
from client_support import run_cli

from scoville.emulator.launch import spawn_emulator
from scoville.results.store import read_point_metrics, read_requests

pytestmark = pytest.mark.slow   # a child emulator and two CLI subprocesses

REASONING, OSL = 6, 16


def test_a_reasoning_sweep_records_ttfot_and_the_split_and_checks_counts(tmp_path, tiny_tokenizer):
    runs = tmp_path / "runs"
    with spawn_emulator("h200", "llama-3.1-8b", reasoning_tokens=REASONING) as emu:
        done = run_cli("run", "--url", emu.base_url, "--api", "chat", "--isl", "64", "--osl", str(OSL),
                       "--range-ratio", "1", "--concurrency", "2", "--num-requests", "6", "--warmup-requests", "0",
                       "--tokenizer", tiny_tokenizer, "--runs", str(runs), timeout=120)
    assert done.returncode == 0, done.stderr
    (run_dir,) = runs.iterdir()
    recs = read_requests(run_dir).to_pylist()
    assert len(recs) == 6 and all(r["ok"] for r in recs)
    for r in recs:
        assert r["output_tokens"] == r["output_tokens_requested"] == OSL
        assert r["reasoning_tokens"] == REASONING
        assert r["t_first_content"] > r["t_first_token"]        # the answer starts after the thinking
        assert r["output_tokens_local"] is not None and r["input_tokens_local"] is not None
    (row,) = read_point_metrics(run_dir)
    assert row["ttfot_s_median"] > row["ttft_s_median"]
    assert (row["reasoning_tokens_mean"], row["content_tokens_mean"]) == (REASONING, OSL - REASONING)
    # The emulator's own tokenizer is not the one trained here: its counts differ, and the sweep says so.
    assert row["output_tokens_mismatch"] > 0 and row["input_tokens_mismatch"] > 0
    assert "differ from --tokenizer's" in done.stdout + done.stderr
    shown = run_cli("show", run_dir.name, "--runs", str(runs), timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "TTFOT" in shown.stdout and "differ from --tokenizer's" in shown.stdout
