"""Compact HTML tables of a scenario and of a run, for notebooks (``_repr_html_``).

:func:`attach_views` gives :class:`~pipesim.Scenario` and :class:`~pipesim.RunResult` their
``_repr_html_`` (what Jupyter calls to draw an object): ``pipesim/__init__.py`` calls it once, at
the edge where the layers are composed, so the config and results layers never import io (the
notebook view belongs to presentation, which sits above them). The tables are plain HTML with
inline styles (no scripts), escaped.
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any

from pipesim.config import Scenario

__all__ = [
    "COMPUTE_HEADLINE_KEYS",
    "HEADLINE_KEYS",
    "LAUNCHED_PARTS",
    "attach_views",
    "run_html",
    "scenario_html",
    "truncated_label",
]

HEADLINE_KEYS = (
    ("throughput_per_hour", "episodes / hour"),
    ("gen_util", "slot utilisation"),
    ("staleness_mean", "staleness mean"),
    ("staleness_max", "staleness max"),
    ("length_bias", "length bias"),
    ("episodes_launched", "episodes launched"),
    ("episodes_trained", "trained"),
    ("episodes_in_flight", "in flight"),
    ("episodes_buffered", "buffered"),
    ("episodes_discarded", "discarded"),
    ("episodes_aborted", "aborted"),
    ("episodes_failed", "failed"),
    ("episodes_truncated", "timed out"),
    ("trainer/idle_ratio", "trainer idle"),
    ("sim_time_s", "simulated seconds"),
)
"""The rows of a run's notebook table and of ``pipesim.compare``'s, as (summary key, label). The
episodes launched come with every place one can end up, so the rows under it add up to it:
launched = trained + in flight + buffered + discarded + aborted + failed (the summary's books).
"Dropped", elsewhere in pipesim, is the last three together (``p.n_dropped``), so no row bears
that name. "Timed out" counts the episodes cut at the timeout whatever their fate, so it is no
part of the sum."""
LAUNCHED_PARTS = (
    "episodes_trained",
    "episodes_in_flight",
    "episodes_buffered",
    "episodes_discarded",
    "episodes_aborted",
    "episodes_failed",
)
"""The summary keys whose sum is ``episodes_launched`` (every launched episode is in one)."""
_TABLE = 'style="border-collapse:collapse;font:12px sans-serif;text-align:left"'
_CELL = 'style="padding:1px 8px;border-bottom:1px solid #eee;vertical-align:top"'


def truncated_label(run: object) -> str:
    """What a truncated episode is in ``run``'s page, by the engine that ran it: a slot run's is one
    cut at its timeout policy's cap ("timed out", as the timeline's mark reads; the slot engine has
    no response cap), a compute run's one cut at the response cap (it has no timeout). ``run``: a
    run (``RunResult``, a loaded ``SavedRun``, a ``ComputeRun``) or its engine's name, ``"slots"``
    or ``"compute"``. A bare scenario (no engine of its own) reads as a compute run's unless it has
    a timeout: :mod:`pipesim.io.compare` passes a compute run's scenario."""
    if isinstance(run, str):
        engine: object = run
    elif hasattr(run, "result") and hasattr(run, "timelines"):  # a ComputeRun
        engine = "compute"
    else:
        engine = getattr(run, "engine", None)
    if engine is None:  # a scenario
        engine = "slots" if getattr(run, "timeout", None) is not None else "compute"
    return "cut at the response cap" if engine == "compute" else "timed out"


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _rows(pairs: list[tuple[str, Any]]) -> str:
    return "".join(
        f"<tr><th {_CELL}>{html.escape(k)}</th><td {_CELL}>{html.escape(_fmt(v))}</td></tr>" for k, v in pairs
    )


def _table(title: str, pairs: list[tuple[str, Any]]) -> str:
    caption = f'<caption style="text-align:left;font-weight:bold">{html.escape(title)}</caption>'
    return f"<table {_TABLE}>{caption}{_rows(pairs)}</table>"


