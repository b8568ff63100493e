"""Multi-turn episodes and their slots (a run spec's ``model.episodes_per_replica``, the
:class:`~pipesim.compute.tool_slots.ToolSlotWarning`), ``tool_kv`` under ``kv_policy="reserve"``,
and the context refusal of a prompt that alone fills the context."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import pytest

import pipesim
from pipesim.compute import GPUS, MODELS, AgentTurns, Cluster, EngineConfig, LogNormalLengths, TokenWorkload
from pipesim.compute.cluster import run_compute
from pipesim.compute.tool_slots import ToolSlotWarning, tool_slot_note
from pipesim.plan import runspec
from pipesim.plan.checks import PlanError

TOOL_S = 30.0

# two agent episodes of 2 turns x 1,000 tokens with 30 s tool calls on one replica of max_num_seqs 1
SPEC: dict[str, Any] = {
    "kind": "compute",
    "cluster": {"gpu": "h100-sxm", "n_gpus": 2},
    "model": {"name": "qwen3-0.6b", "max_model_len": 8192, "max_num_seqs": 1},
    "workload": {
        "prompts_per_step": 2,
        "samples_per_prompt": 1,
        "prompt_tokens": 500,
        "response": {"median_tokens": 1000, "sigma": 0.0},
        "max_response_tokens": 2048,
        "agent": {"turns": 2, "tool_latency_s": TOOL_S, "tool_latency_sigma": 0.0, "observation_tokens": 200},
    },
    "design": {"placement": 1, "tp": 1, "eta": 0, "update": "drain"},
    "run": {"steps": 1, "seed": 0},
}


def _spec(model: dict[str, Any] | None = None, **workload: Any) -> dict[str, Any]:
    data = copy.deepcopy(SPEC)
    data["model"].update(model or {})
    for k, v in workload.items():
        if k in ("turns", "tool_latency_s"):
            data["workload"]["agent"][k] = v
        else:
            data["workload"][k] = v
    return data


def _gen_s(data: dict[str, Any]) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ToolSlotWarning)
        return float(runspec.run(runspec.from_dict(data)).summary()["timing_s/gen"])


def test_episodes_per_replica_reaches_run_compute_and_overlaps_tool_calls() -> None:
    one = _gen_s(_spec(prompts_per_step=1))  # one episode: prefill, decode, tool, prefill, decode
    turns = _gen_s(_spec(prompts_per_step=1, tool_latency_s=0.0))  # its two turns without the tool
    held = _gen_s(_spec())  # the default: one slot, so the second episode waits for the first
    raised = _gen_s(_spec({"episodes_per_replica": 2}))
    assert held == pytest.approx(2 * one, rel=0.01)
    # with 2 slots the second episode's first turn runs during the first one's tool call: the run
    # is one episode plus one turn of the other (the turns cost about the same)
    assert raised == pytest.approx(one + turns / 2, rel=0.01)
    assert raised < 0.6 * held


def test_cluster_slots_per_replica_is_run_compute_s() -> None:
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=8192, max_num_seqs=1)
    work = TokenWorkload(
        response=LogNormalLengths(1000, 0.0),
        prompt=500,
        max_response_tokens=2048,
        agent=AgentTurns(turns=2, tool_latency_s=TOOL_S, tool_latency_sigma=0.0, observation_tokens=200),
    )
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=2, steps=1, max_staleness=0))
    a = run_compute(sc, Cluster(engine=eng, n_gpus=2, trainer_gpus=1, slots_per_replica=2), work, seed=0)
    b = run_compute(sc, Cluster(engine=eng, n_gpus=2, trainer_gpus=1), work, seed=0, slots_per_replica=2)
    assert a.result.scenario.pipeline.n_slots == b.result.scenario.pipeline.n_slots == 2
    assert a.summary()["timing_s/gen"] == b.summary()["timing_s/gen"]


@pytest.mark.parametrize("bad", [0, -3, 2.5, "many", True, 2**24 + 1])
def test_bad_episodes_per_replica_names_the_key(bad: object) -> None:
    with pytest.raises(PlanError, match=r"model\.episodes_per_replica") as e:
        runspec.from_dict(_spec({"episodes_per_replica": bad}))
    assert e.value.field == "model.episodes_per_replica"


@pytest.mark.parametrize("per", [2**23, 200_000])  # past the slots a run holds; past its task pool
def test_too_many_episode_slots_name_the_key(per: int) -> None:
    data = _spec({"episodes_per_replica": per})
    data["cluster"]["n_gpus"] = 64  # 63 replicas
    with pytest.raises(PlanError, match=r"model\.episodes_per_replica") as e:
        runspec.from_dict(data)
    assert e.value.field == "model.episodes_per_replica"


@pytest.mark.parametrize("bad", [0, 1.5, "2", True])
def test_cluster_refuses_a_bad_slots_per_replica(bad: object) -> None:
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=8192)
    with pytest.raises(ValueError, match="slots_per_replica") as e:
        Cluster(engine=eng, n_gpus=2, trainer_gpus=1, slots_per_replica=bad)  # type: ignore[arg-type]
    assert getattr(e.value, "field", None) == "slots_per_replica"


def test_the_warning_fires_when_tool_calls_hold_the_slots() -> None:
    rs = runspec.from_dict(_spec())
    with pytest.warns(ToolSlotWarning, match=r"model\.episodes_per_replica") as caught:
        run = runspec.run(rs)
    assert len([w for w in caught if issubclass(w.category, ToolSlotWarning)]) == 1
    note = tool_slot_note(run)
    assert note is not None and "tool call" in note and "max_num_seqs" in note


def test_no_warning_without_tool_calls() -> None:
    single = _spec(turns=1)  # one turn: no tool call
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = runspec.run(runspec.from_dict(single))
    assert run.summary()["tool_calls"] == 0
    assert not [w for w in caught if issubclass(w.category, ToolSlotWarning)]
    assert tool_slot_note(run) is None


def test_reserve_refuses_keep_at_construction() -> None:
    kw: dict[str, Any] = dict(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=8192)
    with pytest.raises(ValueError, match="kv_policy") as e:
        EngineConfig(**kw, kv_policy="reserve", tool_kv="keep")
    assert getattr(e.value, "field", None) == "tool_kv"
    assert not EngineConfig(**kw, kv_policy="reserve").keeps_tool_kv  # the default: drop there
    assert not EngineConfig(**kw, kv_policy="reserve", tool_kv="drop").keeps_tool_kv
    assert EngineConfig(**kw).keeps_tool_kv and EngineConfig(**kw, tool_kv="keep").keeps_tool_kv
    assert not EngineConfig(**kw, tool_kv="drop").keeps_tool_kv


def test_run_spec_refuses_reserve_with_keep(tmp_path: Path) -> None:
    import tomli_w

    path = tmp_path / "agent.toml"
    path.write_text(tomli_w.dumps(_spec()))
    sets = ["model.kv_policy=reserve", "model.tool_kv=keep"]
    with pytest.raises(PlanError, match=r"model\.kv_policy") as e:
        runspec.load(path, sets)
    assert e.value.field == "model.tool_kv"
    # reserve alone runs, its tool calls' KV dropped (recomputed on return), as keep's is not
    drop = runspec.run(runspec.load(path, ["model.kv_policy=reserve", "model.tool_kv=drop"]))
    reserve = runspec.run(runspec.load(path, ["model.kv_policy=reserve"]))
    keep = runspec.run(runspec.load(path, []))
    assert reserve.summary()["recompute_tokens"] == drop.summary()["recompute_tokens"] > 0
    assert keep.summary()["recompute_tokens"] == 0


def test_a_prompt_that_fills_the_context_names_prompt_tokens() -> None:
    data = _spec({"max_model_len": 400})  # the 500-token prompt alone is over
    with pytest.raises(PlanError) as e:
        runspec.from_dict(data)
    text = str(e.value)
    assert e.value.field == "workload.prompt_tokens" and "workload.prompt_tokens" in text
    assert "agent.turns" not in text and "observation" not in text


def test_one_turn_is_said_in_the_singular() -> None:
    data = _spec({"max_model_len": 2000}, turns=1)  # 500 + 2,048 > 2,000
    with pytest.raises(PlanError) as e:
        runspec.from_dict(data)
    text = str(e.value)
    assert "1 turn x" in text and "1 turns" not in text and "0 observations" not in text
    assert e.value.field == "workload.max_response_tokens"
    two = _spec({"max_model_len": 4000}, turns=2)  # 500 + 2 x 2,048 + 200 > 4,000
    with pytest.raises(PlanError, match=r"2 turns x .* 1 observation x 200 "):
        runspec.from_dict(two)


def test_no_warning_once_every_episode_has_a_slot() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = runspec.run(runspec.from_dict(_spec({"episodes_per_replica": 2})))
    assert run.summary()["tool_calls"] > 0
    assert not [w for w in caught if issubclass(w.category, ToolSlotWarning)]


def test_pipesim_run_shows_the_warning_as_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pipesim run`` prints a pipesim warning as ``pipesim: warning: ...`` (it printed Python's
    ``runspec.py:359: ToolSlotWarning:`` form with the source line under it)."""
    import tomli_w

    from pipesim.io.cli import main

    path = tmp_path / "agent.toml"
    path.write_bytes(tomli_w.dumps(SPEC).encode())
    assert main(["run", str(path)]) == 0
    err = capsys.readouterr().err
    assert "pipesim: warning: episodes waiting on tool calls" in err
    assert "ToolSlotWarning" not in err and "runspec.py" not in err
