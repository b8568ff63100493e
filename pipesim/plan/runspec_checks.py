"""What a run spec's own tables must hold, checked before its plan spec is built
(:mod:`pipesim.plan.runspec`, ``docs/runspec.md``).

A run spec is a plan spec's ``[cluster]``, ``[model]`` and ``[workload]`` plus what only a run
spec has: ``kind = "compute"``, one ``[design]`` and an optional ``[run]``. Those are checked here,
each error one line naming the run spec's key (``design.tp``, ``run.steps``), never the plan-spec
key a value was read into: ``[run]``'s steps, seed and sync times travel to the plan spec's
``[search]``, and :func:`as_run_key` names them back (``calibration.values.sync_time_s`` where the
calibration set the sync). :func:`check_design` asks whether the design fits the cluster (engine
GPUs left, the model fits at ``tp``, ``sequence_parallel`` divides the trainer) once the plan spec
exists. ``pipesim plan RUN.toml`` runs the same checks, so a typo is refused rather than ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipesim.compute.engine_config import KV_POLICIES
from pipesim.compute.knobs import MAX_BATCHED_TOKENS
from pipesim.core.errors import MAX_POOL_TASKS, MAX_SLOTS, shown
from pipesim.core.validate import key_shown
from pipesim.plan.build import context_key, context_problem, engine_config, trainer_config
from pipesim.plan.checks import (
    MAX_ETA,
    MAX_GPUS,
    MAX_OVERSAMPLE,
    MAX_SIM_SEED,
    MAX_SYNC_EVERY,
    PlanError,
    Table,
    did_you_mean,
)
from pipesim.plan.runspec_calibration import MAX_STEP_TIME_S
from pipesim.plan.space import UPDATES, Design, PlanSpec

__all__ = [
    "as_run_key",
    "check_design",
    "check_tables",
    "missing_kind",
    "not_a_spec_file",
    "read_design",
    "read_engine",
    "run_table",
]


def read_engine(data: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """``[model]``'s engine options (:data:`ENGINE_KEYS`) as ``(name, value)`` pairs, each checked
    under its ``model.KEY`` name: ``max_num_batched_tokens`` an integer of tokens in [1, 2^24],
    ``enforce_eager`` and ``disable_custom_all_reduce`` booleans, ``kv_policy`` one of
    :data:`~pipesim.compute.engine_config.KV_POLICIES` (``reserve`` with a ``model.tool_kv =
    "keep"`` refused: a reserving engine keeps no KV through a tool call), ``episodes_per_replica``
    an integer in [1, 2^24]."""
    model = data.get("model")
    if not isinstance(model, Mapping):
        return ()
    t = Table("model", {k: model[k] for k in ENGINE_KEYS if k in model}, ENGINE_KEYS)
    out: list[tuple[str, Any]] = []
    if "max_num_batched_tokens" in t:
        out.append(
            ("max_num_batched_tokens", t.integer("max_num_batched_tokens", lo=1, hi=MAX_BATCHED_TOKENS))
        )
    for k in ("enforce_eager", "disable_custom_all_reduce"):
        if k in t:
            out.append((k, t.flag(k)))
    if "kv_policy" in t:
        policy = t.string("kv_policy")
        if policy not in KV_POLICIES:
            raise PlanError(
                f"model.kv_policy: unknown {shown(policy)}{did_you_mean(policy, KV_POLICIES)} "
                f"(choose from {list(KV_POLICIES)})",
                "model.kv_policy",
            )
        if policy == "reserve" and model.get("tool_kv") == "keep":
            raise PlanError(
                'model.tool_kv = "keep" needs model.kv_policy = "preempt": under "reserve" a '
                "sequence's KV is not kept through a tool call (it ran as drop); set "
                'model.tool_kv = "drop" or model.kv_policy = "preempt"',
                "model.tool_kv",
            )
        out.append(("kv_policy", policy))
    if "episodes_per_replica" in t:
        out.append(("episodes_per_replica", t.integer("episodes_per_replica", lo=1, hi=MAX_SLOTS)))
    return tuple(out)


KIND = "compute"
PLAN_TABLES = ("cluster", "model", "workload")
PLANNED_TABLES = (*PLAN_TABLES, "constraints")
"""The tables a plan of a run spec reads as a plan spec's (:func:`pipesim.plan.runspec.plan_tables`),
and an exported run spec carries over from its plan spec (``--export-best``)."""
DESIGN_KEYS = ("placement", "tp", "eta", "update", "sync_every", "oversample")
RUN_KEYS = ("steps", "seed", "sync_time_s", "inflight_load_time_s")
DEFAULT_STEPS = 12
ENGINE_KEYS = (
    "max_num_batched_tokens",
    "enforce_eager",
    "disable_custom_all_reduce",
    "kv_policy",
    "episodes_per_replica",
)
"""``[model]`` keys only a run spec takes: vLLM settings :class:`~pipesim.compute.EngineConfig`
already models (:mod:`pipesim.compute.knobs`, ``kv_policy``), under its names and units, and
``episodes_per_replica``, the episodes each replica takes at once (the cluster's and
``run_compute``'s ``slots_per_replica``; default ``max_num_seqs``: an episode holds its place
through its tool calls, ``docs/compute.md``). A plan spec's engines do not take the first four
(``PlanSpec`` has no such fields; ``episodes_per_replica`` it takes, as
:attr:`~pipesim.plan.space.PlanSpec.episodes_per_replica`), so :func:`read_engine` reads them
beside the plan spec and :func:`~pipesim.plan.build.engine_config` puts them on the design's
engine (:func:`~pipesim.plan.build.design_cluster` the last on its cluster)."""


def read_design(data: Any) -> Design:
    t = Table("design", data, DESIGN_KEYS)
    t.require("placement", why='"colocated" or the trainer-GPU count')
    place = t.raw("placement")
    if isinstance(place, str):
        if place != "colocated":
            raise PlanError(
                f"design.placement must be 'colocated' or a trainer-GPU count, got {shown(place)}"
                f"{did_you_mean(place, ('colocated',))}",
                "design.placement",
            )
        trainer = 0
    else:
        trainer = t.integer("placement", lo=0, hi=MAX_GPUS)
    update = t.string("update", "partial")
    if update not in UPDATES:
        raise PlanError(
            f"design.update: unknown {shown(update)}{did_you_mean(update, UPDATES)} "
            f"(choose from {list(UPDATES)})",
            "design.update",
        )
    over = t.number("oversample", 1.0, 1)
    if over > MAX_OVERSAMPLE:
        raise PlanError(
            f"design.oversample must be a finite number in [1, {MAX_OVERSAMPLE:g}], got {shown(over)}",
            "design.oversample",
        )
    return Design(
        trainer_gpus=trainer,
        tp=t.integer("tp", 1, lo=1, hi=MAX_GPUS),
        eta=t.integer("eta", 1, lo=0, hi=MAX_ETA),
        update=update,
        sync_every=t.integer("sync_every", 1, lo=1, hi=MAX_SYNC_EVERY),
        oversample=float(over),
    )


_DIVIDES = re.compile(r"(tp|ep) \((\d+)\) (.*)", re.DOTALL)
"""The roofline's divisibility refusals (:func:`~pipesim.compute.roofline.check_tp`, ``check_ep``):
``tp (3) must divide the model's n_heads (32)``."""


