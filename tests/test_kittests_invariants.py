"""The kit's checks each catch what they name: a good run broken by hand one way per row, a
liar that overshoots its promised pause by 10%, and ``WholeGroups(drop_stale=True)``'s staleness
promise under the property strategies.

A mutation audit disabled each check of :func:`pipesim.testing.check_invariants` in turn and every
test still passed; each row here fails on such a mutant and passes on the real kit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.core.episode import EPISODE_FIELDS, TRAINED, Episode, UpdateRecord
from pipesim.policies.groups import WholeGroups
from pipesim.policies.updates import AbortReprefill, InFlightUpdate
from pipesim.testing import InvariantError, batchings, check_invariants, policy_scenarios


def _scenario(update: Any) -> pipesim.Scenario:
    cfg = pipesim.PipelineConfig(
        n_slots=8, batch_size=4, train_time_s=10, sync_time_s=1, steps=4, max_staleness=1
    )
    return pipesim.Scenario(
        pipeline=cfg,
        admission=pipesim.CountThrottle(),
        weight_update=update,
        durations=pipesim.ExponentialDurations(10.0),
        seed=2,
    )


@cache
def _good(kind: str) -> pipesim.RunResult:
    """A small good run: ``drain`` (no episode spans a sync), ``partial`` (episodes run through
    syncs, paused, some still running at the end), ``reprefill`` (AbortReprefill's charges)."""
    updates = {"drain": pipesim.Drain(), "partial": pipesim.PartialRollout(), "reprefill": AbortReprefill()}
    r = pipesim.run(_scenario(updates[kind]))
    check_invariants(r)
    return r


def _copy(r: pipesim.RunResult, **fields: Any) -> pipesim.RunResult:
    """A fresh result (no cached tables) with its lists and episodes copied, so a row edits its own."""
    out: dict[str, Any] = {
        "episodes": [_clone(e) for e in r.episodes],
        "updates": list(r.updates),
        "train_log": list(r.train_log),
        "sync_log": list(r.sync_log),
        "ledger_log": list(r.ledger_log),
        "extra": dict(r.extra),
    }
    out.update(fields)
    return dataclasses.replace(r, **out)


def _clone(ep: Episode) -> Episode:
    new = Episode.__new__(Episode)
    for name in EPISODE_FIELDS:
        setattr(new, name, getattr(ep, name))
    return new


def _with_events(r: pipesim.RunResult, edit: Callable[[Any], Any]) -> pipesim.RunResult:
    """``r`` whose events table (the one the kit reads) is ``edit`` of a copy of its own."""
    out = _copy(r)
    ev = r.events.copy()
    ev["kind"] = ev["kind"].astype(object)
    ev["lane"] = ev["lane"].astype(object)
    out.__dict__["events"] = edit(ev)
    return out


def _first_trained(r: pipesim.RunResult) -> Any:
    return next(e for e in r.episodes if e.status == TRAINED)


def _pause_as_gen(r: pipesim.RunResult) -> pipesim.RunResult:
    """The engine generated while a sync paused it: a pause row of the table becomes a gen row
    (the slot's busy + paused time is unchanged)."""

    def edit(ev: Any) -> Any:
        i = ev.index[ev["kind"] == "pause"][0]
        ev.loc[i, "kind"] = "gen"
        return ev

    return _with_events(r, edit)


def _overlap_on_a_slot(r: pipesim.RunResult) -> pipesim.RunResult:
    """Two intervals of one slot overlap: a gen row moved back by half of the previous one
    (its length, so the slot's total, unchanged)."""

    def edit(ev: Any) -> Any:
        gen = ev[ev["kind"] == "gen"].sort_values("start_s")
        lane = gen["lane"].value_counts().index[0]
        rows = gen[gen["lane"] == lane]
        prev, row = rows.index[0], rows.index[1]
        shift = ev.loc[row, "start_s"] - (ev.loc[prev, "start_s"] + ev.loc[prev, "end_s"]) / 2
        ev.loc[row, ["start_s", "end_s"]] -= shift
        return ev

    return _with_events(r, edit)


def _gen_cut_short(r: pipesim.RunResult) -> pipesim.RunResult:
    """The table lost half of a stretch of generation (each interval still inside the run, none
    overlapping): busy + paused + idle no longer adds up to the episodes' time on the slot."""

    def edit(ev: Any) -> Any:
        i = ev.index[ev["kind"] == "gen"][0]
        ev.loc[i, "end_s"] = (ev.loc[i, "start_s"] + ev.loc[i, "end_s"]) / 2
        return ev

    return _with_events(r, edit)


def _sync_during_training(r: pipesim.RunResult) -> pipesim.RunResult:
    (_, t0, t1, _), (_, _, v) = r.train_log[1], r.sync_log[1]
    out = _copy(r)
    out.sync_log[1] = (t0, t1, v)
    return out


def _trainer_version_back(r: pipesim.RunResult) -> pipesim.RunResult:
    out = _copy(r)
    step, a, b, _ = out.train_log[2]
    out.train_log[2] = (step, a, b, out.train_log[0][3])
    return out


def _sync_version_repeated(r: pipesim.RunResult) -> pipesim.RunResult:
    out = _copy(r)
    a, b, _ = out.sync_log[2]
    out.sync_log[2] = (a, b, out.sync_log[1][2])
    return out


def _episode_version_back(r: pipesim.RunResult) -> pipesim.RunResult:
    """An update at the run's end takes the weights back to version -1: the episodes still
    running generate under an older version than before (the fields' own checks still hold)."""
    assert any(e.status == "running" for e in r.episodes)
    T = r.sim_time_s
    return _copy(r, updates=[*r.updates, UpdateRecord(T, T, -1, False)])


def _a_step_lost(r: pipesim.RunResult) -> pipesim.RunResult:
    out = _copy(r)
    out.train_log.pop()
    return out


def _negative_staleness(r: pipesim.RunResult) -> pipesim.RunResult:
    out = _copy(r)
    ep = _first_trained(out)
    ep.trained_version = ep.version - 1
    return out


def _short_batch(r: pipesim.RunResult) -> pipesim.RunResult:
    """Step 0 trained one episode fewer than the batch (no step trained more)."""
    out = _copy(r)
    next(e for e in out.episodes if e.status == TRAINED and e.trained_step == 0).trained_step = 99
    return out


def _unaccounted_status(r: pipesim.RunResult) -> pipesim.RunResult:
    """A buffered episode in no status the books know: launched > accounted."""
    out = _copy(r)
    next(e for e in out.episodes if e.status == "buffered").status = "misplaced"
    return out


def _drain_spans_two(r: pipesim.RunResult) -> pipesim.RunResult:
    """A partial-rollout run labelled as Drain's, which promises one version per episode; no
    episode spans more than two (so the check, not a count above two, must catch it)."""
    assert r.trained["versions_spanned"].max() == 2
    return _copy(r, scenario=r.scenario.with_(weight_update=pipesim.Drain()))


def _reprefill_overcharged(r: pipesim.RunResult) -> pipesim.RunResult:
    out = _copy(r)
    next(e for e in out.episodes if e.reprefill_tokens > 0).reprefill_tokens += 100.0
    return out


def _idle_miscounted(r: pipesim.RunResult) -> pipesim.RunResult:
    """The summary reports idle slot time the events do not leave."""
    idle = r.summary()["rollouter/idle_ratio"]
    return _copy(r, extra={**r.extra, "rollouter/idle_ratio": idle + 0.1})


ROWS: list[tuple[str, Callable[[pipesim.RunResult], pipesim.RunResult], str, str]] = [
    ("partial", _pause_as_gen, "no generation during a sync", "runs inside sync"),
    ("drain", _sync_during_training, "syncs and training never overlap", "sync ["),
    ("drain", _overlap_on_a_slot, "no overlap per slot", "overlaps the next"),
    ("drain", _gen_cut_short, "time conservation", "its episodes ran"),
    ("partial", _idle_miscounted, "time conservation", "busy+paused"),
    ("drain", _trainer_version_back, "versions only increase", "trainer versions"),
    ("drain", _sync_version_repeated, "versions only increase", "sync versions"),
    ("partial", _episode_version_back, "versions only increase", "segments"),
    ("drain", _a_step_lost, "steps completed", "3 training steps, expected 4"),
    ("drain", _negative_staleness, "staleness >= 0", "min staleness -1"),
    ("drain", _short_batch, "batch size", "step 0 trained 3 episodes, expected 4"),
    ("partial", _unaccounted_status, "episode conservation", "accounted"),
    ("partial", _drain_spans_two, "promised single version", "Drain promises"),
    ("reprefill", _reprefill_overcharged, "re-prefill of what was generated", "tokens of re-prefill"),
]


@pytest.mark.parametrize(
    ("base", "breaks", "invariant", "evidence"), ROWS, ids=[r[1].__name__[1:] for r in ROWS]
)
def test_each_check_catches_a_run_broken_its_way(
    base: str, breaks: Callable[[pipesim.RunResult], pipesim.RunResult], invariant: str, evidence: str
) -> None:
    broken = breaks(_good(base))
    with pytest.raises(InvariantError) as info:
        check_invariants(broken)
    assert info.value.invariant == invariant, str(info.value)
    assert f"invariant '{invariant}' violated" in str(info.value) and evidence in str(info.value)


@dataclass(frozen=True)
class PausesPastItsPromise(InFlightUpdate):
    """PipelineRL's update, pausing ``load_time_s`` per sync while promising 10% less."""

    def max_pause_s(self) -> float:
        return float(self.load_time_s) / 1.1


def test_a_pause_a_tenth_past_its_promise_is_caught_and_one_at_it_is_not() -> None:
    honest = pipesim.run(_scenario(InFlightUpdate(load_time_s=2.0)))
    assert max(u.end_s - u.start_s for u in honest.updates if u.paused) == pytest.approx(2.0)
    check_invariants(honest)  # every pause exactly at the bound it promised
    with pytest.raises(InvariantError) as info:
        check_invariants(pipesim.run(_scenario(PausesPastItsPromise(load_time_s=2.0))))
    assert info.value.invariant == "promised pause bound"
    assert "PausesPastItsPromise promises max_pause_s 1.818" in str(info.value)


GROUPS_DROPPING_STALE = st.builds(
    WholeGroups, st.sampled_from([1, 2, 3, 4]), drop_stale=st.just(True), requeue=st.booleans()
)


def test_the_batch_strategies_draw_whole_groups_and_overlong_filtering() -> None:
    from hypothesis import Phase, find

    from pipesim.policies.batching import DropOverlong

    quick = settings(max_examples=300, phases=[Phase.generate], database=None)
    stale = find(batchings(), lambda b: isinstance(b, WholeGroups) and b.drop_stale, settings=quick)
    assert stale.samples_per_group == 1  # the default: groups of 1 fit every batch
    assert isinstance(find(batchings(), lambda b: isinstance(b, DropOverlong), settings=quick), DropOverlong)
    # policy_scenarios draws larger groups, the batch a whole number of them
    sc = find(policy_scenarios(), lambda s: getattr(s.batching, "samples_per_group", 1) > 2, settings=quick)
    assert sc.pipeline.batch_size % sc.batching.samples_per_group == 0


@settings(max_examples=40, deadline=None)
@given(
    policy_scenarios(
        batchings=GROUPS_DROPPING_STALE,
        weight_updates=[pipesim.PartialRollout()],
        failures=[None],
        with_timeouts=False,
    )
)
def test_whole_groups_dropping_stale_keeps_its_staleness_promise(sc: pipesim.Scenario) -> None:
    """``WholeGroups(drop_stale=True)`` promises eta: a group completed while fresh that goes
    stale before a batch takes it is dropped, not trained (pinned, so three draws in four are
    made able to break the bound)."""
    check_invariants(pipesim.run(sc))


@pytest.mark.parametrize(("seed", "n_slots", "group"), [(0, 16, 4), (1, 32, 2), (1, 64, 2)])
def test_a_complete_group_gone_stale_is_dropped_not_trained(seed: int, n_slots: int, group: int) -> None:
    """Hand-picked runs where a complete group waits in the buffer while the trainer moves past
    eta (without the recheck when the version moves, each trained staleness 2 under a promise of 1)."""
    cfg = pipesim.PipelineConfig(
        n_slots=n_slots, batch_size=16, steps=10, max_staleness=1, train_time_s=5, sync_time_s=1
    )
    sc = pipesim.Scenario(
        pipeline=cfg,
        durations=pipesim.LogNormalDurations(20.0, 1.2),
        batching=WholeGroups(samples_per_group=group, drop_stale=True),
        admission=pipesim.AReaLThrottle(),
        weight_update=pipesim.PartialRollout(),
        seed=seed,
        pool_size=4000,
    )
    r = pipesim.run(sc)
    check_invariants(r)
    s = r.summary()
    assert s["staleness_max"] == 1 and s["episodes_discarded"] > 0  # at the bound, and stale groups dropped
