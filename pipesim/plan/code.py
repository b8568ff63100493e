"""The recommended design as code: Python a user pastes to build and run the design a plan
picked (``pipesim.compute.run_compute``), and the wrapping that fits it on a page."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pipesim.compute import GPUS, MODELS, LogNormalLengths, TrainerConfig
from pipesim.compute.engine_config import DEFAULT_ITERATION_OVERHEAD_S
from pipesim.plan.build import (
    batch_knobs,
    design_cluster,
    routing,
    scenario,
    sync_seconds,
    trainer_config,
)
from pipesim.plan.space import Design, PlanSpec

__all__ = ["code_note", "scenario_code", "wrap_code"]


def _entry(table: Mapping[str, Any], table_name: str, value: Any) -> str:
    """``value`` as code: ``MODELS["qwen3-8b"]`` where the catalog ``table`` holds it, else its
    constructor's literal (``ModelSpec(...)``, ``GPUSpec(...)``: a frozen dataclass whose repr
    builds it again, every field a number, string or bool). A model read from a ``config.json``
    or a GPU given by its figures is no catalog entry, and its name alone raised ``KeyError``."""
    key = next((k for k, v in table.items() if v == value), None)
    return f"{table_name}[{key!r}]" if key is not None else repr(value)


def scenario_code(spec: PlanSpec, d: Design) -> str:
    """Python that builds and runs design ``d`` (``pipesim.compute.run_compute``), formatted."""
    return _as_formatted(_program(spec, d))


def code_note(runs: Sequence[Mapping[str, float]], seeds: Sequence[int]) -> str:
    """What :func:`scenario_code` reproduces, said next to it: one run at the scenario's seed
    (0: the code passes no ``seed``), whose samples/h is not the plan's headline, the mean over
    the plan's simulation ``seeds`` (``runs``, one per seed, in that order)."""
    thr = [float(r["throughput_per_hour"]) for r in runs]
    if not thr:
        return ""
    mean = sum(thr) / len(thr)
    span = f"seeds {seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else f"seed {seeds[0]}"
    if 0 in seeds and len(seeds) == len(thr):
        got = f"{thr[list(seeds).index(0)]:,.0f} samples/h"
    else:
        got = "a seed the plan did not run"
    if len(thr) == 1 and 0 in seeds:
        return f"# the code below runs seed 0, the plan's one seed ({got})"
    return (
        f"# the code below runs one seed, 0 ({got}); the plan's {mean:,.0f} samples/h is the mean over "
        f"{span}: run_compute(..., seed=S) runs seed S"
    )


_DEFAULT_OVERHEAD_S = DEFAULT_ITERATION_OVERHEAD_S  # a spec's other (calibrated) one is written out


def _program(spec: PlanSpec, d: Design) -> str:
    """:func:`scenario_code`'s program as built, one statement a line, the reprs' quotes kept."""
    eng, cl = design_cluster(spec, d)  # its slots: model.episodes_per_replica, else max_num_seqs
    sc = scenario(spec, d, spec.steps, n_slots=cl.n_slots)
    w = spec.workload
    if isinstance(w.response, LogNormalLengths):
        work = repr(w)
    else:
        work = "...  # the spec's TokenWorkload (a response trace)"
    tcfg = trainer_config(spec, d)
    base = spec.sync_time_s
    if base is None and spec.sync_scale == 1:
        sync = "None"  # the cluster's default
    else:
        sync = repr(sync_seconds(spec, d, cl))  # the run's, its trainer's
    return "\n".join(
        [
            "import pipesim",
            "from pipesim.compute import *",
            f"engine = EngineConfig(model={_entry(MODELS, 'MODELS', spec.model)}, "
            f"gpu={_entry(GPUS, 'GPUS', spec.gpu)}, "
            f"tp={d.tp}, max_model_len={eng.max_model_len!r}, max_num_seqs={eng.max_num_seqs}, "
            f"gpu_memory_utilization={eng.gpu_memory_utilization}"
            + (", share_group_prefix=True" if eng.share_group_prefix else "")
            + (f", tool_kv={eng.tool_kv!r}" if eng.tool_kv != "keep" else "")
            + "".join(
                f", {k}={getattr(eng, k)!r}"
                for k in ("weight_dtype", "kv_dtype")
                if getattr(eng, k) != "bf16"
            )
            + (  # a calibrated decode overhead (pipesim calibrate): the code fell back to 1 ms
                f", iteration_overhead_s={eng.iteration_overhead_s!r}"
                if eng.iteration_overhead_s != _DEFAULT_OVERHEAD_S
                else ""
            )
            + ")",
            f"cluster = Cluster(engine=engine, n_gpus={spec.n_gpus}, trainer_gpus={d.trainer_gpus}"
            + (f", env_workers={spec.env_workers}" if spec.env_workers is not None else "")
            + (f", slots_per_replica={cl.slots_per_replica}" if cl.slots_per_replica is not None else "")
            + ")",
            f"workload = {work}",
            f"scenario = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size={spec.batch_size}, "
            f"steps={spec.steps}, max_staleness={d.eta}), admission=pipesim.{sc.admission!r}, "
            f"weight_update=pipesim.{sc.weight_update!r}, pool_size={sc.pool_size!r}"
            + (f", pool_draw={sc.pool_draw!r})" if sc.pool_size is not None else ")"),
            f"trainer = TrainerConfig(model=engine.model, gpu=engine.gpu, "
            f"n_gpus={spec.n_gpus if d.colocated else d.trainer_gpus}, "
            + (f"mfu={tcfg.mfu}" if tcfg.profile is None else f"profile={tcfg.profile!r}")
            + _trainer_extras(spec, d)
            + ")",
            f"run = run_compute(scenario, cluster, workload, trainer=trainer, sync_time_s={sync}"
            + (f", routing=pipesim.{rule!r})" if (rule := routing(spec)) is not None else ")"),
        ]
    ).replace("inner=", "inner=pipesim.")


