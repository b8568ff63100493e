"""Run specs: one design of the compute engine as a file (``docs/runspec.md``).

A run spec is a plan spec's ``[cluster]``, ``[model]`` and ``[workload]`` tables (read by
:func:`pipesim.plan.specfile.from_dict`, so every key a plan spec takes there a run spec takes
too), with ``kind = "compute"`` at the top and, in place of ``[space]`` and ``[search]``:

* ``[design]`` -- one point of the planner's space (:class:`~pipesim.plan.space.Design`):
  ``placement`` (``"colocated"`` or the trainer-GPU count), ``tp``, ``eta``, ``update`` (one of
  :data:`~pipesim.plan.space.UPDATES`), ``sync_every``, ``oversample``;
* ``[run]`` (optional) -- ``steps`` (default 12), ``seed`` (default 0), ``sync_time_s`` (default:
  the cluster's weight sync), ``inflight_load_time_s``;
* ``[constraints]`` (optional) -- the plan spec's limits (``max_staleness``, ``discarded_share``,
  ...), which ``pipesim plan RUN.toml`` applies to the designs it searches around the run;
  ``pipesim run`` checks them and has nothing to apply them to;
* ``[calibration]`` (optional, written by ``pipesim calibrate``, :mod:`pipesim.calibrate`) --
  ``values`` (the fitted constants), ``intervals``, ``residuals``, the log's ``log_sha256`` and
  what the log did not identify. The fitted ``values`` override what the tables say: ``mfu``
  (``model.mfu``), ``step_overhead_s`` (the trainer's fixed seconds per step, no table key),
  ``iteration_overhead_s`` (the engine's per-iteration seconds, no table key),
  ``response_median_tokens`` and ``response_sigma`` (``workload.response``), ``sync_time_s``
  (``run.sync_time_s``, the seconds of one weight sync, at the logged design, and a factor on the
  sync model's at another: :func:`~pipesim.plan.runspec_calibration.calibrated_sync`), ``drift_per_version``
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

import contextlib
import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipesim.core.errors import shown
from pipesim.plan import specfile
from pipesim.plan.build import check_run_pool, design_cluster, routing, scenario, sync_seconds, trainer_config
from pipesim.plan.checks import PlanError
from pipesim.plan.runspec_calibration import CALIBRATED as CALIBRATED  # re-exported
from pipesim.plan.runspec_calibration import CALIBRATION_KEYS as CALIBRATION_KEYS  # re-exported
from pipesim.plan.runspec_calibration import (
    PROFILE_KEYS,
    LoggedSetup,
    calibrated,
    calibrated_sync,
    check_sets_not_calibrated,
    logged_design,
    with_logged_design,
)
from pipesim.plan.runspec_checks import DEFAULT_STEPS as DEFAULT_STEPS  # re-exported
from pipesim.plan.runspec_checks import DESIGN_KEYS as DESIGN_KEYS  # re-exported
from pipesim.plan.runspec_checks import ENGINE_KEYS as ENGINE_KEYS  # re-exported
from pipesim.plan.runspec_checks import KIND as KIND  # re-exported
from pipesim.plan.runspec_checks import PLAN_TABLES as PLAN_TABLES  # re-exported
from pipesim.plan.runspec_checks import (
    PLANNED_TABLES,
    RUN_IN_SEARCH,
    as_run_key,
    check_design,
    check_tables,
    missing_kind,
    not_a_spec_file,
    read_design,
    read_engine,
    run_table,
)
from pipesim.plan.runspec_checks import RUN_KEYS as RUN_KEYS  # re-exported
from pipesim.plan.space import Design, PlanSpec

__all__ = [
    "KIND",
    "RunSpec",
    "apply_sets",
    "design_to_runspec",
    "dumps",
    "relocated",
    "resolved",
    "from_dict",
    "is_runspec",
    "load",
    "load_plan_spec",
    "plan_tables",
    "run",
    "spec_tables",
    "write_best",
]

SET_TABLES = (*PLAN_TABLES, "design", "run", "calibration", "constraints")
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
    engine: tuple[tuple[str, Any], ...] = ()
    """``[model]``'s engine options (:data:`ENGINE_KEYS`: ``max_num_batched_tokens``,
    ``enforce_eager``, ``disable_custom_all_reduce``, ``kv_policy``, ``episodes_per_replica``) as
    ``(name, value)`` pairs, set on the design's :class:`~pipesim.compute.EngineConfig` (the last
    on its :class:`~pipesim.compute.Cluster`, as ``slots_per_replica``, which a plan spec takes
    too, :attr:`PlanSpec.episodes_per_replica`; the others it has not)."""
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
    """Whether ``path`` is a TOML or YAML file whose top level says ``kind = "compute"``, or that
    lacks ``kind`` but holds a ``[design]`` or ``[run]`` (a run spec missing its marker, which
    :func:`load` refuses naming ``kind``: :func:`~pipesim.plan.runspec_checks.missing_kind`);
    False for anything else (a registered scenario name, a slot scenario file, a file that cannot
    be read: the slot path reports those)."""
    p = Path(str(path))
    if p.suffix.lower() not in specfile.SUFFIXES or not p.is_file():
        return False
    try:
        data = specfile.read(p)
    except PlanError:
        return False
    return data.get("kind") == KIND or missing_kind(data) is not None


def read(path: str | Path) -> dict[str, Any]:
    """The tables of a run-spec file (PlanError naming the file when it cannot be read)."""
    if (refusal := not_a_spec_file(path)) is not None:  # what a run spec is, and what the file is
        raise refusal
    return specfile.read(path)


def plan_tables(data: Mapping[str, Any]) -> dict[str, Any]:
    """A run spec's ``[cluster]``, ``[model]``, ``[workload]``, ``[constraints]`` and ``[run]`` as
    plan-spec tables, the calibrated mfu and response lengths applied: what ``pipesim plan`` reads
    of a run spec."""
    for k in PLANNED_TABLES:  # a table given as a list or a number: said so, not read as missing
        if k in data and data[k] is not None and not isinstance(data[k], Mapping):
            raise PlanError(f"{k} must be a table, got {shown(data[k])}", k)
    out: dict[str, Any] = {
        k: copy.deepcopy(dict(data[k])) for k in PLANNED_TABLES if k in data and isinstance(data[k], Mapping)
    }
    for k in ENGINE_KEYS:  # a run spec's own [model] keys (read_engine), not the plan spec's
        out.get("model", {}).pop(k, None)
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
    # a calibrated sync_time_s is a factor on the model's sync (runspec_calibration.calibrated_sync)
    if search:
        out["search"] = search
    return out


def from_dict(data: Mapping[str, Any], base: Path | None = None) -> RunSpec:
    """The :class:`RunSpec` of a run spec's data; ``base`` resolves a relative trace path."""
    check_tables(data)
    if "design" not in data:
        raise PlanError(
            "[design] is missing (a run spec needs one design: placement, tp, eta, update, ...)", "design"
        )
    design = read_design(data["design"])
    steps, seed = run_table(data)
    engine = read_engine(data)
    cal = calibrated(data)
    tables = plan_tables(data)
    tables["search"] = {
        **tables.get("search", {}),
        "steps": steps,
        "screen_steps": 1,
        "seeds": 1,
        "sim_seed": seed,
    }
    try:
        spec = plan_spec(tables, cal, base, logged_design(data, base))
    except PlanError as e:
        raise as_run_key(e, cal, tuple(RUN_IN_SEARCH)) from None
    check_design(spec, design, engine=engine)  # first: a cluster too large names cluster.n_gpus
    check_run_pool(spec, design, steps, dict(engine).get("episodes_per_replica"))
    return RunSpec(
        plan=spec,
        design=design,
        steps=steps,
        seed=seed,
        engine=engine,
        data=copy.deepcopy(dict(data)),
        base=base,
    )


