"""``pipesim.compare`` of compute runs: it takes a :class:`~pipesim.compute.ComputeRun` as it is
(its summary, with the compute keys) and gives the same table and figure as the same runs saved
and loaded; compute runs get the compute headline rows, the response cap's label for a truncated
sample and the compute figure, as a run's own page does; a mix of engines gets the rows every run
has; slot runs keep their rows and figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim
from pipesim.compute import ComputeRun
from pipesim.io.cli import main
from pipesim.io.compare import FIGURE_METRICS, MIXED_GEN_UTIL_LABEL
from pipesim.io.html import COMPUTE_HEADLINE_KEYS, HEADLINE_KEYS, truncated_label
from pipesim.plan import runspec

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_verl_8gpu.toml"
DESIGNS = {"eta0": ["design.eta=0"], "eta1": ["design.eta=1", "design.update=partial"]}
SETS = ["run.steps=3"]


@pytest.fixture(scope="module")
def live() -> dict[str, ComputeRun]:
    return {name: runspec.run(runspec.load(SPEC, SETS + sets)) for name, sets in DESIGNS.items()}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("cmpfix")
    out = {}
    for name, sets in DESIGNS.items():
        args = [a for s in SETS + sets for a in ("--set", s)]
        assert main(["run", str(SPEC), *args, "--save", str(root / name)]) == 0
        out[name] = pipesim.load(root / name)
    return out


def _bars(fig: Any) -> list[tuple[str, list[float]]]:
    return [(t.name, list(t.y)) for t in fig.data]


def test_a_compute_run_compares_as_the_same_run_saved_and_loaded(
    live: dict[str, ComputeRun], loaded: dict[str, Any]
) -> None:
    a, b = pipesim.compare(live), pipesim.compare(loaded)
    assert all(isinstance(r, ComputeRun) for r in a.results.values())
    pd.testing.assert_frame_equal(a.table, b.table)
    assert _bars(a.figure) == _bars(b.figure)
    assert [x.text for x in a.figure.layout.annotations] == [x.text for x in b.figure.layout.annotations]


@pytest.mark.parametrize("which", ["live", "loaded"])
def test_compute_runs_get_the_compute_rows_labels_and_figure(
    live: dict[str, ComputeRun], which: str, request: pytest.FixtureRequest
) -> None:
    runs = request.getfixturevalue(which)
    cmp = pipesim.compare(runs)
    labels = dict(HEADLINE_KEYS) | dict(COMPUTE_HEADLINE_KEYS)
    cut = truncated_label(live["eta0"].result.scenario)
    assert cut != labels["episodes_truncated"]  # the response cap, not a timeout
    assert cut in cmp.table.index and labels["episodes_truncated"] not in cmp.table.index
    for name, r in runs.items():
        s = r.summary()
        assert cmp.table.loc[cut, name] == s["episodes_truncated"]
        for key, label in COMPUTE_HEADLINE_KEYS:
            assert cmp.table.loc[label, name] == pytest.approx(float(s[key]), nan_ok=True), key
    assert labels["gen_util"] not in cmp.table.index  # not bare "slot utilisation" (docs/compute.md)
    panels = [x.text for x in cmp.figure.layout.annotations]
    compute = dict(COMPUTE_HEADLINE_KEYS)
    assert {compute[k] for k in ("step_time_s_mean", "decode_tokens_per_s", "engine_busy_share")} <= set(
        panels
    )
    assert labels["gen_util"] not in panels


def test_a_mix_of_engines_gets_the_rows_every_run_has(live: dict[str, ComputeRun]) -> None:
    slot = pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=3), pool_size=64)
    cmp = pipesim.compare({"slots": slot, "compute": live["eta0"]})
    assert len(cmp.table) == len(HEADLINE_KEYS) and not cmp.table.isna().any().any()
    labels = [str(x) for x in cmp.table.index]
    (cut,) = [x for x in labels if "timed out" in x]
    assert "cut at the response cap" in cut  # both engines' meaning named
    assert not set(labels) & {t for _, t in COMPUTE_HEADLINE_KEYS}
    # the panels carry the rows' qualifier: a compute run's utilisation is of its max_num_seqs places
    titles = [t.replace("<br>", " ") for t in (x.text for x in cmp.figure.layout.annotations)]
    assert titles == [MIXED_GEN_UTIL_LABEL if k == "gen_util" else t for k, t in FIGURE_METRICS]


def test_slot_runs_keep_their_rows_and_figure() -> None:
    base = pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=3), pool_size=64)
    cmp = pipesim.compare({"sync": base, "eta1": base.with_(max_staleness=1)})
    assert list(cmp.table.index) == [t for _, t in HEADLINE_KEYS]
    assert [x.text for x in cmp.figure.layout.annotations] == [t for _, t in FIGURE_METRICS]
