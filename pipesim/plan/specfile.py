"""A plan spec from a TOML or YAML file (see ``docs/plan.md`` and ``examples/plan_qwen3_8b.toml``).

Tables: ``[cluster]`` (``gpu``, ``n_gpus``), ``[model]`` (``name``, ``max_model_len``,
``max_num_seqs``, ``episodes_per_replica`` (each replica's episodes, tool calls included; default
``max_num_seqs``), ``gpu_memory_utilization``, ``mfu``, ``share_group_prefix``, ``weight_dtype`` and
``kv_dtype`` (the engines' storage types, default ``bf16``), ``framework``: a
trainer profile of :mod:`pipesim.compute.profiles`, default the one-MFU model;
``recompute_old_logp``, default true; the trainer's batch knobs ``ppo_mini_batch_samples``,
``micro_batch_tokens``, ``log_prob_micro_batch_tokens``, ``sequence_parallel``; ``balance``, how
its framework deals samples to ranks), ``[workload]``
(``prompts_per_step`` or ``batch_size`` in samples, ``samples_per_prompt``, ``prompt_tokens``, ``response`` =
``{median_tokens, sigma}`` or ``response_trace`` = ``{path, column}``, ``max_response_tokens``,
``difficulty_sigma``, ``drift_per_version``, ``agent`` = AgentTurns' fields), ``[constraints]``,
``[space]`` (``placement`` = ``"all"`` or a list of trainer-GPU counts and ``"colocated"``,
``tp``, ``eta``, ``update``, ``sync_every``, ``oversample``) and ``[search]`` (``steps``,
``screen_steps``, ``seeds``, ``method``, ``trials``, ``grid_limit``, ``reduction``, ``min_full``,
``batch``, ``sync_time_s``, ``inflight_load_time_s``, ``sim_seed``).

Checked before any search, each error one line naming the file and the key (``table.key``, see
:mod:`pipesim.plan.checks` for the types and bounds): unknown tables and keys, in inline tables
too (``response``, ``response_trace``, ``agent``), with the closest valid name; a value of the
wrong type (a fractional float where an integer belongs is an error, never truncated); a value out
of range; ``response`` with ``response_trace``, or ``batch_size`` with ``prompts_per_step``. How a file
becomes tables (its encoding, suffix, YAML's duplicate keys and ``null``, nesting) is
:mod:`pipesim.plan.specread`, which run specs share; how ``[workload]`` becomes a
:class:`~pipesim.compute.TokenWorkload` is :mod:`pipesim.plan.specworkload`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipesim.compute import GPUSpec, ModelSpec
from pipesim.compute.trainer import MIN_EFFICIENCY
from pipesim.core.errors import MAX_SLOTS, shown
from pipesim.core.validate import key_shown
from pipesim.plan.checks import PlanError, Table, as_int, did_you_mean, number
from pipesim.plan.space import (
    BATCH_KNOBS,
    UPDATES,
    Constraints,
    Design,
    PlanSpec,
    Space,
    resolve_gpu,
    resolve_model,
)
from pipesim.plan.specread import NEEDS, SUFFIXES, gpu_table, read  # noqa: F401  (read, SUFFIXES: kept as specfile.read)
from pipesim.plan.specworkload import read_workload

_TABLES = {
    "cluster": {"gpu", "n_gpus", "env_workers", "cost_per_gpu_hour"},
    "model": {
        "name",
        "max_model_len",
        "max_num_seqs",
        "gpu_memory_utilization",
        "mfu",
        "share_group_prefix",
        "framework",
        "tool_kv",
        "episodes_per_replica",
        "weight_dtype",
        "kv_dtype",
        "recompute_old_logp",
        "reference_model",
        *BATCH_KNOBS,
        "balance",
    },
    "workload": {
        "prompts_per_step",
        "batch_size",
        "samples_per_prompt",
        "prompt_tokens",
        "response",
        "response_trace",
        "max_response_tokens",
        "max_prompt_tokens",
        "difficulty_sigma",
        "drift_per_version",
        "agent",
    },
    "constraints": {
        "mean_staleness",
        "max_staleness",
        "discarded_share",
        "offpolicy_token_share",
        "min_trainer_gpus",
        "cost_per_mtok",
    },
    "space": {"placement", "tp", "eta", "update", "sync_every", "oversample", "oversample_prompts"},
    "baseline": {"placement", "tp", "eta", "update", "sync_every", "oversample"},
    "search": {
        "steps",
        "screen_steps",
        "seeds",
        "method",
        "trials",
        "grid_limit",
        "reduction",
        "min_full",
        "batch",
        "sync_time_s",
        "inflight_load_time_s",
        "sim_seed",
        "first_cut",
    },
}


def _placement(where: str, v: Any) -> int:
    if v == "colocated":
        return 0
    if isinstance(v, str):
        hint = did_you_mean(v, ("colocated", "all"))
        msg = (
            f"{where} must be a trainer-GPU count or 'colocated' (or placement = 'all'), got {shown(v)}{hint}"
        )
        raise PlanError(msg, where)
    return as_int(where, v)


def _model(name: str, base: Path | None) -> ModelSpec:
    """A catalog name, a Hugging Face id (``Qwen/Qwen3-8B``), or a path to a checkpoint's
    ``config.json`` (or its directory), relative to the spec file."""
    import json

    from pipesim.core.readfile import SPEC_MAX_BYTES, read_text

    path = Path(name)
    if base is not None and not path.is_absolute():
        path = base / path
    if path.is_dir():
        path = path / "config.json"
    if name.endswith(".json") or path.is_file():
        try:
            cfg = json.loads(read_text(path, "config.json files", SPEC_MAX_BYTES, "utf-8"))
        except OSError as e:
            raise PlanError(f"model.name: cannot read {path}: {e.strerror or e}", "model.name") from None
        except ValueError as e:
            raise PlanError(f"model.name: {path} is not JSON: {e}", "model.name") from None
        if not isinstance(cfg, dict):
            raise PlanError(f"model.name: {path} is not a config.json object", "model.name")
        try:
            # a checkout's config.json is named as the checkout is; any other file by its stem
            named = path.absolute().parent.name if path.name == "config.json" else path.stem
            return ModelSpec.from_hf_config(cfg, name=named or path.stem)
        except (KeyError, TypeError, ValueError) as e:
            raise PlanError(f"model.name: {path}: {e}", "model.name") from None
    return resolve_model(name)


def _baseline(b: Table) -> Design:
    """The ``[baseline]`` design: the keys of a :class:`Design` (``placement``: trainer GPUs or
    ``"colocated"``); a key left out takes the Design's default."""
    b.require("placement", why="the baseline's placement (trainer GPUs, or 'colocated')")
    kw: dict[str, Any] = {"trainer_gpus": _placement("baseline.placement", b.raw("placement"))}
    for k in ("tp", "eta", "sync_every"):
        if k in b:
            kw[k] = b.integer(k, lo=1 if k != "eta" else 0)
    if "update" in b:
        u = b.string("update")
        if u not in UPDATES:
            hint = f"{did_you_mean(u, UPDATES)} (choose from {list(UPDATES)})"
            msg = f"baseline.update: unknown {shown(u)}{hint}"
            raise PlanError(msg, "baseline.update")
        kw["update"] = u
    if "oversample" in b:
        kw["oversample"] = float(b.number("oversample", 1.0, 1))
    return Design(**kw)


