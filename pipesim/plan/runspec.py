"""Run specs: one design of the compute engine as a file (``docs/runspec.md``).

A run spec is a plan spec's ``[cluster]``, ``[model]`` and ``[workload]`` tables (read by
:func:`pipesim.plan.specfile.from_dict`, so every key a plan spec takes there a run spec takes
too), with ``kind = "compute"`` at the top and, in place of ``[constraints]``, ``[space]`` and
``[search]``:

* ``[design]`` -- one point of the planner's space (:class:`~pipesim.plan.space.Design`):
  ``placement`` (``"colocated"`` or the trainer-GPU count), ``tp``, ``eta``, ``update`` (one of
  :data:`~pipesim.plan.space.UPDATES`), ``sync_every``, ``oversample``;
* ``[run]`` (optional) -- ``steps`` (default 12), ``seed`` (default 0), ``sync_time_s`` (default:
  the cluster's weight sync), ``inflight_load_time_s``;
* ``[calibration]`` (optional, written by ``pipesim calibrate``, :mod:`pipesim.calibrate`) --
  ``values`` (the fitted constants), ``intervals``, ``residuals``, the log's ``log_sha256`` and
  what the log did not identify. The fitted ``values`` override what the tables say: ``mfu``
  (``model.mfu``), ``step_overhead_s`` (the trainer's fixed seconds per step, no table key),
  ``iteration_overhead_s`` (the engine's per-iteration seconds, no table key),
  ``response_median_tokens`` and ``response_sigma`` (``workload.response``), ``sync_time_s``
  (``run.sync_time_s``: the seconds of one weight sync), ``drift_per_version``
  (``workload.drift_per_version``), and the framework profile's constants (:data:`PROFILE_KEYS`:
  ``fwd_bwd_efficiency``, ``fwd_efficiency``, ``micro_batch_s``, ``optimizer_step_s``, ``step_s``,
  ``sample_s``) in place of ``model.framework``'s (of the one-MFU ``ideal`` profile at ``model.mfu``
  when no framework is named). A file calibrated before the phases (``mfu``, ``step_overhead_s``)
  keeps loading: those two still apply as they did. The tables stay as
  the user wrote them, so a file keeps both what was assumed and what was measured. ``values`` and
  ``intervals`` are checked under one rule per key (:mod:`pipesim.plan.runspec_calibration`).

``kind`` tells a run spec from a slot scenario file (which has no ``kind``): ``pipesim run``,
``pipesim export`` and ``--set`` dispatch on it (:func:`is_runspec`). ``--set`` takes dotted keys
(``design.eta=2``, ``workload.response.median_tokens=800``), each value read as a TOML value
(a bare word is a string). Every error is one line naming the key (``design.tp``), through
:class:`~pipesim.plan.checks.Table` and the plan's checks.

The data a spec was read from is kept (:attr:`RunSpec.data`), and :func:`dumps` writes it back:
a file loads, runs and exports to the same tables (``file -> run -> export -> same data``).
:func:`design_to_runspec` (:mod:`pipesim.plan.runspec_export`) writes a plan's design as a run
spec, from the plan spec's file, tables or :class:`~pipesim.plan.space.PlanSpec`. ``pipesim plan``
reads a run spec through :func:`load_plan_spec` (every calibrated value applied, the default space).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipesim.core.errors import shown
from pipesim.plan import specfile
from pipesim.plan.build import engine_config, routing, scenario, trainer_config
from pipesim.plan.checks import (
    MAX_ETA,
    MAX_GPUS,
    MAX_OVERSAMPLE,
    MAX_SIM_SEED,
    PlanError,
    Table,
    did_you_mean,
)
from pipesim.plan.runspec_calibration import CALIBRATED as CALIBRATED  # re-exported
from pipesim.plan.runspec_calibration import CALIBRATION_KEYS as CALIBRATION_KEYS  # re-exported
from pipesim.plan.runspec_calibration import PROFILE_KEYS, calibrated
from pipesim.plan.space import UPDATES, Design, PlanSpec

__all__ = [
    "KIND",
    "RunSpec",
    "apply_sets",
    "design_to_runspec",
    "dumps",
    "from_dict",
    "is_runspec",
    "load",
    "load_plan_spec",
    "plan_tables",
    "run",
    "spec_tables",
    "write_best",
]

KIND = "compute"
PLAN_TABLES = ("cluster", "model", "workload")
DESIGN_KEYS = ("placement", "tp", "eta", "update", "sync_every", "oversample")
RUN_KEYS = ("steps", "seed", "sync_time_s", "inflight_load_time_s")
DEFAULT_STEPS = 12
SET_TABLES = (*PLAN_TABLES, "design", "run", "calibration")
"""The tables ``--set`` edits in a run spec: ``calibration.values.KEY`` asks what-ifs of a
calibrated spec (``--set calibration.values.fwd_bwd_efficiency=0.5``)."""


@dataclass(frozen=True)
class RunSpec:
    """A run spec read and checked: the plan spec of its tables (calibration applied), the design,
    the run's length and seed, and the data it was read from (:func:`dumps` writes it back)."""

    plan: PlanSpec
    design: Design
    steps: int = DEFAULT_STEPS
    seed: int = 0
    data: dict[str, Any] = field(default_factory=dict, compare=False)
    base: Path | None = field(default=None, compare=False)
    """The folder a relative path in ``data`` (``model.name``, ``workload.response_trace``) is read
    from: the spec file's (:func:`load`), kept so the data can be read again (a calibration does)."""

    @property
    def step_overhead_s(self) -> float:
        """The trainer's fixed seconds per step (``calibration.values.step_overhead_s``, else 0)."""
        return self.plan.step_overhead_s

    @property
    def iteration_overhead_s(self) -> float | None:
        """The engine's seconds per decode iteration (calibrated; None: ``EngineConfig``'s)."""
        return self.plan.iteration_overhead_s

    @property
    def label(self) -> str:
        return self.design.label(self.plan.n_gpus)


