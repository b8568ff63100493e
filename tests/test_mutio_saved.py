"""Saved-run checks that a mutation audit of :mod:`pipesim.io` found no test holding.

Each case edits a freshly saved small run (the ``saved`` fixture and the ``_edited`` / ``_set`` /
``_del`` helpers of :mod:`tests.test_saved_refusals_fields`, resealed with
:func:`tests.test_saved_integrity.reseal`, so the hashes pass and the checks below them are what
refuse it) and asserts a :class:`~pipesim.io.saved.SavedRunError` naming the file and the field.
The edits sit just past each check's bound, where a looser check would load them:

- a summary value off by a relative 1e-4 (``same_value`` compares to 1e-9, not 1e-3), or NaN
  against a number (NaN equals only NaN);
- a negative time of -0.5 (``>= 0``, not ``>= -1``);
- every per-status count of the summary off by 3 (each is compared with ``episodes.parquet``);
- an event ending at 1.5 x the run's simulated time (inside the run, not inside twice it);
- a summary without ``episodes_trained`` (a headline key the views read);
- an episode on slot ``n_slots`` (slots run ``0 .. n_slots - 1``).

And the converse: a timeout run whose truncated episodes were partly never trained reloads as
saved (``truncated_share`` counts the *trained* episodes a timeout cut, as the summary does).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim
from pipesim.io.html import LAUNCHED_PARTS
from pipesim.io.registry import apply_overrides, get_scenario
from pipesim.io.saved import SavedRunError, load
from pipesim.io.saved_checks import STATUS_COUNTS
from tests.test_saved_integrity import reseal
from tests.test_saved_refusals_fields import (
    _del,
    _edited,
    _set,
    saved,  # noqa: F401  (the fixture)
)

SUM, SC, EV, EP = "summary.json", "scenario.json", "events.parquet", "episodes.parquet"


def _scaled(key: str, factor: float) -> Callable[[Any], None]:
    """The summary's ``key`` times ``factor``."""
    return lambda j: _set(j[key] * factor, key)(j)


def _plus(key: str, n: int) -> Callable[[Any], None]:
    return lambda j: _set(j[key] + n, key)(j)


def _last_event_ends_at(factor: float) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The last event's end_s moved to ``factor`` x the run's end (its largest end_s)."""

    def edit(t: pd.DataFrame) -> pd.DataFrame:
        t = t.copy()
        t.loc[t.index[-1], "end_s"] = float(t["end_s"].max()) * factor
        return t

    return edit


def _slot_at(slot: int) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The first episode moved to ``slot``."""

    def edit(t: pd.DataFrame) -> pd.DataFrame:
        t = t.copy()
        t.loc[t.index[0], "slot"] = slot
        return t

    return edit


# (case, file edited, edit, file the error names, field the error names)
CASES: list[tuple[str, str, Callable[[Any], Any], str, str]] = [
    # A: same_value compares to a relative 1e-9; 1e-4 off is an edit
    ("throughput x1.0001", SUM, _scaled("throughput_per_hour", 1.0001), SUM, "throughput_per_hour"),
    ("staleness_mean x1.0001", SUM, _scaled("staleness_mean", 1.0001), SUM, "staleness_mean"),
    # B: NaN equals only NaN, not the tables' number
    ("staleness_mean nan", SUM, _set("nan", "staleness_mean"), SUM, "staleness_mean"),
    ("throughput nan", SUM, _set("nan", "throughput_per_hour"), SUM, "throughput_per_hour"),
    # C: a time is >= 0, so -0.5 is refused (the existing case, -5, is refused by a bound of -1 too)
    ("lost_work_s -0.5", SUM, _set(-0.5, "lost_work_s"), SUM, "lost_work_s"),
    # E: every count of one status (and the trained rows) is compared with episodes.parquet
    *[(f"{k} +3", SUM, _plus(k, 3), SUM, k) for k in LAUNCHED_PARTS],
    # F: an event ending past the run (the run's end is meta.json's sim_time_s, the latest end_s);
    # the refusal names start_s for either end of the interval, and its message names no column
    ("event end 1.5x", EV, _last_event_ends_at(1.5), EV, "start_s"),
    # G: a headline key removed (views and the report read it)
    ("no episodes_trained", SUM, _del("episodes_trained"), SUM, "episodes_trained"),
    # H: slots run 0 .. n_slots - 1: an episode on slot n_slots contradicts the scenario
    ("slot n_slots", EP, _slot_at(16), SC, "scenario.pipeline.n_slots"),
]
SAYS = {"event end 1.5x": "is not inside the run's [0, "}
"""What a case's message says where it does not name its field (default: the field's last part)."""


