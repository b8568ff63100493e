"""Run specs' paths survive being written elsewhere; a missing kind, a framework that does not fit
and the engine options (``model.max_num_batched_tokens`` ...) are named by their spec keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipesim.io.cli import main
from pipesim.plan import runspec as R
from pipesim.plan import specfile
from pipesim.plan.checks import PlanError

SPEC = """kind = "compute"
[cluster]
gpu = "h100-sxm"
n_gpus = 8
[model]
name = "qwen3-8b"
max_model_len = 8192
{model}
[workload]
prompts_per_step = 4
samples_per_prompt = 4
prompt_tokens = 256
response_trace = {{ path = "data/lengths.csv", column = "num_decode_tokens" }}
max_response_tokens = 2048
[design]
placement = 4
tp = 1
eta = 1
update = "partial"
[run]
steps = 2
seed = 0
"""

PLAN = """[cluster]
gpu = "h100-sxm"
n_gpus = 8
[model]
name = "qwen3-8b"
max_model_len = 8192
[workload]
prompts_per_step = 4
samples_per_prompt = 4
prompt_tokens = 256
response_trace = { path = "data/lengths.csv", column = "num_decode_tokens" }
max_response_tokens = 2048
[space]
placement = ["colocated", 4]
tp = [1]
eta = [1]
update = ["drain"]
[search]
method = "grid"
steps = 2
screen_steps = 1
seeds = 1
"""


def _tree(tmp: Path, model: str = "", text: str = SPEC, name: str = "spec.toml") -> Path:
    (tmp / "sub" / "data").mkdir(parents=True, exist_ok=True)
    (tmp / "sub" / "data" / "lengths.csv").write_text(
        "num_decode_tokens\n" + "\n".join(str(100 + 7 * i) for i in range(60))
    )
    (tmp / "other").mkdir(exist_ok=True)
    path = tmp / "sub" / name
    path.write_text(text.format(model=model) if "{model}" in text else text)
    return path


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _summary(path: str | Path) -> dict[str, Any]:
    return dict(R.run(R.load(path)).summary())


def test_export_elsewhere_reads_the_same_trace(in_tmp: Path) -> None:
    _tree(in_tmp)
    assert main(["export", "sub/spec.toml", "--out", "other/exp.toml"]) == 0
    written = specfile.read("other/exp.toml")["workload"]["response_trace"]["path"]
    assert (in_tmp / "other" / written).resolve() == (in_tmp / "sub/data/lengths.csv").resolve()
    assert _summary("other/exp.toml") == _summary("sub/spec.toml")
    assert main(["run", "other/exp.toml"]) == 0


def test_export_best_elsewhere_runs(in_tmp: Path) -> None:
    _tree(in_tmp, text=PLAN, name="plan.toml")
    assert main(["plan", "sub/plan.toml", "--export-best", "other/best.toml"]) == 0
    written = specfile.read("other/best.toml")["workload"]["response_trace"]["path"]
    assert not Path(written).is_absolute()
    assert (in_tmp / "other" / written).resolve() == (in_tmp / "sub/data/lengths.csv").resolve()
    assert main(["run", "other/best.toml"]) == 0
    # with --set the plan's tables hold the path absolute: the export still reads the file
    assert main(["plan", "sub/plan.toml", "--set", "search.steps=2", "--export-best", "other/b2.toml"]) == 0
    assert main(["run", "other/b2.toml"]) == 0


def test_saved_spec_reruns_from_another_folder(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipesim

    _tree(in_tmp)
    assert main(["run", "sub/spec.toml", "--save", "saved"]) == 0
    saved = pipesim.load(str(in_tmp / "saved"))
    monkeypatch.chdir(in_tmp / "other")  # the documented rerun line, from elsewhere
    again = R.run(R.from_dict(saved.runspec["runspec"]))
    assert again.summary()["timing_s/step"] == pytest.approx(saved.summary()["timing_s/step"])


def test_missing_kind_says_add_it(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _tree(in_tmp, text=SPEC.replace('kind = "compute"\n', ""))
    assert main(["run", str(path)]) != 0
    err = capsys.readouterr().err
    assert 'kind = "compute"' in err and "pipesim plan" not in err, err
    with pytest.raises(PlanError) as info:
        specfile.load(path)
    assert info.value.field == "kind" and 'kind = "compute"' in str(info.value)


@pytest.mark.parametrize(
    "argv", [["sweep"], ["trace", "--out", "t.json"], ["export", "--out", "x.toml"], ["run"]]
)
def test_every_command_says_add_the_missing_kind(
    argv: list[str], in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pipesim sweep`` (and the other scenario commands) called it a plan spec and sent it to
    ``pipesim plan``, which refused its [design]."""
    path = _tree(in_tmp, text=SPEC.replace('kind = "compute"\n', ""))
    assert main([argv[0], str(path), *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert 'kind = "compute"' in err and "pipesim plan" not in err, err


def test_a_profile_that_does_not_fit_names_model_framework(in_tmp: Path) -> None:
    path = _tree(in_tmp)
    with pytest.raises(PlanError) as info:
        R.load(path, ["model.framework=megatron-moe"])
    assert info.value.field == "model.framework" and "model.framework" in str(info.value)


KNOBS = {
    "max_num_batched_tokens": 4096,
    "enforce_eager": True,
    "disable_custom_all_reduce": True,
    "kv_policy": "reserve",
}


def test_engine_options_reach_the_engine_and_travel(in_tmp: Path) -> None:
    model = "\n".join(f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}" for k, v in KNOBS.items())
    path = _tree(in_tmp, model=model.replace("'", '"'))
    rs = R.load(path)
    assert dict(rs.engine) == KNOBS
    from pipesim.plan.build import design_cluster  # the engine R.run gives each replica

    built, _ = design_cluster(rs.plan, rs.design, rs.engine)
    assert all(getattr(built, k) == v for k, v in KNOBS.items())
    # eager mode and NCCL all-reduces make generation no faster than the defaults
    plain = R.load(
        path,
        [f"model.{k}={v}" for k, v in (("enforce_eager", "false"), ("disable_custom_all_reduce", "false"))],
    )
    assert R.run(rs).summary()["timing_s/gen"] >= R.run(plain).summary()["timing_s/gen"]
    assert main(["export", str(path), "--out", "other/exp.toml"]) == 0
    assert {k: specfile.read("other/exp.toml")["model"][k] for k in KNOBS} == KNOBS
    assert main(["run", str(path), "--save", "saved"]) == 0
    import pipesim

    assert {k: pipesim.load("saved").runspec["runspec"]["model"][k] for k in KNOBS} == KNOBS
    with pytest.warns(UserWarning, match="model.max_num_batched_tokens"):
        specfile.load(path)  # a plan of it: checked, and its designs run without them (said)


@pytest.mark.parametrize(
    ("pair", "field"),
    [
        ("model.max_num_batched_tokens=0", "model.max_num_batched_tokens"),
        ("model.max_num_batched_tokens=8", "model.max_num_batched_tokens"),  # < max_num_seqs
        ("model.max_num_batched_tokens=1.5", "model.max_num_batched_tokens"),
        ("model.enforce_eager=3", "model.enforce_eager"),
        ("model.disable_custom_all_reduce=yes", "model.disable_custom_all_reduce"),
        ("model.kv_policy=reserv", "model.kv_policy"),
    ],
)
def test_bad_engine_options_name_the_key(in_tmp: Path, pair: str, field: str) -> None:
    path = _tree(in_tmp)
    with pytest.raises(PlanError) as info:
        R.load(path, [pair])
    assert info.value.field == field and field in str(info.value), str(info.value)
    assert main(["run", str(path), "--set", pair]) != 0