def is_runspec(path: str | Path) -> bool:
    """Whether ``path`` is a TOML or YAML file whose top level says ``kind = "compute"``; False for
    anything else (a registered scenario name, a slot scenario file, a file that cannot be read:
    the slot path reports those)."""
    p = Path(str(path))
    if p.suffix.lower() not in specfile.SUFFIXES or not p.is_file():
        return False
    try:
        data = specfile.read(p)
    except PlanError:
        return False
    return data.get("kind") == KIND


def read(path: str | Path) -> dict[str, Any]:
    """The tables of a run-spec file (PlanError naming the file when it cannot be read)."""
    data = specfile.read(path)
    return data


def _design(data: Any) -> Design:
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
        sync_every=t.integer("sync_every", 1, lo=1),
        oversample=float(over),
    )


def _check_design(spec: PlanSpec, d: Design) -> None:
    """One-line errors naming the design key when the design does not fit the cluster."""
    from pipesim.compute import TrainerConfig
    from pipesim.compute.cluster import Cluster

    n = spec.n_gpus
    if d.trainer_gpus >= n:
        raise PlanError(
            f"design.placement ({d.trainer_gpus} trainer GPUs) must leave engine GPUs of "
            f"cluster.n_gpus ({n})",
            "design.placement",
        )
    try:
        eng = engine_config(spec, d.tp)
        spec.workload.check_context(eng.context_len)
    except ValueError as e:
        raise PlanError(f"design.tp ({d.tp}): {spec.model.name} does not fit: {e}", "design.tp") from None
    try:
        Cluster(engine=eng, n_gpus=n, trainer_gpus=d.trainer_gpus)
    except ValueError as e:
        raise PlanError(
            f"design.placement ({d.trainer_gpus}) with design.tp ({d.tp}): {e}", "design.placement"
        ) from None
    sp, t = spec.sequence_parallel, d.trainer_gpus or n
    if t % sp:
        where = (
            f"design.placement ({t} trainer GPUs)" if d.trainer_gpus else f"cluster.n_gpus ({n}, colocated)"
        )
        raise PlanError(
            f"model.sequence_parallel ({sp}) must divide the trainer's GPUs: {where}",
            "model.sequence_parallel",
        )
    try:
        TrainerConfig(model=spec.model, gpu=spec.gpu, n_gpus=t, mfu=spec.mfu)
    except ValueError as e:
        key = "design.placement" if d.trainer_gpus else "cluster.n_gpus"
        raise PlanError(f"{key}: {str(e).removeprefix('n_gpus: ')}", key) from None


