"""What a user's walkthrough of docs/compute.md and docs/runspec.md found in the refusals, each
checked for the key it names (the user's, not an internal field) and, through the command line,
the one line a user reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster
from pipesim.compute.cost import EngineConfig
from pipesim.core.errors import MAX_SLOTS
from pipesim.core.validate import FieldError
from pipesim.io.cli import main

EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "run_qwen3_8b.toml")


def test_a_cluster_with_more_slots_than_a_run_holds_names_its_gpus() -> None:
    e = EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], max_num_seqs=256)
    Cluster(engine=e, n_gpus=MAX_SLOTS // 256, trainer_gpus=0)  # exactly at the limit: accepted
    with pytest.raises(FieldError) as info:
        Cluster(engine=e, n_gpus=MAX_SLOTS // 256 + 1, trainer_gpus=0)
    assert info.value.field == "n_gpus" and "max_num_seqs" in str(info.value)


@pytest.mark.parametrize(
    ("sets", "key", "needle"),
    [
        (["cluster.n_gpus=32768", "model.max_num_seqs=1024"], "cluster.n_gpus", "sequence slots"),
        (["design.placement=colocated", "cluster.n_gpus=63", "design.tp=2"], "cluster.n_gpus", "colocated"),
        (["workload.prompt_tokens=20000"], "workload.prompt_tokens", "workload.max_prompt_tokens (4096)"),
    ],
    ids=["too-many-slots", "colocated-tp", "prompt-over-its-cap"],
)
def test_a_run_spec_refusal_names_the_users_key(
    sets: list[str], key: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", EXAMPLE]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f": {key} (" in err and needle in err, err


def test_an_empty_response_trace_names_the_file_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "run.toml"
    text = Path(EXAMPLE).read_text()
    (tmp_path / "empty.csv").write_text("num_decode_tokens\n")
    line = "response = { median_tokens = 1500, sigma = 0.9 }"
    assert line in text
    body = text.replace(line, 'response_trace = { path = "empty.csv" }')
    spec.write_text(body)
    assert main(["run", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "workload.response_trace" in err and "empty.csv" in err and "num_decode_tokens" in err, err
