"""No command writes a file inside a saved run: a saved run holds exactly the files its manifest
lists, so one output added there (``pipesim report runs/x --out runs/x/r.html``) made every later
``pipesim.load``, report and trace of that run fail with "not listed in manifest.json". Each output
option is refused up front, exit 2, naming the option and the run, and the run still loads."""

from __future__ import annotations

from pathlib import Path

import pytest

import pipesim
from pipesim.io.cli import main
from pipesim.io.registry import get_scenario

SMALL = ["--set", "n_slots=4", "--set", "batch_size=4", "--set", "steps=2"]

OUTPUTS = [  # (option named in the error, argv with RUN for the saved run's directory)
    ("out", ["report", "RUN", "--out", "RUN/r.html"]),
    ("out", ["trace", "RUN", "--out", "RUN/t.json"]),
    ("html", ["run", "async-eta1", *SMALL, "--html", "RUN/run.html"]),
    ("json", ["run", "async-eta1", *SMALL, "--json", "RUN/run.json"]),
    ("events", ["run", "async-eta1", *SMALL, "--events", "RUN/events.csv"]),
    ("out", ["export", "async-eta1", "--out", "RUN/s.toml"]),
    ("csv", ["sweep", "async-eta1", *SMALL, "--over", "max_staleness=0,1", "--csv", "RUN/s.csv"]),
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("outputs") / "run"
    pipesim.run(get_scenario("async-eta1").with_(n_slots=4, batch_size=4, steps=2)).save(d)
    return d


@pytest.mark.parametrize(("option", "argv"), OUTPUTS, ids=[f"{a[0]}-{o}" for o, a in OUTPUTS])
def test_an_output_inside_a_saved_run_is_refused_and_the_run_still_loads(
    saved: Path, option: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(p.name for p in saved.iterdir())
    assert main([a.replace("RUN", str(saved)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"--{option}" in err and "saved run" in err and str(saved) in err
    assert sorted(p.name for p in saved.iterdir()) == before
    pipesim.load(saved)  # nothing was added: it loads as saved


def test_a_folder_below_a_saved_run_is_inside_it(saved: Path) -> None:
    """A folder made inside a run (which already breaks it) is no way around the check."""
    from pipesim.io.cli_common import saved_run_holding

    assert saved_run_holding(saved) == saved and saved_run_holding(saved.parent) is None
    assert saved_run_holding(saved / "sub" / "deeper").resolve() == saved.resolve()


def test_an_output_next_to_a_saved_run_is_written(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = saved.parent / "r.html"
    assert main(["report", str(saved), "--out", str(out)]) == 0
    assert out.is_file()
    pipesim.load(saved)
