"""A log whose rows cover several trainer steps, as verl's fully-async trainer writes it
(pipesim.calibrate.rows).

verl's fully-async trainer logs one row per parameter version: ``MetricsAggregator``
(``verl/experimental/fully_async_policy/detach_utils.py`` at volcengine/verl ``b178a3c``, lines
197-347) sums every ``timing_s/*`` metric over the ``trigger_parameter_sync_step`` trainer steps of
the version (lines 256-257, 294-295), averages ``*mean*`` metrics and those no keyword names,
takes the maximum of ``*max*`` ones; ``timing_s/param_sync`` is timed once after the row's steps
and logged at the row's step (``fully_async_trainer.py`` lines 525-567). Before
``trainer_steps_per_row``, a calibration read each row as one step: its trainer and its decode
overhead came out ``K`` times too slow. Each test below that calibrates with it failed so (a
TypeError: no such argument; read as one step a row, the constants miss the truth).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import Calibration, LogError, TrainingLog, calibrate, read_log
from pipesim.calibrate.residuals import trainer_residuals
from pipesim.calibrate.rows import centres, sync_per_step, trainer_steps
from pipesim.calibrate.sample import sample_log
from pipesim.calibrate.steptime import trainer_span_s
from pipesim.calibrate.trainer import dealt, row_members, tokens
from pipesim.io.cli import main
from pipesim.plan.runspec import RunSpec, from_dict, read

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_verl_8gpu.toml"
LENGTHS = {"response_median_tokens": 700.0, "response_sigma": 0.7}
TRAINER = {"fwd_bwd_efficiency": 0.35, "fwd_efficiency": 0.25, "micro_batch_s": 0.3, "optimizer_step_s": 1.0}
TRUE = {**TRAINER, "step_s": 2.0, "iteration_overhead_s": 0.004, **LENGTHS, "sync_time_s": 3.0}
ADDITIVE = ("step_s", "sync_time_s", "iteration_overhead_s", "response_median_tokens", "response_sigma")
"""What a row of several steps identifies as a row per step does (sums and means of its steps)."""


def _spec(k: int, steps: int, values: dict[str, float] | None = None) -> RunSpec:
    """The sample spec split 4:4, eta 1, partial rollout, syncing every ``k`` trainer steps (verl's
    ``trigger_parameter_sync_step``), at seed 3 (the log's)."""
    data = read(SPEC)
    if values is not None:
        data["calibration"] = {"values": dict(values)}
    data["run"] = {"steps": steps, "seed": 3}
    data["design"].update(placement=4, eta=1, update="partial", sync_every=k)
    return from_dict(data)


def _aggregation_type(name: str) -> str:
    """``MetricsAggregator._get_aggregation_type`` (detach_utils.py lines 249-269) for the metrics a
    step logs here (none of the explicit rules' names): the first keyword of the lower-cased name."""
    low = name.lower()
    if "timing_s/" in low:
        return "time_sum"
    for kind, words in (
        ("avg", ("mean", "avg", "average")),
        ("max", ("max", "maximum")),
        ("min", ("min", "minimum")),
        ("sum", ("sum", "total")),
    ):
        if any(w in low for w in words):
            return kind
    return "avg"


def verl_rows(steps: pd.DataFrame, k: int) -> pd.DataFrame:
    """The rows verl's fully-async trainer logs of the per-step log ``steps``: each ``k`` steps'
    metrics aggregated as ``_aggregate_single_metric`` does (lines 271-308: ``time_sum`` and
    ``sum`` added, ``avg`` a plain mean, ``max``, ``min``), and the one ``param_sync`` timed after
    them (pipesim books a sync to the step after it, whose training it precedes: the sync that
    follows row ``r`` is the per-step log's at step ``(r + 1) k``). Rows are numbered from the
    per-step log's origin (0; verl counts versions from 1), and only whole rows are kept (verl logs
    a last row of fewer steps when the run ends mid-version: cut it with ``--steps``)."""
    per_step = steps.set_index("step")
    rows = []
    for r in range(len(steps) // k):
        group = per_step.loc[r * k : r * k + k - 1]
        if (r + 1) * k not in per_step.index:
            break
        row: dict[str, float] = {"step": r}
        for name in group.columns:
            if name == "timing_s/param_sync":  # not a step's metric in verl: logged after the row
                continue
            values = group[name].to_numpy(float)
            how = _aggregation_type(name)
            aggregate = {"time_sum": np.sum, "sum": np.sum, "avg": np.mean, "max": np.max, "min": np.min}[how]
            row[name] = float(aggregate(values))
        row["timing_s/param_sync"] = float(per_step.loc[(r + 1) * k, "timing_s/param_sync"])
        rows.append(row)
    return pd.DataFrame(rows)


@functools.lru_cache(maxsize=4)
def _logs(k: int, rows: int, noise: float = 0.03) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-step sample log of the true run (``rows x k`` steps) and verl's rows of it."""
    df = sample_log(_spec(k, rows * k + 1, TRUE), np.random.default_rng(103), noise=noise)
    return df.iloc[: rows * k].reset_index(drop=True), verl_rows(df, k)


def _log(frame: pd.DataFrame) -> TrainingLog:
    return TrainingLog("mem", "0" * 64, frame)


def _calibrate(frame: pd.DataFrame, k: int, **kw: Any) -> Calibration:
    return calibrate(_log(frame), _spec(k, 20), **kw)


def test_the_helper_aggregates_as_verls_metrics_aggregator() -> None:
    """Timings summed, means averaged, the max the max, the clip ratio (no keyword) averaged."""
    steps, rows = _logs(2, 12)
    assert _aggregation_type("response_length/clip_ratio") == "avg"
    assert _aggregation_type("response_length/max") == "max"
    assert _aggregation_type("timing_s/agent_loop/generate_sequences/mean") == "time_sum"  # timing_s/ first
    first = steps.iloc[:2]
    assert rows["timing_s/update_actor"].iloc[0] == pytest.approx(first["timing_s/update_actor"].sum())
    assert rows["timing_s/step"].iloc[0] == pytest.approx(first["timing_s/step"].sum())
    assert rows["response_length/mean"].iloc[0] == pytest.approx(first["response_length/mean"].mean())
    clip = "response_length/clip_ratio"
    assert rows[clip].iloc[0] == pytest.approx(first[clip].mean())
    assert (rows["timing_s/param_sync"] > 2.5).all()  # one sync a row, every row
    assert len(rows) == 12


@pytest.mark.parametrize(
    ("k", "rows"),
    [
        # k = 2 is the same reading at another size (k = 4 tells k from k - 1 and k / 2): make test-full
        pytest.param(2, 12, id="2 steps a row", marks=pytest.mark.full),
        pytest.param(4, 6, id="4 steps a row"),
    ],
)
def test_verl_rows_calibrate_to_the_truth_and_to_the_per_step_logs_calibration(k: int, rows: int) -> None:
    """The step's remainder, the sync, the decode overhead and the lengths come back within their
    intervals, each inside the per-step log's interval; the trainer predicts the per-step log's
    phases as the per-step calibration does. Read as one step a row (the old reading), the
    remainder, the overhead and the efficiencies miss by about ``k`` times."""
    steps, agg = _logs(k, rows)
    per = _calibrate(steps, k)
    got = _calibrate(agg, k, trainer_steps_per_row=k)
    for name in ADDITIVE:
        v, p = got.values[name], per.values[name]
        assert v.lo <= TRUE[name] <= v.hi, (name, v)
        assert p.lo <= v.value <= p.hi, (name, v, p)
    assert got.values["step_s"].value == pytest.approx(TRUE["step_s"], rel=0.02)
    for name in ("timing_s/gen", "timing_s/step", "timing_s/param_sync", "remainder"):
        assert abs(got.residuals[name]["mean"]) < 0.1, (name, got.residuals)
    # the fitted trainer predicts each step of the per-step log as that log's own fit does
    held = TrainingLog("mem", "0" * 64, steps)
    mine = trainer_residuals(held, _spec(k, 20), got.values)
    theirs = trainer_residuals(held, _spec(k, 20), per.values)
    total = next(n for n in mine if n.startswith("trainer ("))
    assert abs(mine[total]["mean"]) < 0.02 and abs(theirs[total]["mean"]) < 0.02, (mine, theirs)
    for phase in ("timing_s/update_actor", "timing_s/old_log_prob"):
        assert abs(mine[phase]["mean"] - theirs[phase]["mean"]) < 0.03, (phase, mine, theirs)
    assert any(n.startswith(f"rows: each read as {k} trainer steps") for n in got.not_identified)
    assert any("mean of its" in n and "trainer steps" in n for n in got.not_identified)
    old = _calibrate(agg, k)  # each row read as one step: the sums as a step's seconds
    assert not old.values["step_s"].lo <= TRUE["step_s"] <= old.values["step_s"].hi
    assert old.values["step_s"].value > 0.8 * k * TRUE["step_s"]
    v = old.values["iteration_overhead_s"]
    assert not v.lo <= TRUE["iteration_overhead_s"] <= v.hi
    assert old.values["fwd_bwd_efficiency"].value < 0.6 * TRUE["fwd_bwd_efficiency"]
    assert any(f"--trainer-steps-per-row {k}" in n for n in old.not_identified)  # it says so


def test_a_row_per_step_is_read_as_before() -> None:
    """K = 1 given is the default: the same calibration, one note more."""
    steps, _ = _logs(2, 12)
    plain = _calibrate(steps.iloc[:8], 2)  # 8 steps: held out and fitted as any log's
    one = _calibrate(steps.iloc[:8], 2, trainer_steps_per_row=1)
    assert {k: v.value for k, v in plain.values.items()} == {k: v.value for k, v in one.values.items()}
    assert plain.residuals == one.residuals
    assert [n for n in one.not_identified if not n.startswith("rows:")] == plain.not_identified
    assert not any(n.startswith("rows:") for n in plain.not_identified)  # a sync every other row


def test_a_row_covers_its_trainer_steps() -> None:
    """Row s of K covers the run's steps sK .. sK+K-1: its sums are read per step, its sync once, its
    samples dealt as those steps were, sharing the row's tokens as they did."""
    _, agg = _logs(4, 6)  # the verl test's log (cached)
    log = TrainingLog("mem", "0" * 64, agg.iloc[2:6].reset_index(drop=True), trainer_steps_per_row=4)
    assert trainer_steps(log).tolist() == [list(range(s * 4, s * 4 + 4)) for s in (2, 3, 4, 5)]
    assert centres(log).tolist() == [9.5, 13.5, 17.5, 21.5]
    assert np.allclose(log.col("timing_s/update_actor"), agg["timing_s/update_actor"].iloc[2:6] / 4)
    assert np.allclose(log.col("timing_s/param_sync"), agg["timing_s/param_sync"].iloc[2:6])
    assert np.allclose(log.col("response_length/mean"), agg["response_length/mean"].iloc[2:6])
    assert np.allclose(sync_per_step(log), agg["timing_s/param_sync"].iloc[2:6] / 4)
    held = trainer_span_s(log, True, 0.0)
    left = trainer_span_s(log, False, 0.0)
    assert held is not None and left is not None and np.allclose(left - held, sync_per_step(log))
    rs = _spec(4, 24)
    t = tokens(log, rs)
    assert t is not None
    batches = dealt(rs, 24, 4)
    assert batches is not None and len(batches) == 24
    members = row_members(rs, t, batches, log.steps, 4)
    for row, total, s in zip(members, t, log.steps, strict=True):
        assert len(row) == 4
        assert np.mean([x for x, _ in row]) == pytest.approx(total)
        for j, (x, per) in enumerate(row):
            assert per is not None and sum(per) == pytest.approx(x)
            ratio = np.asarray(per) / np.asarray(batches[int(s) * 4 + j], float)
            assert np.allclose(ratio, ratio[0])  # the step's own samples, scaled


def test_the_command_reads_rows_of_several_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, agg = _logs(2, 12)
    log = tmp_path / "log.csv"
    agg.head(8).to_csv(log, index=False)  # the flag's reading is the point, not the fit: 8 rows
    spec = tmp_path / "spec.toml"
    text = SPEC.read_text().replace('placement = "colocated"', "placement = 4")
    text = text.replace("eta = 0 ", "eta = 1 ")
    text = text.replace('update = "drain"', 'update = "partial"')
    assert "sync_every = 1\n" in text
    spec.write_text(text.replace("sync_every = 1\n", "sync_every = 2\n", 1))
    out = tmp_path / "c.toml"
    args = ["calibrate", str(log), "--spec", str(spec), "--out", str(out), "--quiet"]
    assert main([*args, "--trainer-steps-per-row", "2"]) == 0
    printed = capsys.readouterr().out
    assert "rows: each read as 2 trainer steps" in printed
    assert "(8 rows of 2 trainer steps," in printed and "held-out rows [" in printed  # not 'steps'
    assert main([*args, "--trainer-steps-per-row", "0"]) == 2
    assert "trainer_steps_per_row" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*args, "--trainer-steps-per-row", "two"])


