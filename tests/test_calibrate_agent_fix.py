"""An agent (multi-turn) spec's calibration and the held-out guard (pipesim.calibrate.agent,
pipesim.calibrate.result).

verl logs an agent sample's ``response_length/mean`` as its whole episode (every turn's response
and the observations between them); the spec's response model is one turn's. The walkthrough's
log (tests/data/calibrate_agent/: a 6-turn spec, 600-token observations, a logged mean of about
3,000 tokens) was fitted a per-turn median of 3,068 tokens (twice the per-turn cap) and missed its
held-out steps by 65% (step) and 259% (response length), with ``wrote ...`` and exit status 0.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import HELD_OUT_LIMIT, Calibration, Fitted, LogError, TrainingLog, calibrate, read_log
from pipesim.calibrate.agent import shortest_episode, turn_means
from pipesim.calibrate.result import GUARDED, misses, noise
from pipesim.calibrate.sample import sample_log
from pipesim.io.cli import main
from pipesim.plan.runspec import RunSpec, from_dict, load

DATA = Path(__file__).resolve().parent / "data" / "calibrate_agent"
SPEC, LOG, TURN_LOG = DATA / "cal_spec.toml", DATA / "mylog.csv", DATA / "mylog_turn.csv"


@pytest.mark.parametrize("log", [LOG, TURN_LOG], ids=["turns_without_observations", "one_turn"])
def test_the_walkthrough_log_is_refused_naming_the_agent_keys(log: Path, tmp_path: Path) -> None:
    """The walkthrough's means (~3,000: the six turns' responses without the five 600-token
    observations; and ~560, one turn) are below the spec's shortest episode (3,006 tokens): no run
    of it logs them as verl counts an episode. Refused before any fit, naming the column and the
    agent keys; the command writes nothing (exit 2)."""
    rs = load(SPEC)
    with pytest.raises(LogError) as e:
        calibrate(read_log(log), rs)
    assert e.value.field == "response_length/mean"
    msg = str(e.value)
    assert (
        "agent.turns" in msg
        and "agent.observation_tokens" in msg
        and f"{shortest_episode(rs.plan.workload):,}" in msg
    )
    out = tmp_path / "cal.toml"
    assert main(["calibrate", str(log), "--spec", str(SPEC), "--out", str(out), "--quiet"]) == 2
    assert not out.exists()


def test_the_walkthrough_log_as_episodes_fits_a_turn_below_the_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same log with the observations added (what verl logs of such a run) is fitted per turn:
    the median inside the per-turn cap, the simulated episode within the guard of the logged one,
    and the guard's verdict the same in the result, the printed text, the written spec and the exit
    status. One calibration: the command's own (the Calibration it printed and wrote, caught on
    its way out of ``pipesim.calibrate.calibrate``), where the test once fitted the log a second
    time in process to get one to read (the command calls it as ``calibrate(log, rs, seed=0, ...)``,
    the in-process call's defaults)."""
    frame = pd.read_csv(LOG)
    rs = load(SPEC)
    a = rs.plan.workload.agent
    assert a is not None
    frame["response_length/mean"] += (a.turns - 1) * a.observation_tokens
    path = tmp_path / "episodes.csv"
    frame.to_csv(path, index=False)
    cal, out, err = _calibrated_by_the_command(path, tmp_path, capsys, monkeypatch)
    median = cal.values["response_median_tokens"]
    turn = turn_means(frame["response_length/mean"].to_numpy(), rs.plan.workload).mean()
    assert (
        median.value < turn < rs.plan.workload.max_response_tokens
    )  # a log-normal's mean is above its median
    assert abs(cal.residuals["response_length/mean"]["mean"]) <= HELD_OUT_LIMIT
    _guard_is_consistent(cal, out, err)


