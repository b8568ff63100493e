"""A streamed step split by the trainer model's sample weights (``sample_weights``; the compute
trainer's are tokens): the closed form is the one-at-a-time recurrence with weighted shares, equal
weights are the equal split, a pipeline's step ends agree with a slow SimPy trainer fed the same
arrivals and weights, and bad weights are refused naming the method and the step."""

from __future__ import annotations

import math
from typing import Any

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

import pipesim
from pipesim import PartialRollout, Scenario
from pipesim.core.engine import Pipeline
from pipesim.core.errors import PipelineError
from pipesim.core.training import stream_end_s
from pipesim.io.api import draw_pool
from pipesim.testing import check_invariants, scenarios

TOL = 1e-9
pytestmark = pytest.mark.filterwarnings("ignore:the run ended at")

times = st.floats(0, 100, allow_nan=False)
weights_st = st.floats(0, 1e6, allow_nan=False)


@st.composite
def arrivals_weights(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    n = draw(st.integers(1, 12))
    arrivals = draw(st.lists(times, min_size=n, max_size=n))
    weights = draw(st.lists(weights_st, min_size=n, max_size=n).filter(lambda w: sum(w) > 0))
    return arrivals, weights


@given(arrivals_weights(), st.floats(0, 50, allow_nan=False), times, st.floats(0, 50, allow_nan=False))
def test_the_weighted_closed_form_is_the_recurrence(
    aw: tuple[list[float], list[float]], train_s: float, free_s: float, later_s: float
) -> None:
    arrivals, weights = aw
    now = max([free_s, *arrivals]) + later_s  # the handover at or after the last arrival
    total = math.fsum(weights)
    order = sorted(range(len(arrivals)), key=arrivals.__getitem__)  # ties in the batch's order
    f = free_s
    for k, i in enumerate(order):
        a = now if k == len(order) - 1 else arrivals[i]
        f = max(f, a) + train_s * weights[i] / total
    got = stream_end_s(arrivals, train_s, free_s, now, weights)
    assert math.isclose(got, f, rel_tol=1e-9, abs_tol=1e-9)
    last = train_s * weights[order[-1]] / total
    assert now + last - 1e-9 <= got <= now + train_s + 1e-9


@given(st.lists(times, min_size=1, max_size=12), st.floats(0, 50, allow_nan=False), times, weights_st)
def test_equal_weights_are_the_equal_split(
    arrivals: list[float], train_s: float, free_s: float, w: float
) -> None:
    now = max([free_s, *arrivals])
    plain = stream_end_s(arrivals, train_s, free_s, now)
    assert stream_end_s(arrivals, train_s, free_s, now, [1.0] * len(arrivals)) == plain
    if w > 0:  # scaled to the heaviest: each weight is 1.0, to the bit
        assert stream_end_s(arrivals, train_s, free_s, now, [w] * len(arrivals)) == plain


def test_tied_arrivals_train_in_the_batchs_order() -> None:
    """Two episodes in at 1 s, weights 1 and 3 of 10 s: the first trains 2.5 s (to 3.5 s), the
    second, the last, from the handover at 10 s for 7.5 s. In the other order the step would end
    at 12.5 s."""
    assert stream_end_s([1.0, 1.0], 10.0, 0.0, 10.0, [1.0, 3.0]) == 17.5


def test_an_arrival_after_the_handover_counts_from_it() -> None:
    """Arrivals 1, 5 and 6 s, a handover at 3 s: 5 s counts as 3 s, so the second of three equal
    shares of 4 s starts there and the step ends at 3 + 2 x 4/3 s (not 5 + 8/3)."""
    assert math.isclose(stream_end_s([5.0, 6.0, 1.0], 4.0, 0.0, 3.0), 3.0 + 8.0 / 3.0, rel_tol=1e-15)


@pytest.mark.parametrize(
    ("w", "arrivals", "train_s", "free_s"),
    [
        (468109.6, [8.09, 5.19, 5.61, 4.26, 0.56, 8.7], 11.44, 1.0),
        (0.1, [0.38, 8.54, 8.0, 1.26, 9.7], 4.96, 1.09),
        (1e-300, [1.97, 8.25, 8.67], 8.72, 0.17),
    ],
)
def test_equal_weights_of_any_size_are_the_equal_split_to_the_bit(
    w: float, arrivals: list[float], train_s: float, free_s: float
) -> None:
    """Scaled to the heaviest, equal weights are each 1.0; unscaled, these runs' shares rounded
    otherwise (the first ended at 13.793333333333331 s for 13.793333333333333)."""
    now = max(arrivals)
    plain = stream_end_s(arrivals, train_s, free_s, now)
    assert stream_end_s(arrivals, train_s, free_s, now, [w] * len(arrivals)) == plain


def test_a_tiny_weight_is_a_whole_share() -> None:
    """One episode of weight 5e-324 (the least subnormal) trains the whole step: 2 + 6.5 s. Unscaled,
    6.5 x 5e-324 rounds to a multiple of 5e-324 and the share came out 6 s."""
    assert stream_end_s([0.0], 6.5, 1.0, 2.0, [5e-324]) == 8.5


def test_all_zero_weights_in_the_closed_form_are_the_equal_split() -> None:
    arrivals = [0.5, 2.0, 7.25]
    assert stream_end_s(arrivals, 3.0, 1.0, 7.25, [0.0] * 3) == stream_end_s(arrivals, 3.0, 1.0, 7.25)


class DurationWeighted:
    """A user's trainer model: a fixed step time, split by each episode's generation seconds (+1,
    so that none weighs nothing); records the weights it gave."""

    def __init__(self, train_s: float) -> None:
        self.train_s = train_s
        self.given: list[list[float]] = []

    def train_time_s(self, step: int, batch: list[Any]) -> float:
        return self.train_s

    def sample_weights(self, step: int, batch: list[Any]) -> list[float]:
        w = [1.0 + e.duration_s for e in batch]
        self.given.append(w)
        return w


class Handovers:
    def __init__(self) -> None:
        self.rows: list[tuple[float, list[float]]] = []

    def on_batch(self, step: int, version: int, batch: list[Any], now_s: float) -> None:
        self.rows.append((now_s, [float(e.end_s) for e in batch]))


def reference_ends(
    rows: list[tuple[float, list[float]]], weights: list[list[float]], frees: list[float], train_s: float
) -> list[float]:
    """The slow reference: one SimPy process per step takes each episode when it arrives (the
    last at the handover), in arrival order, and trains its weighted share."""
    env = simpy.Environment()
    ends: list[float] = []

    def trainer() -> Any:
        for k, (handover, arrivals) in enumerate(rows):
            w = weights[k]
            total = math.fsum(w)
            order = sorted(range(len(arrivals)), key=arrivals.__getitem__)
            yield env.timeout(max(0.0, frees[k] - env.now))
            for j, i in enumerate(order):
                at = handover if j == len(order) - 1 else arrivals[i]
                if env.now < at:
                    yield env.timeout(at - env.now)
                yield env.timeout(train_s * w[i] / total)
            ends.append(env.now)

    env.process(trainer())
    env.run()
    return ends


@given(scenarios(weight_updates=[PartialRollout()], max_slots=8, max_batch=6))
def test_a_pipeline_splits_each_step_by_the_models_weights(sc: Scenario) -> None:
    sc = sc.with_(stream_batches=True)
    trainer, obs = DurationWeighted(sc.pipeline.train_time_s), Handovers()
    p = Pipeline(sc, draw_pool(sc).tolist(), trainer=trainer, observer=obs)
    p.run()
    frees = [0.0] + [end for _, end, _ in p.sync_log[:-1]]
    scale = [[x / max(w) for x in w] for w in trainer.given]
    ref = reference_ends(obs.rows, scale, frees, sc.pipeline.train_time_s)
    got = [end for _, _, end, _ in p.train_log]
    assert len(got) == len(ref) == sc.pipeline.steps
    for a, b in zip(got, ref):
        assert math.isclose(a, b, rel_tol=1e-7, abs_tol=1e-7), (got, ref)
    for _, start, end, _ in p.train_log:  # the log's spans are the step's compute
        assert math.isclose(end - start, sc.pipeline.train_time_s, rel_tol=1e-9, abs_tol=1e-9)


class BadWeights:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def train_time_s(self, step: int, batch: list[Any]) -> float:
        return 1.0

    def sample_weights(self, step: int, batch: list[Any]) -> object:
        return self.answer(batch) if callable(self.answer) else self.answer


@pytest.mark.parametrize(
    "answer",
    [
        lambda b: [1.0] * (len(b) + 1),  # one too many
        lambda b: [1.0] * (len(b) - 1),  # one too few
        lambda b: [],
        lambda b: [math.nan] * len(b),
        lambda b: [-1.0] * len(b),
        lambda b: [math.inf] * len(b),
        lambda b: ["1"] * len(b),
        None,  # not a list
        3.0,
    ],
    ids=["long", "short", "empty", "nan", "negative", "inf", "text", "none", "scalar"],
)
def test_bad_weights_are_refused_naming_the_method_and_the_step(answer: object) -> None:
    sc = Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=2, stream_batches=True))
    p = Pipeline(sc, draw_pool(sc).tolist(), trainer=BadWeights(answer))
    with pytest.raises(PipelineError, match=r"BadWeights\.sample_weights at step 0"):
        p.run()


