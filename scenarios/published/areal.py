"""AReaL: the blog's 1.5B synchronous and asynchronous hours, their 2.77x, and the eta trend.

Sources: inclusionAI/AReaL ``blog/AReaL_v0_3.md`` (Table 2, Fig. 7), the paper arXiv 2505.24298,
AReaL's README and its nightly runner (named beside each value). The preset is
:func:`scenarios.systems.areal` (the staleness manager's capacity, interruptible rollouts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
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


AREAL_MAX_NEW_TOKENS = 27 * 1024
"""``ppo.gen.max_new_tokens`` of the 1.5B run of Table 2 (the nightly runner's 27,648)."""
AREAL_TREND_MAX_NEW_TOKENS = 8192
"""``max_new_tokens`` of the staleness experiments: the blog's note before Table 3 and Fig. 7
(``blog/AReaL_v0_3.md`` at HEAD 4aef98d8, lines 237-238: "we follow a large batch size setting
with ``batch_size=512``, ``n_rollouts=16``, ``n_mini_batch=4``, ``max_new_tokens=8192``"). The
trend row runs at it; its GPUs and split are not stated, so the row keeps Table 2's 96:32."""


def areal_engine(max_new_tokens: int = AREAL_MAX_NEW_TOKENS) -> EngineConfig:
    # actor.bf16=False in the nightly runner: fp16 with loss scaling, not fp32 (realhf/api/cli_args.py
    # v0.3.0, ModelTrainEvalConfig.bf16: "Use bf16 precision (otherwise fp16)"); an H800's fp16
    # and bf16 dense peaks are the same, so the trainer counts the bf16 peak
    return EngineConfig(
        model=MODELS["deepseek-r1-distill-qwen-1.5b"],  # blog: R1-Distill-Qwen-1.5B
        gpu=GPUS["h800"],  # AReaL's README: "16 nodes, each equipped with 8 H800 GPUs"
        tp=1,  # one GPU per SGLang server (allocation_mode sglang.d96p1t1)
        max_model_len=PROMPT_TOKENS + max_new_tokens,
    )


def areal_workload(v: Variant = POINT, max_new_tokens: int = AREAL_MAX_NEW_TOKENS) -> TokenWorkload:
    # 16 responses per question, 27K maximum generation length (blog; 27 x 1024 = the runner's 27,648)
    return math_workload(LENGTHS_DISTILL, max_new_tokens, 16, v)


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
AREAL_MAX_CONCURRENT_ROLLOUTS = AREAL_PROMPTS
"""AReaL's default cap on rollouts in flight: one training batch, 512 rollout tasks. A task is one
prompt group (``GroupedRolloutWorkflow`` runs its 16 samples together; ``StalenessManager`` counts
tasks), and :func:`scenarios.systems.areal` takes the cap in that unit, capping the running
responses at 512 x 16 = 8,192. At v0.3.0 (the blog's code)
``realhf/experiments/async_exp/async_rl_exp.py`` lines 307-309 set ``max_concurrent_rollouts``,
when None, to ``train_rpcs[0].n_seqs`` (512 prompts, each rolled out as its 16 samples: 8,192
sequences), and ``training/configs/async-ppo.yaml`` lines 40-42 leave it null; at HEAD 4aef98d8
``areal/infra/workflow_executor.py`` lines 760-761 keep it (``max_concurrent_rollouts or
consumer_batch_size``, both counted in tasks). :func:`scenarios.systems.areal`'s own None is the
slot count instead, so every run here passes this (the synchronous run too: the same code's
default, and at eta 0 the staleness bound admits at most one batch anyway)."""
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
    max_new_tokens: int = AREAL_MAX_NEW_TOKENS,
) -> Measured:
    """AReaL on 128 H800s (``train_gpus`` training, the rest SGLang servers) at staleness bound
    ``eta``: interruptible rollouts under its staleness throttle (:func:`scenarios.systems.areal`).
    eta = 0 runs one phase at a time (AReaL's docs: ``max_head_offpolicyness=0`` "will essentially
    replicate the behavior of synchronous PPO"). At most one training batch of rollouts is in flight
    (:data:`AREAL_MAX_CONCURRENT_ROLLOUTS`, AReaL's default). Decoupled PPO recomputes the proximal
    log-probs.
    ``sync_runner``: the synchronous nightly runner's trainer (:func:`areal_trainer`).
    ``max_new_tokens``: the response cap (Table 2's by default; the trend's is
    :data:`AREAL_TREND_MAX_NEW_TOKENS`)."""
    eng = areal_engine(max_new_tokens)
    batch = AREAL_PROMPTS * 16
    # GroupedRolloutWorkflow gathers a prompt's 16 samples: the trainer takes whole groups
    sc = systems.areal(
        max_head_offpolicyness=eta,
        max_concurrent_rollouts=AREAL_MAX_CONCURRENT_ROLLOUTS,
        samples_per_prompt=16,
        batch_size=batch,
        steps=steps,
    )
    cl = _cluster(eng, AREAL_GPUS, train_gpus)
    tr = areal_trainer(train_gpus, sync_runner, v)
    wl = areal_workload(v, max_new_tokens)
    return common.measure(sc, cl, wl, tr, warmup=min(2, steps - 1), seed=v.seed)


