"""``pipesim compare`` pinned as printed and written: the verdict, each bracket's order, the
difference's mean and interval in each branch (paired t, a run given once, seeds that repeated one
run, one finished seed), the floor at 0 and the cap at 1, the notes, the seed guards, the
given-twice message, the headers and the figure. Each test kills a mutant that the suites of
``test_compare_cli.py`` and ``test_compare2_*.py`` let through (a mutation audit of compare)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pipesim
from pipesim.io import cli_compare
from pipesim.io.cli import main
from pipesim.io.cli_common import fmt_number
from pipesim.io.cli_compare import _header, comparison_json, comparison_text
from pipesim.io.cli_parser import build_parser
from pipesim.io.compare import CompareFailed, CompareInterrupted, Comparison
from pipesim.io.compare_figure import FIGURE_METRICS, comparison_figure
from pipesim.io.compare_seeds import seed_table
from pipesim.io.registry import get_scenario
from pipesim.policies.base import CountThrottle
from pipesim.workload.durations import TraceDurations

SYNC, ASYNC = "fig13.1-sync", "fig13.1-async"
THROUGHPUT = "episodes / hour"
T975_DF1 = 12.706204736  # Student t, 97.5% quantile, 1 degree of freedom (published tables)


def small(name: str) -> Any:
    return get_scenario(name).with_(steps=2)


@pytest.fixture(scope="module")
def four() -> Comparison:
    """Sync against async over seeds 0..3: async's throughput is distinguishably higher."""
    return pipesim.compare({"sync": small(SYNC), "async": small(ASYNC)}, seeds=4)


@pytest.fixture(scope="module")
def two() -> Comparison:
    return pipesim.compare({"sync": small(SYNC), "async": small(ASYNC)}, seeds=2)


def _line(text: str, label: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(label))


# --- A. the verdict and the numbers as printed and written ---------------------------------


def test_the_printed_row_gives_each_bracket_low_then_high_and_the_verdict_yes(four: Comparison) -> None:
    row = four.table.loc[THROUGHPUT]
    line = " ".join(_line(comparison_text(four), THROUGHPUT).split())
    assert row[("async - sync", "distinguishable")] is True and row[("async - sync", "lo")] > 0
    assert line.endswith(" yes"), line
    for col in ("sync", "async", "async - sync"):
        mean, lo, hi = (float(row[(col, s)]) for s in ("mean", "lo", "hi"))
        assert lo < hi
        assert f"{fmt_number(mean)} [{fmt_number(lo)}, {fmt_number(hi)}]" in line, (col, line)


def test_the_json_marks_the_difference_distinguishable(four: Comparison) -> None:
    payload = json.loads(json.dumps(comparison_json(four), allow_nan=False))
    row = next(r for r in payload["rows"] if r["metric"] == "throughput_per_hour")
    diff = row["differences"]["async - sync"]
    assert diff["distinguishable"] is True
    assert diff["lo"] < diff["mean"] < diff["hi"] and diff["lo"] > 0


def test_two_seeds_give_the_paired_t_interval_with_one_degree_of_freedom(two: Comparison) -> None:
    d = (
        two.per_seed["async"]["throughput_per_hour"] - two.per_seed["sync"]["throughput_per_hour"]
    ).to_numpy()
    assert len(d) == 2
    mean, half = float(d.mean()), T975_DF1 * float(d.std(ddof=1)) / math.sqrt(2)
    diff = two.table.loc[THROUGHPUT]["async - sync"]
    assert (diff["mean"], diff["lo"], diff["hi"]) == pytest.approx((mean, mean - half, mean + half), rel=1e-6)
    assert diff["distinguishable"] is (not mean - half <= 0 <= mean + half)
    assert two.notes == ()  # two slot runs: no engine note, no single run, no repeated seeds


def test_the_interval_stops_at_0_for_a_count_and_at_1_for_a_share(two: Comparison) -> None:
    """Two seeds of async: its slot utilisation's t interval runs past 1 and its in-flight count's
    below 0; the table stops them there (a signed difference is left whole)."""
    t = two.table
    gen = t.loc["slot utilisation"]["async"]
    assert gen["hi"] == 1.0 and gen["lo"] < gen["mean"] < gen["hi"]
    flight = t.loc["in flight"]["async"]
    assert flight["lo"] == 0.0 and flight["mean"] > 0
    assert t.loc["in flight"][("async - sync", "lo")] < 0  # the difference is signed: not floored


