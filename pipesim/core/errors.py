"""How a run that cannot finish says so: :class:`PipelineError` and its messages. How a config
refuses a field (:class:`FieldError`, :func:`check_int`, :func:`check_number`, :func:`shown`) lives
in :mod:`pipesim.core.validate`, re-exported here.

Each message names where the run stood (time, version, counts) and the policies involved, since
a run that cannot finish is nearly always a combination of policies that cannot work together.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

from pipesim.core.episode import FAILED, Episode
from pipesim.core.validate import MAX_SHOWN_CHARS as MAX_SHOWN_CHARS  # re-exported
from pipesim.core.validate import TAIL_SIGMAS as TAIL_SIGMAS  # re-exported
from pipesim.core.validate import FieldError as FieldError  # re-exported
from pipesim.core.validate import FieldTypeError as FieldTypeError  # re-exported
from pipesim.core.validate import check_int as check_int  # re-exported: the configs' checks
from pipesim.core.validate import check_number as check_number  # re-exported
from pipesim.core.validate import check_tail as check_tail  # re-exported
from pipesim.core.validate import float_hint as float_hint  # re-exported
from pipesim.core.validate import shown as shown  # re-exported

if TYPE_CHECKING:
    from pipesim.core.engine import Pipeline


class PipelineError(RuntimeError):
    """The configuration cannot complete its steps (pool exhausted, or no progress possible)."""


MAX_SLOTS = 2**24
"""The most slots (or sequences) one run, batch or replica may hold: each is a Python object
and a heap entry, so past this a run is out of memory before it starts."""
MAX_SEED = 2**64
"""Seeds are integers in [0, 2**64): what both numpy's and the chapter's torch generator accept
(``torch.Generator.manual_seed`` refuses 2**64 with an overflow that names nothing)."""
MAX_POOL_TASKS = 2**28
"""The most tasks a compute run or a plan's workload may draw (a token-side row each): past this
a run is out of memory, not a run. A scenario's duration pool is bounded tighter
(:data:`MAX_DURATION_POOL`)."""
MAX_DURATION_POOL = 2**22
"""The most durations a scenario's pool may hold (4,194,304). A pool costs about 1.1 KB a task with
the chapter's draws and 1.7 KB with numpy's, as measured at 1M and 4M tasks (peak RSS of a one-step
run of async-eta2 over its pool): 2**22 tasks is about 7 GB, and the earlier bound of 2**28 was
300 GB that a 24 GB machine met with a raw allocation error (``pool_size=268435456``) or a box
brought down (``systems:areal --set steps=400000``, 16 GB). A million-episode run draws 1M."""


def _where(p: Pipeline, at: float | None = None) -> str:
    """When and where in the run (``at``: a time before now, where the error names it)."""
    return f"t={p.env.now if at is None else at:.6g} s, version {p.version} of {p.config.steps}"


def _policies(p: Pipeline) -> str:
    return f"{type(p.admission).__name__} / {type(p.weight_update).__name__} / {type(p.batching).__name__}"


def zero_time_loop(p: Pipeline, launched: int) -> PipelineError:
    return PipelineError(
        f"no progress: {launched} episodes launched at {_where(p)} without time advancing; the "
        f"policies {_policies(p)} relaunch work in a zero-time loop"
    )


def no_batch(p: Pipeline, launched: int) -> PipelineError:
    """No batch taken in the run's launch limit (``Pipeline._launch_limit``: twice the pool plus
    100 per slot and batch entry). Without failures that means the policies drop or relaunch
    everything. With a failure policy it may be chance (a high hazard leaves few survivors, and
    another seed may finish), so the message says what was seen, not that no batch can ever form,
    and names the failure policy, its hazard and the share of episodes it failed."""
    head = (
        f"no progress: no batch formed in {launched:,} launches since the trainer last took a batch "
        f"({_where(p)}; {p.n_dropped:,} dropped in all{f': {by}' if (by := _droppers(p)) else ''})"
    )
    failures = p.scenario.failures
    if failures is None:
        return PipelineError(
            f"{head}; the policies {_policies(p)} drop or relaunch everything the engine generates, "
            "so no batch can ever be formed"
        )
    failed = _drop_counts(p).get(FAILED, 0)
    return PipelineError(
        f"{head}; the failure policy {type(failures).__name__} (hazard_per_s={failures.hazard_per_s:g}, "
        f"a mean life of {1.0 / failures.hazard_per_s:,.6g} s) failed {failed:,} of the {p.started:,} "
        f"episodes launched ({failed / max(p.started, 1):.1%}). Failures are random: a run with this few "
        f"survivors may reach this limit ({launched:,} launches without a batch) by chance where another "
        "seed finishes. Lower hazard_per_s or shorten the episodes (a Timeout); if failures are not "
        f"the cause, the policies {_policies(p)} drop or relaunch what the engine generates"
    )


def _drop_counts(p: Pipeline) -> dict[str, int]:
    """The run's episodes by status (read once, at an error): :func:`pipesim.core.stall._drop_counts`."""
    from pipesim.core.stall import _drop_counts as counts  # stall imports this module: at the error only

    return counts(p)


