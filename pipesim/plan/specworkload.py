"""A spec file's ``[workload]`` table: the :class:`TokenWorkload` and the samples per step.

The table is the one part of a plan spec that becomes a distribution rather than a number: the
response lengths (``response = {median_tokens, sigma}``, a log-normal, or ``response_trace =
{path, column}``, a CSV of measured lengths read relative to the spec file), the agent turns
(``agent``, :class:`~pipesim.compute.AgentTurns`' fields) and the batch (``batch_size``, or
``prompts_per_step`` x ``samples_per_prompt``, at most ``MAX_POOL_TASKS``). Apart from
:mod:`pipesim.plan.specfile`, which checks the other tables and composes the :class:`PlanSpec`,
because these readers build workload models and read a trace file; each error is still one
:class:`PlanError` naming ``workload.<key>``. ``specfile`` still imports every name here.
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Any

from pipesim.compute import AgentTurns, EmpiricalLengths, LogNormalLengths, TokenWorkload
from pipesim.core.errors import MAX_POOL_TASKS
from pipesim.core.validate import shown
from pipesim.plan.checks import MAX_TOKENS, PlanError, Table, nested
from pipesim.plan.runspec_calibration import MAX_STEP_TIME_S

__all__ = ["read_workload"]

_AGENT = {f.name: f.default for f in dataclasses.fields(AgentTurns)}


def _response(wl: Table, base: Path | None) -> Any:
    """The response-length model: ``response = {median_tokens, sigma}`` or ``response_trace``."""
    if "response" in wl and "response_trace" in wl:
        msg = "workload.response and workload.response_trace: give one of them, not both"
        raise PlanError(msg, "workload.response")
    if "response_trace" in wl:
        tr = wl.table("response_trace", ("path", "column"), "a table {path, column}")
        tr.require("path", why="the CSV file of response lengths")
        path = Path(tr.string("path"))
        column = tr.string("column", "num_decode_tokens")
        if base is not None and not path.is_absolute():
            path = base / path
        try:
            return EmpiricalLengths.from_csv(path, column)
        except OSError as e:
            msg = f"workload.response_trace.path: cannot read {path}: {e.strerror or e}"
            raise PlanError(msg, "workload.response_trace.path") from None
        except (ValueError, csv.Error) as e:  # the file and column named: the values are theirs
            msg = f"workload.response_trace: {path}, column {column!r}: {e}"
            raise PlanError(msg, "workload.response_trace.path") from None
    r = Table("workload.response", {}, ())
    if "response" in wl:
        r = wl.table("response", ("median_tokens", "sigma"), "a table {median_tokens, sigma}")
    median = float(r.number("median_tokens", 2000.0, above=0, hi=MAX_TOKENS))
    sigma = float(r.number("sigma", 0.8, 0))
    try:
        return LogNormalLengths(median, sigma)
    except ValueError as e:
        raise nested("workload.response", e) from None


def _agent(wl: Table) -> AgentTurns | None:
    if "agent" not in wl:
        return None
    a = wl.table("agent", _AGENT, f"a table of AgentTurns fields ({', '.join(_AGENT)})")
    # token counts and turns at most MAX_TOKENS (a 300-digit int read from 1e308 made a 300-digit
    # message); a tool call's median at most a week, once AgentTurns has checked its spread
    kw = {
        k: a.integer(k, lo=int(k == "turns"), hi=MAX_TOKENS) if isinstance(d, int) else a.number(k, lo=0)
        for k, d in _AGENT.items()
        if k in a
    }
    try:
        agent = AgentTurns(**kw)
    except ValueError as e:
        raise nested("workload.agent", e) from None
    if agent.tool_latency_s > MAX_STEP_TIME_S:  # a longer median is a unit slip (ms for s)
        raise PlanError(
            f"workload.agent.tool_latency_s must be a finite number in [0, {MAX_STEP_TIME_S:g}] (a week), "
            f"got {shown(agent.tool_latency_s)}",
            "workload.agent.tool_latency_s",
        )
    return agent


def read_workload(wl: Table, base: Path | None = None) -> tuple[TokenWorkload, int]:
    """``[workload]``'s :class:`TokenWorkload` and the samples per step (``prompts_per_step`` x
    ``samples_per_prompt``, or ``batch_size``); for the run specs too (stable name)."""
    n = wl.integer("samples_per_prompt", 1, lo=1, hi=MAX_POOL_TASKS)
    try:
        workload = TokenWorkload(
            response=_response(wl, base),
            prompt=wl.integer("prompt_tokens", 512, lo=1, hi=MAX_TOKENS),
            samples_per_prompt=n,
            max_response_tokens=wl.integer("max_response_tokens", 8192, lo=1, hi=MAX_TOKENS),
            max_prompt_tokens=wl.integer("max_prompt_tokens", 4096, lo=1, hi=MAX_TOKENS),
            difficulty_sigma=float(wl.number("difficulty_sigma", 0.0, 0)),
            drift_per_version=float(wl.number("drift_per_version", 0.0, above=-1)),
            agent=_agent(wl),
        )
    except PlanError:
        raise
    except (TypeError, ValueError) as e:
        if getattr(e, "field", "") == "prompt" and "prompt_tokens" in wl:  # the file's names for it
            text = str(e).replace("prompt (", "workload.prompt_tokens (", 1)
            text = text.replace("exceeds max_prompt_tokens", "exceeds workload.max_prompt_tokens")
            raise PlanError(text, "workload.prompt_tokens") from None
        raise nested("workload", e) from None
    if "batch_size" in wl and "prompts_per_step" in wl:
        msg = "workload.batch_size and workload.prompts_per_step: give one of them, not both"
        raise PlanError(msg, "workload.prompts_per_step")
    if "batch_size" in wl:
        return workload, wl.integer("batch_size", lo=1, hi=MAX_POOL_TASKS)
    prompts = wl.integer("prompts_per_step", 32, lo=1, hi=MAX_POOL_TASKS)
    if prompts * n > MAX_POOL_TASKS:  # named here: the spec's batch_size is their product
        raise PlanError(
            f"workload.prompts_per_step ({prompts:,}) x workload.samples_per_prompt ({n:,}) = "
            f"{prompts * n:,} samples a step, more than the {MAX_POOL_TASKS:,} a run may draw",
            "workload.prompts_per_step",
        )
    return workload, prompts * n
