"""A run that cannot finish stops with a named :class:`PipelineError`, never a hang or a SimPy
traceback; and what the configs accept around their refusals. The refusals themselves (type and
``err.field`` per bad value) are the rows of ``tests/test_refusals_*.py``; ``docs/testing.md`` maps
the tests that moved there."""

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

import pipesim
from pipesim import PipelineConfig, PipelineError, Scenario, TraceDurations, run, simulate_pipeline
from pipesim.core.validate import FieldError
from pipesim.workload.durations import ExponentialDurations, LogNormalDurations


def test_exhausted_pool_says_how_many_were_needed() -> None:
    # 70 durations cover the 64 trained (8 x 8), not the count throttle's launches ahead: the run
    # stops part-way, saying so and what covers it (fewer than 64: refused before the run)
    with pytest.raises(PipelineError, match=r"launched all 70 tasks.*pass more durations; 88") as info:
        simulate_pipeline([1.0] * 70, 8, 8, 1.0, 1.0, max_staleness=1, steps=8)
    assert "simpy" not in str(info.value).lower()
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_exhausted_pool_with_scenario_model() -> None:
    # 22 covers the 20 trained (below them: refused naming pool_size, tests/test_pool_checks.py)
    sc = Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=5, max_staleness=1), pool_size=22)
    with pytest.raises(
        PipelineError, match="durations pool exhausted.*pool_size is set to 22: set it higher"
    ):
        run(sc)


def test_a_log_normal_duration_below_the_overflow_bound_draws() -> None:
    """(Its refusal above the bound: tests/test_refusals_core.py, durations/lognormal-tail.)"""
    assert LogNormalDurations(median_s=68.0, sigma=0.9).sample(4, np.random.default_rng(0)).shape == (4,)


def test_csv_trace(tmp_path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("episode,seconds\n0,3.5\n1,7\n")
    assert TraceDurations.from_csv(path, "seconds").values == (3.5, 7.0)
    # (a missing column and a row that is not a number: tests/test_refusals_files.py)


def test_a_trace_repeats_only_when_asked() -> None:
    """(Drawing past its end without ``cycle``: tests/test_refusals_core.py, durations/trace-too-short.)"""
    assert TraceDurations.from_values([1.0, 2.0], cycle=True).sample(
        5, np.random.default_rng(0)
    ).tolist() == [
        1.0,
        2.0,
        1.0,
        2.0,
        1.0,
    ]


def test_exponential_closed_form() -> None:
    """Limit case: E[max of B exponentials] = m * H_B (checked on a large pool)."""
    d = ExponentialDurations(mean_s=10.0).sample(64 * 4000, np.random.default_rng(3))
    h = sum(1 / k for k in range(1, 65))
    assert math.isclose(float(d.reshape(-1, 64).max(-1).mean()), 10.0 * h, rel_tol=0.02)


_CYCLES_CHILD = """
import gc, weakref
from pipesim import simulate_pipeline
from pipesim.core.collector import pause_collector_during_runs

class Node:
    me = None

assert gc.isenabled()
gc.collect()
alive = []
with pause_collector_during_runs():  # as the pipesim command runs
    for _ in range(60):
        node = Node()
        node.me = node  # a cycle: reference counting alone never frees it
        alive.append(weakref.ref(node))
        del node
        simulate_pipeline([1.0] * 64, 4, 4, 1.0, 1.0, steps=4)
print(sum(ref() is not None for ref in alive))
"""


def test_runs_back_to_back_leave_the_collector_collecting() -> None:
    """Cycles (the program's own, and each finished run's) are freed by the automatic collector
    while runs follow each other in one process: pausing it inside a run must leave its
    generations' counts moving on afterwards (a gc.freeze() + gc.unfreeze() at the end of the
    pause zeroed them, and 199 of 200 such cycles stayed alive, the runs' own too)."""
    import gc
    import subprocess
    import sys

    from pipesim.core.collector import collector_paused

    class Node:
        me: object = None

    # In a fresh interpreter: whether the oldest generation is collected within 60 runs depends on
    # the heap's size (a full collection waits for a quarter of the long-lived objects to be new),
    # and a test worker that has loaded torch and built models holds enough to keep it waiting.
    child = subprocess.run([sys.executable, "-c", _CYCLES_CHILD], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    left = int(child.stdout)
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
    with pytest.raises(PipelineError):  # stops inside the run (70 >= the 64 trained)
        simulate_pipeline([1.0] * 70, 8, 8, 1.0, 1.0, max_staleness=1, steps=8)
    assert gc.isenabled()


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
        ("keep-discarded", "as discarded without taking it out of the buffer"),  # it looped forever
        ("empty", "must return a non-empty list as its batch"),
        ("twice", "twice in its batch"),
        ("leave-in-buffer", "without taking (it|them) out of the buffer"),
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
        if self.how != "no-begin":
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
        ("twice", "_Sync.sync called end_sync with no sync begun"),  # it ended the run a step early
        ("no-begin", "_Sync.sync called end_sync with no sync begun"),  # the sync log took t=0
        ("requeue", "requeue: task must be an int in [0, 210)"),  # an IndexError from numpy
        ("pause-replica", "pause_replica: replica must be an int in [0, 1)"),
        ("drop-twice", "is aborted already; it ends once"),
    ],
)
def test_a_sync_that_asks_for_an_impossible_time_or_misuses_the_port_is_named(how: str, needle: str) -> None:
    cfg = PipelineConfig(n_slots=4, batch_size=2, steps=3, max_staleness=2)  # episodes run at a sync
    with pytest.raises(PipelineError, match=re.escape(needle)):
        run(Scenario(pipeline=cfg, weight_update=_Sync(how)), [1.0, 1.0, 500.0] * 70)  # type: ignore[arg-type]


