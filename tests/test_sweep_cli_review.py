"""What a user's walkthrough of ``pipesim sweep`` found, each checked through ``main``:

* the progress bar was drawn into a pipe or a file (a CI log filled with carriage returns), though
  the docs say it shows on a terminal;
* a sweep whose every cell failed wrote no ``--csv``, though ``--csv`` is "one row per run";
* one failed cell turned every count in the CSV into a float (``128.0``);
* the note under a one-seed table asked for 3 seeds where 2 already give an interval.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd
import pytest

from pipesim.io.cli import main
from pipesim.io.cli_common import progress_wanted

SMALL = ["--set", "n_slots=8", "--set", "batch_size=8", "--workers", "1"]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("tty", "quiet", "shown"), [(True, False, True), (True, True, False), (False, False, False)]
)
def test_a_progress_bar_only_on_a_terminal_and_never_quiet(
    monkeypatch: pytest.MonkeyPatch, tty: bool, quiet: bool, shown: bool
) -> None:
    monkeypatch.setattr("sys.stderr", _Tty() if tty else io.StringIO())
    assert progress_wanted(quiet) is shown


def test_a_sweep_into_a_pipe_draws_no_bar(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "async-eta1", *SMALL, "--set", "steps=2", "--over", "max_staleness=0,1"]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "run/s" not in err and "sweep async-eta1" not in err


def test_every_cell_failing_still_writes_each_failure_to_the_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs.csv"
    argv = ["sweep", "async-eta1", *SMALL, "--over", "steps=300000,400000", "--csv", str(out)]
    assert main(argv) == 2
    assert str(out) in capsys.readouterr().err
    rows = pd.read_csv(out)
    assert list(rows["steps"]) == [300000, 400000] and set(rows["status"]) == {"failed"}
    assert rows["error"].str.contains("pool_size").all()


def test_counts_stay_integers_in_the_csv_beside_a_failed_cell(tmp_path: Path) -> None:
    out = tmp_path / "runs.csv"
    argv = ["sweep", "async-eta1", *SMALL, "--over", "steps=2,300000", "--csv", str(out)]
    assert main(argv) == 0
    rows = pd.read_csv(out, dtype=str, keep_default_na=False)
    ok, failed = rows[rows["status"] == "ok"], rows[rows["status"] == "failed"]
    assert len(ok) == 1 and len(failed) == 1
    counts = [c for c in rows if c.startswith("episodes_")]
    assert counts and all(ok[c].iloc[0].isdigit() for c in counts), ok[counts].to_dict("records")
    assert all(failed[c].iloc[0] == "" for c in counts)
    assert not math.isnan(float(ok["throughput_per_hour"].iloc[0]))


def test_the_one_seed_note_asks_for_the_seeds_that_give_an_interval(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["sweep", "async-eta1", *SMALL, "--set", "steps=2", "--over", "max_staleness=1"]
    assert main(base) == 0
    note = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    n = int(note[0].split("--seeds ")[1].split()[0])
    assert main([*base, "--seeds", str(n)]) == 0
    table = capsys.readouterr()
    assert "note:" not in table.err and "NaN" not in table.out


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_misspelt_preset_parameter_is_suggested_and_the_parameters_listed(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--set`` listed the preset's parameters and ``--over`` did not; neither suggested one."""
    flag = "--set" if command == "run" else "--over"
    value = "1" if command == "run" else "1,2"
    assert main([command, "systems:areal", flag, f"max_head_ofpolicyness={value}"]) == 2
    err = capsys.readouterr().err
    assert "did you mean max_head_offpolicyness?" in err
    assert "parameters of systems:areal: max_head_offpolicyness" in err


def test_a_share_interval_stops_at_1_as_at_0() -> None:
    """Two seeds of a utilisation near 1 gave ``gen_util_hi 1.069``; a count's band is not capped."""
    from pipesim.io.sweep_grid import aggregate, shares_of

    runs = pd.DataFrame(
        {
            "design": ["a", "a"],
            "status": ["ok", "ok"],
            "gen_util": [0.95, 1.0],
            "episodes_trained": [5.0, 9.0],
        }
    )
    metrics = ["gen_util", "episodes_trained"]
    assert shares_of(metrics) == ("gen_util",)
    row = aggregate(runs, ["design"], metrics, metrics, shares_of(metrics)).iloc[0]
    assert row["gen_util_hi"] == 1.0 and 0 <= row["gen_util_lo"] < 0.95
    assert row["episodes_trained_hi"] > 9.0