def _droppers(p: Pipeline) -> str:
    """Who dropped the run's episodes, each by its count, or ``""``: the stall's words
    (:func:`pipesim.core.stall._droppers`), read once, at the error."""
    from pipesim.core.stall import _droppers as droppers  # stall imports this module: at the error only

    return droppers(p)


def pool_exhausted(p: Pipeline, pool_size: int) -> PipelineError:
    """Every task of the pool was launched before the run's last step. Below the default pool
    (sized for runs that train what they launch) the advice is that size; at or above it, the run
    launched more than it trains, and the message says where the surplus went (dropped, or still
    running and buffered under the admission rule), naming those policies, not just a number.
    Either way the way to more tasks is the one that applies (:func:`_more_pool`): a ``pool_size``
    the scenario set is named with its value, never advised to be set."""
    default = p.scenario.default_pool_size
    running, buffered = p.n_running, len(p.buffer.items)
    books = f"{p.n_trained} trained, {p.n_dropped} dropped, {running} running, {buffered} buffered"
    more = _more_pool(p, pool_size)
    if pool_size < default:
        advice = (
            f"{more}; {default:,}, this pipeline's default pool, covers a run that trains what it launches"
        )
    else:
        surplus = []
        t, at_batch, _, aborts = p._abort_loop
        if p.n_dropped and aborts and t == p.env.now and at_batch == p._started_at_batch:
            surplus.append(  # abort_running between starts at this instant: the admission loop's
                f"dropped {p.n_dropped} (abort_running was called {aborts + 1:,} times at this instant, "
                "each after new starts, with no batch trained: a zero-time loop of starts and aborts, "
                f"most likely abort_running in {type(p.admission).__name__}.admits, which must only read)"
            )
        elif p.n_dropped:
            by = _droppers(p) or (
                f"the batch policy {type(p.batching).__name__} or the weight update "
                f"{type(p.weight_update).__name__} dropped them"
            )
            surplus.append(f"dropped {p.n_dropped} ({by})")
        if running + buffered:
            surplus.append(
                f"holds {running + buffered} running or buffered (as the admission policy "
                f"{type(p.admission).__name__} allows)"
            )
        need = p.config.steps * p.batch_size
        advice = (
            f"the run trains {need:,} in all and {' and '.join(surplus) or 'launched more'}, which "
            f"the pool of {pool_size:,} (the default is sized for a run that trains what it "
            f"launches) does not cover: {more}"
        )
    return PipelineError(
        f"durations pool exhausted: the run launched all {pool_size} tasks (at {_where(p)}: "
        f"{books}); {advice}{_no_batch_yet(p)}"
    )


