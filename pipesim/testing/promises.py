"""``check_promises``: the promises a policy makes change nothing but speed.

The engine acts on a policy's promises (:mod:`pipesim.core.port`): it sleeps past completions
an admission rule promises cannot reopen it (``closed``) while the buffer stays short of what the
batch policy needs (``min_items``), skips asking for a batch while the buffer is shorter than that,
and hands a source that promises ``FixedWork`` nothing at a sync. A promise that lies shows as a
difference between the run with the shortcuts and the run without them. Where the two differ,
each run is repeated as it first ran (:data:`REPEATS` times): a policy that draws from an
unseeded source (``random``, the clock) differs from itself too, and is named as that ("runs are
deterministic"), not as a lying promise.

Quiet completions, the shortcut ``closed`` and ``min_items`` feed, are taken only in a plain
configuration (:func:`pipesim.core.quiet.make_quiet`): one replica, no timeout, no failure
policy, a weight update that only pauses. A scenario drawn from every policy family is mostly
not plain, so a lying ``closed`` would go unseen in most draws. ``check_promises`` therefore
also runs the scenario's *plain twin* -- the same policies, pipeline and durations without
replicas, timeout and failures, under ``PartialRollout`` unless the weight update only pauses --
wherever it differs from the scenario. Thirty draws of ``policy_scenarios`` then catch a lying
``closed`` in every random seed (``tests/test_testing_kit.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from pipesim.config import Scenario
from pipesim.core.episode import EPISODE_FIELDS

if TYPE_CHECKING:
    from pipesim.core.engine import Pipeline


def run_trace(scenario: Scenario, options: Any = None) -> tuple[Any, ...]:
    """The event trace of ``scenario`` run with engine ``options``
    (a :class:`~pipesim.core.seams.EngineOptions`):
    every episode's task, slot, times, versions, fate and update range, the training steps, the
    syncs and the update log -- or the error the run stopped with."""
    from pipesim.core.engine import Pipeline
    from pipesim.core.errors import PipelineError
    from pipesim.core.seams import EngineOptions
    from pipesim.io.api import draw_pool
    from pipesim.testing.invariants import _need_scenario

    _need_scenario(scenario)
    p = Pipeline(scenario, draw_pool(scenario).tolist(), options=options or EngineOptions())
    try:
        p.run()
    except PipelineError as exc:
        return ("error", str(exc))
    return pipeline_trace(p)


def pipeline_trace(p: Pipeline) -> tuple[Any, ...]:
    """The event trace of a pipeline that has run (see :func:`run_trace`): every field of every
    episode (:data:`EPISODE_COLUMNS`), the training steps, the syncs, the update log, the drops."""
    episodes = [_READ_EPISODE(e) for e in p.episodes]
    return (p.env.now, episodes, p.train_log, p.sync_log, p.updates, p.n_dropped)


def plain_twin(scenario: Scenario) -> Scenario:
    """``scenario`` in the configuration where every shortcut can be taken (see the module)."""
    from pipesim.core.port import pauses_only
    from pipesim.policies.updates import PartialRollout

    twin = scenario.with_(replicas=None, timeout=None, failures=None)
    if not pauses_only(twin.weight_update):
        twin = twin.with_(weight_update=PartialRollout())
    return twin


def check_promises(scenario: Scenario) -> None:
    """Assert that the shortcuts the policies' promises enable change nothing.

    Runs ``scenario``, and its plain twin where that differs, with the engine's shortcuts on and
    with every shortcut off (``EngineOptions.plain()``), and compares the event traces. A promise
    that lies -- a ``closed`` that says no while a completion could make the rule admit -- shows
    up as a difference; :class:`~pipesim.testing.InvariantError` names the first, the twin
    where it was the twin that showed it, and the hint whose shortcut makes the difference
    (:mod:`pipesim.testing.hint_blame`: the runs are repeated with one hint hidden at a time).

    The runs are on the slots engine (``pipesim.run``'s), whatever engine the scenario is meant
    for: ``check_promises(sc)`` for a scenario given to ``run_compute`` checks its policies' promises
    with the scenario's own durations, not the cluster's tokens, and a promise only the compute
    engine acts on (a source's ``fixed_work``) is not checked.
    """
    from pipesim.testing.invariants import _need_scenario

    _need_scenario(scenario)
    before = policy_state(scenario)
    _compare(scenario, "", lambda: _state_unchanged(scenario, before))
    twin = plain_twin(scenario)
    if twin != scenario:
        where = " (in the scenario's plain twin: no replicas, timeout or failures)"
        _compare(twin, where, lambda: _state_unchanged(scenario, before))
    _state_unchanged(scenario, before)


def policy_state(scenario: Scenario) -> dict[tuple[str, str], bytes | None]:
    """Each policy attribute, keyed by (policy class, attribute), with its value pickled (None where
    it does not pickle: a lock; a ``WeakKeyDictionary`` holding live runs): what a run must leave
    as it found it. Every attribute is a key, so one a run adds (``object.__setattr__(self, "_n",
    ...)`` on a frozen policy, a ``cached_property``) or removes shows as a change, as does a new
    value of one that pickles. Routing rules are left out (each run routes with its own copy)."""
    import pickle

    state: dict[tuple[str, str], bytes | None] = {}
    for role in ("admission", "weight_update", "batching", "timeout", "failures"):
        policy = getattr(scenario, role)
        for name, value in getattr(policy, "__dict__", {}).items():
            try:
                state[(type(policy).__name__, name)] = pickle.dumps(value)
            except Exception:  # noqa: BLE001 - a value that does not pickle is compared by its presence
                state[(type(policy).__name__, name)] = None
    return state


def _state_unchanged(scenario: Scenario, before: dict[tuple[str, str], bytes | None]) -> None:
    """A policy that changed its own attributes during the runs keeps per-run state on itself: a
    scenario run twice (or a sweep's runs, which share it) then differs from itself, which a single
    check would blame on an unseeded source, or miss where the state only grows. Checked first
    wherever two runs differ (:func:`_compare`), so the state is named, not its symptom."""
    from pipesim.testing.invariants import _fail

    after = policy_state(scenario)
    changed = [
        f"{cls}.{attr}"
        + ("" if (cls, attr) in after else " (removed)")
        + ("" if (cls, attr) in before else " (added)")
        for cls, attr in sorted(before.keys() | after.keys())
        if (cls, attr) not in before or (cls, attr) not in after or before[cls, attr] != after[cls, attr]
    ]
    if changed:
        _fail(
            "policies keep no state between runs",
            f"running the scenario changed {', '.join(changed)}: a policy is shared by every run of "
            "a scenario and of a sweep, so state kept on it carries from one run into the next; keep "
            "per-run state keyed by the run (docs/policies.md, a WeakKeyDictionary from p)",
        )


def _compare(scenario: Scenario, where: str, state_kept: Callable[[], None]) -> None:
    """Run ``scenario`` with the shortcuts and without; where the traces differ, name why.

    ``state_kept`` is asked first (it raises where a policy changed its own attributes): state a
    policy keeps between runs makes every run differ from the one before, which the repeats below
    would otherwise name as an unseeded source."""
    from pipesim.core.seams import EngineOptions
    from pipesim.testing.hint_blame import blame_hints
    from pipesim.testing.invariants import _fail

    fast, plain = run_trace(scenario), run_trace(scenario, EngineOptions.plain())
    if fast == plain and fast[0] != "error":
        return
    state_kept()
    # Before blaming a promise (or the run, where both stopped with one error), repeat both runs
    # as they were: a policy drawing from an unseeded source can repeat one trace by chance (a
    # coin-flip admission rule did, 1 run in 15, and stalled alike both ways now and then), so
    # each side is repeated REPEATS times and any repeat that differs names the policy as
    # nondeterministic; all four agreeing by chance is below 1e-4 for that rule.
    if not _repeats(scenario, fast, None) or not _repeats(scenario, plain, EngineOptions.plain()):
        _fail(
            "runs are deterministic",
            "the same scenario and seed gave two different traces with the same engine options: a "
            f"policy of {policy_names(scenario)} draws from an unseeded source (random, the clock, "
            f"a set's order); draw from a generator seeded from the view's state{where}",
        )
    if fast == plain:  # the same refusal both ways, every time: no promise is at fault, the run is
        _fail("the run completes", f"the scenario's run stops with an error{where}: {fast[1]}")
    if fast[0] == "error" or plain[0] == "error":
        _fail(
            "promises hold",
            f"with the shortcuts the run {_outcome(fast)}; without them it {_outcome(plain)}{where}; "
            f"{blame_hints(scenario, plain, run_trace)}",
        )
    names = ["end time", "episodes", "training steps", "syncs", "updates", "drops"]
    for name, a, b in zip(names, fast, plain, strict=True):
        if a != b:
            detail = _episode_diff(a, b) if name == "episodes" else f"{a!r:.200} vs {b!r:.200}"
            _fail(
                "promises hold",
                f"the shortcuts change the {name} (with vs without){where}: {detail}; "
                f"{blame_hints(scenario, plain, run_trace)}",
            )


EPISODE_COLUMNS: tuple[str, ...] = tuple(f for f in EPISODE_FIELDS if f != "offset_start")
"""The fields of each episode in :func:`pipeline_trace`, in order: every field of an
:class:`~pipesim.core.episode.Episode` (:data:`~pipesim.core.episode.EPISODE_FIELDS`), since a
lying hint can move any of them -- a ``min_items`` that hides a batch policy's discards moves
only ``discarded_s``, when the discard happens -- and the shortcuts must change none. Left out:
``offset_start``, the engine's own paused-time total at the start (read back as NaN once the
records archive an episode); the times it feeds, ``end_s`` and ``work_s``, are compared."""
_READ_EPISODE = attrgetter(*EPISODE_COLUMNS)


def _episode_diff(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> str:
    """The first episode the two traces disagree on, by its fields' names."""
    if len(a) != len(b):
        return f"{len(a)} episodes vs {len(b)}"
    i = next(k for k, (x, y) in enumerate(zip(a, b)) if x != y)
    fields = [f"{n} {x!r} vs {y!r}" for n, x, y in zip(EPISODE_COLUMNS, a[i], b[i]) if x != y]
    return f"episode {a[i][0]}: {', '.join(fields)}"


MAX_ERROR_CHARS = 2000
"""The longest run error :func:`_outcome` quotes whole; a longer one is cut at a word, marked."""


def _outcome(trace: tuple[Any, ...]) -> str:
    """How one run of :func:`_compare` ended, in words: the error it stopped with (in full, up to
    :data:`MAX_ERROR_CHARS`), or when it ended and what it trained -- not the raw trace."""
    if trace[0] == "error":
        text = trace[1]
        if len(text) > MAX_ERROR_CHARS:
            text = text[:MAX_ERROR_CHARS].rsplit(" ", 1)[0] + f" ... ({len(trace[1]):,} characters)"
        return f"stopped with the error: {text}"
    end_s, episodes, train_log, sync_log, _, dropped = trace
    status = EPISODE_COLUMNS.index("status")
    trained = sum(1 for e in episodes if e[status] == "trained")
    return (
        f"ended at t={end_s:g} s, having launched {len(episodes)} episodes and trained {trained} in "
        f"{len(train_log)} steps and {len(sync_log)} syncs ({dropped} dropped)"
    )


REPEATS = 2
"""How many times each of the two differing runs is repeated to tell nondeterminism apart."""


def _repeats(scenario: Scenario, trace: tuple[Any, ...], options: Any) -> bool:
    """Whether ``scenario`` run with ``options`` gives ``trace`` again, REPEATS times."""
    return all(run_trace(scenario, options) == trace for _ in range(REPEATS))


def policy_names(scenario: Scenario) -> str:
    """The classes of the scenario's policies, "A / B / C", the routing rule beside its replicas."""
    slots = ("admission", "weight_update", "batching", "timeout", "failures", "replicas")
    names = []
    for v in (getattr(scenario, k) for k in slots):
        if v is not None:
            routing = getattr(v, "routing", None)
            inner = f"(routing={type(routing).__name__})" if routing is not None else ""
            names.append(type(v).__name__ + inner)
    return " / ".join(names)
