"""Behaviour a mutation audit of the calibration code found untested (each test names the change it
catches): the calibrated sync's logged design kept through exports and ``--set``, its fallbacks,
the last step of a log dealt and counted, a draw at its interval's end, the log suffixes, and the
numbers and keys the refusals tell a user."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import LogError, read_log
from pipesim.calibrate.frame import check_calibrate_args, reach_error
from pipesim.calibrate.log import TrainingLog
from pipesim.plan.build import design_cluster, sync_seconds
from pipesim.plan.checks import PlanError
from pipesim.plan.runspec import dumps, from_dict, load, read
from pipesim.plan.runspec_export import design_to_runspec

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "run_verl_8gpu.toml"
SHA = "0" * 64
FACTOR = 2.5


def _sync_s(spec: Any, design: Any) -> float:
    return float(sync_seconds(spec, design, design_cluster(spec, design)[1]))


def _refused(call: Callable[[], Any], error: type[Exception], field: str) -> str:
    with pytest.raises(error) as e:
        call()
    assert getattr(e.value, "field", None) == field, (getattr(e.value, "field", None), str(e.value))
    return str(e.value)


def _frame(steps: range | list[int]) -> pd.DataFrame:
    s = np.asarray(list(steps), float)
    return pd.DataFrame({"step": s, "timing_s/gen": 4.0 + 0 * s, "timing_s/step": 20.0 + 0 * s})


# -- the calibrated sync's logged design ---------------------------------------------------------


@pytest.fixture(scope="module")
def cal() -> dict[str, Any]:
    """The 8-GPU spec calibrated with a sync FACTOR times the model's colocated one, and the
    model's own syncs of the designs the tests move to."""
    data = read(SPEC)
    data["run"] = {"steps": 3, "seed": 0}
    truth = from_dict(data)
    designs = {p: from_dict({**data, "design": {**data["design"], "placement": p}}).design for p in (2, 4)}
    model_s = {"coloc": _sync_s(truth.plan, truth.design)}
    model_s.update({p: _sync_s(truth.plan, d) for p, d in designs.items()})
    data["calibration"] = {"values": {"sync_time_s": FACTOR * model_s["coloc"]}}
    return {"data": data, "logged": truth.design, "designs": designs, "model_s": model_s}


def test_an_exported_specs_logged_design_is_kept_by_a_set_design(cal: dict[str, Any], tmp_path: Path) -> None:
    """``pipesim run exported.toml --set design.placement=2`` of a plan's 4:4 export: the factor is
    still taken at ``calibration.design`` (colocated), so 2:6 syncs in FACTOR x its model, 0.472 s.
    Catches ``with_logged_design`` overwriting a named ``calibration.design`` with the file's
    [design] (the 4:4 split): 0.246 s."""
    exported = design_to_runspec(cal["data"], cal["designs"][4])
    path = tmp_path / "exported.toml"
    path.write_text(dumps(exported))
    moved = load(path, ["design.placement=2"])
    got = _sync_s(moved.plan, moved.design)
    assert got == pytest.approx(FACTOR * cal["model_s"][2], rel=1e-9)
    assert round(got, 3) == 0.472
    assert moved.data["calibration"]["design"] == cal["data"]["design"]


def test_an_export_of_an_export_keeps_the_logged_design(cal: dict[str, Any]) -> None:
    """Exporting an exported spec (its [design] the 4:4 split) to another design keeps
    ``calibration.design`` the logged one, which syncs in the measured seconds. Catches the
    export writing its source's [design] over it."""
    measured = cal["data"]["calibration"]["values"]["sync_time_s"]
    once = design_to_runspec(cal["data"], cal["designs"][4])
    twice = design_to_runspec(once, cal["designs"][2])
    rs = from_dict(twice)
    assert _sync_s(rs.plan, cal["logged"]) == pytest.approx(measured, rel=1e-9)
    assert _sync_s(rs.plan, rs.design) == pytest.approx(FACTOR * cal["model_s"][2], rel=1e-9)
    assert twice["calibration"]["design"] == cal["data"]["design"]


