"""A walkthrough's calibrate findings (helper calfix2): an agent spec's tool latency absorbed into the
decode overhead without a word; a log whose responses are all at the cap given a median of
``e**10`` times it with a zero-wide interval; ``--out`` and ``--json`` written apart, so that a
Ctrl-C between them left a new spec beside an old table."""

from __future__ import annotations

import copy
import math
import os
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pipesim.calibrate as calmod
import pipesim.calibrate.cli as cli
from pipesim.calibrate import Calibration, Fitted, read_log
from pipesim.calibrate.fit import AT_CAP_SLACK, capped_mean, fit_lengths
from pipesim.calibrate.fitspec import ENGINE_OVERHEAD_S, OVERHEAD_FAR_ABOVE, fit_spec, overhead_warning
from pipesim.calibrate.predict import conditional_on
from pipesim.io.cli import main
from pipesim.plan.runspec import from_dict, load

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "calibrate_agent"
AGENT_SPEC, AGENT_LOG = DATA / "cal_spec.toml", DATA / "mylog.csv"
SAMPLE_SPEC, SAMPLE_LOG = ROOT / "examples" / "run_verl_8gpu.toml", ROOT / "examples" / "verl_sample_log.csv"
BOUND = OVERHEAD_FAR_ABOVE * ENGINE_OVERHEAD_S


# 1. an agent spec: the tool latency is said to be assumed, the overhead it inflates is flagged


def test_an_agent_spec_with_too_short_a_tool_latency_is_told_where_the_error_went(tmp_path: Path) -> None:
    """The agent fixture's log (as episodes, what verl logs) against its spec at an eighth of its
    tool latency: the missing seconds of every tool call come back as the decode overhead, which
    lands more than OVERHEAD_FAR_ABOVE x the engine's own at its interval's low end; the notes say
    the tool latency is not fitted and flag the overhead. Before, neither was said."""
    rs = load(AGENT_SPEC)
    a = rs.plan.workload.agent
    assert a is not None
    frame = pd.read_csv(AGENT_LOG)
    frame["response_length/mean"] += (a.turns - 1) * a.observation_tokens
    path = tmp_path / "episodes.csv"
    frame.to_csv(path, index=False)
    data = copy.deepcopy(rs.data)
    data["workload"]["agent"]["tool_latency_s"] = a.tool_latency_s / 8
    short = from_dict(data, AGENT_SPEC.parent)
    values, notes, _ = fit_spec(read_log(path), short, 0, means=False)
    o = values["iteration_overhead_s"]
    assert o.lo > BOUND
    assert any(n.startswith("agent.tool_latency_s") and "iteration_overhead_s" in n for n in notes)
    assert overhead_warning(values) in notes


@pytest.mark.parametrize(
    ("lo", "warned"),
    [
        (0.0, False),  # the agent control: 1.3 ms [0, 20.8]
        (0.0035, False),  # the shipped sample: 4.0 ms [3.5, 4.5]
        (BOUND, False),  # at the bound: not above it
        (BOUND * 1.01, True),
        (0.023, True),  # the walkthrough: 35.9 ms [23.0, 53.4]
    ],
)
def test_the_overhead_is_flagged_only_where_its_low_end_clears_the_bound(lo: float, warned: bool) -> None:
    values = {"iteration_overhead_s": Fitted(max(lo * 1.5, 0.001), lo, max(lo * 2, 0.02))}
    got = overhead_warning(values)
    assert (got is not None) == warned
    if warned:
        assert got is not None and got.startswith("iteration_overhead_s")
    assert overhead_warning({}) is None  # not fitted: nothing to say


def test_an_agent_specs_prediction_ranges_say_they_hold_given_its_tool_latency() -> None:
    """``conditional_on`` (printed under ``pipesim run --intervals``) names the tool latency for an
    agent spec, even when every other value was fitted; a single-turn spec gets no such line."""
    values = {"iteration_overhead_s": 0.004, "fwd_bwd_efficiency": 0.4, "fwd_efficiency": 0.3}
    cal = {
        "values": values,
        "intervals": {k: [v * 0.9, v * 1.1] for k, v in values.items()},
        "method": dict.fromkeys(values, "least squares"),
    }
    agent = from_dict({**load(AGENT_SPEC).data, "calibration": cal}, AGENT_SPEC.parent)
    single = from_dict({**load(SAMPLE_SPEC).data, "calibration": cal}, SAMPLE_SPEC.parent)
    assert any("agent.tool_latency_s" in line for line in conditional_on(agent))
    assert not any("tool_latency" in line for line in conditional_on(single))


# 2. responses at the cap: a lower bound, open above; a constant column flagged


@pytest.mark.parametrize(
    ("mean_share", "sigma", "difficulty"),
    [(1.0, 0.8, 0.0), (1.0, 0.9, 0.4), (1.0 - AT_CAP_SLACK / 2, 0.8, 0.0), (1.0, 0.0, 0.0)],
)
def test_a_mean_at_the_cap_gives_a_lower_bound_open_above(
    mean_share: float, sigma: float, difficulty: float
) -> None:
    """Every response at the cap (the mean within AT_CAP_SLACK of it): the median is the least
    whose capped mean reaches the cap, its interval open above, and a note says so. Before:
    e**10 x the cap, [that, that] (9.022e+07 for a 4,096 cap)."""
    cap = 4096.0
    mean = np.full(8, cap * mean_share)
    got, notes = fit_lengths(mean, np.ones(8), None, cap, 64, difficulty, sigma, np.random.default_rng(0))
    m = got["response_median_tokens"]
    assert m.hi == math.inf and m.lo == m.value
    assert "response_sigma" not in got
    s = math.hypot(sigma, difficulty)
    assert capped_mean(math.log(m.value), s, cap) >= cap * (1 - AT_CAP_SLACK) * (1 - 1e-12)
    if s > 0:  # the least such median: 1% lower falls short of the cap
        assert capped_mean(math.log(m.value * 0.99), s, cap) < cap * (1 - AT_CAP_SLACK)
    assert m.value < cap * math.exp(10 * max(s, 0.1))
    assert any(n.startswith("response_median_tokens") and "cap" in n for n in notes)


