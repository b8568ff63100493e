"""A property-testing kit for pipelines and for the policies users write.

``check_invariants(result)`` asserts what every run must keep, whatever its policies:

* time conservation per slot: its intervals (generating, paused) lie inside the run and never
  overlap, so busy + paused + idle = simulated time with idle >= 0; busy + paused on each slot is the
  slot time of the episodes it ran (start to end, or to the run's end for one still running), read
  from the episodes' records; and across the slots, busy + paused + the idle share the summary
  reports (``rollouter/idle_ratio`` x ``n_slots`` x simulated time) = ``n_slots`` x simulated time;
* no generation while a sync pauses the engine, and syncs never overlap training steps;
* every trained batch has exactly ``batch_size`` episodes;
* episode conservation: launched = trained + buffered + in flight + discarded + aborted +
  failed, from the statuses at the end; and launched = trained + running + buffered + dropped
  (discarded, aborted or failed) from the engine's books at every training step;
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
(``closed``, ``min_items``, ``pauses_only``; :mod:`pipesim.core.port`; the per-start hints of
pipesim 0.1, ``ready`` among them, are no longer read): it runs the scenario on the slots engine
(``pipesim.run``'s) with the shortcuts and without, and compares the event traces
(:mod:`pipesim.testing.promises`). A ``pauses_only`` whose sync aborts or stretches episodes in
flight changes no trace; the port refuses that action in every run instead.

A compute run (:func:`pipesim.compute.run_compute`) is checked too: ``check_invariants(run)``
takes its ``run.result``. ``run_compute`` rewrites the scenario it is given from the cluster
(``n_slots``, ``sync_time_s``, ``colocated``, ``replicas``; the batch policy with ``groups``), so
the scenario to pass beside it is ``run.result.scenario``, or none.

Strategies for every policy family (``admissions``, ``weight_updates``, ``batchings``,
``failure_policies``, ``duration_models``) let a user property-test a policy of their own
against all the others.

The Hypothesis strategies (``pipeline_configs``, ``duration_lists``, ``scenarios``,
``policy_scenarios``; :mod:`pipesim.testing.strategies`) are public so users can property-test
their own policies the same way the project's tests do. Hypothesis is imported lazily:
``import pipesim.testing`` works without it.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from pipesim.config import Scenario
from pipesim.core.episode import ABORTED, BUFFERED, DISCARDED, FAILED, RUNNING, TRAINED
from pipesim.core.errors import shown
from pipesim.core.port import PausePromise, SingleVersionPromise, StalenessPromise
from pipesim.core.runbooks import asked
from pipesim.core.validate import FieldTypeError, refuse
from pipesim.results.run import RunResult
from pipesim.testing.failure import InvariantError as InvariantError  # re-exported
from pipesim.testing.failure import _fail
from pipesim.testing.fields import episode_field_errors, first
from pipesim.testing.promises import check_promises, policy_names, run_trace
from pipesim.testing.reprefill import reprefill_errors
from pipesim.testing.slot_time import _check_slots, _check_time

if TYPE_CHECKING:
    from pipesim.compute.cluster import ComputeRun


def _need(what: str, value: object, kind: type, hint: str) -> None:
    """A TypeError (a :class:`FieldTypeError`, its field the argument) when the kit is handed the
    wrong kind of object."""
    if not isinstance(value, kind):
        raise refuse(what, f"must be a {hint}, got {type(value).__name__}: {shown(value)}", FieldTypeError)


def _need_scenario(scenario: object) -> None:
    _need("scenario", scenario, Scenario, "pipesim.Scenario")


def _need_result(result: object, scenario: object) -> RunResult:
    """``result`` as a :class:`RunResult`: a compute run's ``.result``, where it is one."""
    if not isinstance(result, RunResult) and isinstance(getattr(result, "result", None), RunResult):
        from pipesim.compute.cluster import ComputeRun  # only here: the kit runs without it

        if isinstance(result, ComputeRun):
            result = result.result
    _need(
        "result",
        result,
        RunResult,
        "pipesim.RunResult (what pipesim.run returns; run.result of a run_compute)",
    )
    if scenario is not None:
        _need_scenario(scenario)
    assert isinstance(result, RunResult)  # checked by _need
    return result


def promised_staleness_bound(result: RunResult | ComputeRun, scenario: Scenario | None = None) -> int | None:
    """The tightest staleness bound any of the scenario's policies promises, or None."""
    result = _need_result(result, scenario)
    bounds = [b for _, b in _declared_bounds(scenario if scenario is not None else result.scenario)]
    return min(bounds) if bounds else None