FLOAT_FIELDS: dict[str, Callable[[object], object]] = {
    "train_time_s": lambda x: PipelineConfig(train_time_s=x),
    "decode_rate_tok_s": lambda x: pipesim.AgentDurations(decode_rate_tok_s=x),
    "median_s": lambda x: LogNormalDurations(median_s=x),
    "median_tokens": lambda x: pipesim.compute.LogNormalLengths(x),
    "tool_latency_s": lambda x: pipesim.compute.AgentTurns(tool_latency_s=x),
}


@pytest.mark.parametrize("field", FLOAT_FIELDS)
@pytest.mark.parametrize("value", [np.float32(2.0), fractions.Fraction(3, 2), decimal.Decimal("2.5")])
def test_a_real_that_is_not_a_python_number_is_refused_and_its_float_taken(field: str, value: object) -> None:
    """A float field takes an int or a float (np.float64 is one); other reals are refused naming
    the field (tests/test_refusals_core.py and test_refusals_compute.py), their float taken."""
    with pytest.raises(FieldError) as info:
        FLOAT_FIELDS[field](value)
    assert info.value.field == field and field in str(info.value)
    FLOAT_FIELDS[field](float(value))  # type: ignore[arg-type]


INT_FIELDS: dict[str, Callable[[object], object]] = {
    "prompt": lambda x: pipesim.compute.TokenWorkload(prompt=x),
    "max_response_tokens": lambda x: pipesim.compute.TokenWorkload(max_response_tokens=x),
    "turns": lambda x: pipesim.compute.AgentTurns(turns=x),
    "observation_tokens": lambda x: pipesim.compute.AgentTurns(observation_tokens=x),
    "tokens[1]": lambda x: pipesim.compute.EmpiricalLengths((5, x)),  # the item, by its index
}


@pytest.mark.parametrize("field", INT_FIELDS)
def test_a_numpy_integer_token_count_is_refused_and_its_int_taken(field: str) -> None:
    """``prompt=np.int64(100)`` was "must be a length model instance": every int field of the
    workload refuses it naming the field (tests/test_refusals_compute.py) and takes the int."""
    with pytest.raises(FieldError) as info:
        INT_FIELDS[field](np.int64(100))
    assert info.value.field == field and field in str(info.value)
    INT_FIELDS[field](100)


def test_a_numpy_double_is_a_float() -> None:
    """(A bool for a float field, once taken as 1.0 s: tests/test_refusals_core.py, exponential-bool.)"""
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


@pytest.mark.parametrize(("train_time_s", "warns"), [(60.0, False), (1e9, False), (1e17, True)])
def test_a_run_whose_clock_lost_precision_says_so(train_time_s: float, warns: bool) -> None:
    """At train_time_s = 1e17 with 10 s episodes the clock ends near 3e17 s, where a float steps by
    tens of seconds: the events' gen intervals averaged 7.8 s for 10.3 s drawn, silently. The run
    now warns; at 1e9 s (31 years a step) the clock still resolves microseconds, and it does not."""
    import warnings

    cfg = PipelineConfig(
        n_slots=8, batch_size=8, train_time_s=train_time_s, sync_time_s=1, max_staleness=1, steps=3
    )
    sc = Scenario(pipeline=cfg, durations=LogNormalDurations(median_s=10, sigma=0.5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(sc)
    lost = [w for w in caught if "lost precision" in str(w.message)]
    assert bool(lost) == warns and all(w.category is RuntimeWarning for w in lost)
