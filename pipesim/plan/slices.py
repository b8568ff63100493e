"""The slice search: screens and full-length probes spent along the trainer:rollout split, where the
answer can change (on the agent spec of ``docs/plan.md`` the best feasible design sits on a ridge
against the staleness limits).

A *slice* is every disaggregated design that shares the non-placement axes (TP, eta, weight
update, sync interval, over-sampling); its designs differ only in the trainer GPUs. Two facts of
the model order a slice:

* **Throughput rises with the trainer's share until the rollout binds**, then falls (the trainer
  idles while fewer engines generate). The fluid ceiling (:mod:`pipesim.plan.fluid`) puts the turn
  at the *balance* split: the smallest split at which the slice's ceiling reaches its maximum. The
  ceiling overrates the engines more than the trainer (full batches, no tool waits), so the real
  turn lies at or below it, and a slice's candidates are its splits from the lowest to the
  balance.
* **Staleness rises with the trainer's share**: a faster trainer ages a sample in flight by more
  versions per second of generation. The lowest split is the slice's best chance of meeting the
  staleness limits; if it fails them at full length, so does the whole slice.

So the best feasible design of a slice is the largest split below the balance that meets the
limits, and a bisection of full-length runs finds it:

1. **Screen** (``screen_steps``, one seed) the balance split of every slice, slices in the order
   of their best ceiling, and every colocated design (a slice of one, not on the split axis), at
   most ``trials`` designs with the first cut's. A screen gives its slice a bound (a full run's
   throughput is at most :data:`SCREEN_GAIN` times its screen's); it is never judged feasible
   (:mod:`pipesim.plan.judge`).
2. **Probe** at full length with the first simulation seed, in rounds of ``batch`` (so the worker
   count changes nothing), highest bound first: a slice's lowest split (if it breaks the limits,
   the slice is done, and so is the same slice with a larger eta, which waits for it: eta is the
   admission's allowance of versions in flight), then its balance split (if it meets them, done),
   then the middle of the largest split known to meet the limits and the smallest known to break
   them. A probe *meets* the limits when its measured staleness and discarded share are within
   them (:func:`meets`); whether they hold 4x as long is the full rung's judgement, on all the
   seeds. A slice stops when its bound -- its screen's, and the throughput of its smallest
   breaking probe (every split below it is slower) -- is at most the best probe so far that the
   judgement accepts (one seed: the cautious side) or the proved designs' screens. At most
   ``trials`` probes.
3. The full rung (:func:`pipesim.plan.search.search`, :func:`pick_full`) takes a third of its
   quota from the fastest probes judged feasible (a floor) and the rest from the fastest that meet
   the limits; a probe's run is the full rung's first seed, reused from the cache.

The two facts are assumptions of the search, not of the judgement: the recommendation is judged
from its own full runs, and a slice whose staleness does not rise with the split is searched
less well, not judged wrongly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipesim.plan.evaluate import Evaluated, Evaluator
from pipesim.plan.space import Design, PlanSpec

__all__ = ["SCREEN_GAIN", "SliceTrace", "balance", "meets", "pick_full", "slice_search", "slices"]

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


@dataclass
class _Slice:
    designs: list[Design]
    hi: int
    bound: float = float("inf")
    feasible: int | None = None
    """Index of the largest split known to meet the limits at full length."""
    infeasible: int | None = None
    """Index of the smallest split known to break them at full length."""
    done: bool = False
    broken: bool = False
    """Its lowest split breaks the limits at full length: every split does."""

    def next_probe(self) -> int | None:
        if self.done:
            return None
        if self.feasible is None:
            return 0 if self.infeasible is None else None
        if self.infeasible is None:
            return self.hi if self.hi > self.feasible else None
        if self.infeasible - self.feasible > 1:
            return (self.feasible + self.infeasible) // 2
        return None


@dataclass
class SliceTrace:
    """What the slice search ran, in order: for tests and the report."""

    screened: list[Design] = field(default_factory=list)
    probed: list[list[Design]] = field(default_factory=list)
    """The probes, round by round."""


def meets(spec: PlanSpec, e: Evaluated) -> bool:
    """A probe meets the limits as measured (its maximum at most the limit, its mean and discarded
    share within theirs): the bisection's test. Whether it holds 4x as long, from one seed's tail,
    is the full rung's question (:func:`pipesim.plan.judge.judge`, on all the seeds)."""
    return spec.constraints.feasible(e.metrics)


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
                s.feasible = i
                if e.feasible:  # judged as the full rung judges (one seed: the cautious side)
                    best = max(best, e.throughput)
            else:
                s.infeasible = i
                s.bound = min(s.bound, e.throughput)  # the splits below it are slower
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
    (a floor), the rest to the fastest probes that meet the limits as measured."""
    ranked = sorted(probes, key=lambda e: (-e.throughput, e.design))
    chosen = [e.design for e in ranked if e.feasible][: -(-quota // 3)]
    chosen += [e.design for e in ranked if meets(spec, e) and e.design not in chosen]
    return sorted(chosen[:quota])