def plan_tables(data: Mapping[str, Any]) -> dict[str, Any]:
    """A run spec's ``[cluster]``, ``[model]``, ``[workload]`` and ``[run]`` as plan-spec tables,
    the calibrated mfu and response lengths applied: what ``pipesim plan`` reads of a run spec."""
    out: dict[str, Any] = {
        k: copy.deepcopy(dict(data[k])) for k in PLAN_TABLES if k in data and isinstance(data[k], Mapping)
    }
    cal = calibrated(data)
    if "mfu" in cal:
        out.setdefault("model", {})["mfu"] = cal["mfu"]
    if "response_median_tokens" in cal or "response_sigma" in cal:
        wl = out.setdefault("workload", {})
        r = dict(wl.get("response", {})) if isinstance(wl.get("response"), Mapping) else {}
        wl.pop("response_trace", None)
        if "response_median_tokens" in cal:
            r["median_tokens"] = cal["response_median_tokens"]
        if "response_sigma" in cal:
            r["sigma"] = cal["response_sigma"]
        wl["response"] = r
    if "drift_per_version" in cal:
        out.setdefault("workload", {})["drift_per_version"] = cal["drift_per_version"]
    run_t = data.get("run", {})
    search = (
        {k: run_t[k] for k in ("sync_time_s", "inflight_load_time_s") if k in run_t}
        if isinstance(run_t, Mapping)
        else {}
    )
    if "sync_time_s" in cal:
        search["sync_time_s"] = cal["sync_time_s"]
    if search:
        out["search"] = search
    return out


def from_dict(data: Mapping[str, Any], base: Path | None = None) -> RunSpec:
    """The :class:`RunSpec` of a run spec's data; ``base`` resolves a relative trace path."""
    if not isinstance(data, Mapping):
        raise PlanError(f"a run spec is a table of tables, got {shown(data)}")
    if data.get("kind") is None and ("space" in data or "search" in data or "constraints" in data):
        raise PlanError(
            "kind: this is a plan spec (it has [space], [search] or [constraints]); a run spec says "
            f'kind = "{KIND}" and holds one [design] (pipesim plan SPEC --export-best RUN.toml writes one)',
            "kind",
        )
    if data.get("kind") != KIND:
        raise PlanError(
            f'kind must be "{KIND}" (a run spec of the compute engine), got {shown(data.get("kind"))}', "kind"
        )
    valid = ("kind", *PLAN_TABLES, "design", "run", "calibration")
    for name in data:
        if name not in valid:
            raise PlanError(
                f"unknown table [{name}]{did_you_mean(name, valid)} (a run spec has: {', '.join(valid[1:])};"
                " [space], [constraints] and [search] belong to a plan spec)",
                name,
            )
    if "design" not in data:
        raise PlanError(
            "[design] is missing (a run spec needs one design: placement, tp, eta, update, ...)", "design"
        )
    design = _design(data["design"])
    r = Table("run", data.get("run", {}), RUN_KEYS)
    steps = r.integer("steps", DEFAULT_STEPS, lo=1)
    seed = r.integer("seed", 0, lo=0, hi=MAX_SIM_SEED - 1)
    cal = calibrated(data)
    tables = plan_tables(data)
    tables["search"] = {
        **tables.get("search", {}),
        "steps": steps,
        "screen_steps": 1,
        "seeds": 1,
        "sim_seed": seed,
    }
    spec = plan_spec(tables, cal, base)
    _check_design(spec, design)
    return RunSpec(
        plan=spec, design=design, steps=steps, seed=seed, data=copy.deepcopy(dict(data)), base=base
    )


def plan_spec(tables: Mapping[str, Any], cal: Mapping[str, float], base: Path | None = None) -> PlanSpec:
    """The :class:`PlanSpec` of plan-spec ``tables`` (:func:`plan_tables`) with the calibrated
    overheads ``cal`` applied (the ones no table key holds)."""
    spec = specfile.from_dict(dict(tables), base)
    return spec.with_(
        step_overhead_s=cal.get("step_overhead_s", 0.0),
        iteration_overhead_s=cal.get("iteration_overhead_s"),
        framework=_fitted_profile(spec, cal),
    )


