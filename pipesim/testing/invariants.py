"""A property-testing kit for pipelines and for the policies users write.

``check_invariants(result)`` asserts what every run must keep, whatever its policies:

* time conservation per slot: intervals never overlap, and busy + paused + idle = simulated time;
* no generation while a sync pauses the engine, and syncs never overlap training steps;
* every trained batch has exactly ``batch_size`` episodes;
* episode conservation: launched = trained + buffered + in flight + discarded + aborted, from
  the statuses at the end and from the engine's books at every training step;
* versions only increase (trainer steps, syncs, and the segments of each episode);
* staleness is never negative, and stays within any bound a policy promises. A policy promises a
  bound by defining ``staleness_bound(scenario) -> int | None``;
* a weight update that promises ``max_pause_s()`` (PipelineRL's in-flight update, the overlapped
  swap) never pauses generation longer than that per sync;
* a policy that promises ``single_version(scenario)`` (``Drain``) never lets an episode run under
  two versions;
* every episode keeps the fields the kernel gave it: its id, the version its replica ran when it
  started, its start, and (slots engine) its time on the slot (:mod:`pipesim.testing.fields`);
  a policy that writes ``ep.version = 0`` fails here;
* re-prefill (``AbortReprefill``) charges each episode exactly the prefill of what it had
  generated at each sync, never more than it generates (:mod:`pipesim.testing.reprefill`).

``check_promises(scenario)`` checks the promises that enable the engine's shortcuts
(``closed``, ``min_items``, ``ready``, ``pauses_only``; :mod:`pipesim.core.port`): it runs the scenario
with the shortcuts and without, and compares the event traces (:mod:`pipesim.testing.promises`).

Strategies for every policy family (``admissions``, ``weight_updates``, ``batchings``,
``failure_policies``, ``duration_models``) let a user property-test a policy of their own
against all the others.

The Hypothesis strategies (``pipeline_configs``, ``duration_lists``, ``scenarios``) are public so
users can property-test their own policies the same way the project's tests do. Hypothesis is
imported lazily: ``import pipesim.testing`` works without it.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from pipesim.config import Scenario
from pipesim.core.episode import ABORTED, BUFFERED, DISCARDED, FAILED, RUNNING, TRAINED
from pipesim.core.errors import shown
from pipesim.core.port import PausePromise, SingleVersionPromise, StalenessPromise
from pipesim.core.validate import FieldTypeError, refuse
from pipesim.results.run import RunResult
from pipesim.testing.fields import episode_field_errors, first
from pipesim.testing.promises import check_promises, policy_names, run_trace
from pipesim.testing.reprefill import reprefill_errors

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

EPS = 1e-9


class InvariantError(AssertionError):
    """An invariant of the pipeline does not hold; the message names it and the evidence.

    ``err.invariant`` is the invariant's name (``"promised staleness bound"``, ``"promises
    hold"``), the part a program or a test reads, as ``FieldError.field`` is for a refusal: the
    evidence in the message may be reworded, the names stay."""

    def __init__(self, message: str, invariant: str = "") -> None:
        super().__init__(message)
        self.invariant = invariant

    def __reduce__(self) -> tuple[object, ...]:  # a sweep worker's failure crosses a process boundary
        return (type(self), (str(self), self.invariant))


def _fail(name: str, detail: str) -> None:
    raise InvariantError(f"invariant '{name}' violated: {detail}", name)


def _need(what: str, value: object, kind: type, hint: str) -> None:
    """A TypeError (a :class:`FieldTypeError`, its field the argument) when the kit is handed the
    wrong kind of object."""
    if not isinstance(value, kind):
        raise refuse(what, f"must be a {hint}, got {type(value).__name__}: {shown(value)}", FieldTypeError)


def _need_scenario(scenario: object) -> None:
    _need("scenario", scenario, Scenario, "pipesim.Scenario")


def _need_result(result: object, scenario: object) -> None:
    _need("result", result, RunResult, "pipesim.RunResult (what pipesim.run returns)")
    if scenario is not None:
        _need_scenario(scenario)


def promised_staleness_bound(result: RunResult, scenario: Scenario | None = None) -> int | None:
    """The tightest staleness bound any of the scenario's policies promises, or None."""
    _need_result(result, scenario)
    bounds = [b for _, b in _declared_bounds(scenario if scenario is not None else result.scenario)]
    return min(bounds) if bounds else None