@pytest.mark.parametrize("placement", ["colocated", 4])
def test_a_calibrated_sync_of_0_s_syncs_in_0_s(cal: dict[str, Any], placement: Any) -> None:
    """A measured 0 s is no factor (the model times 0 would be a sync_scale of 0): every design
    syncs in 0 s. Catches ``measured >= 0``, which refuses the spec."""
    data = {**cal["data"], "calibration": {"values": {"sync_time_s": 0.0}}}
    rs = from_dict({**data, "design": {**data["design"], "placement": placement}})
    assert _sync_s(rs.plan, rs.design) == 0.0


@pytest.mark.parametrize("bad", [{"placement": 16}, {"tp": 16}])
def test_a_logged_design_that_does_not_fit_the_cluster_syncs_in_the_measured_seconds(
    cal: dict[str, Any], bad: dict[str, int]
) -> None:
    """A ``calibration.design`` the 8-GPU cluster cannot hold (16 trainer GPUs, tp 16): no model
    to scale, so the spec loads and syncs in the measured seconds. Catches the fallback catching
    PlanError alone (the cluster refuses these with ValueError)."""
    c = cal["data"]["calibration"]
    data = {**cal["data"], "calibration": {**c, "design": {**cal["data"]["design"], **bad}}}
    rs = from_dict(data)
    assert _sync_s(rs.plan, rs.design) == pytest.approx(c["values"]["sync_time_s"], rel=1e-12)


def test_a_bad_logged_design_is_said_as_the_calibration_key(cal: dict[str, Any]) -> None:
    data = {**cal["data"], "calibration": {**cal["data"]["calibration"], "design": {"placement": "x"}}}
    msg = _refused(lambda: from_dict(data), PlanError, "calibration.design.placement")
    assert msg.startswith("calibration.design.placement"), msg


# -- the log's last step -------------------------------------------------------------------------


def test_the_logs_last_step_is_dealt_as_its_own() -> None:
    """``spread`` deals the log's step 29 the run's step 29 (dealt through the last step), not
    step 0's. Catches ``dealt`` asked for one step too few (29 steps: step 29 taken as 29 % 29)."""
    from pipesim.calibrate.trainer_inputs import dealt, spread

    rs = load(SPEC)
    n = 30
    got = spread(rs, np.full(n, 1000.0))
    batches = dealt(rs, n)
    assert batches is not None and len(batches) >= n

    def scaled(step: int) -> np.ndarray:
        per = np.asarray(batches[step], float)
        return per * (1000.0 / per.sum())

    last = got[-1]
    assert last is not None
    assert not np.allclose(scaled(n - 1), scaled(0))  # the two steps are dealt apart
    np.testing.assert_allclose(last, scaled(n - 1), rtol=1e-12)


def test_rows_of_several_steps_count_the_last_one() -> None:
    """Rows of 5 trainer steps to step 1,000 run 5,005 trainer steps, past 5,000: refused naming
    trainer_steps_per_row; to step 999 they run 5,000: accepted. Catches ``max * k``."""
    msg = _refused(
        lambda: TrainingLog("mem", SHA, _frame([998, 999, 1000]), trainer_steps_per_row=5),
        LogError,
        "trainer_steps_per_row",
    )
    assert "5,005 steps" in msg and "trainer steps 0 to 5,004" in msg, msg
    assert TrainingLog("mem", SHA, _frame([997, 998, 999]), trainer_steps_per_row=5).per_row == 5


def test_a_log_to_the_last_step_a_calibration_runs_is_refused_with_the_logs_numbers(tmp_path: Path) -> None:
    """Steps 5,090-5,100 read with --first-step 100 are the run's 4,990-5,000: 5,001 steps,
    refused naming steps, in the log's numbers (to 5,100, fit below 5,100) and the run's."""
    path = tmp_path / "late.csv"
    path.write_text("step,timing_s/step\n" + "".join(f"{s},3.0\n" for s in range(5090, 5101)))
    msg = _refused(lambda: read_log(path, first_step=100), LogError, "steps")
    assert "the log's steps run to 5,100, the run's step 5,000 (--first-step 100)" in msg, msg
    assert "steps 0 to 5,000, 5,001 steps" in msg, msg
    assert "Fit steps below 5,100 (--steps A:B)" in msg, msg
    assert len(read_log(path, first_step=101)) == 11  # the run's 4,989-4,999: accepted


