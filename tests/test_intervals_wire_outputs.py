"""The outputs that print an interval keep a bounded quantity's interval inside its bounds, and one
seed prints no interval (a5f1295 gave :mod:`offpolicy.stats` and :mod:`pipesim.plan.stats` the
bounds; these are its callers).

* ``offpolicy.lr_sweep.lr_table``, ``offpolicy.fp8.fp8_table``, ``scenarios.cosim_tables.
  claims_table``: every ``mean [lo, hi]`` cell of a rate (reward, pass rate, over-cap share) lies in
  [0, 1], of a mismatch or a read count at or above 0, each holds its mean, and a cut end ``*`` comes
  with :data:`offpolicy.stats.CLIP_NOTE` under the rows. Before: 2 seeds with pass rates 0 and 1
  printed ``0.50 [-5.85, 6.85]``.
* ``pipesim.plan``: one seed prints ``51,951 (1 seed)``, not ``± 0``, the baseline line says there is
  no paired test, and the frame's interval is NaN; ``throughput_lo`` is never below 0; the
  throughput's half-width uses the Student t quantile (1.96 was used from 11 seeds to 30).
"""

from __future__ import annotations

import math
import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pipesim.plan as plan
from offpolicy import stats as ostats
from offpolicy.fp8 import fp8_table
from offpolicy.lr_sweep import lr_table
from pipesim.plan import frame, report
from pipesim.plan.evaluate import aggregate
from scenarios.cosim_tables import claims_table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan import small_spec  # noqa: E402

RATE, NONNEG = ostats.RATE, ostats.NONNEGATIVE
CELL = re.compile(r"^([+-]?\d+\.\d+) \[([+-]?\d+\.\d+)(\*?), ([+-]?\d+\.\d+)(\*?)\]")

BOUNDS: dict[str, ostats.Bounds] = {
    "reward": RATE,
    "held-out": RATE,
    "over cap": RATE,
    "mismatch": NONNEG,
    "health": NONNEG,
    "reads": NONNEG,
}
"""What the quantity of a column whose header holds the key can take (every table's headers)."""


def _check_table(text: str) -> int:
    """Every interval cell of the first block of ``text`` lies within its column's bounds and holds
    its mean, the note is under the rows exactly when a cell was cut, and the paired block's
    differences of rates lie in [-1, 1]. Returns how many cells it checked."""
    block, _, paired = text.partition("\n\n")
    head, *rows = block.splitlines()
    names = [h.strip() for h in head.split(" | ")]
    cells = []
    for row in rows:
        if row == ostats.CLIP_NOTE:
            continue
        for name, cell in zip(names, row.split(" | "), strict=True):
            bounds = next((b for key, b in BOUNDS.items() if key in name), None)
            if bounds is None:
                continue
            m = CELL.match(cell.strip())
            assert m is not None, (name, cell)
            mean, lo, hi = float(m[1]), float(m[2]), float(m[4])
            assert bounds[0] <= lo <= mean <= hi <= bounds[1], (name, cell)
            cells.append(cell)
    assert (ostats.CLIP_NOTE in rows) == any(ostats.CLIP_MARK in c for c in cells)
    for line in paired.splitlines()[1:]:  # name | difference [lo, hi] | n | p | verdict
        if " | " in line and (m := CELL.match(line.split(" | ")[1].strip())):
            assert -1.0 <= float(m[2]) <= float(m[1]) <= float(m[4]) <= 1.0, line
    return len(cells)


def _run(seed: int, v: dict[str, float], steps: int = 4, **keys: Any) -> dict[str, Any]:
    """A run whose every step has the same reward, mismatch and over-cap share."""
    row = {k: v[k] for k in ("reward", "mismatch", "over_cap")}
    row |= {"health_p99": v["mismatch"], "health_max": 2 * v["mismatch"]}
    heldout = {"pass_rate": v["pass_rate"], "reads": v["reads"]}
    return {
        "steps": steps,
        "seed": seed,
        "history": [dict(row) for _ in range(steps)],
        "heldout": heldout,
        **keys,
    }


def _tables(seeds: list[dict[str, float]]) -> dict[str, str]:
    """The three tables over runs whose seed i has ``seeds[i]``'s values (the other settings of a
    table: the same values, the first seed's pass rate and reward swapped for 1 - them)."""
    other = [dict(v, pass_rate=1 - v["pass_rate"], reward=1 - v["reward"]) for v in seeds]
    lr = [_run(s, v, lr=1e-3, lag=0, correction="none") for s, v in enumerate(seeds)]
    lr += [_run(s, v, lr=1e-3, lag=8, correction="none") for s, v in enumerate(other)]
    fp8 = [_run(s, v, sampler="exact", correction="none") for s, v in enumerate(seeds)]
    fp8 += [_run(s, v, sampler="fp8", correction="tis") for s, v in enumerate(other)]
    records = [
        dict(design=d, correction="none", seed=s, summary=dict(final_pass_rate=v["pass_rate"]))
        for d, vs in (("sync", seeds), ("one-step", other))
        for s, v in enumerate(vs)
    ]
    return {"lr": lr_table(lr), "fp8": fp8_table(fp8, ["tis"]), "claims": claims_table(records)}


