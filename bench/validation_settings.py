"""What InferenceX's benchmark scripts set for a run, beyond the simulator's defaults: the settings the validation
views pin a measured run with (``inferencex_recipe``: admission delays, token budgets, attention-DP balance, KV
cache, expert placement; ``mtp_recipe`` for a run read as speculative; ``served_layout``, the layout a run really
served with). Read off the scripts of SemiAnalysisAI/InferenceX's ``benchmarks/`` at the dates each docstring names;
nothing here is fitted. Shared by ``bench_sim_validation.py`` (views 1, 1s, 1e) and ``validation_inferencex_api.py``
(view 1p).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scoville.sim.acceptance import mtp_draft
from scoville.sim.config import AttentionDpBalanceConfig, SpeculativeConfig
from validation_data import SiliconRow


@dataclass(frozen=True)
class ScriptSettings:
    """The SimConfig settings a row's InferenceX script set beyond the defaults (part of its deployment; not
    ``scoville.sim.recipes.Recipe``, the deployments InferenceX's master configs sweep)."""

    max_num_batched_tokens: int | None = None
    batch_wait: tuple[int, float] | None = None     # TensorRT-LLM's (batch_wait_timeout_iters, ..._max_tokens_ratio)
    scheduler_recv_interval: int = 1                # SGLang's --scheduler-recv-interval
    gpu_memory_utilization: float | None = None     # SGLang's --mem-fraction-static, where it decides what fits
    adp_balance: AttentionDpBalanceConfig | None = None   # TensorRT-LLM's attention-DP balance
    experts_over_every_gpu: bool = False            # vLLM --enable-expert-parallel whatever the row's ep says
    moe_kernel: str = "auto"                        # vLLM's Marlin MoE where VLLM_MXFP4_USE_MARLIN=1
    mtp_depth: int | None = None                    # the MTP script's draft depth, for a run read as speculative
    async_scheduling: bool | None = None            # SGLang's overlap scheduler under drafts (SGLANG_ENABLE_SPEC_V2)
    layout: tuple[int, int, int] | None = None      # (tp, dp, ep) the script chose, where the row records tp only
    kv_dtype: str | None = None                     # the KV cache the script ran, where read (AUTO_KV_UNTIL)

    @property
    def delays(self) -> bool:
        """Whether the recipe delays admissions (batch waiting, a poll interval or the attention-DP balance)."""
        return self.delay is not None

    @property
    def delay(self) -> str | None:
        """The admission delay the recipe sets (view 1e reports each apart), None without one."""
        if self.adp_balance is not None:
            return "attention-DP balance"
        if self.batch_wait is not None:
            return "batch waiting"
        return "poll interval" if self.scheduler_recv_interval > 1 else None

    def settings(self) -> dict[str, object]:
        out: dict[str, object] = {"scheduler_recv_interval": self.scheduler_recv_interval}
        if self.max_num_batched_tokens:
            out["max_num_batched_tokens"] = self.max_num_batched_tokens
        if self.batch_wait:
            out["batch_wait"] = {"iters": self.batch_wait[0], "max_tokens_ratio": self.batch_wait[1]}
        if self.gpu_memory_utilization:
            out["gpu_memory_utilization"] = self.gpu_memory_utilization
        if self.adp_balance:
            out["attention_dp_balance"] = self.adp_balance.model_dump()
        if self.moe_kernel != "auto":
            out["moe_kernel"] = self.moe_kernel
        if self.speculative is not None:
            out["speculative"] = self.speculative.model_dump()
        if self.async_scheduling is not None:
            out["async_scheduling"] = self.async_scheduling
        return out

    @property
    def speculative(self) -> SpeculativeConfig | None:
        """The MTP script's drafts at the search's acceptance rate for that depth; None for a plain run."""
        if not self.mtp_depth:
            return None
        return mtp_draft(self.mtp_depth)