def _fitted_profile(spec: PlanSpec, cal: Mapping[str, float]) -> Any:
    """``model.framework`` with the calibrated profile constants (:data:`PROFILE_KEYS`) in place;
    without a framework, the one-MFU profile (``ideal`` at ``model.mfu``) is the one calibrated."""
    import dataclasses

    from pipesim.compute.profiles import profile

    fitted: dict[str, Any] = {k: cal[k] for k in PROFILE_KEYS if k in cal}
    if not fitted:
        return spec.framework
    base = spec.framework
    if base is None:
        base = dataclasses.replace(profile("ideal"), fwd_bwd_efficiency=spec.mfu, fwd_efficiency=spec.mfu)
    try:
        return dataclasses.replace(base, **fitted)
    except ValueError as e:
        key = f"calibration.values.{getattr(e, 'field', '') or next(iter(fitted))}"
        raise PlanError(f"{key}: {e}", key) from None


def load_plan_spec(data: Mapping[str, Any], base: Path | None = None) -> PlanSpec:
    """What ``pipesim plan`` reads of a run spec: its tables as a plan spec (the default space),
    every calibrated value applied."""
    return plan_spec(plan_tables(data), calibrated(data), base)


def apply_sets(data: Mapping[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """``data`` with each ``table.key=value`` (``design.eta=2``) set; PlanError naming a bad pair
    (:func:`pipesim.plan.sets.apply_sets` on a run spec's tables)."""
    from pipesim.plan.sets import apply_sets as set_keys

    return set_keys(data, sets, SET_TABLES, "a run spec")


def load(path: str | Path, sets: Sequence[str] = (), seed: int | None = None) -> RunSpec:
    """The run spec of a file with ``--set`` pairs and a seed applied; every error names the file."""
    data = read(path)
    try:
        data = apply_sets(data, sets)
        if seed is not None:
            data.setdefault("run", {})
            if not isinstance(data["run"], dict):
                raise PlanError(f"run must be a table, got {shown(data['run'])}", "run")
            data["run"]["seed"] = seed
        return from_dict(data, Path(path).parent)
    except PlanError as e:
        raise PlanError(f"{path}: {e}", e.field, str(path)) from None


def dumps(data: Mapping[str, Any], fmt: str = "toml") -> str:
    """A run spec's data as TOML or YAML text, ``kind`` first."""
    ordered = {"kind": data.get("kind", KIND), **{k: v for k, v in data.items() if k != "kind"}}
    if fmt == "yaml":
        import yaml

        return str(yaml.safe_dump(ordered, sort_keys=False))
    import tomli_w

    return tomli_w.dumps(ordered)


def run(rs: RunSpec, record: bool = False) -> Any:
    """Run the spec's design on the compute engine (:func:`pipesim.compute.run_compute`): the same
    cluster, scenario, trainer and routing a plan runs for that design
    (:func:`pipesim.plan.evaluate.run_design`), the calibrated overheads in its plan spec."""
    from pipesim.compute.cluster import Cluster, run_compute

    spec, d = rs.plan, rs.design
    eng = engine_config(spec, d.tp)
    cluster = Cluster(
        engine=eng, n_gpus=spec.n_gpus, trainer_gpus=d.trainer_gpus, env_workers=spec.env_workers
    )
    sync = (cluster.sync_time_s() if spec.sync_time_s is None else spec.sync_time_s) * spec.sync_scale
    sc = scenario(spec, d, rs.steps, rs.seed, n_slots=cluster.n_replicas * eng.max_num_seqs)
    trainer = trainer_config(spec, d)
    return run_compute(
        sc,
        cluster,
        spec.workload,
        seed=rs.seed,
        trainer=trainer,
        sync_time_s=sync,
        routing=routing(spec),
        record=record,
    )


# the export side (a plan's design as a run spec) lives in runspec_export; its names are here too
from pipesim.plan.runspec_export import design_to_runspec, spec_tables, write_best  # noqa: E402
