"""Response lengths as an input: the registry in tokens, truncation emerging from the cap, and the
length trajectory (pipesim.compute.lengths, pipesim.compute.trajectory; issue 41 item 2).

Closed forms are checked exactly (a log-normal's quantiles and mean under the trajectory's map),
draws against those closed forms within binomial bounds, and the trajectory against
``drift_per_version`` (its special case) draw for draw."""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.compute.lengths import LENGTHS, LengthSpec, length_spec
from pipesim.compute.source import TokenSource
from pipesim.compute.trajectory import P99_Z, LengthPoint, LengthTrajectory
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.validate import FieldError
from tests.test_refusals_core import check_refusal


def _draw(wl: TokenWorkload, n: int, seed: int, versions: list[int] | None = None) -> TokenSource:
    src = TokenSource(wl, np.random.default_rng(seed))
    for i in range(n):
        src.work_s(i, i, 0 if versions is None else versions[i], -1)
    return src


def test_registry_by_name():
    assert {"math-reasoning-7b", "math-reasoning-1.5b", "math-reasoning-qwen3"} <= set(LENGTHS)
    for name, spec in LENGTHS.items():
        assert length_spec(name) is spec and spec.name == name and spec.source
        wl = spec.workload(8192, 4, 256)
        # the workload draws the entry's distribution: same mean before the cap, in tokens
        assert wl.base_mean_tokens == pytest.approx(spec.mean_tokens, rel=1e-12)
        assert wl.base_sigma == pytest.approx(math.hypot(spec.sigma, spec.difficulty_sigma))
    check_refusal(lambda: length_spec("no-such"), FieldError, "name")


@settings(max_examples=20, deadline=None)
@given(
    name=st.sampled_from(sorted(LENGTHS)),
    cap=st.integers(16, 20_000),
    more=st.integers(1, 20_000),
    seed=st.integers(0, 2**32 - 1),
)
def test_raising_the_cap_never_changes_draws_below_the_old_cap(name, cap, more, seed):
    spec = length_spec(name)
    low = _draw(spec.workload(cap, 4, 64), 300, seed)
    high = _draw(spec.workload(cap + more, 4, 64), 300, seed)
    for a, b, t in zip(low.response, high.response, low.truncated, strict=True):
        if t:
            assert a == cap and b >= cap  # truncated under the old cap: at least as long under the new
        else:
            assert a == b < cap + 1


