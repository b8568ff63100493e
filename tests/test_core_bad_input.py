"""Bad input gives a clear error naming the offending field, never a hang or a SimPy traceback."""

from __future__ import annotations

import decimal
import fractions
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

import pipesim
from pipesim import PipelineConfig, PipelineError, Scenario, TraceDurations, run, simulate_pipeline
from pipesim.workload.durations import AgentDurations, ExponentialDurations, LogNormalDurations


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(n_slots=0), "n_slots"),
        (dict(batch_size=0), "batch_size"),
        (dict(train_time_s=-1.0), "train_time_s"),
        (dict(train_time_s=math.nan), "train_time_s"),
        (dict(sync_time_s=math.inf), "sync_time_s"),
        (dict(sync_time_s=-0.5), "sync_time_s"),
        (dict(max_staleness=-1), "max_staleness"),
        (dict(steps=0), "steps"),
        (dict(n_slots=2.5), "n_slots"),
    ],
)
def test_config_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        PipelineConfig(**kwargs)


@pytest.mark.parametrize(
    "args, field",
    [
        ((0, 4, 1.0, 1.0), "n_slots"),
        ((4, 0, 1.0, 1.0), "batch_size"),
        ((4, 4, math.nan, 1.0), "train_time"),
        ((4, 4, 1.0, -2.0), "sync_time"),
    ],
)
def test_facade_names_the_field(args: tuple, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        simulate_pipeline([1.0] * 100, *args)
    with pytest.raises(ValueError, match="max_staleness"):
        simulate_pipeline([1.0] * 100, 4, 4, 1.0, 1.0, max_staleness=-1)
    with pytest.raises(ValueError, match="steps"):
        simulate_pipeline([1.0] * 100, 4, 4, 1.0, 1.0, steps=0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_bad_durations_are_named_with_their_index(bad: float) -> None:
    pool = [1.0] * 50
    pool[7] = bad
    with pytest.raises(ValueError, match=r"durations\[7\]"):
        simulate_pipeline(pool, 4, 4, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"values\[7\]"):
        TraceDurations.from_values(pool)


@pytest.mark.parametrize(
    ("pool", "says"),
    [
        (np.array([1 + 2j] * 20), "dtype complex128"),
        (np.array(["2024-01-01"] * 20, dtype="datetime64[D]"), "dtype datetime64"),
        (np.array([3] * 20, dtype="timedelta64[s]"), "dtype timedelta64"),
        ([True] * 20, "dtype bool"),
        (["1.0"] * 20, "dtype <U3"),
        (np.ma.array([1.0] * 20, mask=[0] * 19 + [1]), "masked"),
    ],
    ids=["complex", "datetime", "timedelta", "bool", "text", "masked"],
)
def test_durations_that_are_not_seconds_are_refused(pool: Any, says: str) -> None:
    """Complex values lost their imaginary part, dates and timedeltas became integers of their
    unit, and a masked array ran on its hidden values: each is a named error instead."""
    with pytest.raises(ValueError, match=says):
        simulate_pipeline(pool, 4, 4, 1.0, 1.0)
    with pytest.raises(ValueError, match=says):
        run(Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=2)), pool)


def test_exhausted_pool_says_how_many_were_needed() -> None:
    with pytest.raises(PipelineError, match=r"needed more than 10 episodes.*at least 80") as info:
        simulate_pipeline([1.0] * 10, 8, 8, 1.0, 1.0, max_staleness=0, steps=8)
    assert "simpy" not in str(info.value).lower()
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_exhausted_pool_with_scenario_model() -> None:
    sc = Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=5), pool_size=6)
    with pytest.raises(PipelineError, match="durations pool exhausted"):
        run(sc)


def test_scenario_rejects_unknown_fields_listing_valid_ones() -> None:
    sc = Scenario()
    with pytest.raises(ValueError, match=r"unknown scenario field.*'n_slotz'.*valid fields.*n_slots"):
        sc.with_(n_slotz=3)
    assert sc.with_(n_slots=3).pipeline.n_slots == 3
    with pytest.raises(ValueError, match="pool_size"):
        Scenario(pool_size=0)


