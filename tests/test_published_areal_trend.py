"""scenarios.published, AReaL after the source audit: every run capped at AReaL's default of one
training batch of rollouts in flight, the trend row measured in Fig. 7's unit (trained tokens per
second, not steps per hour), and its rule read as the figure shows growth (no step falls, the
whole range rises), which the figure's own bars pass and the rule before (every step rises)
fails."""

from __future__ import annotations

from typing import Any

import pytest

from scenarios import published
from scenarios.published import areal, common

FIG7 = {0: 128.7e3, 1: 269.3e3, 2: 356.6e3, 4: 356.6e3, 8: 371.7e3, 16: 382.4e3}
"""Fig. 7 of AReaL's blog (``assets/figures/staleness_throughput.png``): effective training
throughput in tokens per second by maximum staleness (its eta = inf bar, 396.8k, has no integer
eta and is left out)."""


def _bars(by_eta: dict[int, float], seeds: int = 4) -> dict[int, list[float]]:
    """Each bar as the same value on every seed: zero-width intervals, the differences alone."""
    return {eta: [v] * seeds for eta, v in by_eta.items()}


@pytest.mark.parametrize("etas", [tuple(FIG7), areal.AREAL_TREND_ETAS])
def test_the_rule_passes_fig7_and_the_rule_before_fails_it(etas):
    trend = areal.trend_of(_bars({e: FIG7[e] for e in etas}))
    assert trend.holds
    assert not trend.every_step_rises
    verdicts = {(r.lo, r.hi): r.verdict for r in trend.steps}
    assert verdicts.pop((2, 4)) == "flat within noise"  # 356.6k and 356.6k
    assert set(verdicts.values()) == {"rises"}
    assert (trend.whole.lo, trend.whole.hi, trend.whole.verdict) == (0, etas[-1], "rises")
    text = str(trend)
    assert text.startswith("no step falls and the whole range rises: holds (eta 0->")
    assert "every step rises (the rule before): fails" in text
    assert "eta 2->4 +0.0k tokens/s (+0.0%) [+0.0k, +0.0k] flat within noise" in text


def test_a_falling_step_fails_though_the_whole_range_rises():
    trend = areal.trend_of(_bars({**FIG7, 4: 350.0e3}))
    assert trend.whole.verdict == "rises"
    assert [r.verdict for r in trend.steps if (r.lo, r.hi) == (2, 4)] == ["falls"]
    assert not trend.holds and not trend.every_step_rises
    assert str(trend).startswith("no step falls and the whole range rises: fails (eta 0->16 ")


def test_flat_everywhere_fails():
    trend = areal.trend_of(_bars(dict.fromkeys(FIG7, 356.6e3)))
    assert {r.verdict for r in trend.steps} == {"flat within noise"}
    assert trend.whole.verdict == "flat within noise"
    assert not trend.holds
    # flat within noise as well: seed-to-seed spread, no rise over the whole range
    spread = (-900.0, 400.0, -300.0, 800.0)
    noisy = {eta: [356.6e3 + spread[(i + s) % 4] for s in range(4)] for i, eta in enumerate(FIG7)}
    assert {r.verdict for r in areal.trend_of(noisy).steps} == {"flat within noise"}
    assert not areal.trend_of(noisy).holds


def test_trend_of_refuses_etas_out_of_order():
    with pytest.raises(ValueError, match="tokens_per_s"):
        areal.trend_of({2: [1.0, 2.0], 1: [1.0, 2.0]})
    with pytest.raises(ValueError, match="tokens_per_s"):
        areal.trend_of({0: [1.0, 2.0]})


def _run(step_s: float, tokens_per_step: float) -> published.Measured:
    return published.Measured(
        steps=3, warmup=1, ends=(step_s, 2 * step_s, 3 * step_s), train_s=(1.0,) * 3, sync_s=0.0,
        syncs=0, tokens_trained=3 * tokens_per_step, wall_s=0.0, train_tokens=(tokens_per_step,) * 3,
    )  # fmt: skip


def test_tokens_per_second_is_the_steady_window_s_tokens_over_its_span():
    m = published.Measured(
        steps=4, warmup=2, ends=(50.0, 100.0, 160.0, 200.0), train_s=(1.0,) * 4, sync_s=0.0,
        syncs=0, tokens_trained=0.0, wall_s=0.0, train_tokens=(9e6, 9e6, 3e6, 5e6),
    )  # fmt: skip
    assert areal.areal_tokens_per_s(m) == pytest.approx((3e6 + 5e6) / (200.0 - 100.0))


