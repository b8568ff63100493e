"""A compute-grounded trainer: a step's seconds from the tokens and samples in its batch, in phases.

:class:`ComputeTrainer` implements :class:`pipesim.TrainerModel`. A step over a batch of ``S``
samples holding ``T`` tokens (prompt, generated response and tool observations of every sample,
from the :class:`~pipesim.compute.workload.TokenSource` side table) is the sum of the phases of
:mod:`pipesim.compute.phases` -- ``old_log_prob``, ``ref``, ``update_actor`` and a remainder --
each timed from its FLOPs at its efficiency, its micro-batches and optimizer steps, and the
trainer's own collectives, with the constants of a named framework profile
(:mod:`pipesim.compute.profiles`: ``"fsdp2-dense"`` by default, ``"megatron-dense"``,
``"megatron-moe"``, ``"ideal"``).

How the older knobs fold into the profile:

* ``mfu``: ``None`` (default) uses the profile's efficiencies. A number with no ``profile`` is the
  one-MFU model of before (the ``"ideal"`` profile at that efficiency: ``(6 + 2 + 2) N T / (G F
  mfu)``, no fixed costs, communication hidden), which is what ``pipesim plan`` and older scripts
  ask for; a number with a ``profile`` replaces both its efficiencies and keeps its fixed costs.
* ``recompute_old_logp`` and ``reference_model`` switch the ``old_log_prob`` and ``ref`` phases.
* ``step_overhead_s`` adds to the remainder.
* The batch knobs are verl's (and AReaL's) names in samples: ``ppo_mini_batch_samples`` (verl's
  ``ppo_mini_batch_size`` x ``rollout.n``; None: the whole batch is one optimizer step),
  ``micro_batch_tokens`` (``ppo_max_token_len_per_gpu`` under ``use_dynamic_bsz``, default
  :data:`DEFAULT_MICRO_BATCH_TOKENS`) or ``micro_batch_samples`` (``ppo_micro_batch_size_per_gpu``),
  ``log_prob_micro_batch_tokens`` (``log_prob_max_token_len_per_gpu``; None: the training budget),
  ``ppo_epochs`` and ``sequence_parallel`` (Ulysses).
* ``batch_order`` (:data:`BATCH_ORDERS`): the order the batch's samples reach the framework, which
  decides how a ``"step"``-balanced profile deals them to ranks (:mod:`pipesim.compute.balance`):
  ``"arrival"`` (default), as the trainer received them (a fully asynchronous trainer's queue), or
  ``"submission"``, in the order their prompts were sent (a synchronous trainer's batch, which
  verl's colocated ``generate_sequences`` returns in prompt order, a prompt's samples adjacent), or
  ``"shuffled"``, in a random order drawn per step from ``numpy.random.default_rng((shuffle_seed,
  step, run_seed))`` (realhf, AReaL v0.3, shuffles each rank's share before splitting it into
  mini-batches). ``run_seed`` is :class:`ComputeTrainer`'s, which ``run_compute`` sets to the run's
  seed, so each seed of a sweep deals its own orders; at seed 0 the order is the one
  ``(shuffle_seed, step)`` seeded before (numpy pads the entropy with zeros), so no result moves there.

Memory check: the weights, gradients and Adam state (``optimizer_bytes_per_param``, 16 bytes for
bf16 weights and gradients with fp32 master weights and two moments) are sharded over the trainer
GPUs (ZeRO-3 / FSDP); if they exceed the GPUs' HBM the config raises ``ValueError`` naming
``n_gpus``. A micro-batch's activations come on top (:attr:`TrainerConfig.activation_bytes_per_gpu`,
an estimate from the formulas there, not a measurement): they are not refused, but
:attr:`TrainerConfig.memory_short_bytes` says by how much the two exceed the HBM, and the planner
warns of a trainer placement they overfill (:func:`pipesim.plan.build.placements`).

Parallel layout: ``n_gpus`` must be a multiple of the profile's ``tp x pp x sequence_parallel``,
and a profile with expert parallelism (``ep > 1``, ``megatron-moe``) needs a mixture-of-experts
model whose experts ``ep`` divides and ``n_gpus`` a multiple of ``tp x pp x ep``
(:func:`check_expert_parallel`); ``tp`` must divide the heads and KV heads, ``pp`` the layers, and
``sequence_parallel`` the heads (:func:`~pipesim.compute.profiles.check_layout`): what Megatron and
verl's Ulysses refuse is refused here, naming the field.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pipesim.compute.gpus import GPUSpec
from pipesim.compute.models import MAX_MODEL_DIM, ModelSpec
from pipesim.compute.phases import GPUS_PER_NODE, PHASES, FrameworkProfile, phase_times_s
from pipesim.compute.roofline import check_gpu_rates
from pipesim.core.errors import FieldError, check_int, check_number, shown
from pipesim.core.validate import refuse

if TYPE_CHECKING:
    from pipesim.compute.source import TokenSource
    from pipesim.core.episode import Episode

DEFAULT_TRAINER_MFU = 0.4
"""The efficiency of the ``"ideal"`` profile (the one-MFU model): a round figure inside what
FSDP/Megatron RL trainers report (30-45%), not a measurement."""

MIN_EFFICIENCY = 1e-4
"""The lowest share of peak a trainer may reach (``mfu``, a profile's ``fwd_bwd_efficiency`` and
``fwd_efficiency``): a hundredth of a percent, 50 times below the half percent under which
``pipesim calibrate`` calls a fitted efficiency implausible (``calibrate.checks.PLAUSIBLE``; a log in
milliseconds read as seconds fitted 0.00046). Below it a step's seconds stop being a time: at
``model.mfu = 1e-300`` a step took 1e300 s (a 300-digit ``timing_s/step``), at 1e-320 (a subnormal)
it was infinite and the run stopped naming neither the field nor the file."""

DEFAULT_PROFILE = "fsdp2-dense"
"""The framework profile of a :class:`TrainerConfig` given neither ``profile`` nor ``mfu``."""

BATCH_ORDERS = ("arrival", "submission", "shuffled")
"""The orders a batch can reach the framework in (module docstring, ``batch_order``)."""
_episode_id = operator.attrgetter("id")  # a non-arrival order starts from the batch sorted by id

ACTIVATION_BYTES_PER_TOKEN = 34
"""Bytes of one transformer layer's activations per token per unit of hidden size while it is
recomputed and backpropagated: ``34 s b h`` of Korthikanti et al. 2022 (*Reducing Activation
Recomputation in Large Transformer Models*, bf16, no tensor parallelism), whose ``5 a s / h``
attention-score term flash attention removes. A mixture-of-experts layer is counted as a dense one
of its hidden size."""
CHECKPOINT_BYTES_PER_TOKEN = 2
"""Bytes per token per unit of hidden size kept for each layer under full activation
checkpointing (its bf16 input; verl's FSDP actor enables gradient checkpointing by default)."""
LOGIT_BYTES = 2
"""Bytes per logit of the micro-batch's LM-head output (bf16), tokens x vocabulary."""

DEFAULT_MICRO_BATCH_TOKENS = 16384
"""Tokens per GPU per micro-batch when neither budget is given: verl's default
``ppo_max_token_len_per_gpu`` (``verl/trainer/config/actor/actor.yaml``)."""

MAX_BUDGET = 2**53
"""The most samples or tokens a mini- or micro-batch budget may hold: the largest integer a float
holds exactly. A budget past every batch means "no cap" (AReaL states ``max_tokens_per_mb`` as
``int(1e12)``), so the bound sits far above any batch, not at a context's int32."""
_BUDGET_WHY = "2**53, the largest integer a float holds exactly; a budget past the batch is no cap"
_TOKEN_BUDGETS = ("micro_batch_tokens", "log_prob_micro_batch_tokens")
_BUDGETS = ("ppo_mini_batch_samples", "micro_batch_samples", *_TOKEN_BUDGETS)

MAX_STEP_OVERHEAD_S = 7 * 86400.0
"""The most fixed seconds a step may add (``step_overhead_s``): a week, the longest step time a
run spec or a log may hold (a longer one is a unit slip, and 1e308 overflowed the clock mid-run).
``optimizer_bytes_per_param`` stops at 1,024 bytes (Adam's mixed-precision state takes 16)."""

MAX_PPO_EPOCHS = 1024
"""The most passes over a batch a step takes (``ppo_epochs``; verl's default is 1): each is a
whole update, and 10**308 of them overflowed the phases' float arithmetic."""


@dataclass(frozen=True, kw_only=True)
class TrainerConfig:
    """The trainer: ``model`` trained on ``n_gpus`` GPUs of type ``gpu`` (see the module docstring)."""

    model: ModelSpec
    gpu: GPUSpec
    n_gpus: int
    mfu: float | None = None
    recompute_old_logp: bool = True
    reference_model: bool = False
    step_overhead_s: float = 0.0
    optimizer_bytes_per_param: float = 16.0
    profile: str | FrameworkProfile | None = None
    ppo_mini_batch_samples: int | None = None
    micro_batch_tokens: int | None = None
    micro_batch_samples: int | None = None
    log_prob_micro_batch_tokens: int | None = None
    ppo_epochs: int = 1
    sequence_parallel: int = 1
    batch_order: str = "arrival"
    shuffle_seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelSpec):
            raise refuse("model", f"must be a pipesim.ModelSpec, got {shown(self.model)}")
        if not isinstance(self.gpu, GPUSpec):
            raise refuse("gpu", f"must be a pipesim.GPUSpec, got {shown(self.gpu)}")
        check_int("n_gpus", self.n_gpus, 1, MAX_MODEL_DIM, "the largest int32")
        mfu = self.mfu
        number = isinstance(mfu, int | float) and not isinstance(mfu, bool)
        if mfu is not None and (not number or not 0 < mfu <= 1):
            raise refuse("mfu", f"must be in (0, 1] or None, got {shown(mfu)}")
        if mfu is not None and mfu < MIN_EFFICIENCY:
            raise refuse("mfu", f"must be at least {MIN_EFFICIENCY:g} (MIN_EFFICIENCY), got {shown(mfu)}")
        for name in ("recompute_old_logp", "reference_model"):
            if not isinstance(getattr(self, name), bool):
                raise refuse(name, f"must be a bool, got {shown(getattr(self, name))}")
        for name, hi in (("step_overhead_s", MAX_STEP_OVERHEAD_S), ("optimizer_bytes_per_param", 1024.0)):
            check_number(name, getattr(self, name), 0)
            if getattr(self, name) > hi:  # 1e308 overflowed a step's time; 10**308 bytes, a division
                raise refuse(name, f"must be at most {hi:g}, got {shown(getattr(self, name))}")
        # each a count of samples or tokens a float holds exactly: 10**308 overflowed the phases'
        # float arithmetic (an OverflowError, or a clock overflow naming no field)
        for name in _BUDGETS:
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1, MAX_BUDGET, _BUDGET_WHY)
        if self.micro_batch_tokens is not None and self.micro_batch_samples is not None:
            raise FieldError(
                "micro_batch_samples: give a micro-batch in tokens (micro_batch_tokens, verl's "
                "use_dynamic_bsz) or in samples, not both",
                "micro_batch_samples",
            )
        check_int("shuffle_seed", self.shuffle_seed, 0)
        if self.batch_order not in BATCH_ORDERS:
            raise refuse(
                "batch_order", f"must be one of {', '.join(BATCH_ORDERS)}, got {shown(self.batch_order)}"
            )
        check_int("ppo_epochs", self.ppo_epochs, 1, MAX_PPO_EPOCHS, "passes over one batch")
        check_int("sequence_parallel", self.sequence_parallel, 1)
        from pipesim.compute.profiles import check_layout

        prof = self.framework  # resolves the name (ValueError naming profile)
        for name in ("fwd_bwd_efficiency", "fwd_efficiency"):  # a profile's own (mfu's are checked)
            if getattr(prof, name) < MIN_EFFICIENCY:
                raise refuse(
                    f"profile.{name}",
                    f"must be at least {MIN_EFFICIENCY:g} (MIN_EFFICIENCY), got {shown(getattr(prof, name))}",
                )
        # the phases divide by the GPU's FLOP/s, and by a link's rate where a collective crosses one
        rates = ["bf16_flops_per_s"]
        if self.n_gpus > 1:
            rates.append("nvlink_bandwidth_bytes_per_s")
        if self.n_gpus > GPUS_PER_NODE:
            rates.append("network_bandwidth_bytes_per_s")
        check_gpu_rates(self.gpu, tuple(rates))
        ranks = prof.tp * prof.pp * self.sequence_parallel
        if self.n_gpus % ranks:
            raise FieldError(
                f"n_gpus ({self.n_gpus}) must be a multiple of tp x pp x sequence_parallel ({ranks}) "
                f"of the {prof.name} profile",
                "n_gpus",
            )
        check_expert_parallel(self.model, self.n_gpus, prof)
        check_layout(self.model, prof, self.sequence_parallel)  # heads, KV heads and layers split evenly
        need = self.model.n_params * self.optimizer_bytes_per_param / self.n_gpus
        if need > self.gpu.hbm_bytes:
            raise FieldError(
                f"n_gpus: training {self.model.name} needs {need / 2**30:.1f} GiB per GPU on {self.n_gpus} "
                f"GPUs, more than a {self.gpu.name}'s {self.gpu.hbm_bytes / 2**30:.0f} GiB; use more GPUs",
                "n_gpus",
            )

    @property
    def state_bytes_per_gpu(self) -> float:
        """Weights, gradients and optimizer state per trainer GPU (sharded: ZeRO-3 / FSDP)."""
        return self.model.n_params * self.optimizer_bytes_per_param / self.n_gpus

    @property
    def activation_bytes_per_gpu(self) -> float:
        """An estimate of one training micro-batch's activations per GPU: its tokens
        (``micro_batch_tokens``, default :data:`DEFAULT_MICRO_BATCH_TOKENS`) x the hidden size x
        (:data:`CHECKPOINT_BYTES_PER_TOKEN` per layer + :data:`ACTIVATION_BYTES_PER_TOKEN` for the
        layer being recomputed), plus their logits (:data:`LOGIT_BYTES` x the vocabulary). Neither
        the allocator's fragmentation nor the CUDA context is counted."""
        m = self.model
        tokens = self.micro_batch_tokens or DEFAULT_MICRO_BATCH_TOKENS
        per_token = m.hidden_size * (CHECKPOINT_BYTES_PER_TOKEN * m.n_layers + ACTIVATION_BYTES_PER_TOKEN)
        return float(tokens * (per_token + LOGIT_BYTES * m.vocab_size))

    @property
    def memory_short_bytes(self) -> float:
        """How far the state and one micro-batch's activations exceed a GPU's HBM (<= 0: they fit)."""
        return self.state_bytes_per_gpu + self.activation_bytes_per_gpu - self.gpu.hbm_bytes

    @functools.cached_property
    def framework(self) -> FrameworkProfile:
        """The profile the phases use, ``mfu`` folded in (see the module docstring)."""
        from pipesim.compute.profiles import profile

        p = self.profile
        if p is None:
            name = DEFAULT_PROFILE if self.mfu is None else "ideal"
            resolved = profile(name)
        elif isinstance(p, FrameworkProfile):
            resolved = p
        elif isinstance(p, str):
            resolved = profile(p)
        else:
            raise refuse("profile", f"must be a profile name or a FrameworkProfile, got {shown(p)}")
        if self.mfu is not None:
            resolved = dataclasses.replace(resolved, fwd_bwd_efficiency=self.mfu, fwd_efficiency=self.mfu)
        return resolved

    @property
    def micro_batch_tokens_resolved(self) -> int | None:
        """The training micro-batch's token budget per GPU (None when it is counted in samples)."""
        if self.micro_batch_samples is not None:
            return None
        return DEFAULT_MICRO_BATCH_TOKENS if self.micro_batch_tokens is None else self.micro_batch_tokens

    def check_longest_sample(self, longest_tokens: int, prefix: str = "") -> None:
        """Refuse a token budget (``micro_batch_tokens``, ``log_prob_micro_batch_tokens``) that,
        times ``sequence_parallel``, is below ``longest_tokens``, the longest sample the workload
        can make (:attr:`~pipesim.compute.workload.TokenWorkload.max_sequence_tokens`):
        ``ValueError`` naming ``prefix + `` the budget's field. verl asserts ``max_token_len >= ``
        the sequence length (``seqlen_balancing.rearrange_micro_batches``), since a micro-batch
        holds at least one whole sample; the phases would instead charge a fraction of a sample
        per micro-batch. Only a budget set here is checked, as the plan and run-spec paths check
        theirs (a default budget is the trainer's, not the user's, and is left as it was)."""
        check_number("longest_tokens", longest_tokens, 0, strict=True)  # NaN passed every budget
        sp = self.sequence_parallel
        for name in _TOKEN_BUDGETS:
            budget = getattr(self, name)
            if budget is not None and budget * sp < longest_tokens:
                raise FieldError(
                    f"{prefix}{name} ({budget:,}) x sequence_parallel ({sp}) is below the longest sample "
                    f"({longest_tokens:,} tokens: prompt, responses and observations), which verl refuses "
                    f"(a micro-batch holds at least one whole sample); raise it to at least "
                    f"{-(-longest_tokens // sp):,}",
                    f"{prefix}{name}",
                )

    def phase_times_s(
        self, tokens: float, samples: int = 1, sample_tokens: Sequence[float] | None = None
    ) -> dict[str, float]:
        """Seconds of each phase (:data:`~pipesim.compute.phases.PHASES`) of one step over
        ``tokens`` tokens in ``samples`` samples (default 1: every token in one sample);
        ``sample_tokens``, each sample's tokens in batch order, lets a balanced profile time each
        mini-batch at its busiest rank (:mod:`pipesim.compute.balance`)."""
        check_number("tokens", tokens, 0)
        check_int("samples", samples, 0)
        if sample_tokens is not None and len(sample_tokens) != samples:
            raise refuse(
                "sample_tokens", f"must hold one count per sample ({samples}), got {len(sample_tokens)}"
            )
        return phase_times_s(self, float(tokens), samples, sample_tokens)

    def step_time_s(self, tokens: float, samples: int = 1) -> float:
        """Seconds of one step over ``tokens`` tokens in ``samples`` samples: the phases' sum."""
        return sum(self.phase_times_s(tokens, samples).values())