def test_duration_models_validate() -> None:
    with pytest.raises(ValueError, match="mean_s"):
        ExponentialDurations(mean_s=0)
    with pytest.raises(ValueError, match="decode_rate_tok_s"):
        AgentDurations(decode_rate_tok_s=-1)
    with pytest.raises(ValueError, match="n must be"):
        ExponentialDurations().sample(-1, torch.Generator())
    with pytest.raises(ValueError, match="cycle"):
        TraceDurations.from_values([1.0, 2.0]).sample(3, torch.Generator())
    assert TraceDurations.from_values([1.0, 2.0], cycle=True).sample(5, torch.Generator()).tolist() == [
        1.0,
        2.0,
        1.0,
        2.0,
        1.0,
    ]


@pytest.mark.parametrize(
    ("kw", "named"),
    [
        (dict(tokens_per_turn=("a", "b")), "tokens_per_turn"),
        (dict(tokens_per_turn=(1, 2, 3)), "tokens_per_turn"),
        (dict(mean_turns="8"), "mean_turns"),
        (dict(max_turns=True), "max_turns"),
        (dict(max_turns=10**9), "max_turns must be at most"),
        (dict(tool_sigma=500.0), "tool_median_s .* with tool_sigma .*overflow"),
        (dict(decode_rate_tok_s=1e-310), "decode_rate_tok_s .*overflows"),
    ],
)
def test_agent_durations_name_a_bad_field(kw: dict, named: str) -> None:
    # each of these was a TypeError without the field, an unpacking error, accepted (a bool for
    # an int), or a NaN duration found only when a run drew the pool
    with pytest.raises(ValueError, match=named):
        AgentDurations(**kw)


def test_a_log_normal_duration_whose_tail_overflows_is_named() -> None:
    from pipesim import LogNormalDurations

    with pytest.raises(ValueError, match=r"median_s \(1e\+308\) with sigma \(5\).*overflow"):
        LogNormalDurations(median_s=1e308, sigma=5)
    assert LogNormalDurations(median_s=68.0, sigma=0.9).sample(4, np.random.default_rng(0)).shape == (4,)


