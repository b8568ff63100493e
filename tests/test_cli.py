"""The pipesim CLI, mostly in-process through ``main(argv)`` (importing torch per call is slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pipesim.io.cli import main

SMALL = ["--set", "n_slots=8", "--set", "batch_size=8", "--set", "steps=3", "--set", "pool_size=none"]


def test_list_names_builtins(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--keys"]) == 0
    out = capsys.readouterr().out
    for name in (
        "synchronous",
        "one-step-drain",
        "async-eta1",
        "async-eta2",
        "async-eta4-drain",
        "fig13.1-sync",
    ):
        assert any(line.startswith(name + " ") for line in out.splitlines()), name
    assert "max_staleness" in out and "Drain" in out


def test_run_reproduces_chapter_synchronous(capsys: pytest.CaptureFixture[str]) -> None:
    expected = json.loads((Path(__file__).parent / "data" / "chapter13_expected.json").read_text())
    assert main(["run", "synchronous"]) == 0
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if ln.startswith("throughput_per_hour")][0]
    assert float(line.split()[1].replace(",", "")) == pytest.approx(
        expected["designs"]["synchronous"]["result"]["throughput"], rel=1e-3
    )


def test_run_writes_json_events_trace_html_and_trace_rebuilds(tmp_path: Path) -> None:
    j, ev, tr, html = tmp_path / "run.json", tmp_path / "ev.csv", tmp_path / "t1.json", tmp_path / "t.html"
    argv = ["run", "async-eta1", *SMALL, "--set", "weight_update=drain", "--seed", "3"]
    assert main([*argv, "--json", str(j), "--events", str(ev), "--trace", str(tr), "--html", str(html)]) == 0
    payload = json.loads(j.read_text())
    assert payload["scenario"]["pipeline"]["n_slots"] == 8 and payload["scenario"]["seed"] == 3
    assert "Drain" in payload["scenario"]["weight_update"]
    assert payload["summary"]["staleness_max"] <= 1  # drain bounds staleness by eta
    events = pd.read_csv(ev)
    assert set(events["kind"]) >= {"gen", "train", "sync"}
    # trace from the run file is the same trace
    t2 = tmp_path / "t2.json"
    assert main(["trace", str(j), "--out", str(t2)]) == 0
    assert json.loads(t2.read_text()) == json.loads(tr.read_text())
    trace = json.loads(tr.read_text())["traceEvents"]
    xs = [e for e in trace if e["ph"] == "X"]
    assert len([e for e in xs if e["cat"] == "gen"]) == (events["kind"] == "gen").sum()
    assert len([e for e in xs if e["cat"] == "sync"]) == 3
    assert all(e["dur"] >= 0 and "ts" in e for e in xs)
    assert "Plotly.newPlot" in html.read_text()
    # from the events table as well
    t3 = tmp_path / "t3.json"
    assert main(["trace", str(ev), "--out", str(t3)]) == 0
    assert len([e for e in json.loads(t3.read_text())["traceEvents"] if e["ph"] == "X"]) == len(xs)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "synchronous", "--set", "n_slot=8"], "valid keys: n_slots"),
        (["run", "synchronous", "--set", "n_slots=eight"], "n_slots: expected int, got 'eight'"),
        (["run", "synchronous", "--set", "n_slots=0"], "n_slots must be an integer >= 1"),
        (["run", "synchronous", "--set", "weight_update=nope"], "valid policies"),
        (["run", "nope"], "valid scenarios: synchronous"),
        (["sweep", "synchronous", "--over", "max_staleness=a,b"], "max_staleness: expected int"),
        (["sweep", "synchronous", "--over", "bogus=1,2"], "valid keys"),
        (["run", "synchronous", "--events", "x.txt"], "--events"),
        (["trace", "missing.json", "--out", "t.json"], "no such file"),
    ],
)
def test_bad_input_exits_2_with_message(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_sweep_local_pool_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv, html = tmp_path / "a.csv", tmp_path / "a.html"
    argv = [
        "sweep",
        "synchronous",
        *SMALL,
        "--over",
        "max_staleness=0,1",
        "--over",
        "weight_update=partialrollout,drain",
    ]
    assert (
        main([*argv, "--seeds", "2", "--workers", "2", "--csv", str(csv), "--html", str(html), "--quiet"])
        == 0
    )
    runs = pd.read_csv(csv)
    assert len(runs) == 8 and (runs["status"] == "ok").all()
    assert "throughput_per_hour_mean" in capsys.readouterr().out
    assert html.read_text().count("Plotly.newPlot") == 4


@pytest.mark.slow
def test_sweep_dask_local_matches_process_pool(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    argv = ["sweep", "synchronous", *SMALL, "--over", "max_staleness=0,2", "--seeds", "2", "--quiet"]
    assert main([*argv, "--workers", "2", "--csv", str(tmp_path / "p.csv")]) == 0
    assert main([*argv, "--dask", "local", "--timeout-s", "none", "--csv", str(tmp_path / "d.csv")]) == 0
    assert pd.read_csv(tmp_path / "p.csv").equals(pd.read_csv(tmp_path / "d.csv"))


def test_entry_point_module_exit_code() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pipesim", "run", "no-such-design"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "valid scenarios" in proc.stderr and "Traceback" not in proc.stderr


# -- issue 16 / 21: every policy from the command line, scenario sources, errors, output ----------
def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [ln for ln in err.splitlines() if ln.strip()]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (  # a pool that covers the trained tasks but not the in-flight ones runs dry part-way
            ["run", "async-eta2", "--set", "steps=4", "--set", "pool_size=256"],
            "durations pool exhausted",
        ),
        (["run", "fig13.1-sync", "--set", "pool_size=3"], "pool_size (3)"),  # refused before it runs
        (["run", "async-eta2", "--set", "steps=2000"], "pool_size (65,536)"),  # the chapter's pool
        (
            ["run", "fig13.1-sync", "--seed", "100000000000000000000"],
            "--seed must be an integer in [0, 2**64)",
        ),
        (["run", "fig13.1-sync", "--seed", "-1"], "--seed"),
        (["run", "fig13.1-sync", "--json", "pyproject.toml/run.json"], "'pyproject.toml' is a file"),
        (["run", "fig13.1-sync", "--html", "tests"], "--html: 'tests' is a directory"),
        (["run", "fig13.1-sync", "--events", "no/such/dir/ev.csv"], "does not exist"),
        (["sweep", "fig13.1-sync", "--workers", "-1"], "--workers must be at least 1"),
        (["sweep", "fig13.1-sync", "--workers", "100000"], "--workers 100,000: at most"),  # processes
        (["sweep", "fig13.1-sync", "--csv", "no/such/dir/x.csv"], "--csv: directory"),
        (["report", "--seeds", "0"], "--seeds must be an integer from 1 to"),
        (
            ["run", "fig13.1-sync", "--set", "weight_update=InFlightUpdat(load_time_s=2)"],
            "did you mean InFlightUpdate",
        ),
        (["run", "fig13.1-sync", "--set", "admission=Drain()"], "Drain does not fit admission"),
        (
            ["run", "fig13.1-sync", "--set", "admission=AReaLThrottle(max_concurrent=0)"],
            "max_concurrent must be",
        ),
        (["run", "fig13.1-sync", "--set", "timeout=Timeout(cap_s=-1)"], "timeout: Timeout(cap_s=-1): cap_s"),
        (
            ["run", "systems:areal", "--set", "max_head_offpolicyness=x"],
            "max_head_offpolicyness: expected int",
        ),
        (["run", "systems:areal", "--set", "bogus=1"], "parameters of systems:areal: max_head_offpolicyness"),
        (["run", "no/such.toml"], "no such scenario file"),
        (["run", "README.md"], "'README.md' is a file but not a scenario file"),
        (  # an output over the input it reads (fit replaced the trace with JSON)
            [
                "fit",
                "examples/verl_sample_log.csv",
                "--column",
                "timing_s/gen",
                "--json",
                "examples/verl_sample_log.csv",
            ],
            "is the trace this command reads",
        ),
        (
            [
                "calibrate",
                "examples/verl_sample_log.csv",
                "--spec",
                "examples/run_verl_8gpu.toml",
                "--out",
                "b.toml",
                "--json",
                "b.toml",
            ],
            "--out and --json name the same path",
        ),
        (
            [
                "calibrate",
                "examples/verl_sample_log.csv",
                "--spec",
                "examples/run_verl_8gpu.toml",
                "--out",
                "examples/run_verl_8gpu.toml",
            ],
            "is the run spec (--spec) this command reads",
        ),
        (["run", "no_such_pkg.mod:make"], "cannot import module 'no_such_pkg.mod'"),
        (["run", "tests/no_such.py:make"], "no such file"),
        (["run", "scenarios.systems:nope"], "has no 'nope'"),
        (["run", "fig13.1-sync", "--no-such-flag"], "unrecognized arguments"),
        (["sweep", "systems:areal", "--over", "max_head_offpolicyness=1,1"], "a value is given twice"),
        (["export", "fig13.1-sync", "--out", "x.json"], "--out: file must end in"),
        (["sweep", "systems:areal", "--over", "max_head_offpolicyness=1,01"], "a value is given twice"),
        (["sweep", "systems:areal", "--over", "max_head_offpolicyness"], "is not key=v1,v2"),
        (
            ["sweep", "fig13.1-sync", "--over", "max_staleness=0,1", "--over", "max_staleness=2"],
            "--over max_staleness is given twice",
        ),
        (
            [
                "sweep",
                "systems:areal",
                "--over",
                "max_head_offpolicyness=1",
                "--over",
                "max_head_offpolicyness=2",
            ],
            "is given twice",
        ),
        (["sweep", "fig13.1-sync", "--over", "seed=1,2"], "set N with --seeds"),
        (["sweep", "fig13.1-sync", "--over", "max_staleness=0,,1"], "--over max_staleness: an empty value"),
        (["sweep", "systems:areal", "--over", "max_head_offpolicyness=1,,2"], "an empty value"),
        (["export", "fig13.1-sync", "--out", "x.toml", "--format", "yaml"], "--format yaml does not match"),
        (
            ["run", "fig13.1-sync", "--json", "x.json", "--html", "x.json"],
            "--json and --html name the same path",
        ),
        (["run", "fig13.1-sync", "--set", "timeout=Timeout(cap_s=nan)"], "cap_s must be a finite number"),
        (["sweep", "fig13.1-sync", "--seed", "3"], "unrecognized arguments: --seed 3"),  # not --seeds 3
        (["sweep", "examples/run_qwen3_8b.toml", "--over", "design.tp=2,4"], "a run spec (kind"),
        (["sweep", "examples/plan_qwen3_8b.toml", "--over", "design.tp=2,4"], "a plan spec (docs/plan.md)"),
    ],
)
def test_cli_errors_are_one_line_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own errors
        status = int(exc.code or 0)
    assert status == 2
    lines = _err_lines(capsys)
    errors = [ln for ln in lines if ln.startswith(("pipesim: error:", "pipesim run: error:"))]
    assert len(errors) == 1 and needle in errors[0], lines
    assert len(lines) <= 2 and all(ln.startswith(("usage:", "pipesim")) for ln in lines)


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("bin.csv", b"\xcb\xff\x00", "not an events table"),
        ("empty.csv", b"", "not an events table"),
        (
            "nan.csv",
            b"kind,lane,start_s,end_s,version,episode_id\ngen,slot 0,nan,1.0,0,0\n",
            "has start_s = 'nan': need a number",
        ),
        ("r.json", b'{"recipe": {"scenario": 5}}', "its recipe needs a scenario (text)"),
        (
            "v.csv",
            b"kind,lane,start_s,end_s,version,episode_id\ngen,s0,0,1,x,0\n",
            "has version = 'x': need an integer",
        ),
        (
            "i.csv",
            b"kind,lane,start_s,end_s,version,episode_id\ngen,s0,0,1,0,1.5\n",
            "has episode_id = '1.5'",
        ),
        ("h.csv", b"kind,lane,start_s,end_s,version,episode_id\ngen,s0,0,1,1e300,0\n", "version = '1e+300'"),
        (
            "e.csv",
            b"kind,lane,start_s,end_s,version,episode_id\ngen,s0,2,1,0,0\n",
            "row 0 of the events ends",
        ),
        ("k.csv", b"kind,lane,start_s,end_s,version,episode_id\nfoo,s0,0,1,0,0\n", "has kind = 'foo'"),
        (
            "l.csv",
            b"kind,lane,start_s,end_s,version,episode_id\ngen,s0,0,1,0,0\ngen,,0,1,0,1\n",
            "row 1 of the events has lane",
        ),
        ("s.json", b'{"recipe": {"scenario": "fig13.1-sync", "set": [1]}}', "set (a list of text)"),
        ("n.json", b'{"recipe": {"scenario": "fig13.1-sync", "seed": -5}}', "recipe's seed"),  # not --seed
        ("t.json", b'{"recipe": {"scen', "not valid JSON"),  # was "no 'recipe'"
    ],
)
def test_trace_of_a_bad_file_is_one_line(
    name: str, text: bytes, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / name
    src.write_bytes(text)
    assert main(["trace", str(src), "--out", str(tmp_path / "t.json")]) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and needle in lines[0], lines


def test_run_json_is_valid_json_when_the_summary_holds_nan(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "fig13.1-sync", "--set", "steps=2", "--set", "train_time_s=0", "--set", "sync_time_s=0"]
    argv += ["--set", "durations=TraceDurations(values=(0,0), cycle=True)", "--json", "-"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out, parse_constant=pytest.fail)["summary"]  # no bare NaN
    assert summary["gen_util"] == "nan"


def test_sweep_whose_every_cell_fails_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sweep", "async-eta2", "--set", "steps=4", "--set", "pool_size=256", "--workers", "1", "--quiet"]
    assert main(argv) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and "every cell of the sweep failed (1 of 1)" in lines[0]
    assert "durations pool exhausted" in lines[0]


def test_output_paths_are_checked_before_the_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import pipesim.io.api

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("ran before checking the output paths")

    monkeypatch.setattr(pipesim.io.api, "run", boom)
    assert main(["run", "fig13.1-sync", "--html", str(tmp_path)]) == 2
    assert main(["run", "fig13.1-sync", "--json", str(tmp_path / "f" / "x.json")]) == 2
    (tmp_path / "f").write_text("")
    assert main(["run", "fig13.1-sync", "--trace", str(tmp_path / "f" / "t.json")]) == 2


def test_json_to_stdout_sends_tables_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "fig13.1-sync", "--json", "-"]) == 0
    cap = capsys.readouterr()
    payload = json.loads(cap.out)
    assert payload["summary"]["episodes_trained"] == 32
    assert "throughput_per_hour" in cap.err and payload["recipe"]["scenario"] == "fig13.1-sync"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.startswith("pipesim ")


def test_help_of_every_subcommand_describes_each_argument_with_an_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    from pipesim.io.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) >= {"list", "run", "sweep", "report", "trace", "export"}
    for name, sp in sub.choices.items():
        for action in sp._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help and "e.g." in action.help, (name, action.dest)
        with pytest.raises(SystemExit):
            main([name, "--help"])
        out = capsys.readouterr().out
        assert "examples:" in out and f"pipesim {name}" in out, name
        # argparse %-formats help strings, not a description without %(prog): no "%%" shows
        assert "%%" not in out and "%(" not in out, (name, out)
    from pipesim.plan import parser as plan_parser  # the planner parses its own arguments

    for action in plan_parser()._actions:
        if not isinstance(action, argparse._HelpAction):
            assert action.help and "e.g." in action.help, ("plan", action.dest)


def test_numbers_print_as_numbers_and_counts_as_integers(capsys: pytest.CaptureFixture[str]) -> None:
    from pipesim.io.cli import fmt_number

    assert fmt_number(1850.0) == "1,850" and fmt_number(1850.3) == "1,850" and fmt_number(32.0) == "32"
    assert fmt_number(0.000123) == "0.0001230" and fmt_number(101.95) == "102.0" and fmt_number(7) == "7"
    assert main(["run", "systems:areal", "--set", "steps=3"]) == 0
    out = capsys.readouterr().out
    assert "e+" not in out and "e-" not in out
    rows = dict(ln.split() for ln in out.splitlines()[1:])
    assert rows["episodes_trained"] == "192" and "," in rows["throughput_per_hour"]


def test_set_policies_with_arguments(tmp_path: Path) -> None:
    j = tmp_path / "run.json"
    sets = [
        "weight_update=InFlightUpdate(load_time_s=2)",
        "admission=AReaLThrottle(max_concurrent=6)",
        "timeout=Timeout(cap_s=600)",
        "replicas=Replicas(2, LeastLoaded())",
        "durations=LogNormalDurations(median_s=60, sigma=0.5)",
        "sync_time_s=WeightSyncCost(8.2, 10)",
    ]
    argv = ["run", "fig13.1-async", *[x for s in sets for x in ("--set", s)], "--json", str(j)]
    assert main(argv) == 0
    sc = json.loads(j.read_text())["scenario"]
    assert sc["weight_update"] == "InFlightUpdate(load_time_s=2)"
    assert sc["admission"] == "AReaLThrottle(max_concurrent=6)"
    assert sc["timeout"] == "Timeout(cap_s=600)"
    assert sc["replicas"] == "Replicas(n_replicas=2, routing=LeastLoaded())"
    assert sc["durations"] == "LogNormalDurations(median_s=60, sigma=0.5)"
    assert sc["pipeline"]["sync_time_s"] == pytest.approx(1.64)
    # and none (given after a Timeout it was a key given twice, refused since: test_inputs_fix_set_repeats)
    assert main(["run", "fig13.1-async", "--set", "timeout=none"]) == 0


def test_preset_parameters_go_to_the_factory(tmp_path: Path) -> None:
    j = tmp_path / "run.json"
    assert (
        main(
            [
                "run",
                "systems:areal",
                "--set",
                "max_head_offpolicyness=4",
                "--set",
                "steps=3",
                "--json",
                str(j),
            ]
        )
        == 0
    )
    assert json.loads(j.read_text())["scenario"]["pipeline"]["max_staleness"] == 4
    assert (
        main(["run", "systems:pipelinerl", "--set", "load_time_s=0.5", "--set", "steps=2", "--json", str(j)])
        == 0
    )
    assert json.loads(j.read_text())["scenario"]["weight_update"] == "InFlightUpdate(load_time_s=0.5)"


def test_over_takes_policies_with_arguments(tmp_path: Path) -> None:
    from pipesim.io.cli import _parse_over, split_values
    from pipesim.io.registry import get_scenario
    from pipesim.policies.replicas import LeastLoaded, Replicas
    from pipesim.policies.updates import InFlightUpdate

    assert split_values("Replicas(2, LeastLoaded()),Replicas(4, LeastLoaded()), none") == [
        "Replicas(2, LeastLoaded())",
        "Replicas(4, LeastLoaded())",
        "none",
    ]
    over = _parse_over(get_scenario("fig13.1-async"), ["replicas=Replicas(2, LeastLoaded()),none"])
    assert over == {"replicas": [Replicas(2, LeastLoaded()), None]}
    csv = tmp_path / "runs.csv"
    axis = "weight_update=InFlightUpdate(load_time_s=0.5),InFlightUpdate(load_time_s=30)"
    assert (
        main(["sweep", "fig13.1-async", "--over", axis, "--workers", "1", "--quiet", "--csv", str(csv)]) == 0
    )
    runs = pd.read_csv(csv)
    assert list(runs["weight_update"]) == [repr(InFlightUpdate(0.5)), repr(InFlightUpdate(30))]
    assert runs["throughput_per_hour"].nunique() == 2


def test_over_takes_preset_parameters(tmp_path: Path) -> None:
    csv = tmp_path / "runs.csv"
    argv = ["sweep", "systems:areal", "--set", "steps=3", "--over", "max_head_offpolicyness=0,2"]
    assert main([*argv, "--workers", "1", "--quiet", "--csv", str(csv)]) == 0
    runs = pd.read_csv(csv)
    assert list(runs["design"]) == ["max_head_offpolicyness=0", "max_head_offpolicyness=2"]
    assert runs["throughput_per_hour"].iloc[1] > runs["throughput_per_hour"].iloc[0]


def test_scenario_sources_file_module_and_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def summary(argv: list[str]) -> dict[str, float]:
        j = tmp_path / "s.json"
        assert main([*argv, "--json", str(j)]) == 0
        return dict(json.loads(j.read_text())["summary"])

    by_name = summary(["run", "systems:areal", "--set", "steps=3"])
    toml, yml = tmp_path / "areal.toml", tmp_path / "areal.yaml"
    assert main(["export", "systems:areal", "--set", "steps=3", "--out", str(toml)]) == 0
    assert main(["export", "systems:areal", "--set", "steps=3", "--out", str(yml)]) == 0
    assert summary(["run", str(toml)]) == by_name
    assert summary(["run", str(yml)]) == by_name
    assert summary(["run", "scenarios.systems:areal", "--set", "steps=3"]) == by_name
    user = tmp_path / "mine.py"
    user.write_text(
        "from pipesim import PipelineConfig, Scenario\n"
        "def make(n: int = 8) -> Scenario:\n"
        "    return Scenario(pipeline=PipelineConfig(n_slots=n, batch_size=n, steps=2), name='mine')\n"
    )
    small = summary(["run", f"{user}:make", "--set", "n=4"])
    assert small["episodes_trained"] == 8
    # export to stdout, list and trace take the same sources
    capsys.readouterr()
    assert main(["export", f"{user}:make", "--out", "-"]) == 0
    assert 'name = "mine"' in capsys.readouterr().out
    assert main(["list", str(toml)]) == 0
    out = capsys.readouterr().out
    assert "keys for --set" in out and 'type = "AReaLThrottle"' in out
    assert main(["list", "systems:areal"]) == 0
    assert "max_head_offpolicyness (default 2)" in capsys.readouterr().out
    t1, t2 = tmp_path / "t1.json", tmp_path / "t2.json"
    assert main(["trace", str(toml), "--out", str(t1)]) == 0
    assert main(["trace", "systems:areal", "--set", "steps=3", "--out", str(t2)]) == 0
    assert json.loads(t1.read_text()) == json.loads(t2.read_text())


def test_run_file_recipe_of_a_scenario_file_rebuilds_the_trace(tmp_path: Path) -> None:
    toml = tmp_path / "f.toml"
    assert main(["export", "fig13.1-async", "--out", str(toml)]) == 0
    j, t1, t2 = tmp_path / "r.json", tmp_path / "t1.json", tmp_path / "t2.json"
    assert main(["run", str(toml), "--seed", "5", "--json", str(j), "--trace", str(t1)]) == 0
    payload = json.loads(j.read_text())
    assert payload["recipe"]["scenario"] == str(toml.resolve())
    assert payload["scenario_file"]["schema_version"] == 1
    assert main(["trace", str(j), "--out", str(t2)]) == 0
    assert json.loads(t1.read_text()) == json.loads(t2.read_text())


@pytest.mark.parametrize("change", ["edited", "moved"])
def test_a_run_file_traces_its_run_after_its_scenario_file_changes(
    tmp_path: Path, change: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recipe names the file by path: after an edit the trace was of another run (AReaL at
    eta 4 for a run at eta 2), and after a move it failed. The run file's own scenario is traced,
    with a note; --seed still reruns it at another seed."""
    toml = tmp_path / "areal.toml"
    assert main(["export", "systems:areal", "--out", str(toml)]) == 0
    j, direct, later = tmp_path / "r.json", tmp_path / "direct.json", tmp_path / "later.json"
    assert main(["run", str(toml), "--set", "steps=3", "--json", str(j), "--trace", str(direct)]) == 0
    if change == "edited":
        toml.write_text(toml.read_text().replace("max_head_offpolicyness = 2", "max_head_offpolicyness = 4"))
    else:
        toml.rename(tmp_path / "elsewhere.toml")
    capsys.readouterr()
    assert main(["trace", str(j), "--out", str(later)]) == 0
    assert direct.read_bytes() == later.read_bytes()
    assert "tracing the run as" in capsys.readouterr().err
    reseeded = tmp_path / "seed5.json"
    assert main(["trace", str(j), "--seed", "5", "--out", str(reseeded)]) == 0
    assert reseeded.read_bytes() != direct.read_bytes()