def test_the_floor_and_the_cap_on_a_synthetic_seed_table() -> None:
    """0 and 3 (mean 1.5, t half-width 19.06) stop at 0; shares 0.9 and 0.99 stop at 1; a metric
    with a value below 0 is signed and keeps its whole interval."""
    seeds = pd.Index([0, 1], name="seed")
    per_seed = {
        "A": pd.DataFrame(
            {"staleness_max": [0.0, 3.0], "gen_util": [0.9, 0.99], "signed": [-1.0, 2.0]}, index=seeds
        ),
        "B": pd.DataFrame(
            {"staleness_max": [1.0, 2.0], "gen_util": [0.5, 0.6], "signed": [0.0, 1.0]}, index=seeds
        ),
    }
    t = seed_table(per_seed, ["staleness_max", "gen_util", "signed"], {}, set())
    half = T975_DF1 * float(np.std([0.0, 3.0], ddof=1)) / math.sqrt(2)
    assert t.loc["staleness_max", ("A", "lo")] == 0.0
    assert t.loc["staleness_max", ("A", "hi")] == pytest.approx(1.5 + half)
    assert t.loc["gen_util", ("A", "hi")] == 1.0
    assert 0 < t.loc["gen_util", ("A", "lo")] < 0.945
    assert t.loc["signed", ("A", "lo")] == pytest.approx(0.5 - T975_DF1 * 1.5)  # below 0: left whole


def test_a_run_given_once_against_seeds_differs_by_its_value_less_their_mean() -> None:
    one = pipesim.run(small(ASYNC))
    cmp = pipesim.compare({"sync": small(SYNC), "async-run": one}, seeds=3)
    diff = cmp.table.loc[THROUGHPUT]["async-run - sync"]
    expected = one.summary()["throughput_per_hour"] - float(
        cmp.per_seed["sync"]["throughput_per_hour"].mean()
    )
    assert expected > 0
    assert diff["mean"] == pytest.approx(expected, rel=1e-12)
    assert math.isnan(diff["lo"]) and math.isnan(diff["hi"]) and diff["distinguishable"] is None
    assert len(cmp.notes) == 1 and cmp.notes[0].startswith("async-run: one run"), cmp.notes
    bar = cmp.figure.data[0]  # throughput: the run given once has no error bar, the seeds one
    assert bar.error_y.array[1] is None and bar.error_y.arrayminus[1] is None
    assert bar.error_y.array[0] > 0


def test_a_saved_run_note_starts_with_its_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "saved"
    assert main(["run", ASYNC, "--save", str(saved)]) == 0
    capsys.readouterr()
    assert main(["compare", SYNC, str(saved), "--seeds", "2"]) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 1 and notes[0].startswith(f"note: {saved}: one run"), notes


# --- B. no interval: seeds that repeat one run, one finished seed -------------------------------


def test_seeds_that_repeat_one_run_give_a_note_and_no_interval() -> None:
    trace = small(SYNC).with_(
        durations=TraceDurations.from_values([40.0, 55.0, 70.0, 90.0, 120.0], cycle=True)
    )
    cmp = pipesim.compare({"trace": trace, "async": small(ASYNC)}, seeds=3)
    assert len(cmp.notes) == 1 and cmp.notes[0].startswith("trace: its 3 seeds gave the same run"), cmp.notes
    row = cmp.table.loc[THROUGHPUT]
    assert math.isnan(row[("trace", "lo")]) and math.isnan(row[("trace", "hi")])
    diff = row["async - trace"]
    assert diff["mean"] == pytest.approx(row[("async", "mean")] - row[("trace", "mean")], rel=1e-12)
    assert math.isnan(diff["lo"]) and math.isnan(diff["hi"]) and diff["distinguishable"] is None


class _Raises:
    """Admits as CountThrottle, but raises at seed 1 once a step has trained."""

    def __init__(self) -> None:
        self.inner = CountThrottle()

    def admits(self, p: Any) -> bool:
        if p.scenario.seed == 1 and p.version >= 1:
            raise RuntimeError("broke")
        return bool(self.inner.admits(p))


@pytest.fixture(scope="module")
def one_seed() -> Comparison:
    """A drain design (a long tail after its last step) and one that fails at seed 1: the partial
    comparison keeps seed 0 only, though the drain design also ran seed 1."""
    drain = get_scenario("async-eta4-drain").with_(steps=3)
    flaky = small(ASYNC).with_(admission=_Raises())
    with pytest.raises(CompareFailed) as info:
        pipesim.compare({"drain": drain, "flaky": flaky}, seeds=3)
    part = info.value.partial
    assert part is not None and part.done == 1 and len(part.per_seed["drain"]) == 1
    return part


def test_one_finished_seed_gives_the_difference_of_its_values(one_seed: Comparison) -> None:
    at0 = {n: float(f["throughput_per_hour"].iloc[0]) for n, f in one_seed.per_seed.items()}
    diff = one_seed.table.loc[THROUGHPUT]["flaky - drain"]
    assert diff["mean"] == pytest.approx(at0["flaky"] - at0["drain"], rel=1e-12)
    assert math.isnan(diff["lo"]) and diff["distinguishable"] is None
    line = " ".join(_line(comparison_text(one_seed), THROUGHPUT).split())
    assert line.endswith(f"{fmt_number(float(diff['mean']))} -"), line  # a number, then no verdict


def test_one_finished_seed_says_no_interval_and_is_no_repeated_run(one_seed: Comparison) -> None:
    assert one_seed.figure.layout.title.text == "designs side by side (mean over 1 seed: no interval)"
    assert not any("gave the same run" in n for n in one_seed.notes), one_seed.notes


