"""Which fitted duration model ``pipesim fit --scenario-out`` writes by default, and why a fit is
a poor stand-in for its trace (:func:`fit_problems`): split from :mod:`pipesim.io.fit_models`, which
fits the models; :mod:`pipesim.io.fit` re-exports every name here."""

from __future__ import annotations

import math

import numpy as np

from pipesim.io.fit_models import ModelFit, agent_moments
from pipesim.workload.durations import AgentDurations, LogNormalDurations

__all__ = [
    "KS_REJECT_P",
    "MEAN_TOLERANCE",
    "SLOWEST_DECODE_TOK_S",
    "choose_model",
    "fit_problems",
    "model_mean",
    "unit_notes",
]

KS_REJECT_P = 0.01
"""A fit whose KS p-value is below this is rejected: not chosen by default, and warned about."""

MEAN_TOLERANCE = 0.05
"""A fit whose mean is further than this (relative) from the data's, and further than twice the
sample mean's standard error, gets the throughput wrong: not chosen by default, and warned about."""


def model_mean(fit: ModelFit) -> float:
    """The mean seconds of a fitted model (exact; inf where a log-normal's overflows)."""
    m = fit.model
    if isinstance(m, LogNormalDurations):
        try:
            return m.median_s * math.exp(m.sigma * m.sigma / 2)
        except OverflowError:
            return math.inf
    if isinstance(m, AgentDurations):
        return agent_moments(m)[0]
    return float(np.mean(m.values))


def fit_problems(fit: ModelFit, x: np.ndarray) -> list[str]:
    """Why ``fit`` is a poor stand-in for the data ``x``: KS rejects it (``p <`` :data:`KS_REJECT_P`),
    or its mean is off the data's by more than :data:`MEAN_TOLERANCE` and more than twice the
    data mean's standard error (a heavy-tailed sample's own mean wanders); empty where neither."""
    problems = []
    if not fit.p_value >= KS_REJECT_P:  # a NaN p (no spread to test) is no pass
        problems.append(f"KS rejects it (p={fit.p_value:.2g} < {KS_REJECT_P:g})")
    mean, data_mean = model_mean(fit), float(x.mean())
    err = abs(mean / data_mean - 1)
    if not err <= max(MEAN_TOLERANCE, 2 * float(x.std()) / math.sqrt(len(x)) / data_mean):
        problems.append(
            f"its mean, {mean:.4g} s, is {mean / data_mean - 1:+.0%} off the data's {data_mean:.4g} s"
        )
    return problems


def choose_model(fits: dict[str, ModelFit], x: np.ndarray) -> tuple[str, str]:
    """The model ``--scenario-out`` writes when ``--model`` is not given, and why. The rule: of the
    parametric fits (log-normal, agent) that pass :func:`fit_problems` (KS does not reject them at
    ``p >=`` :data:`KS_REJECT_P`, and their mean is within :data:`MEAN_TOLERANCE` of the data's),
    the one with the smaller KS D; where neither passes, the empirical replay, which fits any
    trace (its KS D is against a held-out half, so it is not compared with theirs)."""
    passing = [k for k in ("lognormal", "agent") if k in fits and not fit_problems(fits[k], x)]
    if passing:
        best = min(passing, key=lambda k: fits[k].ks)
        return best, (
            f"the parametric fit with the smallest KS D ({fits[best].ks:.3g}) of those KS does not reject "
            f"(p >= {KS_REJECT_P:g}) and whose mean is within {MEAN_TOLERANCE:.0%} of the data's"
        )
    why = "; ".join(
        f"{fits[k].name}: {', '.join(fit_problems(fits[k], x))}" for k in ("lognormal", "agent") if k in fits
    )
    return "empirical", f"no parametric fit passes ({why})"


SLOWEST_DECODE_TOK_S = 1.0
"""The lowest decode rate a fit in seconds is taken to be: a token a second, slower than any LLM
serves one sequence. Below it, a note asks whether the trace is in seconds, as ``pipesim calibrate``
asks of a fitted constant outside what real runs fit (:data:`pipesim.calibrate.checks.PLAUSIBLE`,
which has no decode rate): a trace in milliseconds fitted 0.0355 tok/s and a 2,253 s tool call,
without a word. A note, not a refusal: the decode rate is the base's per-turn split scaled to the
trace (the split is not identified), so a trace of very slow tool calls may reach it in seconds."""


def unit_notes(agent: ModelFit) -> list[str]:
    """A note where the agent fit's decode rate is below :data:`SLOWEST_DECODE_TOK_S`."""
    rate = agent.params["decode_rate_tok_s"]
    if rate >= SLOWEST_DECODE_TOK_S:
        return []
    return [
        f"agent model: decode_rate_tok_s {rate:.3g} is below {SLOWEST_DECODE_TOK_S:g} token a second, "
        f"slower than any LLM decodes (the base's split of a turn scaled to "
        f"{agent.params['seconds_per_turn']:,.0f} s a turn); is the trace in seconds? (one in "
        "milliseconds reads 1,000x slow: --scale 0.001 converts it)"
    ]