# InferenceX's scripts that leave the KV cache to the server's auto (vLLM: no --kv-cache-dtype; TensorRT-LLM:
# kv_cache_config dtype auto), which is the model's BF16 for these checkpoints, until the date they set fp8 ("9999":
# not in the versions read, to 2026-08): gptoss_fp4_{b200,h100,h200}.sh, gptoss_fp4_h200_trt.sh,
# minimaxm2.5_fp8_{b200,h100,h200}.sh, kimik2.5_int4_{b200,h200}.sh, every version. A row of that very date is
# taken as after it. kimik2.5_fp4_{b200,b300}.sh leave it to auto too, but serve NVIDIA's ModelOpt NVFP4
# checkpoint, whose kv_cache_quant_algo FP8 vLLM's auto has honoured since PR #29980 (2025-12; the rows ran
# vLLM 0.15 and later): an FP8 cache. AMD's SGLang DeepSeek-R1 FP8 scripts (dsr1_fp8_{mi300x,mi325x,mi355x}.sh and
# their _docker/_slurm forerunners, read back to 2025-09) left SGLang's auto, the model's BF16, until they passed
# --kv-cache-dtype fp8_e4m3 (32772c579 / e9b6e0fde on MI300X / MI325X, 9d39c92ee on MI355X; their MTP scripts were
# cut from those in May 2026 and set it from the start). The other InferenceX scripts the rows ran set FP8, as
# ``simulate`` assumes.
AUTO_KV_UNTIL = {("openai/gpt-oss-120b", "b200", "nvfp4", "vllm"): "2025-12-05",
                 ("openai/gpt-oss-120b", "h100", "nvfp4", "vllm"): "9999",
                 ("openai/gpt-oss-120b", "h200", "nvfp4", "vllm"): "9999",
                 ("openai/gpt-oss-120b", "h200", "nvfp4", "trtllm"): "9999",
                 ("MiniMaxAI/MiniMax-M2.5", "b200", "fp8", "vllm"): "2026-04-03",
                 ("MiniMaxAI/MiniMax-M2.5", "h100", "fp8", "vllm"): "9999",
                 ("MiniMaxAI/MiniMax-M2.5", "h200", "fp8", "vllm"): "2026-05-26",
                 ("moonshotai/Kimi-K2.5", "b200", "int4", "vllm"): "9999",
                 ("moonshotai/Kimi-K2.5", "h200", "int4", "vllm"): "9999",
                 ("deepseek-ai/DeepSeek-R1-0528", "mi300x", "fp8", "sglang"): "2026-01-23",
                 ("deepseek-ai/DeepSeek-R1-0528", "mi325x", "fp8", "sglang"): "2026-01-23",
                 ("deepseek-ai/DeepSeek-R1-0528", "mi355x", "fp8", "sglang"): "2026-03-05"}

# InferenceX's SGLang MTP scripts that export SGLANG_ENABLE_SPEC_V2=1 (dsr1_fp4_b200_mtp.sh, dsr1_fp8_h200_mtp.sh),
# keeping the overlap scheduler on under drafts; the FP8 B200/B300 ones set it without export (mtp_recipe), and the
# SGLang 0.5.8/0.5.9 their rows ran turned the overlap off under drafts by default (SimConfig.schedules_ahead)
SGLANG_SPEC_V2_EXPORTED = {("b200", "nvfp4"), ("h200", "fp8")}


def sglang_drafts_overlap(hardware: str, precision: str | None) -> bool:
    """Whether the SGLang MTP runs of a group ran their drafts under the overlap scheduler (``mtp_recipe``)."""
    return (hardware, precision) in SGLANG_SPEC_V2_EXPORTED


# Until InferenceX's configs named ep (17d5e204f, 2025-11-03), its TensorRT-LLM DeepSeek-R1 and gpt-oss scripts
# (read at e06929c, 2025-11-02) chose expert parallelism, attention DP and the token budget themselves, and its
# SGLang DeepSeek-R1 NVFP4 B200 script passed --enable-ep-moe; the rows of those runs record tp only
# (_trtllm_script_recipe, inferencex_recipe). Their MoE backend (DeepSeek-R1: DEEPGEMM for FP8 on B200,
# CUTLASS on H200 and under attention DP, TRTLLM otherwise; gpt-oss on H200: TRITON) is not a setting of the
# simulator: FP8 B200 without attention DP is priced as the TRTLLM backend runs.
IN_SCRIPT_LAYOUT_UNTIL = "2025-11-03"
TRTLLM_DSR1_FP8_DP_ABOVE = {"h200": {(1024, 1024): 64, (1024, 8192): 64, (8192, 1024): 32},
                            "b200": {(1024, 1024): 32, (1024, 8192): 64, (8192, 1024): 64}}