def test_all_zero_weights_are_the_equal_split() -> None:
    sc = Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=3, stream_batches=True))
    a = Pipeline(sc, draw_pool(sc).tolist(), trainer=BadWeights(lambda b: [0.0] * len(b)))
    b = Pipeline(sc, draw_pool(sc).tolist(), trainer=BadWeights(lambda b: [1.0] * len(b)))
    a.run()
    b.run()
    assert a.train_log == b.train_log


def test_the_compute_trainer_splits_a_streamed_step_by_its_samples_tokens() -> None:
    """A streamed compute run (a disaggregated cluster, batches taken in arrival order): each step
    ends where the slow reference puts it with the trainer's seconds split by the dealt samples'
    tokens, and the run keeps the kit's invariants and closes its token ledger (run_compute
    refuses one that does not)."""
    from pipesim.compute import (
        GPUS,
        MODELS,
        Cluster,
        EngineConfig,
        LogNormalLengths,
        TokenWorkload,
    )
    from pipesim.compute.cluster import run_compute

    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096)
    work = TokenWorkload(response=LogNormalLengths(300.0, 1.2), prompt=64, max_response_tokens=3000)
    sc = Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, steps=4, max_staleness=1, stream_batches=True)
    )
    obs = Handovers()
    run = run_compute(sc, Cluster(engine=eng, n_gpus=8, trainer_gpus=4), work, seed=3, observer=obs)
    check_invariants(run.result)
    tokens = {step: [float(t) for t in dealt] for step, dealt in run.dealt_log}
    assert len(tokens) == sc.pipeline.steps
    assert any(len(set(t)) > 1 for t in tokens.values())  # the samples differ: weights matter
    frees = [0.0] + [end for _, end, _ in run.result.sync_log[:-1]]
    for k, (_, start, end, _) in enumerate(run.result.train_log):
        train_s = end - start
        ref = reference_ends([obs.rows[k]], [tokens[k]], [frees[k]], train_s)
        assert math.isclose(end, ref[0], rel_tol=1e-9, abs_tol=1e-6), (k, end, ref)