EXTREMES = {"reward": 0.0, "pass_rate": 0.0, "over_cap": 0.0, "mismatch": 0.0, "reads": 0.0}


def test_two_seeds_at_0_and_1_print_the_whole_range_cut_and_marked_with_the_note() -> None:
    """Pass rates (and rewards, shares) 0 and 1 over 2 seeds: t(0.975, 1) = 12.7 reaches far past
    [0, 1] both ways; each table prints 0.50 [0.00*, 1.00*] and says what the mark means."""
    seeds = [EXTREMES, {k: 1.0 for k in EXTREMES}]
    tables = _tables(seeds)
    for name, text in tables.items():
        assert _check_table(text) >= 2
        assert ostats.CLIP_NOTE in text.splitlines(), name
        assert "0.50 [0.00*, 1.00*]" in text or "0.500 [0.000*, 1.000*]" in text, name
    assert "0.500 [0.000*, 6.853]" in tables["lr"]  # a mismatch: cut at 0 only, no upper bound


unit = st.sampled_from([0.0, 1.0]) | st.floats(0.0, 1.0)
SEED = st.fixed_dictionaries(
    {
        "reward": unit,
        "pass_rate": unit,
        "over_cap": unit,
        "mismatch": st.floats(0.0, 3.0),
        "reads": st.floats(0.0, 3.0),
    }
)


@given(st.lists(SEED, min_size=2, max_size=5))
def test_no_table_prints_a_bounded_interval_outside_its_bounds(seeds: list[dict[str, float]]) -> None:
    for name, text in _tables(seeds).items():
        assert _check_table(text) > 0, name


def test_one_seed_prints_no_interval_in_the_offpolicy_tables() -> None:
    for name, text in _tables([EXTREMES]).items():
        block = text.partition("\n\n")[0]
        assert "[1 seed]" in block and " [0." not in block, name


@pytest.fixture(scope="module")
def one_seed() -> plan.PlanResult:
    spec = small_spec(method="grid", seeds=1, baseline=plan.Design(4, 1, 1, "drain"))
    return plan.plan(spec, with_sensitivity=False)


def test_one_seed_prints_no_fake_zero_interval_and_claims_no_paired_test(one_seed: plan.PlanResult) -> None:
    """With one seed the plan's table said ``51,951 ± 0`` and the baseline line 'separated by the
    paired test': there is no interval and no test."""
    text = report.text(one_seed)
    col = report.header(one_seed).index("samples/h ± 95% CI")
    cells = [
        row[col] for evals in (one_seed.feasible, one_seed.front) for row in report.rows(one_seed, evals)
    ]
    assert cells and all(c.endswith(" (1 seed)") and "±" not in c for c in cells)
    assert all(c in text for c in cells)  # the text's tables (and the HTML's: the same rows)
    assert "(one seed: no paired test)" in text and "separated by the paired test" not in text
    df = frame.frame(one_seed)
    assert (df["seeds"] == 1).all()
    assert df[["throughput_ci", "throughput_lo", "throughput_hi"]].isna().all().all()
    assert report.as_json(one_seed)["full"][0]["metrics"]["throughput_ci"] is None  # JSON null, not NaN


def test_the_throughput_interval_is_never_below_zero(one_seed: plan.PlanResult) -> None:
    """A wide interval (a design far slower on one seed) is cut at 0, never a negative samples/h."""
    e = one_seed.full[0]
    wide = replace(e, metrics={**e.metrics, "throughput_ci": 3 * e.throughput})
    row = frame.frame(replace(one_seed, full=[wide, *one_seed.full[1:]])).iloc[0]
    assert row["label"] == e.design.label(one_seed.spec.n_gpus)
    assert row["throughput_lo"] == 0.0 and row["throughput_hi"] == pytest.approx(4 * e.throughput)


def _runs(throughputs: list[float]) -> list[dict[str, float]]:
    return [
        {"throughput_per_hour": t, "staleness_mean": 0.0, "staleness_max": 0.0, "discarded_share": 0.0}
        for t in throughputs
    ]


def test_eleven_seeds_use_t_at_10_degrees_of_freedom_not_the_normal_quantile() -> None:
    """Throughputs 0, 1000, ..., 10000: sd / sqrt(11) = 1000, so the half-width is t(0.975, 10) x
    1000 = 2228.14 (t(10) = 2.228139; 1.96 gave 1960, 12% too narrow)."""
    assert aggregate(_runs([1000.0 * i for i in range(11)]))["throughput_ci"] == pytest.approx(
        2228.139, abs=1e-3
    )


@pytest.mark.parametrize("n", range(2, 32))
def test_the_half_width_is_never_narrower_than_the_exact_t_interval(n: int) -> None:
    """Against scipy's t(0.975, n - 1) (:data:`offpolicy.stats.T95`, to df 30): equal where the
    quantile is tabulated, wider (the next lower tabulated df) in between, never narrower."""
    thr = [1000.0 * i + 37.0 * i * i for i in range(n)]
    ratio = aggregate(_runs(thr))["throughput_ci"] / (statistics.stdev(thr) / math.sqrt(n))
    exact = ostats.T95[n - 2]
    assert ratio >= exact - 1e-9
    if n - 1 in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 30):
        assert ratio == pytest.approx(exact)