def test_the_tail_note_counts_only_the_seeds_every_design_finished(one_seed: Comparison) -> None:
    """The drain design ran seeds 0 and 1, but only seed 0 is in the table: its note is one run's."""
    (note,) = [n for n in one_seed.notes if n.startswith("drain: ")]
    assert "% of the run (" in note and " of 2 runs " not in note, note


# --- C. guards -----------------------------------------------------------------------------------


def test_64_seeds_are_accepted_and_65_refused_by_the_parser() -> None:
    def stop(*_: Any) -> None:
        raise KeyboardInterrupt

    with pytest.raises(CompareInterrupted) as info:  # accepted: it started running
        pipesim.compare({"a": small(SYNC), "b": small(ASYNC)}, seeds=64, on_run=stop)
    assert info.value.n == 64 and info.value.done == 0
    parser = build_parser()
    assert parser.parse_args(["compare", "a", "b", "--seeds", "64"]).seeds == 64
    with pytest.raises(SystemExit):
        parser.parse_args(["compare", "a", "b", "--seeds", "65"])


def test_a_link_to_a_saved_run_beside_it_is_given_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", ASYNC, "--save", "saved"]) == 0
    Path("link").symlink_to("saved")
    capsys.readouterr()
    assert main(["compare", "saved", "link"]) == 2
    err = capsys.readouterr().err
    assert "'link' is given twice (arguments 1 and 2)" in err, err


def test_given_twice_names_both_argument_positions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", SYNC, ASYNC, SYNC]) == 2
    err = capsys.readouterr().err
    assert "is given twice (arguments 1 and 3)" in err, err


# --- D. headers, the figure, the progress bar ----------------------------------------------------


def test_the_header_names_the_seeds_and_the_columns_one_verdict(four: Comparison) -> None:
    assert "over seeds 0..3 of each design" in _header(four)
    head = comparison_text(four).splitlines()[0].split()
    assert head[-1] == "distinguishable" and not any(h.endswith(":") for h in head), head


def test_a_name_of_20_characters_heads_its_column() -> None:
    a, b = "a" * 20, "b" * 20
    cmp = pipesim.compare({a: small(SYNC), b: small(ASYNC)})
    first = comparison_text(cmp).splitlines()[0]
    assert a in first.split() and b in first.split() and "A = " not in first, first


def test_the_error_bars_reach_the_tables_bounds_and_shares_sit_on_0_to_1(four: Comparison) -> None:
    stats = seed_table(four.per_seed, [k for k, _ in FIGURE_METRICS], {}, set())
    names = list(four.per_seed)
    for j, ((key, _), bar) in enumerate(zip(FIGURE_METRICS, four.figure.data), start=1):
        mean = [float(stats.loc[key, (n, "mean")]) for n in names]
        lo = [float(stats.loc[key, (n, "lo")]) for n in names]
        hi = [float(stats.loc[key, (n, "hi")]) for n in names]
        assert list(bar.y) == pytest.approx(mean)
        plus = [math.nan if v is None else v for v in bar.error_y.array]
        minus = [math.nan if v is None else v for v in bar.error_y.arrayminus]
        assert plus == pytest.approx([h - m for h, m in zip(hi, mean)], nan_ok=True), key
        assert minus == pytest.approx([m - lo_ for m, lo_ in zip(mean, lo)], nan_ok=True), key
        axis = four.figure.layout["yaxis" if j == 1 else f"yaxis{j}"]
        if key == "gen_util":
            assert tuple(axis.range) == (0, 1.1)
    row = four.table.loc[THROUGHPUT]  # the first panel against the printed table
    assert four.figure.data[0].error_y.array[0] == pytest.approx(row[("sync", "hi")] - row[("sync", "mean")])
    assert any(v > 0 for v in four.figure.data[0].error_y.arrayminus)


def test_a_metric_a_design_lacks_is_drawn_as_no_bar() -> None:
    fig = comparison_figure({"a": {"throughput_per_hour": 12.5}, "b": {}}, (("throughput_per_hour", "t"),))
    bar = fig.data[0]
    assert bar.y[0] == 12.5 and math.isnan(bar.y[1])
    assert list(bar.text) == ["12.50", ""]


def test_the_progress_bar_counts_every_run_of_every_seed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tqdm

    totals: list[int] = []

    class Bar:
        def __init__(self, total: int, **_: Any) -> None:
            totals.append(total)
            self.n = 0

        def update(self, k: int) -> None:
            self.n += k

        def close(self) -> None:
            pass

    monkeypatch.setattr(cli_compare, "progress_wanted", lambda quiet: True)
    monkeypatch.setattr(tqdm, "tqdm", Bar)
    assert main(["compare", SYNC, ASYNC, "--seeds", "3"]) == 0
    capsys.readouterr()
    assert totals == [2 * 3]


def test_a_metric_a_design_lacks_prints_a_dash_in_its_column() -> None:
    """A design's missing metric reads - in its column, as a difference with no number does (it
    printed nan)."""
    from pipesim.io.cli_compare import _interval

    nan = float("nan")
    assert _interval(nan, nan, nan) == "-"
    assert _interval(2.0, nan, nan) == "2"
    assert _interval(2.0, 1.0, 3.0) == "2 [1, 3]"
