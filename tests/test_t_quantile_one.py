"""One Student-t quantile inside pipesim: the sweep's, the plan's and calibrate's read the same
function (they were three tables that disagreed: 2.228 / 2.201 at df 11; 1.96 / 2.021 at df 31);
offpolicy, which may not import pipesim, keeps its own and agrees with it."""

from __future__ import annotations

import math

import pytest

from offpolicy import stats as offstats
from pipesim.calibrate.fit import small_sample, t95
from pipesim.io.sweep_grid import t_quantile_975
from pipesim.plan import stats as planstats


@pytest.mark.parametrize("df", [1, 2, 5, 11, 29, 30, 31, 45, 120, 121, 1000])
def test_every_copy_gives_the_same_quantile(df: int) -> None:
    q = t_quantile_975(df)
    assert t95(df) == q and planstats.t95(df) == q
    assert math.isclose(offstats.t_quantile(df), q, rel_tol=2e-3)


@pytest.mark.parametrize(("value", "lo", "hi"), [(10.0, 11.0, 15.0), (10.0, 5.0, 9.0), (10.0, 8.0, 12.0)])
def test_small_sample_never_narrows_the_bootstraps_ends(value: float, lo: float, hi: float) -> None:
    """An estimate outside its bootstrap interval moved an end inwards: (10, [11, 15]) gave [12.7, 23.4]."""
    a, b = small_sample(value, lo, hi, 3)
    assert a <= min(lo, value) and b >= max(hi, value)
