"""A saved compute run's scenario is the kernel's stand-in, not the run: ``scenario_exact`` is
False, its name says so, and :func:`pipesim.run` (and :func:`pipesim.compare`) of it refuse,
naming ``durations`` and the spec to rerun from; the kept run spec reruns the run. A slot run
loads as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pipesim
from pipesim.io.cli import main
from pipesim.plan.runspec import from_dict, run

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_verl_8gpu.toml"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("specfix") / "v"
    assert main(["run", str(SPEC), "--set", "run.steps=3", "--save", str(out)]) == 0
    return out


def test_a_saved_compute_runs_scenario_is_not_exact_and_refuses_to_run(saved: Path) -> None:
    s = pipesim.load(saved)
    assert s.engine == "compute" and not s.scenario_exact
    assert "stand-in" in s.scenario.name
    with pytest.raises(ValueError, match="runspec") as info:
        pipesim.run(s.scenario)
    assert getattr(info.value, "field", None) == "durations"
    with pytest.raises(ValueError, match="runspec"):
        pipesim.compare({"saved": s, "stand-in": s.scenario})
    assert s.runspec is not None  # the spec it names reruns the run
    again = run(from_dict(s.runspec["runspec"])).summary()
    assert again["throughput_per_hour"] == pytest.approx(s.summary()["throughput_per_hour"])


def test_a_saved_compute_run_saved_again_is_the_same_run(saved: Path, tmp_path: Path) -> None:
    s = pipesim.load(saved)
    again = s.save(tmp_path / "again")
    for name in ("scenario.json", "meta.json"):
        assert json.loads((again / name).read_text()) == json.loads((saved / name).read_text()), name
    t = pipesim.load(again)
    assert t.scenario == s.scenario and not t.scenario_exact and t.engine == "compute"


def test_a_slot_run_loads_exact_and_reruns(tmp_path: Path) -> None:
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=3), pool_size=64)
    res = pipesim.run(sc)
    res.save(tmp_path / "s")
    s = pipesim.load(tmp_path / "s")
    assert s.engine == "slots" and s.scenario_exact and s.scenario == sc
    assert pipesim.run(s.scenario).sim_time_s == pytest.approx(res.sim_time_s)
