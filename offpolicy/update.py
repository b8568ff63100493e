"""Off-policy training: the decoupled update, stale sampling, and a numerically different sampler.

Design
------
Two ratios, kept apart (the decoupled objective): a behaviour weight w = pi_old / mu, which
corrects *which distribution sampled the data* and is a detached constant, and PPO's clipped
ratio rho = pi_theta / pi_old, which limits *how far this update moves*. Because w >= 0,
``w * min(rho A, clip(rho) A) = min(rho (w A), clip(rho) (w A))``, so the decoupled loss is
the ordinary PPO loss with per-token advantages ``w * A``; ``offpolicy_update`` implements it
exactly that way, reusing :func:`offpolicy.rl.minibatch_step`.

Corrections: ``none`` (w = mask: mu is ignored, the update is ``rl_update``), ``tis``
(min(pi_old/mu, cap)), ``mis`` (pi_old/mu inside ``band``, else 0) and ``seq-tis`` (one weight
per episode, min(prod_t pi_old/mu, cap)).

``train_offpolicy`` keeps the last ``lag + 1`` weight versions and samples each step with the
oldest, version ``max(0, step - lag)``: steps 0 to ``lag`` all sample the starting weights, so
the first ``lag`` steps are less stale than ``lag`` (staleness 0, 1, 2, 3, 3, 3 ... at lag 3).
The behaviour policy is optionally transformed by ``sampler`` (e.g. :func:`fp8_copy`). It
draws from its generator in the same order as ``train_rl``, so ``lag=0, correction='none'``
reproduces ``train_rl`` exactly.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mismatch.health import logprob_health
from offpolicy.checks import check_int, check_real, refuse, shown
from offpolicy.functional import masked_log_ratio, mis_weights, seq_tis_weights, tis_weights
from offpolicy.gym import Task, Tokenizer
from offpolicy.rl import (
    EvalSpec,
    RLConfig,
    check_context,
    compute_advantages,
    diverged_at,
    eval_record,
    mean_stats,
    minibatch_step,
    policy_log_probs,
    sample_step,
)
from offpolicy.rollout import behavior_stats, collate

CORRECTIONS = ("none", "tis", "mis", "seq-tis")
Sampler = Callable[[torch.nn.Module], torch.nn.Module]


def check_correction_args(correction: str, cap: float, band: tuple[float, float]) -> None:
    """Raise ValueError naming the bad argument (unknown correction, cap <= 0, a band that is not
    ``0 <= low <= high`` with ``high > 0``): the band :func:`offpolicy.functional.mis_weights` takes,
    where ``low = 0`` means no lower mask."""
    if correction not in CORRECTIONS:
        raise refuse("correction", f"must be one of {CORRECTIONS}, got {shown(correction)}")
    check_real("cap", cap, 0, open_low=True)
    ok = isinstance(band, tuple | list) and len(band) == 2
    if ok:
        # a NaN bound made every MIS weight 0 (NaN compares false), and so did high <= 0; a
        # negative low is no lower mask, as 0 is (every ratio is >= 0), and is refused as a slip
        check_real("band[0]", band[0], 0)
        check_real("band[1]", band[1], 0, open_low=True)
    if not ok or band[0] > band[1]:
        raise refuse("band", f"must be (low, high) with low <= high, got {band}")


def behavior_weights(
    old_logp: torch.Tensor,
    sample_logp: torch.Tensor,
    mask: torch.Tensor,
    correction: str,
    cap: float = 2.0,
    band: tuple[float, float] = (0.5, 5.0),
) -> torch.Tensor:
    """Decoupled behaviour weights w for ``correction``: [B, T] x 3 -> [B, T], detached, 0 off-mask."""
    check_correction_args(correction, cap, band)
    if correction == "tis":
        return tis_weights(old_logp, sample_logp, mask, cap)
    if correction == "mis":
        return mis_weights(old_logp, sample_logp, mask, band[0], band[1])
    if correction == "seq-tis":
        return seq_tis_weights(old_logp, sample_logp, mask, cap)
    return mask  # 'none': ignore mu entirely


def offpolicy_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    advantages: torch.Tensor,
    cfg: RLConfig,
    correction: str = "none",
    cap: float = 2.0,
    band: tuple[float, float] = (0.5, 5.0),
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """Decoupled clipped update on data from a behaviour policy mu (``batch['sample_logp']``).

    Returns the mean PPO stats over minibatches plus: ``mismatch`` (mean |log pi_old - log mu|
    over policy tokens), ``over_cap`` (share of policy tokens with pi_old/mu > cap),
    ``out_of_band`` (share outside ``band``), ``at_cap`` (share of policy tokens whose applied
    weight was truncated; per-episode for seq-tis), ``weight_mean`` and the health distribution
    ``health_mean`` / ``health_p99`` / ``health_max`` of |log pi_old - log mu|.
    """
    check_correction_args(correction, cap, band)
    ids, mask, sample_logp = batch["ids"], batch["action_mask"], batch["sample_logp"]  # [B, T], [B, T-1] x 2
    with torch.no_grad():
        old_logp = policy_log_probs(model, ids, cfg.temperature)  # pi_old, [B, T-1]
    weights = behavior_weights(old_logp, sample_logp, mask, correction, cap, band)  # [B, T-1]
    token_adv = advantages[:, None] * weights  # [B, T-1]
    logs = [
        minibatch_step(model, optimizer, ids[rows], old_logp[rows], token_adv[rows], mask[rows], cfg)
        for rows in torch.randperm(len(ids), generator=generator).chunk(cfg.minibatches)
    ]
    log_ratio = masked_log_ratio(old_logp, sample_logp, mask)  # [B, T-1], 0 off the mask (a -inf there too)
    n = mask.sum().clamp(min=1.0)
    if correction == "seq-tis":
        capped = (log_ratio.sum(-1, keepdim=True) > math.log(cap)).float() * mask  # [B, T-1]
    elif correction == "tis":
        capped = (log_ratio > math.log(cap)).float() * mask
    else:
        capped = torch.zeros_like(mask)
    ratio = log_ratio.exp()  # [B, T-1]
    outside = ((ratio < band[0]) | (ratio > band[1])).float() * mask
    health = logprob_health(old_logp, sample_logp, mask)
    return dict(
        mean_stats(logs),
        mismatch=(log_ratio.abs().sum() / n).item(),
        over_cap=((log_ratio > math.log(cap)).float() * mask).sum().item() / n.item(),
        out_of_band=outside.sum().item() / n.item(),
        at_cap=capped.sum().item() / n.item(),
        weight_mean=(weights.sum() / n).item(),
        health_mean=health["mean"],
        health_p99=health["p99"],
        health_max=health["max"],
    )


def fp8_copy(model: torch.nn.Module) -> torch.nn.Module:
    """Copy of ``model`` with every weight rounded to float8 e4m3 and back: a different sampler."""
    rounded = copy.deepcopy(model)
    with torch.no_grad():
        for p in rounded.parameters():
            p.copy_(p.to(torch.float8_e4m3fn).to(p.dtype))
    return rounded


@dataclass(frozen=True)
class Snapshot:
    """A weight version a sampler can be built from.

    Attributes:
        version: number of optimizer steps behind the weights (0 = the starting model).
        state: the model's state dict (tensors are cloned, never shared with the trainer).
    """

    version: int
    state: dict[str, torch.Tensor]


def take_snapshot(model: torch.nn.Module, version: int) -> Snapshot:
    """Clone ``model``'s weights into a version-tagged snapshot."""
    return Snapshot(version, {k: v.detach().clone() for k, v in model.state_dict().items()})


