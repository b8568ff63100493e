"""Discard and requeue starves long tasks; pacing admission trains them (scenarios.starvation)."""

from __future__ import annotations

import numpy as np
import pytest

from pipesim import run
from pipesim.core.validate import FieldError
from scenarios import starvation
from tests.test_refusals_core import check_refusal


@pytest.fixture(scope="module")
def table():  # type: ignore[no-untyped-def]
    return starvation.starvation_table(etas=(0, 2), steps=30)


def test_drop_and_requeue_never_trains_long_tasks_while_pacing_trains_them(table) -> None:  # type: ignore[no-untyped-def]
    by = table.set_index(["design", "eta"])
    for eta in (0, 2):
        drop = by.loc[("drop+requeue", eta)]
        assert drop["long_tasks"] > 0
        assert drop["long_never_trained_share"] > 0.5  # most long tasks are regenerated forever
        assert drop["never_trained_share"] > 0 and drop["max_launches_per_task"] > 3
        for design in ("pacing", "pacing, partial"):
            pace = by.loc[(design, eta)]
            assert pace["never_trained_share"] == 0 and pace["long_never_trained_share"] == 0
            assert pace["discarded_share"] == 0
        assert by.loc[("pacing", eta), "staleness_max"] <= eta  # the same promise, kept by admission


def test_a_requeued_task_keeps_its_id_and_its_length() -> None:
    sc = starvation.scenario("drop+requeue", 1, steps=15)
    durations = starvation.task_durations(4000)
    r = run(sc.with_(pool_size=4000), durations.tolist())
    eps = r.episode_table
    done = eps[eps["status"].isin(["trained", "discarded"])]
    assert (eps.groupby("task_id").size() > 1).any()  # some tasks were relaunched
    assert np.allclose(done["duration_s"].to_numpy(), durations[done["task_id"].to_numpy()])


def test_unknown_design_is_refused() -> None:
    check_refusal(lambda: starvation.scenario("sometimes", 1), FieldError, "design")


def test_cli_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    starvation.main(["--etas", "1", "--steps", "8"])
    out = capsys.readouterr().out
    assert "drop+requeue" in out and "long_never_trained_share" in out


def test_figure_has_one_line_per_design(table, tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("plotly")
    fig = starvation.starvation_figure(table)
    assert [t.name for t in fig.data] == list(starvation.DESIGNS)
    out = tmp_path / "starvation.html"
    starvation.main(["--etas", "1", "--steps", "6", "--html", str(out)])
    assert out.stat().st_size > 0


def test_the_report_carries_the_starvation_figure() -> None:
    """Registered in the pipesim.report entry-point group: the report includes it, and pipesim
    itself never imports scenarios."""
    from pipesim.io import viz
    from pipesim.io.report import contributed_sections, table_html

    parts = contributed_sections(viz.figure_div, table_html)
    page = "\n".join(parts)
    assert "Discard and requeue starves long tasks" in page and 'id="fig-starvation"' in page