def check_expert_parallel(model: ModelSpec, n_gpus: int, prof: FrameworkProfile) -> None:
    """Refuse a profile's expert parallelism (``ep > 1``) that Megatron would refuse: on a dense
    model (``ValueError`` naming ``profile``: there are no experts to split, and the profile's MoE
    efficiencies would slow a dense model for nothing), over more groups than the model has
    experts' divisors (``profile``: Megatron's MoE layer needs ``num_moe_experts %
    expert_model_parallel_size == 0``), or on GPUs the expert groups do not tile (``n_gpus``:
    Megatron-Core's ``initialize_model_parallel`` refuses a ``data_parallel_size *
    context_parallel_size`` not divisible by ``expert_model_parallel_size``, i.e. ``n_gpus`` must
    be a multiple of ``tp x pp x ep``). The same rules as :class:`~pipesim.compute.cost.EngineConfig`'s
    ``ep`` on the rollout side."""
    ep = prof.ep
    if ep == 1:
        return
    if not model.is_moe:
        raise FieldError(
            f"profile: {prof.name} splits experts over ep={ep} GPUs, which needs a mixture-of-experts "
            f"model; {model.name} is dense (use megatron-dense or fsdp2-dense)",
            "profile",
        )
    if model.n_experts % ep:
        raise FieldError(
            f"profile: {prof.name}'s ep ({ep}) must divide {model.name}'s n_experts ({model.n_experts})",
            "profile",
        )
    group = prof.tp * prof.pp * ep
    if n_gpus % group:
        raise FieldError(
            f"n_gpus ({n_gpus}) must be a multiple of tp x pp x ep ({group}) of the {prof.name} profile: "
            "Megatron needs ep to divide the data-parallel size (times sequence parallelism)",
            "n_gpus",
        )


