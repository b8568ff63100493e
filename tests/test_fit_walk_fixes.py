"""``pipesim fit`` and ``pipesim trace`` after a walkthrough: the default fitted model follows the
fit's quality (it wrote a log-normal whose mean was 27% high on exponential data), an empirical fit
of a large trace still loads (1,000,000 values made a 23 MB scenario file nothing could read), the
agent fit says where its turn count is not identified (the cap's interior peak of CV^2 was called
"the edge of the search"), outputs are written whole or not at all, and a missing path given to
``pipesim trace`` is named as missing, not as an unknown scenario."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim import AgentDurations, LogNormalDurations, Scenario
from pipesim.core.readfile import SCENARIO_MAX_BYTES
from pipesim.io import fit_choice, fit_models
from pipesim.io.cli import main
from pipesim.io.fit import fit_values
from pipesim.io.scenario_files import dumps, load_scenario
from pipesim.workload.durations import TraceDurations


def _mean_of(durations: object) -> float:
    if isinstance(durations, TraceDurations):
        return float(np.mean(durations.values))
    if isinstance(durations, LogNormalDurations):
        return durations.median_s * float(np.exp(durations.sigma**2 / 2))
    assert isinstance(durations, AgentDurations)
    return fit_models.agent_moments(durations)[0]


def _trace(tmp_path: Path, x: np.ndarray) -> Path:
    path = tmp_path / "eps.csv"
    pd.DataFrame({"d": x}).to_csv(path, index=False)
    return path


# -- 1. the default model -------------------------------------------------------------------------
def test_default_scenario_on_exponential_data_keeps_the_datas_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.random.default_rng(7).exponential(96.0, 4000)
    out = tmp_path / "fitted.toml"
    assert main(["fit", str(_trace(tmp_path, x)), "--column", "d", "--scenario-out", str(out)]) == 0
    written = load_scenario(out).durations
    assert _mean_of(written) == pytest.approx(float(x.mean()), rel=0.03)
    assert "warning" not in capsys.readouterr().err  # what was chosen is not a rejected fit


@pytest.mark.parametrize(("median", "sigma"), [(50.0, 0.8), (3.0, 1.4), (40.0, 0.5)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_model_on_lognormal_data_is_the_lognormal(median: float, sigma: float, seed: int) -> None:
    x = LogNormalDurations(median_s=median, sigma=sigma).sample(4000, np.random.default_rng(seed))
    res = fit_values(x)
    assert res.chosen == "lognormal", res.chosen_why
    assert fit_choice.fit_problems(res.fits["lognormal"], x) == []


def test_a_rejected_model_written_on_request_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.random.default_rng(7).exponential(96.0, 4000)
    out = tmp_path / "ln.toml"
    argv = ["fit", str(_trace(tmp_path, x)), "--column", "d", "--scenario-out", str(out)]
    assert main([*argv, "--model", "lognormal"]) == 0
    err = capsys.readouterr().err
    assert isinstance(load_scenario(out).durations, LogNormalDurations)  # written, as asked
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and "KS" in warnings[0] and "mean" in warnings[1]


def test_the_choice_rule_prefers_a_passing_parametric_fit_with_the_smaller_ks() -> None:
    x = LogNormalDurations(median_s=50.0, sigma=0.8).sample(4000, np.random.default_rng(3))
    fits = fit_values(x).fits
    ok = fits["lognormal"]
    worse = fit_models.ModelFit("agent", ok.model, ok.params, ok.ks * 2, 0.5, "test")
    better = fit_models.ModelFit("agent", ok.model, ok.params, ok.ks / 2, 0.5, "test")
    rejected = fit_models.ModelFit("agent", ok.model, ok.params, ok.ks / 2, 1e-5, "test")
    emp = fits["empirical"]
    assert fit_choice.choose_model({"lognormal": ok, "agent": worse, "empirical": emp}, x)[0] == "lognormal"
    assert fit_choice.choose_model({"lognormal": ok, "agent": better, "empirical": emp}, x)[0] == "agent"
    assert (
        fit_choice.choose_model({"lognormal": ok, "agent": rejected, "empirical": emp}, x)[0] == "lognormal"
    )
    bad_ln = fit_models.ModelFit("log-normal", ok.model, ok.params, ok.ks, 1e-9, "test")
    assert (
        fit_choice.choose_model({"lognormal": bad_ln, "agent": rejected, "empirical": emp}, x)[0]
        == "empirical"
    )


# -- 2. a large empirical fit ---------------------------------------------------------------------
def test_empirical_fit_of_a_million_values_writes_a_loadable_scenario(tmp_path: Path) -> None:
    """The empirical model of a million values; fit_values's ``fits["empirical"]`` is this
    ``fit_empirical(x, seed)`` (fitting the log-normal and the agent model beside it took 4 of
    the test's 5 s)."""
    x = LogNormalDurations(median_s=50.0, sigma=0.8).sample(1_000_000, np.random.default_rng(0))
    emp = fit_models.fit_empirical(x, seed=0)
    text = dumps(_base().with_(durations=emp.model, pool_size=None))
    assert len(text.encode()) < SCENARIO_MAX_BYTES  # was 23 MB: refused by every reader
    path = tmp_path / "emp.toml"
    path.write_text(text)
    assert load_scenario(path).durations == emp.model
    kept = np.asarray(emp.model.values)
    assert len(kept) <= fit_models.EMPIRICAL_MAX_VALUES < len(x)
    assert fit_models.ks_statistic(kept, other=x) <= 1 / (2 * len(kept)) + 1 / len(x) + 1e-12
    assert float(kept.mean()) == pytest.approx(float(x.mean()), rel=1e-3)


def _base() -> Scenario:
    from pipesim.io.registry import get_scenario

    return get_scenario("synchronous")


def test_the_subsample_is_evenly_spaced_order_statistics_in_a_shuffled_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fit_models, "EMPIRICAL_MAX_VALUES", 500)
    x = np.random.default_rng(1).exponential(96.0, 4000)
    emp = fit_models.fit_empirical(x, seed=0)
    kept = np.asarray(emp.model.values)
    k = len(kept)
    assert k == 500 and emp.params["n_values"] == 4000 and emp.params["n_replayed"] == 500
    expected = np.sort(x)[((np.arange(k) + 0.5) * len(x) / k).astype(int)]
    assert np.array_equal(np.sort(kept), expected)
    assert not np.array_equal(kept, expected)  # replayed shuffled, not in rising order
    assert "500" in emp.note and "order statistics" in emp.note
    assert np.array_equal(kept, np.asarray(fit_models.fit_empirical(x, seed=0).model.values))  # deterministic


