"""Three things a new user's review found in the output, each wrong on its own terms:

* a compute run printed ``trainer/idle_ratio 0.2387`` beside ``fully_async/trainer/idle_ratio
  0.2328``, verl's old and new names for one metric (``gen / step``, ``detach_utils.py``): the
  first was the kernel's ``1 - train / T``, which also counts the weight sync as idle;
* a run without group batching printed ``groups_trained nan`` (and ``_filtered``, ``_expired``);
* a sweep of one seed printed ``_lo`` and ``_hi`` equal to the mean, which reads as an interval,
  and ``pipesim report`` showed three progress bars all headed ``sweep``.
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.series import step_breakdown
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.io import sweeps
from pipesim.io.cli import main
from pipesim.io.registry import get_scenario
from pipesim.io.sweep_grid import aggregate
from pipesim.policies.groups import WholeGroups

ROOT = Path(__file__).resolve().parents[1]
GROUP_METRICS = ("groups_trained", "groups_filtered", "groups_expired")
ENGINE = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=2048, max_num_seqs=24)
WORK = TokenWorkload(
    response=LogNormalLengths(200.0, 0.7), prompt=128, samples_per_prompt=4, max_response_tokens=1024
)


def _compute_run(groups: bool = False, sync_time_s: float | None = 2.0) -> Any:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=16, steps=4, max_staleness=1),
        weight_update=pipesim.PartialRollout(),
    )
    return run_compute(
        sc,
        Cluster(engine=ENGINE, n_gpus=4, trainer_gpus=2),
        WORK,
        seed=0,
        sync_time_s=sync_time_s,
        groups=groups,
    )


# -- 1. one trainer idle ratio --------------------------------------------------------------------


def test_a_compute_runs_trainer_idle_ratio_is_verls_gen_over_step() -> None:
    """verl logs one trainer idle ratio, ``timing_s/gen / timing_s/step`` summed over the steps
    (``trainer/idle_ratio``, since renamed ``fully_async/trainer/idle_ratio``): both rows are it.
    The weight sync (2 s a step here) is not idle time; the old row counted it, and read higher
    by the sync's share of the run."""
    crun = _compute_run()
    s = crun.summary()
    steps = step_breakdown(crun.result, crun.phase_log, crun.cluster.n_gpus)
    want = steps["timing_s/gen"].sum() / steps["timing_s/step"].sum()
    assert s["fully_async/trainer/idle_ratio"] == pytest.approx(want, rel=1e-12)
    assert s["trainer/idle_ratio"] == s["fully_async/trainer/idle_ratio"]
    assert s["trainer_idle_ratio"] == s["trainer/idle_ratio"]  # the old name reads the same value
    # the syncs really are in the run, so the kernel's figure (what the row used to hold: every
    # sync counted idle, the one after the last step too, which ends the run) differs
    assert steps["timing_s/param_sync"].sum() > 0
    kernel = crun.result.summary()["trainer/idle_ratio"]
    train_s = sum(b - a for _, a, b, _ in crun.result.train_log)
    assert kernel == pytest.approx(1 - train_s / crun.result.sim_time_s, rel=1e-12)
    assert kernel == pytest.approx(1 - s["train_time_s_mean"] / s["step_time_s_mean"], rel=1e-12)
    assert kernel > s["trainer/idle_ratio"] + 0.01


def test_the_calibrated_samples_two_trainer_idle_rows_agree(tmp_path: Path, capsys: Any) -> None:
    """The review's own commands: 0.2387 against 0.2328 before."""
    cal = tmp_path / "cal.toml"
    spec = ROOT / "examples" / "run_verl_8gpu.toml"
    log = ROOT / "examples" / "verl_sample_log.csv"
    assert main(["calibrate", str(log), "--spec", str(spec), "--out", str(cal), "--quiet"]) == 0
    capsys.readouterr()
    sets = ["--set", "design.placement=4", "--set", "design.eta=1", "--set", "design.update=partial"]
    assert main(["run", str(cal), *sets]) == 0
    rows = dict(line.split() for line in capsys.readouterr().out.splitlines()[1:])
    assert rows["trainer/idle_ratio"] == rows["fully_async/trainer/idle_ratio"]
    assert not any(k.startswith("groups_") for k in rows)  # issue 2, on the same run


# -- 2. no groups_* rows without groups -----------------------------------------------------------


