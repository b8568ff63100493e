"""The slice search: screens and full-length probes spent along the trainer:rollout split, where the
answer can change (on the agent spec of ``docs/plan.md`` the best feasible design sits on a ridge
against the staleness limits).

A *slice* is every disaggregated design that shares the non-placement axes (TP, eta, weight
update, sync interval, over-sampling); its designs differ only in the trainer GPUs. Two facts of
the model order a slice:

* **Throughput rises with the trainer's share until the rollout binds**, then falls (the trainer
  idles while fewer engines generate): one peak. The fluid ceiling (:mod:`pipesim.plan.fluid`)
  estimates the turn by the *balance* split, the smallest split at which the slice's ceiling
  reaches its maximum, but the real peak lies on either side of it. The ceiling overrates the
  engines more than the trainer (full batches, no tool waits), which moves the turn below the
  balance; at eta = 0 the step's training adds to the wait for the rollout's tail instead of
  overlapping it, which moves it above: on a 4-turn variant of the agent spec of ``docs/plan.md``
  (1,500-token median turns; 64 H100s, eta 0, partial, over-sampled) the balance of the TP 2
  slice is 20:44 (9,570 samples/h over seeds 0-4) and 28:36 reaches 9,867; TP 1's is 19:45, and
  24:40 and 32:32 are faster. So a slice is searched on both sides of its balance.
* **Staleness rises with the trainer's share**: a faster trainer ages a sample in flight by more
  versions per second of generation. The lowest split is the slice's best chance of meeting the
  staleness limits; if it fails them at full length, so does the whole slice. The splits that
  meet the limits are the ones below a boundary.

So the best feasible design of a slice is the peak of its throughput among the splits below the
boundary, and a search of full-length runs finds it:

1. **Screen** (``screen_steps``, one seed) the balance split of every slice, slices in the order
   of their best ceiling, and every colocated design (a slice of one, not on the split axis), at
   most ``trials`` designs with the first cut's. A screen gives its slice a bound (a full run's
   throughput is at most :data:`SCREEN_GAIN` times its screen's); it is never judged feasible
   (:mod:`pipesim.plan.judge`).
2. **Probe** at full length with the first simulation seed, in rounds of ``batch`` (so the worker
   count changes nothing), highest bound first, one probe per slice per round
   (:meth:`_Slice.next_probe`): a slice's lowest split (if it breaks the limits, the slice is done,
   and so is the same slice with a larger eta, which waits for it: eta is the admission's
   allowance of versions in flight), then its balance split; then, from the fastest probe that
   meets the limits, where :data:`STEP_UP` is set (off by default: see there), a **step up** to
   the split nearest that many times its trainer GPUs while nothing above it is known, and once
   the peak is bracketed -- above by a slower probe or one that breaks the limits -- the middle
   of the wider gap beside the fastest probe (a
   bisection of the bracket, as a golden-section search does; the gap below the fastest only
   when a slower probe above brackets the peak: below a breaking probe throughput is taken to
   rise to it). A slice stops when no gap is left wider than one split.
   A probe *meets* the limits (:func:`meets`) when its measured staleness and discarded share
   are within them and the judge (:func:`pipesim.plan.judge.judge`, at full length on its one
   seed) marks none of them ``violated``: the whole-run mean is censored low by the run's warm-up
   (:mod:`pipesim.plan.judge`), so an eta-1 design of that 4-turn spec averages 0.90 over 12
   steps while its settled mean is 1.004 against a limit of 1. Whether the limits hold 4x as long is the full
   rung's judgement, on all the seeds. A slice stops, too, when its bound -- its screen's, and
   the larger of its smallest breaking probe's throughput and its fastest probe's -- is at most
   the best probe so far that the judgement accepts (one seed: the cautious side) or the proved
   designs' screens. At most ``trials`` probes.
3. The full rung (:func:`pipesim.plan.search.search`, :func:`pick_full`) takes a third of its
   quota from the fastest probes judged feasible (a floor) and the rest from the fastest that
   meet the limits (so none the judge marks violated; ``open`` ones by throughput); a probe's run
   is the full rung's first seed, reused from the cache.

The two facts are assumptions of the search, not of the judgement: the recommendation is judged
from its own full runs, and a slice whose throughput has several peaks, or whose staleness does
not rise with the split, is searched less well, not judged wrongly. A probe costs one full-length
run; a slice of n splits takes at most about 2 + 2 log2(n) of them (the bisection of the
bracket; log_1.25(n) more with a step-up of 1.25), and usually far fewer, since a slice stops as soon as its
bound falls below the best accepted probe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipesim.plan.evaluate import Evaluated, Evaluator
from pipesim.plan.space import Design, PlanSpec

__all__ = ["SCREEN_GAIN", "STEP_UP", "SliceTrace", "balance", "meets", "pick_full", "slice_search", "slices"]

SCREEN_GAIN = 1.25
"""A full run's throughput over its screen's, at most (measured 1.10-1.12 on the agent spec of
``docs/plan.md``: a screen's first step waits for a whole batch)."""

Key = tuple[int, int, str, int, float]


def key(d: Design) -> Key:
    return (d.tp, d.eta, d.update, d.sync_every, d.oversample)


def slices(pool: Sequence[Design]) -> dict[Key, list[Design]]:
    """The disaggregated designs of ``pool`` by slice, each slice's in split order."""
    out: dict[Key, list[Design]] = {}
    for d in sorted(pool, key=lambda d: (key(d), d.trainer_gpus)):
        if not d.colocated:
            out.setdefault(key(d), []).append(d)
    return out


def balance(designs: Sequence[Design], ceilings: dict[Design, float]) -> int:
    """Index of the smallest split at which the slice's fluid ceiling reaches its maximum."""
    top = max(ceilings[d] for d in designs)
    return next(i for i, d in enumerate(designs) if ceilings[d] >= top * (1 - 1e-9))


STEP_UP: float | None = None
"""Off (None) by default; a number turns on a step up from a slice's fastest probe to the first
split with at least that many times its trainer GPUs (and at least the next split), where 1.25
suits the balance's relative error (the 12-step peak of the 4-turn agent spec's eta-0 TP 2 slice
lies 40% above it). Measured both ways (``pipesim plan SPEC --workers 2 --no-sensitivity``):
with 1.25, ``examples/agent_plan.toml`` recommended split 18:46 TP 2 at 10,823 samples/h against
20:44 at 11,175 without (the step-up's splits, 34:30 to 42:22, looked best at 12 steps, broke at
48 and spent verification's budget of 3); on the 4-turn spec both settings recommend a colocated
TP 1 eta-0 design (10,366 and 10,322 samples/h, within each other's intervals), the splits the
step-up finds there (26:38 TP 2, 9,869) being slower. So the search stays at or below the
balance unless asked: ``slices.STEP_UP = 1.25`` before a plan looks above it."""


@dataclass
class _Slice:
    designs: list[Design]
    hi: int
    """Index of the balance split (:func:`balance`)."""
    bound: float = float("inf")
    met: dict[int, float] = field(default_factory=dict)
    """Index -> throughput of the probes that meet the limits (:func:`meets`)."""
    broke: set[int] = field(default_factory=set)
    """Indices of the probes that break them."""
    done: bool = False
    broken: bool = False
    """Its lowest split breaks the limits at full length: every split does."""

    @property
    def feasible(self) -> int | None:
        """Index of the largest split known to meet the limits at full length."""
        return max(self.met, default=None)

    @property
    def infeasible(self) -> int | None:
        """Index of the smallest split known to break them at full length."""
        return min(self.broke, default=None)

    def next_probe(self) -> int | None:
        """The next split to probe (module docstring, step 2); None: the slice is searched."""
        if self.done:
            return None
        if not self.met:
            return 0 if not self.broke else None
        top = min(self.broke, default=len(self.designs))  # the splits from here on break the limits
        if self.hi < top and self.hi not in self.met:
            return self.hi
        below_top = {i: t for i, t in self.met.items() if i < top}
        if not below_top:
            return None
        j = max(below_top, key=lambda i: (below_top[i], -i))  # the fastest; ties: the less stale
        above = [i for i in below_top if i > j]
        if not above and top == len(self.designs):
            return None if STEP_UP is None else self._step_up(j, STEP_UP)
        r = min([*above, top])  # slower than j, or the first split known to break
        gaps = []
        if r - j > 1:
            gaps.append((r - j, 1, (j + r) // 2))
        if above:  # bracketed by a slower probe above: the peak may lie below j too
            lo = max([i for i in below_top if i < j], default=-1)
            if j - lo > 1:
                gaps.append((j - lo, 0, (lo + j + 1) // 2))
        return max(gaps)[2] if gaps else None  # the wider gap; a tie: the one above

    def _step_up(self, j: int, factor: float) -> int | None:
        """The first split with at least ``factor`` (:data:`STEP_UP`) x the trainer GPUs of split
        ``j`` (at least the next split; the last split if none has as many); None: ``j`` is the last."""
        if j >= len(self.designs) - 1:
            return None
        want = factor * self.designs[j].trainer_gpus
        after = range(j + 1, len(self.designs))
        return next((i for i in after if self.designs[i].trainer_gpus >= want - 1e-9), after[-1])


@dataclass
class SliceTrace:
    """What the slice search ran, in order: for tests and the report."""

    screened: list[Design] = field(default_factory=list)
    probed: list[list[Design]] = field(default_factory=list)
    """The probes, round by round."""


def meets(spec: PlanSpec, e: Evaluated) -> bool:
    """A probe meets the limits: its measured maximum, mean and discarded share are within them,
    and the judge (:func:`pipesim.plan.judge.judge`) marks no constraint ``violated`` -- the
    whole-run mean is censored low by the warm-up, so a run whose settled mean is past the limit
    breaks it even when its whole-run mean is below. The search's test along a slice and the full
    rung's entry (:func:`pick_full`); whether the limits hold 4x as long is the full rung's
    question (on all the seeds)."""
    judged = any(state == "violated" for state, _ in e.status.values())
    return spec.constraints.feasible(e.metrics) and not judged


def slice_search(
    spec: PlanSpec,
    ev: Evaluator,
    pool: Sequence[Design],
    ceilings: dict[Design, float],
    pre: Sequence[Evaluated] = (),
    trace: SliceTrace | None = None,
) -> tuple[list[Evaluated], list[Evaluated]]:
    """(screens, probes) of the slice search over ``pool`` (module docstring); ``pre``: designs
    screened already (the first cut's), counted in ``trials``."""
    trace = SliceTrace() if trace is None else trace
    groups: dict[Any, list[Design]] = dict(slices(pool))
    groups |= {("colocated", d): [d] for d in pool if d.colocated}
    order = sorted(groups, key=lambda k: (-max(ceilings[d] for d in groups[k]), str(k)))
    state = {k: _Slice(groups[k], balance(groups[k], ceilings)) for k in order}
    seen: dict[Design, Evaluated] = {e.design: e for e in pre}
    want = [d for d in dict.fromkeys(state[k].designs[state[k].hi] for k in order) if d not in seen]
    want = want[: max(spec.trials - len(seen), 0)]
    trace.screened = want
    for e in ev.evaluate(want, spec.screen_steps, 1, desc=f"screen ({spec.screen_steps} steps, slices)"):
        seen[e.design] = e
    for k in order:
        s = state[k]
        got = [seen[d] for d in s.designs if d in seen]
        s.done = not got  # left out by the budget
        s.bound = SCREEN_GAIN * max((e.throughput for e in got), default=0.0)
    # a floor to beat: the proved designs' screens (their constraints hold at any length)
    best = max((e.throughput for e in pre if e.feasible), default=0.0)
    probes: dict[Design, Evaluated] = {}
    while len(probes) < spec.trials:
        batch: list[tuple[Any, int]] = []
        for s in state.values():  # stopped: nothing left to probe, or nothing to gain
            s.done = s.done or s.next_probe() is None or s.bound <= best
        for k in order:
            s = state[k]
            s.done = s.done or any(state[j].broken for j in _less_eta(k, state))
        for k in sorted(order, key=lambda k: -state[k].bound):  # stable: ties in ceiling order
            s, i = state[k], state[k].next_probe()
            if i is None or len(batch) >= min(spec.batch, spec.trials - len(probes)):
                continue
            if i == 0 and any(not state[j].done and state[j].feasible is None for j in _less_eta(k, state)):
                continue  # a less stale slice first: if it breaks, so does this one
            batch.append((k, i))
        if not batch:
            break
        designs = [state[k].designs[i] for k, i in batch]
        trace.probed.append(designs)
        for (k, i), e in zip(batch, ev.evaluate(designs, spec.steps, 1, desc="probe"), strict=True):
            probes[e.design] = e
            s = state[k]
            if meets(spec, e):
                s.met[i] = e.throughput
                if e.feasible:  # judged as the full rung judges (one seed: the cautious side)
                    best = max(best, e.throughput)
            else:
                s.broke.add(i)
                # the splits below it are slower, unless the slice peaked below it already
                s.bound = min(s.bound, max([e.throughput, *s.met.values()]))
                s.broken = s.done = i == 0  # its least stale split breaks the limits: so do the others
    screens = [seen[d] for d in sorted(seen)]
    return screens, [probes[d] for d in sorted(probes)]


def _less_eta(k: Any, state: dict[Any, _Slice]) -> list[Any]:
    """The slices equal to ``k`` but for a smaller eta: less stale (eta is the admission's
    allowance of versions in flight)."""

    def eta_free(k: Any) -> Any:
        d = state[k].designs[0]
        return (d.colocated, d.tp, d.update, d.sync_every, d.oversample)

    mine, eta = eta_free(k), state[k].designs[0].eta
    return [j for j in state if eta_free(j) == mine and state[j].designs[0].eta < eta]


def pick_full(spec: PlanSpec, probes: Sequence[Evaluated], quota: int) -> list[Design]:
    """The designs for the full rung: a third of ``quota`` to the fastest probes judged feasible
    (a floor), the rest to the fastest probes that meet the limits (:func:`meets`: none the judge
    marks violated, so a probe whose whole-run mean passes only because the warm-up censors it
    does not take the place of an ``open`` one)."""
    ranked = sorted(probes, key=lambda e: (-e.throughput, e.design))
    chosen = [e.design for e in ranked if e.feasible][: -(-quota // 3)]
    chosen += [e.design for e in ranked if meets(spec, e) and e.design not in chosen]
    return sorted(chosen[:quota])
