"""The MTP acceptance prior carries its published spread into every speculative prediction's band."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scoville.sim.acceptance import MTP_ACCEPTANCE, PUBLISHED_MTP_ACCEPTANCE_LENGTHS, acceptance_sigma, mtp_draft
from scoville.sim.analytic import band
from scoville.sim.config import SimConfig, SpeculativeConfig
from scoville.sim.search import SearchSpace, draft_options
from scoville.sim.steady import estimate
from scoville.simulation import parse_mtp


@pytest.mark.parametrize("depth", sorted(MTP_ACCEPTANCE))
def test_every_published_acceptance_length_lies_in_the_priors_band(depth: int) -> None:
    draft = mtp_draft(depth)
    lo, hi = band(draft.mean_acceptance_length, draft.acceptance_sigma)
    published = PUBLISHED_MTP_ACCEPTANCE_LENGTHS[depth]
    assert all(lo * (1 - 1e-9) <= al <= hi * (1 + 1e-9) for al in published)
    # the narrowest such band: the farthest published figure sits on its edge
    assert min(abs(math.log(lo / al)) for al in published) < 1e-9 or \
        min(abs(math.log(hi / al)) for al in published) < 1e-9


def test_deeper_drafts_are_less_certain() -> None:
    sigmas = [acceptance_sigma(k) for k in sorted(MTP_ACCEPTANCE)]
    assert all(0 < a < b for a, b in zip(sigmas, sigmas[1:], strict=False))


def test_the_search_drafts_carry_the_spread_and_pinned_drafts_do_not() -> None:
    from scoville.catalog.models import load_model

    drafts = draft_options(SimConfig(hardware="mi355x", model="deepseek-r1"), load_model("deepseek-r1"),
                           SearchSpace())
    assert [d.acceptance_sigma > 0 for d in drafts[1:] if d is not None] == [True] * len(MTP_ACCEPTANCE)
    _, pinned = parse_mtp("2:0.8")
    assert pinned is not None and pinned.acceptance_sigma == 0.0


def _pair(disaggregated: bool) -> tuple[SimConfig, SimConfig]:
    """The same MTP deployment of DeepSeek-R1 on MI355X (priced by the transfer: no tables needed) with its
    acceptance certain and with the prior's spread."""
    base = {"hardware": "mi355x", "model": "deepseek-r1", "precision": "fp8", "parallel": {"tp": 8}}
    if disaggregated:
        base["disaggregation"] = {"prefill": {"parallel": {"tp": 8}}, "decode": {"parallel": {"tp": 8}}}
    certain = SpeculativeConfig(num_draft_tokens=3, acceptance_rate=MTP_ACCEPTANCE[3])
    return (SimConfig.model_validate({**base, "speculative": certain.model_dump()}),
            SimConfig.model_validate({**base, "speculative": mtp_draft(3).model_dump()}))


@pytest.mark.parametrize("disaggregated", [False, True])
def test_acceptance_spread_widens_the_decode_band_and_ttft_only_by_the_decode_pace(disaggregated: bool) -> None:
    certain, prior = _pair(disaggregated)
    users = np.array([1.0, 16.0, 128.0])
    a, b = estimate(certain, 8192, 1024, users), estimate(prior, 8192, 1024, users)
    np.testing.assert_allclose(b.tpot, a.tpot)                   # the centre does not move
    np.testing.assert_allclose(b.sigma, np.hypot(a.sigma, acceptance_sigma(3)))
    if disaggregated:   # the decode pool's pace, its acceptance with it, sets how close arrivals come to prefill's
        assert np.all(b.sigma_ttft >= a.sigma_ttft)               # capacity (steady._pools_ttft_sigma)
        np.testing.assert_allclose(b.sigma_ttft[0], a.sigma_ttft[0], rtol=1e-3)   # one user waits for no one
    else:
        np.testing.assert_allclose(b.sigma_ttft, a.sigma_ttft)   # a prompt's prefill drafts nothing
