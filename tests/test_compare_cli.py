"""``pipesim compare`` and ``pipesim.compare(designs, seeds=N)``: each design's mean and 95% t
interval over seeds 0..N-1, the paired difference with the first design and whether it is
distinguishable from seed noise; a saved run stands as one value; bad input is refused naming the
argument; Ctrl-C keeps the seeds every design finished and exits 130."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pipesim
from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.compare import CompareInterrupted, Comparison
from pipesim.io.registry import get_scenario
from tests.test_refusals_core import check_refusal

SYNC, ASYNC = "fig13.1-sync", "fig13.1-async"  # 8 slots, B = 8, 4 steps: a fraction of a second each
SEEDS = 4
T975_DF3 = 3.182446305  # Student t, 97.5% quantile, 3 degrees of freedom (published tables)
THROUGHPUT = "episodes / hour"


def small(name: str) -> Any:
    """The preset cut to 2 steps: the Python API's tests run many of them."""
    return get_scenario(name).with_(steps=2)


@pytest.fixture(scope="module")
def sync_async() -> Comparison:
    return pipesim.compare({"sync": small(SYNC), "async": small(ASYNC)}, seeds=SEEDS)


def _t_interval(values: np.ndarray) -> tuple[float, float, float]:
    mean = float(values.mean())
    half = T975_DF3 * float(values.std(ddof=1)) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def test_the_intervals_are_t_intervals_over_seeds_0_to_n_and_the_difference_is_paired(
    sync_async: Comparison,
) -> None:
    """Recomputed here from runs at seeds 0..3, with numpy and the tabulated t quantile."""
    runs = {
        name: np.array(
            [pipesim.run(small(p).with_(seed=s)).summary()["throughput_per_hour"] for s in range(SEEDS)]
        )
        for name, p in (("sync", SYNC), ("async", ASYNC))
    }
    row = sync_async.table.loc[THROUGHPUT]
    for name, values in runs.items():
        mean, lo, hi = _t_interval(values)
        assert row[(name, "mean")] == pytest.approx(mean, rel=1e-12)
        assert row[(name, "lo")] == pytest.approx(max(lo, 0.0), rel=1e-12)  # a rate: stops at 0
        assert row[(name, "hi")] == pytest.approx(hi, rel=1e-12)
        assert row[(name, "lo")] <= row[(name, "mean")] <= row[(name, "hi")]
    mean, lo, hi = _t_interval(runs["async"] - runs["sync"])  # paired by seed
    diff = row["async - sync"]
    assert (diff["mean"], diff["lo"], diff["hi"]) == pytest.approx((mean, lo, hi), rel=1e-12)
    assert list(sync_async.per_seed["sync"].index) == list(range(SEEDS))


def test_an_async_design_is_distinguishable_from_synchronous(sync_async: Comparison) -> None:
    diff = sync_async.table.loc[THROUGHPUT]["async - sync"]
    assert diff["distinguishable"] is True and diff["lo"] > 0


def test_identical_designs_are_not_distinguishable() -> None:
    scen = small(SYNC)
    table = pipesim.compare({"a": scen, "b": scen}, seeds=3).table
    diff = table["b - a"]
    assert (diff["lo"] <= 0).all() and (diff["hi"] >= 0).all(), diff
    assert not diff["distinguishable"].astype(bool).any()
    assert set(diff["distinguishable"]) == {False}  # an interval on every row, none excludes 0
    assert (table["a"]["hi"] > table["a"]["lo"]).any()  # the seeds did differ


