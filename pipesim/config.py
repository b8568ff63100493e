"""Configuration: frozen dataclasses with units in the field names, validated at construction.

A :class:`Scenario` composes a :class:`PipelineConfig` (sizes and times), a duration model and the
policy objects that make the scheduling decisions. Everything is immutable, so a scenario can be
hashed, pickled to a sweep worker and printed into a report without surprises. ``with_`` returns
a copy with some fields replaced, routing ``pipeline`` fields automatically, which is what sweeps
and the CLI's ``--set key=value`` use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pipesim.core.errors import MAX_DURATION_POOL, MAX_SEED, shown
from pipesim.core.errors import check_int as check_int  # re-exported: io.api
from pipesim.core.pipeline_config import PipelineConfig as PipelineConfig  # re-exported
from pipesim.core.pipeline_config import check_time as check_time  # re-exported: io.api
from pipesim.core.validate import FieldError, across, protocol_lacks, refuse, within
from pipesim.policies.base import (
    Admission,
    BatchPolicy,
    CountThrottle,
    OldestFinishedFirst,
    PartialRollout,
    UnreadStaleness,
    WeightUpdate,
    unread_staleness,
)
from pipesim.policies.faults import FailurePolicy, Timeout
from pipesim.policies.replicas import Replicas
from pipesim.workload.durations import AgentDurations, DurationModel, check_chapter_seed
from pipesim.workload.pool_bound import FILTER_POOL_MARGIN as FILTER_POOL_MARGIN  # re-exported
from pipesim.workload.pool_bound import pool_tasks, pool_too_big
from pipesim.workload.pools import check_whole_draw

MAX_NAME_CHARS = 200
"""The longest scenario name: it labels tables, reports and saved runs."""


def _check_name(name: object) -> None:
    """A scenario's name: a non-empty printable string of at most :data:`MAX_NAME_CHARS`
    characters (a list, a number or None was kept and saved, then refused by the loader)."""
    if not isinstance(name, str):
        raise refuse("name", f"must be a string, got {type(name).__name__} {shown(name)}")
    if not name.strip() or len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise refuse(
            "name",
            f"must be a non-empty printable string of at most {MAX_NAME_CHARS} characters "
            f"(no newline or control character), got {shown(name)}",
        )


def check_policy(name: str, value: Any, protocol: type, what: str) -> None:
    """Raise a FieldError for ``name`` unless ``value`` is an instance that fits ``protocol``.

    Catches the two mistakes a user makes: a class where an instance belongs (``Drain``, not
    ``Drain()``), and a policy in the wrong slot (``admission=Drain()``).
    """
    if value is None:
        raise refuse(name, f"must be {what}, got None")
    if isinstance(value, type):
        raise refuse(
            name, f"must be {what} instance, got the class {value.__name__}; call it: {value.__name__}()"
        )
    if not isinstance(value, protocol):
        missing = sorted(protocol_lacks(value, protocol))
        raise refuse(
            name,
            f"must be {what} (with {', '.join(_protocol_members(protocol))}), got "
            f"{type(value).__name__}, which lacks {', '.join(missing) or 'them'}",
        )


def _protocol_members(protocol: type) -> list[str]:
    return sorted(n for n, v in vars(protocol).items() if not n.startswith("_") and callable(v))


_POLICY_SLOTS: tuple[tuple[str, type, str], ...] = (
    ("durations", DurationModel, "a duration model"),
    ("admission", Admission, "an admission policy"),
    ("weight_update", WeightUpdate, "a weight-update policy"),
    ("batching", BatchPolicy, "a batch policy"),
)


_BATCH_CHECKED = ("admission", "weight_update", "batching")
"""The policy slots whose ``check_batch_size(batch_size)``, where the policy has one, a scenario
calls at construction, as it calls the weight update's ``check_replicas``: a rule that takes whole
prompt groups (``WholeGroups``, ROLL's ``RollReplayBuffer``, ``RollGroupQueue`` and
``RollGroupExpiry``) refuses a ``batch_size`` that is not whole groups, naming its own ``samples_per_group``
(``batching.samples_per_group`` here, and the file where one was loaded). It was refused by the
rule mid-run, naming neither the policy's field nor the file."""


def filter_rate_of(batching: object) -> float:
    """The share of groups ``batching`` filters (and relaunches): a
    :class:`~pipesim.policies.groups.WholeGroups`'s ``filter_rate``, else 0."""
    from pipesim.policies.groups import WholeGroups

    return float(batching.filter_rate) if isinstance(batching, WholeGroups) else 0.0


POOL_DRAWS = ("whole", "stable")
"""How a set ``pool_size`` is drawn (:attr:`Scenario.pool_draw`)."""


