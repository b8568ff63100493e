"""Quiet completions: which completions the slots process may sleep past.

A completion is *quiet* when it cannot change a decision. Finishing an episode changes the buffer
and frees a slot, nothing else; so it is quiet while the admission policy promises to stay closed
whatever finishes (``closed(p)``), and, if the trainer waits for a batch, while the buffer stays
short of the size the batch policy needs (``min_items(p)``). The last episode in flight is never
quiet: a drain, or the report of a stalled run, waits for it.

The slots process then sleeps until the first completion that matters and finishes the quiet
ones later, each with its own end time (``Slots.catch_up``). Nothing can observe the difference,
and a run with many completions per decision (eta = 0 above all) needs one wake-up per decision
instead of one per episode. A sync waiting for the buffer to hold ``n`` episodes
(``p.buffered_at_least``, :mod:`pipesim.core.waits`) makes the completion that reaches ``n``
matter, as a waiting trainer does the one that completes its batch. ``docs/policies.md``
("Hints") lists the promises a policy makes to allow it; ``tests/test_engine_paths.py`` checks
the traces against ``EngineOptions(hints=False)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pipesim.core import blame
from pipesim.core.port import ClosedHint, MinItemsHint, pauses_only

if TYPE_CHECKING:
    from pipesim.core.engine import Pipeline
    from pipesim.core.seams import EngineOptions


def make_quiet(p: Pipeline, options: EngineOptions) -> Callable[[int], int] | None:
    """The function that counts quiet completions for ``p``'s only replica, or None where the
    configuration does not allow them.

    They need the policies' promises (an admission policy that is a
    :class:`~pipesim.core.port.ClosedHint`, a weight update that :class:`~pipesim.core.port.PausesOnly`),
    one replica, no episode lifecycle (a timeout or a failure decides something at a completion)
    and no episode source; ``EngineOptions(hints=False)`` turns them off.
    """
    admission = p.admission
    if (
        not options.hints
        or p.lifecycle is not None
        or p.source is not None
        or len(p.engines) != 1
        or not isinstance(admission, ClosedHint)
        or not pauses_only(p.weight_update)
    ):
        return None
    closed = admission.closed
    min_items = p.batching.min_items if isinstance(p.batching, MinItemsHint) else None
    buffer = p.buffer

    def quiet(n_running: int) -> int:
        """How many of the next completions, with ``n_running`` episodes in flight, are quiet."""
        shut = closed(p)  # checked: a truthy non-bool would take the shortcut on a lie
        if shut is not True and (shut is False or not blame.bool_answer(admission, "closed", shut)):
            return 0
        k = n_running - 1
        if buffer.get_queue:
            if min_items is None:
                return 0
            n = min_items(p)
            if type(n) is not int or n < 0:  # checked as the pass checks it (a numpy integer converted)
                n = blame.count_answer(p.batching, "min_items", n)
            k = min(k, n - len(buffer.items) - 1)
        if p._buffer_waits is not None and (need := p.buffer_need) is not None:
            k = min(k, need - len(buffer.items) - 1)  # the completion that fires the wait
        return k if k > 0 else 0

    return quiet