def _as_formatted(code: str) -> str:
    """``code`` as ``ruff format`` leaves it, for the lines :func:`scenario_code` makes: a blank
    line after the imports, and each string literal in double quotes (the reprs inside give
    single) unless it holds one. A user pastes it into a project that formats its code."""
    import io
    import tokenize

    out, last = [], (1, 0)
    lines = code.splitlines(keepends=True)
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.ENDMARKER:
            break
        text = tok.string
        if tok.type == tokenize.STRING and text[:1] == "'" and '"' not in text and "\\" not in text:
            text = '"' + text[1:-1] + '"'
        if tok.start != last:  # the source between tokens (spaces, line ends) as it was
            out.append(_between(lines, last, tok.start))
        out.append(text)
        last = tok.end
    out.append(_between(lines, last, (len(lines), len(lines[-1]))))
    body = "".join(out)
    head, sep, rest = body.partition("from pipesim.compute import *\n")
    return head + sep + "\n" + rest if sep else body


def _between(lines: list[str], a: tuple[int, int], b: tuple[int, int]) -> str:
    """The source text from position ``a`` to ``b`` (tokenize's (row, column), rows from 1)."""
    if a[0] == b[0]:
        return lines[a[0] - 1][a[1] : b[1]]
    return lines[a[0] - 1][a[1] :] + "".join(lines[a[0] : b[0] - 1]) + lines[b[0] - 1][: b[1]]


def _trainer_extras(spec: PlanSpec, d: Design) -> str:
    """The trainer's arguments that differ from :class:`~pipesim.compute.TrainerConfig`'s defaults
    (its batch knobs, the old log-prob recompute, the batch order), as ``, name=value`` text."""
    tcfg = trainer_config(spec, d)
    default = {f.name: f.default for f in dataclasses.fields(TrainerConfig)}
    names = ("recompute_old_logp", "reference_model", *batch_knobs(spec), "batch_order")
    return "".join(f", {n}={getattr(tcfg, n)!r}" for n in names if getattr(tcfg, n) != default[n])


def wrap_code(code: str, width: int = 96) -> str:
    """Each line of ``code`` longer than ``width`` broken after its first ``(`` into one argument
    per line (top-level commas only, none inside a string literal: a framework profile's
    ``source`` holds commas and brackets, and splitting at them printed code that did not parse),
    so the recommended code fits a page; a call that is itself an argument
    (``weight_update=SyncEveryK(...),``) keeps its indent and its comma."""
    out = []
    for line in code.splitlines():
        start = line.find("(")
        comma = "," if line.endswith("),") else ""
        body = line[:-1] if comma else line
        if len(line) <= width or start < 0 or not body.endswith(")"):
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        args, depth, cur = [], 0, ""
        quote, escaped = "", False  # inside a string literal: its brackets and commas are text
        for ch in body[start + 1 : -1]:
            if quote:
                escaped, quote = (False, quote) if escaped else (ch == "\\", "" if ch == quote else quote)
            elif ch in "'\"":
                quote = ch
            elif ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            if ch == "," and depth == 0 and not quote:
                args.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            args.append(cur.strip())
        out.append(line[: start + 1])
        out += [f"{indent}    {a}," for a in args]
        out.append(f"{indent}){comma}")
    wrapped = "\n".join(out)
    return wrapped if wrapped == code else wrap_code(wrapped, width)  # an argument may be long too