@pytest.mark.parametrize(
    "name,cap", [("math-reasoning-7b", 8192), ("math-reasoning-1.5b", 8192), ("math-reasoning-1.5b", 16384)]
)
def test_clip_share_emerges_from_the_cap(name, cap):
    """The share truncated is the log-normal's tail past the cap (rounding: past cap + 0.5)."""
    spec = length_spec(name)
    wl = spec.workload(cap, 1, 64)  # one sample per group: independent draws
    n = 20_000
    src = _draw(wl, n, seed=7)
    s = math.hypot(spec.sigma, spec.difficulty_sigma)
    p = 1 - NormalDist().cdf(math.log((cap + 0.5) / spec.median_tokens) / s)
    share = float(np.mean(src.truncated))
    assert abs(share - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-9
    assert max(src.response) == cap and all(r <= cap for r in src.response)


@settings(max_examples=25, deadline=None)
@given(
    rate=st.floats(-0.2, 0.3),
    seed=st.integers(0, 2**32 - 1),
    steps=st.integers(1, 12),
    difficulty=st.sampled_from([0.0, 0.5]),
)
def test_trajectory_reduces_to_drift_per_version(rate, seed, steps, difficulty):
    base = TokenWorkload(
        response=LogNormalLengths(800.0, 0.7), prompt=32, samples_per_prompt=2, max_response_tokens=4096,
        difficulty_sigma=difficulty,
    )  # fmt: skip
    drift = TokenWorkload(**{**_fields(base), "drift_per_version": rate})
    traj = TokenWorkload(
        **{**_fields(base), "trajectory": LengthTrajectory.geometric(base.base_mean_tokens, rate, steps)}
    )
    versions = [min(i // 40, steps) for i in range(40 * (steps + 1))]
    a, b = _draw(drift, len(versions), seed, versions), _draw(traj, len(versions), seed, versions)
    for v in range(steps + 1):
        wa, wb = drift.length_warp(v), traj.length_warp(v)
        assert wb[1] == 1.0 and wb[0] == pytest.approx(wa[0], rel=1e-12)
    assert a.response == b.response and a.truncated == b.truncated


def _fields(wl: TokenWorkload) -> dict:
    return {k: getattr(wl, k) for k in wl.__dataclass_fields__}


@settings(max_examples=40, deadline=None)
@given(
    mean=st.floats(200.0, 5000.0),
    ratio=st.floats(1.5, 12.0),
    clip=st.floats(0.001, 0.2),
    use_clip=st.booleans(),
)
def test_a_point_sets_the_mean_and_the_p99_or_the_clip_share(mean, ratio, clip, use_clip):
    """The map x -> a x^b sends the base log-normal to one with the point's mean and its p99 (or
    its clip share at the cap): checked on the closed-form quantiles."""
    cap = 8192
    base = TokenWorkload(
        response=LogNormalLengths(1000.0, 0.8), max_response_tokens=cap, difficulty_sigma=0.5
    )
    point = (
        LengthPoint(3, mean, clip_share=clip) if use_clip else LengthPoint(3, mean, p99_tokens=mean * ratio)
    )
    try:
        wl = TokenWorkload(**{**_fields(base), "trajectory": LengthTrajectory((point,))})
    except ValueError as e:  # no log-normal meets the point: refused, naming the field
        assert ("clip_share" if use_clip else "p99_tokens") in str(e)
        return
    a, b = wl.length_warp(3)
    m0, s0 = 1000.0, math.hypot(0.8, 0.5)

    def q(z: float) -> float:  # the warped distribution's quantile at z
        return a * (m0 * math.exp(s0 * z)) ** b

    s = s0 * b
    assert q(0.0) * math.exp(s * s / 2) == pytest.approx(mean, rel=1e-9)  # median e^{s^2/2} = mean
    if use_clip:
        assert q(NormalDist().inv_cdf(1 - clip)) == pytest.approx(cap, rel=1e-9)
    else:
        assert q(P99_Z) == pytest.approx(mean * ratio, rel=1e-9)


def test_trajectory_clip_share_reaches_the_draws():
    cap, clip = 4096, 0.05
    wl = TokenWorkload(
        response=LogNormalLengths(600.0, 0.8), max_response_tokens=cap,
        trajectory=LengthTrajectory((LengthPoint(0, 700.0), LengthPoint(10, 1500.0, clip_share=clip))),
    )  # fmt: skip
    n = 20_000
    late = _draw(wl, n, seed=3, versions=[10] * n)
    share = float(np.mean(late.truncated))
    assert abs(share - clip) <= 4 * math.sqrt(clip * (1 - clip) / n) + 1e-3  # + rounding at cap + 0.5
    early = _draw(wl, n, seed=3, versions=[0] * n)
    assert float(np.mean(early.truncated)) < share / 5  # the early, shorter lengths rarely reach the cap


def test_window_point_and_stationary_window():
    wl = TokenWorkload(response=LogNormalLengths(500.0, 0.6), max_response_tokens=8192)
    assert wl.over_window(0, 100) is wl  # nothing moves
    drift = TokenWorkload(
        response=LogNormalLengths(500.0, 0.6), max_response_tokens=8192, drift_per_version=0.01
    )
    win = drift.over_window(0, 100)
    means = [drift.base_mean_tokens * 1.01**k for k in range(100)]
    assert win.trajectory is not None and win.drift_per_version == 0.0
    assert win.trajectory.points[0].mean_tokens == pytest.approx(sum(means) / 100, rel=1e-9)
    # a window's stationary workload draws the same at every version
    assert win.length_warp(0) == win.length_warp(99)
    assert win.length_warp(0)[0] * drift.base_mean_tokens == pytest.approx(sum(means) / 100, rel=1e-9)


def test_trajectory_from_csv(tmp_path: Path):
    path = tmp_path / "t.csv"
    path.write_text("step,mean_tokens,p99_tokens,clip_share\n0,900,,\n100,1400,9000,\n400,2100,,0.02\n")
    t = LengthTrajectory.from_csv(path)
    assert [p.step for p in t.points] == [0, 100, 400]
    assert (
        t.points[1].p99_tokens == 9000.0 and t.points[2].clip_share == 0.02 and t.points[0].p99_tokens is None
    )


def _wl(**kw):
    return TokenWorkload(response=LogNormalLengths(500.0, 0.6), **kw)


BAD = [
    (lambda: LengthPoint(-1, 100.0), "step"),
    (lambda: LengthPoint(0, 0.0), "mean_tokens"),
    (lambda: LengthPoint(0, 100.0, p99_tokens=50.0), "p99_tokens"),
    (lambda: LengthPoint(0, 100.0, clip_share=0.7), "clip_share"),
    (lambda: LengthPoint(0, 100.0, p99_tokens=900.0, clip_share=0.01), "clip_share"),
    (lambda: LengthTrajectory(()), "points"),
    (lambda: LengthTrajectory((LengthPoint(5, 10.0), LengthPoint(5, 20.0))), "points"),
    (
        lambda: _wl(trajectory=LengthTrajectory((LengthPoint(0, 10.0),)), drift_per_version=0.1),
        "trajectory",
    ),
    (lambda: _wl(trajectory="fast"), "trajectory"),
    (lambda: _wl(trajectory=LengthTrajectory((LengthPoint(0, 100.0, p99_tokens=1e9),))), "p99_tokens"),
    (lambda: LengthSpec("x", -1.0, 0.5, 0.5, "s"), "median_tokens"),
    (lambda: LengthSpec("x", 100.0, 0.5, 0.5, ""), "source"),
    (lambda: length_spec("math-reasoning-7b").workload(8192, 4, 256, scale=0.0), "scale"),
]


@pytest.mark.parametrize("make,field", BAD)
def test_bad_input_names_the_field(make, field):
    check_refusal(make, FieldError, field)


@pytest.mark.parametrize("text", ["step,mean_tokens\n0,900\n10,lots\n", "step,p99\n0,900\n"])
def test_bad_csv_names_the_column_and_the_file(tmp_path: Path, text: str):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    err = check_refusal(lambda: LengthTrajectory.from_csv(path), FieldError, "column")
    assert err.file == str(path)


def test_the_compute_scenario_takes_a_registry_entry():
    from scenarios import compute

    assert compute.workload(None) is compute.WORKLOAD
    wl = compute.workload("math-reasoning-1.5b")
    spec = length_spec("math-reasoning-1.5b")
    w = compute.WORKLOAD
    assert (wl.max_response_tokens, wl.samples_per_prompt, wl.prompt) == (
        w.max_response_tokens,
        w.samples_per_prompt,
        w.prompt,
    )
    assert wl.base_mean_tokens == pytest.approx(spec.mean_tokens, rel=1e-12)
