"""Duration models draw from one kind of generator (numpy); torch only for the chapter's exact draws."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim import (
    AgentDurations,
    ExponentialDurations,
    LogNormalDurations,
    PipelineConfig,
    Scenario,
    TraceDurations,
    agent_episode_durations,
    draw_pool,
    run,
)
from pipesim.core.errors import PipelineError
from pipesim.core.validate import FieldError, FieldTypeError
from pipesim.workload.durations import draw, straggler_ratios
from tests.test_refusals_core import check_refusal

ROOT = Path(__file__).resolve().parents[1]
CFG = PipelineConfig(n_slots=4, batch_size=4, train_time_s=5.0, sync_time_s=1.0, max_staleness=1, steps=3)

WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # an import of torch now raises ImportError, as if it were absent

import numpy as np
import pipesim
import pipesim.io.sweeps  # the sweep and CLI modules too
import pipesim.io.cli
from pipesim import (
    AgentDurations, ExponentialDurations, LogNormalDurations, PipelineConfig, Scenario,
    TraceDurations, run, simulate_pipeline,
)

cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=5.0, sync_time_s=1.0, max_staleness=1, steps=3)
for model in (
    LogNormalDurations(40.0, 1.0),
    ExponentialDurations(30.0),
    TraceDurations.from_values([3.0, 1.0, 4.0, 1.0, 5.0], cycle=True),
    AgentDurations(draws="numpy"),
):
    s = run(Scenario(pipeline=cfg, durations=model, pool_size=200, seed=1)).summary()
    assert s["throughput_per_hour"] > 0, (model, s)
assert simulate_pipeline(np.ones(100), 4, 4, 1.0, 1.0, steps=2)["time"] > 0
assert len(AgentDurations().sample(10, np.random.default_rng(0))) == 10

for call in (
    lambda: run(Scenario(pipeline=cfg, pool_size=200)),  # AgentDurations(): the chapter's generator
    lambda: pipesim.agent_episode_durations(10, object()),
    lambda: pipesim.workload.durations.chapter_pool(),
):
    try:
        call()
    except ImportError as exc:
        msg = str(exc)
        assert "needs torch" in msg and "chapter" in msg, msg
    else:
        raise AssertionError("the chapter's generator ran without torch")
assert sys.modules["torch"] is None
print("ok")
"""


def test_pipesim_imports_and_runs_without_torch() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WITHOUT_TORCH)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        # no kept pool: a chapter pool an earlier test kept would run without torch (an install
        # without torch keys its pools apart: pipesim.io.draw_cache)
        env={**os.environ, "PIPESIM_DRAW_CACHE": "off"},
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


@pytest.mark.parametrize(
    "model",
    [
        LogNormalDurations(40.0, 1.0),
        ExponentialDurations(30.0),
        AgentDurations(draws="numpy"),
        TraceDurations.from_values([2.0, 7.0], cycle=True),
    ],
)
def test_models_draw_float64_arrays_from_numpy_generators(model: object) -> None:
    sc = Scenario(pipeline=CFG, durations=model, pool_size=500, seed=4)  # type: ignore[arg-type]
    pool = draw_pool(sc)
    assert isinstance(pool, np.ndarray) and pool.dtype == np.float64 and pool.shape == (500,)
    assert np.array_equal(pool, draw_pool(sc))  # a pure function of the seed
    assert np.array_equal(pool, model.sample(500, np.random.default_rng(4)))  # type: ignore[attr-defined]
    if not isinstance(model, TraceDurations):
        assert not np.array_equal(pool, draw_pool(sc.with_(seed=5)))


def test_numpy_models_name_the_generator_they_need() -> None:
    """A generator of another kind is a FieldTypeError (a TypeError) naming ``generator``."""
    torch = pytest.importorskip("torch")
    for model in (LogNormalDurations(), ExponentialDurations()):
        check_refusal(lambda: model.sample(3, torch.Generator()), FieldTypeError, "generator")  # noqa: B023
    check_refusal(lambda: AgentDurations().sample(3, 7), FieldTypeError, "generator")  # type: ignore[call-overload]
    check_refusal(lambda: AgentDurations(draws="torch"), FieldError, "draws")  # type: ignore[arg-type]


