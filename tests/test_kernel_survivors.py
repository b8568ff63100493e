"""Kernel behaviours that earlier mutants changed while every other check passed (issue 39, item 1).

Exact relations, checked on tie-heavy and pause-heavy runs:

* **due time**: an episode that finished did so exactly when its work was done, counting only the
  pauses recorded on its own replica: ``end = start + work + (paused time inside [start, end])``.
  A stretch (re-prefill) that leaves the running heap out of order, or a colocated engine never
  resumed after training, makes episodes finish later than that.
  An episode due exactly when a pause begins finishes before it, as in the chapter.
* **a waiting trainer starts at once**: when the trainer waited for its batch, it starts the
  instant the batch's last episode ends (an out-of-order running heap delivers episodes late).
* **no start while paused**: no episode starts on a replica in one of that replica's pauses
  (from its first instant: the controller's pass comes after every event of the instant). A
  pause that leaves the replica accepting would let episodes start there, labelled with the old
  version though they generate under the new one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import pipesim
from pipesim import (
    AbortReprefill,
    Drain,
    InFlightUpdate,
    PartialRollout,
    PerReplicaSync,
    PipelineConfig,
    Replicas,
    Scenario,
)
from pipesim.core.engine import Pipeline
from pipesim.core.episode import ABORTED, FAILED
from pipesim.core.slots import Slots
from pipesim.io.api import draw_pool
from pipesim.testing import check_invariants


def _due_time_errors(r: Any) -> list[str]:
    bad = []
    scale = max(1.0, r.sim_time_s)
    for ep in r.episodes:
        if ep.status in (ABORTED, FAILED) or ep.end_s is None or math.isnan(ep.end_s):
            continue
        paused = 0.0
        for u in sorted(r.updates, key=lambda u: u.start_s):
            if u.paused and u.applies_to(ep.replica):
                overlap = max(0.0, min(u.end_s, ep.end_s) - max(u.start_s, ep.start_s))
                generated = u.start_s - ep.start_s - paused  # by the pause's start
                if overlap > 0 and u.start_s >= ep.start_s and generated >= ep.work_s:
                    bad.append(f"episode {ep.id}: due at a pause's start {u.start_s!r}, finished after it")
                paused += overlap
        expected = ep.start_s + ep.work_s + paused
        if abs(ep.end_s - expected) > 1e-9 * scale:
            bad.append(f"episode {ep.id}: ended {ep.end_s!r}, due {expected!r}")
    return bad


def _pauses(r: Any) -> list[tuple[float, float, int]]:
    """Every window in which a replica generates nothing: the recorded pauses, and the load at
    the end of each ``InFlightUpdate`` sync (its record says ``paused=False``: the transfer
    overlaps generation, then every replica pauses for ``load_time_s``)."""
    # a colocated engine's "train" pause begins after the pass that formed the batch, which may
    # start episodes at that very instant: only its interior counts
    out = [
        (u.start_s + (u.kind == "train") * 1e-12 * max(1.0, u.start_s), u.end_s, u.replica)
        for u in r.updates
        if u.paused
    ]
    wu = r.scenario.weight_update
    if isinstance(wu, InFlightUpdate):
        out += [(u.end_s - wu.load_time_s, u.end_s, u.replica) for u in r.updates if u.kind == "sync"]
    return out


def _batch_waits(r: Any) -> list[str]:
    """A trainer that waited for its batch starts the instant the batch's last episode ends."""
    bad = []
    by_step: dict[int, list[float]] = {}
    for ep in r.episodes:
        if ep.trained_step is not None and ep.trained_step >= 0:
            by_step.setdefault(ep.trained_step, []).append(ep.end_s)
    ready = 0.0  # when the trainer asks for the next batch: the end of the previous sync
    syncs = {step: end for step, (_s, end, *_rest) in enumerate(r.sync_log)}
    for step, start, _end, _v in r.train_log:
        last = max(by_step[step])
        if start > ready + 1e-9 and abs(start - last) > 1e-9 * max(1.0, start):
            bad.append(f"step {step}: trainer waited until {start!r}, its batch was complete at {last!r}")
        ready = syncs.get(step, start)
    return bad


def _starts_while_paused(r: Any) -> list[str]:
    bad = []
    pauses = _pauses(r)
    for ep in r.episodes:
        for start, end, replica in pauses:
            if replica in (-1, ep.replica) and start <= ep.start_s < end:
                bad.append(f"episode {ep.id} started at {ep.start_s} on replica {ep.replica}, paused then")
    return bad