def _more_pool(p: Pipeline, pool_size: int) -> str:
    """How to give the run more tasks: where the scenario set ``pool_size`` and the pool is the one
    it drew, raise that (naming its value, not advising to set it); where the pool is smaller or
    larger than both the set size and the default, it was passed in (``run(scenario, durations)``,
    ``simulate_pipeline``), so more durations; otherwise (the default pool) set pool_size."""
    set_to, default = p.scenario.pool_size, p.scenario.default_pool_size
    if set_to is not None and pool_size == set_to:
        return f"pool_size is set to {set_to:,}: set it higher"
    if set_to is not None:
        return (
            f"pass more durations (pool_size, {set_to:,}, sizes a pool the run draws, "
            "not the durations given)"
        )
    dur = p.scenario.durations
    values = getattr(dur, "values", None)  # a TraceDurations that does not cycle
    if isinstance(values, tuple) and pool_size == len(values) and not getattr(dur, "cycle", True):
        return f"the trace holds {pool_size:,} durations: a longer trace, or TraceDurations(cycle=True)"
    if pool_size != default:
        return "pass more durations"
    return "set pool_size higher"


def _no_batch_yet(p: Pipeline) -> str:
    """Where the trainer waits with a full batch's worth buffered: the batch policy is the suspect."""
    n = len(p.buffer.items)
    if not p.buffer.get_queue or n < p.batch_size:
        return ""
    return (
        f"; but the trainer is waiting with {n} episodes buffered (batch_size {p.batch_size}) and the "
        f"batch policy {type(p.batching).__name__} formed no batch ({_why_no_batch(p, n)})"
    )


def _why_no_batch(p: Pipeline, n: int) -> str:
    """Which of the batch policy's methods held the batch back: ``min_items``, where the engine
    acts on it and it asks for more than the ``n`` buffered (its value named: 10**9 reads as a
    lie at once), else ``select``, which returned None. ``min_items`` is asked again here, once,
    at the stall; an answer that raises or is no count leaves the old, unspecific reason."""
    min_items = getattr(p, "_min_items", None)  # None: the engine does not act on it (no hint, or off)
    if min_items is None:
        return "its select returned None"
    try:
        want = min_items(p)
    except Exception:  # noqa: BLE001 - a diagnosis never raises; the run's own check names a bad answer
        return "its select returned None, or its min_items asked for more"
    if not isinstance(want, numbers.Integral) or isinstance(want, bool):
        return "its select returned None, or its min_items asked for more"
    if int(want) > n:
        return (
            f"its min_items returned {int(want):,} with {n} episodes buffered, so select was not "
            "asked: min_items is the fewest buffered episodes select can form a batch from"
        )
    return f"its select returned None; its min_items returned {int(want):,}"


def not_buffered(p: Pipeline, ep: object, how: str = "in a batch") -> PipelineError:
    """``select`` returned ``ep`` (``how``: in a batch, or as discarded) though it is not buffered
    (an episode returned twice is :func:`pipesim.core.buffer.returned_twice`'s)."""
    return PipelineError(
        f"the batch policy {type(p.batching).__name__} returned {episode_shown(ep)} {how} at "
        f"{_where(p)}, which is not a buffered episode (trained already, dropped, or not from the "
        "buffer): select must return buffered episodes and take them out of the buffer"
    )


def episode_shown(ep: object) -> str:
    """An episode as an error names it: its repr where that fits :data:`MAX_SHOWN_CHARS`, else
    cut at a field boundary, its first fields and its last (the status) kept:
    ``Episode(id=43, v=0, d=6.63s, start=91.8, ..., status=buffered)``. :func:`shown` cuts any
    long repr in its middle, which read ``d=6.63s,...22105407715, status=buffered``: an end time
    cut inside its digits. Anything else, or an episode whose repr has no fields, as ``shown``."""
    if not isinstance(ep, Episode):
        return shown(ep)
    text = shown(ep) if type(ep).__repr__ is not Episode.__repr__ else repr(ep)
    if len(text) <= MAX_SHOWN_CHARS or ", " not in text:
        return text
    head, _, last = text.rpartition(", ")
    fields = head.split(", ")
    while len(fields) > 1 and len(", ".join(fields)) + len(", ..., ") + len(last) > MAX_SHOWN_CHARS:
        fields.pop()
    return f"{', '.join(fields)}, ..., {last}"


