"""One sequence on a compute replica: :class:`Seq`, the compiled leaf's own record of a sample.

The replica's batch (:class:`~pipesim.compute.batch.BatchState`), its driver and its port work on
these objects, never on the kernel's :class:`~pipesim.core.episode.Episode` per turn: a sequence
carries everything its turns need (the tokens generated, the turn index and its end, the context
and cached KV, its shared-prompt reference) and what it needs of its episode (its id, slot and
``origin``), so the episode is read and written only where it starts and where it finishes. This
module owns that record and nothing else: the scheduler that moves sequences on and off the GPU is
:mod:`pipesim.compute.batch`, which re-exports :class:`Seq` where it was first defined.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mypy_extensions import mypyc_attr

if TYPE_CHECKING:
    from pipesim.core.episode import Episode


@mypyc_attr(acyclic=True)
class Seq:
    """One sequence on a replica: everything its turns need, so that no turn reads its episode.

    The replica copies what it needs of the episode when the sequence starts (its ``id``, its
    ``slot``, and ``origin``: its start less the replica's paused seconds by then, the zero of the
    seconds it generates), and writes the episode once, when it finishes or leaves the replica
    (:meth:`pipesim.compute.driver.ReplicaDriver._finished`). A closed loop keeps no episode at
    all (``ep`` is None: :class:`pipesim.compute.refill.LoopReplica`). So the compiled leaf
    never reads or writes an :class:`~pipesim.core.episode.Episode`, a plain Python object, on
    a turn; only at an episode's start and end, and when the kernel pauses, aborts or
    re-prefills the replica.

    Compiled, it is invisible to the cyclic collector (``acyclic``: no GC header, faster to make
    and to free): nothing it refers to (its episode, the token counts of its turns) refers back
    to it, so it is never part of a reference cycle.
    """

    __slots__ = (
        "ep",
        "id",
        "slot",
        "origin",
        "prompt",
        "response",
        "max_tokens",
        "gen_before",
        "v_start",
        "kv_off",
        "stamp",
        "turns",
        "turn",
        "turn_end",
        "obs",
        "cached",
        "fresh",
        "group",
        "ref",
        "gen_at_update",
    )

    def __init__(
        self,
        ep: Episode | None,
        id: int,
        prompt: int,
        response: int,
        max_tokens: int,
        turns: list[tuple[int, float, int]] | None = None,
    ) -> None:
        self.ep = ep  # the kernel's episode, written when it finishes; None in a closed loop
        self.id = id  # the episode's id: the side table's row, the heap's tie-break
        self.slot = -1  # the replica's slot it holds
        self.origin = 0.0  # start_s - offset_start: generated seconds = (now - offset) - origin
        self.prompt, self.response = prompt, response
        # the most its context can grow past the prompt (what kv_policy="reserve" holds for it):
        # the responses' maximum, and the observations of an agent's turns
        self.max_tokens = max_tokens if turns is None else max_tokens + sum(t[2] for t in turns)
        self.gen_before = 0.0  # tokens generated before its current residency
        self.v_start = 0.0
        self.kv_off = 0.0  # its KV is kv_off + v
        self.stamp = -1  # > 0 while resident: matches its heap entry
        self.turns = turns  # (response tokens, tool seconds, observation tokens) per turn, or None
        self.turn = 0
        self.turn_end = response if turns is None else turns[0][0]  # generated tokens at the turn's end
        self.obs = 0  # observation tokens in its context
        self.cached = 0.0  # KV tokens kept for it while it is off the GPU (a tool call)
        self.fresh = prompt  # context tokens never prefilled yet (the rest of a prefill is recompute)
        self.group = -1  # its prompt group, where the replica shares prompts (share_group_prefix)
        self.ref = False  # it holds a reference on its group's shared prompt KV
        self.gen_at_update = 0.0  # tokens it had generated when its replica's weights last changed