def plan_spec(
    tables: Mapping[str, Any],
    cal: Mapping[str, float],
    base: Path | None = None,
    logged: Design | LoggedSetup | None = None,
) -> PlanSpec:
    """The :class:`PlanSpec` of plan-spec ``tables`` (:func:`plan_tables`) with the calibrated
        overheads ``cal`` applied (the ones no table key holds), and the calibrated sync as a factor on
        the model's sync at the ``logged`` design, on the logged cluster and model where they moved
    (:func:`~pipesim.plan.runspec_calibration.calibrated_sync`)."""
    spec = specfile.from_dict(dict(tables), base)
    spec = spec.with_(
        step_overhead_s=cal.get("step_overhead_s", 0.0),
        iteration_overhead_s=cal.get("iteration_overhead_s"),
        framework=_fitted_profile(spec, cal),
    )
    return calibrated_sync(spec, cal, logged)


def _fitted_profile(spec: PlanSpec, cal: Mapping[str, float]) -> Any:
    """``model.framework`` with the calibrated profile constants (:data:`PROFILE_KEYS`) in place;
    without a framework, the one-MFU profile (``ideal`` at ``model.mfu``) is the one calibrated."""
    from pipesim.compute.profiles import profile

    fitted: dict[str, Any] = {k: cal[k] for k in PROFILE_KEYS if k in cal}
    if not fitted:
        return spec.framework
    base = spec.framework
    if base is None:
        base = dataclasses.replace(profile("ideal"), fwd_bwd_efficiency=spec.mfu, fwd_efficiency=spec.mfu)
    names = ", ".join(sorted(fitted))
    source = f"{base.source}; calibrated from a log ([calibration]: {names})"
    try:
        return dataclasses.replace(base, **fitted, source=source)
    except ValueError as e:
        key = f"calibration.values.{getattr(e, 'field', '') or next(iter(fitted))}"
        raise PlanError(f"{key}: {e}", key) from None


