"""Hypothesis strategies for every policy family, re-exported by :mod:`pipesim.testing`.

``admissions()``, ``weight_updates()``, ``batchings()``, ``failure_policies()``, ``timeouts()``,
``replica_configs()`` and ``duration_models()`` draw valid policy objects with small parameters
(all but ``replica_configs`` live in :mod:`pipesim.testing.families`, the plain list of what each
family draws, and are importable from here); ``policy_scenarios(...)`` composes them into runnable
scenarios. Pass a list of objects or a strategy for any family to pin it, e.g.
``policy_scenarios(admissions=[MyRule()])`` to test a rule of your own against every other policy.
(The names ``admissions_``, ``weight_updates_``, ``batchings_`` and ``routings_`` of earlier
releases still work, with a ``DeprecationWarning``.)

**Sizes, and promises the draws can break.** Scenarios have 1-``max_slots`` slots (12), batches
of 1-``max_batch`` (10) and 1-``max_steps`` steps (5), and run in milliseconds. A run of ``s``
steps trains nothing more than ``s - 1`` versions stale, so 5 steps never broke a promised bound
of 4 (a rule promising 4 that delivered 7 passed 300 draws). Where ``max_steps`` is left out and
a policy you pinned promises a bound ``b``, three draws in four are made to break it
(:func:`~pipesim.testing.adjustments.to_break`: ``b + 2`` steps or more, a fast trainer, two slots
per episode of the batch); draws without such a promise are unchanged. ``max_steps`` given fixes
the range. These changes to a drawn scenario live in :mod:`pipesim.testing.adjustments`. A batch
policy that takes whole groups (``check_batch_size``: ``WholeGroups``, ROLL's rules) gets a batch
of whole groups, the nearest size at or below the one drawn (above it only where its groups are
larger than ``max_batch``: a policy you pinned with groups of 8 gets batches of 8).

Combinations that cannot make progress are not drawn: the chapter's ``CountThrottle`` and
verl's ``StaleFraction`` count dropped episodes against their cap and can stall, so they are only
combined with policies that never drop work. Drawn (admissions not pinned), such a rule beside a
dropping policy becomes ``AReaLThrottle``, which counts drops out; pinned (``admissions=
[CountThrottle()]``), it stays, and the roles left unpinned are drawn from what drops nothing:
the ``keep_work`` draws of :mod:`pipesim.testing.families` (no ``DropStale``, ``EvictStalest``,
``DropOverlong``, filtering or stale-dropping ``WholeGroups``, ``AbortRestart``) and no failure
policy. (They drew ``WholeGroups(1, filter_rate=0.5)`` beside a pinned ``CountThrottle``, which
stalled a one-slot run.) A dropping policy pinned beside it is drawn as pinned. (Such a
combination, built by hand, ends with a :class:`~pipesim.PipelineError`, never a hang.) pipesim
knows its own policies that drop; a
batch policy or weight update of yours that drops episodes says so with a class attribute
``drops_work = True``; such a batch policy is then not drawn under ``SyncEveryK`` either (the
trainer runs ``k - 1`` versions ahead of the weights there, so a policy dropping what is older
than its own bound may drop everything), unless the weight updates are pinned. Hypothesis is
imported lazily.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pipesim.testing.adjustments import MAX_PROMISE_STEPS as MAX_PROMISE_STEPS  # re-exported
from pipesim.testing.adjustments import (
    ROLES,
    _at_staleness,
    break_whole,
    cap_for,
    drops_work,
    hazard_for,
    pinned_bound,
)
from pipesim.testing.adjustments import STEPS_PAST_BOUND as STEPS_PAST_BOUND  # re-exported
from pipesim.testing.adjustments import fit_batch as fit_batch  # re-exported
from pipesim.testing.families import admissions as admissions  # re-exported, and called as kit.admissions
from pipesim.testing.families import batchings as batchings
from pipesim.testing.families import duration_models as duration_models
from pipesim.testing.families import failure_policies as failure_policies
from pipesim.testing.families import timeouts as timeouts
from pipesim.testing.families import weight_updates as weight_updates

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


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
    weight_updates: Any = None,
    batchings: Any = None,
    admissions: Any = None,
    *,
    max_slots: int = 16,
    max_batch: int = 12,
    max_steps: int | None = None,
) -> SearchStrategy[Any]:
    """Random :class:`~pipesim.config.Scenario` values with trace durations of a sufficient pool.

    Pass strategies (or lists of policy objects) to vary the policies; defaults are the chapter's.
    ``max_slots``, ``max_batch``, ``max_steps``: the largest pipeline drawn; ``max_steps`` left out
    is 6, or more where a policy given here promises a staleness bound (as in
    :func:`policy_scenarios`).
    """
    from hypothesis import strategies as st

    from pipesim.config import Scenario
    from pipesim.policies.base import CountThrottle, Drain, OldestFinishedFirst, PartialRollout
    from pipesim.workload.durations import TraceDurations

    check_sizes(max_slots, max_batch, max_steps)
    wu = as_strategy(weight_updates, st.sampled_from([PartialRollout(), Drain()]), "weight_updates")
    ba = as_strategy(batchings, st.sampled_from([OldestFinishedFirst()]), "batchings")
    ad = as_strategy(admissions, st.sampled_from([CountThrottle()]), "admissions")
    pinned = tuple(role for role, x in zip(ROLES, (admissions, weight_updates, batchings)) if x is not None)

    def pool_of(cfg: Any, ahead: int = 0) -> int:
        """Tasks enough for a rule that starts at most ``max(eta, ahead)`` versions ahead."""
        return int((cfg.steps + max(cfg.max_staleness, ahead) + 1) * cfg.batch_size + cfg.n_slots)

    @st.composite
    def build(draw: Any) -> Scenario:
        cfg = draw(pipeline_configs(max_slots, max_batch, max_steps or 6))
        pool = pool_of(cfg)
        values = draw(duration_lists(pool))
        admission, weight_update, batching = draw(ad), draw(wu), draw(ba)
        cfg = dataclasses.replace(cfg, batch_size=fit_batch(cfg.batch_size, batching, max_batch))
        sc = Scenario(
            pipeline=cfg,
            durations=TraceDurations.from_values(values),
            admission=admission,
            weight_update=weight_update,
            batching=batching,
            pool_size=pool,
            seed=draw(st.integers(0, 2**16)),
        )
        if (b := pinned_bound(sc, pinned)) is not None:
            # a rule promising b may start b versions ahead (LyingCap-like), more than eta
            sc = break_whole(draw, sc, b, max_slots) if max_steps is None else sc
            if (more := pool_of(sc.pipeline, b) - pool) > 0:  # the trace replays in order
                values = values + draw(duration_lists(more))
            sc = sc.with_(durations=TraceDurations.from_values(values), pool_size=len(values))
        return sc

    return build()


def check_sizes(max_slots: object, max_batch: object, max_steps: object) -> None:
    """A FieldError naming the size argument of a strategy that is no whole number >= 1."""
    from pipesim.core.validate import check_int

    for name, value in (("max_slots", max_slots), ("max_batch", max_batch), ("max_steps", max_steps)):
        if value is not None or name != "max_steps":
            check_int(name, value, 1)


def as_strategy(x: Any, default: Any, name: str = "policies") -> Any:
    """``x`` as a strategy: None -> ``default``, a non-empty list or tuple -> one of its items, a
    strategy as it is; anything else is a FieldError naming the argument ``name`` (one policy
    instead of a list reached Hypothesis as "object has no attribute 'validate'")."""
    from hypothesis import strategies as st
    from hypothesis.strategies import SearchStrategy

    from pipesim.core.errors import shown
    from pipesim.core.validate import FieldError

    if x is None:
        return default
    if isinstance(x, list | tuple):
        if not x:
            raise FieldError(f"{name}: an empty list draws nothing; give at least one, or None", name)
        return st.sampled_from(list(x))
    if isinstance(x, SearchStrategy):
        return x
    raise FieldError(
        f"{name}: must be a list of objects or a Hypothesis strategy, got {shown(x)}; "
        f"one object: {name}=[{type(x).__name__}(...)]",
        name,
    )


def replica_configs(routings: Any = None, **deprecated: Any) -> SearchStrategy[Any]:
    """``Replicas`` of 1-3 engines routed by one of ``routings`` (a list or a strategy; default:
    the built-in rules)."""
    from hypothesis import strategies as st

    from pipesim.policies.replicas import GroupAffinity, LeastLoaded, Replicas, RoundRobin

    ((routings, name),) = _renamed("replica_configs", {"routings": routings}, deprecated).values()
    builtin = [RoundRobin(), LeastLoaded(), GroupAffinity(2), GroupAffinity(4, RoundRobin())]
    return st.builds(Replicas, st.integers(1, 3), as_strategy(routings, st.sampled_from(builtin), name))


def policy_scenarios(
    admissions: Any = None,
    weight_updates: Any = None,
    batchings: Any = None,
    failures: Any = None,
    durations: Any = None,
    with_timeouts: bool = True,
    with_replicas: bool = True,
    routings: Any = None,
    *,
    max_slots: int = 12,
    max_batch: int = 10,
    max_steps: int | None = None,
    **deprecated: Any,
) -> SearchStrategy[Any]:
    """Small runnable scenarios drawing every policy family (pin one with a list or a strategy).

    ``admissions``, ``weight_updates``, ``batchings``: the policies of each role to draw from
    (default: the built-in ones); ``failures`` and ``durations``: strategies of failure policies
    and duration models (a failure policy the kit draws has its hazard capped at one over the
    top of the drawn durations, :func:`~pipesim.testing.adjustments.hazard_for`, so the longest
    task can finish; yours is kept as given); ``with_timeouts`` / ``with_replicas``: whether a
    timeout / several replicas may be drawn; ``routings``: the routing rules the replicas draw
    from (default: the built-in ones; giving it makes every scenario have replicas, 1-3 of them).

    ``max_slots``, ``max_batch``, ``max_steps``: the largest pipeline drawn. ``max_steps`` left out
    is 5, or more where a policy pinned here promises a staleness bound, enough steps to break it
    (see the module). The names ending in ``_`` of earlier releases still work, deprecated.

    An admission rule that counts dropped episodes against its cap (``CountThrottle``,
    ``StaleFraction``) is never drawn beside a policy that drops work: drawn, it becomes
    ``AReaLThrottle`` there; pinned, the weight updates, batch policies and failures you left
    unpinned are drawn from those that drop nothing (see the module)."""
    from hypothesis import strategies as st

    from pipesim.config import Scenario
    from pipesim.policies.admission import AReaLThrottle, StaleFraction
    from pipesim.policies.base import CountThrottle
    from pipesim.policies.batching import DropStale, EvictStalest

    counts_drops = CountThrottle | StaleFraction  # a dropped episode still counts: none replaces it
    from pipesim.policies.updates import SyncEveryK
    from pipesim.testing import strategies as kit

    given = {"admissions": admissions, "weight_updates": weight_updates, "batchings": batchings}
    pins = _renamed("policy_scenarios", {**given, "routings": routings}, deprecated)
    (admissions, ad_name), (weight_updates, wu_name) = pins["admissions"], pins["weight_updates"]
    (batchings, ba_name), (routings, ro_name) = pins["batchings"], pins["routings"]
    check_sizes(max_slots, max_batch, max_steps)
    ad = as_strategy(admissions, kit.admissions(max_batch), ad_name)  # runnable at every batch drawn
    wu = as_strategy(weight_updates, kit.weight_updates(), wu_name)
    groups = range(1, 1 + min(4, max_batch, max(1, max_slots // 2)))  # a batch of whole groups fits
    ba = as_strategy(batchings, kit.batchings(max(12, max_batch), group_sizes=groups), ba_name)
    fa = as_strategy(failures, st.none() | failure_policies(), "failures")
    # beside a pinned admission that counts drops: the roles not pinned drop nothing
    wu_kept = as_strategy(weight_updates, kit.weight_updates(keep_work=True), wu_name)
    ba_kept = as_strategy(batchings, kit.batchings(max(12, max_batch), groups, keep_work=True), ba_name)
    fa_kept = as_strategy(failures, st.none(), "failures")
    du = as_strategy(durations, duration_models(), "durations")
    routes = None if routings is None else replica_configs(as_strategy(routings, None, ro_name))
    pinned = tuple(role for role, x in zip(ROLES, (admissions, weight_updates, batchings)) if x is not None)

    @st.composite
    def build(draw: Any) -> Scenario:
        cfg = draw(pipeline_configs(max_slots=max_slots, max_batch=max_batch, max_steps=max_steps or 5))
        if routes is not None:
            replicas = draw(routes)
        else:
            replicas = draw(st.none() | replica_configs()) if with_replicas else None
        if replicas is not None and replicas.n_replicas > cfg.n_slots:
            # more replicas than slots: as many as there are slots where the routing is pinned
            pinned_routing = routes is not None
            replicas = dataclasses.replace(replicas, n_replicas=cfg.n_slots) if pinned_routing else None
        durations, admission = draw(du), draw(ad)
        # an admission you pinned that counts drops stays: what would drop beside it is not drawn
        kept = admissions is not None and isinstance(admission, counts_drops)
        weight_update, batching = draw(wu_kept if kept else wu), draw(ba_kept if kept else ba)
        failure = draw(fa_kept if kept else fa)
        batch = fit_batch(cfg.batch_size, batching, max_batch)  # whole groups
        sc = Scenario(
            pipeline=dataclasses.replace(cfg, max_staleness=0, batch_size=batch),
            durations=durations,
            admission=admission,
            weight_update=weight_update,
            batching=batching,
            failures=failure if failures is not None else hazard_for(failure, durations),  # yours kept
            timeout=cap_for(batching, draw(st.none() | timeouts()) if with_timeouts else None, durations),
            replicas=replicas,
            seed=draw(st.integers(0, 2**16)),
        )
        sc = _at_staleness(sc, cfg.max_staleness)
        if admissions is None and isinstance(sc.admission, counts_drops) and drops_work(sc):
            sc = sc.with_(admission=AReaLThrottle())
        k = getattr(sc.weight_update, "k", 1) if isinstance(sc.weight_update, SyncEveryK) else 1
        if k > 1 and weight_updates is None and getattr(sc.batching, "drops_work", False) is True:
            # a user's dropping batch policy keeps a bound of its own, which no max_staleness
            # moves: under SyncEveryK it may drop every episode, so it gets the inner update
            sc, k = sc.with_(weight_update=sc.weight_update.inner), 1
        stale_out = getattr(sc.batching, "drop_stale", False) is True  # WholeGroups(drop_stale=True)
        if (
            stale_out or isinstance(sc.batching, DropStale | EvictStalest)
        ) and k - 1 > sc.pipeline.max_staleness:
            # the trainer's version runs k - 1 ahead of the weights between real syncs, so every
            # episode is staler than eta and dropped: a dead end by construction, not a finding
            sc = _at_staleness(sc, k - 1)
        if max_steps is None and (b := pinned_bound(sc, pinned)) is not None:
            sc = break_whole(draw, sc, b, max_slots)
        return sc.with_(pool_size=20 * sc.default_pool_size)

    return build()


def _renamed(func: str, given: dict[str, Any], deprecated: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """Each argument of ``given`` as ``(value, name)``, taking a value given under the old name
    (``admissions_``) with a DeprecationWarning; ``name`` is the keyword the caller wrote, which
    a refusal names. Any other keyword is a TypeError, as Python's own."""
    import warnings

    out = {name: (value, name) for name, value in given.items()}
    for old, value in deprecated.items():
        new = old.removesuffix("_")
        if not old.endswith("_") or new not in given:
            raise TypeError(f"{func}() got an unexpected keyword argument {old!r}")
        if given[new] is not None:
            raise TypeError(f"{func}() got {new}= and {old}=, the old name of the same argument; give {new}=")
        warnings.warn(f"{func}({old}=...) is deprecated: write {new}=...", DeprecationWarning, stacklevel=3)
        out[new] = (value, old)
    return out