TRTLLM_DSR1_FP4_EP_ABOVE = {4: {(1024, 1024): 32, (1024, 8192): 32, (8192, 1024): 32},
                            8: {(1024, 1024): 8, (1024, 8192): 16, (8192, 1024): 32}}

# InferenceX's TensorRT-LLM attention-DP balance per model; TensorRT-LLM's defaults for the others
TRTLLM_ADP_BALANCE = {"deepseek-r1": AttentionDpBalanceConfig(timeout_iters=60, batching_wait_iters=0)}


def trtllm_adp_balance(model: str) -> AttentionDpBalanceConfig:
    """The attention-DP balance InferenceX's TensorRT-LLM recipes set for ``model`` (TRTLLM_ADP_BALANCE)."""
    return TRTLLM_ADP_BALANCE.get(model, AttentionDpBalanceConfig())


def trtllm_one_prompt_budget(decode_tokens: int, prompt: int) -> int:
    """The --max_num_tokens InferenceX's TensorRT-LLM DeepSeek-R1 scripts derive: a step's decode tokens beside one
    prompt, ``(decodes + prompt + 64 + 63) / 64 * 64`` in shell integer arithmetic."""
    return (decode_tokens + prompt + 127) // 64 * 64


def sglang_recv_interval(concurrency: int) -> int:
    """The --scheduler-recv-interval InferenceX's SGLang DeepSeek-R1 B200/B300 scripts set: a poll for new requests
    every 10 decode steps below 16 users, every 30 from 16."""
    return 10 if concurrency < 16 else 30


# The vLLM recipes whose test `[ "$EP_SIZE" -ge 1 ]` passed --enable-expert-parallel to every run (EP_SIZE is 1
# where the search space names no ep, so the rows say ep 1): from, until (exclusive) the dates of their commits
VLLM_EXPERT_PARALLEL_ALWAYS = {("MiniMaxAI/MiniMax-M2.5", "b200", "fp8"): ("2026-03-11", "2026-04-03"),
                               ("MiniMaxAI/MiniMax-M2.5", "h200", "fp8"): ("2026-03-13", "9999")}

# The vLLM recipes that export VLLM_MXFP4_USE_MARLIN=1 (gptoss_fp4_{h100,h200}.sh): from, until (exclusive) the dates
# of the commits that added it (4e52ed4c6, "Fix H100/H200 perf regression" with vLLM 0.13) and moved those scripts
# away (303669b0e)
VLLM_MARLIN_MOE = {("openai/gpt-oss-120b", "h100"): ("2026-01-02", "2026-07-02"),
                   ("openai/gpt-oss-120b", "h200"): ("2026-01-02", "2026-07-02")}

# The vLLM recipes that set --max-num-batched-tokens "$((ISL * 2))", from the date their commit landed (model,
# hardware, precision as the rows name them); every other vLLM recipe the rows ran passes 8192 or nothing, which
# is 8192 on these GPUs (vLLM's default for `vllm serve` on >= 70 GiB, 0.11 to 0.19)
VLLM_TWICE_THE_PROMPT_BUDGET = {("MiniMaxAI/MiniMax-M2.5", "b200", "fp8"): "2026-04-03",
                                ("MiniMaxAI/MiniMax-M2.5", "b200", "nvfp4"): "2026-04-08",
                                ("MiniMaxAI/MiniMax-M2.5", "b300", "fp8"): "2026-04-17",
                                ("MiniMaxAI/MiniMax-M2.5", "b300", "nvfp4"): "2026-04-17",
                                ("moonshotai/Kimi-K2.5", "b200", "nvfp4"): "2026-04-20"}


