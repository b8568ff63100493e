"""A training step in named phases, each timed from its FLOPs, its micro-batches and its collectives.

One trainer step over a batch of ``S`` samples holding ``T`` tokens (prompt and response of every
sample) of a model with ``N`` active and ``P`` total parameters, on ``G`` GPUs of peak ``F``, is::

    old_log_prob   (if recomputed)   2 N T / (G F e_fwd)      + n_fwd x micro_batch_s + comm_fwd
    ref            (if a reference)  2 N T / (G F e_fwd)      + n_fwd x micro_batch_s + comm_fwd
    update_actor                     6 N T E / (G F e_fwdbwd) + n_upd x micro_batch_s
                                                              + n_opt x optimizer_step_s + comm_upd
    remainder                        step_s + S x sample_s (reward, advantages, logging)

with ``E`` PPO epochs. ``e_fwd`` and ``e_fwdbwd`` are the phase efficiencies (a forward-only pass
and a forward-plus-backward pass run at different shares of peak: verl's ``old_log_prob`` costs
0.4-0.53 of its ``update_actor``, not the 2/6 of their FLOPs). The colocated offload/reload
(:class:`~pipesim.compute.cluster.Offload`) and ``param_sync`` (:mod:`pipesim.compute.sync`) are
timed elsewhere and reported beside these.

**Micro- and mini-batches** (verl's ``dp_actor.py``: ``update_policy`` splits the batch into
``ppo_mini_batch_size`` mini-batches, one optimizer step each, for ``ppo_epochs`` epochs, and each
mini-batch per data-parallel rank into micro-batches, by ``ppo_micro_batch_size_per_gpu`` samples
or, with ``use_dynamic_bsz``, by ``ppo_max_token_len_per_gpu * ulysses_sequence_parallel_size``
tokens; ``compute_log_prob`` splits the whole batch the same way with the log-prob budget;
``verl/workers/fsdp_workers.py`` turns ``ppo_mini_batch_size`` from prompts into samples, times
``rollout.n``, and divides it by ``world_size / ulysses_sequence_parallel_size``). The
data-parallel degree is ``dp = G / (tp pp sp)``. Tokens are spread evenly over samples (the mean),
so a rank's mini-batch holds ``s T / (S dp)`` tokens and ``ceil(that / (budget sp))`` micro-batches
(by samples: ``ceil(s / (dp mbs))``). ``n_opt = E ceil(S / mini)`` does not shrink with ``G``, and
neither does the count of micro-batches once each rank's share fits one: the fixed costs that keep
verl's ``update_actor`` from halving when its GPUs double.

**The trainer's own communication** (exposed share ``1 - comm_overlap``; the rest hides behind
compute) is priced in :mod:`pipesim.compute.phasecomm`. ``fsdp`` (FSDP2 / ZeRO-3) all-gathers the
parameters for each micro-batch's forward and backward and reduce-scatters its gradients, past one
node of :data:`GPUS_PER_NODE` over the slower network; ``megatron`` (distributed optimizer)
reduce-scatters and all-gathers once per optimizer step (:func:`optimizer_bytes_per_rank`), and per
layer and micro-batch tensor parallelism all-reduces the activations and expert parallelism
all-to-alls the routed tokens. Pipeline parallelism idles ``(pp - 1) / m`` of the compute (the 1F1B
bubble, ``m`` micro-batches per mini-batch). Attention's quadratic FLOPs are not counted: the
efficiencies absorb them. (Those names, and :func:`link_bytes_per_s` and :func:`expert_params`,
are still importable from here.)

**Ranks wait for the busiest** (:mod:`pipesim.compute.balance`). Given the step's tokens per sample
(``sample_tokens``, in batch order), a profile whose ``balance`` is not ``"exact"`` deals the
samples to the ``dp`` ranks as its framework does, and each mini-batch is timed at its busiest
rank: its compute at ``dp`` times that rank's tokens, its micro-batch count from that rank's tokens
(verl pads every rank to the same count, ``same_micro_num_in_dp``). A forward-only phase waits for
the rank with the most tokens over the step. Without ``sample_tokens`` every rank holds the mean.

:func:`phase_times_s` is the closed form; :func:`reference_phase_times_s` the slow loop over every
epoch, mini-batch and micro-batch that the tests hold it to. The named profiles and
their calibration live in :mod:`pipesim.compute.profiles`; fitting one to data, in
:mod:`pipesim.compute.phasefit`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pipesim.compute.balance import busiest, check_balance, loads_of, rank_samples
from pipesim.compute.phasecomm import GPUS_PER_NODE as GPUS_PER_NODE  # re-exported: sync, cost, knobs
from pipesim.compute.phasecomm import _comm_per_micro_s as _comm_per_micro_s  # re-exported: phaseref
from pipesim.compute.phasecomm import _optimizer_comm_s as _optimizer_comm_s  # re-exported: phaseref
from pipesim.compute.phasecomm import expert_params as expert_params  # re-exported: sync
from pipesim.compute.phasecomm import link_bytes_per_s as link_bytes_per_s  # re-exported: sync, cost
from pipesim.compute.phasecomm import optimizer_bytes_per_rank as optimizer_bytes_per_rank  # re-exported
from pipesim.core.errors import check_int, check_number, shown
from pipesim.core.validate import refuse

if TYPE_CHECKING:
    from pipesim.compute.trainer import TrainerConfig

PHASES = ("old_log_prob", "ref", "update_actor", "remainder")
"""The trainer's phases, in order; each step's seconds are their sum."""

BACKENDS = ("fsdp", "megatron")


@dataclass(frozen=True, kw_only=True)
class FrameworkProfile:
    """A training framework's constants (see the module docstring); registry in ``profiles``."""

    name: str
    backend: str
    """``"fsdp"`` (FSDP2/ZeRO-3: gathers per micro-batch) or ``"megatron"`` (per optimizer step)."""
    fwd_bwd_efficiency: float
    """Share of peak bf16 FLOP/s that ``update_actor``'s forward and backward reach."""
    fwd_efficiency: float
    """Share of peak that a forward-only phase (``old_log_prob``, ``ref``) reaches."""
    micro_batch_s: float = 0.0
    """Fixed seconds per micro-batch and pass (launches, packing, the host's Python)."""
    optimizer_step_s: float = 0.0
    """Fixed seconds per optimizer step (grad-norm clip and its sync, the optimizer, the barrier)."""
    step_s: float = 0.0
    """Remainder seconds per step (logging, the driver's bookkeeping)."""
    sample_s: float = 0.0
    """Remainder seconds per sample (reward, advantages, moving the batch to the workers)."""
    comm_overlap: float = 0.0
    """Share of the trainer's communication hidden behind compute (1: none exposed)."""
    grad_reduce_bytes: float = 4.0
    """Bytes per parameter of the gradient reduction (fp32 in verl's FSDP mixed precision)."""
    tp: int = 1
    pp: int = 1
    ep: int = 1
    balance: str = "exact"
    """How the step's samples reach the ranks (:data:`pipesim.compute.balance.BALANCES`)."""
    source: str = ""
    """What the constants were set from."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise refuse("name", f"must be a non-empty string, got {shown(self.name)}")
        if self.backend not in BACKENDS:
            raise refuse("backend", f"must be one of {', '.join(BACKENDS)}, got {shown(self.backend)}")
        for name in ("fwd_bwd_efficiency", "fwd_efficiency"):
            check_number(name, getattr(self, name), 0.0, strict=True)
            if getattr(self, name) > 1:
                raise refuse(name, f"must be in (0, 1], got {shown(getattr(self, name))}")
        for name in ("micro_batch_s", "optimizer_step_s", "step_s", "sample_s", "grad_reduce_bytes"):
            check_number(name, getattr(self, name), 0.0)
        check_number("comm_overlap", self.comm_overlap, 0.0)
        check_balance(self.balance)
        if self.comm_overlap > 1:
            raise refuse("comm_overlap", f"must be in [0, 1], got {shown(self.comm_overlap)}")
        for name in ("tp", "pp", "ep"):
            check_int(name, getattr(self, name), 1)
            if self.backend == "fsdp" and getattr(self, name) != 1:
                raise refuse(name, "must be 1 for the fsdp backend (it shards, it does not split)")


@dataclass(frozen=True)
class Batching:
    """How one step's batch splits: ranks, mini-batches and micro-batch counts per rank."""

    dp: int
    mini_sizes: tuple[float, ...]
    """Samples of each mini-batch (the last may be short)."""
    micro_per_mini: tuple[int, ...]
    """Micro-batches per rank of each mini-batch (one epoch)."""
    fwd_micro: int
    """Micro-batches per rank of a forward-only phase over the whole batch."""
    mini_tokens: tuple[float, ...] = ()
    """Tokens of each mini-batch as its busiest rank makes it last (``dp`` x that rank's)."""
    fwd_tokens: float = 0.0
    """Tokens of the whole batch as a forward-only phase's busiest rank makes it last."""

    @property
    def n_opt_per_epoch(self) -> int:
        return len(self.mini_sizes)


