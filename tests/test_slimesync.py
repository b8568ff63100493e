"""slime syncs its weights only once the next batch is collected (``AfterNextBatch``).

THUDM/slime ``train_async.py``, ``train``: after training step i it waits for rollout i + 1
("sync generate before update weights") and then calls ``update_weights()``; batch i + 1 is trained
after that update. So, read from a run's own records:

* the update after step i begins no earlier than the moment the buffer first held B finished
  episodes after step i's batch was taken (nothing else takes from the buffer meanwhile);
* every episode trained at step s >= 1 ended no later than the start of the update before step s,
  so it finished under weights at least one version older than the trainer's: staleness by
  newest version >= 1 (step 0 trains the initial weights, staleness 0).

The engine's plain order (sync at once, take the next batch after it) breaks both on the slime
preset: episodes finishing after the update are trained with staleness 0.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import pipesim
from pipesim import CountThrottle, Drain, PartialRollout, PipelineConfig, PipelineError, Scenario
from pipesim.core.seams import EngineOptions
from pipesim.core.validate import FieldError
from pipesim.policies.base import WeightUpdate
from pipesim.policies.updates import AbortReprefill, AfterNextBatch, SyncEveryK
from pipesim.testing import check_invariants, check_promises
from pipesim.testing.strategies import policy_scenarios
from scenarios.systems import slime_fully_async
from tests.test_engine_paths import EAGER, SERIAL, TICK, same_traces, trace

INNERS: list[WeightUpdate] = [Drain(), AbortReprefill(), PartialRollout()]
PAUSING: list[WeightUpdate] = [Drain(), PartialRollout()]  # pauses_only: quiet completions stay on


def buffer_full_at(result: pipesim.RunResult, step: int) -> float:
    """When the buffer first held a batch after step ``step``'s batch was taken, from the records:
    the B-th end among episodes that ended and were not trained by then (none is dropped here)."""
    taken_s = result.train_log[step][1]
    table = result.episode_table
    trained = result.trained.set_index("episode_id")["step"]
    at_step = table["episode_id"].map(trained).fillna(np.inf).to_numpy()
    ended = table["end_s"].astype(float).to_numpy()
    left = np.sort(ended[(at_step > step) & ~np.isnan(ended)])
    b = result.scenario.pipeline.batch_size
    assert len(left) >= b, f"no batch collected after step {step}"
    return max(taken_s, float(left[b - 1]))


def check_slime_order(result: pipesim.RunResult) -> None:
    """The two relations of the module docstring, on every step that has a next one."""
    steps = result.scenario.pipeline.steps
    assert result.ledger_log and all(d == 0 for *_, d in result.ledger_log)  # nothing dropped
    for i in range(steps - 1):
        assert result.sync_log[i][0] >= buffer_full_at(result, i), f"update after step {i} began early"
    tr = result.trained
    ends = result.episode_table.set_index("episode_id")["end_s"].astype(float)
    later = tr[tr["step"] >= 1]
    sync_before = np.array([result.sync_log[s - 1][0] for s in later["step"]])
    assert (ends.loc[later["episode_id"]].to_numpy() <= sync_before).all()
    assert (later["staleness_newest"] >= 1).all()
    assert (tr.loc[tr["step"] == 0, "staleness_newest"] == 0).all()


@pytest.mark.parametrize(
    "sizes", [{}, {"n_slots": 32, "batch_size": 48}, {"n_slots": 8, "batch_size": 12, "steps": 6}]
)
@pytest.mark.parametrize("seed", [0, 3])
def test_slime_fully_async_syncs_after_the_next_batch(sizes: dict[str, int], seed: int) -> None:
    result = pipesim.run(slime_fully_async(seed=seed, **sizes))
    check_slime_order(result)
    steps = result.scenario.pipeline.steps
    assert result.summary()["staleness_newest_mean"] >= (steps - 1) / steps


def test_the_preset_uses_the_wrapper_around_abort_and_reprefill() -> None:
    wu = slime_fully_async().weight_update
    assert isinstance(wu, AfterNextBatch) and isinstance(wu.inner, AbortReprefill)


def test_the_preset_keeps_its_invariants_and_promises() -> None:
    sc = slime_fully_async(n_slots=8, batch_size=12, steps=6)
    check_invariants(pipesim.run(sc))
    check_promises(sc)


@pytest.mark.parametrize("inner", INNERS, ids=lambda w: type(w).__name__)
def test_the_wrapper_keeps_slime_s_order_around_each_inner(inner: WeightUpdate) -> None:
    """Under the count throttle at eta = 1 (a batch may be generated ahead) and FIFO batches."""
    cfg = PipelineConfig(n_slots=6, batch_size=5, train_time_s=4.0, sync_time_s=1.0, max_staleness=1, steps=6)
    sc = Scenario(pipeline=cfg, weight_update=AfterNextBatch(inner), seed=4)
    result = pipesim.run(sc)
    check_invariants(result)
    check_slime_order(result)


def test_the_last_update_does_not_wait_for_a_batch_never_trained() -> None:
    """slime launches no rollout after the last one: the run ends at the last update, at once."""
    result = pipesim.run(slime_fully_async(n_slots=8, batch_size=12, steps=4))
    last_train_end = result.train_log[-1][2]
    assert result.sync_log[-1][0] == last_train_end


def _stalls_named(exc: PipelineError) -> None:
    assert "stalled" in str(exc) and "AfterNextBatch" in str(exc) and "buffered_at_least" in str(exc)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(policy_scenarios(weight_updates=st.builds(AfterNextBatch, st.sampled_from(INNERS))))
def test_the_wrapper_keeps_invariants_and_promises(sc: Scenario) -> None:
    try:
        result = pipesim.run(sc)
    except PipelineError as exc:  # an admission that never lets a batch be generated ahead
        _stalls_named(exc)
        reject()
    check_invariants(result)
    check_promises(sc)


@st.composite
def quiet_eligible(draw: st.DrawFn) -> Scenario:
    """Scenarios that keep quiet completions on (pausing inners, one replica, no lifecycle), some
    under SyncEveryK as slime's ``update_weights_interval``, integer times half the time (ties)."""
    inner = draw(st.sampled_from(PAUSING))
    update = draw(st.sampled_from([AfterNextBatch(inner), SyncEveryK(2, AfterNextBatch(inner))]))
    sc = draw(
        policy_scenarios(
            weight_updates=[update], failures=st.none(), with_timeouts=False, with_replicas=False
        )
    )
    if draw(st.booleans()):
        values = draw(st.lists(st.integers(0, 6).map(float), min_size=1, max_size=24))
        whole = st.integers(0, 8).map(float)
        sc = sc.with_(
            durations=pipesim.TraceDurations(tuple(values), cycle=True),
            train_time_s=draw(whole),
            sync_time_s=draw(whole),
        )
    return sc.with_(pool_size=4 * sc.default_pool_size)