def _engine_refusal(model: str, text: str) -> str:
    """Why the engine refused the model at a design's tp, after ``design.tp (3): ``: a divisibility
    rule says ``cannot run at tp=3: tp must divide ...`` ("does not fit" read as memory when it
    was a head count); memory says ``does not fit``, with the engine's own opening said once."""
    said = f"model {model} does not fit: "
    if text.startswith(said):
        return f"{model} does not fit: {text[len(said) :]}"
    if rule := _DIVIDES.fullmatch(text):
        key, value, why = rule.groups()
        return f"{model} cannot run at {key}={value}: {key} {why}"
    return f"{model} does not fit: {text}"  # the KV budget: memory too


def check_design(
    spec: PlanSpec, d: Design, table: str = "design", engine: Sequence[tuple[str, Any]] = ()
) -> None:
    """One-line errors naming the design key (``table.KEY``: a run spec's ``[design]``, a plan
    spec's ``[baseline]``) when the design does not fit the cluster; ``model.max_model_len`` past
    the model's context is named itself (no tp changes a context), and a sample longer than the
    engines' context is refused first, in the words of a plan without a design
    (:func:`~pipesim.plan.build.context_problem`: ``model.max_model_len`` and the workload's keys),
    never as the design's ``tp``."""
    from pipesim.compute import TrainerConfig
    from pipesim.compute.cluster import Cluster

    n = spec.n_gpus
    context = spec.max_model_len if spec.max_model_len is not None else spec.model.max_context_len
    # first: a sample longer than the context is the workload's or max_model_len's problem at every
    # tp and placement, so it names those keys, as a plan without a design does (a max_model_len
    # past the model's own context is refused below, naming itself)
    if context <= spec.model.max_context_len and (problem := context_problem(spec, context)):
        raise PlanError(problem, context_key(spec, context))
    if d.trainer_gpus >= n:
        raise PlanError(
            f"{table}.placement ({d.trainer_gpus} trainer GPUs) must leave engine GPUs of "
            f"cluster.n_gpus ({n})",
            f"{table}.placement",
        )
    try:
        eng = engine_config(spec, d.tp, engine)
        spec.workload.check_context(eng.context_len)
    except ValueError as e:
        inner, text = getattr(e, "field", ""), str(e)
        if inner in ENGINE_KEYS:  # a run spec's engine option (max_num_batched_tokens < max_num_seqs)
            raise PlanError(f"model.{text.removeprefix(inner + ': ')}", f"model.{inner}") from None
        if inner in _CONTEXT_KEYS and text.startswith(inner):  # the spec's name for the key
            text = _CONTEXT_KEYS[inner] + text[len(inner) :]
        if inner == "max_model_len":  # longer than the model's context: no tp changes that
            raise PlanError(text, "model.max_model_len") from None
        raise PlanError(
            f"{table}.tp ({d.tp}): {_engine_refusal(spec.model.name, text)}", f"{table}.tp"
        ) from None
    per = dict(engine).get("episodes_per_replica")
    try:
        Cluster(engine=eng, n_gpus=n, trainer_gpus=d.trainer_gpus, slots_per_replica=per)
    except ValueError as e:
        if getattr(e, "field", "") == "slots_per_replica":  # too many slots on these replicas
            raise PlanError(
                f"model.episodes_per_replica ({per:,}) on {(n - d.trainer_gpus) // d.tp:,} replicas is "
                f"more than the {MAX_SLOTS:,} episode slots one run holds",
                "model.episodes_per_replica",
            ) from None
        if getattr(e, "field", "") == "n_gpus":  # too many slots: the GPUs, whatever the design
            raise PlanError(f"cluster.n_gpus ({n}): {e}", "cluster.n_gpus") from None
        if not d.trainer_gpus:  # colocated: every GPU rolls out, so the cluster's size is at fault
            raise PlanError(
                f"cluster.n_gpus ({n}, colocated) with {table}.tp ({d.tp}): {e}", "cluster.n_gpus"
            ) from None
        raise PlanError(
            f"{table}.placement ({d.trainer_gpus}) with {table}.tp ({d.tp}): {e}", f"{table}.placement"
        ) from None
    sp, t = spec.sequence_parallel, d.trainer_gpus or n
    if t % sp:
        where = (
            f"{table}.placement ({t} trainer GPUs)" if d.trainer_gpus else f"cluster.n_gpus ({n}, colocated)"
        )
        raise PlanError(
            f"model.sequence_parallel ({sp}) must divide the trainer's GPUs: {where}",
            "model.sequence_parallel",
        )
    try:
        TrainerConfig(model=spec.model, gpu=spec.gpu, n_gpus=t, mfu=spec.mfu)
    except ValueError as e:
        inner = getattr(e, "field", "")
        first = inner.split(".")[0]
        if (key := _TRAINER_KEYS.get(first)) is not None:  # a value, not the placement
            key += inner[len(first) :]  # gpu.nvlink_bandwidth_bytes_per_s: cluster.gpu.nvlink_...
            text = str(e)
            text = key + text[len(inner) :] if text.startswith(inner) else f"{key}: {text}"
            raise PlanError(text, key) from None
        key = f"{table}.placement" if d.trainer_gpus else "cluster.n_gpus"
        raise PlanError(f"{key}: {str(e).removeprefix('n_gpus: ')}", key) from None
    try:  # the design's own trainer: model.framework's profile on this model and these GPUs
        trainer_config(spec, d)
    except ValueError as e:
        inner, text = getattr(e, "field", ""), str(e)
        if inner == "profile":  # megatron-moe on a dense model: the spec's key, not the field's
            raise PlanError(f"model.framework: {text.removeprefix('profile: ')}", "model.framework") from None
        if inner == "n_gpus":  # the expert groups do not tile the trainer's GPUs
            key = f"{table}.placement" if d.trainer_gpus else "cluster.n_gpus"
            raise PlanError(f"{key}: {text.removeprefix('n_gpus: ')}", key) from None
        # another field: the run reports it, as it did before this check


