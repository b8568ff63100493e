"""The plan report's tool-call slot note (:mod:`pipesim.plan.slots`) on made-up plan results:
which of the designs shown it names and in what order, how many it counts, the recommended
design's mark (on the twin a bound proves), the slots it says and its remedy, in the text and in
``--json``. The plan the other slot tests run holds two designs, so none of this is reached there.

The results are built by hand (no simulation): designs with the ``tool_slot_limited`` share a run
records, one without the key (a failed run or an old cache record), one limited in half its seeds,
one past the table's top 8 but on the Pareto front, a limited baseline and a twin pair."""

from __future__ import annotations

from typing import Any

import pytest
import tomllib

from pipesim.plan import specfile
from pipesim.plan.design import Design
from pipesim.plan.evaluate import Evaluated
from pipesim.plan.search import PlanResult
from pipesim.plan.slots import SLOT_KEY, limited, reported, slot_json, slot_lines
from pipesim.plan.space import PlanSpec
from pipesim.plan.stats import tied_with_best
from pipesim.plan.verify import needs_verification
from tests.test_plan_toolslot import AGENT

# 8 H100s of 4 replicas with max_num_seqs 16: the agent spec of tests/test_plan_toolslot.py
SPEC = AGENT

HEAD = "note: in {k} of the {n} designs shown, episodes the admission rule had let in waited for a free slot"
WHY = "An episode keeps its slot through a tool call, so the slots, not the engines, may have limited them"


def _spec(max_staleness: int = 4, **model: Any) -> PlanSpec:
    text = SPEC.replace("max_staleness = 4", f"max_staleness = {max_staleness}")
    text = text.replace(
        "max_num_seqs = 16", "\n".join(["max_num_seqs = 16", *(f"{k} = {v}" for k, v in model.items())])
    )
    return specfile.from_dict(tomllib.loads(text))


def _ev(d: Design, thr: float, share: float | None, feasible: bool = True) -> Evaluated:
    """A design's two seeds at ``thr`` samples/h (the second 1% faster); ``share`` None: no key."""
    runs = [
        {"throughput_per_hour": thr * f, "staleness_mean": float(d.eta), "staleness_max": float(d.eta)}
        for f in (1.0, 1.01)
    ]
    metrics = {"throughput_per_hour": thr * 1.005} | ({} if share is None else {SLOT_KEY: share})
    return Evaluated(design=d, steps=4, runs=runs, metrics=metrics, feasible=feasible)


def _result(spec: PlanSpec, feasible: list[Evaluated], front: list[Evaluated], **kw: Any) -> PlanResult:
    full = [*feasible, *(e for e in front if e not in feasible)]
    return PlanResult(
        spec=spec,
        method="grid",
        n_candidates=len(full),
        rungs=[(4, len(full))],
        full=full,
        screened=full,
        feasible=feasible,
        front=front,
        best=feasible[0],
        **kw,
    )


def _label(trainer: int, tp: int, eta: int, update: str = "partial") -> str:
    return Design(trainer, tp, eta, update).label(8)


@pytest.fixture(scope="module")
def many() -> PlanResult:
    """Ten feasible designs, slowest last, and episodes_per_replica 24 (max_num_seqs 16): the top 8
    hold six limited ones (one in half its seeds), one with no key and one that was not; of the two
    past the top 8 the limited one on the Pareto front is shown, the other not; the baseline (not
    feasible) was limited."""
    spec = _spec(episodes_per_replica=24)
    rows = [  # (design, share of limited runs; None: no key)
        (Design(4, 1, 1), 1.0),  # the best, recommended
        (Design(4, 1, 2), 1.0),
        (Design(4, 1, 3), 1.0),
        (Design(4, 2, 1), 0.5),  # limited on one of its two seeds
        (Design(4, 1, 0, "drain"), None),  # failed run / old record: not limited
        (Design(4, 2, 2), 1.0),
        (Design(2, 1, 1), 0.0),
        (Design(6, 1, 1), 1.0),  # the 8th: the last of the top 8
        (Design(2, 1, 2), 0.0),  # past the top 8
        (Design(6, 1, 2), 1.0),  # past the top 8, not on the front: not shown, not named
        (Design(2, 2, 1), 1.0),  # past the top 8, on the front
    ]
    evals = [_ev(d, 20_000.0 * (1 - 0.07 * i), share) for i, (d, share) in enumerate(rows)]
    baseline = _ev(Design(4, 1, 4, "abort"), 5_000.0, 1.0, feasible=False)
    return _result(spec, evals, [evals[0], evals[-1]], baseline=baseline)


