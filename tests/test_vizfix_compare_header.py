"""The line above ``pipesim compare``'s table says which differences are paired by seed.

Before: ``pipesim compare fig13.1-sync runs/eta1 --seeds 3`` headed ``B - A`` "the paired
difference per seed", though a saved run is one run (seed 0) and its difference is that value
less the other design's 3-seed mean: nothing is paired. Tested on the header's inputs (the designs'
per-seed summaries), so no run is needed.
"""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from pipesim.io.cli_compare import _header

PAIRED, ALONE = "the paired difference per seed", "not paired"


def _cmp(rows: dict[str, int]) -> SimpleNamespace:
    per_seed = {n: pd.DataFrame({"throughput_per_hour": [1.0] * k}) for n, k in rows.items()}
    return SimpleNamespace(per_seed=per_seed, seeds=3, done=3, partial=False)


@pytest.mark.parametrize(
    ("rows", "paired", "alone"),
    [
        ({"a": 3, "b": 3}, ["b - a"], []),
        ({"a": 3, "b": 1}, [], ["b - a"]),  # b: a saved run
        ({"a": 1, "b": 3}, [], ["b - a"]),  # the first design a saved run
        ({"a": 3, "b": 3, "c": 1}, ["b - a"], ["c - a"]),
    ],
)
def test_only_differences_of_designs_run_over_seeds_are_called_paired(
    rows: dict[str, int], paired: list[str], alone: list[str]
) -> None:
    said = {part.split(": ", 1)[0]: part for part in _header(_cmp(rows)).split("; ")[1:]}
    assert sorted(k for k, v in said.items() if PAIRED in v) == paired
    assert sorted(k for k, v in said.items() if ALONE in v) == alone


@pytest.mark.parametrize(
    ("runs", "seeds", "paired_only"),
    [([3, 3], 3, True), ([3, 1], 3, False), ([1, 3, 3], 3, False), ([1, 1], 1, None)],
)
def test_the_json_interval_says_paired_only_where_every_design_ran_over_seeds(
    runs: list[int], seeds: int, paired_only: bool | None
) -> None:
    """``compare --json``'s ``interval`` said "differences paired by seed" of a saved run too."""
    from pipesim.io.cli_compare import _interval_note

    note = _interval_note(seeds, runs)
    if paired_only is None:
        assert note is None
    else:
        assert note is not None and "paired by seed" in note
        assert ("not paired" in note) is (not paired_only), note