@pytest.mark.slow
def test_dask_address_that_does_not_answer_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("distributed")
    assert (
        main(["sweep", "fig13.1-sync", "--dask", "tcp://127.0.0.1:1", "--timeout-s", "none", "--quiet"]) == 2
    )
    lines = _err_lines(capsys)
    assert len(lines) == 1 and "--dask: cannot connect" in lines[0]


USER_POLICY_FILE = '''
from dataclasses import dataclass

from pipesim import PipelineConfig, Scenario


@dataclass(frozen=True)
class HeadroomThrottle:
    """Admit while fewer than ``headroom`` batches are ahead of the trainer."""

    headroom: int = 1

    def admits(self, p) -> bool:
        return p.started < (p.version + 1 + self.headroom) * p.batch_size


def make(headroom: int = 1) -> Scenario:
    return Scenario(
        pipeline=PipelineConfig(n_slots=8, batch_size=8, steps=3, max_staleness=1),
        admission=HeadroomThrottle(headroom),
        name="headroom",
    )
'''


def test_a_users_file_with_its_own_policy_runs_and_sweeps(tmp_path: Path) -> None:
    user = tmp_path / "headroom_user_mod.py"
    user.write_text(USER_POLICY_FILE)
    j, csv = tmp_path / "r.json", tmp_path / "s.csv"
    assert main(["run", f"{user}:make", "--set", "headroom=2", "--json", str(j)]) == 0
    assert "HeadroomThrottle(headroom=2)" in json.loads(j.read_text())["scenario"]["admission"]
    argv = ["sweep", f"{user}:make", "--over", "headroom=1,2", "--workers", "1", "--quiet", "--csv", str(csv)]
    assert main(argv) == 0
    runs = pd.read_csv(csv)
    assert list(runs["status"]) == ["ok", "ok"]


