"""The code ``pipesim plan`` prints for a model or GPU outside the catalog runs: a model read from
a ``config.json`` and a GPU given by its figures are built in the code (``ModelSpec(...)``,
``GPUSpec(...)``) where it named them in ``MODELS[...]``/``GPUS[...]`` and raised KeyError; and
a spec file gives such a GPU as ``[cluster] gpu``, an inline table of GPUSpec's fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipesim import plan
from pipesim.compute import GPUS, MODELS, GPUSpec, LogNormalLengths, ModelSpec, TokenWorkload
from pipesim.compute.catalog import HF_CONFIGS
from pipesim.compute.gpus import gpu
from pipesim.plan.code import scenario_code, wrap_code
from pipesim.plan.evaluate import run_design

MY_GPU = GPUSpec(
    name="my-b300",
    bf16_flops_per_s=2.5e15,
    hbm_bytes=288 * 2**30,
    hbm_bandwidth_bytes_per_s=8e12,
    nvlink_bandwidth_bytes_per_s=1.8e12,
    network_bandwidth_bytes_per_s=1e11,
)
GPU_TABLE = (
    '{ name = "my-b300", bf16_flops_per_s = 2.5e15, hbm_bytes = 309237645312, '
    "hbm_bandwidth_bytes_per_s = 8e12, nvlink_bandwidth_bytes_per_s = 1.8e12, "
    "network_bandwidth_bytes_per_s = 1e11 }"
)
SPEC = """[cluster]
gpu = {gpu}
n_gpus = 4
[model]
name = "my-model/config.json"
max_model_len = 4096
max_num_seqs = 32
[workload]
prompts_per_step = 8
samples_per_prompt = 4
prompt_tokens = 128
response = {{ median_tokens = 200, sigma = 0.5 }}
max_response_tokens = 1024
[search]
steps = 2
screen_steps = 1
"""


def _config_json(tmp_path: Path) -> Path:
    """A checkpoint's config.json the catalog does not hold (qwen3-0.6b with 14 layers)."""
    (tmp_path / "my-model").mkdir()
    path = tmp_path / "my-model" / "config.json"
    path.write_text(json.dumps({**HF_CONFIGS["qwen3-0.6b"], "num_hidden_layers": 14}))
    return path


def _runs_as_printed(spec: plan.PlanSpec) -> None:
    """The printed code (wrapped as printed) of one design runs, and runs what the plan ran."""
    d = next(d for d in plan.candidates(spec) if d.eta == 1)
    code = wrap_code(scenario_code(spec, d))
    scope: dict[str, Any] = {}
    exec(code, scope)  # noqa: S102 - the printed code, as a user pastes it
    assert scope["engine"].model == spec.model and scope["engine"].gpu == spec.gpu
    assert (
        scope["run"].summary()["throughput_per_hour"]
        == run_design(spec, d, spec.steps, 0)["throughput_per_hour"]
    )


def _python_spec(model: ModelSpec) -> plan.PlanSpec:
    """The spec file's plan (:data:`SPEC`) as a Python ``PlanSpec`` on :data:`MY_GPU` with ``model``."""
    return plan.PlanSpec(
        gpu=MY_GPU,
        n_gpus=4,
        model=model,
        workload=TokenWorkload(
            LogNormalLengths(200.0, 0.5), prompt=128, samples_per_prompt=4, max_response_tokens=1024
        ),
        batch_size=32,
        max_model_len=4096,
        max_num_seqs=32,
        steps=2,
        screen_steps=1,
        space=plan.Space(placement=(0, 2), eta=(1,), update=("partial",), oversample=(1.0,)),
    )


def test_the_code_for_a_config_json_model_on_a_catalog_gpu_runs(tmp_path: Path) -> None:
    _config_json(tmp_path)
    path = tmp_path / "plan.toml"
    path.write_text(SPEC.format(gpu='"h100-sxm"'))
    spec = plan.load(path)
    assert spec.model not in MODELS.values()
    _runs_as_printed(spec)
    assert 'gpu=GPUS["h100-sxm"]' in scenario_code(spec, plan.candidates(spec)[0])  # catalog: by name


