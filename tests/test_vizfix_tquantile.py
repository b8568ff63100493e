"""One Student t quantile for sweeps and plans, accurate past 30 degrees of freedom.

Before: ``sweep_grid.t975`` and ``plan.stats.t95`` each kept a table to df 30 and used 1.96
beyond (4% too narrow at 32 seeds, where t(31) = 2.040), and the plan's took the next lower
tabulated df above 10 (2.228 at df 11, where t(11) = 2.201).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pipesim.io.sweep_grid import aggregate, t975
from pipesim.plan.stats import t95

SCIPY = {  # scipy.stats.t.ppf(0.975, df)
    1: 12.706205, 2: 4.302653, 3: 3.182446, 4: 2.776445, 5: 2.570582, 10: 2.228139, 15: 2.13145,
    20: 2.085963, 21: 2.079614, 22: 2.073873, 23: 2.068658, 24: 2.063899, 25: 2.059539,
    26: 2.055529, 27: 2.051831, 28: 2.048407, 29: 2.04523, 30: 2.042272, 31: 2.039513,
    32: 2.036933, 33: 2.034515, 35: 2.030108, 40: 2.021075, 45: 2.014103, 50: 2.008559,
    60: 2.000298, 70: 1.994437, 80: 1.990063, 90: 1.986675, 100: 1.983972, 120: 1.97993,
    150: 1.975905, 200: 1.971896, 500: 1.96472, 1000: 1.962339,
}  # fmt: skip


def test_the_quantile_falls_with_df_stays_above_the_normal_and_matches_scipy() -> None:
    values = [t95(df) for df in range(1, 201)]
    assert all(a > b for a, b in zip(values, values[1:]))  # strictly decreasing
    assert min(values) >= 1.96
    for df, exact in SCIPY.items():
        assert t95(df) == pytest.approx(exact, abs=1e-3), df


def test_past_30_the_expansion_is_close_to_exact() -> None:
    for df, exact in SCIPY.items():
        if df > 30:
            assert abs(t95(df) - exact) < 1e-5, df


def test_the_sweep_and_the_plan_share_one_quantile() -> None:
    for n in range(2, 300):
        assert t975(n) == t95(n - 1)
    assert math.isnan(t975(1))


def test_a_sweep_of_32_seeds_uses_t_at_31_degrees_of_freedom() -> None:
    vals = [float(i) for i in range(32)]
    runs = pd.DataFrame({"design": "a", "seed": range(32), "status": "ok", "x": vals})
    row = aggregate(runs, ["design"], ["x"]).iloc[0]
    sd = pd.Series(vals).std(ddof=1)
    assert (row["x_hi"] - row["x_mean"]) / (sd / math.sqrt(32)) == pytest.approx(2.0395, abs=1e-3)


@pytest.mark.parametrize("df", [0, -3, 2.5, True, "3", None])
def test_a_bad_df_is_refused_naming_df(df: object) -> None:
    with pytest.raises(ValueError) as err:
        t95(df)  # type: ignore[arg-type]
    assert getattr(err.value, "field", "") == "df"


def test_a_huge_df_gives_the_normal_quantile_not_an_overflow() -> None:
    """t_quantile_975(10**400) raised OverflowError (float(df))."""
    from pipesim.io.sweep_grid import t_quantile_975

    q = t_quantile_975(10**400)
    assert q == pytest.approx(1.959964, abs=1e-6) and q <= t_quantile_975(10**6)