def test_rows_that_disagree_with_the_specs_sync_period_are_noted() -> None:
    _, agg = _logs(2, 12)
    cal = calibrate(_log(agg.head(8)), _spec(1, 20), trainer_steps_per_row=2)  # a note: 8 rows say it
    assert any("the spec syncs every 1 step (design.sync_every)" in n for n in cal.not_identified)


@pytest.mark.parametrize(
    "bad",
    [0, -2, 1.5, True, "2", 10**6],
    ids=["0", "negative", "a float", "True", "a string", "past the steps"],
)
def test_a_bad_count_of_steps_a_row_is_a_log_error_naming_it(bad: Any) -> None:
    _, agg = _logs(2, 12)
    with pytest.raises(LogError, match="trainer_steps_per_row") as e:
        calibrate(_log(agg), _spec(2, 20), trainer_steps_per_row=bad)
    assert e.value.field == "trainer_steps_per_row"


def test_read_log_keeps_the_rows_as_written(tmp_path: Path) -> None:
    """The file's cells are checked as written (a row's sums of seconds); the count is the
    calibration's."""
    _, agg = _logs(2, 12)
    path = tmp_path / "rows.csv"
    agg.to_csv(path, index=False)
    log = read_log(path)
    assert log.trainer_steps_per_row is None and log.per_row == 1
    assert np.allclose(log.col("timing_s/step"), agg["timing_s/step"])