def test_csv_trace(tmp_path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("episode,seconds\n0,3.5\n1,7\n")
    assert TraceDurations.from_csv(path, "seconds").values == (3.5, 7.0)
    with pytest.raises(ValueError, match="column 'secs'"):
        TraceDurations.from_csv(path, "secs")
    path.write_text("seconds\n1\noops\n")
    with pytest.raises(ValueError, match="row 2"):
        TraceDurations.from_csv(path, "seconds")


def test_exponential_closed_form() -> None:
    """Limit case: E[max of B exponentials] = m * H_B (checked on a large pool)."""
    d = ExponentialDurations(mean_s=10.0).sample(64 * 4000, np.random.default_rng(3))
    h = sum(1 / k for k in range(1, 65))
    assert math.isclose(float(d.reshape(-1, 64).max(-1).mean()), 10.0 * h, rel_tol=0.02)


def test_runs_back_to_back_leave_the_collector_collecting() -> None:
    """Cycles (the program's own, and each finished run's) are freed by the automatic collector
    while runs follow each other in one process: pausing it inside a run must leave its
    generations' counts moving on afterwards (a gc.freeze() + gc.unfreeze() at the end of the
    pause zeroed them, and 199 of 200 such cycles stayed alive, the runs' own too)."""
    import gc
    import weakref

    from pipesim.core.collector import collector_paused

    class Node:
        me: object = None

    assert gc.isenabled()
    gc.collect()
    alive = []
    for _ in range(60):
        node = Node()
        node.me = node  # a cycle: reference counting alone never frees it
        alive.append(weakref.ref(node))
        del node
        simulate_pipeline([1.0] * 64, 4, 4, 1.0, 1.0, steps=4)
    left = sum(ref() is not None for ref in alive)
    assert left <= 30, f"{left} of 60 cycles survived 60 runs without an explicit collection"
    frozen_node = Node()
    gc.freeze()  # a program's own frozen objects stay frozen through a pause
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            simulate_pipeline([1.0] * 20, 4, 4, 1.0, 1.0, steps=2)
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()
    assert frozen_node.me is None


def test_run_restores_the_garbage_collector() -> None:
    import gc

    assert gc.isenabled()
    simulate_pipeline([1.0] * 100, 4, 4, 1.0, 1.0, steps=2)
    assert gc.isenabled()
    with pytest.raises(PipelineError):
        simulate_pipeline([1.0] * 10, 8, 8, 1.0, 1.0, steps=8)
    assert gc.isenabled()


@pytest.mark.parametrize(
    "kwargs, field, hint",
    [
        (dict(admission=pipesim.Drain()), "admission", "admits"),
        (dict(weight_update=pipesim.CountThrottle()), "weight_update", "sync"),
        (dict(batching=pipesim.PartialRollout()), "batching", "select"),
        (dict(durations=pipesim.OldestFinishedFirst()), "durations", "sample"),
        (dict(weight_update=pipesim.Drain), "weight_update", r"Drain\(\)"),
        (dict(admission=pipesim.CountThrottle), "admission", r"CountThrottle\(\)"),
        (dict(timeout=pipesim.Timeout), "timeout", "class Timeout"),
        (dict(replicas=pipesim.Replicas), "replicas", "class Replicas"),
        (dict(batching=None), "batching", "None"),
    ],
)
def test_a_policy_in_the_wrong_slot_or_a_class_names_the_field(kwargs: dict, field: str, hint: str) -> None:
    with pytest.raises(ValueError, match=field) as info:
        Scenario(**kwargs)
    assert re.search(hint, str(info.value)), str(info.value)


# -- times past the largest float, and policies that break their contract -------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("kw", "what"),
    [
        (dict(train_time_s=1e308), "train_time_s 1e+308"),
        (dict(sync_time_s=1e308), "the sync of PartialRollout"),
    ],
)
def test_a_clock_past_the_largest_float_stops_with_a_named_error(kw: dict, what: str) -> None:
    # these ran forever at t=inf (inf - inf is NaN, and a NaN due time is never reached)
    cfg = PipelineConfig(n_slots=4, batch_size=4, steps=3, **kw)
    with pytest.raises(PipelineError, match=rf"clock overflowed.*{re.escape(what)}"):
        run(Scenario(pipeline=cfg, weight_update=pipesim.PartialRollout()), [1.0] * 100)


class _Select:
    """A batch policy whose ``select`` does what ``how`` says."""

    def __init__(self, how: str) -> None:
        self.how = how

    def select(self, buffer: list, p: object) -> object:
        if len(buffer) < 2:
            return None, []
        if self.how == "keep-discarded":  # discards without taking the episode out of the buffer
            return None, buffer[:1]
        if self.how == "empty":
            return [], []
        if self.how == "twice":
            batch = [buffer[0], buffer[0]]
            del buffer[:2]
            return batch, []
        if self.how == "leave-in-buffer":  # the same episodes come back at the next step
            return buffer[:2], []
        if self.how == "none":
            return None
        raise AssertionError(self.how)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("how", "needle"),
    [
        ("keep-discarded", "which is not a buffered episode"),  # it looped forever in zero time
        ("empty", "must return a non-empty list as its batch"),
        ("twice", "is not a buffered episode"),
        ("leave-in-buffer", "is not a buffered episode"),
        ("none", r"must return \(batch or None, discarded\)"),
    ],
)
def test_a_batch_policy_that_breaks_its_contract_is_named(how: str, needle: str) -> None:
    cfg = PipelineConfig(n_slots=4, batch_size=2, steps=4)
    with pytest.raises(PipelineError, match=needle) as info:
        run(Scenario(pipeline=cfg, batching=_Select(how)), [1.0] * 200)  # type: ignore[arg-type]
    assert "_Select" in str(info.value)  # the policy is named


def test_with_applies_pipeline_fields_to_the_pipeline_given_with_them() -> None:
    sc = Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4))
    got = sc.with_(pipeline=PipelineConfig(n_slots=8, batch_size=8), max_staleness=2)
    assert (got.pipeline.n_slots, got.pipeline.batch_size, got.pipeline.max_staleness) == (8, 8, 2)