def test_the_reach_messages_say_the_run_in_its_steps() -> None:
    """Rows of 5 to step 1,000: fit below 1,000 (rows, not trainer steps); rows of one step say
    no trainer_steps_per_row."""
    msg = str(reach_error("log.csv", 1000, 5))
    assert "Fit steps below 1,000 (--steps A:B)" in msg, msg
    assert "trainer steps 0 to 5,004 (trainer_steps_per_row 5: rows of 5), 5,005 steps" in msg, msg
    one = str(reach_error("log.csv", 5000))
    assert "the run's steps 0 to 5,000, 5,001 steps" in one, one
    assert "trainer_steps_per_row" not in one, one


def test_a_pool_refusal_counts_the_rows_trainer_steps() -> None:
    """Rows of 5 at steps 500-509 on the published 128-GPU spec (a task pool of 2,038 steps):
    refused naming steps, as trainer steps 0 to 2,549, 2,550 steps."""
    rs = load(ROOT / "examples" / "published" / "verl_async_128.toml")
    log = TrainingLog("mem", SHA, _frame(range(500, 510)), trainer_steps_per_row=5)
    msg = _refused(lambda: check_calibrate_args(log, rs), LogError, "steps")
    assert "trainer steps 0 to 2,549 (trainer_steps_per_row 5: rows of 5), 2,550 steps" in msg, msg
    assert "at most 2,038 (its task pool)" in msg, msg


# -- a draw at its interval's end ------------------------------------------------------------------


def test_a_value_at_its_intervals_end_is_drawn_not_held() -> None:
    """0.1 with [0.1, 0.3] is inside its interval: drawn upward (to 0.3 at z = 1.96), while a
    what-if outside it is held. Catches ``lo < v < hi``."""
    from pipesim.calibrate.predict import draw_value

    up = [draw_value("micro_batch_s", 0.1, [0.1, 0.3], z) for z in (0.5, 1.0, 1.959963984540054)]
    assert all(x > 0.1 for x in up), up
    assert up[-1] == pytest.approx(0.3, rel=1e-12)
    assert draw_value("micro_batch_s", 0.3, [0.1, 0.3], -1.959963984540054) == pytest.approx(0.1, rel=1e-12)
    assert draw_value("micro_batch_s", 0.31, [0.1, 0.3], 1.0) == 0.31


# -- the log's suffixes and the reader's notes ---------------------------------------------------


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".ndjson"])
def test_each_log_suffix_reads(tmp_path: Path, suffix: str) -> None:
    """The list written out (not read from LOG_SUFFIXES, which a dropped suffix would shorten)."""
    frame = _frame(range(6))
    path = tmp_path / f"log{suffix}"
    if suffix in (".jsonl", ".ndjson"):
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_csv(path, sep="\t" if suffix == ".tsv" else ",", index=False)
    assert list(read_log(path).steps) == list(range(6))


def test_another_suffix_is_refused_with_the_list(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_text("step,timing_s/step\n0,3.0\n1,3.0\n2,3.0\n")
    msg = _refused(lambda: read_log(path), LogError, "log")
    assert "a log is .csv, .tsv, .jsonl or .ndjson, got '.txt'" in msg, msg


@pytest.mark.parametrize("suffix", [".jsonl", ".ndjson"])
def test_a_json_array_is_said_so(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"log{suffix}"
    path.write_text(_frame(range(6)).to_json(orient="records"))
    msg = _refused(lambda: read_log(path), LogError, "log")
    assert "holds a JSON array, not JSON lines" in msg, msg


def test_a_step_written_twice_with_an_empty_cell_is_noted(tmp_path: Path) -> None:
    """Step 2 written twice, its param_sync cell empty both times: read once, with the note
    (the empty column is no difference). Catches the note asking every column to repeat."""
    path = tmp_path / "again.csv"
    path.write_text(
        "step,timing_s/step,timing_s/param_sync\n0,3.0,0.5\n1,3.0,0.5\n2,3.0,\n2,3.0,\n3,3.0,0.5\n4,3.0,0.5\n"
    )
    log = read_log(path)
    assert any(
        n.startswith("step: step 2 given again with the same values") and n.endswith("read once")
        for n in log.notes
    ), log.notes