def read_cluster(cl: Table) -> tuple[GPUSpec, int]:
    """``[cluster]``'s GPU (a catalog name, an alias, or a table of GPUSpec's fields:
    :func:`~pipesim.plan.specread.gpu_table`) and GPU count; for the run specs too (stable name).
    The optional keys (``env_workers``, ``cost_per_gpu_hour``) are read by :func:`from_dict`."""
    cl.require("gpu", "n_gpus", why=NEEDS)
    gpu = gpu_table(cl) or resolve_gpu(cl.string("gpu"))
    return gpu, cl.integer("n_gpus")


def read_model(mo: Table, base: Path | None = None) -> ModelSpec:
    """``[model]``'s model: a catalog name, a Hugging Face id or a ``config.json`` path relative
    to ``base``; for the run specs too (stable name)."""
    mo.require("name", why=NEEDS)
    return _model(mo.string("name"), base)


def from_dict(data: dict[str, Any], base: Path | None = None) -> PlanSpec:
    """The :class:`PlanSpec` of a spec file's tables; ``base`` resolves a relative trace path."""
    if not isinstance(data, dict):
        raise PlanError(f"a plan spec is a table of tables, got {shown(data)}", "")
    for name in data:
        if name == "kind":  # a run spec's marker, misspelt (``pipesim run`` sent it here as a plan spec)
            raise PlanError(
                f'kind must be "compute" (a run spec, for pipesim run), got {shown(data[name])}; '
                "a plan spec has no kind",
                "kind",
            )
        if name in ("design", "run") and "kind" not in data:  # a run spec without its marker
            raise PlanError(
                f'kind is missing: a file with [{name}] is a run spec; add kind = "compute" at its top '
                "(pipesim run runs it, pipesim plan searches around its design)",
                "kind",
            )
        if name not in _TABLES:
            valid = ", ".join(sorted(_TABLES))
            msg = f"unknown table [{key_shown(name)}]{did_you_mean(name, _TABLES)} (valid tables: {valid})"
            raise PlanError(msg, key_shown(name))
    t = {name: Table(name, data.get(name, {}), keys) for name, keys in _TABLES.items()}
    cl, mo, wl, sp, co, se = (
        t[k] for k in ("cluster", "model", "workload", "space", "constraints", "search")
    )
    gpu, n_gpus = read_cluster(cl)
    model = read_model(mo, base)
    workload, batch = read_workload(wl, base)
    n = workload.samples_per_prompt
    kw: dict[str, Any] = {}
    if "placement" in sp and sp.raw("placement") != "all":
        kw["placement"] = tuple(_placement(where, v) for where, v in sp.items("placement"))
    for k in ("tp", "eta", "sync_every"):
        if k in sp:
            kw[k] = sp.integers(k)
    if "update" in sp:
        kw["update"] = sp.strings("update")
    elif n > 1:
        kw["update"] = ("drain", "partial", "abort_reprefill", "inflight", "abort")
    if "oversample" in sp and "oversample_prompts" in sp:
        msg = "space.oversample and space.oversample_prompts: give one of them, not both"
        raise PlanError(msg, "space.oversample")
    if "oversample" in sp:
        kw["oversample"] = sp.numbers("oversample")
    elif "oversample_prompts" in sp:  # slime's --over-sampling-batch-size: prompts launched per step
        prompts = batch // n
        counts = sp.integers("oversample_prompts")
        for i, count in enumerate(counts):
            if count < prompts:
                raise PlanError(
                    f"space.oversample_prompts[{i}] must be at least the prompts per step "
                    f"({prompts}), got {count}",
                    f"space.oversample_prompts[{i}]",
                )
        kw["oversample"] = tuple(count / prompts for count in counts)
    elif n > 1:
        kw["oversample"] = (1.0, 1.25)
    constraints = _constraints(co)
    extra: dict[str, Any] = {}
    for k in (
        "steps",
        "screen_steps",
        "seeds",
        "trials",
        "grid_limit",
        "reduction",
        "min_full",
        "batch",
        "sim_seed",
    ):
        if k in se:
            extra[k] = se.integer(k)
    for k in ("sync_time_s", "inflight_load_time_s"):
        if k in se:
            extra[k] = se.number(k)
    if "method" in se:
        extra["method"] = se.string("method")
    if "first_cut" in se:
        extra["first_cut"] = se.flag("first_cut")
    for k in ("max_model_len", "max_num_seqs"):
        if k in mo:
            extra[k] = mo.integer(k)
    if "episodes_per_replica" in mo:  # as a run spec reads it (runspec_checks.read_engine)
        extra["episodes_per_replica"] = mo.integer("episodes_per_replica", lo=1, hi=MAX_SLOTS)
    if "gpu_memory_utilization" in mo:
        extra["gpu_memory_utilization"] = number(
            mo.name("gpu_memory_utilization"),
            mo.raw("gpu_memory_utilization"),
            hi=1,
            above=0,
            what=" in (0, 1]",
        )
    if "mfu" in mo:  # checked here too: a framework's profile takes the mfu before PlanSpec sees it
        extra["mfu"] = number(mo.name("mfu"), mo.raw("mfu"), MIN_EFFICIENCY, 1)
    if "share_group_prefix" in mo:
        extra["share_group_prefix"] = mo.flag("share_group_prefix")
    if "framework" in mo:  # a named profile; an mfu given too replaces its efficiencies
        extra["framework"] = _framework(mo.string("framework"), extra.get("mfu"))
    if "tool_kv" in mo:
        extra["tool_kv"] = mo.string("tool_kv")
    for k in ("weight_dtype", "kv_dtype"):  # the engines' storage types (checked by PlanSpec)
        if k in mo:
            extra[k] = mo.string(k)
    if "recompute_old_logp" in mo:  # false: the rollout's log-probs (verl's use_rollout_log_probs)
        extra["recompute_old_logp"] = mo.flag("recompute_old_logp")
    if "reference_model" in mo:  # true: a KL term's reference forward (verl's timing_s/ref)
        extra["reference_model"] = mo.flag("reference_model")
    for k in BATCH_KNOBS:
        if k in mo:  # the trainer's batch knobs (verl's names in pipesim.plan.keys)
            extra[k] = mo.integer(k, lo=1)
    if "balance" in mo:  # how the framework deals samples to ranks (pipesim.compute.balance)
        extra["balance"] = mo.string("balance")
    if "env_workers" in cl:
        extra["env_workers"] = cl.integer("env_workers", lo=1)
    if "cost_per_gpu_hour" in cl:
        extra["cost_per_gpu_hour"] = cl.number("cost_per_gpu_hour", 0)
    if "baseline" in data:
        extra["baseline"] = _baseline(t["baseline"])
    return PlanSpec(
        gpu=gpu,
        n_gpus=n_gpus,
        model=model,
        workload=workload,
        batch_size=batch,
        constraints=constraints,
        space=Space(**kw),
        **extra,
    )


