"""An integer key given a float, even ``8.0``, is refused naming the key, wherever it is read.

Scenario files and a scenario's ``--set`` refused ``steps = 3.0``; run specs and plan specs read
``8.0`` as 8 (:func:`pipesim.plan.checks.as_int`). One rule now (:func:`pipesim.plan.checks.is_int`,
the scenario files' own): an int, never a bool, never a float. TOML and YAML both tell ``8`` from
``8.0``. A float key given an int (``3`` seconds) is still a number.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipesim.core.validate import FieldError
from pipesim.io.overrides import apply_overrides
from pipesim.io.registry import get_entry
from pipesim.io.scenario_files import dumps, load_scenario
from pipesim.plan import runspec, specfile
from pipesim.plan.checks import PlanError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RUN_TEXT = (EXAMPLES / "run_qwen3_8b.toml").read_text()
PLAN_TEXT = (EXAMPLES / "plan_qwen3_8b.toml").read_text()


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _yaml_run(tmp_path: Path, steps: str) -> Path:
    import yaml

    data = runspec.read(EXAMPLES / "run_qwen3_8b.toml")
    text = yaml.safe_dump(data, sort_keys=False).replace("steps: 12", f"steps: {steps}")
    assert f"steps: {steps}" in text
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("steps = 12", "steps = 8.0", "run.steps"),
        ("seed = 0", "seed = 0.0", "run.seed"),
        ("tp = 1 ", "tp = 1.0 ", "design.tp"),
        ("eta = 1 ", "eta = 1.0 ", "design.eta"),
        ("placement = 16 ", "placement = 16.0 ", "design.placement"),
        ("sync_every = 1", "sync_every = 1.0", "design.sync_every"),
        ("n_gpus = 64", "n_gpus = 64.0", "cluster.n_gpus"),
        ("prompts_per_step = 32 ", "prompts_per_step = 32.0 ", "workload.prompts_per_step"),
        ("max_response_tokens = 12288", "max_response_tokens = 12288.0", "workload.max_response_tokens"),
    ],
)
def test_a_run_spec_refuses_a_float_for_an_integer(tmp_path: Path, old: str, new: str, key: str) -> None:
    path = tmp_path / "run.toml"
    path.write_text(_edit(RUN_TEXT, old, new))
    with pytest.raises(PlanError) as info:
        runspec.load(path)
    assert info.value.field == key, info.value
    assert key in str(info.value)


def test_a_yaml_run_spec_refuses_a_float_for_an_integer(tmp_path: Path) -> None:
    assert runspec.load(_yaml_run(tmp_path, "8")).steps == 8  # the control: 8 is an integer
    with pytest.raises(PlanError) as info:
        runspec.load(_yaml_run(tmp_path, "8.0"))
    assert info.value.field == "run.steps"


@pytest.mark.parametrize(
    ("pair", "key"),
    [
        ("run.steps=8.0", "run.steps"),
        ("design.tp=1.0", "design.tp"),
        ("cluster.n_gpus=64.0", "cluster.n_gpus"),
    ],
)
def test_set_on_a_run_spec_refuses_a_float_for_an_integer(pair: str, key: str) -> None:
    with pytest.raises(PlanError) as info:
        runspec.load(EXAMPLES / "run_qwen3_8b.toml", [pair])
    assert info.value.field == key


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("n_gpus = 64", "n_gpus = 64.0", "cluster.n_gpus"),
        ("tp = [1, 2]", "tp = [1.0, 2]", "space.tp[0]"),
        ("steps = 12", "steps = 12.0", "search.steps"),
    ],
)
def test_a_plan_spec_refuses_a_float_for_an_integer(tmp_path: Path, old: str, new: str, key: str) -> None:
    path = tmp_path / "plan.toml"
    path.write_text(_edit(PLAN_TEXT, old, new))
    with pytest.raises(PlanError) as info:
        specfile.load(path)
    assert info.value.field == key, info.value


@pytest.mark.parametrize(
    ("pair", "key"), [("cluster.n_gpus=64.0", "cluster.n_gpus"), ("space.eta=[0, 1.0]", "space.eta[1]")]
)
def test_set_on_a_plan_spec_refuses_a_float_for_an_integer(pair: str, key: str) -> None:
    with pytest.raises(PlanError) as info:
        specfile.load(EXAMPLES / "plan_qwen3_8b.toml", [pair])
    assert info.value.field == key


def test_a_scenario_and_its_set_refuse_it_as_they_did(tmp_path: Path) -> None:
    """The rule the specs now share: a scenario file's ``steps = 3.0`` and ``--set steps=3.0``."""
    scenario = get_entry("synchronous").build()
    path = tmp_path / "s.toml"
    path.write_text(_edit(dumps(scenario), "steps = 20", "steps = 3.0"))
    with pytest.raises(FieldError) as info:
        load_scenario(path)
    assert info.value.field == "pipeline.steps"
    with pytest.raises(FieldError) as info:
        apply_overrides(scenario, ["steps=3.0"])
    assert info.value.field == "steps"


@pytest.mark.parametrize(
    ("pair", "table", "key", "value"),
    [
        ("run.sync_time_s=3", "run", "sync_time_s", 3),
        ("design.oversample=1", "design", "oversample", 1),
        ("workload.difficulty_sigma=1", "workload", "difficulty_sigma", 1),
    ],
)
def test_a_float_key_still_takes_an_int(pair: str, table: str, key: str, value: int) -> None:
    rs = runspec.load(EXAMPLES / "run_qwen3_8b.toml", [pair])
    assert rs.data[table][key] == value


def test_a_plan_spec_float_key_still_takes_an_int(tmp_path: Path) -> None:
    spec = specfile.load(EXAMPLES / "plan_qwen3_8b.toml", ["search.sync_time_s=3", "model.mfu=1"])
    assert spec.sync_time_s == 3
