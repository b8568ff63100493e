"""A walkthrough of ``pipesim plan`` (64 H100s, Qwen2.5-7B, an agent workload): an empty space
blamed "no split leaves a multiple of 1" where ``min_trainer_gpus`` or the trainer's memory left
nothing; listed placements and TP degrees no design can use vanished without a word (70 trainer
GPUs of 64, a TP of 3 for 28 heads, a placement below the minimum); ``space.tp = [3]`` read "does
not fit" and named no key. No test here runs a simulation."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import pipesim.plan as plan
import pipesim.plan.evaluate as ev
from pipesim.plan import specfile
from pipesim.plan.build import candidates
from pipesim.plan.checks import PlanError
from pipesim.plan.drops import SpaceDropWarning
from tests.test_toolslots2_criterion import WALK  # the walkthrough's cluster, model and workload

SPEC = (
    WALK.split("[space]", 1)[0]
    + """[space]
placement = ["colocated", 16, 24, 32]
tp = [1, 2]
eta = [0, 1]
update = ["drain", "partial"]
[search]
method = "grid"
screen_steps = 3
steps = 8
seeds = 3
"""
)

SHORT = 300  # characters: a refusal stays one short line


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(SPEC)
    return p


def refusal(path: Path, sets: list[str], field: str) -> str:
    spec = specfile.load(path, sets)
    with pytest.raises(PlanError) as info:
        plan.search(spec)  # refused before any run: nothing is simulated
    assert info.value.field == field, (info.value.field, str(info.value))
    msg = str(info.value)
    assert len(msg) < SHORT, msg
    return msg


def test_min_trainer_gpus_leaving_no_listed_placement_is_named(path: Path) -> None:
    msg = refusal(path, ["space.placement=[16, 24]", "constraints.min_trainer_gpus=40"], "space")
    assert "min_trainer_gpus=40" in msg and "16, 24" in msg
    assert "leaves a multiple" not in msg


def test_a_trainer_too_small_for_the_model_names_its_memory(path: Path) -> None:
    sets = ['model.name="qwen3-14b"', "constraints.min_trainer_gpus=1", "space.placement=[2]"]
    msg = refusal(path, sets, "space")
    assert "memory" in msg and "GiB" in msg and "placement 2" in msg
    assert "leaves a multiple" not in msg


@pytest.mark.parametrize(
    ("sets", "field", "named"),
    [
        (["space.placement=[16, 70, 13]", "space.tp=[2]"], "space.placement", ["70", "cluster.n_gpus"]),
        (["space.placement=[64]"], "space.placement", ["64", "leaving none for rollout"]),
        (["space.tp=[2, 3]"], "space.tp", ["space.tp 3", "n_heads (28)", "1, 2, 4, 28"]),
        (["space.tp=[3]"], "space.tp", ["space.tp 3", "n_heads (28)"]),
        (["space.tp=[1, 128]"], "space.tp", ["space.tp 128", "cluster.n_gpus"]),
    ],
)
def test_a_value_no_design_can_use_is_refused_naming_key_and_value(
    path: Path, sets: list[str], field: str, named: list[str]
) -> None:
    msg = refusal(path, sets, field)
    for word in named:
        assert word in msg, (word, msg)
    assert "does not fit" not in msg  # a divisibility or a count, not memory


def test_values_left_out_by_a_constraint_or_the_replica_width_are_said_once(path: Path) -> None:
    spec = specfile.load(path, ["space.placement=[16, 13, 4]", "space.tp=[2]"])
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        designs = candidates(spec)
    assert {d.trainer_gpus for d in designs} == {16}
    notes = [str(w.message) for w in got if issubclass(w.category, SpaceDropWarning)]
    assert len(notes) == 1, notes
    assert "space.placement 4: below constraints.min_trainer_gpus=8" in notes[0]
    assert "space.placement 13 at tp=2" in notes[0]


def test_a_tp_degree_the_weights_do_not_fit_at_is_said(path: Path) -> None:
    sets = ['model.name="qwen3-32b"', 'cluster.gpu="l40s"', "space.tp=[1, 2, 4]"]
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        designs = candidates(specfile.load(path, sets))
    assert designs and {d.tp for d in designs} == {2, 4}
    (note,) = [str(w.message) for w in got if issubclass(w.category, SpaceDropWarning)]
    assert "space.tp 1: model qwen3-32b does not fit" in note


def test_a_space_every_value_of_which_is_used_says_nothing(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpaceDropWarning)
        assert candidates(specfile.load(path))


def test_the_command_prints_the_note_once_on_stderr(
    path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def stop(*a: Any) -> Any:  # the first run: Ctrl-C (the note comes before any run)
        raise KeyboardInterrupt

    monkeypatch.setattr(ev, "run_design", stop)
    rc = plan.main([str(path), "--set", "space.placement=[16, 13, 4]", "--set", "space.tp=[2]", "--no-cache"])
    err = capsys.readouterr().err
    assert rc == 130
    said = [line for line in err.splitlines() if line.startswith("pipesim: warning: space: left out")]
    assert len(said) == 1 and "13 at tp=2" in said[0] and "min_trainer_gpus=8" in said[0], err