def bad_parent(task: int, parent: int, n: int, found: tuple[str, int] | None) -> str:
    """Why ``(task, parent)`` given to ``requeue`` or ``relaunch`` is refused: ``parent`` is no
    episode of the run (``n`` launched), or ``found`` (its status and task) is not a dropped
    episode of ``task``. The port's ``_check_parent`` decides; the caller names the policy."""
    if found is None:
        ids = f"ids 0 to {n - 1}" if n else "none launched yet"
        return (
            f"parent {parent} is not an episode of this run ({ids}): a parent is the id of the "
            "dropped episode the task relaunches, or -1"
        )
    status, parent_task = found
    if parent_task != task:
        return (
            f"({task}, {parent}): episode {parent} ran task {parent_task}, not task {task}; a "
            "relaunch runs its parent's task (pass (ep.task_id, ep.id)), or give parent -1"
        )
    return (
        f"parent {parent} is {status}, not dropped: a parent is an episode aborted, discarded or "
        "failed, whose task the relaunch runs again (drop it first, or take it off its slot with "
        "abort_running), or -1 for a task that replaces no episode"
    )


def seconds(value: object, what: str, unit: str = "seconds") -> float:
    """``value`` as float seconds, finite and >= 0 (an int or a numpy real converted: an episode's
    seconds are floats, which the compiled build's episode holds and checks, and a numpy float32
    carried into the clock made pure Python's run differ from the compiled one's), else a
    :class:`PipelineError` saying that ``what`` must be such seconds (not a ``TypeError`` from
    inside the run, nor a clock overflow for a NaN)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        x = float(value)
        if 0.0 <= x < math.inf:
            return x
    raise PipelineError(f"{what} must be finite {unit} >= 0, got {shown(value)} ({type(value).__name__})")


def source_seconds(p: Pipeline, work: object, method: str = "work_s") -> float:
    """What the episode source's ``method`` (``work_s``, or ``publish`` re-costing an episode)
    answered, as seconds (:func:`seconds`), the error naming the source."""
    return seconds(work, f"{type(p.source).__name__}.{method} (at {_where(p)})")


def clock_overflow(p: Pipeline, what: str) -> PipelineError:
    return PipelineError(
        f"the simulated clock overflowed (t={shown(p.env.now)} at version {p.version} of {p.config.steps}): "
        f"{what} is too long for a float; the scenario's times must be far below 1e308 s"
    )


def _taken_from_buffer(p: Pipeline) -> str:
    """Who took buffered episodes out of the buffer without a batch, a discard or a drop. Not the
    batch policy: the buffer checks after every ``select`` that what left it is exactly what came
    back (``pipesim.core.buffer._check_taken``), so another policy edited ``p.buffered``."""
    others = [f"the admission policy {type(p.admission).__name__}"]
    others.append(f"the weight update {type(p.weight_update).__name__}")
    return (
        f"{' or '.join(others)} took it out of p.buffered, which is read-only outside the batch "
        "policy's select (change state only through the port's actions: p.drop(episodes, "
        "'discarded') takes buffered episodes out and keeps the books)"
    )


def spinning(p: Pipeline, what: str, spins: int) -> PipelineError:
    """A policy's generator (``what``) yielded ``spins`` events in a row with no time passing or
    nothing else left to happen (:meth:`pipesim.core.decisions.Decisions._checked`)."""
    return PipelineError(
        f"{what} yielded {spins:,} events in a row at {_where(p)} without time advancing or with "
        "nothing else left to happen: it waits for something that can never come (a sync must end "
        "with end_sync or skip_sync; give a polling loop an end)"
    )


def view_written(p: Pipeline) -> PipelineError | None:
    """A policy assigned to a counter of the view (``p.version = 3``, ``p.batch_size = 2``): the
    view is the engine itself, so Python does not stop the write, and the run would go on with
    wrong numbers. Checked once per sync, at a stall and at the end of the run (never per event);
    the version also after each controller pass (:func:`version_written`)."""
    wrong = _written(p)
    if wrong is None:
        return None
    return PipelineError(
        f"a policy of {_policies(p)} wrote the pipeline's state (at {_where(p)}): {wrong}; "
        "the view's counters are read-only (change state only through the port's actions)"
    )


def version_written(p: Pipeline, before: int, stage: str) -> PipelineError:
    """``p.version`` changed during a controller pass (``stage``: its admission part, or the
    batch part), where only a sync publishes one: the policies asked there wrote it. One
    comparison a pass finds it (:meth:`pipesim.core.engine.Pipeline._controller_pass`)."""
    if stage == "admission":
        asked = [
            f"the admission policy {type(p.admission).__name__} (admits)",
            f"the weight update {type(p.weight_update).__name__} (blocks_admission)",
        ]
        if p.routing is not None:
            asked.append(f"the routing rule {type(p.routing).__name__} (choose)")
    else:
        asked = [f"the batch policy {type(p.batching).__name__} (select, min_items)"]
    return PipelineError(
        f"{' or '.join(asked)} wrote p.version at t={p.env.now:.6g} s: it was {before} and is "
        f"{shown(p.version)}, and only a sync publishes a version; the view's counters are "
        "read-only (mypy rejects p.version = ...; change state only through the port's actions)"
    )


def _written(p: Pipeline) -> str | None:
    """What a policy wrote of the view's counters (:func:`view_written`), or None."""
    c = p.config
    wrong = [
        f"{name} is {shown(got)}, not {want}"
        for name, got, want in (
            (
                "version (one per entry of started_at_version, less one)",
                p.version,
                len(p.started_at_version) - 1,
            ),
            ("batch_size", p.batch_size, c.batch_size),
            ("max_staleness", p.max_staleness, c.max_staleness),
            ("batches_taken", p.batches_taken, len(p.ledger_log)),
        )
        if got != want
    ]
    return "; ".join(wrong) if wrong else None


