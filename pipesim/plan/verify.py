"""Verify before recommending: a design whose staleness verdict rests on an estimate is run
:data:`~pipesim.plan.judge.HORIZON` times as long before the plan recommends it.

The full rung's judgement (:mod:`pipesim.plan.judge`) accepts a constraint in one of two ways: a
bound the design's own policies declare (``drain`` with the count throttle bounds staleness by
eta, at any length), or an estimate from the runs' settled part and tail. An estimate can be
wrong: on the agent spec of ``docs/plan.md`` the designs at the top hold a maximum staleness of 4
with about one sample there per 12-step run, the tail estimate's cap on an unseen level depends on
the seed count (``HORIZON x 0.5 / seeds`` samples beyond the limit), and the pick broke the limit
on one of five 48-step runs. So before a design is recommended:

* a full run that meets every limit but whose maximum the tail estimate doubts, or sits at the
  ceiling its run can show (``open`` at the full rung: :func:`tail_open`), is verified too, on
  twice the plan's seeds (the selection's and as many more: on the agent spec a pick at its
  limit held on seeds 0-4 and broke on seed 11);
* so is a full run that meets every limit but whose settled mean staleness sits above the limit
  by no more than its error (``open`` at the full rung: :func:`mean_open`), on the plan's seeds;
  the longer runs' settled estimate (:func:`pipesim.plan.judge.mean_estimate`, over the seeds)
  is final: above the limit by any margin, it breaks (``broke mean_staleness at 48 steps
  (settled mean 2.01 > 2), seeds 0-2``), so nothing stays open;
* a design every one of whose staleness constraints (mean, maximum) is proved by its declared
  bound (:func:`needs_verification` is False) is taken as it is: it is never re-run; where the
  spec sets no staleness limit, no design needs verifying, and the note says there is nothing to
  verify rather than a bound the design may not declare (``partial`` declares none);
* otherwise the design is run ``HORIZON x steps`` steps on the plan's simulation seeds, and it
  *holds* when every seed's run meets every limit (mean staleness, maximum staleness, discarded
  share: the metrics the judge reads, :meth:`~pipesim.plan.space.Constraints.violations`);
* a design that breaks is marked infeasible with the reason (``broke max_staleness at 48 steps
  (5 > 4), seed 2``). The order (:func:`_next`), up to ``budget`` verifications in all
  (:data:`BUDGET`): the fastest first (if it holds, nothing beats it); while none has held, next
  the fastest design of a lower eta than every design that broke (the **floor**: eta is the
  admission bound, so a design of a lower eta admits samples fewer versions ahead; on the
  walkthrough spec below a whole eta broke at each loose limit where the next one down held);
  with none, and once one has held, **bisection**: the middle of the designs still undecided
  above the best that held;
* a design that breaks speaks only for its **family** (:func:`family`: the same eta, update,
  sync interval and over-sampling, differing in placement and TP): the faster designs of its
  family are refused without a run (``not verified: a slower design of its family broke (split
  12:4 tp1 eta=1 partial)``), a design of another family never is. Bisection assumes that a
  faster design breaks more easily, as on the agent spec: there the designs that break at 48
  steps are the fastest of a family whose 12-step runs look alike (``benchmarks/plan_reference.py``:
  33 of 155 broke, at 10,197-12,965 samples/h; 122 held, at up to 11,550), and walking down from
  the fastest spent the whole budget on designs that broke. Across families the throughput order
  says nothing: on a walkthrough spec (16 H100s, Qwen3-8B, 8 steps, ``max_staleness = 8``) eta-1
  partial designs broke at 19,397-34,901 samples/h (maxima 10-12), and refusing every design
  faster than one that broke refused an eta-0 over-sampled one at 20,850 whose runs showed a
  maximum of 5; the plan fell back to 7,401, where ``max_staleness = 5`` picked 20,850. Its floor
  now verifies that design second, and it holds;
* with the slice search, :func:`along_slices` then bisects the slice of the fastest design that
  broke (if it beat the recommendation) below it: its smaller splits age samples by fewer
  versions (:mod:`pipesim.plan.slices`), and on the agent spec the rung held only each slice's
  fastest, which broke, while slower splits of the same slices held;
* the feasible designs left unverified above the recommendation are marked infeasible (``not
  verified: verification budget (3) spent``): a design is never recommended on its full runs'
  estimate alone, however much room they leave (on the agent spec designs met at 12 steps broke
  at 48: the estimate is what verification checks), so when none holds, the recommendation falls
  back to the fastest design proved by a bound, and the page says so. If the full rung has none,
  the fastest screened designs proved by their bounds are run in full (``fallback``) until one is
  judged feasible; if none is, the plan has no feasible design.

**Limits.** A looser limit keeps every design a stricter one judged feasible or open (the judge
is monotone in each limit, and a run that holds a limit holds a looser one) and may add designs
above them, usually of a higher eta: when those break, the floor steps down an eta at a time,
toward the designs the stricter limit picked from, instead of bisecting across them. So over the
same full rung and seeds a stricter limit should not recommend a faster design than a looser one.
That is measured (``docs/plan.md``, item 6: the walkthrough spec's maximum limits 0-20 and mean
limits 0.3-3), not proved: a budget can run out on designs that break within one eta, and the
full rung itself depends on the limits (promotion reads :func:`pipesim.plan.judge.p_met`).

The verification runs go through the plan's :class:`~pipesim.plan.evaluate.Evaluator`: they are
counted in its runs and kept in its run cache (memory and disk), so a re-run of the plan reuses
them. The seed-count dependence of the tail estimate is left as it is; verification decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pipesim.plan.evaluate import Evaluated, Evaluator, priced
from pipesim.plan.judge import HORIZON, bound, mean_estimate, warmup_steps
from pipesim.plan.space import CONSTRAINT_METRICS, Design, PlanSpec

if TYPE_CHECKING:
    from pipesim.plan.search import PlanResult

__all__ = [
    "BUDGET",
    "NO_LIMIT",
    "PROVED",
    "TAKEN",
    "along_slices",
    "broken",
    "family",
    "mean_broken",
    "mean_open",
    "needs_verification",
    "taken_note",
    "untested_share",
    "verify",
    "verify_lines",
]

BUDGET = 3
"""Verifications (each ``seeds`` runs of ``HORIZON x steps`` steps) a plan spends at most."""
PROVED = "proved by its declared bound"
NO_LIMIT = "nothing to verify (no staleness limit)"
TAKEN = ("held", PROVED, NO_LIMIT)
"""How the ``verified`` note of a design verification passed starts: it held ``HORIZON`` x as long,
its bound proves its staleness limits, or the spec sets none (:func:`taken_note`)."""


def _staleness_limits(spec: PlanSpec) -> list[float]:
    c = spec.constraints
    return [float(v) for v in (c.mean_staleness, c.max_staleness) if v is not None]


def taken_note(spec: PlanSpec) -> str:
    """The note of a design taken without a longer run (:func:`needs_verification` False): proved
    by its bound where the spec limits staleness, else nothing to verify (the design may declare
    no bound at all: ``partial`` does not)."""
    return PROVED if _staleness_limits(spec) else NO_LIMIT


def needs_verification(spec: PlanSpec, d: Design) -> bool:
    """True when a staleness constraint of ``spec`` (mean or maximum) is not proved for ``d`` by
    the bound its own policies declare (:func:`pipesim.plan.judge.bound`)."""
    limits = _staleness_limits(spec)
    if not limits:
        return False
    b = bound(spec, d)
    return b is None or any(b > lim for lim in limits)


def broken(spec: PlanSpec, runs: Sequence[dict[str, float]], steps: int, seeds: Sequence[int]) -> str | None:
    """Why the runs of ``steps`` steps (one per seed of ``seeds``) break a limit, naming the first
    constraint and seed that does; None when every run meets every limit."""
    c = spec.constraints
    for seed, r in zip(seeds, runs, strict=True):
        if r.get("failed"):
            return f"failed at {steps} steps, seed {seed}: {r.get('error', '')}"
        m = priced(r, spec.cost_per_gpu_hour)
        for name, excess in c.violations(m).items():
            if excess > 1e-12:
                v, lim = float(m[CONSTRAINT_METRICS[name]]), getattr(c, name)
                return f"broke {name} at {steps} steps ({v:g} > {lim:g}), seed {seed}"
    return None


def mean_broken(
    spec: PlanSpec, d: Design, m: dict[str, float], steps: int, seeds: Sequence[int]
) -> str | None:
    """Why the settled mean estimate of ``d``'s runs of ``steps`` steps (aggregated metrics ``m``,
    over ``seeds``) breaks the mean limit; None when it meets it. Final: above the limit by any
    margin breaks, its error notwithstanding (the judge left it open once)."""
    lim = spec.constraints.mean_staleness
    if lim is None:
        return None
    est, _ = mean_estimate(m, bound(spec, d), steps)
    if est <= float(lim) + 1e-12:
        return None
    settled = f"settled mean {est:.4g} > {float(lim):g}"
    return f"broke mean_staleness at {steps} steps ({settled}), seeds {_span(seeds)}"


def tail_open(spec: PlanSpec, e: Evaluated) -> bool:
    """A full run meeting every limit whose open constraints are a maximum the tail estimate
    doubts (and perhaps a mean, :func:`mean_open`): verification decides it by running it longer."""
    return "max_staleness" in _decided_longer(spec, e)


def mean_open(spec: PlanSpec, e: Evaluated) -> bool:
    """A full, settled run meeting every limit whose open constraints are a settled mean above the
    limit by no more than its error (and perhaps a maximum, :func:`tail_open`): verification
    decides it by the longer runs' estimate."""
    return "mean_staleness" in _decided_longer(spec, e)


