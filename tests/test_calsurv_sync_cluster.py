"""A calibrated weight sync under ``--set cluster.*`` / ``model.*``: the factor (measured /
modelled) is taken on the cluster and model the log was measured on (the file's), then applied to
the modelled sync of the run's own setup (``pipesim.plan.runspec_calibration``). Before, the
pair moved the cluster under the logged design too, so the measured seconds were read as the
edited cluster's: ``--set cluster.n_gpus=16`` on a spec logged colocated on 8 GPUs at 2.5 times
the model's 0.114 s synced in 0.285 s, for the 2.54 s the factor times the 16-GPU model gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipesim.plan.build import design_cluster, sync_seconds
from pipesim.plan.checks import PlanError
from pipesim.plan.runspec import dumps, from_dict, load, read

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "run_verl_8gpu.toml"
FACTOR = 2.5


def _sync_s(spec: Any, design: Any) -> float:
    return float(sync_seconds(spec, design, design_cluster(spec, design)[1]))


def _raw() -> dict[str, Any]:
    data = read(SPEC)
    data["run"] = {"steps": 3, "seed": 0}
    return data


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The raw spec and its calibrated twin (sync_time_s = FACTOR x the model's 8-GPU sync), and
    the model's own syncs of the setups the tests move to (uncalibrated: what the factor scales)."""
    folder = tmp_path_factory.mktemp("calsurv_cluster")
    raw = folder / "raw.toml"
    raw.write_text(dumps(_raw()))
    base = from_dict(_raw())
    model_s = {"8": _sync_s(base.plan, base.design)}
    for name, sets in {
        "16": ["cluster.n_gpus=16"],
        "16 split": ["design.placement=8", "cluster.n_gpus=16"],
        "14b": ["model.name=qwen3-14b"],
        "a100": ["cluster.gpu=a100-80gb"],
        "megatron": ["model.framework=megatron-dense"],
    }.items():
        rs = load(raw, sets)
        model_s[name] = _sync_s(rs.plan, rs.design)
    data = _raw()
    data["calibration"] = {"values": {"sync_time_s": FACTOR * model_s["8"]}}
    cal = folder / "cal.toml"
    cal.write_text(dumps(data))
    return {"cal": cal, "data": data, "model_s": model_s, "folder": folder}


@pytest.mark.parametrize(
    ("sets", "setup"),
    [
        (["cluster.n_gpus=16"], "16"),
        (["design.placement=8", "cluster.n_gpus=16"], "16 split"),
        (["model.name=qwen3-14b"], "14b"),
        (["cluster.gpu=a100-80gb"], "a100"),
        (["model.framework=megatron-dense"], "megatron"),  # the logged sync under the file's profile
    ],
)
def test_a_set_cluster_or_model_syncs_at_the_factor_times_its_own_model(
    files: dict[str, Any], sets: list[str], setup: str
) -> None:
    """The run syncs in FACTOR x its own setup's modelled sync (before: 0.285 s for 16 GPUs'
    2.54 s, 0.334 s for 8:8 on 16's 2.97 s), and the file's own setup in the measured seconds."""
    model_s = files["model_s"]
    assert abs(model_s[setup] / model_s["8"] - 1) > 0.1  # the moved setup's model differs
    rs = load(files["cal"])
    assert _sync_s(rs.plan, rs.design) == pytest.approx(FACTOR * model_s["8"], rel=1e-9)
    moved = load(files["cal"], sets)
    assert _sync_s(moved.plan, moved.design) == pytest.approx(FACTOR * model_s[setup], rel=1e-9)
    table = sets[-1].split(".")[0]
    assert moved.data["calibration"][table] == files["data"][table]  # the file's, kept


def test_the_numbers_of_the_report(files: dict[str, Any]) -> None:
    """The walkthrough's numbers: the model's 8-GPU 0.114 s, 16-GPU 1.016 s and 8:8 1.188 s; the
    calibrated 0.285, 2.54 and 2.97 s."""
    m = files["model_s"]
    assert (round(m["8"], 3), round(m["16"], 3), round(m["16 split"], 3)) == (0.114, 1.016, 1.188)
    got = [
        load(files["cal"], s) for s in (["cluster.n_gpus=16"], ["design.placement=8", "cluster.n_gpus=16"])
    ]
    assert [round(_sync_s(r.plan, r.design), 2) for r in got] == [2.54, 2.97]