class _Sync:
    """A weight update whose sync does ``how``: asks the port for an impossible time, or misuses it."""

    def __init__(self, how: str) -> None:
        self.how = how

    def blocks_admission(self, p: object) -> bool:
        return False

    def sync(self, p: Any) -> Any:
        if self.how == "not-a-generator":
            return None
        return self._steps(p)

    def _steps(self, p: Any) -> Any:
        p.begin_sync(pause=True)
        if self.how == "stretch":
            p.stretch_running(lambda ep, g: (math.nan, 0.0))
        elif self.how in ("nan", "inf", "-1"):
            yield p.timeout(float(self.how))
        yield p.timeout(1.0)
        if self.how == "requeue":
            p.requeue([(10**6, 0)])
        if self.how == "pause-replica":
            p.pause_replica(7)
        if self.how == "drop-twice":
            p.drop(p.abort_running(), "discarded")  # the records would keep such an episode twice
        p.end_sync()
        if self.how == "twice":
            p.end_sync()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("how", "needle"),
    [
        ("nan", "timeout of nan s"),
        ("inf", "timeout of inf s"),
        ("-1", "timeout of -1.0 s"),
        ("stretch", "a stretch of weight update _Sync must be finite seconds >= 0, got nan"),
        ("not-a-generator", "_Sync.sync must be a generator"),
        ("twice", "moved the trainer's version from 0 to 2"),  # it ended the run a step early
        ("requeue", "requeue: task must be an int in [0, 210)"),  # an IndexError from numpy
        ("pause-replica", "pause_replica: replica must be an int in [0, 1)"),
        ("drop-twice", "is aborted already; it ends once"),
    ],
)
def test_a_sync_that_asks_for_an_impossible_time_or_misuses_the_port_is_named(how: str, needle: str) -> None:
    cfg = PipelineConfig(n_slots=4, batch_size=2, steps=3, max_staleness=2)  # episodes run at a sync
    with pytest.raises(PipelineError, match=re.escape(needle)):
        run(Scenario(pipeline=cfg, weight_update=_Sync(how)), [1.0, 1.0, 500.0] * 70)  # type: ignore[arg-type]


def test_classes_in_nested_policy_slots_and_numpy_integers_are_named() -> None:
    with pytest.raises(ValueError, match="inner must be a weight-update policy instance"):
        pipesim.SyncEveryK(2, pipesim.Drain)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="routing must be a routing rule instance"):
        pipesim.Replicas(2, pipesim.LeastLoaded)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"n_slots must be an integer >= 1 \(a Python int"):
        PipelineConfig(n_slots=np.int64(3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="durations must be given"):
        simulate_pipeline(None, 4, 4, 1.0, 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda x: PipelineConfig(train_time_s=x), "train_time_s"),
        (lambda x: pipesim.AgentDurations(decode_rate_tok_s=x), "decode_rate_tok_s"),
        (lambda x: LogNormalDurations(median_s=x), "median_s"),
        (lambda x: pipesim.compute.LogNormalLengths(x), "median_tokens"),
        (lambda x: pipesim.compute.AgentTurns(tool_latency_s=x), "tool_latency_s"),
    ],
)
@pytest.mark.parametrize("value", [np.float32(2.0), fractions.Fraction(3, 2), decimal.Decimal("2.5")])
def test_a_real_that_is_not_a_python_number_is_named_with_the_conversion(
    build: Callable[[object], object], field: str, value: object
) -> None:
    """A float field takes an int or a float (np.float64 is one); other reals are refused with the
    way to convert them, rather than "must be a finite number" of a finite number."""
    hint = rf"float\(x\) converts a {type(value).__name__}\)"
    with pytest.raises(ValueError, match=rf"^{field} must be a finite number.*{hint}"):
        build(value)
    build(float(value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda x: pipesim.compute.TokenWorkload(prompt=x), "prompt must be an integer >= 1"),
        (
            lambda x: pipesim.compute.TokenWorkload(max_response_tokens=x),
            "max_response_tokens must be an integer >= 1",
        ),
        (lambda x: pipesim.compute.AgentTurns(turns=x), "turns must be an integer >= 1"),
        (
            lambda x: pipesim.compute.AgentTurns(observation_tokens=x),
            "observation_tokens must be an integer >= 0",
        ),
        (lambda x: pipesim.compute.EmpiricalLengths((5, x)), r"tokens\[1\] must be an integer >= 1"),
    ],
)
def test_a_numpy_integer_token_count_is_named_with_the_conversion(
    build: Callable[[object], object], says: str
) -> None:
    """``prompt=np.int64(100)`` was "must be a length model instance"; ``turns`` and the trace's
    tokens named no conversion: every int field of the workload gives check_int's hint."""
    with pytest.raises(ValueError, match=rf"^{says} \(a Python int: int\(x\) converts a numpy integer\)"):
        build(np.int64(100))
    build(100)