@dataclass(frozen=True)
class Scenario:
    """A complete, runnable description of one pipeline design.

    ``pool_size`` is the number of durations drawn up front (default: enough for the count
    throttle, ``(steps + max_staleness + 1) * batch_size + n_slots``, and room for the groups a
    filtering ``WholeGroups`` relaunches: :meth:`pool_for`). Policies that relaunch
    work (restarts, retries, over-sampling) may need a larger pool; the run says so if it runs dry.
    A set pool below ``steps x batch_size`` is refused by :meth:`check_pool_size` before a run.

    ``pool_draw`` says how a set ``pool_size`` is drawn: ``"whole"``, one draw of that size (the
    chapter's ``agent_episode_durations(n, generator)``, whose first durations depend on ``n``), or
    ``"stable"``, in the default pool's fixed chunks (:func:`pipesim.workload.pools.draw_stable`), so
    the first durations are the same whatever the size: scenarios whose pool follows their knobs
    (the system presets') then run on the same episodes at every knob value. The default pool is
    always drawn stable. A whole draw past ``MAX_WHOLE_DRAW_CELLS`` turn cells (``pool_size x
    durations.max_turns``) is refused here, a CrossFieldError naming ``pool_size``
    (:func:`~pipesim.workload.pools.check_whole_draw`), and so is a default pool (``pool_size``
    unset) past ``MAX_DURATION_POOL``, naming the field of its largest term
    (:func:`~pipesim.workload.pool_bound.pool_too_big`).
    """

    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    durations: DurationModel = field(default_factory=AgentDurations)
    admission: Admission = field(default_factory=CountThrottle)
    weight_update: WeightUpdate = field(default_factory=PartialRollout)
    batching: BatchPolicy = field(default_factory=OldestFinishedFirst)
    seed: int = 0
    pool_size: int | None = None
    name: str = "scenario"
    timeout: Timeout | None = None
    """A cap on each episode's generation time (``pipesim.policies.faults.Timeout``), or None."""
    failures: FailurePolicy | None = None
    """Environment-worker failures (``DropFailed`` / ``RetryFailed`` / ``RequeueFailed``), or None."""
    replicas: Replicas | None = None
    """Several engine replicas sharing ``n_slots`` and a routing rule, or None for one engine."""
    pool_draw: str = "whole"
    """How a set ``pool_size`` is drawn: ``"whole"`` (one draw) or ``"stable"`` (see above)."""

    def __post_init__(self) -> None:
        if not isinstance(self.pipeline, PipelineConfig):
            raise refuse("pipeline", f"must be a PipelineConfig, got {type(self.pipeline).__name__}")
        check_int("seed", self.seed, 0, MAX_SEED - 1, "the largest seed torch's generator takes")
        if isinstance(self.durations, AgentDurations) and self.durations.draws == "chapter":
            check_chapter_seed(self.seed)
        _check_name(self.name)
        if self.pool_draw not in POOL_DRAWS:
            raise refuse("pool_draw", f"must be one of {', '.join(POOL_DRAWS)}, got {shown(self.pool_draw)}")
        if self.pool_size is not None:
            check_int("pool_size", self.pool_size, 1, MAX_DURATION_POOL, "a pool larger is out of memory")
        elif self.default_pool_size > MAX_DURATION_POOL:  # beside the fields that size it
            raise pool_too_big(self, filter_rate_of(self.batching))
        for name, protocol, what in _POLICY_SLOTS:
            check_policy(name, getattr(self, name), protocol, what)
        if self.pool_size is not None and self.pool_draw == "whole":  # [pool_size, max_turns] at once
            check_whole_draw(self.durations, self.pool_size)
        for name in ("timeout", "failures", "replicas"):
            value = getattr(self, name)
            if isinstance(value, type):
                raise refuse(
                    name,
                    f"must be an instance or None, got the class {value.__name__}; "
                    f"call it: {value.__name__}(...)",
                )
        if self.timeout is not None and not isinstance(self.timeout, Timeout):
            raise refuse(
                "timeout", f"must be a pipesim.policies.faults.Timeout or None, got {shown(self.timeout)}"
            )
        if self.failures is not None and not isinstance(self.failures, FailurePolicy):
            raise refuse("failures", f"must be a failure policy or None, got {shown(self.failures)}")
        if self.replicas is not None:
            if not isinstance(self.replicas, Replicas):
                raise refuse(
                    "replicas",
                    f"must be a pipesim.policies.replicas.Replicas or None, got {shown(self.replicas)}",
                )
            with across("pipeline"):  # the field to change is the pipeline's n_slots
                self.replicas.slots_per_replica(self.pipeline.n_slots)  # validates n_slots >= n_replicas
        check = getattr(self.weight_update, "check_replicas", None)  # PerReplicaSync's times per replica
        if callable(check) and self.replicas is not None:  # none set: a compute run's cluster sets them
            with across("weight_update"):
                check(self.replicas.n_replicas)
        for role in _BATCH_CHECKED:  # a rule of whole groups: the batch must be whole groups
            check = getattr(getattr(self, role), "check_batch_size", None)
            if callable(check):
                with across(role):
                    check(self.pipeline.batch_size)
        if why := unread_staleness(self):  # a label the run would not honour (sweeps, files, --set)
            raise UnreadStaleness(why)

    def check_pool_size(self) -> None:
        """Refuse, naming ``pool_size``, a set pool below :attr:`min_pool_size`: its run would stop
        part-way with the pool exhausted for certain. :func:`pipesim.run` asks before it draws the
        pool (it ran to the pool's end and raised a PipelineError naming no field); a sweep asks per
        cell, so such a cell fails as a row, not the whole grid. Construction does not refuse it:
        ``with_(steps=...)`` of a design whose pool is set, a grid over ``steps`` and ``--set``
        pairs in either order build such scenarios on the way to a valid one. A pool at or above the
        bound may still run dry where the run launches more than it trains (policies and draws
        decide); the run's PipelineError then names the pool_size set."""
        need = self.min_pool_size
        if self.pool_size is not None and self.pool_size < need:
            p, default = self.pipeline, self.default_pool_size
            if need > MAX_DURATION_POOL:  # no pool_size would do: say so, not a size refused next
                fix = (
                    f"no pool can: a pool holds at most {MAX_DURATION_POOL:,} tasks, so fewer steps "
                    "or a smaller batch"
                )
            elif default > MAX_DURATION_POOL:
                fix = (
                    f"it needs at least {need:,}, and more where it launches more than it trains (a "
                    f"pool holds at most {MAX_DURATION_POOL:,}, below this pipeline's default "
                    f"{default:,}: fewer steps if the run runs dry)"
                )
            else:
                fix = (
                    f"it needs at least {need:,}, and more where it launches more than it trains "
                    f"(pool_size=None draws {default:,}, which covers a run that trains what it "
                    "launches; designs that drop or relaunch work need more)"
                )
            raise FieldError(
                f"pool_size ({self.pool_size:,}) holds fewer tasks than the run trains (steps "
                f"{p.steps:,} x batch_size {p.batch_size:,} = {need:,}, each a task of its own), so the "
                f"run would stop part-way: {fix}",
                "pool_size",
            )

    @property
    def min_pool_size(self) -> int:
        """The fewest tasks any run of this scenario draws, whatever its policies: ``steps x
        batch_size`` (each step trains ``batch_size`` episodes, each a task of its own; a relaunch
        reuses the task of an episode that was not trained): a set ``pool_size`` below it is refused
        by :meth:`check_pool_size`."""
        p = self.pipeline
        return p.steps * p.batch_size

    @property
    def needs_lifecycle(self) -> bool:
        """Whether launches need per-episode draws (timeouts or failures)."""
        return self.timeout is not None or self.failures is not None

    @property
    def default_pool_size(self) -> int:
        """The pool a scenario that sets no ``pool_size`` draws: :meth:`pool_for` its batching."""
        return self.pool_for(self.batching)

    def pool_for(self, batching: object) -> int:
        """The default pool under ``batching``: ``(steps + max_staleness + 1) x batch_size +
        n_slots``, what the count throttle launches when every episode is trained; for a
        :class:`~pipesim.policies.groups.WholeGroups` that filters a share ``r`` of its groups (and
        relaunches them), :data:`FILTER_POOL_MARGIN` times that over ``1 - r``, plus a batch. The
        compute engine's ``run_compute(groups=...)`` passes its own group policy."""
        p = self.pipeline
        return pool_tasks(p.steps, p.max_staleness, p.batch_size, p.n_slots, filter_rate_of(batching))

    def with_(self, **changes: Any) -> Scenario:
        """Copy with fields replaced; keys of :class:`PipelineConfig` go to ``pipeline``.

        A ``max_staleness`` that no policy reads (the admission rule has its own bound: verl's,
        ROLL's, PipelineRL's...) is refused, here as at construction, naming that rule and its
        knob: sweeps and ``--set`` change scenarios here, and such a change ran the same design
        under a new label.
        """
        pipe_fields = {f.name for f in dataclasses.fields(PipelineConfig)}
        own_fields = {f.name for f in dataclasses.fields(Scenario)}
        pipe = {k: v for k, v in changes.items() if k in pipe_fields}
        own = {k: v for k, v in changes.items() if k in own_fields}
        unknown = set(changes) - pipe_fields - own_fields
        if unknown:
            valid = sorted(pipe_fields | own_fields)
            dotted = next((k for k in sorted(unknown) if "." in k), None)
            hint = (  # the command line's --set durations.tool_median_s=3 is no with_ keyword
                f"; a nested field is given with its object: {dotted.split('.')[0]}="
                f"dataclasses.replace(scenario.{dotted.split('.')[0]}, {dotted.split('.', 1)[1]}=...)"
                if dotted is not None
                else ""
            )
            said = f"unknown scenario field(s) {sorted(unknown)}; valid fields: {valid}{hint}"
            raise FieldError(said, sorted(unknown)[0])
        if pipe:  # onto the pipeline given with them, if one is, else this scenario's
            base = own.get("pipeline", self.pipeline)
            if not isinstance(base, PipelineConfig):
                raise refuse("pipeline", f"must be a PipelineConfig, got {shown(base)}")
            with within("pipeline"):
                own["pipeline"] = dataclasses.replace(base, **pipe)
        return dataclasses.replace(self, **own)

    # A notebook shows a scenario as a table: ``_repr_html_`` is attached by the io layer
    # (:func:`pipesim.io.html.attach_views`, called when ``pipesim`` is imported), so config never
    # imports io.
