"""A plan spec from a TOML or YAML file (see ``docs/plan.md`` and ``examples/plan_qwen3_8b.toml``).

Tables: ``[cluster]`` (``gpu``, ``n_gpus``), ``[model]`` (``name``, ``max_model_len``,
``max_num_seqs``, ``gpu_memory_utilization``, ``mfu``, ``share_group_prefix``), ``[workload]``
(``prompts_per_step`` or ``batch_size`` in samples, ``samples_per_prompt``, ``prompt_tokens``, ``response`` =
``{median_tokens, sigma}`` or ``response_trace`` = ``{path, column}``, ``max_response_tokens``,
``difficulty_sigma``, ``drift_per_version``, ``agent`` = AgentTurns' fields), ``[constraints]``,
``[space]`` (``placement`` = ``"all"`` or a list of trainer-GPU counts and ``"colocated"``,
``tp``, ``eta``, ``update``, ``sync_every``, ``oversample``) and ``[search]`` (``steps``,
``screen_steps``, ``seeds``, ``method``, ``trials``, ``grid_limit``, ``reduction``, ``min_full``,
``batch``, ``sync_time_s``). Unknown keys are errors naming them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipesim.compute import AgentTurns, EmpiricalLengths, LogNormalLengths, TokenWorkload
from pipesim.plan.space import Constraints, PlanError, PlanSpec, Space, resolve_gpu, resolve_model

_TABLES = {
    "cluster": {"gpu", "n_gpus"},
    "model": {"name", "max_model_len", "max_num_seqs", "gpu_memory_utilization", "mfu", "share_group_prefix"},
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
    "constraints": {"mean_staleness", "max_staleness", "discarded_share", "min_trainer_gpus"},
    "space": {"placement", "tp", "eta", "update", "sync_every", "oversample"},
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
    },
}


def read(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    text = p.read_text()
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
    else:
        import tomllib

        data = tomllib.loads(text)
    if not isinstance(data, dict):
        raise PlanError(f"{path}: a plan spec is a table of tables")
    return data


def _tuple(v: Any) -> tuple[Any, ...]:
    return tuple(v) if isinstance(v, list | tuple) else (v,)


def from_dict(data: dict[str, Any], base: Path | None = None) -> PlanSpec:
    for table, value in data.items():
        if table not in _TABLES:
            raise PlanError(f"unknown table [{table}]; expected {sorted(_TABLES)}")
        bad = set(value) - _TABLES[table]
        if bad:
            raise PlanError(f"[{table}]: unknown keys {sorted(bad)}; expected {sorted(_TABLES[table])}")
    cl, mo = data.get("cluster", {}), data.get("model", {})
    wl, se = data.get("workload", {}), data.get("search", {})
    if "gpu" not in cl or "n_gpus" not in cl or "name" not in mo:
        raise PlanError("a plan spec needs [cluster] gpu and n_gpus, and [model] name")
    n = int(wl.get("samples_per_prompt", 1))
    if "response_trace" in wl:
        tr = wl["response_trace"]
        path = Path(tr["path"])
        if base is not None and not path.is_absolute():
            path = base / path
        response: Any = EmpiricalLengths.from_csv(path, tr.get("column", "num_decode_tokens"))
    else:
        r = wl.get("response", {})
        response = LogNormalLengths(float(r.get("median_tokens", 2000)), float(r.get("sigma", 0.8)))
    try:
        workload = TokenWorkload(
            response=response,
            prompt=int(wl.get("prompt_tokens", 512)),
            samples_per_prompt=n,
            max_response_tokens=int(wl.get("max_response_tokens", 8192)),
            max_prompt_tokens=int(wl.get("max_prompt_tokens", 4096)),
            difficulty_sigma=float(wl.get("difficulty_sigma", 0.0)),
            drift_per_version=float(wl.get("drift_per_version", 0.0)),
            agent=AgentTurns(**wl["agent"]) if "agent" in wl else None,
        )
    except (TypeError, ValueError) as e:
        raise PlanError(f"[workload]: {e}") from None
    if "batch_size" in wl:
        batch = int(wl["batch_size"])
    else:
        batch = int(wl.get("prompts_per_step", 32)) * n
    sp = data.get("space", {})
    kw: dict[str, Any] = {}
    place = sp.get("placement", "all")
    if place != "all":
        kw["placement"] = tuple(0 if p == "colocated" else int(p) for p in _tuple(place))
    for k in ("tp", "eta", "sync_every"):
        if k in sp:
            kw[k] = tuple(int(v) for v in _tuple(sp[k]))
    if "update" in sp:
        kw["update"] = tuple(str(v) for v in _tuple(sp["update"]))
    elif n > 1:
        kw["update"] = ("drain", "partial", "abort_reprefill", "inflight", "abort")
    if "oversample" in sp:
        kw["oversample"] = tuple(float(v) for v in _tuple(sp["oversample"]))
    elif n > 1:
        kw["oversample"] = (1.0, 1.25)
    co = data.get("constraints", {})
    constraints = Constraints(
        mean_staleness=co.get("mean_staleness"),
        max_staleness=co.get("max_staleness"),
        discarded_share=co.get("discarded_share"),
        min_trainer_gpus=int(co.get("min_trainer_gpus", 1)),
    )
    extra = {k: se[k] for k in se}
    for k in ("max_model_len", "max_num_seqs", "gpu_memory_utilization", "mfu", "share_group_prefix"):
        if k in mo:
            extra[k] = mo[k]
    return PlanSpec(
        gpu=resolve_gpu(cl["gpu"]),
        n_gpus=int(cl["n_gpus"]),
        model=resolve_model(mo["name"]),
        workload=workload,
        batch_size=batch,
        constraints=constraints,
        space=Space(**kw),
        **extra,
    )


def load(path: str | Path) -> PlanSpec:
    """The :class:`PlanSpec` of a TOML (``.toml``) or YAML (``.yaml``, ``.yml``) file."""
    return from_dict(read(path), Path(path).parent)
