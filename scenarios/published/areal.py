"""AReaL: the blog's 1.5B synchronous and asynchronous hours, their 2.77x, and the eta trend.

Sources: inclusionAI/AReaL ``blog/AReaL_v0_3.md`` (Table 2, Fig. 7), the paper arXiv 2505.24298,
AReaL's README and its nightly runner (named beside each value). The preset is
:func:`scenarios.systems.areal` (the staleness manager's capacity, interruptible rollouts).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pipesim.compute import GPUS, MODELS, EngineConfig, TokenWorkload, TrainerConfig
from pipesim.compute.profiles import profile
from pipesim.plan.stats import Paired, paired
from scenarios import systems
from scenarios.published import common
from scenarios.published.common import (
    LENGTHS_DISTILL,
    POINT,
    PROMPT_TOKENS,
    Measured,
    RunCache,
    Variant,
    _cluster,
    _trainer,
    math_workload,
)

AREAL_STEPS = 1000  # blog, Table 2: 1,000 PPO steps
AREAL_ETA = 4
"""max_head_offpolicyness for the 1.5B math run: the blog's "moderate staleness (eta <= 4) has
minimal impact", and AReaL's async-PPO examples use ``max_head_offpolicyness=4``."""


def areal_engine() -> EngineConfig:
    # actor.bf16=False in the nightly runner: fp16 with loss scaling, not fp32 (realhf/api/cli_args.py
    # v0.3.0, ModelTrainEvalConfig.bf16: "Use bf16 precision (otherwise fp16)"); an H800's fp16
    # and bf16 dense peaks are the same, so the trainer counts the bf16 peak
    return EngineConfig(
        model=MODELS["deepseek-r1-distill-qwen-1.5b"],  # blog: R1-Distill-Qwen-1.5B
        gpu=GPUS["h800"],  # AReaL's README: "16 nodes, each equipped with 8 H800 GPUs"
        tp=1,  # one GPU per SGLang server (allocation_mode sglang.d96p1t1)
        max_model_len=PROMPT_TOKENS + 27 * 1024,
    )


def areal_workload(v: Variant = POINT) -> TokenWorkload:
    # 16 responses per question, 27K maximum generation length (blog; 27 x 1024 = the runner's 27,648)
    return math_workload(LENGTHS_DISTILL, 27 * 1024, 16, v)


AREAL_GPUS = 128  # 16 nodes x 8
AREAL_TRAIN_GPUS = AREAL_GPUS // 4
"""AReaL's quickstart for 16 nodes: "12 nodes for generation, 4 nodes for training",
``allocation_mode=sglang.d96p1t1+d32p1t1`` (96 SGLang servers at TP 1, 32 trainer GPUs)."""


AREAL_PROMPTS = 512
"""Prompts per step (``dataset.train_bs_n_seqs=512``, with ``group_size=16`` and
``ppo.gen.max_new_tokens=27648``, in AReaL's nightly runner of the 1.5B 16-node run)."""
AREAL_SYNC_TRAIN_GPUS = 64
"""The synchronous 1.5B 16-node run (AReaL's nightly runner, realhf ``ppo-math``):
``allocation_mode=sglang.d64m1p1+d64p1m1``, 64 GPUs generate and 64 train, one phase at a time."""


AREAL_PROFILE = "megatron-dense"
"""AReaL v0.3 (boba) trains with realhf's ``megatron`` backend, the only choice of
``ModelTrainEvalConfig.backend`` (``realhf/api/cli_args.py`` at v0.3.0): ReaL's own model under
Megatron-core's ``DistributedDataParallel`` with ``use_distributed_optimizer``,
``overlap_grad_reduce`` and ``grad_reduce_in_fp32`` (``DistributedDataParallelConfig``), not verl's
FSDP2. Gradient checkpointing is on (the default there), as in verl's calibration row
(``enable_gradient_checkpointing: True`` in verl's ``hf_model.yaml``): the profile's efficiencies
absorb the recomputed forward alike."""
AREAL_TRAIN_TP = 1
"""The trainer's layout: ``d32p1m1`` (async) and ``d64p1m1`` (sync) in ``allocation_mode`` are data
parallel 32 or 64, pipeline 1, model (tensor) parallel 1; ``megatron-dense``'s tp 4 is replaced."""
AREAL_PPO_MINIBATCHES = 4
"""``ppo.ppo_n_minibatches=4`` (the nightly runner and ``training/configs/async-ppo.yaml``): four
optimizer steps per step; realhf's ``ppo_interface.py`` splits each rank's share by samples."""
AREAL_MAX_TOKENS_PER_MB = 30720
"""``actor_train.mb_spec.max_tokens_per_mb=30720`` (the runner and ``async-ppo.yaml``): the
training micro-batch's token budget per GPU; ``async-ppo.yaml`` sets ``actor_inf`` (the proximal
log-probs' recompute) to the same."""
AREAL_SYNC_LOG_PROB_TOKENS = 10**12
"""The nightly runner leaves ``actor_inf.mb_spec`` at realhf's default ``MicroBatchSpec``
(``n_mbs=1``, ``max_tokens_per_mb=int(1e12)``): one forward micro-batch per rank in the sync run."""