def test_a_float_prompt_is_named_as_a_count() -> None:
    with pytest.raises(ValueError, match=r"^prompt must be an integer >= 1, got 100.0$"):
        pipesim.compute.TokenWorkload(prompt=100.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^prompt must be an integer >= 1, got True$"):
        pipesim.compute.TokenWorkload(prompt=True)


def test_bools_and_numpy_doubles_for_float_fields() -> None:
    with pytest.raises(ValueError, match=r"^mean_s must be a finite number > 0, got True$"):
        ExponentialDurations(mean_s=True)  # was taken as 1.0 s
    assert LogNormalDurations(median_s=np.float64(2.0)).median_s == 2.0


@pytest.mark.parametrize(
    "admission",
    [
        pipesim.StaleFraction(staleness_threshold=1e308),
        pipesim.OverSample(factor=1e308),
        pipesim.QueueAhead(batches_ahead=1e308),
    ],
)
def test_an_admission_bound_near_the_largest_float_means_no_bound(admission: Any) -> None:
    # they raised OverflowError (math.ceil of infinity) in the middle of the run
    cfg = PipelineConfig(n_slots=4, batch_size=4, steps=3, max_staleness=1)
    assert run(Scenario(pipeline=cfg, admission=admission)).summary()["episodes_trained"] == 12


@dataclass(frozen=True)
class Answers:
    """An admission rule that answers ``yes`` while fewer than 2B episodes have started."""

    yes: Any
    no: Any = False

    def admits(self, p: pipesim.PipelineView) -> Any:
        return self.yes if p.started < (p.version + 1) * p.batch_size else self.no


@pytest.mark.parametrize("answer", ["no", 1, None, [True]], ids=["str", "int", "none", "list"])
def test_an_admission_answer_that_is_not_a_bool_is_an_error(answer: Any) -> None:
    """``"no"`` was taken by its truth value (it admitted), ``None`` refused: now both are errors."""
    cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=1.0, sync_time_s=1.0, steps=3)
    with pytest.raises(PipelineError, match=r"Answers.admits must return a bool"):
        run(Scenario(pipeline=cfg, admission=Answers(answer)))
    with pytest.raises(PipelineError, match=r"Answers.admits must return a bool"):
        run(Scenario(pipeline=cfg, admission=Answers(True, no=answer)))


def test_a_numpy_bool_answer_counts_as_a_bool() -> None:
    cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=1.0, sync_time_s=1.0, steps=3)
    plain = run(Scenario(pipeline=cfg, admission=Answers(True)))
    numpy = run(Scenario(pipeline=cfg, admission=Answers(np.True_, no=np.False_)))
    assert numpy.summary() == plain.summary() and numpy.sim_time_s == plain.sim_time_s


@dataclass(frozen=True)
class NumpyBlocks(pipesim.PartialRollout):
    """PartialRollout whose ``blocks_admission`` answers numpy bools."""

    def blocks_admission(self, p: pipesim.PipelineView) -> Any:
        return np.bool_(p.syncing)


@dataclass(frozen=True)
class NumpyReady(pipesim.OldestFinishedFirst):
    """The chapter's trainer whose ``min_items`` hint answers a numpy integer."""

    def min_items(self, p: pipesim.PipelineView) -> Any:
        return np.int64(p.batch_size)