def test_the_shown_designs_are_the_best_the_top_8_the_front_and_the_baseline(many: PlanResult) -> None:
    assert tied_with_best(many) == []  # the made-up throughputs separate every design from the best
    want = [e.design for e in many.feasible[:8]] + [many.feasible[-1].design, many.baseline.design]  # type: ignore[union-attr]
    assert [e.design for e in reported(many)] == want
    assert [e.design.label(8) for e in limited(many)] == [
        _label(4, 1, 1),
        _label(4, 1, 2),
        _label(4, 1, 3),
        _label(4, 2, 1),
        _label(4, 2, 2),
        _label(6, 1, 1),
        _label(2, 2, 1),
        _label(4, 1, 4, "abort"),
    ]


def test_the_note_counts_names_six_and_says_the_slots_it_ran_with(many: PlanResult) -> None:
    """8 of the 10 shown: the no-key design and the unlimited ones are not counted, the half-limited
    one is; six named, the recommended one first and marked, the rest counted; 24 slots per replica
    beside max_num_seqs 16, and the remedy doubles the 24 the spec set."""
    names = [
        _label(4, 1, 1) + " (recommended)",
        _label(4, 1, 2),
        _label(4, 1, 3),
        _label(4, 2, 1),
        _label(4, 2, 2),
        _label(6, 1, 1),
    ]
    assert slot_lines(many) == [
        HEAD.format(k=8, n=10) + " (24 per replica) while each replica decoded under 50% of its "
        f"max_num_seqs (16): {', '.join(names)} and 2 more. {WHY}; raise model.episodes_per_replica in "
        "the plan spec (now: 24; e.g. --set model.episodes_per_replica=48) (docs/compute.md, "
        "Multi-turn episodes)"
    ]


def test_the_json_lists_every_limited_design_with_its_share(many: PlanResult) -> None:
    out = slot_json(many)
    assert out is not None
    assert out["designs"] == [
        {"label": _label(4, 1, 1), "share_of_runs": 1.0},
        {"label": _label(4, 1, 2), "share_of_runs": 1.0},
        {"label": _label(4, 1, 3), "share_of_runs": 1.0},
        {"label": _label(4, 2, 1), "share_of_runs": 0.5},
        {"label": _label(4, 2, 2), "share_of_runs": 1.0},
        {"label": _label(6, 1, 1), "share_of_runs": 1.0},
        {"label": _label(2, 2, 1), "share_of_runs": 1.0},
        {"label": _label(4, 1, 4, "abort"), "share_of_runs": 1.0},
    ]
    assert out["recommended"] is True
    assert out["slots_per_replica"] == 24
    assert out["remedy"] == (
        "raise model.episodes_per_replica in the plan spec (now: 24; e.g. --set "
        "model.episodes_per_replica=48) (docs/compute.md, Multi-turn episodes)"
    )
    assert out["note"] == slot_lines(many)[0]