def test_a_saved_run_stands_as_one_value_and_the_output_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "saved"
    assert main(["run", ASYNC, "--save", str(saved)]) == 0
    capsys.readouterr()
    out_json = tmp_path / "t.json"
    assert main(["compare", SYNC, str(saved), "--seeds", "3", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "note:" in out and "one run" in out and str(saved) in out
    payload = json.loads(out_json.read_text())
    row = next(r for r in payload["rows"] if r["metric"] == "throughput_per_hour")
    one = row["values"][str(saved)]
    assert one["lo"] is None and one["hi"] is None  # null, as pipesim fit --json writes NaN
    assert one["mean"] == pytest.approx(pipesim.load(saved).summary()["throughput_per_hour"])
    assert row["differences"][f"{saved} - {SYNC}"]["distinguishable"] is None
    assert payload["designs"][str(saved)]["runs"] == 1 and payload["designs"][SYNC]["runs"] == 3
    assert any("one run" in n for n in payload["notes"])


def test_the_command_prints_the_table_and_writes_json_and_an_offline_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "c.html"
    assert main(["compare", SYNC, ASYNC, "--seeds", "2", "--html", str(page), "--json", "-"]) == 0
    cap = capsys.readouterr()
    payload = json.loads(cap.out)  # stdout is the JSON; the table went to stderr
    assert "distinguishable" in cap.err and THROUGHPUT in cap.err
    assert payload["seeds"] == 2 and payload["partial"] is False
    runs = [pipesim.run(get_scenario(ASYNC).with_(seed=s)).summary()["throughput_per_hour"] for s in (0, 1)]
    row = next(r for r in payload["rows"] if r["label"] == THROUGHPUT)
    assert row["values"][ASYNC]["mean"] == pytest.approx(float(np.mean(runs)), rel=1e-12)
    text = page.read_text()
    assert text.count("<script") == 2 and "<script src" not in text  # plotly.js once, no CDN


def test_one_seed_prints_one_value_per_design(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", SYNC, ASYNC]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith(THROUGHPUT))
    assert "[" not in line and len(line.split()) == 5  # "episodes / hour" and a value per design


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["compare", SYNC, "no-such-design"], "no-such-design"),
        (["compare", SYNC, SYNC], SYNC),
        (["compare", SYNC], "DESIGN"),
        (["compare", SYNC, "{notrun}"], "{notrun}"),
        (["compare", SYNC, ASYNC, "--seeds", "65"], "--seeds"),
        (["compare", SYNC, ASYNC, "--seeds", "0"], "--seeds"),
        (["compare", SYNC, ASYNC, "--seeds", "two"], "--seeds"),
        (["compare", SYNC, ASYNC, "--json", "{notrun}/x/t.json"], "--json"),
    ],
    ids=[
        "unknown",
        "twice",
        "one-design",
        "dir-not-a-run",
        "seeds-over",
        "seeds-zero",
        "seeds-word",
        "json-dir",
    ],
)
def test_bad_command_lines_are_refused_naming_the_argument(
    argv: list[str],
    named: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # short paths: an error shows a long one cut in the middle
    Path("notrun").mkdir()
    Path("notrun", "a.txt").write_text("x")
    argv = [a.replace("{notrun}", "notrun") for a in argv]
    named = named.replace("{notrun}", "notrun")
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own refusal
        status = int(exc.code or 0)
    err = capsys.readouterr().err
    assert status == 2 and named in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("designs", "seeds", "field"),
    [
        ("ab", 0, "seeds"),
        ("ab", 65, "seeds"),
        ("ab", 2.0, "seeds"),
        ("ab", True, "seeds"),
        ("one", 2, "designs"),
        ("not-a-run", 2, "designs['x']"),
    ],
    ids=["seeds-zero", "seeds-over", "seeds-float", "seeds-bool", "one-design", "not-a-run"],
)
def test_bad_api_input_is_refused_naming_the_argument(designs: str, seeds: Any, field: str) -> None:
    scen = get_scenario(SYNC)
    given = {"ab": {"a": scen, "b": scen}, "one": {"a": scen}, "not-a-run": {"a": scen, "x": "sync"}}[designs]
    check_refusal(lambda: pipesim.compare(given, seeds=seeds), FieldError, field)


def test_an_interrupt_keeps_the_seeds_every_design_finished() -> None:
    calls = []

    def stop_on_the_fifth(name: str, seed: int | None) -> None:
        calls.append((name, seed))
        if len(calls) == 5:  # seeds 0 and 1 of both designs done, seed 2 of the first
            raise KeyboardInterrupt

    scen = {"sync": small(SYNC), "async": small(ASYNC)}
    with pytest.raises(CompareInterrupted) as info:
        pipesim.compare(scen, seeds=4, on_run=stop_on_the_fifth)
    part = info.value.partial
    assert info.value.done == 2 and part is not None and part.partial and part.done == 2
    assert all(list(f.index) == [0, 1] for f in part.per_seed.values())
    assert isinstance(info.value, KeyboardInterrupt)


def test_the_command_exits_130_with_the_partial_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipesim.io.compare_runs as cmp_module  # runs each design at each seed

    real, count = cmp_module.run, [0]

    def run_then_stop(scen: Any) -> Any:
        count[0] += 1
        if count[0] == 5:
            raise KeyboardInterrupt
        return real(scen)

    monkeypatch.setattr(cmp_module, "run", run_then_stop)
    out_json = tmp_path / "p.json"
    assert main(["compare", SYNC, ASYNC, "--seeds", "4", "--json", str(out_json)]) == 130
    cap = capsys.readouterr()
    assert "partial" in cap.out and "interrupted" in cap.err
    payload = json.loads(out_json.read_text())
    assert payload["partial"] is True and payload["seeds_done"] == 2


def test_one_file_given_by_two_paths_is_one_design(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``a.toml`` and ``./a.toml`` (or a link to it) name one design: refused as given twice,
    before any run, as the same text is."""
    monkeypatch.chdir(tmp_path)
    assert main(["export", SYNC, "--out", "a.toml"]) == 0
    Path("b.toml").symlink_to("a.toml")
    capsys.readouterr()
    for other in ("./a.toml", "b.toml"):
        assert main(["compare", "a.toml", other]) == 2
        err = capsys.readouterr().err
        assert "given twice" in err and other in err, err
    Path("mine.py").write_text("import pipesim\n\ndef make():\n    return pipesim.Scenario()\n")
    assert main(["compare", "mine.py:make", "./mine.py:make"]) == 2  # a factory by two paths
    err = capsys.readouterr().err
    assert "given twice" in err and "./mine.py:make" in err, err
