"""``pipesim fit``'s messages where the turn count is not decided, an interval that is not identified,
the numbers' format, and the docs' list of trace formats.

Before: a trace whose two turn counts KS both rejects read "4.99, 9.4 both fit (KS rules none out)";
a trace more spread than the agent model's peak got ``mean_turns 7.022 [7.022, 7.022]`` (a point:
every resample pinned at the peak) and a claim that the intervals span both sides of the peak;
``seconds_per_turn 13,666 [1980, 19,131]`` mixed two formats; docs/usage.md named CSV and JSONL only.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from pipesim import LogNormalDurations
from pipesim.io.fit import KS_REJECT_P, ModelFit, _interval_line, _num, fit_values, format_result, to_json
from pipesim.io.fit_intervals import undecided_turns

ROOT = Path(__file__).resolve().parents[1]
READ_SUFFIXES = (".csv", ".txt", ".tsv", ".jsonl", ".ndjson", ".json", ".parquet")
"""What :func:`pipesim.io.fit_readers.read_table` reads, by suffix (its ``TEXT_SUFFIXES``, ``.json``
and ``.parquet``)."""


def _lognormal(median_s: float, sigma: float, n: int, seed: int) -> np.ndarray:
    return LogNormalDurations(median_s=median_s, sigma=sigma).sample(n, np.random.default_rng(seed))


def _agent_trace(seed: int) -> np.ndarray:
    """The default agent shape at 3 true turns (tests/test_fitfix_fit.py's generator)."""
    rng = np.random.default_rng(seed)
    turns = np.minimum(rng.geometric(1 / 3.0, 300), 40)
    return np.array(
        [
            (rng.uniform(100, 600, k) / 40.0).sum() + (2.0 * np.exp(rng.standard_normal(k))).sum()
            for k in turns
        ]
    )


def _strict(text: str) -> dict:  # type: ignore[type-arg]
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)  # type: ignore[no-any-return]


# -- KS rejects both vs neither ---------------------------------------------------------------------
def test_ks_rejecting_both_turn_counts_is_not_worded_as_both_fitting() -> None:
    """docs/usage.md's own example: 4,000 log-normal values, median 50 s, sigma 0.8, seed 0."""
    result = fit_values(_lognormal(50.0, 0.8, 4000, 0), seed=0)
    agent = result.fits["agent"]
    assert undecided_turns(agent) and all(p < KS_REJECT_P for _, p in agent.turn_roots), agent.turn_roots
    text = format_result(result)
    how = _strict(to_json(result))["fits"]["agent"]["intervals_how"]
    note = next(n for n in result.notes if "two mean turn counts" in n)
    for words in (how, note):
        assert "KS rejects both" in words and "does not choose between them" in words, words
        assert "rejects neither" not in words and "rules none out" not in words and "both fit" not in words
    assert how in text and note in text


def test_ks_rejecting_neither_turn_count_says_so() -> None:
    result = fit_values(_agent_trace(1025), seed=25)
    agent = result.fits["agent"]
    assert undecided_turns(agent) and all(p >= KS_REJECT_P for _, p in agent.turn_roots), agent.turn_roots
    note = next(n for n in result.notes if "two mean turn counts" in n)
    for words in (agent.interval_how, note):
        assert "KS rejects neither" in words and "rejects both" not in words, words


# -- a turn count the bootstrap pins: not identified ------------------------------------------------
@pytest.mark.parametrize(("sigma", "seed"), [(1.0, 3), (1.3, 7)])
def test_a_turn_count_pinned_in_every_resample_is_not_identified(sigma: float, seed: int) -> None:
    """A log-normal of sigma 1 (CV^2 1.7) is more spread than the agent model's peak (0.868)."""
    result = fit_values(_lognormal(60.0, sigma, 300, seed), seed=0)
    agent = result.fits["agent"]
    lo, hi = agent.intervals["mean_turns"]
    assert math.isnan(lo) and math.isnan(hi)
    spt_lo, spt_hi = agent.intervals["seconds_per_turn"]
    assert spt_lo < agent.params["seconds_per_turn"] < spt_hi
    fit = _strict(to_json(result))["fits"]["agent"]
    assert fit["turns_identified"] is False and fit["intervals"]["mean_turns"] == [None, None]
    text = format_result(result)
    assert f"mean_turns {_num(agent.params['mean_turns'])} [not identified]" in text
    assert "both sides of the peak" not in text and "do not identify mean_turns" in agent.interval_how
    assert "understates" not in agent.interval_how  # there is no interval left to understate


@pytest.mark.parametrize("make", [lambda: _lognormal(50.0, 0.5, 300, 1), lambda: _agent_trace(1025)])
def test_an_identified_turn_count_has_an_interval_of_width(make: object) -> None:
    result = fit_values(make(), seed=0)  # type: ignore[operator]
    lo, hi = result.fits["agent"].intervals["mean_turns"]
    assert lo < hi
    assert _strict(to_json(result))["fits"]["agent"]["turns_identified"] is True
    assert "not identified" not in format_result(result)


# -- the numbers ------------------------------------------------------------------------------------
def test_one_interval_shares_one_number_format() -> None:
    fit = ModelFit(
        "agent",
        None,
        {"seconds_per_turn": 13_666.0},
        0.0,
        1.0,
        "",
        intervals={"seconds_per_turn": (1980.0, 19_131.0)},
    )
    assert "seconds_per_turn 13,666 [1,980, 19,131]" in _interval_line(fit, 5)
    assert _num(9999.7) == "10,000" and _num(999.4) == "999.4" and _num(0.7986) == "0.7986"
    for v in (1000.0, 1980.0, 12_345.6, 9999.7, 2.5e6):
        s = _num(v)
        assert "," in s and abs(float(s.replace(",", "")) - v) <= 0.5, (v, s)


# -- the docs ---------------------------------------------------------------------------------------
def test_usage_docs_list_every_suffix_the_fit_reads() -> None:
    docs = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    section = docs.split("## Fitting your own trace")[1].split("\n## ")[0]
    head = section.split("```")[0]
    named = set(re.findall(r"`(\.[a-z]+)`", head))
    assert set(READ_SUFFIXES) <= named, named
    assert "CSV or JSONL trace" not in docs
