"""The chapter's torch side of the workload: torch imported on first use, the chapter's generator
and the seeds it tells apart, and straggler ratios computed on the chapter's tensor.

The chapter drew its pool with ``torch.Generator().manual_seed(seed)``;
:class:`~pipesim.workload.durations.AgentDurations` with ``draws="chapter"`` reproduces those
numbers through :func:`chapter_generator`. torch is needed for nothing else, so it is imported
only when called (``_torch``, whose ImportError says what needed it), and a seed that generator
would alias to a smaller one is refused (:data:`CHAPTER_SEEDS`, :func:`check_chapter_seed`, which
a scenario asks when it is built). :func:`straggler_ratios` reports E[slowest of B] / mean as the
chapter does: in torch for its tensor, in numpy for an array.

It lives apart from the duration models (:mod:`pipesim.workload.durations`), which reach it only
on the chapter's draw path: how torch is found and how it seeds sit in one place, and the models'
module holds the models.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pipesim.core.validate import FieldError, refuse

if TYPE_CHECKING:
    import torch

__all__ = ["CHAPTER_SEEDS", "chapter_generator", "check_chapter_seed", "straggler_ratios"]


def _torch(why: str) -> Any:
    """torch, imported on first use, or an ImportError that says what needed it."""
    try:
        import torch
    except ImportError as exc:  # ModuleNotFoundError, or None in sys.modules
        raise ImportError(
            f"{why} needs torch, which is not installed (pip install torch); "
            "AgentDurations(draws='numpy') and the other duration models run without it"
        ) from exc
    return torch


CHAPTER_SEEDS = 2**32
"""Seeds the chapter's torch generator tells apart: its CPU generator keeps a seed's low 32 bits,
so ``manual_seed(2**32 + 1)`` draws what ``manual_seed(1)`` draws (checked with torch 2.13)."""


def check_chapter_seed(seed: int) -> None:
    """Refuse a seed the chapter's generator would alias to a smaller one (a run of seed 2**32
    was the run of seed 0 without a word)."""
    if seed >= CHAPTER_SEEDS:
        raise refuse(
            "seed",
            f"must be below 2**32 ({CHAPTER_SEEDS:,}) for AgentDurations(draws='chapter'), got "
            f"{seed:,}: the chapter's torch generator keeps 32 bits, so it would repeat seed "
            f"{seed % CHAPTER_SEEDS:,} (draws='numpy' takes any seed)",
        )


def chapter_generator(seed: int) -> torch.Generator:
    """The chapter's generator for ``seed``: ``torch.Generator().manual_seed(seed)`` (needs torch)."""
    check_chapter_seed(seed)
    torch = _torch("the chapter's generator (AgentDurations with draws='chapter', the chapter's exact draws)")
    return torch.Generator().manual_seed(seed)


def straggler_ratios(durations: Any, batch_sizes: Sequence[int] = (8, 64, 512)) -> dict[int, float]:
    """E[slowest of B] / mean for each B, estimated by splitting the pool into batches of B.

    ``durations``: a numpy array, or the chapter's torch tensor (computed in torch, as the chapter does).
    """
    if isinstance(durations, Sequence):
        durations = np.asarray(durations, dtype=np.float64)
    out = {}
    for b in batch_sizes:
        usable = (len(durations) // b) * b
        if usable == 0:
            raise FieldError(
                f"pool of {len(durations)} durations is smaller than batch size {b}", "durations"
            )
        if isinstance(durations, np.ndarray):
            out[b] = float(durations[:usable].reshape(-1, b).max(-1).mean() / durations.mean())
        else:
            out[b] = (durations[:usable].view(-1, b).max(-1).values.mean() / durations.mean()).item()
    return out