def _decided_longer(spec: PlanSpec, e: Evaluated) -> set[str]:
    """The open constraints of ``e`` that verification decides: every constraint met but the
    maximum and a settled full-run mean, which are open (none: it is not verified). A mean is
    open at the full rung also when the run is shorter than the design's warm-up; that one stays
    open, as before (the estimate never meets it)."""
    if e.feasible or not spec.constraints.feasible(e.metrics):
        return set()
    states = {name: st for name, (st, _) in e.status.items()}
    unmet = {name for name, st in states.items() if st != "met"}
    settled = e.steps >= spec.steps and e.steps >= warmup_steps(e.design)
    allowed = {"max_staleness", *(("mean_staleness",) if settled else ())}
    if not unmet or not unmet <= allowed or any(states[name] != "open" for name in unmet):
        return set()
    return unmet


def verify(
    spec: PlanSpec,
    ev: Evaluator,
    full: Sequence[Evaluated],
    budget: int = BUDGET,
    fallback: Sequence[Design] = (),
) -> list[Evaluated]:
    """``full`` (the full rung) with the feasible designs verified from the fastest down (module
    docstring): each returned design carries its ``verified`` note, and those that broke or were
    left unverified above the recommendation are infeasible. The order of ``full`` is kept.

    ``fallback``: designs screened and proved by their bounds, fastest first; when no design of
    ``full`` is left to recommend, they are run in full (``steps``, ``seeds``) one by one until
    one is judged feasible, and appended, marked ``fallback: proved by its declared bound`` (or
    ``fallback: nothing to verify ...``: :func:`taken_note`)."""
    out = {e.design: e for e in full}
    if _check(spec, ev, full, budget, out):
        return [out[e.design] for e in full]
    extra = []
    for d in fallback:
        if d in out or needs_verification(spec, d):
            continue
        e = ev.evaluate([d], spec.steps, spec.seeds, desc="fallback")[0]
        extra.append(replace(e, verified=f"fallback: {taken_note(spec)}" if e.feasible else ""))
        if e.feasible:
            break
    return [*(out[e.design] for e in full), *extra]


