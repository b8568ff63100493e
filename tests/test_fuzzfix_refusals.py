"""Bad input a fuzzing walkthrough found accepted, or refused only from inside torch, numpy or the
run: each row is refused, at construction or load, by a FieldError naming the field (and the file,
where one was read). Each row failed before the fix (accepted, a bare TypeError, OverflowError or
ZeroDivisionError, or a refusal mid-run naming another field)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pipesim
from pipesim.calibrate import LogError, read_log
from pipesim.compute.catalog import MODELS
from pipesim.compute.cost import EngineConfig
from pipesim.compute.gpus import GPUS
from pipesim.compute.profiles import profile
from pipesim.compute.roofline import kernel_time_s
from pipesim.compute.sync import SyncModel
from pipesim.compute.trainer import TrainerConfig
from pipesim.core.validate import FieldError, check_number
from pipesim.io.scenario_files import ScenarioFileError, load_scenario, save_scenario
from pipesim.io.trace import events_to_trace
from pipesim.policies.groups import WholeGroups
from pipesim.policies.replicas import GroupAffinity, Replicas
from pipesim.policies.roll import RollReplayBuffer
from pipesim.policies.systems import RollGroupExpiry
from pipesim.workload.durations import AgentDurations, LogNormalDurations, TraceDurations

H100, QWEN = GPUS["h100-sxm"], MODELS["qwen3-0.6b"]
TINY = 5e-324  # the smallest float: halved, it is 0


def _gpu(**kw: float) -> Any:
    return dataclasses.replace(H100, **kw)


def _engine(**kw: float) -> EngineConfig:
    return EngineConfig(model=QWEN, gpu=_gpu(**kw), max_model_len=4096)


def _groups(batching: Any, batch_size: int = 16) -> pipesim.Scenario:
    return pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=batch_size), batching=batching)


def _trainer(**kw: Any) -> TrainerConfig:
    return TrainerConfig(**{"model": QWEN, "gpu": H100, "n_gpus": 8, **kw})


ROWS: list[tuple[str, Callable[[], Any], str]] = [
    # 1. an int no float holds: refused by the one number check (it was an OverflowError)
    ("check_number-10**400", lambda: check_number("x", 10**400, 0), "x"),
    ("agent-decode_rate-10**400", lambda: AgentDurations(decode_rate_tok_s=10**400), "decode_rate_tok_s"),
    ("agent-tool_median-10**400", lambda: AgentDurations(tool_median_s=10**400), "tool_median_s"),
    ("agent-tokens-10**400", lambda: AgentDurations(tokens_per_turn=(1, 10**400)), "tokens_per_turn[1]"),
    # 2. a batch of groups that do not divide it: refused when the scenario is built
    ("roll-replay-16-by-3", lambda: _groups(RollReplayBuffer(1, 3)), "batching.samples_per_group"),
    ("roll-expiry-16-by-3", lambda: _groups(RollGroupExpiry(1, 3)), "batching.samples_per_group"),
    ("whole-groups-16-by-3", lambda: _groups(WholeGroups(3)), "batching.samples_per_group"),
    (
        "with_-batch_size-17",
        lambda: _groups(WholeGroups(4)).with_(batch_size=17),
        "batching.samples_per_group",
    ),
    # 3. LogNormalDurations.sigma checked as median_s is
    ("lognormal-sigma-str", lambda: LogNormalDurations(60, "0.8"), "sigma"),  # type: ignore[arg-type]
    ("lognormal-sigma-none", lambda: LogNormalDurations(60, None), "sigma"),  # type: ignore[arg-type]
    ("lognormal-sigma-fraction", lambda: LogNormalDurations(60, Fraction(4, 5)), "sigma"),  # type: ignore[arg-type]
    ("lognormal-sigma-bool", lambda: LogNormalDurations(60, True), "sigma"),
    ("trace-cycle-str", lambda: TraceDurations((1.0,), cycle="no"), "cycle"),  # type: ignore[arg-type]
    # 4. numpy values have a .choose: not a routing rule
    ("routing-np-int64", lambda: Replicas(2, routing=np.int64(3)), "routing"),
    ("routing-np-array", lambda: Replicas(2, routing=np.zeros(2)), "routing"),
    ("fallback-np-float", lambda: GroupAffinity(4, fallback=np.float64(1.0)), "fallback"),
    # 5. rates so low a time is no longer a number
    ("trainer-mfu-1e-320", lambda: _trainer(mfu=1e-320), "mfu"),
    ("trainer-mfu-1e-300", lambda: _trainer(mfu=1e-300), "mfu"),
    (
        "trainer-profile-efficiency",
        lambda: _trainer(profile=dataclasses.replace(profile("fsdp2-dense"), fwd_efficiency=1e-300)),
        "profile.fwd_efficiency",
    ),
    ("trainer-gpu-flops", lambda: _trainer(gpu=_gpu(bf16_flops_per_s=TINY)), "gpu.bf16_flops_per_s"),
    (
        "trainer-gpu-nvlink",
        lambda: _trainer(gpu=_gpu(nvlink_bandwidth_bytes_per_s=TINY)),
        "gpu.nvlink_bandwidth_bytes_per_s",
    ),
    ("kernel-flops", lambda: kernel_time_s(_gpu(bf16_flops_per_s=TINY), 1e9, 1e6), "gpu.bf16_flops_per_s"),
    (
        "kernel-hbm",
        lambda: kernel_time_s(_gpu(hbm_bandwidth_bytes_per_s=TINY), 1e9, 1e6),
        "gpu.hbm_bandwidth_bytes_per_s",
    ),
    *[
        (
            f"sync-{name}",
            lambda name=name, n=n: SyncModel().sync_time_s(
                _engine(**{name: TINY}), profile("fsdp2-dense"), 8, False, n
            ),
            f"gpu.{name}",
        )
        for name, n in (
            ("hbm_bandwidth_bytes_per_s", 16),
            ("nvlink_bandwidth_bytes_per_s", 16),
            ("network_bandwidth_bytes_per_s", 16),
        )
    ],
]


@pytest.mark.parametrize(("call", "field"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_input_is_refused_naming_the_field(call: Callable[[], Any], field: str) -> None:
    with pytest.raises(FieldError) as info:
        call()
    assert info.value.field == field, (info.value.field, str(info.value))
    assert field.rsplit(".", 1)[-1].split("[")[0] in str(info.value)


def test_the_same_scenarios_with_whole_groups_build_and_run() -> None:
    for batching in (RollReplayBuffer(1, 3), RollGroupExpiry(1, 3), WholeGroups(3)):
        sc = _groups(batching, batch_size=18)
        assert len(pipesim.run(sc.with_(steps=2, n_slots=18)).train_log) == 2


def test_a_scenario_file_of_broken_groups_is_refused_naming_the_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "roll.toml"
    path.write_text(
        'schema_version = 1\n[pipeline]\nbatch_size = 16\n[batching]\ntype = "RollReplayBuffer"\n'
        "ratio = 1\nsamples_per_group = 3\n"
    )
    with pytest.raises(ScenarioFileError) as info:
        load_scenario(path)
    assert info.value.field == "batching.samples_per_group" and info.value.file == str(path)


def test_a_huge_int_in_a_file_draws_as_its_float(tmp_path: Path) -> None:
    """``tool_median_s = 100000000000000000000`` (past 2**63) ran into torch's OverflowError; it
    now draws the numbers its float does, on the chapter's generator and numpy's."""
    path = save_scenario(
        pipesim.Scenario(durations=AgentDurations(tool_median_s=10**20)), tmp_path / "a.toml"
    )
    sc = load_scenario(path)
    assert sc.durations.tool_median_s == 10**20  # kept as written
    as_float = dataclasses.replace(sc, durations=AgentDurations(tool_median_s=1e20))
    for draws in ("chapter", "numpy"):
        a = dataclasses.replace(sc, durations=dataclasses.replace(sc.durations, draws=draws))
        b = dataclasses.replace(as_float, durations=dataclasses.replace(as_float.durations, draws=draws))
        assert np.array_equal(pipesim.draw_pool(a.with_(steps=2)), pipesim.draw_pool(b.with_(steps=2)))
    big = AgentDurations(decode_rate_tok_s=10**30, tokens_per_turn=(10**19, 10**20))
    assert len(pipesim.run(pipesim.Scenario(durations=big).with_(steps=2)).train_log) == 2


def test_a_routing_rule_still_routes() -> None:
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(8, 8, steps=2), replicas=Replicas(2))
    assert len(pipesim.run(sc).train_log) == 2


def _events() -> pd.DataFrame:
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(8, 4, steps=2))
    return pipesim.run(sc).events.astype({"slot": object, "complete": object})


def _with(col: str, value: Any) -> Callable[[], Any]:
    def call() -> Any:
        ev = _events()
        ev[col] = ev[col].astype(object)
        ev.loc[2, col] = value
        return events_to_trace(ev)

    return call


TRACE_ROWS = [
    ("version-negative", "version", -3, "version[2]"),
    ("episode_id-below-minus-one", "episode_id", -5, "episode_id[2]"),
    ("slot-text", "slot", "abc", "slot[2]"),
    ("slot-10**30", "slot", 10**30, "slot[2]"),
    ("slot-2e9", "slot", 2_000_000_000, "slot[2]"),
    ("replica-negative", "replica", -3, "replica[2]"),
    ("complete-maybe", "complete", "maybe", "complete[2]"),
    ("complete-one", "complete", 1, "complete[2]"),
    ("end_s-1e300", "end_s", 1e300, "end_s[2]"),
]


@pytest.mark.parametrize(
    ("col", "value", "field"), [r[1:] for r in TRACE_ROWS], ids=[r[0] for r in TRACE_ROWS]
)
def test_a_bad_events_cell_is_refused_naming_column_and_row(col: str, value: Any, field: str) -> None:
    with pytest.raises(FieldError) as info:
        _with(col, value)()
    assert info.value.field == field, (info.value.field, str(info.value))


def test_a_run_s_own_events_still_trace() -> None:
    assert events_to_trace(_events())["traceEvents"]


def test_a_step_cell_of_1e308_is_named_by_its_line_not_309_digits(tmp_path: Path) -> None:
    log = Path(__file__).resolve().parent.parent / "examples" / "verl_sample_log.csv"
    lines = log.read_text().splitlines()
    cells = lines[6].split(",")
    cells[lines[0].split(",").index("step")] = "1e308"
    lines[6] = ",".join(cells)
    bad = tmp_path / "log.csv"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(LogError) as info:
        read_log(bad)
    assert info.value.field == "step"
    assert "0" * 30 not in str(info.value) and len(str(info.value)) < 300
