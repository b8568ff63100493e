"""``pipesim fit``'s 95% intervals (:mod:`pipesim.io.fit_intervals`): the chi-square quantile
against tables and a slow Monte Carlo reference, coverage on samples with known parameters,
containment, 1/sqrt(n) shrinkage, determinism, and the JSON and the text saying the same."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim import AgentDurations, LogNormalDurations
from pipesim.io.cli import main
from pipesim.io.fit import (
    BOOTSTRAP_RESAMPLES,
    ModelFit,
    _num,
    _turn_moments,
    agent_moments,
    choose_model,
    fit_agent,
    fit_empirical,
    fit_lognormal,
    fit_values,
    format_result,
    to_json,
)
from pipesim.io.fit_intervals import agent_intervals, chi2_quantile, lognormal_intervals

TRUE_MEDIAN, TRUE_SIGMA = 50.0, 0.8


def _lognormal(n: int, seed: int) -> np.ndarray:
    return LogNormalDurations(median_s=TRUE_MEDIAN, sigma=TRUE_SIGMA).sample(n, np.random.default_rng(seed))


def _agent(n: int, seed: int, model: AgentDurations) -> tuple[np.ndarray, np.ndarray]:
    """Episode totals and their turn counts."""
    decode, tool = model.sample_turns(n, np.random.default_rng(seed))  # [n, max_turns] each
    return (decode + tool).sum(-1), (tool > 0).sum(-1).astype(np.float64)


def _within_binomial_noise(hits: int, trials: int, p: float = 0.95) -> bool:
    return abs(hits / trials - p) <= 3.5 * math.sqrt(p * (1 - p) / trials)


# -- the chi-square quantile -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.025, 1, 0.000982069117),
        (0.975, 1, 5.02388619),
        (0.025, 10, 3.24697278),
        (0.975, 10, 20.4831774),
        (0.025, 100, 74.2219275),
        (0.975, 100, 129.561197),
    ],
)
def test_chi2_quantile_matches_published_tables(p: float, df: int, expected: float) -> None:
    assert chi2_quantile(p, df) == pytest.approx(expected, rel=1e-8)


@pytest.mark.parametrize("p", [1e-6, 0.025, 0.3, 0.975, 1 - 1e-6])
def test_chi2_quantile_with_two_degrees_is_the_exponential_closed_form(p: float) -> None:
    assert chi2_quantile(p, 2) == pytest.approx(-2 * math.log1p(-p), rel=1e-9)


@pytest.mark.parametrize("df", [1, 3, 12, 40])
def test_chi2_quantile_against_a_slow_monte_carlo_reference(df: int) -> None:
    n = 100_000
    draws = (np.random.default_rng(df).standard_normal((n, df)) ** 2).sum(axis=1)  # chi-square, by definition
    for p in (0.025, 0.5, 0.975):
        below = float((draws <= chi2_quantile(p, df)).mean())
        assert abs(below - p) <= 4 * math.sqrt(p * (1 - p) / n), (df, p, below)


@pytest.mark.parametrize(
    ("p", "df", "field"), [(0.0, 3, "p"), (1.0, 3, "p"), (0.5, 0, "df"), (0.5, 2.5, "df")]
)
def test_chi2_quantile_refuses_bad_input_by_name(p: float, df: int, field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field} "):
        chi2_quantile(p, df)


# -- coverage ---------------------------------------------------------------------------------------
def test_lognormal_intervals_cover_the_truth_95_percent_of_the_time() -> None:
    """At n = 6 a normal quantile in place of Student's t would cover 89%, outside the noise."""
    reps, hits_median, hits_sigma = 600, 0, 0
    for seed in range(reps):
        iv = lognormal_intervals(_lognormal(6, seed))  # small n: where exactness matters
        hits_median += iv["median_s"][0] <= TRUE_MEDIAN <= iv["median_s"][1]
        hits_sigma += iv["sigma"][0] <= TRUE_SIGMA <= iv["sigma"][1]
    assert _within_binomial_noise(hits_median, reps), hits_median / reps
    assert _within_binomial_noise(hits_sigma, reps), hits_sigma / reps


def test_agent_bootstrap_covers_the_truth_about_95_percent_of_the_time() -> None:
    """Percentile bootstrap intervals are approximate: a few points under 95% at n = 300."""
    true = AgentDurations(mean_turns=5.0, decode_rate_tok_s=20.0, tool_median_s=4.0, draws="numpy")
    true_turn_s = agent_moments(true)[0] / _turn_moments(true.max_turns, true.mean_turns)[0]
    reps, hits_turns, hits_turn_s = 200, 0, 0
    for seed in range(reps):
        x, turns = _agent(300, seed, true)
        fit = ModelFit("agent", None, {"mean_turns": 5.0}, 0.0, 1.0, "")  # the turn path reads no estimate
        iv, _ = agent_intervals(x, fit, true, turns, np.random.default_rng(seed + 10_000))
        hits_turns += iv["mean_turns"][0] <= true.mean_turns <= iv["mean_turns"][1]
        hits_turn_s += iv["seconds_per_turn"][0] <= true_turn_s <= iv["seconds_per_turn"][1]
    for hits in (hits_turns, hits_turn_s):
        assert 0.85 <= hits / reps <= 0.995, hits / reps


