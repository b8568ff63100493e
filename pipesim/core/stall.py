"""Why a run stalled: the diagnosis :class:`~pipesim.core.errors.PipelineError` carries when
nothing is left to happen before the last sync.

It is read from the run's state once, at the stall (the hot path pays nothing), and names the
likeliest culprit in order: books that do not close (an episode taken out of the buffer, a
counter written), a sync begun and never ended, a sync waiting for more buffered episodes than
the admission lets run ahead of the trainer, a weight update that blocks admission for good,
a batch policy that forms no batch, a paused replica or a routing rule that picks none, and,
the common case, an admission rule that says no (with who dropped the episodes it still counts).
It lives apart from :mod:`pipesim.core.errors`, which holds the messages of the other ways a run
cannot finish: this one walks the run's records to find who is to blame.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from pipesim.core.errors import (
    PipelineError,
    _no_batch_yet,
    _policies,
    _state_written,
    _taken_from_buffer,
    _where,
    _written,
)

if TYPE_CHECKING:
    from pipesim.core.engine import Pipeline

__all__ = ["kept_going", "stalled"]


def stalled(p: Pipeline, at: float | None = None) -> PipelineError:
    """Nothing is left to happen before the last sync; the message names the likeliest culprit,
    read from the run's state (only here, once: the hot path pays nothing). ``at``: when the run
    stalled, where that was before now (:func:`kept_going`)."""
    return PipelineError(
        f"the pipeline stalled at {_where(p, at)}: {p.n_running} running, {len(p.buffer.items)} episodes "
        f"buffered (batch_size {p.batch_size}), {p.started} started, {p.n_dropped} dropped; {_culprit(p)}"
    )


def kept_going(p: Pipeline, what: str, spins: int, since: tuple[float, float]) -> PipelineError:
    """A helper process (``what``, started with ``p.process``) that never ends went on alone,
    ``spins`` events in a row: the run stalled when everything else ran out, and the process only
    kept the queue from running dry (:meth:`pipesim.core.decisions.Decisions._checked`). The stall
    is named as it would have been then (the helper's own timeouts change none of the state read),
    with the process as what kept the run going: blaming the process alone hid the cause.

    ``since``: the others ran out no earlier than ``since[0]`` (the helper's last yield with another
    event left, or the latest of those events, read where the queue was short: a superseded
    wake-up among them) and no later than ``since[1]``, when it was first alone; when exactly is
    the run's latest record there (an episode's end, a step's or a sync's end: the last events of a
    slots run, created after the helper last looked), else ``since[0]``."""
    lo, hi = since
    ends = [ep.end_s for ep in p.episodes.live.values() if ep.end_s is not None]
    ends += [t for *_, t, _v in p.train_log[-1:]] + [t for _, t, _v in p.sync_log[-1:]]
    ends += [u.end_s for u in p.updates[-1:]]
    at = max([lo, *(t for t in ends if t <= hi)])
    return PipelineError(
        f"{stalled(p, at=at)}; {what} kept the run going after that, alone ({spins:,} events in a "
        f"row, to t={p.env.now:.6g} s): it never ends, so the run could not stop at the stall (give "
        "it an end, a condition it checks each turn)"
    )


def _chain(policy: object) -> str:
    """A wrapped policy by its classes, outermost first (``SyncEveryK > AfterNextBatch >
    AbortReprefill``): each one named whole, where a shortened repr may cut the one that waits."""
    names = [type(policy).__name__]
    for _ in range(8):  # a chain of wrappers; deeper ones are not named
        policy = getattr(policy, "inner", None)
        if policy is None or isinstance(policy, type):
            break
        names.append(type(policy).__name__)
    return " > ".join(names)


def _culprit(p: Pipeline) -> str:
    """Why a stalled run stalled: the books do not close (a policy wrote the pipeline's state), the
    weight update blocks admission, the batch policy forms no batch from a full buffer, a replica
    is paused or the routing rule picks none, or (the common case) the admission rule says no."""
    names = f"(with {type(p.weight_update).__name__} and {type(p.batching).__name__})"
    missing = p.started - p.n_trained - p.n_running - len(p.buffer.items) - p.n_dropped
    if missing:
        return f"{missing} launched episode(s) are neither trained, running, buffered nor dropped: {_lost(p)}"
    if (wrong := _written(p)) is not None:  # p.version = 0 in admits: the rule says no for good
        return (
            f"a policy of {_policies(p)} wrote the pipeline's state: {wrong}; the view's counters "
            "are read-only (change state only through the port's actions)"
        )
    if p.syncing:  # begun and never ended: the sync waits on something that cannot come
        wu = type(p.weight_update).__name__
        return (
            f"the weight update {wu}.sync began a sync at t={p._sync_start:g} and never ended it: it "
            "waits for an event that cannot come (drained() while it keeps the engines paused, "
            "say); a sync ends with end_sync"
        )
    if (need := p.buffer_need) is not None:  # a sync waits for a batch the buffer never holds
        return _buffer_wait(p, need)
    if _blocks(p):
        return f"the weight update {type(p.weight_update).__name__}.blocks_admission says True for good"
    if no_batch := _no_batch_yet(p):
        return no_batch[len("; but ") :]
    if any(e.paused for e in p.engines):
        return f"generation is paused on a replica and nothing resumes it {names}"
    if not p.admission_refused and p.scenario.replicas is not None:
        routing = type(p.scenario.replicas.routing).__name__
        return f"the routing rule {routing}.choose picks no replica though one accepts {names}"
    adm = type(p.admission).__name__
    if p.n_dropped:  # the common cause: dropped episodes still count as started, so none replaces them
        return (
            f"the admission policy {adm} admits no further episode {names}, and {p.n_dropped} "
            f"dropped episode(s){f' ({by})' if (by := _droppers(p, alone=True)) else ''} still count "
            f"as started there, so none is replaced: {_remedies(p)}"
        )
    return f"the admission policy {adm} admits no further episode {names}"


def _blocks(p: Pipeline) -> bool:
    """Whether the weight update blocks admission now (``p._blocked()``); False where its
    ``blocks_admission`` raised or answered no bool: the run would have said so already."""
    try:
        return bool(p._blocked())
    except Exception:
        return False


def _buffer_wait(p: Pipeline, need: int) -> str:
    """A sync waits for ``need`` buffered episodes (``p.buffered_at_least``) that never come: while
    the trainer waits for that sync, the admission lets only the episodes it has admitted past the
    trained ones (``ahead``: buffered or running, as the books close) exist, and it admits no more.
    Under the count throttle that lead is eta * B (``max_staleness * batch_size``), so a wait for
    more than it never ends, whatever eta is: the wording once assumed ``AfterNextBatch`` (whose
    wait is B, so eta >= 1 was always the cure) and told a wait for 9 at eta 1, B 4 to use eta >= 1.
    The remedy names both ends: wait for at most ``ahead``, or let the admission run ``need`` ahead
    (the count throttle at ``max_staleness >= ceil(need / B)``; a rule with a bound of its own,
    ``staleness_knob``, by that knob: it never reads ``max_staleness``)."""
    wu, adm = _chain(p.weight_update), type(p.admission).__name__
    ahead = p.started - p.n_dropped - p.n_trained  # buffered + running: the books closed above
    eta, b = p.max_staleness, p.batch_size
    head = (
        f"the weight update {wu} waits for {need:,} buffered episodes before it syncs "
        f"(buffered_at_least) and {len(p.buffer.items):,} are buffered"
    )
    if _blocks(p):  # the weight update itself starts nothing while it waits
        return (
            f"{head}, but {type(p.weight_update).__name__}.blocks_admission says True while it "
            "waits, so no episode starts to fill the buffer (let episodes start until the sync begins)"
        )
    try:  # a rule with a bound of its own (OwnStalenessBound) never reads max_staleness
        knob = (
            p.admission.staleness_knob() if callable(getattr(p.admission, "staleness_knob", None)) else None
        )
    except Exception:  # noqa: BLE001 - a user's method: the hint goes without it
        knob = None
    own = isinstance(knob, str)
    count = (
        f" (eta * B = {eta} * {b}, the count throttle's lead)" if not own and eta and ahead == eta * b else ""
    )
    bound = (
        f"the admission policy {adm} admits no further episode while the trainer waits for that "
        f"sync, so at most {ahead:,} episode(s) run ahead of the trainer{count}, fewer than the "
        f"{need:,} waited for"
    )
    how = (
        f"{adm}'s own bound: {knob}"
        if own
        else f"the count throttle at max_staleness >= {max(1, math.ceil(need / b))}: eta * B >= {need:,}"
    )
    cure = f"an admission that lets {need:,} run ahead of the trainer ({how}) lets it finish"
    if ahead >= 1:
        cure = f"wait for at most {ahead:,}, or {cure}"
    return f"{head}: {bound}; {cure}"


def _remedies(p: Pipeline) -> str:
    """What would let a run whose dropped episodes use up its admission finish: an admission that
    counts them out. No failure policy does: a retry (``RetryFailed``'s relaunch, ``RequeueFailed``'s
    requeue) starts a new episode that counts as started too, while the failed one still counts, so
    the same run stalls with any of them (it was offered as a remedy, and stalled on every seed
    tried with ``CountThrottle``). Where a batch policy of the user's discarded episodes and does
    not declare ``drops_work``, the declaration is named too: it keeps the testing kit from drawing
    the policy beside such an admission rule (docs/policies.md). pipesim's own policies are never
    told to declare it (``WholeGroups`` filtering: the advice was to edit pipesim)."""
    from pipesim.core.episode import DISCARDED

    out = "an admission that counts dropped episodes out (AReaLThrottle, or OverSample)"
    pool, frac = p._n_pool, p.n_dropped / max(p.started, 1)
    need = math.ceil(1.5 * p.config.steps * p.batch_size / max(1.0 - frac, 0.05)) + p.config.n_slots
    if need > pool:  # it launches more than it trains: the pool must cover the drops too
        out += (
            f", with a pool_size of about {need:,} (the run dropped {frac:.0%} of what it launched, "
            f"and its pool holds {pool:,} tasks),"
        )
    out += " lets the run finish"
    batch = p.batching
    own = type(batch).__module__.startswith("pipesim.")  # pipesim's own: the kit knows them already
    if _drop_counts(p)[DISCARDED] and not own and not getattr(batch, "drops_work", False):
        out += (
            f"; the batch policy {type(batch).__name__} discards episodes and does not declare it: "
            "give it the class attribute drops_work = True, so that the testing kit's "
            "policy_scenarios draws it only beside admission rules that count drops out"
        )
    return out


def _drop_counts(p: Pipeline) -> dict[str, int]:
    """The run's episodes by status, archived and live (read once, at a stall)."""
    from pipesim.core.episode import STATUSES

    rec = p.episodes
    counts = dict.fromkeys(STATUSES, 0)
    for ep in rec.live.values():
        counts[ep.status] = counts.get(ep.status, 0) + 1
    if rec.n_archived:  # the archived ones' codes: every id that is not live
        codes = rec.column("status", len(rec)).copy()
        codes[list(rec.live)] = -1
        for code, k in zip(*np.unique(codes[codes >= 0], return_counts=True), strict=True):
            counts[STATUSES[code]] += int(k)
    return counts


def _droppers(p: Pipeline, alone: bool = False) -> str:
    """Who dropped the run's episodes, by status, each with its count (read once, at an error):
    failed ones the failure policy, aborted ones the weight update (``abort_running``), discarded
    ones the batch policy (``select``) or a user's weight update (``p.drop``: pipesim's own never
    call it). ``""`` where none was dropped, or where the statuses do not add up to ``n_dropped``
    (a policy wrote a counter or a status: none can be named). ``alone``: where every dropped
    episode failed, the failure policy's name alone (for a message that gives the count beside it).

    The one wording of the stall's culprit and of :mod:`pipesim.core.errors`' refusals (a pool
    exhausted, no batch formed): each had its own, and the errors' named pipesim's weight update
    beside the batch policy for discards it cannot make."""
    from pipesim.core.episode import ABORTED, DISCARDED, FAILED

    if not p.n_dropped:
        return ""
    counts = _drop_counts(p)
    if counts[FAILED] + counts[ABORTED] + counts[DISCARDED] != p.n_dropped:
        return ""
    batch, update = type(p.batching).__name__, type(p.weight_update).__name__
    ours = type(p.weight_update).__module__.startswith("pipesim.")  # pipesim's own never p.drop
    by_drop = "" if ours else f" or {update}'s p.drop"
    failures = type(p.scenario.failures).__name__ if p.scenario.failures is not None else "the failure policy"
    if alone and counts[FAILED] == p.n_dropped:  # the common case, named by its policy alone
        return failures
    named = (
        (FAILED, failures),
        (ABORTED, f"by {update}'s abort_running"),
        (DISCARDED, f"by {batch}.select{by_drop}"),
    )
    return ", ".join(f"{counts[s]:,} {s} {who}" for s, who in named if counts[s])


def _lost(p: Pipeline) -> str:
    """Why a stalled run's books do not close: an episode marked buffered is not in the buffer
    (:func:`_taken_from_buffer` says who took it), or a policy wrote a counter."""
    from pipesim.core.episode import BUFFERED

    here = {id(ep) for ep in p.buffer.items}
    lost = next((ep for ep in p.episodes.live.values() if ep.status == BUFFERED and id(ep) not in here), None)
    if lost is None:
        return _state_written(p)
    return f"episode {lost.id} is marked buffered but is not in the buffer: {_taken_from_buffer(p)}"