def family(d: Design) -> tuple[int, str, int, float]:
    """The designs whose verdicts speak for one another (module docstring): the same eta, weight
    update, sync interval and over-sampling, differing in placement and TP. Within one, a faster
    design ages samples more (a larger trainer share: :mod:`pipesim.plan.slices`)."""
    return (d.eta, d.update, d.sync_every, d.oversample)


def _check(
    spec: PlanSpec, ev: Evaluator, full: Sequence[Evaluated], budget: int, out: dict[Design, Evaluated]
) -> bool:
    """Verify ``full``'s feasible designs into ``out``; True when one is left to recommend.

    The designs to verify are the feasible (or open) ones above the fastest design proved by a
    bound (the recommendation if none of them holds), fastest first; they are verified in the
    order :func:`_next` gives (module docstring)."""
    order = sorted(
        (e for e in full if e.feasible or _decided_longer(spec, e)), key=lambda e: (-e.throughput, e.design)
    )
    todo: list[Evaluated] = []
    for e in order:
        if not needs_verification(spec, e.design):
            out[e.design] = replace(e, verified=taken_note(spec))
            break
        todo.append(e)
    proved = len(todo) < len(order)
    ran: set[int] = set()
    refuted: dict[int, int] = {}  # a design not run -> the slower design of its family that broke
    best: int | None = None
    while len(ran) < budget and (i := _next(todo, best, ran, refuted)) is not None:
        e = todo[i]
        # a maximum the tail doubts is held to twice the seeds: on the agent spec a pick at its
        # limit held on seeds 0-4 and broke on seed 11 (verification on the selection's seeds alone)
        # an open mean is decided by the longer runs' settled estimate (module docstring)
        more = 2 if tail_open(spec, e) else 1
        out[e.design] = checked = _run_longer(spec, ev, e, more, mean_open(spec, e))
        ran.add(i)
        if checked.feasible:
            best = i
        else:  # the faster designs of its family are taken to break too
            for j in range(i):
                if j not in ran and j not in refuted and family(todo[j].design) == family(e.design):
                    refuted[j] = i
    n = spec.n_gpus
    for i, e in enumerate(todo[: len(todo) if best is None else best]):
        if i in ran:  # verified, and broke
            continue
        b = refuted.get(i)
        why = (
            f"verification budget ({budget}) spent"
            if b is None
            else f"a slower design of its family broke ({todo[b].design.label(n)})"
        )
        out[e.design] = replace(e, feasible=False, verified=f"not verified: {why}")
    return best is not None or proved


