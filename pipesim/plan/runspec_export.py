"""A plan's design as a run spec (:mod:`pipesim.plan.runspec`): ``pipesim plan --export-best``.

:func:`design_to_runspec` takes the plan spec as its file or its tables (then ``[cluster]``,
``[model]`` and ``[workload]`` are copied as written, a file's relative paths made absolute)
or as a :class:`~pipesim.plan.space.PlanSpec` (then :func:`spec_tables` writes the tables back
from the objects: the catalog's GPU and model names, a log-normal response as
``{median_tokens, sigma}``, the agent's fields; a trace-backed response has no file to name and is
refused, naming ``workload.response_trace``). Either way the run spec reads back to the same
cluster, model and workload (a test holds it).

Paths: a spec's ``workload.response_trace.path`` and a ``model.name`` that names a
``config.json`` (or its folder) are read relative to the spec file's folder. A spec written
elsewhere would read them relative to its own folder, so every writer rewrites them
(:func:`relocated`: relative to the written file's folder, absolute where no relative path
exists, e.g. another drive); :func:`resolved` makes them absolute (a saved run's spec, which
is rerun from any folder). ``pipesim export``, ``--export-best`` and ``--save`` use them.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pipesim.compute import GPUS, MODELS, LogNormalLengths
from pipesim.core.errors import shown
from pipesim.plan import specfile
from pipesim.plan.build import batch_knobs
from pipesim.plan.checks import PlanError
from pipesim.plan.space import Design, PlanSpec

__all__ = ["design_to_runspec", "relocated", "resolved", "spec_tables", "write_best"]


def _is_model_path(name: str, base: Path) -> bool:
    """Whether ``model.name`` names a file (a ``config.json`` or its folder) rather than a catalog
    name or a Hugging Face id: the rule :func:`pipesim.plan.specfile.read_model` reads it by."""
    p = Path(name) if Path(name).is_absolute() else base / name
    return name.endswith(".json") or p.is_dir() or p.is_file()


def _with_paths(data: Mapping[str, Any], base: Path | None, move: Callable[[Path], str]) -> dict[str, Any]:
    """A deep copy of a spec's tables with each relative path it holds (``model.name`` naming a
    file, ``calibration.model.name`` too, ``workload.response_trace.path``, ``calibration.log``) replaced by
    ``move(absolute path)``; absolute paths and everything else stay as written."""
    root = Path(os.path.abspath(base if base is not None else Path.cwd()))
    out = copy.deepcopy(dict(data))

    def fix(p: str) -> str:
        return p if Path(p).is_absolute() else move(Path(os.path.abspath(root / p)))

    cal = out.get("calibration")
    # the model the calibrated sync was measured on (runspec_calibration.LoggedSetup) too
    for model in (out.get("model"), cal.get("model") if isinstance(cal, dict) else None):
        name = model.get("name") if isinstance(model, dict) else None
        if isinstance(model, dict) and isinstance(name, str) and _is_model_path(name, root):
            model["name"] = fix(name)
    wl = out.get("workload")
    trace = wl.get("response_trace") if isinstance(wl, dict) else None
    if isinstance(trace, dict) and isinstance(trace.get("path"), str):
        trace["path"] = fix(trace["path"])
    # the log it was fitted to: provenance, relative to the spec's folder
    if isinstance(cal, dict) and isinstance(cal.get("log"), str) and cal["log"]:
        cal["log"] = fix(cal["log"])
    return out


def resolved(data: Mapping[str, Any], base: Path | None) -> dict[str, Any]:
    """``data`` with its relative paths (read from ``base``, the spec file's folder; None: the
    working folder) made absolute: the spec reads the same files from any folder."""
    return _with_paths(data, base, str)


def relocated(data: Mapping[str, Any], base: Path | None, out: str | Path) -> dict[str, Any]:
    """``data`` (read from ``base``) as a file written to ``out`` holds it: each relative path
    rewritten relative to ``out``'s folder (absolute where none exists), so the written spec reads
    the files the original read."""
    where = os.path.abspath(Path(out).parent)

    def move(p: Path) -> str:
        try:
            return Path(os.path.relpath(p, where)).as_posix()
        except ValueError:  # another drive (Windows): no relative path
            return str(p)

    return _with_paths(data, base, move)


def _name(catalog: Mapping[str, Any], value: Any, where: str) -> str:
    for k, v in catalog.items():
        if v == value:
            return str(k)
    raise PlanError(
        f"{where}: {shown(getattr(value, 'name', value))} is not in the catalog; give the plan spec's file",
        where,
    )


def _gpu(gpu: Any) -> Any:
    """``[cluster] gpu`` as a spec file writes it: a catalog entry's name, else the table of its
    ``GPUSpec`` fields (:func:`pipesim.plan.specread.gpu_table` reads it back)."""
    import dataclasses

    if any(v == gpu for v in GPUS.values()):
        return _name(GPUS, gpu, "cluster.gpu")
    return dataclasses.asdict(gpu)


def spec_tables(spec: PlanSpec) -> dict[str, Any]:
    """A :class:`PlanSpec`'s ``[cluster]``, ``[model]``, ``[workload]`` and the ``[search]`` keys a
    run takes (``sync_time_s``, ``inflight_load_time_s``, ``steps``), as a spec file writes them."""
    if not isinstance(spec, PlanSpec):
        raise PlanError(f"spec must be a PlanSpec, got {shown(spec)}", "spec")
    wl = spec.workload
    if not isinstance(wl.response, LogNormalLengths):
        raise PlanError(
            "workload.response_trace: a trace-backed response has no file in a PlanSpec; "
            "give design_to_runspec the plan spec's file",
            "workload.response_trace",
        )
    if not isinstance(wl.prompt, int):
        raise PlanError(
            "workload.prompt_tokens: a prompt-length model has no spec-file form; give the plan spec's file",
            "workload.prompt_tokens",
        )
    model: dict[str, Any] = {"name": _name(MODELS, spec.model, "model.name")}
    if spec.max_model_len is not None:
        model["max_model_len"] = spec.max_model_len
    model |= {
        "max_num_seqs": spec.max_num_seqs,
        "gpu_memory_utilization": spec.gpu_memory_utilization,
        "mfu": spec.mfu,
        "share_group_prefix": spec.share_group_prefix,
    }
    if spec.tool_kv != "keep":
        model["tool_kv"] = spec.tool_kv
    if spec.episodes_per_replica is not None:  # a run spec's key too (its cluster's slots)
        model["episodes_per_replica"] = spec.episodes_per_replica
    for k in ("weight_dtype", "kv_dtype"):
        if getattr(spec, k) != "bf16":
            model[k] = getattr(spec, k)
    if not spec.recompute_old_logp:
        model["recompute_old_logp"] = False
    if spec.reference_model:
        model["reference_model"] = True
    defaults = {"sequence_parallel": 1}
    model |= {k: v for k, v in batch_knobs(spec).items() if v is not None and v != defaults.get(k)}
    if spec.balance is not None:
        model["balance"] = spec.balance
    if spec.framework is not None:
        from pipesim.compute.profiles import profile, profiles

        name = spec.framework.name
        if name not in profiles() or profile(name) != spec.framework:
            raise PlanError(
                "model.framework: a profile other than a registered one (a calibrated or changed "
                "one) has no spec-file form; give design_to_runspec the plan spec's file",
                "model.framework",
            )
        model["framework"] = name
        del model["mfu"]  # with a framework, a written mfu would replace its efficiencies
    workload: dict[str, Any] = {
        "batch_size": spec.batch_size,
        "samples_per_prompt": wl.samples_per_prompt,
        "prompt_tokens": wl.prompt,
        "response": {"median_tokens": wl.response.median_tokens, "sigma": wl.response.sigma},
        "max_response_tokens": wl.max_response_tokens,
        "max_prompt_tokens": wl.max_prompt_tokens,
        "difficulty_sigma": wl.difficulty_sigma,
        "drift_per_version": wl.drift_per_version,
    }
    if wl.agent is not None:
        workload["agent"] = dataclasses.asdict(wl.agent)
    cluster: dict[str, Any] = {"gpu": _gpu(spec.gpu), "n_gpus": spec.n_gpus}
    if spec.env_workers is not None:
        cluster["env_workers"] = spec.env_workers
    if spec.cost_per_gpu_hour is not None:
        cluster["cost_per_gpu_hour"] = spec.cost_per_gpu_hour
    search: dict[str, Any] = {"steps": spec.steps, "inflight_load_time_s": spec.inflight_load_time_s}
    if spec.sync_time_s is not None:
        search["sync_time_s"] = spec.sync_time_s
    return {
        "cluster": cluster,
        "model": model,
        "workload": workload,
        "search": search,
    }


def design_to_runspec(
    plan_spec: str | Path | Mapping[str, Any] | PlanSpec,
    design: Design,
    steps: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The run spec (as data) of ``design`` under a plan spec (its file, its tables or a
    :class:`PlanSpec`): the plan's ``[cluster]``, ``[model]``, ``[workload]`` and (from a file or
    tables) ``[constraints]``, the design, and a ``[run]`` of the plan's full-run length
    (``search.steps``) unless ``steps`` is given. From a file, its relative paths are made
    absolute (:func:`resolved`); :func:`write_best` writes them relative to its output.
    :func:`pipesim.plan.runspec.dumps` writes it; ``pipesim run`` runs it."""
    from pipesim.plan.runspec import DEFAULT_STEPS, KIND
    from pipesim.plan.runspec_checks import PLANNED_TABLES

    if isinstance(plan_spec, PlanSpec):
        data = spec_tables(plan_spec)
    elif isinstance(plan_spec, str | Path):  # its paths absolute: the data is read from anywhere
        data = resolved(specfile.read(plan_spec), Path(plan_spec).parent)
    else:
        data = dict(plan_spec)
    if not isinstance(design, Design):
        raise PlanError(f"design must be a pipesim.plan.Design, got {shown(design)}", "design")
    out: dict[str, Any] = {"kind": KIND}
    for k in PLANNED_TABLES:  # [constraints] too: a plan of the export applies the same limits
        if k in data:
            out[k] = copy.deepcopy(data[k])
    out["design"] = {
        "placement": "colocated" if design.colocated else design.trainer_gpus,
        "tp": design.tp,
        "eta": design.eta,
        "update": design.update,
        "sync_every": design.sync_every,
        "oversample": design.oversample,
    }
    search = data.get("search", {}) if isinstance(data.get("search", {}), Mapping) else {}
    # a run spec planned over (kind = "compute", e.g. pipesim calibrate's output) keeps its run's
    # sync times and its whole [calibration]: without them the export would run another model
    source_run = data.get("run", {}) if data.get("kind") == KIND else {}
    source_run = source_run if isinstance(source_run, Mapping) else {}
    run_t: dict[str, Any] = {
        "steps": steps if steps is not None else search.get("steps", DEFAULT_STEPS),
        "seed": seed,
    }
    for k in ("sync_time_s", "inflight_load_time_s"):
        if k in search:
            run_t[k] = search[k]
        elif k in source_run:
            run_t[k] = source_run[k]
    out["run"] = run_t
    if data.get("kind") == KIND and isinstance(data.get("calibration"), Mapping):
        cal = copy.deepcopy(dict(data["calibration"]))
        values, logged = cal.get("values"), data.get("design")
        measured = isinstance(values, Mapping) and "sync_time_s" in values
        if measured and "design" not in cal and isinstance(logged, Mapping):
            cal["design"] = copy.deepcopy(dict(logged))  # the sync was measured there, not on this one
        out["calibration"] = cal
    return out


