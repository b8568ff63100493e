"""Verification and the limits (:mod:`pipesim.plan.verify`): a design that breaks speaks only for
its family, and a stricter limit never recommends a faster design than a looser one.

A walkthrough spec (16 H100s, Qwen3-8B, 8 steps) recommended 20,850 samples/h under
``max_staleness = 5`` and 7,401 under 8: the eta-1 partial designs a limit of 8 admits above the
eta-0 over-sampled one broke 4x as long, and bisection refused every design faster than one that
broke, the eta-0 design (maximum 5, within 8) among them. :data:`WORLD` replays that shape with
the real judge and the real verification, the runs read from the evaluator's cache (nothing is
simulated)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim.plan as plan
from pipesim.plan.evaluate import Evaluated, Evaluator
from pipesim.plan.judge import HORIZON
from pipesim.plan.verify import family, verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan import small_spec  # noqa: E402

STEPS, SEEDS = 8, 3
D = plan.Design

# design -> (samples/h, the full run's (max, mean, settled mean), the 4x run's (max, mean))
WORLD: dict[plan.Design, tuple[float, tuple[float, float, float], tuple[float, float]]] = {
    # eta 2 over-sampled: fast, the settled mean near 2 at any length, a straggler maximum
    D(0, 1, 2, "partial", 1, 1.25): (48_000.0, (7, 1.57, 1.9), (12, 2.06)),
    D(2, 1, 2, "partial", 1, 1.25): (47_000.0, (7, 1.55, 1.9), (12, 2.05)),
    # eta 1, partial and abort-reprefill: at the ceiling of 8 steps (open), maxima 10-12 at 32
    D(0, 2, 1, "partial"): (34_901.0, (7, 0.78, 0.97), (12, 1.01)),
    D(0, 2, 1, "abort_reprefill"): (34_273.0, (7, 0.78, 0.97), (12, 1.01)),
    D(4, 2, 1, "partial"): (33_405.0, (7, 0.79, 0.97), (11, 1.01)),
    D(6, 1, 1, "partial"): (23_956.0, (7, 0.78, 0.97), (10, 1.01)),
    D(6, 1, 1, "abort_reprefill"): (19_397.0, (7, 0.78, 0.97), (11, 1.01)),
    # eta 0 over-sampled: a maximum of 5 at any length, a mean of 0.2
    D(0, 2, 0, "partial", 1, 1.25): (20_850.0, (5, 0.21, 0.25), (5, 0.22)),
    D(0, 2, 0, "abort_reprefill", 1, 1.25): (20_752.0, (5, 0.21, 0.25), (5, 0.22)),
    D(4, 2, 0, "partial", 1, 1.25): (19_649.0, (5, 0.21, 0.25), (5, 0.22)),
    # drain: over-sampled (no declared bound), eta 1 (bound 1), eta 0 (bound 0)
    D(2, 2, 0, "drain", 1, 1.25): (7_789.0, (1, 0.22, 0.25), (1, 0.22)),
    D(2, 2, 1, "drain"): (7_401.0, (1, 0.88, 1.0), (1, 0.9)),
    D(0, 2, 0, "drain"): (7_065.0, (0, 0.0, 0.0), (0, 0.0)),
}


def _run(d: plan.Design, steps: int, seed: int) -> dict[str, float]:
    """One run of ``d`` in :data:`WORLD`: the full run's or the 4x run's staleness, few samples
    at the maximum (a thin tail)."""
    thr, short, long = WORLD[d]
    top, mean, late = short if steps == STEPS else (*long, long[1])
    return {
        "failed": 0.0,
        "throughput_per_hour": thr * (1 + 0.001 * seed),
        "staleness_mean": mean,
        "staleness_max": float(top),
        "staleness_late_mean": late,
        "staleness_late_se": 0.02,
        "staleness_slope": 0.0,
        "episodes_trained_run": 512.0,
        "at_max": 5.0 if top else 512.0,
        "below_max": 60.0 if top else 0.0,
        "discarded_share": 0.0,
        "offpolicy_token_share": 0.5,
    }


def recommended(constraints: plan.Constraints) -> plan.Evaluated:
    """The design :func:`verify` leaves to recommend over :data:`WORLD` as the full rung: every
    run read from the evaluator's cache (none simulated)."""
    spec = small_spec(steps=STEPS, seeds=SEEDS, constraints=constraints)
    ev = Evaluator(spec)
    for d in WORLD:
        for steps in (STEPS, HORIZON * STEPS):
            for s in ev.seeds(2 * SEEDS):
                ev.cache[(d, steps, s)] = _run(d, steps, s)
    full = ev.evaluate(list(WORLD), STEPS, SEEDS)
    checked = verify(spec, ev, full)
    assert ev.runs == 0  # the world holds every run verification asks for
    best = max((e for e in checked if e.feasible), key=lambda e: e.throughput)
    assert best.verified.startswith(("held", "proved")), best.verified  # never an estimate alone
    return best