def _next(todo: Sequence[Evaluated], best: int | None, ran: set[int], refuted: dict[int, int]) -> int | None:
    """The index in ``todo`` (fastest first) to verify next; None: nothing left above ``best``.

    First the fastest. While none has held, next the fastest design of a lower eta than every
    design that broke (the floor, module docstring); with none, and once one has held, the middle
    of the designs still undecided above the best that held: bisection, exact over one family."""
    left = [j for j in range(len(todo) if best is None else best) if j not in ran and j not in refuted]
    if not left:
        return None
    if not ran:
        return left[0]
    if best is None:
        low = min(todo[j].design.eta for j in ran)
        floor = next((j for j in left if todo[j].design.eta < low), None)
        if floor is not None:
            return floor
    return left[(len(left) - 1) // 2]


def along_slices(
    spec: PlanSpec, ev: Evaluator, checked: Sequence[Evaluated], pool: Sequence[Design], budget: int = BUDGET
) -> list[Evaluated]:
    """After :func:`verify`, for the slice search: a disaggregated design that broke ``HORIZON`` x
    as long and beat the recommendation has slower splits in its slice (:mod:`pipesim.plan.slices`:
    same TP, eta, update, sync and over-sampling) whose staleness is lower, since staleness rises
    with the trainer's share. The largest of them that holds is found by bisection over the splits
    below it, each run in full on the plan's seeds, judged, and if feasible run ``HORIZON`` x as
    long: at most ``budget`` designs in all, the broken designs' slices fastest first. Returns
    ``checked`` with those designs appended, each marked as verification marks a design."""
    from pipesim.plan.slices import key, slices

    out = {e.design: e for e in checked}
    best = max((e.throughput for e in checked if e.feasible), default=0.0)
    broke = [e for e in checked if e.verified.startswith("verified: broke") and not e.design.colocated]
    by_slice, spent = slices(pool), 0
    for b in sorted(broke, key=lambda e: (-e.throughput, e.design)):
        if spent >= budget or b.throughput <= best:
            break
        splits = [d for d in by_slice.get(key(b.design), []) if d.trainer_gpus < b.design.trainer_gpus]
        lo, hi = 0, len(splits) - 1
        while lo <= hi and spent < budget:  # the largest split that holds lies in [lo, hi]
            mid = (lo + hi) // 2
            d = splits[mid]
            if d not in out:  # a design already run in full keeps its verdict
                spent += 1
                e = ev.evaluate([d], spec.steps, spec.seeds, desc="along the slice")[0]
                out[d] = _run_longer(spec, ev, e) if e.feasible else e
            if out[d].feasible:
                best = max(best, out[d].throughput)
                lo = mid + 1
            else:
                hi = mid - 1
    return list(out.values())


def _run_longer(spec: PlanSpec, ev: Evaluator, e: Evaluated, more: int = 1, mean: bool = False) -> Evaluated:
    """``e`` run ``HORIZON x steps`` steps on the plan's seeds (``more`` times as many): feasible when
    every run meets every limit (and, with ``mean``, the runs' settled mean estimate meets the mean
    limit: :func:`mean_broken`), with the note saying which held or what broke."""
    seeds, steps = ev.seeds(more * spec.seeds), HORIZON * spec.steps
    longer = ev.evaluate([e.design], steps, more * spec.seeds, desc="verify")[0]
    why = broken(spec, longer.runs, steps, seeds)
    if why is None and mean:
        why = mean_broken(spec, e.design, longer.metrics, steps, seeds)
    note = f"verified: {why}" if why else f"held at {steps} steps on seeds {_span(seeds)}"
    return replace(e, feasible=why is None, verified=note)


def _span(seeds: Sequence[int]) -> str:
    return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])