def inferencex_recipe(row: SiliconRow) -> ScriptSettings:
    """What InferenceX's recipes set, at the row's date, that the simulator models (benchmarks/ in the InferenceX
    repository; its versions from 2025-10 to 2026-04 were read):
    - TensorRT-LLM Llama-70B on B200 and H200 (70b_fp{8,4}_{b200,h200}_trt_slurm.sh, 2025-10; the rows were
      measured 2025-10-29): --max_num_tokens 16384, and at 1k/1k below TP8 batch waiting 20 steps / 0.9 ("will
      improve the performance" of 1k/1k, says the recipe);
    - TensorRT-LLM DeepSeek-R1 and gpt-oss-120b before the configs named ep (2025-11-03; the rows measured
      2025-11-02): the layout the script chose from the lengths and concurrency, EP over the GPUs and attention DP
      with its balance at high concurrency, and its --max_num_tokens (_trtllm_script_recipe);
    - TensorRT-LLM DeepSeek-R1 FP8 on B200 (dsr1_fp8_b200_trt.sh from 2026-01-27): at 1k/1k from 64 users batch
      waiting 40 steps / 0.8 (its token budget is the default 8,192 there); TensorRT-LLM skips batch waiting
      under attention DP;
    - TensorRT-LLM under attention DP (every DEP recipe from 2025-11-21, the earliest read, to 2026-06):
      ``attention_dp_config.enable_balance``, with timeout_iters 60 and batching_wait_iters 0 for DeepSeek-R1
      (dsr1_fp{4,8}_b200_trt, dsr1_fp8_h200_trt) and TensorRT-LLM's defaults, 50 and 10, for gpt-oss;
    - SGLang DeepSeek-R1 on B200 and B300 (dsr1_fp{8,4}_{b200,b300}*.sh, every version): --scheduler-recv-interval
      10 below 16 users and 30 from 16 (and, in the NVFP4 B200 script of 2025-11-02, --enable-ep-moe); the FP8
      TP4 8k/1k deployment (only in the 2026-03 recipe) polls every 10 and gives SGLang 95% of memory
      (--mem-fraction-static 0.95: its 168 GB of weights a GPU leave the default 90% no KV cache). The H200
      recipe sets none.
    - vLLM MiniMax-M2.5 on B200 and B300 and Kimi-K2.5 FP4 on B200 (minimaxm2.5_fp{8,4}_{b200,b300}.sh,
      kimik2.5_fp4_b200.sh, 2026-03 to 2026-04): --max-num-batched-tokens twice the prompt (2,048 at 1k, 16,384
      at 8k) from the dates in VLLM_TWICE_THE_PROMPT_BUDGET (a row of that very date is taken as after it; the
      B300 scripts first appeared then, so earlier B300 rows keep the default); MiniMax-M2.5 FP8 on B200 (until
      2026-04-03) and H200 (from 2026-03-13): expert parallelism over every GPU whatever ep the row records
      (VLLM_EXPERT_PARALLEL_ALWAYS). Every vLLM recipe the rows ran kept vLLM's async scheduling on (the flag
      where the release defaulted it off), as ``SimConfig`` does.
    - vLLM gpt-oss-120b on H100 and H200 (gptoss_fp4_{h100,h200}.sh, 2026-01-02 to 2026-07): VLLM_MXFP4_USE_MARLIN=1,
      the experts on Marlin kernels (VLLM_MARLIN_MOE).
    A run read as speculative takes its MTP script's settings instead (``mtp_recipe``). Nothing for other rows.
    Each comes with the KV cache its script ran where that was read (``script_kv_cache``)."""
    recipe = mtp_recipe(row) if row.suspected_speculative else _recipe_settings(row)
    kv = script_kv_cache(row)
    return replace(recipe, kv_dtype=kv) if kv else recipe


def script_kv_cache(row: SiliconRow) -> str | None:
    """The KV-cache format an InferenceX row ran where its script was read (AUTO_KV_UNTIL): the server's auto,
    the model's BF16, before the date the script set fp8, FP8 from it; None (``simulate``'s auto) elsewhere."""
    until = AUTO_KV_UNTIL.get((row.model_id, row.hardware, row.precision or "", row.framework))
    if until is None or not row.measured or "gap" in row.source:
        return None
    return "bf16" if row.measured < until else "fp8"