def test_the_code_for_a_python_planspec_with_its_own_gpu_and_model_runs() -> None:
    model = ModelSpec.from_hf_config({**HF_CONFIGS["qwen3-0.6b"], "num_hidden_layers": 14}, name="my-model")
    spec = _python_spec(model)
    _runs_as_printed(spec)
    assert 'model=MODELS["qwen3-0.6b"]' in scenario_code(
        spec.with_(model=MODELS["qwen3-0.6b"]), plan.candidates(spec)[0]
    )


def test_a_spec_file_gives_a_gpu_outside_the_catalog_as_a_table(tmp_path: Path) -> None:
    _config_json(tmp_path)
    path = tmp_path / "plan.toml"
    path.write_text(SPEC.format(gpu=GPU_TABLE))
    spec = plan.load(path)
    assert spec.gpu == MY_GPU and spec.gpu not in GPUS.values()
    _runs_as_printed(spec)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("hbm_bytes = 309237645312, ", ""), "cluster.gpu.hbm_bytes"),  # missing
        (("name = ", "nmae = "), "cluster.gpu.nmae"),  # unknown
        (("bf16_flops_per_s = 2.5e15", "bf16_flops_per_s = -1.0"), "cluster.gpu.bf16_flops_per_s"),
        (
            ("hbm_bandwidth_bytes_per_s = 8e12", 'hbm_bandwidth_bytes_per_s = "8e12"'),
            "cluster.gpu.hbm_bandwidth_bytes_per_s",
        ),
        (('name = "my-b300"', "name = 3"), "cluster.gpu.name"),
        (('name = "my-b300"', 'name = ""'), "cluster.gpu.name"),
    ],
)
def test_a_bad_gpu_table_is_refused_naming_its_key(
    tmp_path: Path, change: tuple[str, str], field: str
) -> None:
    _config_json(tmp_path)
    path = tmp_path / "plan.toml"
    assert change[0] in GPU_TABLE
    path.write_text(SPEC.format(gpu=GPU_TABLE.replace(*change)))
    with pytest.raises(plan.PlanError) as e:
        plan.load(path)
    assert e.value.field == field


def test_an_unknown_gpu_name_says_both_ways_to_give_one() -> None:
    with pytest.raises(ValueError) as e:
        gpu("h100-nvl")
    assert "GPUSpec(" in str(e.value) and "[cluster] gpu" in str(e.value)


def test_a_python_planspec_with_its_own_gpu_exports_as_a_table(tmp_path: Path) -> None:
    """design_to_runspec of a PlanSpec whose GPU is outside the catalog writes ``[cluster] gpu`` as
    the table a spec file reads back (it was refused: "not in the catalog")."""
    from pipesim.plan.runspec import dumps, load
    from pipesim.plan.runspec_export import design_to_runspec

    spec = _python_spec(MODELS["qwen3-0.6b"])
    data = design_to_runspec(spec, plan.candidates(spec)[0])
    assert data["cluster"]["gpu"] == {
        "name": "my-b300",
        "bf16_flops_per_s": 2.5e15,
        "hbm_bytes": 288 * 2**30,
        "hbm_bandwidth_bytes_per_s": 8e12,
        "nvlink_bandwidth_bytes_per_s": 1.8e12,
        "network_bandwidth_bytes_per_s": 1e11,
    }
    path = tmp_path / "run.toml"
    path.write_text(dumps(data))
    assert load(path).plan.gpu == MY_GPU
    catalog = design_to_runspec(spec.with_(gpu=GPUS["h100-sxm"]), plan.candidates(spec)[0])
    assert catalog["cluster"]["gpu"] == "h100-sxm"
