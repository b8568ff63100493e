"""Figure 13.2 over a sweep of more axes than eta and the weight update draws a line per cell.

Before: ``staleness_throughput_figure`` grouped by ``by`` alone, so over max_staleness x
weight_update x n_slots the n_slots=16 and 64 cells of one policy were one zig-zag line (two
points at each eta), while ``lines_figure`` split them and docs/viz.md promised a ValueError for
rows no axis tells apart.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from pipesim.io.viz import staleness_throughput_figure


def _agg(slots: tuple[int, ...] = (16, 64)) -> pd.DataFrame:
    rows = []
    for eta in (0, 1, 2, 4):
        for wu in ("PartialRollout()", "Drain()"):
            for n in slots:
                row: dict[str, Any] = {"max_staleness": eta, "weight_update": wu, "n_slots": n, "n_seeds": 2}
                thr = n * (eta + 1) * (1.0 if wu == "PartialRollout()" else 0.5)
                for m, v in (("throughput_per_hour", thr), ("staleness_mean", eta / 2 + n / 100)):
                    row |= {f"{m}_mean": v, f"{m}_lo": v * 0.9, f"{m}_hi": v * 1.1}
                row |= {
                    "staleness_max_mean": eta + n / 10,
                    "staleness_max_lo": eta,
                    "staleness_max_hi": eta + 9,
                }
                rows.append(row)
    return pd.DataFrame(rows)


def _lines(fig: Any, col: int) -> dict[str, Any]:
    xaxis = "x" if col == 1 else "x2"
    return {t.name: t for t in fig.data if t.mode == "lines+markers" and t.xaxis == xaxis}


def test_each_cell_of_the_extra_axis_is_its_own_line() -> None:
    agg = _agg()
    fig = staleness_throughput_figure(agg)
    left = _lines(fig, 1)
    assert len(left) == 4  # two policies x two slot counts
    for name, t in left.items():
        assert list(t.x) == [0, 1, 2, 4]  # each eta once: no zig-zag
        wu = "PartialRollout()" if name.startswith("partial") else "Drain()"
        n = 16 if "n_slots=16" in name else 64
        assert f"n_slots={n}" in name
        want = agg[(agg["weight_update"] == wu) & (agg["n_slots"] == n)].sort_values("max_staleness")
        assert list(t.y) == list(want["throughput_per_hour_mean"])
    right = _lines(fig, 2)  # the partial rollouts' staleness, one mean and one max per slot count
    assert len(right) == 4 and all(list(t.x) == [0, 1, 2, 4] for t in right.values())
    assert {n for n in right if "n_slots=16" in n} and {n for n in right if "n_slots=64" in n}
    assert "n slots" in fig.layout.legend.title.text


def test_without_an_extra_axis_the_lines_are_named_by_policy_alone() -> None:
    fig = staleness_throughput_figure(_agg((16,)).drop(columns="n_slots"))
    assert set(_lines(fig, 1)) == {"partial rollout", "drain"}
    assert set(_lines(fig, 2)) == {"mean staleness", "max staleness"}


def test_rows_no_axis_tells_apart_are_a_value_error() -> None:
    agg = _agg((16,)).drop(columns="n_slots")
    with pytest.raises(ValueError, match="max_staleness"):
        staleness_throughput_figure(pd.concat([agg, agg.assign(throughput_per_hour_mean=1.0)]))