def write_best(plan_spec: str | Path | Mapping[str, Any] | PlanSpec, result: Any, out: str | Path) -> str:
    """Write the plan's recommended design (``result.best``, or the twin a bound proves that the
    report names in its place) as a run spec to ``out`` (``.toml`` or
    ``.yaml``), with the plan's full-run length and first seed; returns the line to print."""
    from pipesim.io.interrupts import write_text_atomic
    from pipesim.plan.report_lines import proved_twin
    from pipesim.plan.runspec import dumps

    if result.best is None:
        raise PlanError("the plan has no recommended design to export")
    best = proved_twin(result, result.best)  # of identical designs, the one the report names
    # the plan read the file's relative paths from its folder: written relative to ``out``'s (the
    # tables of a plan with --set hold them absolute, pipesim.plan.specfile.edited)
    base = Path(plan_spec).parent if isinstance(plan_spec, str | Path) else None
    source = specfile.read(plan_spec) if isinstance(plan_spec, str | Path) else plan_spec
    data = design_to_runspec(source, best.design, steps=result.spec.steps, seed=result.spec.sim_seed)
    data = relocated(data, base, out)
    fmt = "toml" if Path(out).suffix.lower() == ".toml" else "yaml"
    write_text_atomic(str(out), dumps(data, fmt))
    return f"wrote {out} (run it: pipesim run {out})"
