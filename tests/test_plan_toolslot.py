"""A plan spec's ``model.episodes_per_replica`` and the report's tool-call slot note
(:mod:`pipesim.plan.slots`): the key is read and bounded as a run spec's, reaches every design's
cluster, the recommended code, the exported run spec and the spec hash; each run records whether
its slots looked like its limit (cached with it), and the report names the designs so limited
once, in the text and in ``--json``, while the runs themselves warn nothing."""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import tomllib

from pipesim import plan
from pipesim.compute.cluster import run_compute
from pipesim.compute.tool_slots import ToolSlotWarning
from pipesim.plan import report, runspec, specfile
from pipesim.plan.build import candidates, design_cluster, routing, scenario, sync_seconds, trainer_config
from pipesim.plan.cache import DiskCache, run_key, spec_hash
from pipesim.plan.checks import PlanError
from pipesim.plan.code import scenario_code
from pipesim.plan.evaluate import run_design
from pipesim.plan.runspec_export import design_to_runspec
from pipesim.plan.slots import SLOT_KEY, limited, reported

# 8 H100s, one split of 4 replicas of 16 slots, 64 four-turn agent episodes a step with 5 s tools:
# at eta 1 the episodes waiting on tools hold every slot while the engines decode few
AGENT = """
[cluster]
gpu = "h100-sxm"
n_gpus = 8
[model]
name = "qwen3-0.6b"
max_model_len = 16384
max_num_seqs = 16
[workload]
prompts_per_step = 16
samples_per_prompt = 4
prompt_tokens = 512
response = { median_tokens = 200, sigma = 0.5 }
max_response_tokens = 1024
agent = { turns = 4, tool_latency_s = 5.0, tool_latency_sigma = 0.5, observation_tokens = 200 }
[constraints]
max_staleness = 4
min_trainer_gpus = 2
[space]
placement = [4]
tp = [1]
eta = [0, 1]
update = ["partial"]
oversample = [1.0]
[search]
method = "grid"
screen_steps = 2
steps = 4
seeds = 2
min_full = 2
"""


def _data(**model: Any) -> dict[str, Any]:
    data = tomllib.loads(AGENT)
    data["model"].update(model)
    return data


def _spec(**model: Any) -> plan.PlanSpec:
    return specfile.from_dict(_data(**model))


def _no_tool_slot_warning(caught: list[warnings.WarningMessage]) -> bool:
    return not [w for w in caught if issubclass(w.category, ToolSlotWarning)]


def test_a_plan_spec_takes_episodes_per_replica_for_every_design_s_cluster() -> None:
    """Before: ``model.episodes_per_replica: unknown key`` (the warning's own remedy refused)."""
    spec = _spec(episodes_per_replica=48)
    assert spec.episodes_per_replica == 48
    for d in candidates(spec):
        eng, cluster = design_cluster(spec, d)
        assert cluster.replica_slots == 48 != eng.max_num_seqs
        assert cluster.n_slots == 48 * cluster.n_replicas
    default = _spec()
    assert all(design_cluster(default, d)[1].replica_slots == 16 for d in candidates(default))


@pytest.mark.parametrize("bad", [0, -1, 2**24 + 1, 1.5, 4.0, "64", True, [64]])
def test_a_bad_episodes_per_replica_is_refused_as_the_run_spec_refuses_it(bad: object) -> None:
    with pytest.raises(PlanError) as got:
        specfile.from_dict(_data(episodes_per_replica=bad))
    assert got.value.field == "model.episodes_per_replica"
    run = copy.deepcopy(_data(episodes_per_replica=bad))
    run |= {"kind": "compute", "design": {"placement": 4, "tp": 1, "eta": 0, "update": "partial"}}
    del run["space"], run["search"]
    with pytest.raises(PlanError) as same:
        runspec.from_dict(run)
    assert (same.value.field, str(same.value)) == (got.value.field, str(got.value))


def test_the_slots_are_in_the_spec_hash_and_every_run_s_key() -> None:
    a, b = _spec(), _spec(episodes_per_replica=64)
    d = candidates(a)[0]
    assert spec_hash(a) != spec_hash(b)
    assert run_key(a, d, 4, 0) != run_key(b, d, 4, 0)
    assert spec_hash(b) == spec_hash(_spec(episodes_per_replica=64))


def test_a_run_records_what_run_compute_warns_and_warns_nothing_itself() -> None:
    """``tool_slot_limited`` of a plan's run is 1 exactly where ``run_compute`` of the same design
    and seed warns a ToolSlotWarning; run_design itself raises none."""
    spec = _spec()
    seen = set()
    for d in candidates(spec):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = run_design(spec, d, 4, 0)
        assert _no_tool_slot_warning(caught)
        _, cluster = design_cluster(spec, d)
        with warnings.catch_warnings(record=True) as raw:
            warnings.simplefilter("always")
            run_compute(
                scenario(spec, d, 4, 0, n_slots=cluster.n_slots),
                cluster,
                spec.workload,
                seed=0,
                trainer=trainer_config(spec, d),
                sync_time_s=sync_seconds(spec, d, cluster),
                routing=routing(spec),
            )
        warned = not _no_tool_slot_warning(raw)
        assert m[SLOT_KEY] == float(warned)
        seen.add(warned)
    assert seen == {True, False}  # the spec holds a limited design and one that is not


def _plan(spec: plan.PlanSpec, cache: DiskCache | None = None, workers: int = 1) -> plan.PlanResult:
    return plan.plan(spec, workers=workers, with_sensitivity=False, cache=cache)