_TRAINER_KEYS = {
    "mfu": "model.mfu",
    "model": "model.name",
    "gpu": "cluster.gpu",
    "profile": "model.framework",
    "sequence_parallel": "model.sequence_parallel",
}
"""A :class:`~pipesim.compute.TrainerConfig` field (its first part: ``gpu.bf16_flops_per_s``) ->
the run spec's key that sets it. The trainer's other refusal, ``n_gpus``, is the design's placement
(or the cluster's size, colocated); ``mfu = 1e-320`` was once reported as ``design.placement``."""


_CONTEXT_KEYS = {
    "max_model_len": "model.max_model_len",
    "max_response_tokens": "workload.max_response_tokens",
}
"""The engine's or workload's field a context refusal names -> the spec key that sets it, which
the message names (``workload.max_response_tokens (100000): the longest sample ...``)."""


def check_tables(data: Mapping[str, Any]) -> None:
    """``data`` is a run spec's tables: ``kind = "compute"`` and no table a run spec lacks."""
    if not isinstance(data, Mapping):
        raise PlanError(f"a run spec is a table of tables, got {shown(data)}")
    if (missing := missing_kind(data)) is not None:
        raise PlanError(missing, "kind")
    if data.get("kind") is None and ("space" in data or "search" in data or "constraints" in data):
        raise PlanError(
            "kind: this is a plan spec (it has [space], [search] or [constraints]); a run spec says "
            f'kind = "{KIND}" and holds one [design] (pipesim plan SPEC --export-best RUN.toml writes one)',
            "kind",
        )
    if data.get("kind") is None and "schema_version" in data:  # said "kind must be ..., got None"
        raise PlanError(
            "kind: this is a scenario file of the slot simulator (it has schema_version; pipesim export "
            f'writes one and pipesim run runs it), not a run spec: a run spec says kind = "{KIND}" and '
            "holds a [cluster], a [model], a [workload] and one [design] (docs/runspec.md)",
            "kind",
        )
    if data.get("kind") != KIND:
        raise PlanError(
            f'kind must be "{KIND}" (a run spec of the compute engine), got {shown(data.get("kind"))}', "kind"
        )
    valid = ("kind", *PLAN_TABLES, "design", "run", "calibration", "constraints")
    for name in data:
        if name not in valid:
            raise PlanError(
                f"unknown table [{key_shown(name)}]{did_you_mean(name, valid)} (a run spec has: "
                f"{', '.join(valid[1:])}; [space] and [search] belong to a plan spec)",
                key_shown(name),
            )
    if "constraints" in data:  # pipesim plan's limits; pipesim run checks them, and has none to apply
        from pipesim.plan.specfile import read_constraints

        read_constraints(data["constraints"])
    if isinstance(model := data.get("model"), Mapping):  # a typo among the plan spec's and the run
        from pipesim.plan.specfile import _TABLES  # spec's own keys (the plan's reader knew its own)

        keys = tuple(dict.fromkeys((*_TABLES["model"], *ENGINE_KEYS)))  # a key in both listed once
        Table("model", model, keys)