def _micro(
    samples: float, tokens_per_sample: float, dp: int, budget: int | None, mbs: int | None, sp: int
) -> int:
    """Micro-batches per rank for ``samples`` samples split over ``dp`` ranks."""
    if samples <= 0:
        return 0
    if mbs is not None:
        return math.ceil(samples / (dp * mbs) - 1e-9)
    assert budget is not None
    return max(1, math.ceil(samples * tokens_per_sample / (dp * budget * sp) - 1e-9))


def batching(
    config: TrainerConfig, tokens: float, samples: int, sample_tokens: Sequence[float] | None = None
) -> Batching:
    """The split of a batch of ``samples`` samples and ``tokens`` tokens under ``config``; with
    ``sample_tokens`` (one per sample, in batch order) each rank's share is dealt out as the
    profile's ``balance`` says and the counts follow the busiest rank."""
    prof = config.framework
    dp = config.n_gpus // (prof.tp * prof.pp * config.sequence_parallel)
    tps = tokens / samples if samples else 0.0
    mini = samples if config.ppo_mini_batch_samples is None else config.ppo_mini_batch_samples
    full, rest = divmod(samples, mini) if mini else (0, 0)
    sizes = (float(mini),) * full + ((float(rest),) if rest else ())
    sp = config.sequence_parallel
    budget, mbs = config.micro_batch_tokens_resolved, config.micro_batch_samples
    fwd_budget = config.log_prob_micro_batch_tokens or budget
    if sample_tokens is None or prof.balance == "exact" or not samples:
        micro = tuple(_micro(s, tps, dp, budget, mbs, sp) for s in sizes)
        fwd = _micro(float(samples), tps, dp, fwd_budget, mbs, sp)
        return Batching(dp, sizes, micro, fwd, tuple(s * tps for s in sizes), float(tokens))
    ranks = rank_samples(sample_tokens, config.n_gpus, dp, sizes, prof.balance)
    top, top_total = busiest(loads_of(ranks, len(sizes)))
    if mbs is not None:  # the busiest rank's count of real samples (padding adds empty ones)
        micro = tuple(
            max(1, max(-(-int(np.count_nonzero(r[j])) // mbs) for r in ranks)) for j in range(len(sizes))
        )
        fwd = max(1, max(-(-sum(int(np.count_nonzero(m)) for m in r) // mbs) for r in ranks))
    else:
        assert budget is not None and fwd_budget is not None
        micro = tuple(max(1, math.ceil(t / (budget * sp) - 1e-9)) for t in top)
        fwd = max(1, math.ceil(top_total / (fwd_budget * sp) - 1e-9))
    return Batching(dp, sizes, micro, fwd, tuple(float(t) * dp for t in top), top_total * dp)


def _bubble(config: TrainerConfig, micro: int) -> float:
    pp = config.framework.pp
    return 1.0 + (pp - 1) / micro if pp > 1 and micro > 0 else 1.0


def phase_parts(
    config: TrainerConfig, tokens: float, samples: int, sample_tokens: Sequence[float] | None = None
) -> dict[str, dict[str, float]]:
    """Each phase's parts: ``compute_flop_s`` (seconds at efficiency 1, the bubble included),
    ``micro`` (micro-batches per rank), ``opt`` (optimizer steps), ``comm_s`` (exposed
    communication), ``samples``; the linear pieces :func:`phase_times_s` and the fit combine.
    ``sample_tokens``: each sample's tokens in batch order (module docstring, "Ranks wait")."""
    prof = config.framework
    b = batching(config, tokens, samples, sample_tokens)
    peak = config.n_gpus * config.gpu.bf16_flops_per_s
    n = config.model.n_active_params
    exposed = 1.0 - prof.comm_overlap
    tpm_fwd = b.fwd_tokens / (b.dp * b.fwd_micro) if b.fwd_micro else 0.0
    fwd_comm = b.fwd_micro * _comm_per_micro_s(config, tpm_fwd, backward=False) * exposed
    fwd = dict(
        compute_flop_s=2.0 * n * b.fwd_tokens / peak * _bubble(config, b.fwd_micro),
        micro=float(b.fwd_micro),
        opt=0.0,
        comm_s=fwd_comm,
    )
    epochs = config.ppo_epochs
    upd_compute = upd_comm = 0.0
    for mini_tokens, micro in zip(b.mini_tokens, b.micro_per_mini, strict=True):
        upd_compute += 6.0 * n * mini_tokens / peak * _bubble(config, micro)
        tpm = mini_tokens / (b.dp * micro) if micro else 0.0
        upd_comm += micro * _comm_per_micro_s(config, tpm, backward=True)
    upd_comm += b.n_opt_per_epoch * _optimizer_comm_s(config, b.dp)
    off = dict(compute_flop_s=0.0, micro=0.0, opt=0.0, comm_s=0.0)
    return {
        "old_log_prob": fwd if config.recompute_old_logp else off,
        "ref": fwd if config.reference_model else off,
        "update_actor": dict(
            compute_flop_s=epochs * upd_compute,
            micro=float(epochs * sum(b.micro_per_mini)),
            opt=float(epochs * b.n_opt_per_epoch),
            comm_s=epochs * upd_comm * exposed,
        ),
        "remainder": dict(compute_flop_s=0.0, micro=0.0, opt=0.0, comm_s=0.0, samples=float(samples)),
    }


def phase_times_s(
    config: TrainerConfig, tokens: float, samples: int, sample_tokens: Sequence[float] | None = None
) -> dict[str, float]:
    """Seconds of each of :data:`PHASES` for one step (closed form; see the module docstring)."""
    parts = phase_parts(config, tokens, samples, sample_tokens)
    return {phase: phase_time_s(config, phase, parts[phase], samples) for phase in PHASES}


def phase_time_s(config: TrainerConfig, phase: str, parts: Mapping[str, float], samples: int) -> float:
    """One phase's seconds from its :func:`phase_parts` entry: the compute at the phase's
    efficiency, the fixed costs per micro-batch and optimizer step, and the exposed communication;
    the remainder's are per step and per sample (:func:`pipesim.compute.phasefit.predictions_s`
    calls it with the parts it keeps)."""
    prof = config.framework
    if phase == "remainder":
        return prof.step_s + samples * prof.sample_s + config.step_overhead_s
    eff = prof.fwd_bwd_efficiency if phase == "update_actor" else prof.fwd_efficiency
    return (
        parts["compute_flop_s"] / eff
        + parts["micro"] * prof.micro_batch_s
        + parts["opt"] * prof.optimizer_step_s
    ) + parts["comm_s"]


def reference_phase_times_s(config: TrainerConfig, tokens: float, samples: int) -> dict[str, float]:
    """The same seconds by brute force: every epoch, mini-batch, rank-local micro-batch and layer
    in a loop, each micro-batch packed sample by sample up to its budget (slow; for the tests)."""
    prof, gpu, model = config.framework, config.gpu, config.model
    g = config.n_gpus
    dp = g // (prof.tp * prof.pp * config.sequence_parallel)
    per_sample = tokens / samples if samples else 0.0
    flop_s_per_token = model.n_active_params / (g * gpu.bf16_flops_per_s)  # one rank's share of 1 FLOP/param
    exposed = 1.0 - prof.comm_overlap

    def micro_batches(n_samples: float, budget: int | None = None) -> list[float]:
        """Token counts of one rank's micro-batches over ``n_samples`` samples of the global batch
        (``budget``: a token budget in place of the training one, as the log-prob one)."""
        if config.micro_batch_samples is not None:
            rank_samples, out = n_samples / dp, []
            while rank_samples > 1e-9:
                take = min(config.micro_batch_samples, rank_samples)
                out.append(take * per_sample)
                rank_samples -= take
            return out
        budget = budget or config.micro_batch_tokens_resolved
        assert budget is not None
        cap, out, left = budget * config.sequence_parallel, [], n_samples * per_sample / dp
        while left > cap * (1 + 1e-12):
            out.append(cap)
            left -= cap
        return [*out, left] if n_samples > 0 else out

    def collectives(micro_tokens: float, backward: bool) -> float:
        s = 0.0
        if prof.backend == "fsdp" and g > 1:
            link = link_bytes_per_s(gpu, g)
            for _ in range(2 if backward else 1):  # the all-gather before each pass
                s += model.n_params * 2.0 * (g - 1) / g / link
            if backward:
                s += model.n_params * prof.grad_reduce_bytes * (g - 1) / g / link
            return s
        layers = model.n_layers / prof.pp
        act = micro_tokens * model.hidden_size * 2.0
        for _ in range(2 if backward else 1):
            if prof.tp > 1:
                s += layers * 2 * (2.0 * (prof.tp - 1) / prof.tp * act / link_bytes_per_s(gpu, prof.tp))
            if prof.ep > 1 and model.is_moe:
                routed = act * model.n_active_experts * (prof.ep - 1) / prof.ep
                s += layers * 2 * routed / link_bytes_per_s(gpu, prof.tp * prof.ep)
        return s

    def forward_phase() -> float:
        mbs = micro_batches(float(samples), config.log_prob_micro_batch_tokens)
        s = 0.0
        for t in mbs:
            s += 2.0 * t * dp * flop_s_per_token / prof.fwd_efficiency
            s += prof.micro_batch_s + collectives(t, backward=False) * exposed
        if prof.pp > 1 and mbs:
            s += 2.0 * tokens * flop_s_per_token * (prof.pp - 1) / len(mbs) / prof.fwd_efficiency
        return s

    def update_phase() -> float:
        mini = samples if config.ppo_mini_batch_samples is None else config.ppo_mini_batch_samples
        s, left = 0.0, samples
        for _ in range(config.ppo_epochs):
            left = samples
            while left > 0:
                size = min(mini, left)
                left -= size
                mbs = micro_batches(float(size))
                for t in mbs:
                    s += 6.0 * t * dp * flop_s_per_token / prof.fwd_bwd_efficiency
                    s += prof.micro_batch_s + collectives(t, backward=True) * exposed
                if prof.pp > 1 and mbs:
                    mini_flop_s = 6.0 * size * per_sample * flop_s_per_token
                    s += mini_flop_s * (prof.pp - 1) / len(mbs) / prof.fwd_bwd_efficiency
                s += prof.optimizer_step_s + _optimizer_comm_s(config, dp) * exposed
        return s

    fwd = forward_phase() if samples else 0.0
    return {
        "old_log_prob": fwd if config.recompute_old_logp else 0.0,
        "ref": fwd if config.reference_model else 0.0,
        "update_actor": update_phase() if samples else 0.0,
        "remainder": prof.step_s + samples * prof.sample_s + config.step_overhead_s,
    }