def test_numpy_bool_hints_count_as_bools() -> None:
    """A weight update's ``blocks_admission`` may answer numpy bools and a batch policy's
    ``min_items`` a numpy integer, as Python code on numpy numbers does: the compiled kernel
    refused them."""
    cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=1.0, sync_time_s=1.0, steps=3, max_staleness=1)
    plain = run(Scenario(pipeline=cfg))
    numpy = run(Scenario(pipeline=cfg, weight_update=NumpyBlocks(), batching=NumpyReady()))
    assert numpy.summary() == plain.summary() and numpy.sim_time_s == plain.sim_time_s


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"n_slots": 10**9}, "n_slots must be at most 16,777,216"),
        ({"batch_size": 10**9}, "batch_size must be at most 16,777,216"),
        ({"pool_size": 10**10}, "pool_size must be at most 268,435,456"),
        ({"steps": 10**12}, r"needs a pool of 4,000,000,000,008 tasks"),
    ],
    ids=["slots", "batch", "pool", "steps"],
)
def test_absurd_sizes_are_named_bounds(change: dict[str, int], says: str) -> None:
    """They were a MemoryError or torch's allocator error ("you tried to allocate 16 TB") at run."""
    with pytest.raises(ValueError, match=says):
        Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=2)).with_(**change)


def test_the_compute_engine_bounds_its_slots() -> None:
    from pipesim.compute import GPUS, MODELS
    from pipesim.compute.cluster import Cluster, run_compute
    from pipesim.compute.cost import EngineConfig
    from pipesim.compute.workload import TokenWorkload

    with pytest.raises(ValueError, match="max_num_seqs must be at most"):
        EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_num_seqs=10**9)
    cluster = Cluster(
        engine=EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"]), n_gpus=2, trainer_gpus=1
    )
    sc = Scenario(pipeline=PipelineConfig(batch_size=4, steps=2))
    with pytest.raises(ValueError, match="slots_per_replica must be at most"):
        run_compute(sc, cluster, TokenWorkload(prompt=16, max_response_tokens=64), slots_per_replica=10**9)


@pytest.mark.parametrize(
    "pool",
    [
        np.array([np.timedelta64(5000, "ms")] * 20, dtype=object),
        np.array([True] * 20, dtype=object),
        [True] + [5.0] * 19,
        np.array(["5"] * 20, dtype=object),
        np.array([np.datetime64(5, "s")] * 20, dtype=object),
    ],
    ids=["timedelta-objects", "bool-objects", "bool-in-list", "text-objects", "datetime-objects"],
)
def test_durations_that_are_not_seconds_are_refused_inside_objects_and_lists(pool: Any) -> None:
    """Object arrays and lists passed the dtype check: 5000 ms ran as 5000 s, True as 1 s."""
    with pytest.raises(ValueError, match=r"durations\[0\] = .*real numbers of seconds"):
        run(Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=2)), pool)
    with pytest.raises(ValueError, match="real numbers of seconds"):
        TraceDurations((True, 2.0), cycle=True)


def test_a_run_pauses_the_collector_only_for_a_caller_that_opted_in() -> None:
    """A library call leaves the process's collector alone; inside
    ``pause_collector_during_runs()`` each run pauses it while it runs, and restores it."""
    import gc
    from dataclasses import dataclass

    from pipesim.core.collector import pause_collector_during_runs

    seen: list[bool] = []

    @dataclass(frozen=True)
    class Watching:
        def admits(self, p: pipesim.PipelineView) -> bool:
            seen.append(gc.isenabled())
            return p.started < (p.version + 1) * p.batch_size

    cfg = pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=2)
    sc = pipesim.Scenario(pipeline=cfg, admission=Watching())
    pipesim.run(sc)
    assert seen and all(seen)  # not opted in: collecting throughout
    seen.clear()
    with pause_collector_during_runs():
        pipesim.run(sc)
        assert gc.isenabled()  # between runs
        with pause_collector_during_runs(False):
            pipesim.run(sc)
    assert gc.isenabled()
    n = len(seen) // 2
    assert seen[:n] == [False] * n and all(seen[n:])  # paused in the opted-in run only