def test_a_run_without_group_batching_lists_no_group_counts() -> None:
    s = _compute_run().summary()
    assert not set(GROUP_METRICS) & set(s)
    assert all(k not in s for k in GROUP_METRICS)
    # code that reads them from every run (scenarios/compute.py's table) still gets NaN
    assert all(math.isnan(s[k]) for k in GROUP_METRICS)
    assert math.isnan(s.get("groups_trained"))
    with pytest.raises(KeyError):
        s["no_such_metric"]
    assert not set(GROUP_METRICS) & set(pd.DataFrame([s]).columns)


def test_a_run_with_group_batching_lists_its_counts_as_integers() -> None:
    s = _compute_run(groups=True).summary()
    assert [k for k in s if k in GROUP_METRICS] == list(GROUP_METRICS)
    assert all(type(s[k]) is int for k in GROUP_METRICS)
    assert s["groups_trained"] == 4 * 16 // WORK.samples_per_prompt


def test_run_json_holds_no_group_counts_without_groups(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "run.json"
    assert main(["run", str(ROOT / "examples" / "run_verl_8gpu.toml"), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())  # valid JSON
    assert not set(GROUP_METRICS) & set(data["summary"])
    assert "groups_" not in printed and "nan" not in printed.split("\n", 1)[1]


def test_whole_groups_policy_object_still_counts() -> None:
    s = _compute_run(groups=WholeGroups(4)).summary()  # type: ignore[arg-type]
    assert s["groups_trained"] > 0


# -- 3. no interval from one seed; bars that say what they are for ---------------------------------


def test_one_seed_gives_no_interval() -> None:
    runs = pd.DataFrame({"k": [1, 2, 2], "status": ["ok"] * 3, "x": [5.0, 2.0, 4.0], "seed": [0, 0, 1]})
    agg = aggregate(runs, ["k"], ["x"], ["x"]).set_index("k")
    assert agg.loc[1, "x_mean"] == 5.0
    assert math.isnan(agg.loc[1, "x_lo"]) and math.isnan(agg.loc[1, "x_hi"])
    assert agg.loc[2, "x_lo"] == 0.0 and agg.loc[2, "x_hi"] > 4.0  # two seeds: an interval


def small() -> pipesim.Scenario:
    return get_scenario("synchronous").with_(pool_size=None, n_slots=8, batch_size=8, steps=3)


def test_sweep_of_one_seed_prints_nan_bounds_and_says_why(capsys: Any) -> None:
    assert main(["sweep", "synchronous", "--over", "max_staleness=0,1", "--quiet", "--workers", "1"]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    header, rows = lines[0].split(), [ln.split() for ln in lines[1:3]]
    lo, hi = header.index("throughput_per_hour_lo"), header.index("throughput_per_hour_hi")
    assert all(r[lo] == r[hi] == "NaN" for r in rows)
    assert "every cell ran one seed, so no interval" in cap.err


def test_sweep_bar_is_headed_by_its_label(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real = sweeps.progress_bar

    def spy(total: int, enabled: bool | None, label: str = "sweep") -> Any:
        seen.append(label)
        return real(total, False, label)

    monkeypatch.setattr(sweeps, "progress_bar", spy)
    kw: dict[str, Any] = dict(executor=ThreadPoolExecutor(1), timeout_s=None, progress=False)
    sweeps.sweep(small(), **kw)
    sweeps.sweep(small(), **kw, label="my designs")
    assert seen == ["sweep", "my designs"]
    bar = real(3, True, "my designs")
    assert bar.desc == "my designs"
    bar.close()
    with pytest.raises(ValueError, match="label"):
        sweeps.sweep(small(), **kw, label=3)  # type: ignore[arg-type]


def test_reports_sweeps_each_say_what_they_are_for(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pipesim.io import report

    labels: list[str] = []
    real = sweeps.sweep

    def spy(*args: Any, label: str = "sweep", **kw: Any) -> Any:
        labels.append(label)
        return real(*args, **{**kw, "executor": ThreadPoolExecutor(2), "timeout_s": None}, label=label)

    monkeypatch.setattr(sweeps, "sweep", spy)
    report.build_report(tmp_path / "r.html", seeds=1, progress=False, etas=(0, 1))
    assert labels == list(report.REPORT_SWEEPS.values())
    assert len(set(labels)) == 3 and "sweep" not in labels