def _config(**kw: Any) -> PipelineConfig:
    base: dict[str, Any] = dict(
        n_slots=8, batch_size=4, train_time_s=5, sync_time_s=3, max_staleness=2, steps=5
    )
    base.update(kw)
    return PipelineConfig(**base)


SCENARIOS = {
    "abort_reprefill_slow_prefill": Scenario(
        pipeline=_config(n_slots=16, batch_size=8, max_staleness=2, steps=5),
        weight_update=AbortReprefill(decode_rate_tok_s=100, prefill_rate_tok_s=10),
    ),
    "abort_reprefill_replicas": Scenario(
        pipeline=_config(n_slots=12, batch_size=6),
        weight_update=AbortReprefill(decode_rate_tok_s=50, prefill_rate_tok_s=25),
        replicas=Replicas(3),
    ),
    "per_replica_sync": Scenario(
        pipeline=_config(n_slots=12, batch_size=4, max_staleness=2),
        weight_update=PerReplicaSync(sync_times_s=(1.0, 2.0, 4.0)),
        replicas=Replicas(3),
    ),
    "in_flight_update_replicas": Scenario(
        pipeline=_config(n_slots=12, batch_size=4, max_staleness=3),
        weight_update=InFlightUpdate(load_time_s=2.0),
        replicas=Replicas(2),
    ),
    "colocated_drain": Scenario(pipeline=_config(colocated=True, max_staleness=1), weight_update=Drain()),
    "colocated_in_flight": Scenario(
        pipeline=_config(colocated=True), weight_update=InFlightUpdate(load_time_s=2.0)
    ),
    "colocated_partial": Scenario(pipeline=_config(colocated=True), weight_update=PartialRollout()),
    # more staleness budget than slots: slots free up when a pause begins (an episode due then
    # finishes first), and admission would fill them on a replica left accepting
    "per_replica_sync_slot_bound": Scenario(
        pipeline=_config(n_slots=6, batch_size=8, max_staleness=4, steps=6),
        weight_update=PerReplicaSync(sync_times_s=(1.0, 2.0, 4.0)),
        replicas=Replicas(3),
    ),
    "in_flight_update_slot_bound": Scenario(
        pipeline=_config(n_slots=6, batch_size=8, max_staleness=4, steps=6),
        weight_update=InFlightUpdate(load_time_s=2.0),
        replicas=Replicas(2),
    ),
}


def integer_pool(seed: int) -> pipesim.TraceDurations:
    """Whole seconds from 1 to 6: many completions, syncs and trainings share an instant."""
    values = np.random.default_rng(seed).integers(1, 7, size=97)
    return pipesim.TraceDurations.from_values(values, cycle=True)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("pool", ["agent", "integers"])
@pytest.mark.parametrize("seed", range(3))
def test_episodes_finish_exactly_when_due_and_never_start_while_paused(
    name: str, pool: str, seed: int
) -> None:
    sc = SCENARIOS[name].with_(seed=seed)
    if pool == "integers":
        sc = sc.with_(durations=integer_pool(seed))
    r = pipesim.run(sc)
    check_invariants(r)  # the kit's: re-prefill charged as generated, among others
    assert _due_time_errors(r) == []
    assert _starts_while_paused(r) == []
    assert _batch_waits(r) == []
    if sc.pipeline.colocated:  # the engine generates again after every training step
        trains = [u for u in r.updates if u.kind == "train"]
        assert len(trains) >= sc.pipeline.steps - 1
        for u in trains[:-1]:
            assert any(ep.start_s >= u.end_s or (ep.end_s or 0) > u.end_s for ep in r.episodes)


class HeapCheckedSlots(Slots):
    """Slots that check, after every stretch, that the heap's top is the earliest due episode."""

    stretches = 0

    def stretch_all(self, extra_s: Any) -> None:
        super().stretch_all(extra_s)
        if self.running:
            HeapCheckedSlots.stretches += 1
            earliest = min(self.due(ep) for _, _, ep in self.running)
            assert self.due(self.running[0][2]) == earliest
            assert all(self.due(ep) == vend + self.offset for vend, _, ep in self.running)


@pytest.mark.parametrize("name", ["abort_reprefill_slow_prefill", "abort_reprefill_replicas"])
@pytest.mark.parametrize("seed", range(3))
def test_after_a_stretch_the_heap_top_is_the_earliest_due_episode(name: str, seed: int) -> None:
    sc = SCENARIOS[name].with_(seed=seed)
    HeapCheckedSlots.stretches = 0
    Pipeline(sc, draw_pool(sc).tolist(), engine_factory=HeapCheckedSlots).run()
    assert HeapCheckedSlots.stretches >= sc.pipeline.steps - 1  # every sync stretched something