def areal_trainer(train_gpus: int, sync_runner: bool, v: Variant = POINT) -> TrainerConfig:
    """AReaL's trainer as its 1.5B runs state it: :data:`AREAL_PROFILE` at :data:`AREAL_TRAIN_TP`,
    :data:`AREAL_PPO_MINIBATCHES` mini-batches, :data:`AREAL_MAX_TOKENS_PER_MB` per micro-batch;
    the proximal log-probs recomputed (``recompute_logprob`` and ``use_decoupled_loss``), no
    reference model (``ppo.kl_ctl=0.0``: ``ppo_math_exp.py`` drops ``ref_inf``). ``sync_runner``:
    the synchronous nightly runner's ``actor_inf`` budget (:data:`AREAL_SYNC_LOG_PROB_TOKENS`);
    otherwise ``async-ppo.yaml``'s, eta 0 of the async config's sweep included. Under the
    transfer protocol (``v.fit``) the fitted profile replaces the stated one, as for every run."""
    base = _trainer(areal_engine(), train_gpus, old_logp=True, v=v)
    framework = v.fit.profile if v.fit is not None else profile(AREAL_PROFILE)
    return dataclasses.replace(
        base,
        profile=dataclasses.replace(framework, tp=AREAL_TRAIN_TP),
        ppo_mini_batch_samples=AREAL_PROMPTS * 16 // AREAL_PPO_MINIBATCHES,
        micro_batch_tokens=AREAL_MAX_TOKENS_PER_MB,
        log_prob_micro_batch_tokens=AREAL_SYNC_LOG_PROB_TOKENS if sync_runner else AREAL_MAX_TOKENS_PER_MB,
        batch_order="shuffled",  # realhf shuffles each rank's share (ppo_interface.py 802-808)
    )


@RunCache
def areal_run(
    eta: int,
    steps: int = 8,
    train_gpus: int = AREAL_TRAIN_GPUS,
    v: Variant = POINT,
    sync_runner: bool = False,
) -> Measured:
    """AReaL on 128 H800s (``train_gpus`` training, the rest SGLang servers) at staleness bound
    ``eta``: interruptible rollouts under its staleness throttle (:func:`scenarios.systems.areal`).
    eta = 0 runs one phase at a time (AReaL's docs: ``max_head_offpolicyness=0`` "will essentially
    replicate the behavior of synchronous PPO"). Decoupled PPO recomputes the proximal log-probs.
    ``sync_runner``: the synchronous nightly runner's trainer (:func:`areal_trainer`)."""
    eng = areal_engine()
    batch = AREAL_PROMPTS * 16
    # RLVRWorkflow.arun_episode gathers a prompt's 16 samples: the trainer takes whole groups
    sc = systems.areal(max_head_offpolicyness=eta, samples_per_prompt=16, batch_size=batch, steps=steps)
    cl = _cluster(eng, AREAL_GPUS, train_gpus)
    tr = areal_trainer(train_gpus, sync_runner, v)
    return common.measure(sc, cl, areal_workload(v), tr, warmup=min(2, steps - 1), seed=v.seed)


def areal_sync(v: Variant = POINT) -> Measured:
    """Synchronous AReaL of the blog's Table 2: eta 0 on the synchronous run's 64:64 allocation."""
    return areal_run(0, 8, AREAL_SYNC_TRAIN_GPUS, v, sync_runner=True)


def areal_throughput(m: Measured) -> float:
    """Trained samples per hour at steady state (one step is 512 x 16 samples)."""
    return 3600.0 / m.steady_step_s


AREAL_TREND_ETAS = (0, 1, 2, 4, 8)
"""The etas of the trend row (Fig. 7 of the blog), each on the asynchronous 96:32 config."""
AREAL_TREND_SEEDS = (0, 1, 2, 3)
"""The seeds the trend row pairs each eta step over (``docs/published.md``, "The trend")."""


@dataclass(frozen=True)
class Rise:
    """One step of the trend, eta ``lo`` to ``hi``: the paired difference of steps per hour over
    :data:`AREAL_TREND_SEEDS` (``hi`` minus ``lo``, seed by seed) and its 95% t interval."""

    lo: int
    hi: int
    diff: Paired
    base: float
    """Mean steps per hour at ``lo`` (to show the difference as a share)."""

    @property
    def verdict(self) -> str:
        """``rises`` (interval above 0), ``falls`` (below 0), else ``flat within noise`` (one seed:
        no interval, so never a rise)."""
        d, h = self.diff.mean_diff, self.diff.half_width
        if not self.diff.tested:
            return "flat within noise"
        return "rises" if d - h > 0 else "falls" if d + h < 0 else "flat within noise"

    def __str__(self) -> str:
        d, h = self.diff.mean_diff, self.diff.half_width
        return (
            f"eta {self.lo}->{self.hi} {d:+.1f} steps/h ({100 * d / self.base:+.1f}%) "
            f"[{d - h:+.1f}, {d + h:+.1f}] {self.verdict}"
        )


def areal_trend(v: Variant = POINT) -> tuple[Rise, ...]:
    """The trend's steps: :func:`areal_run` at each eta of :data:`AREAL_TREND_ETAS` on each seed
    of :data:`AREAL_TREND_SEEDS` (``v``'s lengths and trainer; its seed is replaced)."""
    tp = {
        eta: [
            areal_throughput(areal_run(eta, 8, AREAL_TRAIN_GPUS, dataclasses.replace(v, seed=s)))
            for s in AREAL_TREND_SEEDS
        ]
        for eta in AREAL_TREND_ETAS
    }
    return tuple(
        Rise(lo, hi, paired(tp[hi], tp[lo]), sum(tp[lo]) / len(tp[lo]))
        for lo, hi in zip(AREAL_TREND_ETAS, AREAL_TREND_ETAS[1:], strict=False)
    )