def _constraints(co: Table) -> Constraints:
    return Constraints(
        mean_staleness=co.number("mean_staleness"),
        max_staleness=co.number("max_staleness"),
        discarded_share=co.number("discarded_share"),
        offpolicy_token_share=co.number("offpolicy_token_share"),
        min_trainer_gpus=co.integer("min_trainer_gpus", 1),
        cost_per_mtok=co.number("cost_per_mtok"),
    )


def read_constraints(raw: Any) -> Constraints:
    """A ``[constraints]`` table as the plan reads it (a run spec's too: :mod:`pipesim.plan.runspec`),
    each error naming ``constraints.KEY``."""
    return _constraints(Table("constraints", raw, _TABLES["constraints"]))


def _framework(name: str, mfu: float | None) -> Any:
    from pipesim.compute.profiles import profile

    try:
        prof = profile(name, field="model.framework")
    except ValueError as e:
        raise PlanError(str(e), "model.framework") from None
    return prof if mfu is None else dataclasses.replace(prof, fwd_bwd_efficiency=mfu, fwd_efficiency=mfu)


def load(path: str | Path, sets: Sequence[str] = ()) -> PlanSpec:
    """The :class:`PlanSpec` of a TOML (``.toml``) or YAML (``.yaml``, ``.yml``) file, with
    ``--set TABLE.KEY=VALUE`` pairs applied (:func:`edited`); every :class:`PlanError` names the file."""
    data = edited(path, sets)
    try:
        if data.get("kind") == "compute":  # a run spec: its cluster, model and workload, calibration applied
            from pipesim.plan.runspec import load_plan_spec

            return load_plan_spec(data, Path(path).parent)
        return from_dict(data, Path(path).parent)
    except PlanError as e:
        raise PlanError(f"{path}: {e}", e.field, str(path)) from None


