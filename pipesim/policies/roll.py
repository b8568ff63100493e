"""ROLL's RLVR replay buffer: batches taken oldest start step first, waiting on each step's prompts.

alibaba/ROLL ``roll/distributed/scheduler/generate_scheduler.py`` (``ReplayBuffer``, ``ItemsGroup``),
the scheduler of ROLL's RLVR pipeline (the agentic pipeline's ``GroupQueue`` is
:class:`~pipesim.policies.systems.RollGroupQueue`). With ``async_generation_ratio`` r (an integer
here) and B prompts a step:

* **Supply.** A prompt is sent while ``running_prompts + completed_prompts < batch_size``, where
  ``batch_size`` is ``ceil(B r) + B`` at the first ``advance_step`` and grows by B at each one. An
  aborted prompt leaves ``running_prompts`` without entering ``completed_prompts`` (``abort``), so
  its place is sent again: ``started - dropped < (v + 1 + r) B``, which is
  :class:`~pipesim.policies.admission.AReaLThrottle` at eta = r.
* **Batch.** A prompt is bound at ``begin`` to the step current then: its *window*, the trainer
  version under which its first sample started (``PipelineView.started_at_version``). ``get_batch``
  at version v walks the windows ``v - r`` .. v in order and, in each, takes the prompts finished so
  far (all of them if they are no more than wanted, else the first to finish up to the count), but
  first *waits* while the window holds fewer finished than wanted and still has prompts running
  (``ItemsGroup.get_batch``): the trainer waits for the oldest window's stragglers.
* **Expiry.** After the batch, ``gc`` aborts every prompt still running from a window ``<= v - r``.
  Here such a group is marked and its samples are discarded as they finish (``drop``): the engine's
  port has no selective abort, so an expired sample keeps its slot until it finishes and its place
  in the supply comes back then, not at once. That is the one departure from ROLL's code.

One pipesim episode is one sample; a prompt is ``samples_per_group`` consecutive tasks (group
``task_id // n``), taken whole. Task ids are taken to be start order (no relaunches: ROLL's RLVR
preset pauses and continues in-flight samples at a sync). No trained sample is more than r
versions stale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from pipesim.policies.bookkeeping import RatioGroups, group_book

if TYPE_CHECKING:
    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView

__all__ = ["RollReplayBuffer"]


@dataclass
class _State:
    consumed: set[int] = field(default_factory=set)
    """Groups taken into a batch."""
    expired: set[int] = field(default_factory=set)
    """Groups aborted by ``gc``: their samples are discarded as they finish."""
    gc_window: int = 0
    """Windows below this one have been collected."""


_STATES: WeakKeyDictionary[PipelineView, _State] = WeakKeyDictionary()


def _window_groups(p: PipelineView, w: int, n: int) -> range:
    """The groups whose first sample started in window ``w`` (under trainer version ``w``)."""
    marks = p.started_at_version
    lo = marks[w] if w < len(marks) else p.started
    hi = marks[w + 1] if w + 1 < len(marks) else p.started
    return range(math.ceil(lo / n), math.ceil(hi / n))


@dataclass(frozen=True)
class RollReplayBuffer(RatioGroups):
    """ROLL RLVR's batch rule (see the module docstring): ``ratio`` is ``async_generation_ratio``
    (at least 1: a window of 0 would expire the batch it waits on)."""

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        if len(buffer) < p.batch_size:  # no batch can form: nothing is dropped (min_items' promise)
            return None, []
        n, r = self.samples_per_group, self.ratio
        book = group_book(p, n, p.batch_size, "RollReplayBuffer")
        state = _STATES.setdefault(p, _State())
        book.absorb(buffer)
        dropped = book.remove(buffer, [g for g in book.members if g in state.expired])
        v, wanted = p.version, p.batch_size // n
        taken: list[int] = []
        for w in range(max(0, v - r), v + 1):
            live = [g for g in _window_groups(p, w, n) if g not in state.consumed and g not in state.expired]
            finished = [g for g in book.complete if g in set(live)]  # in completion order
            need = wanted - len(taken)
            if len(finished) < need and len(finished) < len(live):
                return None, dropped  # ItemsGroup.get_batch waits on this window's running prompts
            taken.extend(finished[:need])
            if len(taken) == wanted:
                break
        if len(taken) < wanted:
            return None, dropped
        batch = book.remove(buffer, taken)
        state.consumed.update(taken)
        for w in range(state.gc_window, max(0, v - r + 1)):  # gc: windows <= v - r
            for g in _window_groups(p, w, n):
                if g not in state.consumed:
                    state.expired.add(g)
                    dropped.extend(book.remove(buffer, [g]))
        state.gc_window = max(state.gc_window, v - r + 1)
        return batch, dropped
