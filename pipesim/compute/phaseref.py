"""The slow reference of the phases when ranks wait for the busiest (tests hold the closed form to it).

:func:`pipesim.compute.phases.phase_times_s` with ``sample_tokens`` times each mini-batch at its
busiest rank in closed form. :func:`ranked_reference_times_s` walks the same step rank by rank: it
takes every rank's samples of every mini-batch from :func:`pipesim.compute.balance.rank_samples`,
counts each rank's micro-batches from its own tokens (or samples), pads every rank to the largest
count (verl's ``same_micro_num_in_dp``), splits each rank's tokens evenly over that count (verl's
``rearrange_micro_batches`` balances them), and charges every micro-batch at the slowest rank's
share, then the fixed costs and the collectives. The dealing itself is tested on its own
(``tests/test_compute_balance.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pipesim.compute.balance import rank_samples
from pipesim.compute.phases import _comm_per_micro_s, _optimizer_comm_s

if TYPE_CHECKING:
    from pipesim.compute.trainer import TrainerConfig


def _count(samples: np.ndarray, cap: float | None, per_micro: int | None) -> int:
    """Micro-batches of one rank: ``ceil(its tokens / budget)`` (verl's ``rearrange_micro_batches``)
    or ``ceil(its samples / per_micro)``; at least one."""
    if per_micro is not None:  # the real samples: a batch padded to equal partitions adds empty ones
        return max(1, -(-int(np.count_nonzero(samples)) // per_micro))
    assert cap is not None
    return max(1, int(np.ceil(float(samples.sum()) / cap - 1e-9)))


def ranked_reference_times_s(
    config: TrainerConfig, tokens: float, samples: int, sample_tokens: Sequence[float]
) -> dict[str, float]:
    """Seconds of each phase of one step, rank by rank (module docstring; slow, for the tests)."""
    prof, gpu, model = config.framework, config.gpu, config.model
    g = config.n_gpus
    dp = g // (prof.tp * prof.pp * config.sequence_parallel)
    peak_per_rank_group = g * gpu.bf16_flops_per_s / dp  # one dp rank's GPUs
    n = model.n_active_params
    exposed = 1.0 - prof.comm_overlap
    mini = samples if config.ppo_mini_batch_samples is None else config.ppo_mini_batch_samples
    sizes = [float(min(mini, samples - start)) for start in range(0, samples, mini)]
    ranks = rank_samples(sample_tokens, g, dp, sizes, prof.balance)
    sp = config.sequence_parallel
    budget = config.micro_batch_tokens_resolved
    fwd_budget = config.log_prob_micro_batch_tokens or budget
    per_micro = config.micro_batch_samples

    def phase(chunks: list[np.ndarray], flops: float, eff: float, cap: float | None, backward: bool) -> float:
        count = max(_count(c, cap, per_micro) for c in chunks)
        seconds = 0.0
        for _ in range(count):
            slowest = max(float(c.sum()) / count for c in chunks)
            seconds += flops * n * slowest / peak_per_rank_group / eff
            seconds += prof.micro_batch_s + _comm_per_micro_s(config, slowest, backward) * exposed
        if prof.pp > 1:
            seconds += (
                flops
                * n
                * max(float(c.sum()) for c in chunks)
                / peak_per_rank_group
                * (prof.pp - 1)
                / count
                / eff
            )
        return seconds

    cap = None if budget is None else float(budget * sp)
    fwd_cap = None if fwd_budget is None else float(fwd_budget * sp)
    whole = [np.concatenate(r) if r else np.zeros(0) for r in ranks]
    fwd = phase(whole, 2.0, prof.fwd_efficiency, fwd_cap, backward=False)
    upd = 0.0
    for _ in range(config.ppo_epochs):
        for j in range(len(sizes)):
            upd += phase([r[j] for r in ranks], 6.0, prof.fwd_bwd_efficiency, cap, backward=True)
            upd += prof.optimizer_step_s + _optimizer_comm_s(config, dp) * exposed
    return {
        "old_log_prob": fwd if config.recompute_old_logp else 0.0,
        "ref": fwd if config.reference_model else 0.0,
        "update_actor": upd,
        "remainder": prof.step_s + samples * prof.sample_s + config.step_overhead_s,
    }
