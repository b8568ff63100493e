"""What ``pipesim compare`` shows: a slot run against a compute run has no difference in the rows
whose meaning differs between the engines, and its figure's panels carry the table's qualifier;
``--json`` writes a missing number as null; long design arguments head their columns as letters;
the figure's bars read as the table's numbers, its axes with thousands separators; a run whose
tail after its last training step weighs on throughput gets the note ``pipesim run`` prints."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import pipesim
from pipesim.io.cli_common import fmt_number
from pipesim.io.cli_compare import comparison_json, comparison_text
from pipesim.io.compare import Comparison
from pipesim.io.compare_seeds import ENGINE_BOUND_KEYS
from pipesim.io.html import HEADLINE_KEYS
from pipesim.io.registry import get_scenario
from pipesim.plan import runspec

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_verl_8gpu.toml"
LABELS = dict(HEADLINE_KEYS)


@pytest.fixture(scope="module")
def mixed() -> Comparison:
    slot = get_scenario("fig13.1-async").with_(steps=3)
    return pipesim.compare({"slots": slot, "compute": runspec.load(SPEC, ["run.steps=3"])}, seeds=3)


def _diff(cmp: Comparison, key: str) -> dict[str, object]:
    row = cmp.table.iloc[list(cmp.keys).index(key)]
    return {s: row[("compute - slots", s)] for s in ("mean", "lo", "hi", "distinguishable")}


def test_engine_bound_rows_have_no_difference_across_engines(mixed: Comparison) -> None:
    for key in ENGINE_BOUND_KEYS:
        d = _diff(mixed, key)
        assert d["distinguishable"] is None, key
        assert all(math.isnan(float(d[s])) for s in ("mean", "lo", "hi")), (key, d)  # type: ignore[arg-type]
    d = _diff(mixed, "throughput_per_hour")  # a row both engines mean alike keeps its difference
    assert math.isfinite(float(d["mean"])) and d["distinguishable"] is not None  # type: ignore[arg-type]
    assert any("compute - slots" in n and "gen_util" in n for n in mixed.notes)


def test_the_same_engine_keeps_every_difference() -> None:
    a, b = get_scenario("fig13.1-sync").with_(steps=2), get_scenario("fig13.1-async").with_(steps=2)
    cmp = pipesim.compare({"sync": a, "async": b}, seeds=3)
    row = cmp.table.iloc[list(cmp.keys).index("gen_util")]
    diff = row["async - sync"]
    assert math.isfinite(diff["mean"]) and diff["distinguishable"] is not None


def test_the_mixed_figure_carries_the_rows_qualifier(mixed: Comparison) -> None:
    label = mixed.table.index[list(mixed.keys).index("gen_util")]
    assert label != LABELS["gen_util"]  # the table qualifies it
    titles = [str(a.text).replace("<br>", " ") for a in mixed.figure.layout.annotations]
    assert label in titles and LABELS["gen_util"] not in titles


def test_json_writes_a_missing_number_as_null(mixed: Comparison) -> None:
    payload = comparison_json(mixed)
    json.dumps(payload, allow_nan=False)
    row = next(r for r in payload["rows"] if r["metric"] == "gen_util")
    assert row["differences"]["compute - slots"] == {
        "mean": None,
        "lo": None,
        "hi": None,
        "distinguishable": None,
    }
    assert "nan" not in json.dumps(payload)


def test_long_arguments_head_their_columns_as_letters() -> None:
    long_a, long_b = "a-rather-long-design-name/sync.toml", "a-rather-long-design-name/async.toml"
    a, b = get_scenario("fig13.1-sync").with_(steps=2), get_scenario("fig13.1-async").with_(steps=2)
    for seeds in (1, 2):
        text = comparison_text(pipesim.compare({long_a: a, long_b: b}, seeds=seeds))
        assert text.count(long_a) == 1 and text.count(long_b) == 1, text  # the legend line alone
        legend, *table = text.splitlines()
        assert long_a in legend and long_b in legend
        assert max(len(line) for line in table) < len(long_a) * 2 + 40 * seeds
    short = comparison_text(pipesim.compare({"sync": a, "async": b}, seeds=2))
    assert "async - sync" in short  # short names head their own columns


def test_bars_read_as_the_table_and_axes_with_thousands_separators() -> None:
    a, b = get_scenario("fig13.1-sync").with_(steps=2), get_scenario("fig13.1-async").with_(steps=2)
    cmp = pipesim.compare({"sync": a, "async": b}, seeds=2)
    bars = cmp.figure.data[0]  # episodes / hour
    for name, text in zip(bars.x, bars.text):
        mean = cmp.table.loc["episodes / hour", (name, "mean")]
        assert float(text.replace(",", "")) == pytest.approx(float(fmt_number(mean).replace(",", "")))
    assert all(ax.tickformat == "," for ax in cmp.figure.select_yaxes())


def test_a_long_tail_after_the_last_step_gets_the_note_per_design() -> None:
    drain = get_scenario("async-eta4-drain").with_(steps=3)  # 31% of its time after the last step
    for seeds in (1, 2):
        cmp = pipesim.compare({"drain": drain, "sync": get_scenario("fig13.1-sync")}, seeds=seeds)
        tail = [n for n in cmp.notes if "last training step" in n]
        assert len(tail) == 1 and tail[0].startswith("drain:"), cmp.notes


def test_a_terminals_width_wraps_the_table_into_blocks_with_the_same_cells() -> None:
    """Five designs over seeds made a table about 600 characters wide: at a terminal's width the
    columns wrap into blocks, each line within the width and each block headed by the metric
    names again, every cell still there once; no width (a file, a pipe) is one block."""
    designs = {"sync": get_scenario("fig13.1-sync").with_(steps=2)}
    for eta in (1, 2):
        designs[f"async-eta{eta}"] = get_scenario("fig13.1-async").with_(steps=2, max_staleness=eta)
    cmp = pipesim.compare(designs, seeds=2)
    whole, wrapped = comparison_text(cmp), comparison_text(cmp, width=120)
    assert max(len(line) for line in whole.splitlines()) > 120
    assert max(len(line) for line in wrapped.splitlines()) <= 120
    blocks = wrapped.count(cmp.table.index[0])
    assert blocks > 1
    again = [w for name in [cmp.table.index.name, *cmp.table.index] for w in str(name).split()]
    got = sorted(w for w in wrapped.split() if w != "\\")  # pandas' mark of a block going on
    assert got == sorted(whole.split() + again * (blocks - 1))
    assert comparison_text(cmp, width=None) == whole


def test_the_command_wraps_at_a_terminals_width_and_not_for_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import os
    import shutil

    from pipesim.io import cli_compare

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(shutil, "get_terminal_size", lambda *a: os.terminal_size((97, 40)))
    assert cli_compare._terminal_width(Tty()) == 97
    assert cli_compare._terminal_width(io.StringIO()) is None
