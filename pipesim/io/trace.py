"""Export a run's timeline as Chrome / Perfetto trace-event JSON.

Why this format: it is what ``chrome://tracing`` and https://ui.perfetto.dev open directly, and
what PyTorch's profiler writes, so a simulated pipeline can be laid next to a real profile of the
trainer or the inference engine. Simulated seconds map to trace microseconds one to one (1 s of
simulation = 1 s in the viewer).

Layout: process 1 "generation" has one thread per slot (``slot N`` or ``rK/slotN``) holding one
complete event ("X") per version segment of an episode plus "paused" events during syncs;
process 2 "trainer" holds the training steps and process 3 "weight sync" the syncs. Event args
carry the episode id, versions and the status, so Perfetto's SQL can query staleness.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from pipesim.results.run import RunResult

GEN_PID, TRAIN_PID, SYNC_PID = 1, 2, 3
US = 1_000_000.0


def _meta(pid: int, name: str, tid: int | None = None) -> dict[str, Any]:
    if tid is None:
        return {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}}
    return {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}


def _num(x: Any) -> Any:
    if isinstance(x, float) and math.isnan(x):
        return None
    return x.item() if hasattr(x, "item") else x


def events_to_trace(
    events: pd.DataFrame, episodes: pd.DataFrame | None = None, name: str = "pipesim"
) -> dict[str, Any]:
    """Trace-event JSON (a dict) from a ``RunResult.events`` table and optional ``episode_table``."""
    missing = {"kind", "lane", "start_s", "end_s", "version", "episode_id"} - set(events.columns)
    if missing:
        raise ValueError(f"events table lacks columns {sorted(missing)}")
    info = episodes.set_index("episode_id") if episodes is not None and len(episodes) else None
    out: list[dict[str, Any]] = [
        _meta(GEN_PID, f"{name}: generation"),
        _meta(TRAIN_PID, f"{name}: trainer"),
        _meta(SYNC_PID, f"{name}: weight sync"),
        _meta(TRAIN_PID, "trainer", 0),
        _meta(SYNC_PID, "sync", 0),
    ]
    gen = events[events["kind"].isin(["gen", "pause"])]
    lanes = sorted(set(gen["lane"]), key=lambda s: (len(s), s))
    tids = {lane: i + 1 for i, lane in enumerate(lanes)}
    for lane, tid in tids.items():
        out.append(_meta(GEN_PID, lane, tid))
        out.append(
            {"ph": "M", "pid": GEN_PID, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}
        )
    rows: Any = events.itertuples(index=False)
    for row in rows:
        ts, dur = float(row.start_s) * US, max(float(row.end_s) - float(row.start_s), 0.0) * US
        args: dict[str, Any] = {"version": int(row.version)}
        if row.kind in ("gen", "pause"):
            args["episode_id"] = int(row.episode_id)
            if info is not None and row.episode_id in info.index:
                ep = info.loc[row.episode_id]
                args.update(
                    {k: _num(ep[k]) for k in ("task_id", "duration_s", "status", "version") if k in ep}
                )
                args["started_version"] = args.pop("version", None)
                args["version"] = int(row.version)
            ev = {
                "ph": "X",
                "pid": GEN_PID,
                "tid": tids[row.lane],
                "ts": ts,
                "dur": dur,
                "args": args,
                "name": f"ep {row.episode_id} v{row.version}" if row.kind == "gen" else "paused (sync)",
                "cat": row.kind,
            }
        elif row.kind == "train":
            ev = {
                "ph": "X",
                "pid": TRAIN_PID,
                "tid": 0,
                "ts": ts,
                "dur": dur,
                "name": f"train v{row.version}",
                "cat": "train",
                "args": args,
            }
        elif row.kind == "sync":
            ev = {
                "ph": "X",
                "pid": SYNC_PID,
                "tid": 0,
                "ts": ts,
                "dur": dur,
                "name": f"sync v{row.version}",
                "cat": "sync",
                "args": args,
            }
        else:
            continue
        out.append(ev)
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"source": "pipesim", "run": name}}


def run_to_trace(result: RunResult) -> dict[str, Any]:
    """Trace-event JSON (a dict) of one run."""
    return events_to_trace(result.events, result.episode_table, result.scenario.name)


def write_trace(result: RunResult | pd.DataFrame, path: str | Path) -> Path:
    """Write the trace of a run (or of an events table) to ``path``; returns the path."""
    trace = run_to_trace(result) if isinstance(result, RunResult) else events_to_trace(result)
    p = Path(path)
    p.write_text(json.dumps(trace, separators=(",", ":")))
    return p