def _calibrated_by_the_command(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[Calibration, Path, str]:
    """``pipesim calibrate LOG --spec SPEC --out cal.toml --quiet`` (exit status 0: the spec is
    written): the Calibration it computed, the spec it wrote and its stderr."""
    import pipesim.calibrate

    real = pipesim.calibrate.calibrate
    seen: list[Calibration] = []

    def calibrate_seen(*args: Any, **kwargs: Any) -> Calibration:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(pipesim.calibrate, "calibrate", calibrate_seen)  # the name the command imports
    out = tmp_path / "cal.toml"
    capsys.readouterr()
    assert main(["calibrate", str(log), "--spec", str(SPEC), "--out", str(out), "--quiet"]) == 0
    assert len(seen) == 1, "the command calibrated the log once"
    printed = capsys.readouterr()
    assert seen[0].text() in printed.out  # the Calibration caught is the one the command printed
    return seen[0], out, printed.err


def _guard_is_consistent(cal: Calibration, out: Path, err: str) -> None:
    """The guard's columns are those whose error passes the limit and the noise, and the text, the
    spec written (``out``) and the command's stderr (``err``) say the same."""
    held = len(cal.held_out)
    expected = [
        c
        for c in GUARDED
        if c in cal.residuals and abs(cal.residuals[c]["mean"]) > max(HELD_OUT_LIMIT, noise(cal.log, c, held))
    ]
    assert [c for c, _, _ in misses(cal.residuals, cal.log, held)] == expected
    assert len(cal.misses) == len(expected)
    for c in expected:
        assert f"warning: held-out {c}:" in cal.text()
        assert any(n.startswith(f"warning: held-out {c}:") for n in cal.table()["not_identified"])
    for c in GUARDED:
        assert (f"warning: {out}: held-out {c}:" in err) == (c in expected)
    assert out.exists() and ("warning: held-out" in out.read_text()) == bool(expected)


def _known(rs: RunSpec, steps: int, seed: int) -> RunSpec:
    """``rs`` with known trainer, sync and overhead constants, ``steps`` steps at ``seed``."""
    data = copy.deepcopy(rs.data)
    data["run"] = {"steps": steps, "seed": seed}
    data["calibration"] = {
        "values": {
            "fwd_bwd_efficiency": 0.35,
            "fwd_efficiency": 0.25,
            "step_s": 2.0,
            "iteration_overhead_s": 0.004,
            "sync_time_s": 2.0,
        }
    }
    return from_dict(data, rs.base)


def test_a_log_written_from_the_agent_spec_calibrates_to_its_turn_median() -> None:
    """A 16-step log of the walkthrough's spec (pipesim's sample_log: the episode as verl counts
    it) gives back the spec's per-turn median (350) inside its interval, and its held-out steps
    pass the guard. Before: a median of about 6,000 tokens a turn (the episode), four times the
    per-turn cap."""
    rs = load(SPEC)
    df = sample_log(_known(rs, 16, 3), np.random.default_rng(11))
    assert "response_length/clip_ratio" not in df.columns  # verl's is the episode's: not written
    assert (df["response_length/mean"] > shortest_episode(rs.plan.workload)).all()
    cal = calibrate(TrainingLog("agent_sample.csv", "0" * 64, df), rs)
    m = cal.values["response_median_tokens"]
    true = float(rs.data["workload"]["response"]["median_tokens"])
    assert m.lo <= true <= m.hi
    assert abs(cal.residuals["response_length/mean"]["mean"]) < 0.1
    assert cal.misses == []


def _calibration(step_values: list[float], residual: float) -> Calibration:
    frame = pd.DataFrame(
        {
            "step": np.arange(len(step_values), dtype=float),
            "timing_s/step": step_values,
            "response_length/mean": [500.0] * len(step_values),
        }
    )
    log = TrainingLog("guard.csv", "0" * 64, frame)
    residuals = {"timing_s/step": {"mean": residual}, "response_length/mean": {"mean": 0.01}}
    held = [int(s) for s in frame["step"].iloc[-3:]]
    return Calibration({"step_s": Fitted(1.0, 0.5, 1.5)}, [], residuals, log, held)


@pytest.mark.parametrize("residual", [-0.655, 0.3, -2.589])
def test_a_miss_past_the_limit_on_steady_steps_is_a_warning(residual: float) -> None:
    """Steady steps (1% spread): a held-out error past 25% is a warning in the text and the table."""
    cal = _calibration([100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 101.0, 99.0], residual)
    [w] = cal.misses
    assert w.startswith("held-out timing_s/step:") and f"{residual:+.3f}" in w
    assert cal.table()["not_identified"][0] == f"warning: {w}"
    assert cal.text().splitlines()[-1] == f"warning: {w}"


@pytest.mark.parametrize("residual", [0.1, -0.25])
def test_a_miss_within_the_limit_is_no_warning(residual: float) -> None:
    cal = _calibration([100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 101.0, 99.0], residual)
    assert cal.misses == [] and "warning" not in cal.text()


def test_a_miss_the_steps_spread_explains_is_no_warning() -> None:
    """Steps that vary by half their mean (an agent's tool tails): a 30% miss on three held-out
    steps is inside the band the spread gives, so it is no warning; the same miss on steady steps
    is one."""
    noisy = [100.0, 180.0, 60.0, 150.0, 70.0, 120.0, 200.0, 50.0]
    assert noise(_calibration(noisy, 0.3).log, "timing_s/step", 3) > 0.3
    assert _calibration(noisy, 0.3).misses == []
    assert _calibration([100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 101.0, 99.0], 0.3).misses != []


@pytest.mark.parametrize("mean_tokens", [1.0, 1.2])
def test_a_median_under_one_token_is_refused_naming_the_column(mean_tokens: float) -> None:
    """An agent log at the shortest episode left a turn's mean at 1 token, and the fit wrote a
    median of 0.62 tokens [0.62, 0.62] that pipesim run accepted; a response holds >= 1 token."""
    import numpy as np

    from pipesim.calibrate.fit import fit_lengths
    from pipesim.core.validate import FieldError

    with pytest.raises(FieldError) as err:
        fit_lengths(np.full(10, mean_tokens), None, None, 1536.0, 32, 0.5, 0.8, np.random.default_rng(0))
    assert err.value.field == "response_length/mean"
    fitted, _ = fit_lengths(np.full(10, 300.0), None, None, 1536.0, 32, 0.5, 0.8, np.random.default_rng(0))
    assert fitted["response_median_tokens"].value >= 1
