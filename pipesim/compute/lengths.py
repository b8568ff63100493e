"""Response lengths in absolute tokens, named per model and dataset kind: a small registry.

A :class:`LengthSpec` is a length distribution **in tokens**, independent of any cap: log-normal
within a prompt group (``median_tokens``, ``sigma``) times a per-group difficulty
(``difficulty_sigma``). The cap (``max_response_tokens``) is a separate input of the workload it
builds; truncation emerges from it (the share of draws past the cap), it no longer places the
distribution (the earlier profiles put the median at a quantile of the cap, so an 8K cap gave a
base model a few hundred tokens and a 28K cap gave the same model 1,657). Raising the cap never
changes a draw below the old cap.

Each entry names its source. Where no published run gives the distribution the value is a choice,
said so in ``source``, and the same entry serves every claim on that model and dataset kind (never
one per claim). :data:`LENGTHS` holds the entries by name; :func:`length_spec` looks one up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pipesim.compute.trajectory import LengthTrajectory
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.errors import check_int, check_number, check_tail, shown
from pipesim.core.validate import FieldError


@dataclass(frozen=True)
class LengthSpec:
    """A named response-length distribution in tokens, with where each value came from."""

    name: str
    median_tokens: float
    sigma: float
    """Log-space spread of a response within its prompt group."""
    difficulty_sigma: float
    """Log-space spread of a group's length multiplier (some prompts are harder)."""
    source: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise FieldError(f"name must be a non-empty str, got {shown(self.name)}", "name")
        check_number("median_tokens", self.median_tokens, 0, strict=True)
        check_number("sigma", self.sigma, 0)
        check_number("difficulty_sigma", self.difficulty_sigma, 0)
        check_tail(
            ("median_tokens", "sigma"), self.median_tokens, math.hypot(self.sigma, self.difficulty_sigma)
        )
        if not isinstance(self.source, str) or not self.source:
            raise FieldError(f"source must be a non-empty str, got {shown(self.source)}", "source")

    @property
    def mean_tokens(self) -> float:
        """Mean before any cap (the group's difficulty included)."""
        return self.median_tokens * math.exp((self.sigma**2 + self.difficulty_sigma**2) / 2)

    def workload(
        self,
        max_response_tokens: int,
        samples_per_prompt: int,
        prompt: int,
        scale: float = 1.0,
        trajectory: LengthTrajectory | None = None,
    ) -> TokenWorkload:
        """A workload drawing these lengths (times ``scale``: a length band's end) under the cap
        ``max_response_tokens``, with fixed ``prompt`` tokens and groups of ``samples_per_prompt``."""
        check_number("scale", scale, 0, strict=True)
        check_int("prompt", prompt, 1)
        return TokenWorkload(
            response=LogNormalLengths(self.median_tokens * scale, self.sigma),
            prompt=prompt,
            samples_per_prompt=samples_per_prompt,
            max_response_tokens=max_response_tokens,
            max_prompt_tokens=max(prompt, 4096),
            difficulty_sigma=self.difficulty_sigma,
            trajectory=trajectory,
        )


def _spec(name: str, mean_tokens: float, sigma: float, difficulty_sigma: float, source: str) -> LengthSpec:
    """An entry given by its mean (what the sources report) rather than its median."""
    median = mean_tokens / math.exp((sigma**2 + difficulty_sigma**2) / 2)
    return LengthSpec(name, median, sigma, difficulty_sigma, source)


DIFFICULTY_SIGMA = 0.5
"""Per-group spread of every math entry (chosen once: no source gives the spread across prompts;
ROLL Flash's introduction says the longest responses of a batch are tens of times the median)."""

LENGTHS: dict[str, LengthSpec] = {
    s.name: s
    for s in (
        _spec(
            "math-reasoning-7b",
            1_700.0,
            1.0,
            DIFFICULTY_SIGMA,
            "Qwen2.5-Math-7B base under R1-Zero-style RL (DAPO) on competition math. A choice: no source "
            "gives the distribution. The model's native context is 4,096 tokens (config.json "
            "max_position_embeddings, which verl's scripts raise to 32,768), so its answers start well "
            "inside 4K; spread 1.0, a long tail. The earlier cap-relative profile (0.1% past verl's 28K) "
            "had this mean; it is now pinned in tokens.",
        ),
        _spec(
            "math-reasoning-1.5b",
            5_500.0,
            0.6,
            DIFFICULTY_SIGMA,
            "DeepSeek-R1-Distill-Qwen-1.5B on competition math: DeepScaleR (Agentica, 'DeepScaleR: "
            "Surpassing O1-Preview with a 1.5B Model by Scaling RL') reports its mean response at about "
            "5,500 tokens when RL starts (falling to 3,500 under an 8K cap, growing again at 16K/24K). "
            "Spread 0.6: a choice (long chains of thought, few very short).",
        ),
        _spec(
            "math-reasoning-qwen3",
            5_500.0,
            0.6,
            DIFFICULTY_SIGMA,
            "Qwen3-4B/8B in thinking mode on math. A choice: no published RL length curve was found for "
            "these models; the same as math-reasoning-1.5b (a distilled long-CoT thinker of the same "
            "lineage), not fitted to any claim.",
        ),
        LengthSpec(
            "code-completion-trace",
            16.25,
            0.85,
            0.0,
            "Output tokens of a production code assistant: the Splitwise/Azure code trace as Vidur ships "
            "it (splitwise_code.csv, 8,819 requests: geometric mean 16.25 tokens, log-space spread "
            "0.85, median 13, p99 251). Inference requests, not RL rollouts: a short-answer contrast.",
        ),
    )
}
"""The registry: each :class:`LengthSpec` by name."""


def length_spec(name: str) -> LengthSpec:
    """The entry ``name`` of :data:`LENGTHS` (``ValueError`` naming the known ones otherwise)."""
    if not isinstance(name, str) or name not in LENGTHS:
        raise FieldError(f"name: length spec {shown(name)} is not one of {sorted(LENGTHS)}", "name")
    return LENGTHS[name]