# -- 3. the agent fit's turn count ----------------------------------------------------------------
def test_cv2_standard_error_matches_its_spread_over_samples() -> None:
    rng = np.random.default_rng(4)
    samples = rng.exponential(1.0, (400, 2000))
    cv2 = samples.var(axis=1) / samples.mean(axis=1) ** 2
    se = np.median([fit_models.cv2_standard_error(s) for s in samples[:50]])
    assert se == pytest.approx(float(cv2.std()), rel=0.2)
    assert se == pytest.approx(2 / np.sqrt(2000), rel=0.2)  # exponential: 2/sqrt(n)


@pytest.mark.parametrize("seed", range(6))
def test_agent_fit_of_the_chapters_model_names_the_peak_not_the_edge(seed: int) -> None:
    x = AgentDurations(draws="numpy").sample(4000, np.random.default_rng(seed))
    fit = fit_models.fit_agent(x)
    note = getattr(fit, "note", "")  # a field since the walkthrough: before, all was in `how`
    said = fit.how + " " + note
    assert "edge of the search" not in said
    cv2 = float(x.var() / x.mean() ** 2)
    grid = np.geomspace(1.0001, 2000, 3000)
    model_cv2 = []
    for g in grid[::10]:
        m, v = fit_models.agent_moments(AgentDurations(mean_turns=float(g), draws="numpy"))
        model_cv2.append(v / m / m)
    peak = max(model_cv2)
    if cv2 > peak:  # out of reach: matched at the peak, an interior turn count
        assert 2 < fit.params["mean_turns"] < 20
        assert fit.params["mean_turns"] == pytest.approx(
            float(grid[::10][int(np.argmax(model_cv2))]), rel=0.05
        )
    if abs(cv2 - peak) <= 2 * fit_models.cv2_standard_error(x):
        assert "not identify the turn count" in note


def test_a_spread_below_the_models_reach_is_at_the_search_edge() -> None:
    x = np.random.default_rng(0).uniform(90.0, 100.0, 4000)  # CV^2 ~ 0.001, below every turn count's
    fit = fit_models.fit_agent(x)
    said = fit.how + " " + getattr(fit, "note", "")
    assert "edge of the search" in said and "below the model's smallest" in said


# -- 4. whole or not at all; a missing path ------------------------------------------------------
def _half_then_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    real = Path.write_text

    def broken(self: Path, data: str, *args: object, **kwargs: object) -> int:
        real(self, data[: len(data) // 2])
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(Path, "write_text", broken)


def test_fit_json_interrupted_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(7).exponential(96.0, 400)
    trace, js = _trace(tmp_path, x), tmp_path / "fit.json"
    js.write_text('{"old": true}')
    _half_then_fail(monkeypatch)
    assert main(["fit", str(trace), "--column", "d", "--json", str(js)]) != 0
    assert js.read_text() == '{"old": true}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eps.csv", "fit.json"]  # no temporary left


def test_write_trace_interrupted_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipesim.io.trace import write_trace

    events = pd.DataFrame(
        {
            "kind": ["gen", "sync"],
            "lane": ["r0/slot0", "sync"],
            "slot": [0, -1],
            "replica": [0, -1],
            "start_s": [0.0, 1.0],
            "end_s": [1.0, 2.0],
            "version": [0, 1],
            "episode_id": [0, -1],
            "complete": [True, True],
        }
    )
    write_trace(events, tmp_path / "ok.json")  # the table is one write_trace takes
    out = tmp_path / "t.json"
    out.write_text("old")
    _half_then_fail(monkeypatch)
    with pytest.raises(RuntimeError):
        write_trace(events, out)
    assert out.read_text() == "old"


@pytest.mark.parametrize("where", ["runs/missing", "runs/missing/"])
def test_trace_of_a_missing_path_says_no_such_file(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["trace", where, "--out", "x.json"]) == 2
    err = capsys.readouterr().err
    assert "no such file or directory" in err and "unknown scenario" not in err
    assert not (tmp_path / "x.json").exists()