@pytest.mark.parametrize(("name", "file", "edit", "named", "field"), CASES, ids=[c[0] for c in CASES])
def test_an_edit_past_a_checks_bound_is_refused_naming_file_and_field(
    saved: Path,  # noqa: F811
    tmp_path: Path,
    name: str,
    file: str,
    edit: Callable[[Any], Any],
    named: str,
    field: str,
) -> None:
    d = _edited(saved, tmp_path / "run", file, edit)
    with pytest.raises(SavedRunError) as err:
        load(d)
    msg = str(err.value)
    assert msg.startswith(str(d / named)), msg
    assert err.value.field == field, msg
    assert SAYS.get(name, field.split(".")[-1]) in msg, msg


def test_the_cases_sit_just_past_the_bounds(saved: Path) -> None:  # noqa: F811
    """The run the cases edit: 16 slots, an event ending at the run's end, every per-status count
    a STATUS_COUNTS key (so +3 cannot be caught by a sum elsewhere only)."""
    loaded = load(saved)
    assert loaded.scenario.pipeline.n_slots == 16
    assert int(loaded.episode_table["slot"].max()) < 16
    meta = json.loads((saved / "meta.json").read_text())
    assert float(loaded.events["end_s"].max()) == pytest.approx(meta["sim_time_s"], rel=1e-9)
    assert set(STATUS_COUNTS) == set(LAUNCHED_PARTS) - {"episodes_trained"}
    summary = json.loads((saved / SUM).read_text())
    assert summary["lost_work_s"] == 0 and summary["staleness_mean"] > 0


@pytest.fixture(scope="module")
def timeout_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    """async-eta1 on 16 slots, 3 steps, a 60 s timeout: some truncated episodes are never trained."""
    scen, _ = apply_overrides(
        get_scenario("async-eta1"),
        ["n_slots=16", "batch_size=16", "steps=3", "timeout=Timeout(cap_s=60)"],
    )
    r = pipesim.run(scen)
    d = tmp_path_factory.mktemp("timeout") / "run"
    r.save(d)
    return d, dict(r.summary())


def test_a_timeout_run_with_untrained_truncated_episodes_reloads(
    timeout_run: tuple[Path, dict[str, float]],
) -> None:
    """D: truncated_share is the trained episodes a timeout cut / the trained episodes; a check
    that counted every truncated episode refused this run as edited."""
    d, summary = timeout_run
    ep = pd.read_parquet(d / EP)
    cut, trained = ep["truncated"].astype(bool), ep["status"].astype(str) == "trained"
    assert (cut & ~trained).any() and (cut & trained).any(), "the run must truncate both kinds"
    loaded = load(d)
    n_trained = int(trained.sum())
    assert loaded.summary_data["truncated_share"] == pytest.approx(int((cut & trained).sum()) / n_trained)
    assert loaded.summary_data["truncated_share"] == summary["truncated_share"]


def test_a_timeout_run_with_its_truncated_share_edited_is_refused(
    timeout_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    """The same run with truncated_share set to every truncated episode / trained: refused."""
    src, _ = timeout_run
    ep = pd.read_parquet(src / EP)
    every = int(ep["truncated"].astype(bool).sum()) / int((ep["status"].astype(str) == "trained").sum())
    d = tmp_path / "run"
    shutil.copytree(src, d)
    summary = json.loads((d / SUM).read_text())
    summary["truncated_share"] = every
    (d / SUM).write_text(json.dumps(summary))
    reseal(d)
    with pytest.raises(SavedRunError) as err:
        load(d)
    assert err.value.field == "truncated_share", str(err.value)