def _declared_bounds(sc: Scenario) -> list[tuple[object, int]]:
    """Each policy of ``sc`` that promises a staleness bound, with its bound (checked well-formed)."""
    out: list[tuple[object, int]] = []
    for policy in (sc.admission, sc.weight_update, sc.batching):
        if isinstance(policy, StalenessPromise):
            b = asked(sc, policy, "staleness_bound", sc)
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


def check_invariants(result: RunResult | ComputeRun, scenario: Scenario | None = None) -> None:
    """Assert every pipeline invariant on ``result``; raise :class:`InvariantError` naming the first broken.

    ``result`` is what ``pipesim.run`` returns, or a compute run (``run_compute``'s), whose
    ``.result`` is checked. ``scenario`` defaults to ``result.scenario``;
    ``check_invariants(result, scenario)`` passes it explicitly, and it must be the scenario the
    result ran: for a compute run that is ``run.result.scenario``, not the one given to
    ``run_compute``, which rewrites it from the cluster.
    """
    result = _need_result(result, scenario)
    if scenario is not None and scenario is not result.scenario and scenario != result.scenario:
        _fail("scenario matches", _mismatch(scenario, result))
    if bad := episode_field_errors(result):  # first: the other checks read these fields
        names = policy_names(result.scenario)
        _fail("episodes keep the fields the kernel gave them", f"{first(bad)}; the run's policies: {names}")
    cfg = result.scenario.pipeline
    T = result.sim_time_s
    ev = result.events
    _check_slots(ev, T, cfg.n_slots)
    _check_time(result, ev, T, cfg.n_slots)
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
        over = tr[tr["staleness"] > bound]
        row = over.iloc[0]  # the first trained past the bound: the one to trace
        _fail(
            "promised staleness bound",
            f"max staleness {tr['staleness'].max()} > {bound}, the bound {' and '.join(who)} promised; "
            f"first past it: episode {int(row['episode_id'])}, started under version "
            f"{int(row['version'])} and trained at step {int(row['step'])} under version "
            f"{int(row['trained_version'])} ({int(row['staleness'])} stale; {len(over):,} of "
            f"{len(tr):,} trained episodes past the bound)",
        )


def _mismatch(given: Scenario, result: RunResult) -> str:
    """Why ``given`` is not ``result.scenario``: the fields that differ, and for a compute run the
    fix (``run_compute`` rewrites the scenario from the cluster, so the user's own never matches)."""
    ran = result.scenario
    pairs: list[tuple[str, str, object, object]] = [
        ("pipeline.", f.name, given.pipeline, ran.pipeline) for f in dataclasses.fields(ran.pipeline)
    ]
    pairs += [("", f.name, given, ran) for f in dataclasses.fields(ran) if f.name != "pipeline"]
    diffs = [
        f"{prefix}{name} {shown(getattr(a, name))} given, {shown(getattr(b, name))} run"
        for prefix, name, a, b in pairs
        if getattr(a, name) != getattr(b, name)
    ]
    where = f" ({'; '.join(diffs[:4])}{' ...' if len(diffs) > 4 else ''})" if diffs else ""
    text = f"the scenario passed is not the one the result was run with{where}"
    if result.engine == "compute":
        text += (
            "; run_compute rewrites the scenario it is given from the cluster (n_slots, sync_time_s, "
            "colocated, replicas; the batch policy with groups): pass run.result.scenario, or leave "
            "the scenario out"
        )
    return text


def _check_pause_promise(result: RunResult) -> None:
    wu = result.scenario.weight_update
    if not isinstance(wu, PausePromise):
        return
    pause = asked(result.scenario, wu, "max_pause_s")
    limit = _promised(wu, "max_pause_s", pause, "seconds >= 0 (inf: no bound)", _is_seconds)
    for u in result.updates:
        if u.kind == "sync" and u.paused and u.end_s - u.start_s > limit + 1e-9 * max(1.0, u.end_s):
            _fail(
                "promised pause bound",
                f"{type(wu).__name__} promises max_pause_s {limit} s; its sync paused "
                f"[{u.start_s}, {u.end_s}), {u.end_s - u.start_s} s",
            )


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
    yes = asked(scenario, policy, "single_version", scenario)
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


from pipesim.testing.strategies import (  # noqa: E402  (re-exported: the kit's strategies)
    admissions,
    batchings,
    duration_lists,
    duration_models,
    failure_policies,
    pipeline_configs,
    policy_scenarios,
    replica_configs,
    scenarios,
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
