"""Run specs (``kind = "compute"``, :mod:`pipesim.plan.runspec`): the round trip file -> run ->
export -> same data, agreement with the planner's own run of the same design, ``--set`` on dotted
keys, a plan's best design exported as a run spec, and bad specs as one-line errors naming the key."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import tomllib
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.io.cli import main
from pipesim.plan import specfile
from pipesim.plan.checks import PlanError
from pipesim.plan.evaluate import run_design
from pipesim.plan.runspec import (
    apply_sets,
    design_to_runspec,
    dumps,
    from_dict,
    is_runspec,
    load,
    plan_tables,
    run,
    spec_tables,
)
from pipesim.plan.space import UPDATES, Design

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "run_qwen3_8b.toml"
EXAMPLE_8GPU = EXAMPLE.parent / "run_verl_8gpu.toml"

SPEC: dict[str, Any] = {
    "kind": "compute",
    "cluster": {"gpu": "h100-sxm", "n_gpus": 8},
    "model": {"name": "qwen3-0.6b", "max_model_len": 4096},
    "workload": {
        "prompts_per_step": 4,
        "samples_per_prompt": 4,
        "prompt_tokens": 128,
        "response": {"median_tokens": 200, "sigma": 0.5},
        "max_response_tokens": 1024,
    },
    "design": {"placement": 4, "tp": 1, "eta": 1, "update": "partial", "sync_every": 1, "oversample": 1.0},
    "run": {"steps": 3, "seed": 5},
}


def _write(tmp_path: Path, data: dict[str, Any], name: str = "run.toml") -> Path:
    p = tmp_path / name
    p.write_text(dumps(data, "yaml" if name.endswith((".yaml", ".yml")) else "toml"))
    return p


@pytest.mark.parametrize("name", ["run.toml", "run.yaml"])
def test_file_run_export_gives_the_same_data_and_the_same_run(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, SPEC, name)
    out = tmp_path / ("again" + Path(name).suffix)
    assert main(["run", str(path), "--json", str(tmp_path / "r.json")]) == 0
    assert main(["export", str(path), "--out", str(out)]) == 0
    assert specfile.read(out) == SPEC  # the same tables, as data
    first, again = load(path), load(out)
    assert first == again
    a, b = run(first).summary(), run(again).summary()
    assert a["throughput_per_hour"] == b["throughput_per_hour"] and a["timing_s/step"] == b["timing_s/step"]
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["runspec"] == SPEC and saved["summary"]["timing_s/step"] == pytest.approx(a["timing_s/step"])


@settings(max_examples=40, deadline=None)
@given(
    place=st.sampled_from(["colocated", 2, 4, 6]),
    eta=st.integers(0, 5),
    update=st.sampled_from(UPDATES),
    k=st.integers(1, 3),
    over=st.sampled_from([1.0, 1.25, 2.0]),
    fmt=st.sampled_from(["toml", "yaml"]),
)
def test_dumped_specs_read_back_to_the_same_spec(
    place: Any, eta: int, update: str, k: int, over: float, fmt: str
) -> None:
    data = copy.deepcopy(SPEC)
    data["design"] = {
        "placement": place,
        "tp": 2,
        "eta": eta,
        "update": update,
        "sync_every": k,
        "oversample": over,
    }
    text = dumps(data, fmt)
    if fmt == "toml":
        back = tomllib.loads(text)
    else:
        import yaml

        back = yaml.safe_load(text)
    assert back == data
    rs = from_dict(back)
    assert rs == from_dict(data)
    assert rs.design == Design(0 if place == "colocated" else place, 2, eta, update, k, over)


def test_the_run_is_the_plans_run_of_the_same_design() -> None:
    """An independent path: the planner's run_design of the design at the same seed and length."""
    rs = from_dict(SPEC)
    mine = run(rs).summary()
    theirs = run_design(rs.plan, rs.design, rs.steps, rs.seed)
    assert mine["throughput_per_hour"] == theirs["throughput_per_hour"]
    assert mine["staleness_mean"] == theirs["staleness_mean"]