def test_chapter_draws_are_the_chapters_torch_numbers() -> None:
    """The default AgentDurations scenario runs on exactly the chapter's pool for its seed."""
    torch = pytest.importorskip("torch")
    want = agent_episode_durations(20_000, torch.Generator().manual_seed(3))
    assert isinstance(want, torch.Tensor) and want.dtype == torch.float32
    got = draw_pool(Scenario(pipeline=CFG, pool_size=20_000, seed=3))
    assert got.dtype == np.float64 and got.tolist() == want.tolist()
    a = run(Scenario(pipeline=CFG, pool_size=20_000, seed=3))
    b = run(Scenario(pipeline=CFG, pool_size=20_000, seed=0), want)
    assert a.events.equals(b.events)


def test_numpy_agent_draws_follow_the_chapter_distribution() -> None:
    torch = pytest.importorskip("torch")
    chapter = agent_episode_durations(40_000, torch.Generator().manual_seed(0)).numpy()
    numpy_ = draw(AgentDurations(draws="numpy"), 40_000, 0)
    assert numpy_.tolist() != chapter.tolist()
    assert numpy_.mean() == pytest.approx(chapter.mean(), rel=0.03)
    assert np.quantile(numpy_, 0.9) == pytest.approx(np.quantile(chapter, 0.9), rel=0.05)
    decode, tool = AgentDurations().sample_turns(1000, np.random.default_rng(1))
    assert decode.shape == tool.shape == (1000, 40)
    assert ((decode > 0) == (tool > 0)).all()  # both zero past the last turn


def test_mean_turns_above_max_turns_is_a_capped_geometric_not_an_error() -> None:
    """``mean_turns`` is the geometric's mean before the ``max_turns`` cap, so it may exceed the cap:
    ``pipesim fit`` searches up to 50 x max_turns and fits a trace whose episodes mostly run to the
    cap there (mean_turns 160 with max_turns 40). Refusing it would refuse those fits."""
    one = AgentDurations(mean_turns=8, max_turns=1, draws="numpy")
    decode, tool = one.sample_turns(1000, np.random.default_rng(0))
    assert decode.shape == (1000, 1) and (decode > 0).all() and (tool > 0).all()  # every episode: 1 turn
    decode, _ = AgentDurations(mean_turns=160, max_turns=40, draws="numpy").sample_turns(
        4000, np.random.default_rng(0)
    )
    at_cap = float(((decode > 0).sum(-1) == 40).mean())
    assert at_cap == pytest.approx((1 - 1 / 160) ** 39, abs=0.03)  # P(turns >= 40), as documented


def test_straggler_ratios_on_arrays_and_tensors_agree() -> None:
    torch = pytest.importorskip("torch")
    t = agent_episode_durations(8 * 512, torch.Generator().manual_seed(0))
    a, b = straggler_ratios(t), straggler_ratios(t.numpy().astype(np.float64))
    assert a.keys() == b.keys() and all(a[k] == pytest.approx(b[k], rel=1e-5) for k in a)


@settings(max_examples=60, deadline=None)
@given(
    hi_log10=st.floats(0.0, 300.0),
    tool_log10=st.floats(-3.0, 300.0),
    sigma=st.floats(0.0, 20.0),
    rate_log10=st.floats(-3.0, 6.0),
    max_turns=st.integers(1, 64),
    draws=st.sampled_from(["chapter", "numpy"]),
)
def test_an_agent_model_that_constructs_draws_finite_durations(
    hi_log10: float, tool_log10: float, sigma: float, rate_log10: float, max_turns: int, draws: str
) -> None:
    """Construction is the only gate: a model it accepts draws finite, non-negative seconds with
    the generator its ``draws`` names (the chapter's float32 torch draws once made NaN from
    40 turns of 1.5e299 s), and a refusal names a field."""
    import torch

    kw = dict(
        tokens_per_turn=(1.0, 10.0**hi_log10),
        tool_median_s=10.0**tool_log10,
        tool_sigma=sigma,
        decode_rate_tok_s=10.0**rate_log10,
        max_turns=max_turns,
        draws=draws,
    )
    try:
        model = AgentDurations(**kw)  # type: ignore[arg-type]
    except FieldError as e:
        assert e.field in kw or e.field.startswith("tokens_per_turn"), e
        return
    gen = torch.Generator().manual_seed(0) if draws == "chapter" else np.random.default_rng(0)
    out = np.asarray(model.sample(64, gen), dtype=float)
    assert np.isfinite(out).all() and (out >= 0).all()