def _recipe_settings(row: SiliconRow) -> ScriptSettings:
    """``inferencex_recipe`` of a plain run, but its KV cache."""
    one_k = row.isl == row.osl == 1024
    if row.framework == "trtllm" and "" < row.measured < IN_SCRIPT_LAYOUT_UNTIL:
        in_script = _trtllm_script_recipe(row)
        if in_script is not None:
            return in_script
    if row.framework == "trtllm" and row.model == "llama-3.1-70b" and row.hardware in ("b200", "h200"):
        return ScriptSettings(16384, (20, 0.9) if one_k and row.tp < 8 else None)
    if (row.framework == "trtllm" and row.model == "deepseek-r1" and row.hardware == "b200"
            and row.precision == "fp8" and one_k and row.concurrency >= 64 and row.dp == 1
            and row.measured >= "2026-01-27"):
        return ScriptSettings(batch_wait=(40, 0.8))
    if row.framework == "trtllm" and row.dp > 1:
        return ScriptSettings(adp_balance=trtllm_adp_balance(row.model))
    if row.framework == "sglang" and row.model == "deepseek-r1" and row.hardware in ("b200", "b300"):
        if row.precision == "fp8" and row.tp == 4:
            return ScriptSettings(scheduler_recv_interval=10, gpu_memory_utilization=0.95)
        # the NVFP4 script of 2025-11-02 passed --enable-ep-moe, which its rows do not record
        ep_moe = row.precision == "nvfp4" and "" < row.measured < IN_SCRIPT_LAYOUT_UNTIL
        return ScriptSettings(scheduler_recv_interval=sglang_recv_interval(row.concurrency),
                              layout=(row.tp, 1, row.tp) if ep_moe else None)
    if row.framework == "vllm":
        key = (row.model_id, row.hardware, row.precision or "")
        since = VLLM_TWICE_THE_PROMPT_BUDGET.get(key)
        start, end = VLLM_EXPERT_PARALLEL_ALWAYS.get(key, ("", ""))
        marlin_from, marlin_until = VLLM_MARLIN_MOE.get((row.model_id, row.hardware), ("", ""))
        twice_the_prompt = since is not None and row.measured >= since
        return ScriptSettings(max_num_batched_tokens=2 * row.isl if twice_the_prompt else None,
                              experts_over_every_gpu=start <= row.measured < end,
                              moe_kernel="marlin" if marlin_from <= row.measured < marlin_until else "auto")
    return ScriptSettings()


# Under attention DP, TensorRT-LLM's B200 MTP scripts cap a rank's batch at the concurrency over this, or at the
# concurrency below it (dsr1_fp8_b200_trt_mtp.sh 8, dsr1_fp4_b200_trt_mtp.sh 4); dsr1_fp8_h200_trt_mtp.sh at the
# concurrency over the TP size, at least 1
TRTLLM_MTP_DP_BATCH_DIVISOR = {("b200", "fp8"): 8, ("b200", "nvfp4"): 4}