def test_calibrated_values_change_the_run_and_plan_reads_them(tmp_path: Path) -> None:
    data = copy.deepcopy(SPEC)
    base = run(from_dict(data)).summary()
    data["calibration"] = {"values": {"mfu": 0.2, "step_overhead_s": 3.0, "response_median_tokens": 400.0}}
    rs = from_dict(data)
    assert rs.plan.mfu == 0.2 and rs.step_overhead_s == 3.0
    assert rs.plan.workload.response.median_tokens > from_dict(SPEC).plan.workload.response.median_tokens
    cal = run(rs).summary()
    # the step overhead is the trainer's remainder phase; the lower MFU slows update_actor
    assert cal["timing_s/remainder"] == pytest.approx(base["timing_s/remainder"] + 3.0)
    assert cal["timing_s/update_actor"] > base["timing_s/update_actor"]
    p = _write(tmp_path, data)
    spec = specfile.load(p)  # what `pipesim plan CALIBRATED.toml` reads
    assert spec.mfu == 0.2 and spec.workload.response == rs.plan.workload.response
    assert spec.step_overhead_s == 3.0 and spec.iteration_overhead_s is None
    data["calibration"]["values"]["iteration_overhead_s"] = 0.005
    rs = from_dict(data)
    assert specfile.load(_write(tmp_path, data)).iteration_overhead_s == 0.005
    slower = run(rs).summary()
    assert slower["timing_s/gen"] > cal["timing_s/gen"]  # 5 ms a decode iteration, not 1 ms
    planned = run_design(rs.plan, rs.design, rs.steps, rs.seed)  # the planner's run of it agrees
    assert planned["throughput_per_hour"] == slower["throughput_per_hour"]
    assert "calibration" not in plan_tables(data) and plan_tables(data)["model"]["mfu"] == 0.2


def test_set_changes_dotted_keys_and_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, SPEC)
    rs = load(
        path, ["design.eta=2", "design.placement=colocated", "workload.response.median_tokens=300"], seed=9
    )
    assert rs.design.eta == 2 and rs.design.colocated and rs.seed == 9
    assert rs.plan.workload.response.median_tokens == 300
    assert apply_sets(SPEC, ["run.steps=7"])["run"]["steps"] == 7 and SPEC["run"]["steps"] == 3
    assert main(["export", str(path), "--set", "design.eta=2", "--out", "-"]) == 0
    assert tomllib.loads(capsys.readouterr().out)["design"]["eta"] == 2


def test_slot_files_are_not_run_specs(tmp_path: Path) -> None:
    slot = tmp_path / "slot.toml"
    assert main(["export", "synchronous", "--out", str(slot)]) == 0
    assert not is_runspec(slot) and is_runspec(_write(tmp_path, SPEC)) and is_runspec(EXAMPLE)
    assert not is_runspec("synchronous")


def test_the_example_loads() -> None:
    rs = load(EXAMPLE)
    assert rs.design.trainer_gpus == 16 and rs.plan.n_gpus == 64


def test_a_plans_best_design_exports_as_a_run_spec(tmp_path: Path) -> None:
    plan_data = {k: SPEC[k] for k in ("cluster", "model", "workload")}
    plan_data["space"] = {
        "placement": [0, 4],
        "tp": [1],
        "eta": [0, 1],
        "update": ["partial"],
        "oversample": [1.0],
    }
    plan_data["search"] = {"steps": 3, "screen_steps": 1, "seeds": 1}
    spec_path = tmp_path / "plan.toml"
    spec_path.write_text(dumps(plan_data).replace('kind = "compute"\n', ""))
    out = tmp_path / "best.toml"
    assert main(["plan", str(spec_path), "--quiet", "--no-sensitivity", "--export-best", str(out)]) == 0
    rs = load(out)
    import pipesim.plan as plan

    result = plan.plan(specfile.load(spec_path), with_sensitivity=False)
    assert result.best is not None and rs.design == result.best.design and rs.steps == 3
    assert run(rs).summary()["throughput_per_hour"] == pytest.approx(
        result.best.runs[0]["throughput_per_hour"]
    )
    assert design_to_runspec(plan_data, rs.design, steps=3)["design"] == specfile.read(out)["design"]