def verify_lines(result: PlanResult) -> list[str]:
    """What verification found (:mod:`pipesim.plan.verify`), fastest first, and the fallback to a
    bound when the budget ran out."""
    done = [e for e in result.full if e.verified]
    if not done:
        return []
    n = result.spec.n_gpus
    if not _staleness_limits(result.spec):  # needs_verification is False for every design
        return [f"verification: {NO_LIMIT}"]
    out = [f"verification (the fastest feasible designs run {HORIZON}x as long before recommending):"]
    out += [f"  {e.design.label(n)}: {e.verified}" for e in done]
    best = result.best
    skipped = any(e.verified.startswith(("not verified", "fallback")) for e in done)
    if skipped and best is not None and not best.verified.startswith("held"):
        out.append(
            "  no verified design held within the budget: the recommendation falls back to the fastest "
            "design proved by a bound"
        )
    if best is not None and best.verified.startswith("held"):
        runs = _held_runs(best.verified)
        out.append(
            f"  the pick held on {runs} runs; a run as long may still break it on up to "
            f"{untested_share(runs):.0%} of seeds (95%, none of {runs} broke): only a declared bound "
            "(drain) proves a maximum"
        )
    return out


def untested_share(runs: int, level: float = 0.95) -> float:
    """The largest share of seeds on which a run breaks that is still consistent, at ``level``,
    with ``runs`` runs none of which broke: ``1 - (1 - level) ** (1 / runs)`` (the exact binomial
    bound for no failures; about ``3 / runs``). On the agent spec a pick held on 5 seeds, and
    broke on seed 11 of 5-11: a bound of 45% says that can happen."""
    return 1.0 - (1.0 - level) ** (1.0 / runs)


def _held_runs(note: str) -> int:
    """The number of seeds a ``held at S steps on seeds A-B`` note names."""
    span = note.rsplit(" ", 1)[1]
    first, _, last = span.partition("-")
    return int(last or first) - int(first) + 1
