"""Step-0 health metric for training code: the distribution of |log pi_old - log mu|.

The chapter's advice (section 13.7, "nondeterminism") is to log the mean, p99 and max of the
per-token gap between the trainer's recomputed log-probs and the sampler's log-probs. A sudden
rise means a kernel, precision or version bug, not learning. This module imports torch only, so
training code (``offpolicy``) can use it without pulling in transformers.
"""

from __future__ import annotations

import torch

from mismatch.checks import FieldError


def logprob_health(
    logp_trainer: torch.Tensor, logp_sampler: torch.Tensor, mask: torch.Tensor
) -> dict[str, float]:
    """Mean, p99 and max of |logp_trainer - logp_sampler| over masked tokens -> dict.

    Shapes: all three tensors are [B, T] (or any equal shape); ``mask`` is 0/1 or bool.
    Returns zeros when the mask selects no token, so a logger never sees NaN.
    """
    if logp_trainer.shape != logp_sampler.shape or logp_trainer.shape != mask.shape:
        raise FieldError(
            f"shape mismatch: logp_trainer {tuple(logp_trainer.shape)}, "
            f"logp_sampler {tuple(logp_sampler.shape)}, mask {tuple(mask.shape)}",
            "logp_sampler" if logp_trainer.shape != logp_sampler.shape else "mask",
        )
    gap = (logp_trainer.detach().float() - logp_sampler.detach().float()).abs()[mask.bool()]  # [n_tokens]
    if gap.numel() == 0:
        return {"mean": 0.0, "p99": 0.0, "max": 0.0, "n_tokens": 0.0}
    return {
        "mean": gap.mean().item(),
        "p99": torch.quantile(gap, 0.99).item(),
        "max": gap.max().item(),
        "n_tokens": float(gap.numel()),
    }