def lost_episodes(p: Pipeline, line: tuple[int, ...], episode_id: int | None) -> PipelineError:
    """The books did not close at the ledger ``line`` (step, started, trained, running, buffered,
    dropped). An episode marked buffered that is not in the buffer was taken out and never
    returned (:func:`_taken_from_buffer` names who); otherwise a policy wrote a counter
    (``p.started``), and every policy of the run is named."""
    step, started, trained, running, buffered, dropped = line
    if episode_id is not None:
        return PipelineError(
            f"episodes lost at step {step}: episode {episode_id} is marked buffered but is not in the "
            f"buffer; {_taken_from_buffer(p)}"
        )
    return PipelineError(
        f"the books do not close at step {step}: {started} episodes started against {trained} "
        f"trained + {running} running + {buffered} buffered + {dropped} dropped; {_state_written(p)}"
    )


def _state_written(p: Pipeline) -> str:
    """Why launched episodes are unaccounted for when no batch policy kept one: the sentence the
    end-of-run books (:func:`lost_episodes`) and a stall (:func:`_culprit`) both give."""
    return (
        f"a policy of {_policies(p)} changed the pipeline's counters (p.started, p.n_dropped), "
        "which are read-only (change state only through the port's actions; only the batch "
        "policy's select edits the buffer, by taking out what it returns)"
    )