def test_a_plan_of_the_spec_with_a_cluster_set_takes_the_factor_on_the_files_cluster(
    files: dict[str, Any],
) -> None:
    """``pipesim plan cal.toml --set cluster.n_gpus=16`` (specfile.edited): the plan's designs on
    16 GPUs sync at FACTOR x their model; ``--export-best`` keeps the logged cluster, so the
    exported run syncs as the plan ran it."""
    from pipesim.plan.runspec import from_dict as run_from_dict
    from pipesim.plan.runspec_export import design_to_runspec
    from pipesim.plan.specfile import edited
    from pipesim.plan.specfile import load as load_spec

    planned = load_spec(files["cal"], ["cluster.n_gpus=16"])
    coloc = load(files["cal"]).design
    assert _sync_s(planned, coloc) == pytest.approx(FACTOR * files["model_s"]["16"], rel=1e-9)
    data = edited(files["cal"], ["cluster.n_gpus=16"])
    assert data["calibration"]["cluster"] == files["data"]["cluster"]
    split = load(files["cal"], ["design.placement=8", "cluster.n_gpus=16"]).design
    out = design_to_runspec(data, split)
    assert out["cluster"]["n_gpus"] == 16
    assert out["calibration"]["cluster"] == files["data"]["cluster"]
    exported = run_from_dict(out)
    assert _sync_s(exported.plan, exported.design) == pytest.approx(
        FACTOR * files["model_s"]["16 split"], rel=1e-9
    )


def test_a_logged_cluster_already_named_is_kept_by_a_second_set(files: dict[str, Any]) -> None:
    """A spec naming ``calibration.cluster`` (an export of a plan on 16 GPUs) run with another
    ``--set cluster.*``: the factor is still the one taken on the named (8-GPU) cluster, not on
    the one the file's ``[cluster]`` says now."""
    data = {**files["data"], "cluster": {**files["data"]["cluster"], "n_gpus": 16}}
    data["calibration"] = {**data["calibration"], "cluster": dict(files["data"]["cluster"])}
    path = files["folder"] / "named.toml"
    path.write_text(dumps(data))
    rs = load(path)
    assert _sync_s(rs.plan, rs.design) == pytest.approx(FACTOR * files["model_s"]["16"], rel=1e-9)
    moved = load(path, ["cluster.gpu=a100-80gb", "cluster.n_gpus=8"])
    assert moved.data["calibration"]["cluster"] == files["data"]["cluster"]
    assert _sync_s(moved.plan, moved.design) == pytest.approx(FACTOR * files["model_s"]["a100"], rel=1e-9)


@pytest.mark.parametrize(
    ("table", "bad", "field", "said"),
    [
        (
            "cluster",
            {"gpu": "h100-sxm", "n_gpus": "x"},
            "calibration.cluster.n_gpus",
            "must be an integer, got 'x'",
        ),
        ("cluster", [8], "calibration.cluster", "calibration.cluster must be a table"),
        ("model", {"name": "no-such-model"}, "calibration.model.name", "unknown model 'no-such-model'"),
    ],
)
def test_a_bad_logged_cluster_or_model_is_refused_naming_its_key(
    files: dict[str, Any], table: str, bad: Any, field: str, said: str
) -> None:
    data = {**files["data"], "calibration": {**files["data"]["calibration"], table: bad}}
    with pytest.raises(PlanError) as e:
        from_dict(data)
    assert e.value.field == field
    assert str(e.value).startswith(field) and said in str(e.value), str(e.value)


def test_a_logged_design_that_does_not_fit_the_logged_cluster_keeps_the_measured_seconds(
    files: dict[str, Any],
) -> None:
    """The fallback: an 8:8 logged design on the file's 8 GPUs has no modelled sync to scale,
    so every design syncs in the measured seconds."""
    measured = files["data"]["calibration"]["values"]["sync_time_s"]
    data = {**files["data"], "cluster": {**files["data"]["cluster"], "n_gpus": 16}}
    data["calibration"] = {
        **data["calibration"],
        "cluster": dict(files["data"]["cluster"]),
        "design": {**files["data"]["design"], "placement": 8},
    }
    rs = from_dict(data)
    assert _sync_s(rs.plan, rs.design) == pytest.approx(measured, rel=1e-12)