EXAMPLE_POLICY = Path(__file__).resolve().parent.parent / "examples" / "headroom.py"


def test_a_policy_file_of_your_own_is_named_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's example: a ~20-line admission policy in a file, run by name."""
    assert len(EXAMPLE_POLICY.read_text().splitlines()) <= 30
    out = tmp_path / "s.json"
    args = ["run", "synchronous", "--policies", str(EXAMPLE_POLICY), "--json", str(out)]
    assert main([*args, "--set", "admission=HeadroomThrottle(headroom=0)"]) == 0
    tight = json.loads(out.read_text())["summary"]
    assert main([*args, "--set", "admission=HeadroomThrottle(headroom=32)"]) == 0
    loose = json.loads(out.read_text())["summary"]
    assert tight["staleness_max"] == 0  # no headroom: a synchronous pipeline
    assert loose["staleness_max"] >= 1 and loose["throughput_per_hour"] > tight["throughput_per_hour"]
    capsys.readouterr()
    assert main([*args[:-2], "--set", "admission=HeadroomThrottle(headroom=-1)"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "headroom must be an integer >= 0" in err[0] and "Traceback" not in err[0]
    assert main(["run", "synchronous", "--policies", "no/such/file.py"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_pipesim_plan_is_wired_into_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["plan", "--help"])
    assert info.value.code == 0 and "SPEC" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text("nonsense = [")
    assert main(["plan", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip()


@pytest.mark.parametrize("key", ["steps=200", "batch_size=256", "n_slots=512"])
def test_a_preset_sizes_its_pool_for_the_steps_set_on_it(key: str) -> None:
    """``--set steps=200`` on ``systems:areal`` reaches the factory, which sizes its task pool by it:
    set on the built scenario, it kept the pool drawn for the preset's 20 steps and the run ran dry
    at version 98 of 200."""
    from pipesim.io.registry import build, get_entry

    entry = get_entry("systems:areal")
    name, text = key.split("=")
    scenario, given = build(entry, [key])
    assert scenario.pool_size == entry.build(**{name: int(text)}).pool_size > entry.build().pool_size
    assert given == {name: text}
    if name == "steps":
        assert main(["run", "systems:areal", "--set", key]) == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"max_head_offpolicyness": 10**12}, "max_head_offpolicyness"), ({"steps": 10**8}, "steps")],
)
def test_a_preset_whose_pool_would_be_too_large_names_the_key_that_sized_it(
    kwargs: dict[str, int], field: str
) -> None:
    """The pool is the preset's derivation, not a key the user set: the refusal names the one they set."""
    from pipesim.core.validate import FieldError
    from scenarios import systems

    with pytest.raises(FieldError) as info:
        systems.areal(**kwargs)
    assert info.value.field == field


def test_a_sweep_over_a_presets_steps_sizes_each_cells_pool(tmp_path: Path) -> None:
    """``--over steps=...`` on a preset builds each cell with the factory (the cell at 150 steps ran
    dry at version 98 when the steps were set on the preset's built scenario)."""
    out = tmp_path / "s.csv"
    argv = ["sweep", "systems:areal", "--over", "steps=2,150", "--seeds", "1", "--workers", "1", "--quiet"]
    assert main([*argv, "--csv", str(out)]) == 0
    rows = pd.read_csv(out).set_index("design")
    assert (rows["status"] == "ok").all() and rows["error"].isna().all(), rows
    assert rows.loc["steps=150", "episodes_trained"] == 150 * 64