@pytest.mark.parametrize("draws", ["numpy", "chapter"])
@settings(max_examples=12, deadline=None)
@given(
    steps=st.integers(1, 40),
    eta=st.integers(0, 6),
    batch=st.integers(1, 300),
    extra_steps=st.integers(1, 40),
    extra_eta=st.integers(0, 6),
)
def test_a_default_pool_starts_with_the_same_durations_whatever_its_size(
    draws: str, steps: int, eta: int, batch: int, extra_steps: int, extra_eta: int
) -> None:
    """The chapter consumes one pool so that every design sees the same episodes. A default pool's
    size follows the design ((steps + max_staleness + 1) x batch + slots): one draw of each size
    gave every duration anew, so designs differing in eta alone ran on different episodes."""
    if draws == "chapter":
        pytest.importorskip("torch")
    model = AgentDurations(draws=draws)  # type: ignore[arg-type]
    base = Scenario(
        pipeline=PipelineConfig(n_slots=8, batch_size=batch, steps=steps, max_staleness=eta),
        durations=model,
        seed=7,
    )
    bigger = base.with_(steps=steps + extra_steps, max_staleness=eta + extra_eta)
    small, large = draw_pool(base), draw_pool(bigger)
    assert len(small) == base.default_pool_size < len(large) == bigger.default_pool_size
    assert np.array_equal(small, large[: len(small)])


def test_a_trace_shorter_than_the_default_pool_runs_when_the_run_needs_less() -> None:
    """A 200-duration trace under a default pool of 208 was refused, though the run launches 176."""
    values = np.random.default_rng(1).lognormal(4.0, 0.5, 200).tolist()
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=16, batch_size=16, steps=10, max_staleness=1),
        durations=TraceDurations.from_values(values),
    )
    assert sc.default_pool_size > len(values)
    res = run(sc)
    assert res.summary()["episodes_trained"] == 160
    assert np.array_equal(draw_pool(sc), np.asarray(values))  # the trace, in order
    with pytest.raises(PipelineError, match=r"cycle=True"):  # a run that needs more is told so
        run(sc.with_(steps=12))


@pytest.mark.parametrize("max_turns", [1, 40, 1024, 5000, 65_536])
def test_the_default_pools_chunks_stay_small_for_a_small_pool(max_turns: int) -> None:
    """A pool of 10 at max_turns 65,536 drew a first chunk of 64 x 65,536 cells (172 MB)."""
    from itertools import islice

    from pipesim.workload.pools import FIRST_CHUNK_CELLS, MAX_CHUNK_CELLS, chunk_sizes

    sizes = list(islice(chunk_sizes(max_turns), 40))
    assert sizes[0] == 1 or sizes[0] * max_turns <= FIRST_CHUNK_CELLS
    assert all(s == 1 or s * max_turns <= MAX_CHUNK_CELLS for s in sizes)
    assert sizes == sorted(sizes) and sizes[-1] == max(1, MAX_CHUNK_CELLS // max_turns)


def test_the_run_page_shows_the_pool_the_run_drew() -> None:
    from pipesim.io.html import scenario_pairs

    sc = Scenario(
        pipeline=PipelineConfig(n_slots=16, batch_size=16, steps=10, max_staleness=1),
        durations=TraceDurations.from_values([5.0] * 200),
    )
    assert dict(scenario_pairs(sc))["pool_size"] == 200 < sc.default_pool_size