@pytest.mark.parametrize(
    "limits",
    [
        [plan.Constraints(max_staleness=n) for n in (0, 1, 2, 3, 5, 8, 20)],
        [plan.Constraints(mean_staleness=m) for m in (0.3, 0.5, 1.0, 2.0, 3.0)],
        [plan.Constraints(mean_staleness=1.0, max_staleness=n) for n in (1, 3, 5, 8, 20)],
    ],
    ids=["max_staleness", "mean_staleness", "max_staleness under mean 1"],
)
def test_a_stricter_limit_never_recommends_a_faster_design(limits: list[plan.Constraints]) -> None:
    """Limits from the strictest up: the recommended throughput never falls. The walkthrough's
    case is the max limit 8 (and the mean limit 1.0), where eta-1 designs above the eta-0
    over-sampled one break 4x as long: it is recommended there as under the stricter limit 5."""
    picks = [recommended(c) for c in limits]
    got = [round(e.throughput) for e in picks]
    assert got == sorted(got), [
        (c, e.design, round(e.throughput)) for c, e in zip(limits, picks, strict=True)
    ]
    assert len(set(got)) > 1  # the limits do change the pick


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (D(0, 1, 1, "partial"), D(6, 2, 1, "partial"), True),  # placement and TP differ
        (D(0, 1, 1, "partial"), D(0, 1, 0, "partial"), False),  # eta
        (D(0, 1, 1, "partial"), D(0, 1, 1, "abort_reprefill"), False),  # update
        (D(0, 1, 1, "partial"), D(0, 1, 1, "partial", 2), False),  # sync interval
        (D(0, 1, 1, "partial"), D(0, 1, 1, "partial", 1, 1.25), False),  # over-sampling
    ],
)
def test_a_family_is_the_designs_that_differ_only_in_placement_and_tp(
    a: plan.Design, b: plan.Design, same: bool
) -> None:
    assert (family(a) == family(b)) is same


class _Breaks:
    """An evaluator stand-in for verification: a design's long runs break the maximum when its
    index (fastest first) is in ``breaking``; it records the designs it ran, in order."""

    def __init__(self, designs: list[plan.Design], breaking: set[int]) -> None:
        self.index = {d: i for i, d in enumerate(designs)}
        self.breaking = breaking
        self.ran: list[plan.Design] = []

    def seeds(self, n: int) -> list[int]:
        return list(range(n))

    def evaluate(self, designs, steps, n_seeds, desc=""):  # type: ignore[no-untyped-def]
        (d,) = designs
        self.ran.append(d)
        top = 5.0 if self.index[d] in self.breaking else 1.0
        run = {"staleness_mean": 0.1, "staleness_max": top, "discarded_share": 0.0}
        return [Evaluated(d, steps, [run] * n_seeds)]


def _rung(designs: list[plan.Design]) -> list[Evaluated]:
    """``designs`` as a full rung, fastest first, every one feasible by its estimate."""
    return [Evaluated(d, STEPS, [], {"throughput_per_hour": 1000.0 - i}, True) for i, d in enumerate(designs)]


@settings(max_examples=150, deadline=None)
@given(
    kinds=st.lists(
        st.tuples(st.integers(0, 1), st.sampled_from(["partial", "abort_reprefill"])), min_size=1, max_size=24
    ),
    cut=st.dictionaries(
        st.tuples(st.integers(0, 1), st.sampled_from(["partial", "abort_reprefill"])), st.integers(0, 24)
    ),
    budget=st.integers(0, 6),
)
def test_a_design_is_refused_only_on_a_slower_design_of_its_own_family_that_broke(
    kinds: list[tuple[int, str]], cut: dict[tuple[int, str], int], budget: int
) -> None:
    """Designs of a few families interleaved in throughput order; in each family the faster ones
    break (its first ``cut`` members). Whatever the order, verification runs at most ``budget``
    designs, and every design refused unrun names a design that is slower, of its own family, and
    broke; the recommendation held."""
    designs = [D(2 * (i + 1), 1, eta, update) for i, (eta, update) in enumerate(kinds)]
    rank: dict[tuple[int, str], int] = {}
    breaking = set()
    for i, (eta, update) in enumerate(kinds):
        k = rank[(eta, update)] = rank.get((eta, update), -1) + 1
        if k < cut.get((eta, update), 0):
            breaking.add(i)
    spec = small_spec(steps=STEPS, constraints=plan.Constraints(max_staleness=2))
    ev = _Breaks(designs, breaking)
    checked = {e.design: e for e in verify(spec, ev, _rung(designs), budget)}  # type: ignore[arg-type]
    assert len(ev.ran) <= budget
    labels = {d.label(spec.n_gpus): d for d in designs}
    for i, d in enumerate(designs):
        note = checked[d].verified
        if "of its family broke" in note:
            by = labels[note.rsplit("(", 1)[1].rstrip(")")]
            assert by in ev.ran and designs.index(by) > i and family(by) == family(d)
            assert checked[by].verified.startswith("verified: broke")
    held = [d for d in ev.ran if checked[d].feasible]
    feasible = [d for d in designs if checked[d].feasible]  # those below the pick are left as they are
    if held:  # the pick is the fastest that held
        assert feasible[0] == min(held, key=designs.index)
    else:
        assert not feasible
    if len(ev.ran) < budget:  # it stopped before the budget: every design above the pick was decided
        top = designs.index(feasible[0]) if feasible else len(designs)
        for i, d in enumerate(designs[:top]):
            slower_broke = [
                b for b in designs[i + 1 :] if family(b) == family(d) and designs.index(b) in breaking
            ]
            assert d in ev.ran or any(b in ev.ran for b in slower_broke), (d, checked[d].verified)