@settings(max_examples=40, deadline=None)
@given(quiet_eligible())
def test_the_wait_is_the_same_on_every_path_of_the_engine(sc: Scenario) -> None:
    """Quiet completions, the pass in place and in-place wake-ups change nothing (or the same
    error; a stalled run is not run beside the ticker, which would tick for ever)."""
    fast, error = trace(EngineOptions(), sc)
    ways = (EAGER, SERIAL) if fast is None else (EAGER, TICK, SERIAL)
    same_traces(sc, *ways, tick_s=1.0)
    assert fast is None or fast.lazy_completions
    if fast is None:  # the only error these draw: a batch the admission never generates ahead
        assert "stalled" in error and "AfterNextBatch" in error


def test_a_buffer_that_never_holds_a_batch_stalls_naming_the_wrapper() -> None:
    """The count throttle at eta = 0 admits nothing beyond the batch being trained: no next batch."""
    cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=1.0, sync_time_s=1.0, max_staleness=0, steps=5)
    sc = Scenario(pipeline=cfg, admission=CountThrottle(), weight_update=AfterNextBatch(PartialRollout()))
    t0 = time.perf_counter()
    with pytest.raises(PipelineError) as err:
        pipesim.run(sc)
    assert time.perf_counter() - t0 < 10.0
    _stalls_named(err.value)


@pytest.mark.parametrize(
    ("update", "chain"),
    [
        (SyncEveryK(2, AfterNextBatch(AbortReprefill())), "SyncEveryK > AfterNextBatch > AbortReprefill"),
        (AfterNextBatch(AbortReprefill(prefill_rate_tok_s=4321.0)), "AfterNextBatch > AbortReprefill"),
    ],
    ids=["wrapped", "long-arguments"],
)
def test_the_stall_names_every_policy_of_a_wrapped_wait(update: Any, chain: str) -> None:
    """A shortened repr cut the waiting policy's name out of the middle of a nested one; the
    stall names each class of the chain whole."""
    cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=1.0, sync_time_s=1.0, max_staleness=0, steps=5)
    with pytest.raises(PipelineError) as err:
        pipesim.run(Scenario(pipeline=cfg, admission=CountThrottle(), weight_update=update))
    assert chain in str(err.value), str(err.value)


@pytest.mark.parametrize("inner", [3, None, "Drain", PartialRollout, CountThrottle()], ids=repr)
def test_an_inner_that_is_no_weight_update_is_refused(inner: object) -> None:
    with pytest.raises(FieldError) as err:
        AfterNextBatch(inner)  # type: ignore[arg-type]
    assert err.value.field == "inner"


@dataclass(frozen=True)
class WaitsFor:
    """A user's weight update that waits for ``n`` buffered episodes before a partial-rollout sync."""

    n: object

    def blocks_admission(self, p: pipesim.PipelineView) -> bool:
        return p.syncing

    def sync(self, p: pipesim.PipelineView) -> Generator[Any, Any, None]:
        yield p.buffered_at_least(self.n)  # type: ignore[arg-type]
        yield from PartialRollout().sync(p)


@pytest.mark.parametrize("n", [0, -1, 2.5, True, "4", None], ids=repr)
def test_buffered_at_least_refuses_a_bad_count_naming_the_policy(n: object) -> None:
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=4, batch_size=2, max_staleness=1, steps=3),
        weight_update=WaitsFor(n),
    )
    with pytest.raises(PipelineError) as err:
        pipesim.run(sc)
    assert "WaitsFor" in str(err.value) and "buffered_at_least" in str(err.value)


def test_buffered_at_least_takes_a_numpy_count() -> None:
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=4, batch_size=2, max_staleness=1, steps=3),
        weight_update=WaitsFor(np.int64(2)),
    )
    check_invariants(pipesim.run(sc))