def mtp_recipe(row: SiliconRow) -> ScriptSettings:
    """What InferenceX's MTP scripts set for a DeepSeek-R1 run read as speculative (the scripts from 2026-02 to
    2026-06 were read; the runs date from 2026-01 to 2026-03):
    - TensorRT-LLM (dsr1_fp{8,4}_b200_trt_mtp.sh, dsr1_fp8_h200_trt_mtp.sh): ``num_nextn_predict_layers`` 3, and 1
      under attention DP (with its balance, as the plain recipes); ``max_num_tokens`` a rank
      ((depth + 1) x batch + prompt + 127) rounded down to 64, one prompt a step beside a full batch's drafts, with
      the rank's batch the concurrency, or its share under attention DP (TRTLLM_MTP_DP_BATCH_DIVISOR);
    - SGLang (dsr1_fp{8,4}_{b200,b300}_mtp.sh, dsr1_fp8_h200_mtp.sh): EAGLE with ``--speculative-num-steps 2``, and on
      B200/B300 the plain recipes' poll for new requests (every 10 steps below 16 users, 30 from 16); the FP8
      B200/B300 scripts write ``SGLANG_ENABLE_SPEC_V2=1`` without exporting it (FP8 B200's since its first version,
      e62c6acdf of 2026-02-05), so those servers run SGLang's default, drafts without the overlap scheduler
      (``SimConfig.schedules_ahead``); the FP4 B200 and H200 scripts export it (SGLANG_SPEC_V2_EXPORTED).
    None for other frameworks: InferenceX ran no other aggregated MTP recipe of a model in the file."""
    if row.framework == "trtllm":
        depth = 1 if row.dp > 1 else 3
        divisor = TRTLLM_MTP_DP_BATCH_DIVISOR.get((row.hardware, row.precision or ""))
        if row.dp == 1:
            batch = row.concurrency
        elif divisor:
            batch = row.concurrency if row.concurrency < divisor else row.concurrency // divisor
        else:
            batch = max(row.concurrency // row.dp, 1)
        budget = trtllm_one_prompt_budget((depth + 1) * batch, row.isl)
        balance = trtllm_adp_balance(row.model) if row.dp > 1 else None
        return ScriptSettings(max_num_batched_tokens=budget, adp_balance=balance, mtp_depth=depth)
    if row.framework == "sglang":
        poll = sglang_recv_interval(row.concurrency) if row.hardware in ("b200", "b300") else 1
        return ScriptSettings(scheduler_recv_interval=poll, mtp_depth=2,
                              async_scheduling=sglang_drafts_overlap(row.hardware, row.precision))
    return ScriptSettings()


def served_layout(row: SiliconRow) -> tuple[int, int, int]:
    """The (tp, attention dp, ep) the row's run served with: the layout its script chose where the row records
    tp only (IN_SCRIPT_LAYOUT_UNTIL), expert parallelism over every GPU where its recipe turned it on
    whatever ep the row records (VLLM_EXPERT_PARALLEL_ALWAYS), else the row's own."""
    recipe = inferencex_recipe(row)
    if recipe.layout is not None:
        return recipe.layout
    return row.tp, row.dp, row.tp * row.dp if recipe.experts_over_every_gpu else row.ep


def _trtllm_script_recipe(row: SiliconRow) -> ScriptSettings | None:
    """What InferenceX's TensorRT-LLM scripts of 2025-09 to 2025-11-02 chose themselves (IN_SCRIPT_LAYOUT_UNTIL),
    for the models whose rows of that date record tp only; None for the others.
    - DeepSeek-R1 (dsr1_fp8_{b200,h200}_trt_slurm.sh, dsr1_fp4_b200_trt_slurm.sh): FP8 ran EP = TP always and
      attention DP above TRTLLM_DSR1_FP8_DP_ABOVE users; NVFP4 on B200 ran EP = TP above
      TRTLLM_DSR1_FP4_EP_ABOVE users and attention DP from 256 (at 8k/1k above 32, with EP); --max_num_tokens
      (users + prompt + 127) rounded down to 64, one prompt beside the decodes.
    - gpt-oss-120b (gptoss_fp4_{b200,h200}_trt_slurm.sh): on H200 EP = TP always; on B200 EP = TP and attention DP
      from 256 users; --max_num_tokens 20000.
    Attention DP comes with its balance (TRTLLM_ADP_BALANCE)."""
    lengths, c, tp = (row.isl, row.osl), row.concurrency, row.tp
    if row.model == "deepseek-r1" and (row.hardware, row.precision) in (("h200", "fp8"), ("b200", "fp8")):
        ep, dp = tp, c > TRTLLM_DSR1_FP8_DP_ABOVE[row.hardware][lengths]
        budget = trtllm_one_prompt_budget(c, row.isl)
    elif row.model == "deepseek-r1" and (row.hardware, row.precision) == ("b200", "nvfp4"):
        ep = tp if c > TRTLLM_DSR1_FP4_EP_ABOVE[tp][lengths] else 1
        dp = c > 32 if lengths == (8192, 1024) else c >= 256
        budget = trtllm_one_prompt_budget(c, row.isl)
    elif row.model == "gpt-oss-120b" and row.hardware in ("h200", "b200"):
        dp = row.hardware == "b200" and c >= 256
        ep, budget = tp if dp or row.hardware == "h200" else 1, 20000
    else:
        return None
    balance = trtllm_adp_balance(row.model) if dp else None
    layout = (1, tp, ep) if dp else (tp, 1, ep)
    return ScriptSettings(max_num_batched_tokens=budget, adp_balance=balance, layout=layout)
