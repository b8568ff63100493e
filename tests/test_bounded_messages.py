"""A user's value in an error message is bounded: a few hundred bytes of YAML aliases expand to
a value whose full repr is hundreds of millions of characters (issue 44). Loading a file must
refuse it at once, in one short line naming where it was found."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipesim.core.errors import MAX_SHOWN_CHARS, shown
from pipesim.io.cli import main
from pipesim.io.scenario_files import load_scenario
from pipesim.io.scenario_schema import ScenarioFileError
from pipesim.plan import specfile
from pipesim.plan.checks import PlanError


def _bomb(levels: int = 8) -> str:
    """A YAML flow sequence whose last item holds 10**levels leaves, in about 45 bytes a level:
    each item is ten aliases of the one before."""
    items = ["&a0 [x, x, x, x, x, x, x, x, x, x]"]
    items += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


# where a file of the user's puts the bomb, and the key the refusal must name
SCENARIO_CASES = [
    ("schema_version: 1\npipeline:\n  max_staleness: {bomb}\n", "max_staleness"),
    ("schema_version: 1\nname: {bomb}\n", "name"),
    ("schema_version: 1\nadmission: {bomb}\n", "admission"),
    ("schema_version: {bomb}\n", "schema_version"),
    ("schema_version: 1\nadmission: " + "x" * 100_000 + "\n", "admission"),  # a string, not a table
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("body", "key"), SCENARIO_CASES, ids=[k for _, k in SCENARIO_CASES])
def test_a_scenario_file_of_aliases_is_refused_in_one_short_line(tmp_path: Path, body: str, key: str) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(body.format(bomb=_bomb()))
    with pytest.raises(ScenarioFileError) as info:
        load_scenario(path)
    message = str(info.value)
    assert key in message and "\n" not in message and len(message) < 500


@pytest.mark.timeout(30)
def test_pipesim_run_refuses_it_with_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(f"schema_version: 1\npipeline:\n  batch_size: {_bomb()}\n")
    code = main(["run", str(path)])
    err = capsys.readouterr().err
    assert code != 0 and "batch_size" in err and len(err) < 1000


@pytest.mark.timeout(30)
@pytest.mark.parametrize("body", ["cluster:\n  n_gpus: {bomb}\n", "workload: {bomb}\n", "{bomb}\n"])
def test_a_plan_spec_of_aliases_is_refused_in_one_short_line(tmp_path: Path, body: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(body.format(bomb=_bomb()))
    with pytest.raises(PlanError) as info:
        specfile.load(path)
    message = str(info.value)
    assert "\n" not in message and len(message) < 500


@pytest.mark.parametrize(
    "value",
    [
        "x" * 10_000,
        list(range(10_000)),
        {str(i): [i] * 50 for i in range(1000)},
        [[[[[[1]]]]]],
        b"\x00" * 999,
    ],
)
def test_shown_is_bounded_and_one_line(value: object) -> None:
    text = shown(value)
    assert len(text) <= MAX_SHOWN_CHARS and "\n" not in text


def test_shown_keeps_a_short_value_whole() -> None:
    assert shown([1, 2.5, "a"]) == repr([1, 2.5, "a"])
    assert shown(None) == "None"


HUGE = ["x" * 50] * 100_000  # a repr of about 5.4 million characters
"""A value whose whole repr would make a message megabytes long."""


def _constructors() -> list[tuple[str, object, str]]:
    import pipesim
    from pipesim.compute import GPUS, MODELS
    from pipesim.compute.cost import EngineConfig
    from pipesim.compute.workload import TokenWorkload

    return [
        ("PipelineConfig.n_slots", lambda: pipesim.PipelineConfig(n_slots=HUGE), "n_slots"),
        ("PipelineConfig.train_time_s", lambda: pipesim.PipelineConfig(train_time_s=HUGE), "train_time_s"),
        ("Scenario.replicas", lambda: pipesim.Scenario(replicas=HUGE), "replicas"),
        ("Scenario.seed", lambda: pipesim.Scenario(seed=HUGE), "seed"),
        ("Replicas.n_replicas", lambda: pipesim.Replicas(HUGE), "n_replicas"),
        ("SyncEveryK.k", lambda: pipesim.SyncEveryK(HUGE), "k"),
        ("AbortReprefill.decode_rate", lambda: pipesim.AbortReprefill(decode_rate_tok_s=HUGE), "decode_rate"),
        ("ExponentialDurations.mean_s", lambda: pipesim.ExponentialDurations(HUGE), "mean_s"),
        ("Timeout.cap_s", lambda: pipesim.Timeout(cap_s=HUGE), "cap_s"),
        (
            "EngineConfig.max_num_seqs",
            lambda: EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_num_seqs=HUGE),
            "max_num_seqs",
        ),
        ("TokenWorkload.prompt_tokens", lambda: TokenWorkload(prompt_tokens=HUGE), "prompt"),
    ]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", range(11))
def test_a_constructors_refusal_of_a_huge_value_is_one_short_line(case: int) -> None:
    """Every validator formats a user's value through ``shown``: the refusal names the field in
    a line of at most a few hundred characters, however large the value."""
    name, make, field = _constructors()[case]
    with pytest.raises((ValueError, TypeError)) as info:
        make()  # type: ignore[operator]
    text = str(info.value)
    assert field in text, name
    assert len(text) < 400 and "\n" not in text, f"{name}: {len(text)} characters"
