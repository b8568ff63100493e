"""Wrong numbers of ``pipesim calibrate`` and of calibrated predictions (a user's walkthrough):

1. a log longer than 20 steps (or logged every few steps) was fitted with the spec run's first 20
   dealings reused in turn, so its trainer constants drifted from the truth
   (:func:`pipesim.calibrate.trainer_inputs.dealt`);
2. ``--intervals`` drew a what-if value outside its interval from the wrong side
   (:func:`pipesim.calibrate.predict.draw_value`);
3. the calibrated weight sync replaced every design's sync, though it was measured on the logged
   design (:func:`pipesim.plan.runspec.plan_tables`);
4. ``--intervals`` said it drew calibrated values that the spec gives no interval for.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import read_log
from pipesim.calibrate.sample import sample_log
from pipesim.calibrate.trainer import fit_trainer_profile
from pipesim.calibrate.trainer_inputs import tokens
from pipesim.plan.runspec import from_dict, read

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEC = EXAMPLES / "run_verl_8gpu.toml"
PROFILE_TRUE = {
    "fwd_bwd_efficiency": 0.35,
    "fwd_efficiency": 0.25,
    "micro_batch_s": 0.3,
    "optimizer_step_s": 1.0,
}
LENGTHS = {"response_median_tokens": 700.0, "response_sigma": 0.7}
TRUE = {**PROFILE_TRUE, "step_s": 2.0, "iteration_overhead_s": 0.004, **LENGTHS}


def _data(steps: int, seed: int) -> dict[str, Any]:
    data = read(SPEC)
    data["run"] = {"steps": steps, "seed": seed}
    return data


@functools.lru_cache(maxsize=4)
def _noiseless(steps: int, seed: int) -> pd.DataFrame:
    data = _data(steps, seed)
    data["calibration"] = {"values": dict(TRUE)}
    return sample_log(from_dict(data), np.random.default_rng(seed), noise=0.0)


def _fit(tmp_path: Path, df: pd.DataFrame, seed: int) -> dict[str, float]:
    """The trainer's fit of ``df`` against the spec at its true lengths and the log's run seed (so
    the fit deals each step as the log's run dealt it)."""
    path = tmp_path / "log.csv"
    df.to_csv(path, index=False)
    log = read_log(path)
    data = _data(int(log.steps.max()) + 1, seed)
    data["calibration"] = {"values": dict(LENGTHS)}
    rs = from_dict(data)
    t = tokens(log, rs)
    assert t is not None
    got, _ = fit_trainer_profile(log, rs, t)
    return {k: got[k].value for k in PROFILE_TRUE}


# -- 1. every step dealt as its own run dealt it --------------------------------------------------


@pytest.mark.parametrize("seed", [0, 5])
def test_a_noiseless_log_longer_than_twenty_steps_gives_back_the_trainer_constants(
    tmp_path: Path, seed: int
) -> None:
    """45 steps of the spec's own run: before, steps 20-44 were dealt as steps 0-24 and the fit
    read fwd_bwd_efficiency 0.397 and 0.387 for 0.35, optimizer_step_s 1.20 and 1.16 for 1.0
    (seeds 0 and 5); each step's own dealing gives them back."""
    got = _fit(tmp_path, _noiseless(45, seed), seed)
    assert got == pytest.approx(PROFILE_TRUE, rel=2e-2), got


def test_a_log_written_every_five_steps_gives_back_the_trainer_constants(tmp_path: Path) -> None:
    """Rows at steps 0, 5, ..., 55: before, step 25 was dealt as step 5, 40 as 0, and the fit read
    fwd_bwd_efficiency 0.444 for 0.35 and micro_batch_s 0.468 for 0.3."""
    df = _noiseless(60, 0)
    got = _fit(tmp_path, df[df["step"] % 5 == 0], 0)
    assert got == pytest.approx(PROFILE_TRUE, rel=2e-2), got


# -- 2. a what-if value outside its interval is held, not drawn from the wrong side ---------------


@pytest.mark.parametrize(
    "key, interval",
    [
        ("step_s", (2.944, 3.044)),
        ("fwd_bwd_efficiency", (0.277, 0.727)),
        ("fwd_efficiency", (0.19, 0.40)),
        ("optimizer_step_s", (0.787, 2.418)),
        ("response_sigma", (0.54, 0.66)),
        ("iteration_overhead_s", (0.0054, 0.0065)),
    ],
)
@pytest.mark.parametrize("where", ["inside", "below", "above"])
def test_draws_sit_half_above_the_value_or_hold_it(
    key: str, interval: tuple[float, float], where: str
) -> None:
    """For a value inside its interval the draws' median is the value, half of them above it; a
    value below or above it (a what-if) is held. Every draw lies in the value's range. Before, a
    value above its interval put no draw above it (``step_s`` 30 with [2.944, 3.044])."""
    from pipesim.calibrate.predict import draw_value
    from pipesim.plan.runspec_calibration import value_range

    lo, hi = interval
    lo_k, hi_k, _ = value_range(key)
    value = {"inside": lo + 0.3 * (hi - lo), "below": lo / 2, "above": min(hi * 3, hi_k)}[where]
    assert (lo <= value <= hi) == (where == "inside")
    z = np.random.default_rng(1).standard_normal(4001)
    draws = np.array([draw_value(key, value, list(interval), float(x)) for x in z])
    assert ((draws >= lo_k) & (draws <= hi_k)).all()
    assert float(np.median(draws)) == pytest.approx(value, rel=1e-2)
    if where == "inside":
        assert 0.45 < float((draws > value).mean()) < 0.55
        assert 0.01 < float((draws < lo).mean()) < 0.05 and 0.01 < float((draws > hi).mean()) < 0.05
    else:
        assert (draws == value).all(), (draws.min(), draws.max())


def _calibrated(values: dict[str, float], intervals: dict[str, list[float]] | None = None) -> Any:
    data = _data(3, 0)
    data["calibration"] = {"values": values, **({"intervals": intervals} if intervals else {})}
    return from_dict(data)


def test_the_ranges_say_which_values_were_drawn_and_which_held() -> None:
    """A spec with values and no interval draws nothing: the head says so, and each value is named
    as held (before: 'with the calibrated values drawn from their intervals'); a what-if outside
    its interval is named held; with every value inside its interval, every value is drawn."""
    from pipesim.calibrate.predict import conditional_on, held_values, ranges_head

    bare = _calibrated(dict(TRUE))
    assert set(held_values(bare)) == set(TRUE)
    assert "no calibrated value drawn" in ranges_head(bare, 4)
    assert any(
        "held, not drawn" in line and "step_s = 2 (no interval)" in line for line in conditional_on(bare)
    )
    iv = {k: [v * 0.9, v * 1.1] for k, v in TRUE.items()}
    every = _calibrated(dict(TRUE), iv)
    assert held_values(every) == {}
    assert (
        ranges_head(every, 4) == "95% range over 4 runs with the calibrated values drawn from their intervals"
    )
    whatif = _calibrated({**TRUE, "step_s": 30.0}, iv)
    assert list(held_values(whatif)) == ["step_s"]
    head = ranges_head(whatif, 4)
    assert f"{len(TRUE) - 1} of the {len(TRUE)} calibrated values drawn" in head
    assert "(fwd_bwd_efficiency, fwd_efficiency, micro_batch_s, optimizer_step_s, iteration" in head
    assert any(
        "step_s = 30 (outside its interval [1.8, 2.2]: a what-if)" in line for line in conditional_on(whatif)
    )


def test_run_intervals_on_a_spec_without_intervals_says_nothing_was_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipesim.io.cli import main
    from pipesim.plan.runspec import dumps

    data = _data(3, 0)
    data["calibration"] = {"values": dict(TRUE)}
    path = tmp_path / "truth.toml"
    path.write_text(dumps(data))
    assert main(["run", str(path), "--intervals", "2"]) == 0
    out = capsys.readouterr().out
    assert "drawn from their intervals" not in out
    assert "95% range over 2 runs at other seeds, no calibrated value drawn" in out
    assert "these calibrated values are held, not drawn" in out


# -- 3. the calibrated sync scales the model's sync of each design --------------------------------


def _sync_s(spec: Any, design: Any) -> float:
    from pipesim.plan.build import design_cluster, sync_seconds

    return float(sync_seconds(spec, design, design_cluster(spec, design)[1]))


@pytest.mark.parametrize("factor", [1.0, 2.5])
def test_a_calibrated_sync_scales_the_models_sync_of_another_design(tmp_path: Path, factor: float) -> None:
    """A sync measured on the logged (colocated) design at ``factor`` times the model's: that
    design syncs in the measured seconds, a 4:4 split in its own modelled seconds times the
    factor (at 1, a noiseless log's: the truth's own sync). Before, the split synced in the
    colocated seconds. So do ``pipesim run`` with ``--set design.placement=4`` (the file's design
    is the logged one) and ``pipesim plan``'s designs."""
    from pipesim.plan.runspec import dumps, load, load_plan_spec

    truth = from_dict(_data(3, 0))
    logged = truth.design
    split = from_dict({**_data(3, 0), "design": {**_data(3, 0)["design"], "placement": 4}})
    coloc_s, split_s = _sync_s(truth.plan, logged), _sync_s(split.plan, split.design)
    assert abs(split_s / coloc_s - 1) > 0.05  # the two designs' modelled syncs differ
    data = _data(3, 0)
    data["calibration"] = {"values": {**TRUE, "sync_time_s": factor * coloc_s}}
    cal = from_dict(data)
    assert _sync_s(cal.plan, cal.design) == pytest.approx(factor * coloc_s, rel=1e-9)
    path = tmp_path / "cal.toml"
    path.write_text(dumps(data))
    moved = load(path, ["design.placement=4"])
    assert _sync_s(moved.plan, moved.design) == pytest.approx(factor * split_s, rel=1e-9)
    planned = load_plan_spec(data)
    assert _sync_s(planned, logged) == pytest.approx(factor * coloc_s, rel=1e-9)
    assert _sync_s(planned, split.design) == pytest.approx(factor * split_s, rel=1e-9)


def test_a_calibrated_sync_with_no_model_to_scale_is_every_designs() -> None:
    """``run.sync_time_s = 0`` (the model's sync at the logged design is 0 s): nothing to scale,
    the measured seconds are every design's, as before; a bad ``calibration.design`` is refused
    naming its key."""
    from pipesim.plan.checks import PlanError

    data = _data(3, 0)
    data["run"]["sync_time_s"] = 0.0
    data["calibration"] = {"values": {**TRUE, "sync_time_s": 3.0}}
    rs = from_dict({**data, "design": {**data["design"], "placement": 4}})
    assert _sync_s(rs.plan, rs.design) == pytest.approx(3.0)
    bad = {**data, "calibration": {**data["calibration"], "design": {"placement": "x"}}}
    with pytest.raises(PlanError) as e:
        from_dict(bad)
    assert e.value.field == "calibration.design.placement"


def test_an_exported_design_keeps_the_logged_design_its_sync_was_measured_on() -> None:
    """``pipesim plan --export-best`` of a calibrated run spec: the exported best design is not the
    logged one, so the export names the logged design (``calibration.design``) and its run syncs
    as the plan ran it, the factor times its own modelled sync. Before, the export dropped it and
    the best design ran the logged design's measured seconds."""
    from pipesim.plan.runspec import load_plan_spec
    from pipesim.plan.runspec_export import design_to_runspec

    data = _data(3, 0)
    truth = from_dict(data)
    coloc_s = _sync_s(truth.plan, truth.design)
    data["calibration"] = {"values": {**TRUE, "sync_time_s": 2.5 * coloc_s}}
    split = from_dict({**_data(3, 0), "design": {**_data(3, 0)["design"], "placement": 4}}).design
    planned = load_plan_spec(data)
    out = design_to_runspec(data, split)
    assert out["calibration"]["design"] == data["design"]
    exported = from_dict(out)
    assert exported.design == split
    assert _sync_s(exported.plan, exported.design) == pytest.approx(_sync_s(planned, split), rel=1e-9)


def test_a_plan_of_a_calibrated_spec_with_a_design_set_keeps_the_logged_design(tmp_path: Path) -> None:
    """``pipesim plan cal.toml --set design.placement=4``: the plan's designs sync at the factor
    times their own modelled sync, the factor still taken at the file's (logged) design. Before,
    the pair moved the logged design too, so the measured seconds were read as the 4:4 split's."""
    from pipesim.plan.runspec import dumps, load_plan_spec
    from pipesim.plan.specfile import load as load_spec

    data = _data(3, 0)
    truth = from_dict(data)
    coloc_s = _sync_s(truth.plan, truth.design)
    data["calibration"] = {"values": {**TRUE, "sync_time_s": 2.5 * coloc_s}}
    split = from_dict({**_data(3, 0), "design": {**_data(3, 0)["design"], "placement": 4}}).design
    path = tmp_path / "cal.toml"
    path.write_text(dumps(data))
    planned = load_spec(path, ["design.placement=4"])
    assert _sync_s(planned, split) == pytest.approx(_sync_s(load_plan_spec(data), split), rel=1e-9)
    assert _sync_s(planned, truth.design) == pytest.approx(2.5 * coloc_s, rel=1e-9)