def not_a_spec_file(path: str | Path) -> PlanError | None:
    """The refusal of a run spec's file by its suffix (a run spec is TOML or YAML), saying what the
    file is instead; None for a suffix a spec may have. The reader's own said "a plan spec is TOML"
    of a log given to ``pipesim calibrate --spec``, which takes a run spec."""
    from pipesim.plan.specread import SUFFIXES

    suffix = Path(path).suffix.lower()
    if suffix in SUFFIXES:
        return None
    what = f"a {suffix} file" if suffix else "a file without a suffix"
    hint = " (JSON is YAML: name the file .yaml)" if suffix == ".json" else ""
    msg = f"{path}: a run spec is TOML (.toml) or YAML (.yaml, .yml), and this is {what}{hint}"
    return PlanError(msg, "", str(path))


def missing_kind(data: Mapping[str, Any]) -> str | None:
    """The refusal of a run spec that lacks ``kind`` (it has ``[design]`` or ``[run]``, which only
    a run spec has, and no slot file's ``schema_version``); None for any other data. ``pipesim
    run`` takes such a file for a run spec (:func:`pipesim.plan.runspec.is_runspec`) to say so,
    where it used to call it a plan spec and send it to ``pipesim plan``, which refused
    ``[design]``."""
    if not isinstance(data, Mapping) or "kind" in data or "schema_version" in data:
        return None
    table = next((t for t in ("design", "run") if t in data), None)
    if table is None:
        return None
    return f'kind is missing: a file with [{table}] is a run spec; add kind = "{KIND}" at its top'