UNUSED_BY_COMPUTE = ("train_time_s", "durations")
"""Scenario fields a compute-engine run leaves at their defaults and does not read (the trainer is
timed from its tokens, lengths come from the workload): its page does not show them."""


def scenario_pairs(scenario: Scenario, skip: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """(label, value) rows: the pipeline's fields, then each policy by its repr (``skip``: names
    left out; a compute run's, :data:`UNUSED_BY_COMPUTE`, also labels ``max_staleness`` as the
    design's eta, a bound on how far generation runs ahead, beside a measured staleness)."""
    p = scenario.pipeline
    compute = skip == UNUSED_BY_COMPUTE
    named = {"max_staleness": "max_staleness (eta: generation ahead of training)"} if compute else {}
    pairs: list[tuple[str, Any]] = [
        (named.get(f.name, f.name), getattr(p, f.name)) for f in dataclasses.fields(p) if f.name not in skip
    ]
    for name in ("durations", "admission", "weight_update", "batching", "timeout", "failures", "replicas"):
        value = getattr(scenario, name)
        if value is not None and name not in skip:
            pairs.append((name, repr(value)))
    from pipesim.io.api import pool_len  # the pool the run drew (a short trace is all of it)

    pairs += [("seed", scenario.seed), ("pool_size", pool_len(scenario))]
    return pairs


def scenario_html(scenario: Scenario) -> str:
    """The scenario as a two-column table (field, value)."""
    return _table(f"Scenario {scenario.name}", scenario_pairs(scenario))


COMPUTE_HEADLINE_KEYS = (
    ("step_time_s_mean", "mean step (s)"),
    ("train_time_s_mean", "mean train time (s)"),
    ("decode_tokens_per_s", "decode tokens / s"),
    ("gpu_busy_share", "GPU busy share"),
    ("engine_busy_share", "engine busy share"),
    ("offpolicy_token_share", "off-policy token share"),
    ("n_replicas", "engine replicas"),
)
"""Headline rows a compute-engine run adds (its summary has them; a slot run's does not)."""
COMPUTE_GEN_UTIL_LABEL = "slot utilisation (of max_num_seqs places; the GPUs': engine busy share)"
"""``gen_util``'s label on a compute run's page: a replica's slots are its ``max_num_seqs`` places,
so it reads low for engines that decode all the time with a few dozen sequences
(docs/compute.md); the walkthrough read 0.036 as the headline of a busy engine."""


def run_html(result: Any) -> str:
    """A run (RunResult, a loaded SavedRun or a ComputeRun) as its headline numbers beside its
    scenario. A ComputeRun's numbers are its own summary's (the one ``pipesim run SPEC`` prints)."""
    s = result.summary()
    inner = result.result if hasattr(result, "result") and hasattr(result, "timelines") else result
    label = {"episodes_truncated": truncated_label(result)}
    if "engine_busy_share" in s:  # a compute run: its slots are the engines' max_num_seqs places
        label["gen_util"] = COMPUTE_GEN_UTIL_LABEL
    head = [(label.get(k, text), s[k]) for k, text in HEADLINE_KEYS + COMPUTE_HEADLINE_KEYS if k in s]
    pool = getattr(inner, "pool", None)
    if pool is not None:
        head.append(("durations", f"a pool of {len(pool):,} given to run (not the scenario's model)"))
    saved_compute = inner is result and getattr(inner, "engine", "slots") == "compute"
    if not getattr(inner, "scenario_exact", True) and not saved_compute:
        # a saved compute run's scenario_repr is the kernel's stand-in (its durations and train
        # time placeholders the engine never read): its tables below say what ran
        head.append(("policies as run", inner.scenario_repr))
    scen = inner.scenario
    name = scen.name
    cell = 'style="vertical-align:top;padding-right:24px"'
    if saved_compute:
        from pipesim.io.saved_scenario import saved_name

        name = saved_name(scen)  # the run's name, not the stand-in's
        head.append(("engine", "compute: rerun it from the run spec its meta.json keeps"))
        head.append(("per-replica views", COMPUTE_VIEWS_NOT_SAVED))
        right = _table("Cluster", saved_cluster_pairs(getattr(inner, "runspec", None))) + _table(
            f"Scenario {name}", scenario_pairs(scen, UNUSED_BY_COMPUTE)
        )
    elif inner is result:
        right = scenario_html(scen)
    else:  # a compute run: its cluster, and the scenario's fields it reads
        right = _table("Cluster", cluster_pairs(result.cluster)) + _table(
            f"Scenario {name}", scenario_pairs(scen, UNUSED_BY_COMPUTE)
        )
    return (
        f"<div><table><tr><td {cell}>{_table(f'Run of {name}', head)}</td>"
        f"<td {cell}>{right}</td></tr></table></div>"
    )


def cluster_pairs(cluster: Any) -> list[tuple[str, Any]]:
    """(label, value) rows of a compute run's cluster: model, GPU, GPUs, the split, the engine."""
    e = cluster.engine
    return [
        ("model", e.model.name),
        ("gpu", e.gpu.name),
        ("n_gpus", cluster.n_gpus),
        ("trainer_gpus", cluster.trainer_gpus or "0 (colocated)"),
        ("tp", e.tp),
        ("max_num_seqs", e.max_num_seqs),
        ("max_model_len", e.max_model_len),
    ]


COMPUTE_VIEWS_NOT_SAVED = (
    "not saved: the KV-cache occupancy and decode tokens/s of each engine replica are drawn by "
    "`pipesim run SPEC --html` (a saved run keeps the kernel's tables, not the engines' series)"
)
"""The head row of a saved compute run's page in place of the engine panels it cannot draw."""


def saved_cluster_pairs(runspec: Any) -> list[tuple[str, Any]]:
    """(label, value) rows of a saved compute run's cluster (:func:`cluster_pairs`), built from the
    run spec its ``meta.json`` keeps (``SavedRun.runspec``: ``{"runspec": data, "recipe": ...}``,
    paths made absolute at the save) as ``pipesim run SPEC`` built it. A spec that no longer
    builds here (a model file moved) gives the keys as the spec wrote them, and says why; a run
    saved without its spec says that."""
    data = runspec.get("runspec") if isinstance(runspec, dict) else None
    if not isinstance(data, dict):
        return [("run spec", "not kept in meta.json (saved before pipesim kept it)")]
    from pipesim.plan.build import design_cluster
    from pipesim.plan.runspec import from_dict

    try:
        rs = from_dict(data)
        return cluster_pairs(design_cluster(rs.plan, rs.design, rs.engine)[1])
    except (ValueError, OSError, KeyError, TypeError) as exc:  # PlanError is a ValueError
        why = " ".join(str(exc).split())
    tables: list[dict[str, Any]] = [
        t if isinstance(t := data.get(k), dict) else {} for k in ("model", "cluster", "design")
    ]
    model, cl, design = tables
    written = [
        ("model", model.get("name")),
        ("gpu", cl.get("gpu")),
        ("n_gpus", cl.get("n_gpus")),
        ("placement", design.get("placement")),
        ("tp", design.get("tp")),
        ("max_num_seqs", model.get("max_num_seqs")),
        ("max_model_len", model.get("max_model_len")),
    ]
    return [(k, v) for k, v in written if v is not None] + [("note", f"as the spec writes them ({why})")]


def attach_views() -> None:
    """Give scenarios and runs their notebook view: ``_repr_html_`` is :func:`scenario_html` on
    :class:`~pipesim.Scenario` and :func:`run_html` on :class:`~pipesim.RunResult` (each called with
    the object, as a method is). Idempotent."""
    from pipesim.results.run import RunResult

    setattr(Scenario, "_repr_html_", scenario_html)  # noqa: B010 - a class attribute set from io
    setattr(RunResult, "_repr_html_", run_html)  # noqa: B010
