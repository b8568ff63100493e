"""Pure tensor math of policy-gradient training: tensor in, tensor out, no module state.

Every function here is small enough to check against a slow python-loop reference
(``tests/test_offpolicy_functional.py``). Keeping the math apart from the loops means the
training code (``rl.py``, ``update.py``) is only plumbing, and the correctness of the estimator
lives in functions whose contract fits in a docstring.

Shapes use B = episodes, T = sequence length, V = vocabulary. ``mask`` tensors are float 0/1 of
the same shape as the log-probabilities they select.
"""

from __future__ import annotations

import math

import torch

from offpolicy.checks import FieldError, check_real, refuse

__all__ = [
    "selected_log_probs",
    "group_advantages",
    "ppo_policy_loss",
    "masked_log_ratio",
    "tis_weights",
    "mis_weights",
    "seq_tis_weights",
    "masked_mean",
]


def selected_log_probs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Log-probability of each target token under softmax(logits): [B, T, V], [B, T] -> [B, T].

    The log-softmax is taken in float32 whatever the logits' dtype, so sampler and trainer
    normalise the same way.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)  # [B, T, V]
    return logp.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)  # [B, T]


def group_advantages(rewards: torch.Tensor, group_size: int, normalize_std: bool = False) -> torch.Tensor:
    """Group-baseline advantages: reward minus the mean reward of its group, [B] -> [B].

    Episodes ``[g * group_size, (g + 1) * group_size)`` share a task, so the group mean is a
    baseline that depends on the task but not on the episode's own action (leave-in mean, as in
    GRPO / Dr. GRPO). With ``normalize_std`` the centred reward is divided by the group's
    standard deviation (+1e-6); the default leaves it out, which avoids up-weighting groups whose
    rewards barely differ.
    """
    if group_size <= 0:
        raise refuse("group_size", f"must be positive, got {group_size}")
    if rewards.ndim != 1 or rewards.numel() % group_size != 0:
        raise refuse("rewards", f"must be 1-D with a length divisible by group_size={group_size}")
    grouped = rewards.float().view(-1, group_size)  # [G, K]
    centred = grouped - grouped.mean(dim=1, keepdim=True)  # [G, K]
    if normalize_std:
        centred = centred / (grouped.std(dim=1, unbiased=False, keepdim=True) + 1e-6)
    return centred.reshape(-1)  # [B]


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over positions where ``mask`` is 1 (0 when the mask is empty): [..] -> []."""
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def ppo_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate, token-level mean over the action mask -> (loss [], stats).

    ``logp`` (with grad), ``old_logp`` and ``advantages`` are all [B, T]: advantages are per
    token so that behaviour weights can be folded in (``w * A``, valid because w >= 0). The
    ratio rho = exp(logp - old_logp) is clipped to [1 - clip_low, 1 + clip_high] (asymmetric
    "clip-higher"). Stats: ``clip_frac`` (share of policy tokens where the clipped branch is the
    active one) and ``approx_kl`` (mean of old_logp - logp).
    """
    ratio = torch.exp(logp - old_logp.detach())  # [B, T]
    adv = advantages.detach()  # [B, T]
    unclipped = ratio * adv  # [B, T]
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv  # [B, T]
    loss = -masked_mean(torch.minimum(unclipped, clipped), mask)
    with torch.no_grad():
        is_clipped = (clipped < unclipped).float()  # [B, T]
        stats = {
            "clip_frac": masked_mean(is_clipped, mask).item(),
            "approx_kl": masked_mean(old_logp.detach() - logp.detach(), mask).item(),
        }
    return loss, stats


def masked_log_ratio(
    logp_trainer: torch.Tensor, logp_sampler: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """log pi - log mu where ``mask`` is not 0, and 0 where it is: detached, [B, T] -> [B, T].

    Off the mask a log-probability may be anything, ``-inf`` included (a position the sampler
    masked out): ``-inf - -inf`` is NaN, and ``exp(inf) * 0`` is NaN too, so the ratio is
    masked *before* ``exp`` and before a row's sum. ``mis`` gave NaN off the mask and ``seq-tis``
    a whole row of NaN for one ``-inf`` there. On the mask every value is the difference itself,
    so on finite inputs the weights are bit for bit those of ``(pi - mu) * mask``.
    """
    log_ratio = (logp_trainer - logp_sampler).detach()  # [B, T]
    return torch.where(mask != 0, log_ratio, 0.0)


def tis_weights(
    logp_trainer: torch.Tensor, logp_sampler: torch.Tensor, mask: torch.Tensor, cap: float = 2.0
) -> torch.Tensor:
    """Truncated IS weights min(pi/mu, cap), detached: [B, T] -> [B, T], 0 where mask is 0."""
    check_real("cap", cap, 0.0, open_low=True)  # NaN made every weight NaN
    log_ratio = masked_log_ratio(logp_trainer, logp_sampler, mask)  # [B, T]
    return log_ratio.clamp(max=math.log(cap)).exp() * mask


def mis_weights(
    logp_trainer: torch.Tensor,
    logp_sampler: torch.Tensor,
    mask: torch.Tensor,
    low: float = 0.5,
    high: float = 5.0,
) -> torch.Tensor:
    """Masked IS weights (IcePop): pi/mu where low <= pi/mu <= high, else 0; detached [B, T] -> [B, T].

    ``low = 0`` is meaningful: no lower mask (every ratio is >= 0, so only ratios above ``high``
    are masked). A NaN bound made every weight 0 (every comparison with NaN is false), ``high =
    0`` masked every token with a ratio above 0, and a negative ``low`` means no more than 0
    does, so those are refused; :func:`offpolicy.update.check_correction_args` takes the same band.
    """
    check_real("low", low, 0.0)
    check_real("high", high, 0.0, open_low=True)
    if low > high:
        raise FieldError(f"band: low={low} must not exceed high={high}", "band")
    ratio = masked_log_ratio(logp_trainer, logp_sampler, mask).exp()  # [B, T]
    inside = (ratio >= low) & (ratio <= high)  # [B, T]
    return torch.where(inside, ratio, 0.0) * mask  # where: an infinite ratio outside is 0, not inf * 0


def seq_tis_weights(
    logp_trainer: torch.Tensor, logp_sampler: torch.Tensor, mask: torch.Tensor, cap: float = 2.0
) -> torch.Tensor:
    """Sequence-level TIS: one weight min(exp(sum_t mask * (pi - mu)), cap) per row, broadcast.

    [B, T] -> [B, T], detached, 0 where mask is 0. The sum of log-ratios is taken over the
    policy tokens only (observation tokens were not sampled, so they carry no ratio).
    """
    check_real("cap", cap, 0.0, open_low=True)
    log_ratio = masked_log_ratio(logp_trainer, logp_sampler, mask)  # [B, T]
    seq_log_ratio = (log_ratio * mask).sum(dim=-1, keepdim=True)  # [B, 1]
    return seq_log_ratio.clamp(max=math.log(cap)).exp() * mask  # [B, T]