def test_when_the_fastest_breaks_the_next_verified_is_the_fastest_of_a_lower_eta() -> None:
    """The floor: an eta-1 design breaks, so the fastest eta-0 design is verified next, not the
    middle of the list (which here is another eta-1 design), and once it holds the budget left
    bisects the designs above it."""
    designs = [D(2 * (i + 1), 1, 1, "partial") for i in range(6)] + [D(14, 1, 0, "partial", 1, 1.25)]
    designs += [D(16, 1, 0, "partial")]
    spec = small_spec(steps=STEPS, constraints=plan.Constraints(max_staleness=2))
    ev = _Breaks(designs, set(range(6)))  # every eta-1 design breaks
    checked = {e.design: e for e in verify(spec, ev, _rung(designs), 3)}  # type: ignore[arg-type]
    assert ev.ran[:2] == [designs[0], designs[6]]
    assert checked[designs[6]].feasible and checked[designs[6]].verified.startswith("held")
    assert len(ev.ran) == 3 and ev.ran[2].eta == 1  # the last verification went above it


# -- refusals the same walkthrough found in the plan's API and command line ------------------------

ROOT = Path(__file__).resolve().parents[1]
SPEC_FILE = ROOT / "examples" / "plan_qwen3_8b.toml"


@pytest.mark.parametrize("spec", [str(SPEC_FILE), SPEC_FILE, {"cluster": {}}, None])
@pytest.mark.parametrize("call", [plan.plan, plan.search])
def test_a_plan_of_anything_but_a_plan_spec_is_refused_naming_spec(call, spec) -> None:  # type: ignore[no-untyped-def]
    """A path handed to ``plan`` failed inside the search (``'str' object has no attribute
    'baseline'``); it is refused naming ``spec``, and the message says how to read a file."""
    with pytest.raises(plan.PlanError) as err:
        call(spec)
    assert err.value.field == "spec" and "pipesim.plan.load" in str(err.value)


@pytest.mark.parametrize(
    "sets", ["cluster.n_gpus=8", b"cluster.n_gpus=8", [1], 5, ["cluster.n_gpus=8", None]]
)
def test_set_pairs_that_are_not_a_sequence_of_strings_are_refused_naming_sets(sets: object) -> None:
    """A bare string was iterated by character (``--set 'c': a plan spec takes TABLE.KEY=VALUE``)."""
    with pytest.raises(plan.PlanError) as err:
        plan.load(SPEC_FILE, sets)  # type: ignore[arg-type]
    assert err.value.field == "sets"


@pytest.mark.parametrize("sets", [["cluster.n_gpus=32"], ("cluster.n_gpus=32",)])
def test_set_pairs_as_a_list_or_tuple_apply(sets: list[str] | tuple[str, ...]) -> None:
    assert plan.load(SPEC_FILE, sets).n_gpus == 32


@pytest.mark.parametrize(
    ("argv", "refused"),
    [
        (["--method", "grid", "--trials", "5"], True),  # the grid screens every design
        (["--method", "slices", "--trials", "5"], False),  # its screens and probes
        (["--method", "optuna", "--trials", "5"], False),
        (["--method", "auto", "--trials", "5"], False),  # may become Optuna
        (["--method", "grid"], False),
    ],
)
def test_trials_under_the_grid_search_is_refused_naming_trials(argv: list[str], refused: bool) -> None:
    """``--method grid --trials 5`` ran the whole grid without a word about ``--trials``."""
    from pipesim.plan.options import check_args

    problem = check_args(plan.parser().parse_args([str(SPEC_FILE), "--no-cache", *argv]))
    assert (problem is not None and "--trials" in problem) is refused, problem


def test_trials_with_a_spec_whose_method_is_grid_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A spec file saying ``method = "grid"`` and ``--trials`` alone on the command line: the
    check runs once the spec is read (before, the grid ran with ``--trials`` unread). Nothing runs:
    the refusal comes before the search."""
    spec = tmp_path / "grid.toml"
    spec.write_text(SPEC_FILE.read_text().replace('method = "auto"', 'method = "grid"', 1))
    status = plan.main([str(spec), "--no-cache", "--trials", "5", "--quiet"])
    err = capsys.readouterr().err
    assert status == 2
    assert "--trials" in err and "grid" in err