def areal_sync(v: Variant = POINT) -> Measured:
    """Synchronous AReaL of the blog's Table 2: eta 0 on the synchronous run's 64:64 allocation."""
    return areal_run(0, 8, AREAL_SYNC_TRAIN_GPUS, v, sync_runner=True)


def areal_throughput(m: Measured) -> float:
    """Steps per hour at steady state (one step is 512 x 16 samples)."""
    return 3600.0 / m.steady_step_s


def areal_tokens_per_s(m: Measured) -> float:
    """Trained tokens per second at steady state (prompt and response tokens of the samples
    trained, over the steady window): Fig. 7's "Effective Training Throughput (k tokens/s)".
    Steps per hour tracks it only while the trained samples are as long as the generated ones;
    a window that trains the short samples of a long run-ahead first shows more steps, not more
    tokens."""
    return m.steady_tokens / m.steady_step_s


AREAL_TREND_ETAS = (0, 1, 2, 4, 8)
"""The etas of the trend row (Fig. 7 of the blog), each on the asynchronous 96:32 config."""
AREAL_TREND_SEEDS = (0, 1, 2, 3)
"""The seeds the trend row pairs each eta step over (``docs/published.md``, "The trend")."""


@dataclass(frozen=True)
class Rise:
    """One step of the trend, eta ``lo`` to ``hi``: the paired difference of trained tokens per
    second (:func:`areal_tokens_per_s`) over :data:`AREAL_TREND_SEEDS` (``hi`` minus ``lo``, seed
    by seed) and its 95% t interval."""

    lo: int
    hi: int
    diff: Paired
    base: float
    """Mean tokens per second at ``lo`` (to show the difference as a share)."""

    @property
    def verdict(self) -> str:
        """``rises`` (interval above 0), ``falls`` (below 0), else ``flat within noise`` (one seed:
        no interval, so never a rise)."""
        d, h = self.diff.mean_diff, self.diff.half_width
        if not self.diff.tested:
            return "flat within noise"
        return "rises" if d - h > 0 else "falls" if d + h < 0 else "flat within noise"

    def __str__(self) -> str:
        d, h = self.diff.mean_diff / 1e3, self.diff.half_width / 1e3
        return (
            f"eta {self.lo}->{self.hi} {d:+.1f}k tokens/s ({100 * d * 1e3 / self.base:+.1f}%) "
            f"[{d - h:+.1f}k, {d + h:+.1f}k] {self.verdict}"
        )