@pytest.mark.parametrize("constant", [True, False])
def test_a_constant_length_column_is_said_to_hold_no_step_noise(constant: bool) -> None:
    """A mean repeated at every step (the walkthrough's 4,000 of a 4,096 cap, clip 0.9) gave
    13,486 [13,486, 13,486]: a bootstrap of no spread. The note says the interval holds no
    step-to-step noise; a varying column draws no such note."""
    rng = np.random.default_rng(1)
    mean = np.full(12, 4000.0) if constant else 4000.0 - rng.uniform(0, 50, 12)
    got, notes = fit_lengths(mean, np.full(12, 0.9), None, 4096.0, 64, 0.0, 0.8, np.random.default_rng(0))
    said = any("no step-to-step noise" in n for n in notes)
    assert said == constant
    m = got["response_median_tokens"]
    assert (m.width == 0) == constant  # the width the note is about


# 3. --out and --json written together


def _fake_calibration(overhead: Fitted | None) -> Calibration:
    values = {} if overhead is None else {"iteration_overhead_s": overhead}
    return Calibration(values, [], {}, read_log(SAMPLE_LOG))


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to itself")
def test_a_ctrl_c_between_the_spec_and_the_json_leaves_both_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ctrl-C that lands right after the spec is written (intr/race.py of the walkthrough):
    before, the command stopped there, the old JSON stayed beside the new spec and the message
    said every file was whole. Now both are written and named."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(calmod, "calibrate", lambda *a, **k: _fake_calibration(None))
    real = cli.write_text_atomic

    def write(path: str, text: str, *a: object, **k: object) -> None:
        real(path, text, *a, **k)  # type: ignore[arg-type]
        if str(path).endswith(".toml"):
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(cli, "write_text_atomic", write)
    Path("r.json").write_text("old")
    rc = main(
        ["calibrate", str(SAMPLE_LOG), "--spec", str(SAMPLE_SPEC), "--out", "r.toml", "--json", "r.json"]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert Path("r.toml").exists() and Path("r.json").read_text() != "old"
    assert "wrote r.toml" in out and "wrote r.json" in out


@pytest.mark.parametrize(("lo", "warned"), [(0.003, False), (BOUND * 2, True)])
def test_the_command_warns_of_a_far_overhead_on_stderr(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    lo: float,
    warned: bool,
) -> None:
    monkeypatch.chdir(tmp_path)
    fitted = Fitted(lo * 1.5, lo, lo * 2, "simulated gen at 0 and 10 ms per iteration, interpolated")
    monkeypatch.setattr(calmod, "calibrate", lambda *a, **k: _fake_calibration(fitted))
    assert main(["calibrate", str(SAMPLE_LOG), "--spec", str(SAMPLE_SPEC), "--out", "c.toml"]) == 0
    err = capsys.readouterr().err
    assert ("warning: c.toml: iteration_overhead_s" in err) == warned


def test_pipesim_run_intervals_prints_what_the_ranges_hold_fixed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pipesim run --intervals`` prints each ``conditional_on`` line under the ranges as a
    ``note:`` line. Before, only the Python function said them, and the docs promised them."""
    from pipesim.plan.runspec import dumps

    values = {"iteration_overhead_s": 0.004}
    cal = {"values": values, "intervals": {"iteration_overhead_s": [0.003, 0.005]}, "method": {}}
    rs = from_dict({**load(AGENT_SPEC).data, "calibration": cal}, AGENT_SPEC.parent)
    spec = tmp_path / "cal.toml"
    spec.write_text(dumps(rs.data))
    lines = conditional_on(load(spec))
    assert any("agent.tool_latency_s" in line for line in lines)
    assert main(["run", str(spec), "--set", "run.steps=2", "--intervals", "2"]) == 0
    out = capsys.readouterr().out
    assert [ln for ln in out.splitlines() if ln.startswith("note: ")] == [f"note: {ln}" for ln in lines]


@pytest.mark.parametrize(("value", "noted"), [(0.5, False), (1.0, False), (0.2, True), (1.2, True)])
def test_a_value_outside_its_range_is_explained(
    value: float, noted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The printed value is the spec's own run and the range is of other seeds' runs, so a value can
    sit outside it (a staleness_mean of 0.9255 under [0.9272, 0.9289] at --intervals 4): a note
    says why when it does, and only then."""
    import io

    import pipesim.calibrate.predict as pred
    from pipesim.io.cli_runspec import _intervals

    got = {
        "staleness_mean": {"value": value, "lo": 0.4, "hi": 1.0},
        "timing_s/step": {"value": 2.0, "lo": 1, "hi": 3},
    }
    monkeypatch.setattr(pred, "predict", lambda rs, n, rng, **kw: got)
    monkeypatch.setattr(pred, "conditional_on", lambda rs: [])
    out = io.StringIO()
    _intervals(load(SAMPLE_SPEC), 4, out)
    notes = [ln for ln in out.getvalue().splitlines() if ln.startswith("note: ")]
    assert len(notes) == noted and all(n.startswith("note: staleness_mean: ") for n in notes)