# -- containment, shrinkage, determinism -----------------------------------------------------------
def _every_interval(result: object) -> list[tuple[str, float, float, float]]:
    return [
        (f"{k}.{name}", f.params[name], lo, hi)
        for k, f in result.fits.items()  # type: ignore[attr-defined]
        for name, (lo, hi) in f.intervals.items()
    ]


@pytest.mark.parametrize("with_turns", [False, True])
def test_every_interval_contains_its_point_estimate(with_turns: bool) -> None:
    if with_turns:
        x, turns = _agent(400, 1, AgentDurations(mean_turns=4.0, draws="numpy"))
        result = fit_values(x, turns=turns)
    else:
        result = fit_values(_lognormal(400, 1))
    found = _every_interval(result)
    assert {name for name, *_ in found} == {
        "lognormal.median_s",
        "lognormal.sigma",
        "agent.mean_turns",
        "agent.seconds_per_turn",
    }
    for name, est, lo, hi in found:
        assert lo <= est <= hi and lo < hi, (name, lo, est, hi)
    assert result.fits["empirical"].intervals == {} and "no interval" in result.fits["empirical"].interval_how


def _width(lo_hi: tuple[float, float], log: bool = False) -> float:
    lo, hi = lo_hi
    return math.log(hi / lo) if log else hi - lo


def test_intervals_shrink_as_one_over_root_n() -> None:
    small, large = lognormal_intervals(_lognormal(400, 2)), lognormal_intervals(_lognormal(1600, 3))
    assert 1.7 <= _width(small["median_s"], log=True) / _width(large["median_s"], log=True) <= 2.3
    assert 1.7 <= _width(small["sigma"]) / _width(large["sigma"]) <= 2.3
    model = AgentDurations(mean_turns=4.0, draws="numpy")
    fit = ModelFit("agent", None, {"mean_turns": 4.0}, 0.0, 1.0, "")
    widths = []
    for n in (400, 1600):
        x, turns = _agent(n, n, model)
        iv, _ = agent_intervals(x, fit, model, turns, np.random.default_rng(0))
        widths.append(_width(iv["seconds_per_turn"]))
    assert 1.4 <= widths[0] / widths[1] <= 2.8, widths


def test_same_seed_same_intervals_and_the_fitted_values_are_untouched() -> None:
    x = _lognormal(300, 4)
    a, b, c = fit_values(x, seed=3), fit_values(x, seed=3), fit_values(x, seed=4)
    assert _every_interval(a) == _every_interval(b)
    assert a.fits["lognormal"].intervals == c.fits["lognormal"].intervals  # exact: no randomness
    assert a.fits["agent"].intervals != c.fits["agent"].intervals  # the bootstrap reads the seed
    raw = {
        "lognormal": fit_lognormal(x),
        "agent": fit_agent(x, None, None, 3),
        "empirical": fit_empirical(x, 3),
    }
    for k, f in raw.items():
        assert a.fits[k].params == f.params and a.fits[k].ks == f.ks and a.fits[k].p_value == f.p_value
    assert (a.chosen, a.chosen_why) == choose_model(raw, x)


# -- what the command shows ------------------------------------------------------------------------
def test_json_and_text_show_the_same_intervals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "episodes.csv"
    pd.DataFrame({"duration_s": _lognormal(300, 5)}).to_csv(trace, index=False)
    assert main(["fit", str(trace), "--column", "duration_s", "--json", "-"]) == 0
    captured = capsys.readouterr()
    data, text = json.loads(captured.out), captured.err
    assert data["interval_level"] == 0.95 and data["bootstrap_resamples"] == BOOTSTRAP_RESAMPLES
    shown = 0
    for fit in data["fits"].values():
        assert {"params", "ks", "p_value", "ks_against"} <= set(fit)  # the old keys stay
        for name, (lo, hi) in fit["intervals"].items():
            assert f"{name} {_num(fit['params'][name])} [{_num(lo)}, {_num(hi)}]" in text
            shown += 1
        assert fit["intervals_how"] in text
    assert shown == 4 and data["fits"]["empirical"]["intervals"] == {}
    result = fit_values(pd.read_csv(trace)["duration_s"].to_numpy(), source=str(trace), column="duration_s")
    assert json.loads(to_json(result))["fits"] == data["fits"]
    assert format_result(result) in text
