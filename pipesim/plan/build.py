"""What a plan spec's design builds: its engine, trainer, routing, scenario and the designs a
space holds (:func:`candidates`), from a :class:`~pipesim.plan.space.PlanSpec` and a
:class:`~pipesim.plan.space.Design`. Split from :mod:`pipesim.plan.space`, which keeps the
spec's types and their validation; the placements a design may use and the listed values none
can (:func:`placements`, :class:`TrainerMemoryWarning`, re-exported here) are
:mod:`pipesim.plan.drops`."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pipesim
from pipesim.compute import EngineConfig, TrainerConfig
from pipesim.compute.profiles import profile
from pipesim.compute.trainer import check_expert_parallel
from pipesim.core.errors import MAX_DURATION_POOL
from pipesim.plan.checks import MAX_DESIGNS, PlanError
from pipesim.plan.context import context_key as context_key  # re-exported
from pipesim.plan.context import context_problem
from pipesim.plan.drops import SpaceDropWarning, check_values, drop_note, tight_words
from pipesim.plan.drops import TrainerMemoryWarning as TrainerMemoryWarning  # re-exported
from pipesim.plan.drops import placements as placements  # re-exported (tests, rungs import it here)
from pipesim.plan.pools import check_pool, pool_tasks, worst_pool
from pipesim.plan.pools import max_steps as max_steps  # re-exported (tests import it from here)
from pipesim.plan.space import BATCH_KNOBS, Design, PlanSpec

CLUSTER_OPTIONS = ("episodes_per_replica",)
"""The run spec's ``[model]`` options (:data:`pipesim.plan.runspec_checks.ENGINE_KEYS`) that set the
:class:`~pipesim.compute.cluster.Cluster`, not the engine: ``episodes_per_replica`` is its
``slots_per_replica`` (``run_compute``'s; default ``max_num_seqs``)."""


def engine_config(spec: PlanSpec, tp: int, options: Sequence[tuple[str, Any]] = ()) -> EngineConfig:
    """The engine replica of ``spec`` at TP degree ``tp`` (its calibrated overhead, if any), with
    ``options`` set: a run spec's engine options, ``(name, value)`` pairs of ``[model]``'s keys a
    plan spec has not (:data:`pipesim.plan.runspec_checks.ENGINE_KEYS`; those of
    :data:`CLUSTER_OPTIONS` are the cluster's, :func:`design_cluster`). Under a run spec's
    ``kv_policy = "reserve"`` the plan spec's default ``tool_kv`` (``keep``) is left to the engine's
    default, ``drop`` there (a ``model.tool_kv = "keep"`` the spec gives is refused by
    :func:`~pipesim.plan.runspec_checks.read_engine`, naming both keys)."""
    extra: dict[str, Any] = {k: v for k, v in options if k not in CLUSTER_OPTIONS}
    tool_kv: str | None = spec.tool_kv
    if extra.get("kv_policy") == "reserve" and tool_kv == "keep":
        tool_kv = None
    if spec.iteration_overhead_s is not None:  # calibrated (pipesim calibrate); else EngineConfig's
        extra["iteration_overhead_s"] = spec.iteration_overhead_s
    return EngineConfig(
        **extra,
        model=spec.model,
        gpu=spec.gpu,
        tp=tp,
        max_model_len=spec.max_model_len,
        max_num_seqs=spec.max_num_seqs,
        gpu_memory_utilization=spec.gpu_memory_utilization,
        share_group_prefix=spec.share_group_prefix,
        tool_kv=tool_kv,
        weight_dtype=spec.weight_dtype,
        kv_dtype=spec.kv_dtype,
    )


def design_cluster(
    spec: PlanSpec, d: Design, options: Sequence[tuple[str, Any]] = ()
) -> tuple[EngineConfig, Any]:
    """Design ``d``'s engine settings and :class:`~pipesim.compute.cluster.Cluster`, as a plan's
    run, ``pipesim run`` of a run spec (with its engine ``options``, :func:`engine_config`; a run
    spec's ``model.episodes_per_replica`` is the cluster's ``slots_per_replica``, as a plan spec's
    is, :attr:`PlanSpec.episodes_per_replica`) and calibrate's simulated sync all build them.
    Slots past what one run holds on this design's replicas: PlanError naming the key."""
    from pipesim.compute.cluster import Cluster
    from pipesim.core.errors import FieldError

    eng = engine_config(spec, d.tp, options)
    per = dict(options).get("episodes_per_replica", spec.episodes_per_replica)
    try:
        cluster = Cluster(
            engine=eng,
            n_gpus=spec.n_gpus,
            trainer_gpus=d.trainer_gpus,
            env_workers=spec.env_workers,
            slots_per_replica=per,
        )
    except FieldError as e:  # too many slots on this design's replicas: the spec's key named
        if e.field != "slots_per_replica":
            raise
        said = str(e).removeprefix("slots_per_replica").lstrip(": ")  # "N on R replicas is ..."
        msg = f"model.episodes_per_replica {said} (design {d.label(spec.n_gpus)}); fewer per replica"
        raise PlanError(msg, "model.episodes_per_replica") from None
    return eng, cluster


def sync_seconds(spec: PlanSpec, d: Design, cluster: Any) -> float:
    """The weight sync a run of design ``d`` charges: ``spec``'s ``sync_time_s`` where given, else
    the cluster's own from the design's trainer (:meth:`~pipesim.compute.cluster.Cluster.sync_time_s`
    of :func:`trainer_config`, whose framework profile gathers the weights: a Megatron trainer
    gathers over NVLink where FSDP gathers over the network), times ``sync_scale``. Without the
    trainer the cluster fell back to the default profile, so a ``megatron-moe`` spec's sync cost
    7.7 s where ``run_compute`` with the same trainer charged 4.4."""
    base = cluster.sync_time_s(trainer_config(spec, d)) if spec.sync_time_s is None else spec.sync_time_s
    return float(base * spec.sync_scale)


def routing(spec: PlanSpec) -> Any:
    """The replicas' routing rule: a group's samples together when the engines share prefixes."""
    if spec.share_group_prefix and spec.has_groups:
        return pipesim.GroupAffinity(spec.workload.samples_per_prompt)
    return None


def trainer_config(spec: PlanSpec, design: Design) -> TrainerConfig:
    """The trainer of ``design``: every GPU when colocated, else its trainer GPUs; ``spec``'s
    profile (or the one-MFU model at ``mfu``), batch knobs and dealing (``model.balance``)."""
    n = spec.n_gpus if design.colocated else design.trainer_gpus
    mfu = spec.mfu if spec.framework is None else None  # a profile holds its own efficiencies
    prof = spec.framework
    if spec.balance is not None:  # the dealing on the profile (the one-MFU one at mfu without a framework)
        one_mfu = replace(profile("ideal"), fwd_bwd_efficiency=spec.mfu, fwd_efficiency=spec.mfu)
        base = prof if prof is not None else one_mfu
        prof, mfu = replace(base, balance=spec.balance), None
    return TrainerConfig(
        model=spec.model,
        gpu=spec.gpu,
        n_gpus=n,
        mfu=mfu,
        step_overhead_s=spec.step_overhead_s,
        profile=prof,
        recompute_old_logp=spec.recompute_old_logp,
        reference_model=spec.reference_model,
        # the batch knobs (BATCH_KNOBS) by name, so each keeps its own type for the checker
        ppo_mini_batch_samples=spec.ppo_mini_batch_samples,
        micro_batch_tokens=spec.micro_batch_tokens,
        log_prob_micro_batch_tokens=spec.log_prob_micro_batch_tokens,
        sequence_parallel=spec.sequence_parallel,
        # a synchronous colocated step hands its batch over in prompt order (verl's
        # generate_sequences); an asynchronous trainer takes groups as they complete
        batch_order="submission" if design.colocated and design.eta == 0 else "arrival",
    )


def batch_knobs(spec: PlanSpec) -> dict[str, int | None]:
    """The trainer's batch knobs of ``spec`` as :class:`~pipesim.compute.TrainerConfig` names them."""
    return {k: getattr(spec, k) for k in BATCH_KNOBS}


def check_fits(spec: PlanSpec) -> dict[int, EngineConfig]:
    """The engine of each TP degree the model fits at; PlanError before any search when none does.

    A sample longer than the context is the workload's problem, not the GPU's: it is reported as
    such (:func:`context_problem`), with the sum that gives the longest sample. A ``space.tp`` or
    ``space.placement`` no design could use is refused first, naming the key and the value
    (:func:`pipesim.plan.drops.check_values`: ``space.tp = [3]`` for 28 heads was "does not fit")."""
    return _checked_fits(spec)[0]


def _checked_fits(spec: PlanSpec) -> tuple[dict[int, EngineConfig], dict[int, str]]:
    """:func:`check_fits`, with the engine's reason for each degree it leaves out
    (:func:`fitting_engines`), which :func:`candidates` says: each engine built once."""
    check_values(spec)  # a TP degree or placement no design could use: refused by its key
    engines, reasons = fitting_engines(spec)
    if not engines:
        # the field is the TP list a user widens; the widest degree's reason is the nearest miss
        tps = sorted(set(spec.space.tp))
        where = " at" if len(tps) == 1 else " at any of them; at"
        raise PlanError(
            f"space.tp {tps}: {spec.model.name} does not fit on {spec.gpu.name}{where} tp={tps[-1]}: "
            f"{reasons[tps[-1]]}",
            "space.tp",
        )
    problem = context_problem(spec, next(iter(engines.values())).context_len)
    if problem is not None:
        raise PlanError(problem)
    if (prof := spec.framework) is not None:  # a profile the model cannot use at any placement:
        try:  # said as such, not as 'no trainer holds the model' once every placement is skipped
            check_expert_parallel(spec.model, prof.tp * prof.pp * prof.ep, prof)
        except ValueError as e:
            raise PlanError(f"model.framework: {e}", "model.framework") from None
    try:
        TrainerConfig(model=spec.model, gpu=spec.gpu, n_gpus=spec.n_gpus, mfu=spec.mfu)
    except ValueError as e:
        raise PlanError(f"{spec.model.name} cannot be trained on the whole cluster: {e}") from None
    return engines, reasons


def trainer_memory_note(spec: PlanSpec, d: Design) -> str | None:
    """The line ``pipesim run`` prints on stderr for a run spec whose trainer :func:`placements`
    warns of in a plan (state and a micro-batch's activations overfill a GPU); None: it fits."""
    cfg = trainer_config(spec, d)
    if cfg.memory_short_bytes <= 0:
        return None
    where = "design.placement" if d.trainer_gpus else "cluster.n_gpus, colocated"
    advice = f"it may not run: more trainer GPUs ({where}) or a lower model.micro_batch_tokens"
    return f"pipesim: warning: {tight_words(spec, [cfg], advice)}"


def candidates(spec: PlanSpec) -> list[Design]:
    """Every valid design of the space, sorted (PlanError naming ``space`` first when the space
    holds more designs than a plan enumerates: :func:`check_space_size`). Listed values no design
    uses are said once (:func:`pipesim.plan.drops.drop_note`)."""
    check_space_size(spec)
    engines, reasons = _checked_fits(spec)
    sp = spec.space
    factors = sp.oversample if spec.has_groups else (1.0,)
    out = []
    for tp in sorted(engines):
        for t in placements(spec, tp):
            for eta in sp.eta:
                for u in sp.update:
                    for k in sp.sync_every:
                        for f in factors:
                            out.append(Design(t, tp, eta, u, k, float(f)))
    note = drop_note(spec, engines, reasons)
    if out and note is not None:  # an empty space is an error that says the same (no_candidates)
        warnings.warn(note, SpaceDropWarning, stacklevel=2)
    return sorted(set(out))


def fitting_engines(spec: PlanSpec) -> tuple[dict[int, EngineConfig], dict[int, str]]:
    """The engine of each ``space.tp`` degree the model fits at, and the engine's reason for each
    it does not (its weights, or no KV for one sequence, on the GPU)."""
    engines, reasons = {}, {}
    for tp in spec.space.tp:
        try:
            engines[tp] = engine_config(spec, tp)
        except ValueError as e:
            reasons[tp] = str(e)
    return engines, reasons


def space_size(spec: PlanSpec) -> int:
    """How many designs :func:`candidates` enumerates, counted from the axes without building one
    (the placements of each ``tp`` the model fits at, times :func:`_per_place`; its PlanErrors
    first, in its order): ``pipesim plan`` says the count before the seconds enumerating takes.
    Its tight-trainer warning is left to candidates."""
    check_space_size(spec)
    engines = check_fits(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrainerMemoryWarning)
        places = sum(len(set(placements(spec, tp))) for tp in engines)
    return places * _per_place(spec)


def _per_place(spec: PlanSpec) -> int:
    """The designs of one placement and tp: the distinct values of the other axes (over-sampling
    only with groups)."""
    sp = spec.space
    factors = len({float(f) for f in sp.oversample}) if spec.has_groups else 1
    return len(set(sp.eta)) * len(set(sp.update)) * len(set(sp.sync_every)) * factors


def valid(spec: PlanSpec, d: Design, engines: dict[int, EngineConfig]) -> bool:
    return d.tp in engines and d.trainer_gpus in placements(spec, d.tp)


def update_policy(spec: PlanSpec, d: Design) -> Any:
    inner: Any = {
        "drain": pipesim.Drain,
        "partial": pipesim.PartialRollout,
        "abort_reprefill": pipesim.AbortReprefill,
        "inflight": lambda: pipesim.InFlightUpdate(load_time_s=spec.inflight_load_time_s),
        "abort": lambda: pipesim.AbortRestart(restart=False),
    }[d.update]()
    return pipesim.SyncEveryK(k=d.sync_every, inner=inner) if d.sync_every > 1 else inner


def scenario(
    spec: PlanSpec, d: Design, steps: int, seed: int = 0, n_slots: int = 0, steps_key: str = "search.steps"
) -> pipesim.Scenario:
    """The :class:`pipesim.Scenario` of design ``d`` (its cluster fields are set by ``run_compute``).

    ``n_slots`` is the engines' sequences (replicas x ``model.max_num_seqs``, or a run spec's
    ``model.episodes_per_replica``: ``Cluster.n_slots``; 0: the pipeline's default), which the
    task pool holds beside the batches: a pool past
    :data:`~pipesim.core.errors.MAX_DURATION_POOL` is refused here, a PlanError naming ``steps_key``
    (``run.steps`` for a run spec) with the most steps the design may run (:func:`pool_tasks`).
    Before, the Scenario refused it with the pipeline's default 64 slots and its own field names
    (``pool_size``, ``n_slots``), or ``run_compute`` did once the engines' slots were set."""
    # abort drops what it interrupts: the count throttle counts starts, so each dropped sample would
    # use up its budget for good (the run turns synchronous); OverSample subtracts drops, and at a
    # factor of 1 it is the count throttle otherwise (slime's abort path pairs them the same way)
    over = d.oversample > 1 or d.update == "abort"
    admission: Any = pipesim.OverSample(factor=d.oversample) if over else pipesim.CountThrottle()
    cfg = pipesim.PipelineConfig(batch_size=spec.batch_size, steps=steps, max_staleness=d.eta)
    # the default pool holds the pipeline's slots (its default 64 until run_compute sets the engines')
    check_pool(spec, d, steps, n_slots or (0 if over else cfg.n_slots), steps_key)
    pool = pool_tasks(spec, d, steps, n_slots) if over else None
    return pipesim.Scenario(
        pipeline=cfg,
        admission=admission,
        weight_update=update_policy(spec, d),
        seed=seed,
        pool_size=pool,
        pool_draw="stable",  # never drawn (run_compute's tasks are tokens), so never one whole draw
        name=d.label(spec.n_gpus),
    )


def check_run_pool(spec: PlanSpec, d: Design, steps: int, per_replica: int | None = None) -> None:
    """:func:`check_pool` of a run spec's design at ``run.steps``, its replicas counted before any
    engine is built (a placement leaving no whole replica: ``check_design`` names it), each with
    ``per_replica`` slots (``model.episodes_per_replica``; None: the spec's, else ``model.max_num_seqs``)."""
    rollout = spec.n_gpus - d.trainer_gpus
    per_replica = spec.episodes_per_replica if per_replica is None else per_replica
    per = spec.max_num_seqs if per_replica is None else per_replica
    if rollout > 0 and rollout % d.tp == 0:
        replicas = rollout // d.tp
        least = pool_tasks(spec, d, 1, replicas * per)
        if per_replica is not None and least > MAX_DURATION_POOL:  # the slots, not the steps
            raise PlanError(
                f"model.episodes_per_replica ({per:,}) x {replicas:,} replicas: a run of even one step "
                f"draws a task pool of {least:,} tasks (the engines' slots and the batches), more than "
                f"the {MAX_DURATION_POOL:,} a run may draw; fewer episodes per replica",
                "model.episodes_per_replica",
            )
        check_pool(spec, d, steps, replicas * per, "run.steps")


def check_plan_pool(spec: PlanSpec, designs: list[Design], horizon: int) -> None:
    """PlanError naming ``search.steps`` where a run of ``designs`` (the plan's candidates and its
    baseline) ``horizon x search.steps`` steps long, verification's length, draws a pool a run
    refuses (:func:`check_pool`): checked before the search's first run, not when its pick is
    verified hours later. Like :func:`check_space_size` it checks a plan, never a run spec."""
    steps = horizon * spec.steps
    # memoised by (tp, trainer_gpus) and the pool's inputs (pools.worst_pool); the slots are
    # model.episodes_per_replica, else max_num_seqs, per replica
    found = worst_pool(spec, designs, steps, lambda d: design_cluster(spec, d)[1].n_slots)
    if found is None:
        return
    worst, top, n_slots = found
    if top < horizon:  # not one plan step fits: the engines' places are the bulk (check_pool says)
        check_pool(spec, worst, steps, n_slots, "search.steps")
    raise PlanError(
        f"search.steps ({spec.steps:,}): verifying a pick runs it {horizon}x as long ({steps:,} steps), "
        f"and design {worst.label(spec.n_gpus)} would then draw more than the {MAX_DURATION_POOL:,} "
        f"tasks a run may; at most {top // horizon:,} steps, or a smaller batch "
        "(workload.prompts_per_step x workload.samples_per_prompt)",
        "search.steps",
    )


def check_space_size(spec: PlanSpec) -> None:
    """The space holds at most :data:`~pipesim.plan.checks.MAX_DESIGNS` designs, counted from its
    axes' lengths before any is built (the placements per ``tp`` as
    :func:`pipesim.plan.drops.placements` allows them, before the fit checks): a plan enumerates
    every design before its first run, and 4,096 GPUs x 1,025 etas x 4 tps made 33 million,
    gigabytes and minutes before anything ran. :func:`pipesim.plan.build.candidates` checks it, not
    a spec: a run spec's default space is never searched (a run on 65,536 GPUs is no plan)."""
    sp, n = spec.space, spec.n_gpus
    lo = max(spec.constraints.min_trainer_gpus, 1)
    chosen = None if sp.placement is None else set(sp.placement)
    places = 0
    for tp in set(sp.tp):
        split = max((n - lo) // tp, 0)  # trainer counts t in [lo, n - tp] leaving a multiple of tp
        count = split + (n >= spec.constraints.min_trainer_gpus)
        places += count if chosen is None else min(count, len(chosen))
    total = places * _per_place(spec)
    if total > MAX_DESIGNS:
        factors = len(set(sp.oversample)) if spec.has_groups else 1
        raise PlanError(
            f"space: about {total:,} designs ({places:,} placements over space.tp x {len(set(sp.eta))} "
            f"eta x {len(set(sp.update))} update x {len(set(sp.sync_every))} sync_every x {factors} "
            f"oversample), more than the {MAX_DESIGNS:,} a plan enumerates; shorten the lists or give "
            "space.placement",
            "space",
        )