def train_offpolicy(
    model: torch.nn.Module,
    tasks: Sequence[Task],
    tok: Tokenizer,
    cfg: RLConfig,
    steps: int,
    lag: int = 0,
    correction: str = "none",
    cap: float = 2.0,
    sampler: Sampler | None = None,
    band: tuple[float, float] = (0.5, 5.0),
    eval_spec: EvalSpec | None = None,
) -> list[dict[str, Any]]:
    """``train_rl`` with a behaviour policy ``lag`` updates old (optionally ``sampler(behaviour)``).

    Updates ``model`` in place and returns one stats dict per step (behaviour stats of the
    sampled episodes, the staleness actually used, and ``offpolicy_update``'s stats). With
    ``eval_spec``, every ``eval_spec.every``-th record also has the *current* policy's
    ``eval_pass_rate`` / ``eval_invalid`` / ``eval_reads``: the training reward comes from a
    policy ``lag`` updates old and can hide a collapse that these show when it happens.
    ``lag`` must be below ``steps`` (a FieldError naming ``lag``): every larger lag is the run of
    lag ``steps - 1`` draw for draw, so a caller that records its ``lag`` would mislabel it.
    Step ``s`` samples with version ``max(0, s - lag)``: steps 0 to ``lag`` use the starting
    weights, so the first ``lag`` records have ``staleness`` ``s``, below ``lag``.
    """
    check_int("steps", steps, 1)
    check_int("lag", lag, 0)
    if lag >= steps:  # the CLIs' rule (offpolicy.cli_checks.check_lags), for every caller
        raise refuse(
            "lag",
            f"{lag} is not below steps {steps}: in {steps} update(s) the behaviour policy is never more "
            f"than {steps - 1} update(s) old, so lag {lag} would be the run of lag {steps - 1} under "
            "another label",
        )
    check_correction_args(correction, cap, band)
    check_context(model, cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    versions = [take_snapshot(model, 0)]
    behavior = copy.deepcopy(model)
    history: list[dict[str, Any]] = []
    for step in range(steps):
        behavior.load_state_dict(versions[0].state)  # the oldest kept version
        acting = sampler(behavior) if sampler is not None else behavior
        with diverged_at(step, history):  # non-finite numbers: the caller keeps the steps before
            episodes = sample_step(acting, tasks, tok, cfg, gen)
            batch = collate(episodes, tok.pad_id)
            record: dict[str, Any] = dict(
                step=step, staleness=step - versions[0].version, **behavior_stats(episodes)
            )
            record.update(
                offpolicy_update(
                    model, optimizer, batch, compute_advantages(batch, cfg), cfg, correction, cap, band, gen
                )
            )
            record.update(eval_record(model, step, eval_spec, tok, cfg))
        versions = (versions + [take_snapshot(model, step + 1)])[-(lag + 1) :]
        history.append(record)
    return history