def test_the_trend_is_trained_tokens_per_second_not_steps_per_hour(monkeypatch, fresh_runs):
    """From eta 4 to 8 the steps get 10% shorter and 10% fewer tokens (shorter samples trained):
    more steps per hour, the same tokens per second; the step is flat, not a rise."""
    step_s = {0: 100.0, 1: 60.0, 2: 50.0, 4: 48.0, 8: 48.0 * 0.9}
    tokens = {0: 5e6, 1: 5e6, 2: 5e6, 4: 5e6, 8: 5e6 * 0.9}

    def run(eta, steps=8, train_gpus=32, v=published.POINT, sync_runner=False, max_new_tokens=27 * 1024):
        return _run(step_s[eta] * (1 + 0.01 * v.seed), tokens[eta] * (1 + 0.01 * v.seed))

    monkeypatch.setattr(areal, "areal_run", run)
    verdicts = {(r.lo, r.hi): r.verdict for r in areal.areal_trend()}
    assert verdicts[(4, 8)] == "flat within noise"
    assert verdicts[(0, 1)] == verdicts[(1, 2)] == verdicts[(2, 4)] == "rises"
    assert "k tokens/s" in str(areal.areal_trend_verdict())


def test_every_areal_run_caps_rollouts_at_one_training_batch(monkeypatch, fresh_runs):
    """AReaL's default ``max_concurrent_rollouts`` (None: one training batch, 512 prompts x 16
    samples) on every AReaL run of the table: Table 2's two hours, the 2.77x, each eta and seed of
    the trend; not the preset's None (the slot count)."""
    calls: list[Any] = []

    def fake(scenario, cluster, workload, trainer, warmup, seed=0, routing=None):
        calls.append((scenario, cluster.trainer_gpus))
        return common.PLACEHOLDER

    monkeypatch.setattr(common, "measure", fake)
    for c in published.CLAIMS:
        if c.system == "AReaL":
            c.predict(published.POINT)
    assert {gpus for _, gpus in calls} == {areal.AREAL_SYNC_TRAIN_GPUS, areal.AREAL_TRAIN_GPUS}
    assert len(calls) >= 1 + len(areal.AREAL_TREND_ETAS) * len(areal.AREAL_TREND_SEEDS)
    assert {sc.admission.max_concurrent for sc, _ in calls} == {8192}
    # AReaL's unit: 512 rollout tasks (prompt groups), 8,192 running responses in the throttle
    assert areal.AREAL_MAX_CONCURRENT_ROLLOUTS == areal.AREAL_PROMPTS == 512


def test_the_row_holds_on_fig7_s_bars_and_shows_both_rules(monkeypatch, fresh_runs):
    """The row (``claims._areal_trend``) on runs whose tokens per second are Fig. 7's bars, each
    seed alike: 1.0 (the rule before gave 0.0: the flat eta 2 -> 4 step), both verdicts shown."""

    def run(eta, steps=8, train_gpus=32, v=published.POINT, sync_runner=False, max_new_tokens=27 * 1024):
        return _run(100.0, FIG7[eta] * 100.0)

    monkeypatch.setattr(areal, "areal_run", run)
    assert published._areal_trend() == 1.0
    diag = published.claims._areal_trend_diag()
    assert diag.startswith(
        "trained tokens/s paired over seeds 0,1,2,3, 95% t: no step falls and the whole range rises: holds "
    )
    assert "every step rises (the rule before): fails" in diag


def test_the_trend_runs_at_the_staleness_experiments_stated_cap(monkeypatch, fresh_runs):
    """The blog's note on its staleness experiments (Table 3, Fig. 7) states ``max_new_tokens=8192``:
    every trend run (each eta and seed) caps responses there; Table 2's runs keep their 27,648."""
    caps: list[tuple[int, int]] = []

    def fake(scenario, cluster, workload, trainer, warmup, seed=0, routing=None):
        caps.append((scenario.pipeline.max_staleness, workload.max_response_tokens))
        return common.PLACEHOLDER

    monkeypatch.setattr(common, "measure", fake)
    for c in published.CLAIMS:
        if c.system == "AReaL":
            c.predict(published.POINT)
    trend = [cap for _, cap in caps if cap == areal.AREAL_TREND_MAX_NEW_TOKENS == 8192]
    assert len(trend) == len(areal.AREAL_TREND_ETAS) * len(areal.AREAL_TREND_SEEDS)
    assert {cap for _, cap in caps} == {8192, 27 * 1024}
    assert {eta for eta, cap in caps if cap == 8192} == set(areal.AREAL_TREND_ETAS)