def load_plan_spec(data: Mapping[str, Any], base: Path | None = None) -> PlanSpec:
    """What ``pipesim plan`` reads of a run spec: its tables as a plan spec (the default space),
    every calibrated value applied. The rest of the run spec is checked as ``pipesim run`` checks
    it (no unknown table, ``[design]`` and ``[run]`` well formed), though the plan searches its own
    designs: a typo is refused, not ignored."""
    check_tables(data)
    design = read_design(data["design"]) if "design" in data else None
    run_table(data)
    engine = read_engine(data)
    per = dict(engine).get("episodes_per_replica")  # a plan spec's key too: every design's slots
    if engine := tuple((k, v) for k, v in engine if k != "episodes_per_replica"):
        import warnings  # checked, and said: the plan's engines run without them

        keys = ", ".join(f"model.{k}" for k, _ in engine)
        warnings.warn(
            f"{keys}: pipesim plan's engines do not take these run-spec keys (a plan spec has none); "
            "the plan's designs run without them, and --export-best carries them to the exported "
            "run spec, which pipesim run runs with them",
            UserWarning,
            stacklevel=3,
        )
    cal = calibrated(data)
    try:
        spec = plan_spec(plan_tables(data), cal, base, logged_design(data, base))
    except PlanError as e:  # the sync times are the run spec's [run] keys; the rest is the plan's
        raise as_run_key(e, cal, ("search.sync_time_s", "search.inflight_load_time_s")) from None
    return _with_own_design(spec.with_(episodes_per_replica=per), design)


def _with_own_design(spec: PlanSpec, design: Design | None) -> PlanSpec:
    """The plan of a run spec searches its design's sync interval beside the default space's
    (verl's fully-async ``trigger_parameter_sync_step``: a plan that searched every-step syncs
    alone charged each step the whole sync), and runs the design itself as the baseline every
    design is compared with (``[baseline]``), where the design fits the cluster."""
    if design is None:
        return spec
    space = spec.space
    if design.sync_every not in space.sync_every:
        space = dataclasses.replace(space, sync_every=tuple(sorted({*space.sync_every, design.sync_every})))
    spec = spec.with_(space=space)
    if spec.baseline is None:
        # PlanSpec checks a baseline (check_baseline); a design that does not fit the plan's
        # cluster is no baseline
        with contextlib.suppress(PlanError):
            spec = spec.with_(baseline=design)
    return spec


def apply_sets(data: Mapping[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """``data`` with each ``table.key=value`` (``design.eta=2``) set; PlanError naming a bad pair
    (:func:`pipesim.plan.sets.apply_sets` on a run spec's tables)."""
    from pipesim.plan.sets import apply_sets as set_keys

    return set_keys(data, sets, SET_TABLES, "a run spec")


def load(path: str | Path, sets: Sequence[str] = (), seed: int | None = None) -> RunSpec:
    """The run spec of a file with ``--set`` pairs and a seed applied; every error names the file."""
    data = read(path)
    try:
        check_sets_not_calibrated(data, sets)
        data = apply_sets(with_logged_design(data, sets), sets)  # the sync was measured on the file's design
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
    if fmt == "yaml":  # text a YAML 1.1 reader would take for a number ('09', '1e3') is quoted
        from pipesim.io.yamlfile import dump_yaml

        return dump_yaml(ordered, sort_keys=False)
    import tomli_w

    return tomli_w.dumps(ordered)


def run(rs: RunSpec, record: bool = False, observer: Any = None) -> Any:
    """Run the spec's design on the compute engine (:func:`pipesim.compute.run_compute`): the same
    cluster, scenario, trainer and routing a plan runs for that design
    (:func:`pipesim.plan.evaluate.run_design`), the calibrated overheads in its plan spec.
    ``observer`` sees each batch the trainer takes (the command line's progress bar)."""
    from pipesim.compute.cluster import run_compute

    spec, d = rs.plan, rs.design
    _, cluster = design_cluster(spec, d, rs.engine)  # the spec's engine and slot options set
    sync = sync_seconds(spec, d, cluster)
    n_slots = cluster.n_slots  # model.episodes_per_replica (else max_num_seqs) per replica
    sc = scenario(spec, d, rs.steps, rs.seed, n_slots=n_slots, steps_key="run.steps")
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
        observer=observer,
    )


# the export side (a plan's design as a run spec) lives in runspec_export; its names are here too
from pipesim.plan.runspec_export import design_to_runspec, relocated, resolved, spec_tables, write_best  # noqa: E402, I001
