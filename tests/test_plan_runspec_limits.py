"""A run spec carries the plan's limits: ``pipesim plan calibrated.toml`` searches under a
``[constraints]`` table (or ``--set constraints.KEY=V``) that ``pipesim run`` checks too; and a
recommendation that discards or trains off-policy a large share with no limit set says so."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pipesim.plan import specfile
from pipesim.plan.checks import PlanError
from pipesim.plan.report import NOTE_DISCARDED_SHARE, NOTE_OFFPOLICY_SHARE, unlimited_notes
from pipesim.plan.runspec import load
from pipesim.plan.space import Constraints

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_verl_8gpu.toml"


def _with(tmp_path: Path, extra: str) -> Path:
    p = tmp_path / "run.toml"
    p.write_text(SPEC.read_text() + "\n" + extra)
    return p


def test_the_plan_reads_a_run_specs_limits(tmp_path: Path) -> None:
    p = _with(tmp_path, "[constraints]\ndiscarded_share = 0.05\nmax_staleness = 2\n")
    c = specfile.load(p).constraints
    assert (c.discarded_share, c.max_staleness) == (0.05, 2)
    assert specfile.load(SPEC, ["constraints.mean_staleness=1"]).constraints.mean_staleness == 1
    load(p)  # pipesim run reads the same file


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ("[constraints]\ndiscarded_sharee = 0.05\n", "constraints.discarded_sharee"),
        ("[constraints]\ndiscarded_share = 1.5\n", "constraints.discarded_share"),
        ("[constraints]\nmax_staleness = -1\n", "constraints.max_staleness"),
    ],
)
def test_a_bad_limit_is_refused_by_run_and_plan_alike(tmp_path: Path, table: str, field: str) -> None:
    p = _with(tmp_path, table)
    for read in (load, specfile.load):
        with pytest.raises(PlanError) as info:
            read(p)
        assert field in str(info.value)


def _result(discarded: float, offpolicy: float, **limits: float) -> object:
    best = SimpleNamespace(metrics={"discarded_share": discarded, "offpolicy_token_share": offpolicy})
    return SimpleNamespace(best=best, spec=SimpleNamespace(constraints=Constraints(**limits)))


def test_an_unlimited_share_past_its_threshold_gets_a_note() -> None:
    notes = unlimited_notes(_result(0.62, 0.93))  # type: ignore[arg-type]
    assert len(notes) == 2 and "62%" in notes[0] and "discarded_share" in notes[0]
    assert "93%" in notes[1] and "offpolicy_token_share" in notes[1]


@pytest.mark.parametrize(
    ("discarded", "offpolicy", "limits"),
    [
        (0.62, 0.93, {"discarded_share": 0.04, "offpolicy_token_share": 1.0}),  # limited: the user chose
        (NOTE_DISCARDED_SHARE, NOTE_OFFPOLICY_SHARE, {}),  # at the thresholds, not past them
        (0.0, 0.0, {}),
    ],
)
def test_no_note_where_a_limit_is_set_or_the_share_is_small(
    discarded: float, offpolicy: float, limits: dict[str, float]
) -> None:
    assert unlimited_notes(_result(discarded, offpolicy, **limits)) == []  # type: ignore[arg-type]


def test_a_loose_discard_limit_still_notes_the_bias_and_an_offpolicy_limit_does_not() -> None:
    """Discarding biases samples/h itself (the short samples finish first), so a limit looser than
    the note's threshold is noted; a set off-policy limit is the user's choice."""
    notes = unlimited_notes(_result(0.62, 0.93, discarded_share=0.7, offpolicy_token_share=1.0))  # type: ignore[arg-type]
    assert len(notes) == 1 and "discarded_share may reach 0.7" in notes[0]


def test_no_recommendation_no_note() -> None:
    assert unlimited_notes(SimpleNamespace(best=None, spec=None)) == []  # type: ignore[arg-type]


def test_an_exported_run_spec_keeps_the_plans_limits(tmp_path: Path) -> None:
    """pipesim plan SPEC --export-best best.toml, then pipesim plan best.toml: the same limits."""
    from pipesim.plan.runspec import dumps
    from pipesim.plan.runspec_export import design_to_runspec
    from pipesim.plan.space import Design

    plan = Path(__file__).resolve().parent.parent / "examples" / "plan_qwen3_8b.toml"
    data = design_to_runspec(plan, Design(trainer_gpus=0, tp=2, eta=0, update="partial", oversample=1.25))
    out = tmp_path / "best.toml"
    out.write_text(dumps(data, "toml"))
    assert specfile.load(out).constraints == specfile.load(plan).constraints
    load(out)  # and pipesim run reads it
