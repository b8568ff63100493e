"""Summaries of log-prob differences: table rows, probability bins, and importance-ratio ranges.

All inputs are [B, T] fp32 log-prob tensors over the same sampled tokens (natural log). A row
summarises d = a - b per token (mean |d|, median, p99, max) and per sequence (max |sum_t d|, the
log of the worst sequence-level ratio). Quantiles are computed in float64 on the CPU so they do not
depend on the device. The four probability bins partition [0, 1] (the last bin includes 1), so
every token is counted exactly once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from mismatch.checks import FieldError

BIN_EDGES: tuple[float, ...] = (0.0, 0.1, 0.5, 0.9, 1.0)
TIS_CAP = 2.0  # token-level truncated-IS cap used in the chapter
ICEPOP_BAND = (0.5, 5.0)  # IcePop's accepted ratio band


@dataclass(frozen=True)
class MismatchRow:
    """One table row. Units: nats (natural-log differences)."""

    name: str
    mean: float
    median: float
    p99: float
    max: float
    max_abs_seq_sum: float
    n_tokens: int

    def to_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


def mismatch_row(name: str, a: torch.Tensor, b: torch.Tensor) -> MismatchRow:
    """Row for d = a - b, both [B, T]."""
    if a.shape != b.shape:
        raise FieldError(f"{name}: shapes differ, {tuple(a.shape)} vs {tuple(b.shape)}", name)
    d = (a.double() - b.double()).cpu()  # [B, T]
    gap = d.abs().flatten()  # [B*T]
    q = torch.quantile(gap, torch.tensor([0.5, 0.99], dtype=torch.float64))
    return MismatchRow(
        name=name,
        mean=gap.mean().item(),
        median=q[0].item(),
        p99=q[1].item(),
        max=gap.max().item(),
        max_abs_seq_sum=d.sum(-1).abs().max().item(),
        n_tokens=gap.numel(),
    )


def bin_index(engine_logp: torch.Tensor) -> torch.Tensor:
    """Bin of each token by engine probability: 0..3 for [0,.1), [.1,.5), [.5,.9), [.9,1] -> [B*T]."""
    p = engine_logp.double().exp().clamp(max=1.0).flatten().cpu()  # [B*T]
    return torch.bucketize(p, torch.tensor(BIN_EDGES[1:-1], dtype=torch.float64), right=True)


def probability_bins(engine_logp: torch.Tensor, diffs: dict[str, torch.Tensor]) -> list[dict[str, object]]:
    """Per bin: bounds, token count, and mean |d| of each named difference [B, T] (None if empty)."""
    idx = bin_index(engine_logp)
    out: list[dict[str, object]] = []
    for k in range(len(BIN_EDGES) - 1):
        inside = idx == k
        n = int(inside.sum())
        means = {
            name: (d.abs().flatten().cpu()[inside].double().mean().item() if n else None)
            for name, d in diffs.items()
        }
        out.append({"lo": BIN_EDGES[k], "hi": BIN_EDGES[k + 1], "n_tokens": n, "mean_abs_d": means})
    return out


def ratio_ranges(logp_trainer: torch.Tensor, logp_engine: torch.Tensor) -> dict[str, float]:
    """Ranges of pi/mu per token and per sequence, and the share of tokens a correction would touch."""
    log_r = (logp_trainer.double() - logp_engine.double()).cpu()  # [B, T]
    r = log_r.exp()
    seq = log_r.sum(-1).exp()  # [B]
    lo, hi = ICEPOP_BAND
    return {
        "token_min": r.min().item(),
        "token_max": r.max().item(),
        "seq_min": seq.min().item(),
        "seq_max": seq.max().item(),
        "frac_tokens_over_tis_cap": (r > TIS_CAP).double().mean().item(),
        "frac_tokens_outside_icepop": ((r < lo) | (r > hi)).double().mean().item(),
    }


def format_rows(title: str, rows: list[MismatchRow]) -> str:
    """The chapter's table layout: name | mean|d| | median | p99 | max | max |seq sum|."""
    width = max([len(title)] + [len(r.name) for r in rows])
    lines = [f"{title:<{width}} | mean|d|  |  median  |   p99    |   max    | max|seq sum|"]
    for r in rows:
        lines.append(
            f"{r.name:<{width}} | {r.mean:.2e} | {r.median:.2e} | {r.p99:.2e} | {r.max:.2e} | "
            f"{r.max_abs_seq_sum:.3f}"
        )
    return "\n".join(lines)
