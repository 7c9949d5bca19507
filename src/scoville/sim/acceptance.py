"""How many MTP drafts DeepSeek-style models accept, and how sure the simulator is of it.

Speculative decoding's gain is the mean acceptance length (AL: tokens a verify step yields), and AL is a property
of the workload as much as of the draft head: the same DeepSeek-V4-Pro MTP head accepts 2.49 tokens a step on
coding prompts with thinking on and 2.97 with it off (InferenceX's golden AL table, below). A predicted TPOT is
the step time over AL, so the prior AL's spread is as much a part of the prediction's band as the kernels' is;
without it an MTP point's band claimed the kernels' certainty for a number no kernel table speaks to.
"""

from __future__ import annotations

import math

from scoville.sim.config import SpeculativeConfig
from scoville.stats import Z90

# Per-draft acceptance of DeepSeek's MTP head used for k chained drafts (SpeculativeConfig's constant rate a
# with mean acceptance length (1 - a^(k+1)) / (1 - a)): k=1 from the DeepSeek-V3 technical report §5.4.3 (the
# second token is accepted 85-90% of the time: AL 1.85); k=2, 3 give AL 2.31 and 2.42 (chained drafts from one MTP
# layer lose accuracy with depth, hence the falling rate). A cross-check, not a fit: TensorRT-LLM's tech blog 2
# ("DeepSeek R1 MTP Implementation and Optimization") measured MTP nextn=3 at 2.16x the plain decode speed at one
# user on 8 B200 (FP4, attention TP8, MoE EP2, 1k/2k), and this model gives 2.08x for that deployment.
MTP_ACCEPTANCE = {1: 0.85, 2: 0.75, 3: 0.67}

# Published mean acceptance lengths of DeepSeek MTP heads per draft depth, over the workloads their sources ran:
# DeepSeek-V3 technical report §5.4.3 (k=1: 85-90% of second tokens accepted, AL 1.85-1.90), and InferenceX's
# golden AL table for DeepSeek-V4-Pro's MTP (SemiAnalysisAI/InferenceX golden_al_distribution/dsv4_mtp.yaml:
# SPEED-Bench coding prompts, temperature 1.0, vLLM on B300; thinking on 1.79 / 2.27 / 2.49, off 1.92 / 2.61 /
# 2.97 at 1 / 2 / 3 drafts). That table's README adds that random-token prompts, which InferenceX's 1k/1k and
# 8k/1k scenarios send, distort acceptance; no source gives DeepSeek-R1's AL on them.
PUBLISHED_MTP_ACCEPTANCE_LENGTHS: dict[int, tuple[float, ...]] = {
    1: (1.85, 1.90, 1.79, 1.92),
    2: (2.27, 2.61),
    3: (2.49, 2.97),
}


def acceptance_sigma(depth: int) -> float:
    """Log-space spread of the prior AL at ``depth`` drafts (1-3): the published AL farthest from the prior
    (``PUBLISHED_MTP_ACCEPTANCE_LENGTHS``) sits at the edge of the 80% band, the narrowest band that holds every
    published workload."""
    prior = SpeculativeConfig(num_draft_tokens=depth, acceptance_rate=MTP_ACCEPTANCE[depth]).mean_acceptance_length
    return max(abs(math.log(al / prior)) for al in PUBLISHED_MTP_ACCEPTANCE_LENGTHS[depth]) / Z90


def mtp_draft(depth: int) -> SpeculativeConfig:
    """The drafts the search tries at ``depth`` (1-3): the prior acceptance rate and its spread."""
    return SpeculativeConfig(num_draft_tokens=depth, acceptance_rate=MTP_ACCEPTANCE[depth],
                             acceptance_sigma=acceptance_sigma(depth))