@pytest.fixture(scope="module")
def twins() -> PlanResult:
    """max_staleness 0: the search's best is partial at eta 0, whose bound proves nothing, and its
    twin drain at eta 0 (identical runs) is proved; with four other limited designs, six in all
    (exactly the number named), and one that was not limited. Slots: the default, max_num_seqs."""
    spec = _spec(max_staleness=0)
    best, twin = _ev(Design(4, 1, 0), 20_000.0, 1.0), _ev(Design(4, 1, 0, "drain"), 20_000.0, 1.0)
    rest = [
        _ev(d, 20_000.0 * (1 - 0.07 * i), share)
        for i, (d, share) in enumerate(
            [
                (Design(2, 1, 0, "drain"), 1.0),
                (Design(6, 1, 0, "drain"), 1.0),
                (Design(4, 2, 0, "drain"), 1.0),
                (Design(2, 2, 0, "drain"), 1.0),
                (Design(6, 2, 0, "drain"), 0.0),
            ],
            start=1,
        )
    ]
    return _result(spec, [best, twin, *rest], [best])


def test_the_twin_a_bound_proves_is_named_first_and_marked(twins: PlanResult) -> None:
    assert needs_verification(twins.spec, twins.feasible[0].design)
    assert not needs_verification(twins.spec, twins.feasible[1].design)
    names = [
        _label(4, 1, 0, "drain") + " (recommended)",
        _label(4, 1, 0),
        _label(2, 1, 0, "drain"),
        _label(6, 1, 0, "drain"),
        _label(4, 2, 0, "drain"),
        _label(2, 2, 0, "drain"),
    ]
    assert slot_lines(twins) == [
        HEAD.format(k=6, n=7) + " (16 per replica) while each replica decoded under 50% of its "
        f"max_num_seqs (16): {', '.join(names)}. {WHY}; raise model.episodes_per_replica in the plan "
        "spec (its default, model.max_num_seqs: 16; e.g. --set model.episodes_per_replica=32) "
        "(docs/compute.md, Multi-turn episodes)"
    ]
    out = slot_json(twins)
    assert out is not None
    assert [x["label"] for x in out["designs"]] == [n.removesuffix(" (recommended)") for n in names]
    assert (out["recommended"], out["slots_per_replica"]) == (True, 16)


def test_a_recommended_design_not_limited_is_not_marked() -> None:
    spec = _spec()
    best, other = _ev(Design(4, 1, 0), 20_000.0, 0.0), _ev(Design(4, 1, 1), 10_000.0, 1.0)
    result = _result(spec, [best, other], [best, other])
    assert slot_lines(result)[0].split(": ", 2)[2].startswith(_label(4, 1, 1) + ". An episode")
    out = slot_json(result)
    assert out is not None
    assert out["recommended"] is False
    assert out["designs"] == [{"label": _label(4, 1, 1), "share_of_runs": 1.0}]


def test_no_limited_design_shown_no_note() -> None:
    spec = _spec()
    result = _result(spec, [_ev(Design(4, 1, 0), 20_000.0, 0.0), _ev(Design(4, 1, 1), 10_000.0, None)], [])
    assert slot_lines(result) == [] and slot_json(result) is None


def test_a_limited_design_in_the_tables_last_row_is_named_when_twins_share_a_row() -> None:
    """The table merges identical designs into one row, so its 8 rows can hold 9 designs; a limited
    design in the last row is named (the note looked at the first 8 designs and missed it)."""
    spec = _spec(max_staleness=0)
    best, twin = _ev(Design(4, 1, 0), 20_000.0, 0.0), _ev(Design(4, 1, 0, "drain"), 20_000.0, 0.0)
    designs = [Design(t, tp, 0, "drain") for t in (2, 6) for tp in (1, 2)]
    designs += [Design(3, 1, 0, "drain"), Design(5, 1, 0, "drain"), Design(3, 2, 0, "drain")]
    rest = [_ev(d, 20_000.0 * (1 - 0.07 * i), 1.0 if i == 7 else 0.0) for i, d in enumerate(designs, start=1)]
    r = _result(spec, [best, twin, *rest], [best])
    (line,) = slot_lines(r)
    assert "split 3:5 tp2 eta=0 drain" in line
    assert len(reported(r)) == 9
