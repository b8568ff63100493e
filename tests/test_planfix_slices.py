"""The slice search on both sides of the balance, and the judge's verdict at the full rung's door
(``pipesim.plan.slices``; a user's walkthrough of the agent spec of ``docs/plan.md``).

The search runs against a stand-in evaluator whose throughput is one peak along the split and
whose mean staleness rises with it, so the best feasible split of the slice is known exactly;
the balance (the fluid ceiling's turn) is put below, at and above that peak."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import pytest

import pipesim.plan as plan
from pipesim.compute import GPUS, MODELS
from pipesim.plan.evaluate import Evaluated
from pipesim.plan.slices import meets, pick_full, slice_search, slices
from pipesim.plan.space import Design
from tests.test_plan_slices import AGENT

LIMIT = 1.0


def one_slice_spec(n_gpus: int = 32) -> plan.PlanSpec:
    """One disaggregated slice (TP 1, eta 0, partial) of ``n_gpus - 1`` splits, no colocated."""
    return plan.PlanSpec(
        gpu=GPUS["h100-sxm"],
        n_gpus=n_gpus,
        model=MODELS["qwen3-8b"],
        workload=AGENT,
        batch_size=64,
        constraints=plan.Constraints(mean_staleness=LIMIT),
        space=plan.Space(placement=tuple(range(1, n_gpus)), tp=(1,), eta=(0,), update=("partial",)),
        steps=8,
        screen_steps=2,
        seeds=3,
        max_model_len=8192,
        max_num_seqs=64,
        trials=60,
        batch=8,
        method="slices",
        first_cut=False,
    )


class Landscape:
    """A stand-in :class:`~pipesim.plan.evaluate.Evaluator`: samples/h ``thr(t)`` and mean
    staleness ``stale(t)`` of a design with ``t`` trainer GPUs, judged as the full rung judges."""

    def __init__(self, thr: Callable[[int], float], stale: Callable[[int], float]) -> None:
        self.thr, self.stale = thr, stale
        self.probed: list[Design] = []

    def evaluate(
        self, designs: Iterable[Design], steps: int, n_seeds: int, desc: str = ""
    ) -> list[Evaluated]:
        out = []
        for d in designs:
            s = self.stale(d.trainer_gpus)
            m = {
                "throughput_per_hour": self.thr(d.trainer_gpus),
                "staleness_mean": s,
                "staleness_max": 1.0,
                "discarded_share": 0.0,
                "offpolicy_token_share": 0.0,
            }
            full = desc == "probe"
            if full:
                self.probed.append(d)
            status = {"mean_staleness": ("met" if s <= LIMIT else "violated", s)}
            out.append(Evaluated(d, steps, [m], m, full and s <= LIMIT, status, float(s <= LIMIT)))
        return out


CASES = {  # balance, peak, first split breaking the limit (None: none)
    "peak above the balance": (10, 16, None),
    "peak far above the balance": (8, 22, None),
    "peak below the balance": (16, 9, None),
    "peak at the balance": (12, 12, None),
    "limit below the peak, above the balance": (10, 20, 15),
    "limit below the balance": (16, 18, 8),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_slice_search_finds_the_best_feasible_split_on_either_side_of_the_balance(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the step-up on (``slices.STEP_UP``, off by default)."""
    import pipesim.plan.slices as slices_module

    monkeypatch.setattr(slices_module, "STEP_UP", 1.25)
    bal, peak, breaks = CASES[case]
    spec = one_slice_spec()
    pool = plan.candidates(spec)
    (designs,) = slices(pool).values()
    ceilings = {d: float(min(d.trainer_gpus, bal)) for d in pool}  # turns at the balance split

    def thr(t: int) -> float:
        return 1000.0 - (t - peak) ** 2  # one peak; 1.25 x any screen here exceeds the peak

    def stale(t: int) -> float:
        return 0.5 if breaks is None or t < breaks else 1.5  # rises with the split

    ev = Landscape(thr, stale)
    _, probes = slice_search(spec, ev, pool, ceilings)  # type: ignore[arg-type]
    feasible = [d.trainer_gpus for d in designs if stale(d.trainer_gpus) <= LIMIT]
    want = max(feasible, key=thr)
    got = max((e for e in probes if meets(spec, e)), key=lambda e: e.throughput)
    assert got.design.trainer_gpus == want
    # bounded: the lowest split, the balance, the step-up, then two bisections of the bracket
    n = len(designs)
    assert len(ev.probed) <= 2 + math.ceil(math.log(n) / math.log(1.25)) + 2 * math.ceil(math.log2(n))
    assert len(set(ev.probed)) == len(ev.probed)  # no split probed twice


def test_by_default_the_slice_search_stays_at_or_below_the_balance() -> None:
    """``STEP_UP`` is off by default: with the peak above the balance, no probe goes above the
    balance split, and the probes stay within 2 + 2 log2(n)."""
    bal, peak = 10, 16
    spec = one_slice_spec()
    pool = plan.candidates(spec)
    (designs,) = slices(pool).values()
    ceilings = {d: float(min(d.trainer_gpus, bal)) for d in pool}
    ev = Landscape(lambda t: 1000.0 - (t - peak) ** 2, lambda t: 0.5)
    slice_search(spec, ev, pool, ceilings)  # type: ignore[arg-type]
    assert ev.probed and max(d.trainer_gpus for d in ev.probed) <= bal
    assert len(ev.probed) <= 2 + 2 * math.ceil(math.log2(len(designs)))


def _probe(t: int, thr: float, states: dict[str, str], mean: float = 0.9) -> Evaluated:
    d = Design(trainer_gpus=t, tp=2, eta=1, update="partial")
    m = {
        "throughput_per_hour": thr,
        "staleness_mean": mean,
        "staleness_max": 3.0,
        "discarded_share": 0.0,
        "offpolicy_token_share": 0.0,
    }
    status = {k: (v, 1.004 if v == "violated" else 0.9) for k, v in states.items()}
    feasible = all(v == "met" for v in states.values())
    return Evaluated(d, 12, [m], m, feasible, status, 1.0 if feasible else 0.5)


def test_the_full_rung_takes_no_probe_the_judge_marks_violated() -> None:
    """A probe whose whole-run mean (0.90) meets the limit while the judge's settled estimate
    (1.004) breaks it is refused at the full rung; a slower ``open`` one takes its place."""
    spec = one_slice_spec().with_(constraints=plan.Constraints(mean_staleness=1.0, max_staleness=4))
    censored = _probe(20, 14_600.0, {"mean_staleness": "violated", "max_staleness": "met"})
    open_ = _probe(22, 9_600.0, {"mean_staleness": "met", "max_staleness": "open"})
    floor = _probe(18, 8_100.0, {"mean_staleness": "met", "max_staleness": "met"})
    assert spec.constraints.feasible(censored.metrics)  # the measured limits pass
    assert not meets(spec, censored) and meets(spec, open_)
    chosen = pick_full(spec, [censored, open_, floor], quota=2)
    assert censored.design not in chosen
    assert set(chosen) == {open_.design, floor.design}