@dataclass(frozen=True)
class Trend:
    """The trend row's verdict: each step between neighbouring etas and the whole range (the
    smallest eta to the largest), each a :class:`Rise`.

    The claim, "throughput grows with eta", is read as Fig. 7 shows it: its bars never fall and
    rise overall, with a flat step (eta 2 and 4 both 356.6k tokens/s). :attr:`holds` is that
    rule: no step falls and the whole range rises. The rule before it, every step rises
    (:attr:`every_step_rises`), fails the figure itself; it is kept in the diagnosis beside the
    row's rule (``docs/published.md``, "The trend", says when and why the rule changed)."""

    steps: tuple[Rise, ...]
    whole: Rise

    @property
    def holds(self) -> bool:
        """No step falls, and the whole range rises."""
        return self.whole.verdict == "rises" and all(r.verdict != "falls" for r in self.steps)

    @property
    def every_step_rises(self) -> bool:
        """The rule before: every step rises (a flat step fails it)."""
        return all(r.verdict == "rises" for r in self.steps)

    def __str__(self) -> str:
        def said(ok: bool) -> str:
            return "holds" if ok else "fails"

        return (
            f"no step falls and the whole range rises: {said(self.holds)} ({self.whole}); "
            f"every step rises (the rule before): {said(self.every_step_rises)}; "
            + "; ".join(str(r) for r in self.steps)
        )


def trend_of(tokens_per_s: Mapping[int, Sequence[float]]) -> Trend:
    """The :class:`Trend` of throughputs by eta (in ascending eta order, one value per shared
    seed at each): each neighbouring step and the whole range, paired seed by seed."""
    etas = list(tokens_per_s)
    if len(etas) < 2 or etas != sorted(etas):
        raise ValueError(f"tokens_per_s: need two or more etas in ascending order, got {etas}")

    def rise(lo: int, hi: int) -> Rise:
        base = tokens_per_s[lo]
        return Rise(lo, hi, paired(tokens_per_s[hi], base), sum(base) / len(base))

    steps = tuple(rise(lo, hi) for lo, hi in zip(etas, etas[1:], strict=False))
    return Trend(steps, rise(etas[0], etas[-1]))


def areal_trend_verdict(v: Variant = POINT) -> Trend:
    """The trend: :func:`areal_run` at each eta of :data:`AREAL_TREND_ETAS` on each seed of
    :data:`AREAL_TREND_SEEDS` at the staleness experiments' :data:`AREAL_TREND_MAX_NEW_TOKENS`
    (``v``'s lengths and trainer; its seed is replaced), its trained
    tokens per second (:func:`areal_tokens_per_s`) under :func:`trend_of`.

    The window is the table's 8 steps after 2. From eta 2 on the runs are trainer-bound and
    tokens per second is flat to within 1%, so a step's sign there follows how far the window
    is from steady state (trained samples shorter or longer than generated, ``length_bias``):
    measured on seeds 0-3, 8 and 32 steps give eta 2 -> 4 and 4 -> 8 flat within noise, 16 steps
    gives 4 -> 8 falling 0.6% (eta 4's ``length_bias`` 1.01-1.03, eta 8's 0.98-0.99). A window
    of 16 or more would take the table past 3 minutes on 2 cores."""
    return trend_of(
        {
            eta: [
                areal_tokens_per_s(
                    areal_run(
                        eta,
                        8,
                        AREAL_TRAIN_GPUS,
                        dataclasses.replace(v, seed=s),
                        max_new_tokens=AREAL_TREND_MAX_NEW_TOKENS,
                    )
                )
                for s in AREAL_TREND_SEEDS
            ]
            for eta in AREAL_TREND_ETAS
        }
    )


def areal_trend(v: Variant = POINT) -> tuple[Rise, ...]:
    """The trend's steps between neighbouring etas (:func:`areal_trend_verdict`)."""
    return areal_trend_verdict(v).steps