def test_a_floored_fixed_cost_leaves_the_other_intervals_as_wide_as_the_data() -> None:
    """On the 2-steps-a-row log micro_batch_s is fitted below 0 and floored; the refit's intervals
    held given the floor only (fwd_bwd_efficiency 0.2641-0.2709, 2.5% wide, for a true 0.35).
    They now cover the fit without the floor: the floored cost runs from 0 to that fit's upper end,
    and the efficiencies' intervals are as wide as the unfloored fit says."""
    _, agg = _logs(2, 12)
    got = _calibrate(agg, 2, trainer_steps_per_row=2)
    floored = [k for k in ("micro_batch_s", "optimizer_step_s") if got.values[k].value == 0.0]
    assert floored and any("fitted below 0 and set to 0" in n for n in got.not_identified)
    assert all(got.values[k].lo == 0.0 < got.values[k].hi for k in floored)
    for k in ("fwd_bwd_efficiency", "fwd_efficiency"):
        v = got.values[k]
        assert v.lo < v.value < v.hi <= 1.0 and (v.hi - v.lo) / v.value > 0.15, (k, v)


def test_verls_two_records_of_a_version_read_as_one_row(tmp_path: Path) -> None:
    """verl logs a version's aggregated metrics, then its wait_last_valid and param_sync, in two
    calls at the same step: a JSON-lines log of them was refused ('step 1 is given twice'). Records
    of one step that add columns are one row, read as the merged frame reads; a column given two
    values at one step is still refused, naming the column."""
    _, agg = _logs(2, 12)
    agg = agg.assign(step=np.arange(1, len(agg) + 1))
    sync = ["timing_s/param_sync"]
    first = agg.drop(columns=sync).to_dict("records")
    second = agg[["step", *sync]].to_dict("records")
    lines = [pd.Series(r).to_json() for pair in zip(first, second, strict=True) for r in pair]
    path = tmp_path / "verl.jsonl"
    path.write_text("\n".join(lines) + "\n")
    merged = read_log(path)
    whole = tmp_path / "whole.jsonl"
    whole.write_text("\n".join(pd.Series(r).to_json() for r in agg.to_dict("records")) + "\n")
    expect = read_log(whole)
    assert len(merged) == len(agg) and list(merged.steps) == list(expect.steps)
    for c in ("timing_s/step", "timing_s/param_sync", "response_length/mean"):
        assert np.allclose(merged.col(c), expect.col(c)), c
    lines[1] = pd.Series({"step": 1, "timing_s/param_sync": 99.0, "timing_s/step": 1.0}).to_json()
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LogError, match="timing_s/step") as e:
        read_log(path)
    assert e.value.field == "step"


@pytest.mark.parametrize(
    ("why", "named"),
    [
        (
            "the least-squares fit leaves a constant out of range: fwd_bwd_efficiency must be a finite "
            "number > 0.0, got -0.2444180132494786",
            ("fwd_bwd_efficiency", "-0.2444"),
        ),
        (
            "the least-squares fit leaves a constant out of range: micro_batch_s must be >= 0, got 'x'",
            ("micro_batch_s", "'x'"),
        ),
        ("12 row(s) cannot separate micro_batch_s, optimizer_step_s", ("cannot separate",)),
    ],
)
def test_a_failed_fit_is_told_by_the_constant_it_put_out_of_range(why: str, named: tuple[str, ...]) -> None:
    """A user read 'a fit with it fails: the least-squares fit leaves a constant out of range:
    fwd_bwd_efficiency must be a finite number > 0.0, got -0.244...' in a note: the note now names
    the constant and its value; a message of another shape is kept whole."""
    from pipesim.calibrate.trainer import _fails

    told = _fails(why)
    assert all(n in told for n in named) and "must be" not in told