BAD: list[tuple[str, list[str], str]] = [
    ("tp does not divide the heads", ["design.tp=3"], "design.tp"),
    ("tp beyond the engine GPUs", ["design.tp=8"], "design.placement"),
    ("placement takes every GPU", ["design.placement=8"], "design.placement"),
    ("placement is a typo", ["design.placement=colocatd"], "design.placement"),
    ("unknown update", ["design.update=parital"], "design.update"),
    ("fractional eta", ["design.eta=1.5"], "design.eta"),
    ("negative eta", ["design.eta=-1"], "design.eta"),
    ("oversample below 1", ["design.oversample=0.5"], "design.oversample"),
    ("unknown design key", ["design.tpp=2"], "design.tpp"),
    ("zero steps", ["run.steps=0"], "run.steps"),
    ("bad seed", ["run.seed=-3"], "run.seed"),
    ("seed past the duration draws' 32 bits", ["run.seed=5000000000"], "run.seed"),
    ("unknown gpu", ['cluster.gpu="h1000"'], "cluster.gpu"),
    ("model too big for one GPU", ['model.name="qwen3-32b"', 'cluster.gpu="l40s"'], "design.tp"),
    (
        "trainer too small",
        ['model.name="qwen3-32b"', "design.placement=1", "design.tp=1"],
        "design.placement",
    ),
    ("response too long", ["workload.max_response_tokens=100000"], "workload.max_response_tokens"),
    ("calibrated mfu above 1", ["calibration.values.mfu=2.0"], "calibration.values.mfu"),
    ("unknown table", ["space.tp=[1]"], "space"),
]


@pytest.mark.parametrize("why,sets,key", BAD, ids=[b[0] for b in BAD])
def test_bad_specs_are_one_line_errors_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], why: str, sets: list[str], key: str
) -> None:
    data = copy.deepcopy(SPEC)
    for pair in sets:  # written into the file (not --set) where --set refuses the table
        k, _, v = pair.partition("=")
        parts = k.split(".")
        node = data
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        try:
            node[parts[-1]] = tomllib.loads(f"v = {v}")["v"]
        except tomllib.TOMLDecodeError:  # a bare word, as --set reads it
            node[parts[-1]] = v
    path = _write(tmp_path, data)
    with pytest.raises(PlanError) as e:
        load(path)
    assert key in str(e.value) and str(path) in str(e.value)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pipesim: error:") and key in err[0], err


