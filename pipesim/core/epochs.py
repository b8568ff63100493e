"""Epochs of running episodes: exact due times for episodes that lived through pauses.

The chapter's loop moves the end of every running episode by the sync time at each sync
(``end += sync_time``), so an episode paused twice ends at ``((start + d) + s) + s``: a float sum
taken one pause at a time. On decimal durations that sum and ``start + d + (total paused)`` can
differ in the last bit, and a last bit decides whether two episodes end together (hence the
buffer's order and staleness). The slots therefore add each pause to a due time one at a time.

An *epoch* is the set of episodes started between two pauses. They share the pauses they live
through, and adding the same floats in the same order is monotone, so within an epoch the order
of due times is the order of ``start + work``: each epoch is a heap keyed by ``start + work``,
and only its head's due time (the key folded with the epoch's pauses) is needed, kept in a small
heap of epoch heads (:class:`pipesim.core.slots.Slots`). Episodes started since the last pause
(the current epoch) are due at exactly ``start + work``, with nothing to fold. A pause costs
O(live epochs): each head adds it, and the current epoch becomes an earlier one.

Two keys may fold to one due time (within an epoch or across two): a tie the chapter's loop has
too. The slots finish every episode due by the instant together, and the buffer takes ties in
start order (by id), as the chapter's ``running`` dict yields them.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heapify, heappop, heappush, heapreplace, nsmallest
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipesim.core.episode import Episode

Entry = tuple[float, int, "Episode"]  # (start + work, id, episode): an epoch's heap entry


class Epoch:
    """Episodes started between two pauses: a heap of :data:`Entry`, and ``tail``, the lengths
    of the pauses they lived through, in order."""

    __slots__ = ("heap", "tail")

    def __init__(self, heap: list[Entry], tail: tuple[float, ...]) -> None:
        self.heap = heap
        self.tail = tail


# (due time of the epoch's head, its id, the epoch). Heads and entries compare as (due, id), ids
# being unique, so the third items never meet (typed Any so that mypy lets the two compare)
Head = tuple[float, int, Any]


def fold(key: float, tail: tuple[float, ...]) -> float:
    """``key`` plus each pause of ``tail``, added one at a time (as the chapter adds
    ``sync_time`` to a running end at each sync)."""
    for pause in tail:
        key += pause
    return key


def pop_old(old: list[Head]) -> tuple[float, Entry, Epoch]:
    """Pop the head of the epoch at the top of ``old`` (due time, entry, epoch), and put the
    epoch's next head, with its due time folded, in its place (or drop an emptied epoch)."""
    due, _, epoch = old[0]
    heap = epoch.heap
    entry = heappop(heap)
    if heap:
        key, i, _ = heap[0]
        for pause in epoch.tail:  # fold, inlined (this is the path of most completions at eta > 0)
            key += pause
        heapreplace(old, (key, i, epoch))
    else:
        heappop(old)
    return due, entry, epoch


def push_back(old: list[Head], due: float, entry: Entry, epoch: Epoch) -> None:
    """Undo :func:`pop_old`: ``entry`` (due at ``due``) is its epoch's head again. O(epochs)."""
    heappush(epoch.heap, entry)
    old[:] = [h for h in old if h[2] is not epoch]
    old.append((due, entry[1], epoch))
    heapify(old)


def add_pause(old: list[Head], pause: float) -> None:
    """Every old epoch lives through one more pause: each head's due time adds it (O(epochs))."""
    for _, _, epoch in old:
        epoch.tail += (pause,)
    old[:] = [(due + pause, i, epoch) for due, i, epoch in old]
    heapify(old)  # two due times may now tie, and ties go by id


def heads(epochs: list[Epoch]) -> list[Head]:
    """The heap of the non-empty ``epochs``' heads, each with its due time folded."""
    old = [(fold(e.heap[0][0], e.tail), e.heap[0][1], e) for e in epochs if e.heap]
    heapify(old)
    return old


def smallest(m: int, cur: list[Entry], old: list[Head]) -> list[Entry]:
    """The ``m`` running entries due first, as ``(due, id, episode)``, in finishing order."""
    first = nsmallest(m, cur)  # the current epoch: keys are due times
    if not old:
        return first
    for _, _, epoch in old:
        tail = epoch.tail
        first += [(fold(key, tail), i, e) for key, i, e in nsmallest(m, epoch.heap)]
    return nsmallest(m, first)


def ordered(cur: list[Entry], old: list[Head]) -> list[Entry]:
    """Every running entry as ``(due, id, episode)``, in finishing order. O(in-flight log)."""
    out = list(cur)
    for _, _, epoch in old:
        out += [(fold(key, epoch.tail), i, e) for key, i, e in epoch.heap]
    out.sort()
    return out


def rebuild(
    cur: list[Entry], old: list[Head], keep: Callable[[Episode], bool]
) -> tuple[list[Entry], list[Head]]:
    """The heaps again, with the episodes ``keep`` accepts, each in its epoch, re-keyed by
    ``start + work`` (a stretch changes ``work``). O(in-flight)."""
    cur = [(e.start_s + e.work_s, i, e) for _, i, e in cur if keep(e)]
    heapify(cur)
    epochs = []
    for _, _, epoch in old:
        epoch.heap = [(e.start_s + e.work_s, i, e) for _, i, e in epoch.heap if keep(e)]
        heapify(epoch.heap)
        epochs.append(epoch)
    return cur, heads(epochs)
