"""Bias and variance of behaviour-weighted policy gradients on a one-step softmax problem.

``python -m offpolicy.estimator`` prints the section 13.4 table. In a one-step problem the true
gradient is known exactly: for a softmax policy pi over V tokens with logits z and a fixed
reward r per token, d E_pi[r] / dz = pi * (r - E_pi r). The sampler mu has logits z + sigma *
noise. Each estimate averages 64 sampled tokens' weighted score-function terms
``w * (r_a - mean r) * (onehot(a) - pi)`` (batch-mean baseline); repeating it 4,000 times gives
the estimator's squared bias and variance, both relative to ||grad||^2.

The numbers are golden by design: one ``torch.Generator().manual_seed(0)`` drives every draw,
in the order z, reward, then per sigma the noise followed by one multinomial draw per weight
function in table order. Changing that order changes every digit.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import torch

from offpolicy.checks import check_output
from offpolicy.functional import mis_weights, tis_weights
from offpolicy.interrupts import INTERRUPTED, sigterm_as_interrupt

WeightFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
V, N, REPS = 100, 64, 4000
SIGMAS = (0.1, 0.5, 1.0, 2.0)
WEIGHTS: dict[str, WeightFn] = {
    "none": lambda lp, lm, m: m,
    "full IS": lambda lp, lm, m: (lp - lm).exp() * m,
    "TIS C=2": lambda lp, lm, m: tis_weights(lp, lm, m, 2.0),
    "MIS [0.5, 5]": lambda lp, lm, m: mis_weights(lp, lm, m, 0.5, 5.0),
}


def estimator_error(
    logpi: torch.Tensor,
    logmu: torch.Tensor,
    reward: torch.Tensor,
    weight_fn: WeightFn,
    gen: torch.Generator,
    n: int = N,
    reps: int = REPS,
) -> tuple[float, float]:
    """Relative squared bias and variance of the weighted gradient estimate from mu's samples.

    logpi, logmu, reward: [V]. Draws one [reps, n] multinomial from ``gen``.
    """
    v = logpi.shape[0]
    pi = logpi.exp()  # [V]
    true_grad = pi * (reward - (pi * reward).sum())  # [V]
    a = torch.multinomial(logmu.exp().expand(reps, v), n, replacement=True, generator=gen)  # [R, N]
    adv = reward[a] - reward[a].mean(-1, keepdim=True)  # [R, N]
    w = weight_fn(logpi[a], logmu[a], torch.ones_like(adv))  # [R, N]
    grads = ((w * adv)[..., None] * (torch.nn.functional.one_hot(a, v) - pi)).mean(1)  # [R, V]
    scale = true_grad.pow(2).sum()
    bias2 = ((grads.mean(0) - true_grad).pow(2).sum() / scale).item()
    variance = (grads.var(0).sum() / scale).item()
    return bias2, variance


def estimator_table(seed: int = 0, sigmas: tuple[float, ...] = SIGMAS) -> list[dict[str, object]]:
    """Rows {sigma, kl, cells: {name: (bias2, variance)}} in the chapter's draw order."""
    gen = torch.Generator().manual_seed(seed)
    z, reward = 2.0 * torch.randn(V, generator=gen), torch.randn(V, generator=gen)  # [V], [V]
    logpi = torch.log_softmax(z, -1)  # [V]
    rows: list[dict[str, object]] = []
    for sigma in sigmas:
        logmu = torch.log_softmax(z + sigma * torch.randn(V, generator=gen), -1)  # [V]
        kl = (logmu.exp() * (logmu - logpi)).sum().item()
        cells = {name: estimator_error(logpi, logmu, reward, fn, gen) for name, fn in WEIGHTS.items()}
        rows.append({"sigma": sigma, "kl": kl, "cells": cells})
    return rows


def format_table(rows: list[dict[str, object]]) -> str:
    """The table as printed in the chapter: one line per sigma, cells '(bias^2, variance)'."""
    head = f"{'sigma':>5} {'KL(mu||pi)':>10} | " + " | ".join(f"{k:>14}" for k in WEIGHTS)
    lines = [head + "   (bias^2, variance)"]
    for row in rows:
        cells = row["cells"]
        assert isinstance(cells, dict)
        body = " | ".join(f"{b:6.3f}, {v:6.3f}" for b, v in cells.values())
        lines.append(f"{row['sigma']:5.1f} {row['kl']:10.3f} | " + body)
    return "\n".join(lines)


PROG = "python -m offpolicy.estimator"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the table to this text file")
    args = parser.parse_args(argv)
    check_output(parser, "--out", args.out)  # before the table
    torch.set_num_threads(1)
    text = None
    try:
        with sigterm_as_interrupt():
            text = format_table(estimator_table())
            print(text)
            if args.out:
                with open(args.out, "w") as fh:
                    fh.write(text + "\n")
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: one line, as the other scripts
        said = "before the table was done" if text is None else f"while writing {args.out} (incomplete)"
        print(f"{PROG}: interrupted {said}", file=sys.stderr, flush=True)
        return INTERRUPTED
    return 0


if __name__ == "__main__":
    from offpolicy.interrupts import reader_may_leave

    raise SystemExit(reader_may_leave(main))