def test_the_report_names_the_limited_designs_once_and_a_cached_plan_says_the_same(
    tmp_path: Path,
) -> None:
    """Before: the warning came from the runs (once per process, none from a cached run), named no
    design and was not in the JSON."""
    disk = DiskCache(tmp_path / "cache")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fresh = _plan(_spec(), disk)
    assert _no_tool_slot_warning(caught)
    found = limited(fresh)
    assert found and all(e.metrics[SLOT_KEY] > 0 for e in found)
    assert {e.design for e in found} <= {e.design for e in reported(fresh)}
    assert all(e.metrics.get(SLOT_KEY, 0) == 0 for e in reported(fresh) if e not in found)
    text = report.text(fresh)
    notes = [line for line in text.splitlines() if "model.episodes_per_replica" in line]
    assert len(notes) == 1
    lines = text.splitlines()
    at = lines.index(notes[0])
    assert (
        lines.index(report.LEGEND) < at < lines.index(next(x for x in lines if x.startswith("Pareto front")))
    )
    assert all(e.design.label(8) in notes[0] for e in found)
    out = report.as_json(fresh)
    said = out["tool_slots"]
    assert [x["label"] for x in said["designs"]] == [e.design.label(8) for e in found]
    assert said["recommended"] == (fresh.best is not None and fresh.best.design in {e.design for e in found})
    assert said["note"] == notes[0]
    for entry in out["full"]:
        assert SLOT_KEY in entry["metrics"]
    records = [json.loads(p.read_text()) for p in (tmp_path / "cache").rglob("*.json")]
    assert records and all(SLOT_KEY in r["metrics"] for r in records)
    again = DiskCache(tmp_path / "cache")
    cached = _plan(_spec(), again)
    assert cached.runs == 0 and again.hits > 0
    assert report.as_json(cached)["tool_slots"] == said
    assert [x for x in report.text(cached).splitlines() if "model.episodes_per_replica" in x] == notes


def test_worker_processes_print_no_raw_warning(capfd: pytest.CaptureFixture[str]) -> None:
    result = _plan(_spec(), workers=2)
    err = capfd.readouterr().err
    assert limited(result)  # the runs were slot-limited ...
    assert "ToolSlotWarning" not in err and "waiting on tool calls" not in err  # ... and said nothing


def test_more_slots_reach_the_runs_and_the_note_follows_them() -> None:
    """More slots: the designs limited at 16 per replica run faster with 24, where eta 1 is still
    limited and the note says the 24 slots it ran with (beside max_num_seqs 16) and doubles them in
    its remedy; with 64 they run faster still and none is limited, so there is no note."""
    few, more, plenty = (
        _plan(_spec(**k)) for k in ({}, {"episodes_per_replica": 24}, {"episodes_per_replica": 64})
    )
    assert limited(few)
    faster = {e.design: e.throughput for e in more.full}
    fastest = {e.design: e.throughput for e in plenty.full}
    for e in limited(few):
        assert e.throughput < faster[e.design] < fastest[e.design]
    assert limited(more)  # the note below is reached
    notes = [line for line in report.text(more).splitlines() if "model.episodes_per_replica" in line]
    assert len(notes) == 1
    assert "(24 per replica)" in notes[0] and "max_num_seqs (16)" in notes[0]
    assert "(now: 24; e.g. --set model.episodes_per_replica=48)" in notes[0]
    assert limited(plenty) == []
    assert not [line for line in report.text(plenty).splitlines() if "model.episodes_per_replica" in line]


def test_the_recommended_code_and_the_export_carry_the_slots(tmp_path: Path) -> None:
    spec = _spec(episodes_per_replica=40)
    d = max(candidates(spec), key=lambda d: d.eta)
    code = scenario_code(spec, d)
    assert "slots_per_replica=40" in code
    scope: dict[str, Any] = {}
    exec(code, scope)  # noqa: S102 - the printed code, as a user pastes it
    assert (
        scope["run"].summary()["throughput_per_hour"]
        == run_design(spec, d, spec.steps, 0)["throughput_per_hour"]
    )
    assert design_to_runspec(spec, d)["model"]["episodes_per_replica"] == 40
    path = tmp_path / "plan.toml"
    path.write_text(AGENT.replace("max_num_seqs = 16", "max_num_seqs = 16\nepisodes_per_replica = 40"))
    assert design_to_runspec(path, d)["model"]["episodes_per_replica"] == 40
    assert runspec.from_dict(design_to_runspec(spec, d)).engine == (("episodes_per_replica", 40),)


def test_a_plan_of_a_run_spec_runs_its_slots_without_the_engine_keys_warning(tmp_path: Path) -> None:
    """Before: ``model.episodes_per_replica: pipesim plan's engines do not take these run-spec
    keys``, and the plan's designs ran with max_num_seqs slots."""
    spec = _spec(episodes_per_replica=40)
    d = candidates(spec)[0]
    path = tmp_path / "run.toml"
    path.write_text(runspec.dumps(design_to_runspec(spec, d), "toml"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = specfile.load(path)
    assert not [w for w in caught if "run-spec keys" in str(w.message)]
    assert loaded.episodes_per_replica == 40
    assert design_cluster(loaded, d)[1].replica_slots == 40


@pytest.mark.parametrize(
    ("per", "why"),
    [(2**24, "more slots than one run holds"), (2**21, "a task pool no step fits")],
)
def test_too_many_slots_for_a_plan_s_replicas_name_the_key(per: int, why: str) -> None:
    """Within the key's bounds but too many for the designs' 4 replicas: refused before any run,
    naming model.episodes_per_replica (not the cluster's slots_per_replica or search.steps)."""
    with pytest.raises(PlanError) as got:
        plan.search(_spec().with_(episodes_per_replica=per))
    assert got.value.field == "model.episodes_per_replica", why