class ComputeTrainer:
    """The :class:`pipesim.TrainerModel` of a :class:`TrainerConfig`, reading the side table.

    ``switch_s`` is added to every step: a colocated engine's offload and reload
    (:class:`pipesim.compute.cluster.Offload`), during which the engines stay paused as they are
    while the trainer trains. ``log`` holds ``(step, tokens, seconds)`` per step, ``seconds``
    being the training compute alone (the kernel's ``train_log`` spans compute and switch), and
    ``phase_log`` holds ``(step, tokens, {phase: seconds})`` (:data:`PHASES`, summing to ``seconds``).
    ``run_seed`` (``run_compute`` passes the run's seed) joins ``shuffle_seed`` in a shuffled order.
    """

    def __init__(
        self, config: TrainerConfig, source: TokenSource, switch_s: float = 0.0, *, run_seed: int = 0
    ) -> None:
        if not isinstance(config, TrainerConfig):
            raise refuse("config", f"must be a TrainerConfig, got {shown(config)}")
        check_number("switch_s", switch_s, 0)
        check_int("run_seed", run_seed, 0)
        self.config, self.source, self.run_seed = config, source, run_seed
        self.switch_s = float(switch_s)
        self.log: list[tuple[int, float, float]] = []
        self.phase_log: list[tuple[int, float, dict[str, float]]] = []
        self.dealt_log: list[tuple[int, tuple[int, ...]]] = []
        """``(step, tokens of each sample in the order dealt to the ranks)``, for a profile whose
        ranks wait for the busiest (empty for an exactly balanced one)."""
        self.balanced_update_s: list[float] = []
        """Per step (beside ``dealt_log``), the ``update_actor`` seconds had every rank held the
        mean: what the wait for the busiest rank costs is the phase log's less these."""

    def batch_tokens(self, batch: list[Episode]) -> float:
        return float(self.source.batch_tokens(batch))

    def sample_weights(self, step: int, batch: list[Episode]) -> list[float]:
        """A streamed step's share of each sample (:mod:`pipesim.core.training`): its tokens."""
        return [float(t) for t in self.source.sample_tokens(batch)]

    def train_time_s(self, step: int, batch: list[Episode]) -> float:
        config = self.config
        n = len(batch)
        if config.framework.balance == "exact":
            tokens = self.batch_tokens(batch)
            phases = phase_times_s(config, tokens, n)
        else:
            order = config.batch_order
            ordered = sorted(batch, key=_episode_id) if order != "arrival" else batch
            if order == "shuffled":  # a permutation per step from a seeded generator (the step's own)
                perm = np.random.default_rng((config.shuffle_seed, step, self.run_seed)).permutation(n)
                ordered = [ordered[i] for i in perm]
            per_sample = self.source.sample_tokens(ordered)
            # the batch's tokens from the same counts (integers: the sum is exact in any order),
            # rather than a second pass over the batch; the phases are called without the public
            # method's checks, which hold by construction here (a count per sample, >= 0 tokens)
            tokens = float(sum(per_sample))
            self.dealt_log.append((step, tuple(per_sample)))
            self.balanced_update_s.append(phase_times_s(config, tokens, n)["update_actor"])
            phases = phase_times_s(config, tokens, n, per_sample)
        seconds = sum(phases[p] for p in PHASES)
        self.log.append((step, tokens, seconds))
        self.phase_log.append((step, tokens, phases))
        return seconds + self.switch_s