def run_table(data: Mapping[str, Any]) -> tuple[int, int]:
    """``[run]``'s steps and seed, its sync times checked: each error names ``run.KEY``."""
    r = Table("run", data.get("run", {}), RUN_KEYS)
    steps = r.integer("steps", DEFAULT_STEPS, lo=1, hi=MAX_POOL_TASKS)
    seed = r.integer("seed", 0, lo=0, hi=MAX_SIM_SEED - 1)
    for k in ("sync_time_s", "inflight_load_time_s"):  # seconds of one sync or load: up to a week
        r.number(k, lo=0, hi=MAX_STEP_TIME_S)
    return steps, seed


RUN_IN_SEARCH = {
    "search.steps": "run.steps",
    "search.sim_seed": "run.seed",
    "search.sync_time_s": "run.sync_time_s",
    "search.inflight_load_time_s": "run.inflight_load_time_s",
}
"""The ``[run]`` keys a run spec reads into its plan spec's ``[search]``: an error there names the
run spec's key (a run spec has no ``[search]``)."""


def as_run_key(e: PlanError, cal: Mapping[str, float], keys: Sequence[str]) -> PlanError:
    """``e`` naming the run spec's key where it names the ``[search]`` key one of ``keys`` of
    :data:`RUN_IN_SEARCH` was read into (``calibration.values.sync_time_s`` where the calibration
    set it)."""
    text, field_ = str(e), e.field
    for key in keys:
        where = RUN_IN_SEARCH[key]
        if key == "search.sync_time_s" and "sync_time_s" in cal:
            where = "calibration.values.sync_time_s"
        text = text.replace(key, where)
        if field_ == key:
            field_ = where
    return PlanError(text, field_, e.file)