def _declared_bounds(sc: Scenario) -> list[tuple[object, int]]:
    """Each policy of ``sc`` that promises a staleness bound, with its bound (checked well-formed)."""
    out: list[tuple[object, int]] = []
    for policy in (sc.admission, sc.weight_update, sc.batching):
        if isinstance(policy, StalenessPromise):
            b = policy.staleness_bound(sc)
            if b is not None:
                out.append(
                    (policy, _promised(policy, "staleness_bound", b, "an int >= 0, or None", _is_count))
                )
    return out


def _is_count(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and int(x) >= 0


def _promised(policy: object, method: str, got: Any, what: str, ok: Any) -> Any:
    """A policy's promise ``got`` from ``method`` as a plain number, or ``_fail`` naming the class
    and the method: a bound of ``"2"`` was read as 2, and a NaN pause bound made its check pass
    whatever the pauses were (a comparison with NaN is false)."""
    if not ok(got):
        _fail(
            "promises are well-formed",
            f"{type(policy).__name__}.{method} returned {shown(got)} ({type(got).__name__}); "
            f"a promise is {what}",
        )
    return int(got) if isinstance(got, numbers.Integral) else float(got)


def check_invariants(result: RunResult, scenario: Scenario | None = None) -> None:
    """Assert every pipeline invariant on ``result``; raise :class:`InvariantError` naming the first broken.

    ``scenario`` defaults to ``result.scenario``; ``check_invariants(result, scenario)`` passes it explicitly.
    """
    _need_result(result, scenario)
    if scenario is not None and scenario is not result.scenario and scenario != result.scenario:
        _fail("scenario matches", "the scenario passed is not the one the result was run with")
    if bad := episode_field_errors(result):  # first: the other checks read these fields
        names = policy_names(result.scenario)
        _fail("episodes keep the fields the kernel gave them", f"{first(bad)}; the run's policies: {names}")
    cfg = result.scenario.pipeline
    T = result.sim_time_s
    ev = result.events
    _check_slots(ev, T, cfg.n_slots)
    _check_phases(result)
    _check_batches(result, cfg.batch_size, cfg.steps)
    _check_conservation(result)
    _check_ledger(result)
    _check_versions(result)
    _check_pause_promise(result)
    _check_single_version(result)
    if bad := reprefill_errors(result):
        _fail("re-prefill of what was generated", f"{bad[0]} ({len(bad)} episodes)")
    bound = promised_staleness_bound(result)
    tr = result.trained
    if len(tr) and tr["staleness"].min() < 0:
        _fail("staleness >= 0", f"min staleness {tr['staleness'].min()}")
    if bound is not None and len(tr) and tr["staleness"].max() > bound:
        who = [
            f"{type(q).__name__}.staleness_bound" for q, b in _declared_bounds(result.scenario) if b == bound
        ]
        _fail(
            "promised staleness bound",
            f"max staleness {tr['staleness'].max()} > {bound}, the bound {' and '.join(who)} promised",
        )


def _check_slots(ev: Any, T: float, n_slots: int) -> None:
    gen = ev[ev["kind"].isin(["gen", "pause"])].sort_values(["lane", "start_s", "end_s"])
    if len(gen) and (gen["end_s"] < gen["start_s"] - EPS).any():
        _fail("intervals are ordered", "an interval ends before it starts")
    if len(gen) and ((gen["start_s"] < -EPS) | (gen["end_s"] > T + EPS)).any():
        _fail("intervals inside the run", f"an interval lies outside [0, {T}]")
    for lane, g in gen.groupby("lane"):
        starts, ends = g["start_s"].to_numpy(), g["end_s"].to_numpy()
        if len(starts) > 1 and (starts[1:] < ends[:-1] - 1e-7 * max(1.0, T)).any():
            i = int((starts[1:] < ends[:-1] - 1e-7 * max(1.0, T)).argmax())
            _fail(
                "no overlap per slot",
                f"lane {lane}: [{starts[i]}, {ends[i]}) overlaps the next from {starts[i + 1]}",
            )
        busy = float((ends - starts).sum())
        idle = T - busy
        if idle < -1e-6 * max(1.0, T):
            _fail("time conservation", f"lane {lane}: busy+paused {busy} exceeds simulated time {T}")
    lanes = gen["slot"].unique() if len(gen) else []
    if len(lanes) and (max(lanes) >= n_slots or min(lanes) < 0):
        _fail("slot indices", f"slots used {sorted(lanes)[:5]}... outside [0, {n_slots})")


def _check_pause_promise(result: RunResult) -> None:
    wu = result.scenario.weight_update
    if not isinstance(wu, PausePromise):
        return
    limit = _promised(wu, "max_pause_s", wu.max_pause_s(), "seconds >= 0 (inf: no bound)", _is_seconds)
    for u in result.updates:
        if u.kind == "sync" and u.paused and u.end_s - u.start_s > limit + 1e-9 * max(1.0, u.end_s):
            _fail("promised pause bound", f"sync paused [{u.start_s}, {u.end_s}) longer than {limit} s")


def _is_seconds(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and not math.isnan(x) and float(x) >= 0


def _check_single_version(result: RunResult) -> None:
    sc = result.scenario
    promised = [
        type(pol).__name__
        for pol in (sc.admission, sc.weight_update, sc.batching)
        if isinstance(pol, SingleVersionPromise) and _promised_bool(pol, sc)
    ]
    if not promised:
        return
    for ep in result.episodes:
        versions = {v for v, *_ in ep.segments(result.updates, until_s=result.sim_time_s)}
        if len(versions) > 1:
            _fail(
                "promised single version",
                f"{promised[0]} promises no episode spans two versions; episode {ep.id} ran under "
                f"{sorted(versions)}",
            )


def _promised_bool(policy: Any, scenario: Scenario) -> bool:
    yes = policy.single_version(scenario)
    return bool(_promised(policy, "single_version", yes, "a bool", lambda x: isinstance(x, bool | np.bool_)))


def _overlap(a0: float, a1: float, b0: float, b1: float) -> bool:
    return min(a1, b1) - max(a0, b0) > 1e-9 * max(1.0, abs(a1), abs(b1))


def _check_phases(result: RunResult) -> None:
    syncs = [(a, b) for a, b, _ in result.sync_log]
    trains = [(a, b) for _, a, b, _ in result.train_log]
    for s0, s1 in syncs:
        for t0, t1 in trains:
            if _overlap(s0, s1, t0, t1):
                _fail("syncs and training never overlap", f"sync [{s0}, {s1}) and train [{t0}, {t1})")
    gen = result.events[result.events["kind"] == "gen"]
    paused = [(u.start_s, u.end_s, u.replica) for u in result.updates if u.paused]
    if len(gen) and paused:
        a, b, rep = gen["start_s"].to_numpy(), gen["end_s"].to_numpy(), gen["replica"].to_numpy()
        for s0, s1, r in paused:
            if s1 <= s0:
                continue
            hit = np.minimum(b, s1) - np.maximum(a, s0) > 1e-9 * max(1.0, s1)
            if r >= 0:
                hit &= rep == r
            if hit.any():
                i = int(hit.argmax())
                _fail("no generation during a sync", f"gen [{a[i]}, {b[i]}) runs inside sync [{s0}, {s1})")


def _check_batches(result: RunResult, batch_size: int, steps: int) -> None:
    counts = Counter(e.trained_step for e in result.episodes if e.status == TRAINED)
    for step in range(len(result.train_log)):
        if counts.get(step, 0) != batch_size:
            _fail("batch size", f"step {step} trained {counts.get(step, 0)} episodes, expected {batch_size}")
    if len(result.train_log) != steps:
        _fail("steps completed", f"{len(result.train_log)} training steps, expected {steps}")


def _check_ledger(result: RunResult) -> None:
    """At every training step, from the engine's own books: launched = trained + running +
    buffered + dropped. A batch policy that loses an episode (removes it from the buffer without
    discarding it) breaks this at the step it does so, whatever the episodes' statuses say."""
    for step, started, trained, running, buffered, dropped in result.ledger_log:
        if started != trained + running + buffered + dropped:
            _fail(
                "episode conservation at each step",
                f"step {step}: {started} launched != {trained} trained + {running} running + "
                f"{buffered} buffered + {dropped} dropped",
            )
        if trained != (step + 1) * result.scenario.pipeline.batch_size:
            _fail("episode conservation at each step", f"step {step}: {trained} trained so far")


def _check_conservation(result: RunResult) -> None:
    c = Counter(e.status for e in result.episodes)
    known = c[TRAINED] + c[BUFFERED] + c[RUNNING] + c[DISCARDED] + c[ABORTED] + c[FAILED]
    if known != len(result.episodes):
        _fail("episode conservation", f"launched {len(result.episodes)} != accounted {known} ({dict(c)})")
    s = result.summary()
    total = s["episodes_trained"] + s["episodes_buffered"] + s["episodes_in_flight"]
    total += s["episodes_discarded"] + s["episodes_aborted"] + s["episodes_failed"]
    if total != s["episodes_launched"]:
        _fail("episode conservation (summary)", f"{total} != {s['episodes_launched']}")


def _check_versions(result: RunResult) -> None:
    versions = [v for *_, v in result.train_log]
    if any(b < a for a, b in zip(versions, versions[1:])):
        _fail("versions only increase", f"trainer versions {versions}")
    sync_versions = [v for *_, v in result.sync_log]
    if any(b <= a for a, b in zip(sync_versions, sync_versions[1:])):
        _fail("versions only increase", f"sync versions {sync_versions}")
    for ep in result.episodes:
        seg_versions = [v for v, *_ in ep.segments(result.updates, until_s=result.sim_time_s)]
        if any(b < a for a, b in zip(seg_versions, seg_versions[1:])):
            _fail("versions only increase", f"episode {ep.id} segments {seg_versions}")


# -- Hypothesis strategies ----------------------------------------------------------------------
def pipeline_configs(max_slots: int = 16, max_batch: int = 12, max_steps: int = 6) -> SearchStrategy[Any]:
    """Random valid :class:`~pipesim.config.PipelineConfig` values, small enough to run fast."""
    from hypothesis import strategies as st

    from pipesim.config import PipelineConfig

    times = st.one_of(st.integers(0, 50).map(float), st.floats(0, 50, allow_nan=False))
    return st.builds(
        PipelineConfig,
        n_slots=st.integers(1, max_slots),
        batch_size=st.integers(1, max_batch),
        train_time_s=times,
        sync_time_s=times,
        max_staleness=st.integers(0, 4),
        steps=st.integers(1, max_steps),
    )


def duration_lists(size: int, integer: bool | None = None) -> SearchStrategy[list[float]]:
    """Lists of ``size`` valid durations; integer-valued ones produce many exact ties."""
    from hypothesis import strategies as st

    ints = st.lists(st.integers(0, 200).map(float), min_size=size, max_size=size)
    floats = st.lists(st.floats(0, 500, allow_nan=False, allow_infinity=False), min_size=size, max_size=size)
    if integer is None:
        return st.one_of(ints, floats)
    return ints if integer else floats


def scenarios(
    weight_updates: Any = None, batchings: Any = None, admissions: Any = None
) -> SearchStrategy[Any]:
    """Random :class:`~pipesim.config.Scenario` values with trace durations of a sufficient pool.

    Pass strategies (or lists of policy objects) to vary the policies; defaults are the chapter's.
    """
    from hypothesis import strategies as st

    from pipesim.config import Scenario
    from pipesim.policies.base import CountThrottle, Drain, OldestFinishedFirst, PartialRollout
    from pipesim.testing.strategies import as_strategy
    from pipesim.workload.durations import TraceDurations

    wu = as_strategy(weight_updates, st.sampled_from([PartialRollout(), Drain()]), "weight_updates")
    ba = as_strategy(batchings, st.sampled_from([OldestFinishedFirst()]), "batchings")
    ad = as_strategy(admissions, st.sampled_from([CountThrottle()]), "admissions")

    @st.composite
    def build(draw: Any) -> Scenario:
        cfg = draw(pipeline_configs())
        pool = (cfg.steps + cfg.max_staleness + 1) * cfg.batch_size + cfg.n_slots
        values = draw(duration_lists(pool))
        return Scenario(
            pipeline=cfg,
            durations=TraceDurations.from_values(values),
            admission=draw(ad),
            weight_update=draw(wu),
            batching=draw(ba),
            pool_size=pool,
            seed=draw(st.integers(0, 2**16)),
        )

    return build()


from pipesim.testing.strategies import (  # noqa: E402  (re-exported: the policy families' strategies)
    admissions,
    batchings,
    duration_models,
    failure_policies,
    policy_scenarios,
    replica_configs,
    timeouts,
    weight_updates,
)

__all__ = [
    "InvariantError",
    "check_promises",
    "run_trace",
    "admissions",
    "batchings",
    "check_invariants",
    "duration_lists",
    "duration_models",
    "failure_policies",
    "pipeline_configs",
    "policy_scenarios",
    "promised_staleness_bound",
    "replica_configs",
    "scenarios",
    "timeouts",
    "weight_updates",
]
