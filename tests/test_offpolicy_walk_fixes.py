"""Walkthrough 63 of offpolicy: an empty staleness grid, the t quantile away from 95%, behaviour
weights with a masked-off ``-inf`` log-probability, ``--eval-every 0`` and ``--resume``'s command.

* ``staleness --lags 0 --corrections tis`` (the default ``--grid cross`` skips corrections at lag
  0) loaded and evaluated the base, trained nothing and crashed on ``min()`` of no runs: now a
  usage error (exit 2) naming ``--lags``, ``--corrections`` and ``--grid``, before the base loads.
  ``lr_sweep`` with no lag pair printed a paired-table header with no row.
* ``stats.t_quantile`` used a Cornish-Fisher expansion off 95%: t(0.995, 1) was 28.47 (63.657).
* ``mis`` gave NaN and ``seq-tis`` a NaN row for a ``-inf`` sampler log-prob off the mask.
* ``--eval-every``'s help did not say 0 means never; ``--resume`` overwrote the JSON's command.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from offpolicy import lr_sweep, staleness, stats
from offpolicy.update import behavior_weights

# -- 1. an empty grid ------------------------------------------------------------------------------


def _no_base(*_: Any, **__: Any) -> Any:
    raise AssertionError("the base was loaded for a grid with no run")


@pytest.mark.parametrize("corrections", [["tis"], ["tis", "mis"], ["seq-tis"]])
def test_an_empty_staleness_grid_is_a_usage_error_before_the_base_loads(
    corrections: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(staleness, "load_base", _no_base)
    argv = ["--lags", "0", "--corrections", *corrections, "--seed-list", "1", "--steps", "2"]
    with pytest.raises(SystemExit) as exc:
        staleness.main([*argv, "--json", str(tmp_path / "x.json")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    for flag in ("--lags", "--corrections", "--grid", "lag 0"):
        assert flag in err, (flag, err)
    assert not (tmp_path / "x.json").exists()


def test_a_grid_that_keeps_a_run_is_not_refused() -> None:
    assert staleness.empty_grid([0], ["tis"], "full") is None
    assert staleness.empty_grid([0, 2], ["tis"], "cross") is None
    assert staleness.empty_grid([0], ["none", "tis"], "cross") is None
    assert staleness.empty_grid([0], ["tis"], "cross") is not None


def _run(lag: int, correction: str, seed: int, steps: int, lr: float = 3e-4, pass_rate: float = 0.5) -> dict:
    row = {"reward": 0.5 + 0.01 * seed, "mismatch": 0.1 * lag, "over_cap": 0.0, "clip_frac": 0.01}
    return {
        "lag": lag,
        "correction": correction,
        "seed": seed,
        "lr": lr,
        "steps": steps,
        "sampler": None,
        "gym": "issue",
        "train_seconds": 0.0,
        "eval_every": 0,
        "history": [dict(row, step=s) for s in range(steps)],
        "heldout": {"pass_rate": pass_rate + 0.05 * seed, "reads": 1.0, "invalid": 0.0},
        "diverged": None,
    }


def test_an_lr_sweep_with_no_lag_pair_says_so_instead_of_an_empty_paired_table() -> None:
    only_lag0 = lr_sweep.lr_table([_run(0, "tis", s, 4) for s in range(2)])
    assert "paired held-out" not in only_lag0 and "no paired table" in only_lag0
    assert "lag above 0" in only_lag0
    only_lag8 = lr_sweep.lr_table([_run(8, "none", s, 10) for s in range(2)])
    assert "paired held-out" not in only_lag8 and "no lag 0" in only_lag8
    paired = lr_sweep.lr_table([_run(lag, "none", s, 10) for lag in (0, 8) for s in range(2)])
    assert "paired held-out" in paired and "no paired table" not in paired
    assert len(paired.split("paired held-out", 1)[1].splitlines()) >= 2  # a row under the header


# -- 2. the t quantile --------------------------------------------------------------------------------

LEVELS = [0.01, 0.2, 0.5, 0.8, 0.9, 0.95 - 1e-15, 0.975, 0.99, 0.995, 0.999, 0.9999]


@pytest.mark.parametrize("level", LEVELS)
def test_the_t_quantile_matches_the_closed_forms_at_df_1_and_2(level: float) -> None:
    p = (1 + level) / 2
    assert stats.t_quantile(1, level) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-10)
    assert stats.t_quantile(2, level) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-10)


def test_the_t_quantile_matches_published_values_away_from_95() -> None:
    published = {
        (1, 0.99): 63.65674,
        (2, 0.99): 9.924843,
        (1, 0.90): 6.313752,
        (9, 0.95 - 1e-15): 2.262157,  # the computed root, not the table
        (5, 0.99): 4.032143,
        (6, 0.99): 3.707428,
        (10, 0.90): 1.812461,
        (20, 0.999): 3.849516,
    }
    for (df, level), value in published.items():
        assert stats.t_quantile(df, level) == pytest.approx(value, abs=1.5e-6 * max(1.0, value)), (df, level)


def test_the_computed_root_agrees_with_the_table_the_95_path_reads() -> None:
    for df in range(1, len(stats.T95) + 1):
        assert stats.t_quantile(df, 0.95 - 1e-15) == pytest.approx(stats.T95[df - 1], rel=1e-9), df
        assert stats.t_quantile(df) == stats.T95[df - 1]  # the committed tables' values, unchanged


def test_the_t_quantile_agrees_with_mpmath() -> None:
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    for df in (3, 4, 7, 15, 31, 120, 2500):
        for level in (0.5, 0.9, 0.99, 0.999):
            v, alpha = mp.mpf(df), 1 - mp.mpf(level)

            def tail(t: Any, v: Any = v, alpha: Any = alpha) -> Any:
                return mp.betainc(v / 2, mp.mpf(1) / 2, 0, v / (v + t**2), regularized=True) - alpha

            q = stats.t_quantile(df, level)
            assert q == pytest.approx(float(mp.findroot(tail, q)), rel=1e-10), (df, level)


def test_the_t_quantile_rises_with_the_level_falls_with_df_and_tends_to_the_normal() -> None:
    from statistics import NormalDist

    for df in (1, 2, 3, 5, 10, 40):
        qs = [stats.t_quantile(df, lv) for lv in LEVELS]
        assert all(a < b for a, b in zip(qs, qs[1:])), df
    for level in (0.5, 0.9, 0.95 - 1e-15, 0.99, 0.999):
        qs = [stats.t_quantile(df, level) for df in (1, 2, 3, 4, 5, 8, 13, 30, 31, 100, 1000, 10**5)]
        assert all(a > b for a, b in zip(qs, qs[1:])), level
        z = NormalDist().inv_cdf((1 + level) / 2)
        assert stats.t_quantile(10**6, level) == pytest.approx(z, rel=5e-6)
        assert stats.t_quantile(10**6, level) > z


def test_a_99_interval_over_two_values_has_the_exact_width() -> None:
    values = [0.2, 0.6]
    iv = stats.t_interval(values, level=0.99)
    sd = math.sqrt(sum((v - 0.4) ** 2 for v in values))  # n - 1 = 1
    exact = math.tan(math.pi * 0.495) * sd / math.sqrt(2)
    assert iv.hi - iv.mean == pytest.approx(exact, rel=1e-10)


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1, math.nan])
def test_a_level_outside_0_1_is_refused_by_name(level: float) -> None:
    with pytest.raises(ValueError, match="level"):
        stats.t_quantile(3, level)


# -- 3. behaviour weights with -inf off the mask ----------------------------------------------------


@pytest.mark.parametrize("correction", ["tis", "mis", "seq-tis"])
def test_a_minus_inf_log_prob_off_the_mask_gives_weight_0(correction: str) -> None:
    old = torch.tensor([[-1.0, -0.5, -2.0], [-1.0, -math.inf, -0.3]])
    mu = torch.tensor([[-1.2, -0.7, -math.inf], [-1.1, -math.inf, -0.4]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    w = behavior_weights(old, mu, mask, correction)
    assert torch.isfinite(w).all(), w
    assert (w[mask == 0] == 0).all()
    assert (w[mask == 1] > 0).all()
    finite_mu = torch.where(mask == 1, mu, -1.0)  # the same on the mask, anything finite off it
    finite_old = torch.where(mask == 1, old, -3.0)
    assert torch.equal(w, behavior_weights(finite_old, finite_mu, mask, correction))


def _old_weights(old: torch.Tensor, mu: torch.Tensor, mask: torch.Tensor, correction: str) -> torch.Tensor:
    """The weights before the fix, for finite inputs."""
    log_ratio = old - mu
    if correction == "tis":
        return log_ratio.clamp(max=math.log(2.0)).exp() * mask
    if correction == "mis":
        ratio = log_ratio.exp()
        return ratio * ((ratio >= 0.5) & (ratio <= 5.0)).to(ratio.dtype) * mask
    seq = (log_ratio * mask).sum(dim=-1, keepdim=True)
    return seq.clamp(max=math.log(2.0)).exp() * mask


@pytest.mark.parametrize("correction", ["tis", "mis", "seq-tis"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_on_finite_inputs_the_weights_are_bit_for_bit_unchanged(correction: str, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(63)
    old = -torch.rand(16, 24, generator=gen, dtype=dtype) * 3
    mu = old + torch.randn(16, 24, generator=gen, dtype=dtype) * 0.8
    mask = (torch.rand(16, 24, generator=gen) < 0.7).to(dtype)
    new = behavior_weights(old, mu, mask, correction)
    assert torch.equal(new, _old_weights(old, mu, mask, correction))


# -- 4. --eval-every 0 and the command of a resumed file ----------------------------------------------


@pytest.mark.parametrize("module", [staleness, lr_sweep])
def test_eval_every_help_says_0_is_never(module: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        module.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "every k steps (0: never)" in out


def _fake_run_one(
    _base: Any, _tok: Any, lag: int, correction: str, seed: int, steps: int, lr: Any, **_: Any
) -> dict:
    return _run(lag, correction, seed, steps, 3e-4 if lr is None else lr)


@pytest.mark.parametrize("module", [staleness, lr_sweep])
def test_resume_keeps_the_first_command_and_adds_its_own(
    module: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "load_base", lambda gym: (None, None, {"pass_rate": 0.1, "reads": 1.0}))
    monkeypatch.setattr(module, "run_one", _fake_run_one)
    path = str(tmp_path / "runs.json")
    grid = ["--lags", "0", "2", "--corrections", "none", "--steps", "3", "--eval-every", "0"]
    if module is lr_sweep:
        grid += ["--lrs", "3e-4"]
    first = [*grid, "--seed-list", "1", "--json", path]
    second = [*grid, "--seed-list", "1", "2", "--json", path, "--resume"]
    third = [*grid, "--seed-list", "1", "2", "3", "--json", path, "--resume"]
    assert module.main(first) == 0
    assert "resumed_with" not in json.loads(Path(path).read_text())
    assert module.main(second) == 0
    assert module.main(third) == 0
    payload = json.loads(Path(path).read_text())
    assert payload["command"] == f"{module.PROG} " + " ".join(first)
    assert payload["resumed_with"] == [f"{module.PROG} " + " ".join(a) for a in (second, third)]
    assert len(payload["runs"]) == 6
