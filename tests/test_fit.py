"""``pipesim fit``: duration models fitted to a trace column, on synthetic data with known
parameters and on a real production trace (Splitwise, via vidur's reference data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim import AgentDurations, LogNormalDurations
from pipesim.io.cli import main
from pipesim.io.fit import AGENT_NOTE, FitError, _turn_moments, fit_agent, fit_trace, fit_values, ks_statistic
from pipesim.io.scenario_files import load_scenario

SPLITWISE = (
    Path(__file__).resolve().parent.parent.parent / "shared" / "reference" / "vidur" / "splitwise_code.csv"
)


def test_lognormal_median_and_sigma_recovered_within_5_percent() -> None:
    for median, sigma, seed in ((40.0, 0.7, 1), (68.0, 0.9, 2), (3.0, 1.4, 3)):
        x = LogNormalDurations(median_s=median, sigma=sigma).sample(5000, np.random.default_rng(seed))
        fit = fit_values(x).fits["lognormal"]
        assert fit.model.median_s == pytest.approx(median, rel=0.05)
        assert fit.model.sigma == pytest.approx(sigma, rel=0.05)
        assert fit.ks < 0.03 and fit.p_value > 0.01  # the right model fits


def test_agent_model_from_totals_recovers_turns_and_seconds_per_turn() -> None:
    true = AgentDurations(mean_turns=5, decode_rate_tok_s=20.0, tool_median_s=4.0, draws="numpy")
    decode, tool = true.sample_turns(40_000, np.random.default_rng(2))
    totals = (decode + tool).sum(-1)
    fit = fit_agent(totals)  # base: the default shape, time scale x2 and fewer turns than it
    assert fit.params["mean_turns"] == pytest.approx(5, rel=0.05)
    assert fit.model.decode_rate_tok_s == pytest.approx(20.0, rel=0.05)
    assert fit.model.tool_median_s == pytest.approx(4.0, rel=0.05)
    # with the turns measured, the turns come from them
    turns = ((decode + tool) > 0).sum(-1)
    with_turns = fit_agent(totals, turns=turns)
    assert with_turns.params["mean_turns"] == pytest.approx(5, rel=0.05)
    assert with_turns.params["seconds_per_turn"] == pytest.approx(
        totals.mean() / _turn_moments(40, 5)[0], rel=0.05
    )


def test_the_agent_fit_says_what_totals_cannot_separate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = AgentDurations(draws="numpy").sample(2000, np.random.default_rng(0))
    res = fit_values(x)
    assert res.notes[0] == AGENT_NOTE
    for words in ("only as their ratio", "decoding and tool calls", "--turns-column"):
        assert words in AGENT_NOTE
    trace = tmp_path / "eps.jsonl"
    pd.DataFrame({"duration_s": x}).to_json(trace, orient="records", lines=True)
    assert main(["fit", str(trace), "--column", "duration_s"]) == 0
    out = capsys.readouterr().out
    assert "note: agent model: total durations identify only" in out
    assert "KS D=" in out and "log-normal" in out and "empirical" in out


def test_ks_statistic_against_known_values() -> None:
    assert ks_statistic(np.array([1.0, 2.0]), other=np.array([3.0, 4.0])) == 1.0
    x = np.linspace(0.005, 0.995, 100)
    assert ks_statistic(x, lambda v: v) == pytest.approx(0.005, abs=1e-9)


def test_cli_fit_writes_qq_plot_json_and_a_runnable_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = LogNormalDurations(median_s=50.0, sigma=0.8).sample(3000, np.random.default_rng(5))
    trace = tmp_path / "eps.csv"
    pd.DataFrame({"duration_s": x, "other": 1}).to_csv(trace, index=False)
    qq, js, scen = tmp_path / "qq.html", tmp_path / "fit.json", tmp_path / "fitted.toml"
    argv = ["fit", str(trace), "--column", "duration_s", "--qq", str(qq), "--json", str(js)]
    assert main([*argv, "--scenario-out", str(scen), "--base", "async-eta1"]) == 0
    page = qq.read_text()
    assert page.count("Plotly.newPlot") == 1 and "QQ plot" in page
    data = json.loads(js.read_text())
    assert data["fits"]["lognormal"]["params"]["median_s"] == pytest.approx(50.0, rel=0.05)
    loaded = load_scenario(scen)
    assert isinstance(loaded.durations, LogNormalDurations)
    assert loaded.durations.median_s == pytest.approx(50.0, rel=0.05)
    assert loaded.pipeline.max_staleness == 1
    capsys.readouterr()
    assert main(["run", str(scen), "--set", "steps=2"]) == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--column", "nope"], "no column 'nope'; the columns are duration_s"),
        (["--column", "duration_s", "--scale", "-1"], "--scale must be"),
        (["--column", "duration_s", "--qq", "{tmp}/qq.png"], "must end in .html"),
    ],
)
def test_cli_fit_errors_are_one_line(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "eps.csv"
    pd.DataFrame({"duration_s": np.arange(1.0, 50.0)}).to_csv(trace, index=False)
    assert main(["fit", str(trace), *[a.replace("{tmp}", str(tmp_path)) for a in args]]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err
    # a missing trace file: row "absent" of test_refusals_files.py (refused whole, with the file)


@pytest.mark.parametrize(
    ("values", "turns", "message"),
    [
        (np.geomspace(1e-300, 1e-299, 40), None, "outside [1e-06, 1e+09] s; convert them to seconds"),
        (np.geomspace(10.0, 1e308, 40), None, "outside [1e-06, 1e+09] s"),
        (np.full(40, 5.0), None, "every value is 5: a constant"),
        (np.arange(1.0, 41.0), np.zeros(40), "column 'turns' leaves 0 usable rows"),
    ],
    ids=["tiny", "huge", "constant", "turns-below-one"],
)
def test_fit_refuses_values_it_cannot_fit_in_one_line(
    values: np.ndarray,
    turns: np.ndarray | None,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # tiny values hung the agent fit (a NaN spread made every grid point a root); a constant gave NaN
    trace = tmp_path / "eps.csv"
    cols = {"d": values} if turns is None else {"d": values, "turns": turns}
    pd.DataFrame(cols).to_csv(trace, index=False)
    extra = [] if turns is None else ["--turns-column", "turns"]
    assert main(["fit", str(trace), "--column", "d", *extra]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err


@pytest.mark.skipif(not SPLITWISE.exists(), reason=f"{SPLITWISE} is absent")
def test_fit_on_the_splitwise_production_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = fit_trace(SPLITWISE, "num_decode_tokens")
    tokens = pd.read_csv(SPLITWISE)["num_decode_tokens"]
    assert res.n == int((tokens > 0).sum()) == 8819
    ln = res.fits["lognormal"]
    assert ln.model.median_s == pytest.approx(np.exp(np.log(tokens).mean()), rel=1e-9)
    # decode lengths are heavier-tailed and more discrete than a log-normal; the replay fits
    assert res.fits["empirical"].ks < 0.03 < ln.ks
    qq = tmp_path / "qq.html"
    assert main(["fit", str(SPLITWISE), "--column", "num_decode_tokens", "--qq", str(qq)]) == 0
    assert "8,819 values" in capsys.readouterr().out and qq.exists()


def test_turns_beyond_the_models_cap_are_named_not_clamped() -> None:
    """A turn column above max_turns (40) was read as the search grid's edge: mean_turns 160."""

    rng = np.random.default_rng(0)
    totals = rng.lognormal(5.0, 0.5, 40)
    with pytest.raises(FitError) as info:
        fit_values(totals, turns=np.full(40, 60.0))
    assert info.value.field == "turns", str(info.value)
    near = fit_agent(totals, turns=np.full(40, 40.0))  # all at the cap: beyond the capped mean's reach
    assert "beyond max_turns 40: the closest" in near.how
    assert "beyond" not in fit_agent(totals, turns=np.full(40, 5.0)).how


def test_a_json_true_is_not_a_one_second_episode(tmp_path: Path) -> None:
    """pandas' JSON reader turned ``"duration_s": true`` into 1 (a 1 s episode in the fit and in
    an empirical scenario); a flag is not a number: the row is dropped and counted."""
    from pipesim.io.fit_readers import read_column

    rows = [{"duration_s": float(v)} for v in range(10, 22)] + [{"duration_s": True}, {"duration_s": False}]
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    values, dropped = read_column(p, "duration_s")
    assert sorted(values.tolist()) == [float(v) for v in range(10, 22)] and dropped == 2