@pytest.mark.parametrize("which", ["slot", "uncalibrated", "one run", "a million runs"])
def test_intervals_need_a_calibrated_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str
) -> None:
    data = copy.deepcopy(SPEC)
    if which == "one run":
        data["calibration"] = {"values": {"mfu": 0.3}, "intervals": {"mfu": [0.2, 0.4]}}
    target = "synchronous" if which == "slot" else str(_write(tmp_path, data))
    if which == "a million runs":  # calibrated, but each draw is a whole run: bounded
        data["calibration"] = {"values": {"mfu": 0.3}, "intervals": {"mfu": [0.2, 0.4]}}
    n = {"one run": "1", "a million runs": "1000000"}.get(which, "3")
    assert main(["run", target, "--intervals", n]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--intervals" in err[0], err


def test_trace_rebuilds_a_run_spec_run_from_its_json(tmp_path: Path) -> None:
    path = _write(tmp_path, SPEC)
    direct, again = tmp_path / "direct.json", tmp_path / "again.json"
    assert main(["run", str(path), "--trace", str(direct), "--json", str(tmp_path / "r.json")]) == 0
    assert main(["trace", str(tmp_path / "r.json"), "--out", str(again)]) == 0
    assert json.loads(direct.read_text()) == json.loads(again.read_text())
    assert main(["trace", str(path), "--set", "design.eta=2", "--out", str(again)]) == 0
    assert json.loads(direct.read_text()) != json.loads(again.read_text())


def test_save_html_and_events_of_a_run_spec(tmp_path: Path) -> None:
    import pandas as pd

    import pipesim

    path = _write(tmp_path, SPEC)
    html, saved, events = tmp_path / "run.html", tmp_path / "saved", tmp_path / "events.csv"
    args = ["run", str(path), "--html", str(html), "--save", str(saved), "--events", str(events)]
    assert main(args) == 0
    crun = run(load(path))
    direct = crun.result
    loaded = pipesim.load(saved)
    assert loaded.summary()["throughput_per_hour"] == pytest.approx(direct.summary()["throughput_per_hour"])
    assert len(pd.read_csv(events)) == len(direct.events)
    # the saved run is the compute run printed: its summary (idle ratios, phases, ledger), marked
    # compute, with the spec it reruns from (its scenario is only the kernel's stand-in)
    printed = crun.summary()
    assert loaded.engine == "compute" and loaded.runspec is not None
    for key in ("trainer/idle_ratio", "rollouter/idle_ratio", "timing_s/step", "perf/throughput"):
        assert loaded.summary()[key] == pytest.approx(printed[key]), key
    again = run(from_dict(loaded.runspec["runspec"])).summary()
    assert again["timing_s/step"] == pytest.approx(printed["timing_s/step"])
    assert loaded.runspec["recipe"]["seed"] == load(path).seed
    assert "plotly" in html.read_text()[:200000].lower()


@pytest.mark.parametrize("agent", [False, True])
def test_a_plan_spec_object_exports_to_the_same_cluster_model_and_workload(
    tmp_path: Path, agent: bool
) -> None:
    plan_file = Path(__file__).resolve().parent.parent / "examples" / "plan_qwen3_8b.toml"
    tables = specfile.read(plan_file)
    if agent:
        tables["workload"]["agent"] = {"turns": 2, "tool_latency_s": 2.0, "observation_tokens": 100}
        tables["workload"]["max_response_tokens"] = 4096  # two turns and a tool call fit the context
    spec = specfile.from_dict(tables)
    d = Design(16, 2, 1, "inflight", 2, 1.25)
    rs = from_dict(design_to_runspec(spec, d, seed=4))
    for name in ("gpu", "n_gpus", "model", "workload", "batch_size", "mfu", "max_model_len", "max_num_seqs"):
        assert getattr(rs.plan, name) == getattr(spec, name), name
    assert rs.design == d and rs.steps == spec.steps and rs.seed == 4
    written = tmp_path / "plan.toml"
    written.write_text(dumps(tables).replace('kind = "compute"\n', ""))
    assert from_dict(design_to_runspec(written, d)).plan.workload == rs.plan.workload == spec.workload


def test_a_trace_backed_plan_spec_object_names_the_key(tmp_path: Path) -> None:
    trace = tmp_path / "lengths.csv"
    trace.write_text("num_decode_tokens\n" + "\n".join(str(100 + i) for i in range(50)))
    tables = {k: copy.deepcopy(SPEC[k]) for k in ("cluster", "model", "workload")}
    del tables["workload"]["response"]
    tables["workload"]["response_trace"] = {"path": str(trace)}
    with pytest.raises(PlanError) as info:
        design_to_runspec(specfile.from_dict(tables), Design(0))
    assert info.value.field == "workload.response_trace", str(info.value)


def test_the_agent_keys_and_the_framework_reach_the_run_and_come_back() -> None:
    """A run spec with the plan's agent keys (an environment-worker fleet, the KV policy during
    tools) and a named framework profile: its run is the planner's run of the same design (the run
    spec's cluster once left out ``env_workers``), and a PlanSpec writes the keys back."""
    data = copy.deepcopy(SPEC)
    data["cluster"] |= {"env_workers": 2, "cost_per_gpu_hour": 2.5}
    data["model"] |= {"tool_kv": "drop", "framework": "megatron-dense"}
    data["workload"]["agent"] = {"turns": 2, "tool_latency_s": 1.0, "observation_tokens": 64}
    rs = from_dict(data)
    assert rs.plan.env_workers == 2 and rs.plan.tool_kv == "drop"
    mine = run(rs).summary()
    theirs = run_design(rs.plan, rs.design, rs.steps, rs.seed)
    assert mine["throughput_per_hour"] == theirs["throughput_per_hour"]
    fleet = copy.deepcopy(data)
    fleet["cluster"]["env_workers"] = 64
    assert run(from_dict(fleet)).summary()["throughput_per_hour"] > mine["throughput_per_hour"]
    back = spec_tables(rs.plan)
    assert back["cluster"]["env_workers"] == 2 and back["cluster"]["cost_per_gpu_hour"] == 2.5
    assert back["model"]["tool_kv"] == "drop" and back["model"]["framework"] == "megatron-dense"
    again = from_dict({**data, **{k: back[k] for k in ("cluster", "model", "workload")}})
    assert again.plan == rs.plan


def test_a_calibrated_run_spec_planned_over_exports_its_calibration(tmp_path: Path) -> None:
    """``pipesim plan calibrated.toml --export-best best.toml``: the exported run spec carries the
    source's ``[calibration]`` and its run's sync time, so ``pipesim run best.toml`` runs the model
    the plan ran (it used to drop both: another trainer, another decode overhead)."""
    data = specfile.read(EXAMPLE_8GPU)
    data["calibration"] = {
        "values": {"fwd_bwd_efficiency": 0.2, "iteration_overhead_s": 0.01, "response_median_tokens": 700.0}
    }
    data["run"] = {"steps": 3, "seed": 0, "sync_time_s": 4.5}
    source = tmp_path / "calibrated.toml"
    source.write_text(dumps(data))
    planned = specfile.load(source)
    d = Design(0, 1, 1, "partial", 1, 1.0)
    exported = design_to_runspec(source, d, steps=3, seed=2)
    assert exported["calibration"] == data["calibration"] and exported["run"]["sync_time_s"] == 4.5
    rs = from_dict(exported)
    # the plan's search settings, not the model: a plan of a run spec also runs the spec's design as
    # its baseline and searches its sync interval
    search = ("steps", "screen_steps", "seeds", "sim_seed", "baseline", "space")
    assert rs.plan == planned.with_(**{k: getattr(rs.plan, k) for k in search})
    assert run(rs).summary()["throughput_per_hour"] == pytest.approx(
        run_design(planned, d, steps=3, seed=2)["throughput_per_hour"]
    )


def _small_plan(tmp_path: Path) -> Path:
    plan_data = {k: copy.deepcopy(SPEC[k]) for k in ("cluster", "model", "workload")}
    plan_data["space"] = {"placement": [0, 4], "tp": [1], "eta": [0, 1], "update": ["partial"]}
    plan_data["search"] = {"steps": 3, "screen_steps": 1, "seeds": 1}
    path = tmp_path / "plan.toml"
    path.write_text(dumps(plan_data).replace('kind = "compute"\n', ""))
    return path


def test_plan_set_edits_the_spec_before_it_is_read_and_the_export_is_the_edited_one(tmp_path: Path) -> None:
    """``pipesim plan SPEC --set TABLE.KEY=VALUE``: the plan runs the edited spec (the same as a
    file written with the edit), and ``--export-best`` writes the edited tables."""
    path = _small_plan(tmp_path)
    sets = ["space.eta=[1]", "workload.max_response_tokens=2048"]
    edited = specfile.read(path)
    edited["space"]["eta"] = [1]
    edited["workload"]["max_response_tokens"] = 2048
    by_hand = tmp_path / "by_hand.toml"
    by_hand.write_text(dumps(edited).replace('kind = "compute"\n', ""))
    assert specfile.load(path, sets) == specfile.load(by_hand)
    out = tmp_path / "best.toml"
    argv = ["plan", str(path), "--quiet", "--no-sensitivity", "--no-cache", "--export-best", str(out)]
    assert main([*argv, *[x for s in sets for x in ("--set", s)]]) == 0
    rs = load(out)
    assert rs.design.eta == 1 and rs.plan.workload.max_response_tokens == 2048


@pytest.mark.parametrize(
    "pair,field",
    [
        ("clusterr.n_gpus=4", "clusterr.n_gpus"),  # an unknown table
        ("cluster", "cluster"),  # no value
        ("space.eta=[-1]", "space.eta"),  # the spec's own check, on the edited value
        ("search.steps=100000000", "search.steps"),  # a run of that length is out of memory
    ],
)
def test_a_bad_plan_set_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pair: str, field: str
) -> None:
    path = _small_plan(tmp_path)
    with pytest.raises(PlanError) as e:
        specfile.load(path, [pair])
    assert e.value.field is not None and e.value.field.startswith(field) and str(path) in str(e.value)
    assert main(["plan", str(path), "--quiet", "--no-cache", "--set", pair]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field.split(".")[0] in err[0]


def test_set_asks_a_what_if_of_a_calibrated_value(tmp_path: Path) -> None:
    """``--set calibration.values.KEY=V`` replaces one calibrated value (checked as the file's
    own would be): the trainer takes it, a faster trainer shortens update_actor, a bad value names
    its key."""
    data = copy.deepcopy(SPEC)
    data["model"]["framework"] = "fsdp2-dense"
    data["calibration"] = {"values": {"fwd_bwd_efficiency": 0.3}}
    path = _write(tmp_path, data)
    from pipesim.plan.build import trainer_config

    base, faster = load(path), load(path, ["calibration.values.fwd_bwd_efficiency=0.6"])
    assert trainer_config(faster.plan, faster.design).framework.fwd_bwd_efficiency == 0.6
    assert run(faster).summary()["timing_s/update_actor"] < run(base).summary()["timing_s/update_actor"]
    with pytest.raises(PlanError) as e:
        load(path, ["calibration.values.fwd_bwd_efficiency=1.5"])
    assert e.value.field == "calibration.values.fwd_bwd_efficiency"


def test_a_plan_of_a_run_spec_searches_its_sync_interval_and_compares_with_its_design(tmp_path: Path) -> None:
    """verl's fully-async trainer syncs every trigger_parameter_sync_step steps: a plan of a run
    spec that syncs every 4 searched every-step syncs alone (each step paying the whole sync) and
    never ran the spec's own design. It now searches the spec's interval beside the default space's
    and runs the design as the baseline; a design that does not fit the cluster is no baseline."""
    data = specfile.read(EXAMPLE_8GPU)
    data["design"].update(placement=4, eta=1, update="partial", sync_every=4)
    source = tmp_path / "async.toml"
    source.write_text(dumps(data))
    planned = specfile.load(source)
    assert planned.space.sync_every == (1, 4)
    assert planned.baseline == Design(4, 1, 1, "partial", 4, 1.0)
    from pipesim.plan.runspec import _with_own_design  # 8 trainer GPUs of 8 leave no engine GPU

    assert _with_own_design(planned.with_(baseline=None), Design(8, 1, 1, "partial", 4, 1.0)).baseline is None


def test_a_calibrated_profile_says_where_its_constants_come_from(tmp_path: Path) -> None:
    """The plan's code built the calibrated profile with the default profile's source (a verl README
    row), though its constants came from the user's log: the source now says which were calibrated."""
    data = specfile.read(EXAMPLE_8GPU)
    data["calibration"] = {"values": {"fwd_bwd_efficiency": 0.3, "micro_batch_s": 0.2}}
    source = tmp_path / "calibrated.toml"
    source.write_text(dumps(data))
    prof = specfile.load(source).framework
    assert prof is not None and prof.fwd_bwd_efficiency == 0.3
    assert "calibrated from a log" in prof.source and "fwd_bwd_efficiency, micro_batch_s" in prof.source
    del data["calibration"]
    source.write_text(dumps(data))
    plain = specfile.load(source).framework
    assert plain is None or "calibrated" not in plain.source


def test_a_split_runs_output_gives_the_step_a_verl_async_log_compares_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pipesim's step holds the weight sync; verl's fully-async trainer logs its step without it (a
    user compared 24.9 s with a log's 23.7): a split design's run prints the step less the sync."""
    data = specfile.read(EXAMPLE_8GPU)
    data["run"] = {"steps": 3, "seed": 0}
    for placement, noted in ((4, True), ("colocated", False)):
        data["design"].update(placement=placement)
        spec = tmp_path / f"{placement}.toml"
        spec.write_text(dumps(data))
        assert main(["run", str(spec)]) == 0
        got = capsys.readouterr()
        rows = {
            p[0]: float(p[1].replace(",", "")) for ln in got.out.splitlines() if len(p := ln.split()) == 2
        }
        lines = [
            ln for ln in got.err.splitlines() if ln.startswith("note: timing_s/step holds the weight sync")
        ]
        assert "note:" not in got.out  # stdout stays the table
        assert bool(lines) == noted
        if noted:
            want = rows["timing_s/step"] - rows["timing_s/param_sync"]
            assert float(lines[0].rsplit(" ", 2)[1].replace(",", "")) == pytest.approx(want, rel=2e-3)


def test_an_observer_sees_each_trained_step_once_in_order() -> None:
    """``pipesim run SPEC`` shows a bar of the trainer's steps (a 30,000-step run ran minutes
    without a word): the observer it passes sees every step of the run, once, in order, and
    leaves the run as it was."""
    from pipesim.plan.runspec import load, run

    rs = load(EXAMPLE, ["run.steps=4"])

    class Steps:
        def __init__(self) -> None:
            self.seen: list[int] = []

        def on_batch(self, step: int, version: int, batch: list[Any], now_s: float) -> None:
            self.seen.append(step)

    obs = Steps()
    watched = run(rs, observer=obs).summary()
    assert obs.seen == list(range(4))
    assert watched == run(rs).summary()