def check_sets(sets: Sequence[str]) -> None:
    """PlanError naming the key where ``--set`` pairs give a key twice, or a table after one of its
    fields (:func:`pipesim.io.cli_options.repeated_key`, the rule ``pipesim``'s own ``--set`` has):
    the last value used to replace the first without a word."""
    from pipesim.io.cli_options import repeated_key, repeated_problem

    found = repeated_key(sets)
    if found is not None:
        raise PlanError(f"--set {repeated_problem(*found)}", key_shown(found[0]))


def edited(path: str | Path, sets: Sequence[str] = ()) -> dict[str, Any]:
    """A spec file's tables with ``--set`` pairs applied (:mod:`pipesim.plan.sets`): a plan spec's
    tables, or a run spec's when the file says ``kind = "compute"``; PlanError naming the file
    (and the key: one given twice is refused, :func:`check_sets`). With pairs, the relative paths
    are made absolute (read from the file's folder): the tables no longer say where they came from."""
    bad = isinstance(sets, str | bytes) or not isinstance(sets, Sequence)  # a str went by character
    if bad or not all(isinstance(p, str) for p in sets):
        raise PlanError(f"sets must be a list of TABLE.KEY=VALUE strings, got {shown(sets)}", "sets")
    data = read(path)
    if not sets:
        return data
    from pipesim.plan.runspec import SET_TABLES
    from pipesim.plan.sets import apply_sets

    run = data.get("kind") == "compute"
    tables = SET_TABLES if run else tuple(_TABLES)
    try:
        check_sets(sets)
        if run:  # a calibrated sync was measured on the file's design, not on one a pair sets
            from pipesim.plan.runspec_calibration import with_logged_design

            data = with_logged_design(data, sets)
        data = apply_sets(data, sets, tables, "a run spec" if run else "a plan spec")
    except PlanError as e:
        raise PlanError(f"{path}: {e}", e.field, str(path)) from None
    # tables handed on (--export-best writes them elsewhere) read the file's paths from its folder
    from pipesim.plan.runspec_export import resolved

    return resolved(data, Path(path).parent)