def _trace_spec(folder: Path) -> dict[str, Any]:
    """The 8-GPU spec's tables on 16 GPUs, its lengths from a trace at a path relative to
    ``folder``, the sync calibrated on the file's 8 GPUs (``calibration.cluster``)."""
    (folder / "data").mkdir(exist_ok=True)
    lengths = [200 + 37 * i % 900 for i in range(200)]
    (folder / "data" / "lengths.csv").write_text("n\n" + "\n".join(map(str, lengths)) + "\n")
    data = _raw()
    del data["workload"]["response"]
    data["workload"]["response_trace"] = {"path": "data/lengths.csv", "column": "n"}
    data["cluster"] = {**data["cluster"], "n_gpus": 16}
    data["calibration"] = {"values": {"sync_time_s": 1.0}, "cluster": dict(_raw()["cluster"])}
    return data


def test_a_logged_setup_reads_the_specs_relative_paths_from_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The logged setup's tables are the spec's (its trace at a relative path): read from the
    spec's folder (``base``), the factor is taken on the logged 8 GPUs; read without it from
    another folder, the trace is not there, and the factor is taken on the run's own setup rather
    than the spec refused (the run spec loads either way)."""
    from pipesim.plan.runspec_calibration import LoggedSetup, calibrated_sync, logged_design

    data = _trace_spec(tmp_path)
    monkeypatch.chdir(tmp_path.parent)
    assert from_dict(data, tmp_path).plan is not None
    uncal = {k: v for k, v in data.items() if k != "calibration"}
    run = from_dict(uncal, tmp_path)
    on8 = from_dict({**uncal, "cluster": _raw()["cluster"]}, tmp_path)
    model16, model8 = _sync_s(run.plan, run.design), _sync_s(on8.plan, on8.design)
    assert abs(model16 / model8 - 1) > 0.3
    logged = logged_design(data, tmp_path)
    assert isinstance(logged, LoggedSetup)
    at_base = calibrated_sync(run.plan, {"sync_time_s": 1.0}, logged)
    assert _sync_s(at_base, run.design) == pytest.approx(model16 / model8, rel=1e-9)
    unread = logged_design(data)
    assert unread.spec({"sync_time_s": 1.0}) is None
    on_run = calibrated_sync(run.plan, {"sync_time_s": 1.0}, unread)
    assert _sync_s(on_run, run.design) == pytest.approx(1.0, rel=1e-9)


def test_a_plan_with_a_model_set_reads_a_logged_config_path_from_the_specs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pipesim plan cal.toml --set model.weight_dtype=fp8`` of a spec whose model is a
    ``config.json`` beside it, from another folder: ``calibration.model.name`` is made absolute
    with ``[model]``'s (runspec_export.resolved), so the factor is taken on the file's model."""
    import shutil

    from pipesim.plan.runspec_export import resolved
    from pipesim.plan.specfile import edited
    from pipesim.plan.specfile import load as load_spec

    shutil.copytree(ROOT / "examples" / "published" / "qwen2.5-math-7b-32k", tmp_path / "cfg")
    data = _raw()
    data["model"] = {**data["model"], "name": "cfg/config.json", "framework": "fsdp2-dense"}
    raw = tmp_path / "raw.toml"
    raw.write_text(dumps(data))
    monkeypatch.chdir(tmp_path.parent)
    model_bf16 = load(raw)
    model_fp8 = load(raw, ["model.weight_dtype=fp8"])
    bf16_s = _sync_s(model_bf16.plan, model_bf16.design)
    fp8_s = _sync_s(model_fp8.plan, model_fp8.design)
    assert bf16_s != pytest.approx(fp8_s, rel=1e-6)
    data["calibration"] = {"values": {"sync_time_s": FACTOR * bf16_s}}
    cal = tmp_path / "cal.toml"
    cal.write_text(dumps(data))
    tables = edited(cal, ["model.weight_dtype=fp8"])
    assert tables["calibration"]["model"]["name"] == str(tmp_path / "cfg" / "config.json")
    planned = load_spec(cal, ["model.weight_dtype=fp8"])
    assert _sync_s(planned, model_fp8.design) == pytest.approx(FACTOR * fp8_s, rel=1e-9)
    # pipesim run's load: the relative path is not refused (read from the spec's folder where
    # runspec.from_dict hands logged_design its base; else the factor is the run's own setup's)
    ran = load(cal, ["model.weight_dtype=fp8"])
    got = _sync_s(ran.plan, ran.design)
    assert got == pytest.approx(FACTOR * fp8_s, rel=1e-9) or got == pytest.approx(FACTOR * bf16_s, rel=1e-9)
    kept = {"model": {"name": "cfg/config.json"}, "calibration": {"model": {"name": "cfg/config.json"}}}
    assert resolved(kept, tmp_path)["calibration"]["model"]["name"] == str(tmp_path / "cfg" / "config.json")
