"""Export a run's timeline as Chrome / Perfetto trace-event JSON.

Why this format: it is what ``chrome://tracing`` and https://ui.perfetto.dev open directly, and
what PyTorch's profiler writes, so a simulated pipeline can be laid next to a real profile of the
trainer or the inference engine. Simulated seconds map to trace microseconds one to one (1 s of
simulation = 1 s in the viewer).

Layout: process 1 "generation" has one thread per slot (``slot N`` or ``rK/slotN``) holding one
complete event ("X") per version segment of an episode plus "paused" events during syncs;
process 2 "trainer" holds the training steps and process 3 "weight sync" the syncs. Event args
carry the episode id, versions and the status, so Perfetto's SQL can query staleness.

Counter tracks ("C" events) of process 1 show the episodes in flight and the finished episodes
waiting in the buffer (a discarded one leaves it when the batch policy drops it: the episode
table's ``discarded_s`` says when, in a run and in a saved run alike; tables saved before that
column existed leave discarded episodes out), and
process 3's track the weights' version. Flow arrows ("s" / "f", one id per episode) run from the end of each
trained episode's last segment to the training step that consumed it; above ``max_flows``
trained episodes they are left out (a viewer slows down with hundreds of thousands of arrows).

Size: a run of more than :data:`~pipesim.io.trace_bounds.MAX_TRACE_EVENTS` events is refused
(:class:`~pipesim.io.trace_bounds.TooManyEvents`); the bound and its checks, asked before a run or
a file's parse where the count is known, are :mod:`pipesim.io.trace_bounds`, re-exported here.
Patch the bound there: this module reads it there too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.io import trace_bounds
from pipesim.io.trace_bounds import (
    FIT_MARGIN,
    MAX_TRACE_EVENTS,
    LineScan,
    TooManyEvents,
    check_event_count,
    check_run_events,
    csv_rows_at_least,
    min_events,
    scan_lines,
)
from pipesim.results.events import EVENT_KINDS
from pipesim.results.run import RunResult

__all__ = [  # the size bound's names are re-exported from pipesim.io.trace_bounds
    "FIT_MARGIN",
    "GEN_PID",
    "LineScan",
    "MAX_EVENT_SLOT",
    "MAX_FLOWS",
    "MAX_TRACE_EVENTS",
    "MAX_TRACE_S",
    "SYNC_PID",
    "TRAIN_PID",
    "US",
    "TooManyEvents",
    "check_event_count",
    "check_run_events",
    "csv_rows_at_least",
    "events_to_trace",
    "flows_note",
    "min_events",
    "run_to_trace",
    "scan_lines",
    "write_trace",
]

GEN_PID, TRAIN_PID, SYNC_PID = 1, 2, 3
US = 1_000_000.0
MAX_TRACE_S = 2**53 / US
"""The latest time (seconds, about 9.0e9: 285 years) an event of a trace may start or end: trace
timestamps are microseconds, which a float holds exactly up to 2**53, and Perfetto reads them into
int64 nanoseconds, which overflow at 9.2e9 s. An ``end_s`` of 1e300 was written as a 1e306 us
event without a word."""
MAX_EVENT_SLOT = 2**24
"""The most slots (and replicas) one run holds (:data:`pipesim.core.errors.MAX_SLOTS`): a
``slot`` or ``replica`` of an events table is -1 (a step or a sync) or in ``[0, 2**24)``."""


def _meta(pid: int, name: str, tid: int | None = None) -> dict[str, Any]:
    if tid is None:
        return {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}}
    return {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}


def _num(x: Any) -> Any:
    if isinstance(x, float) and math.isnan(x):
        return None
    return x.item() if hasattr(x, "item") else x


def _counter(pid: int, name: str, key: str, times: list[float], deltas: list[int]) -> list[dict[str, Any]]:
    """A counter track from (time, +/- change) pairs: one "C" event per distinct time."""
    out: list[dict[str, Any]] = []
    level = 0
    for t, d in sorted(zip(times, deltas)):
        level += d
        ev = {"ph": "C", "pid": pid, "tid": 0, "ts": t * US, "name": name, "args": {key: level}}
        if out and out[-1]["ts"] == ev["ts"]:
            out[-1] = ev  # the level at the end of the instant
        else:
            out.append(ev)
    return out


def _counters_and_flows(
    events: pd.DataFrame,
    episodes: pd.DataFrame | None,
    trained: pd.DataFrame | None,
    tids: dict[str, int],
    max_flows: int,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    syncs = events[events["kind"] == "sync"]
    out += _counter(
        SYNC_PID, "version", "version", [0.0, *syncs["end_s"].astype(float)], [0, *([1] * len(syncs))]
    )
    if episodes is None or not len(episodes):
        return out
    starts = episodes["start_s"].astype(float)
    ends = episodes["end_s"].astype(float).dropna()  # one still running at the end stays counted
    out += _counter(
        GEN_PID, "episodes in flight", "episodes", [*starts, *ends], [1] * len(starts) + [-1] * len(ends)
    )
    train = events[events["kind"] == "train"].sort_values("start_s")
    step_start = train["start_s"].astype(float).tolist()
    waiting = episodes[episodes["status"].isin(["trained", "buffered"]) & episodes["end_s"].notna()]
    times, deltas = waiting["end_s"].astype(float).tolist(), [1] * len(waiting)
    if "discarded_s" in episodes.columns:  # in the buffer from its end until it was dropped
        gone = episodes[episodes["discarded_s"].notna() & episodes["end_s"].notna()]
        times += [*gone["end_s"].astype(float), *gone["discarded_s"].astype(float)]
        deltas += [1] * len(gone) + [-1] * len(gone)
    if trained is not None and len(trained):
        steps = trained["step"].astype(int).tolist()
        times += [step_start[k] for k in steps if k < len(step_start)]
        deltas += [-1] * sum(k < len(step_start) for k in steps)
        if len(trained) <= max_flows:
            last = (
                events[events["kind"] == "gen"]
                .sort_values("end_s")
                .drop_duplicates("episode_id", keep="last")
            )
            seg = {
                int(e): (float(a0), float(b0), str(lane))
                for e, a0, b0, lane in zip(last["episode_id"], last["start_s"], last["end_s"], last["lane"])
            }
            for eid, k in zip(trained["episode_id"].astype(int), steps):
                if eid not in seg or k >= len(step_start):
                    continue
                a0, b0, lane = seg[eid]
                flow = {"name": "trained", "cat": "flow", "id": int(eid)}
                ts = max(a0 * US, b0 * US - 1.0)  # inside the segment, so the arrow binds to it
                out.append({**flow, "ph": "s", "pid": GEN_PID, "tid": tids[lane], "ts": ts})
                out.append(
                    {**flow, "ph": "f", "bp": "e", "pid": TRAIN_PID, "tid": 0, "ts": step_start[k] * US}
                )
    out += _counter(GEN_PID, "buffered", "episodes", times, deltas)
    return out


MAX_FLOWS = 20_000
"""Above this many trained episodes the trace leaves the flow arrows out (a viewer slows to a crawl
drawing them); :func:`flows_note` says so where a command writes a trace."""


def flows_note(trained: pd.DataFrame | None) -> str:
    """`` (no flow arrows: ...)`` where a trace of ``trained`` leaves them out, else empty."""
    n = 0 if trained is None else len(trained)
    if n <= MAX_FLOWS:
        return ""
    return f" (no flow arrows: {n:,} trained episodes, more than the {MAX_FLOWS:,} a trace draws them for)"


def _refuse_first(bad: Any, col: str, what: Callable[[int], str]) -> None:
    """FieldError naming the first row where ``bad`` (a bool array over the rows) holds:
    ``row R of the events {what(R)}``, its field ``col[R]``."""
    rows = np.flatnonzero(bad)
    if len(rows):
        row = int(rows[0])
        raise FieldError(f"row {row} of the events {what(row)}", f"{col}[{row}]")


def _check_events(events: pd.DataFrame) -> None:
    """ValueError naming the first row whose kind, ids or times a run could not have written
    (an edited or foreign events file): they were truncated (1.5), kept as huge ints (1e300),
    clamped (end before start) or dropped (an unknown kind) without a word."""
    kind = events["kind"]
    _refuse_first(  # fast on a categorical
        ~kind.isin(EVENT_KINDS).to_numpy(),
        "kind",
        lambda r: f"has kind = {shown(str(kind.iloc[r]))}: need one of {EVENT_KINDS}",
    )
    # each column's integers and their range: a version counts from 0, a step's or sync's episode,
    # slot and replica are -1; slot and replica (not drawn, but part of the table) only where given
    ranges = {"version": (0, 2**53), "episode_id": (-1, 2**53), "slot": (-1, MAX_EVENT_SLOT)}
    ranges["replica"] = ranges["slot"]
    for col, (lo, hi) in ranges.items():
        if col not in events.columns:
            continue
        column = events[col]
        values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
        ok = np.isfinite(values) & (values == np.round(values)) & (values >= lo) & (values < hi)
        _refuse_first(
            ~ok,
            col,
            lambda r: f"has {col} = {shown(str(column.iloc[r]))}: need an integer in [{lo}, {hi:,})",  # noqa: B023
        )
    if "complete" in events.columns and events["complete"].dtype != np.bool_:
        complete = events["complete"]
        flags = complete.map(lambda v: isinstance(v, bool | np.bool_) or v in ("True", "False"))
        _refuse_first(
            ~flags.to_numpy(dtype=bool),
            "complete",
            lambda r: f"has complete = {shown(complete.iloc[r])}: need True or False",
        )
    gen = events["kind"].isin(("gen", "pause")).to_numpy()  # their lane is their track's name
    named = events["lane"].map(lambda lane: isinstance(lane, str) and lane != "").to_numpy(dtype=bool)
    _refuse_first(
        gen & ~named,
        "lane",
        lambda r: f"has lane = {shown(events['lane'].iloc[r])}: need the slot's name (r0/slot0)",
    )
    start = pd.to_numeric(events["start_s"]).to_numpy(dtype=np.float64)
    end = pd.to_numeric(events["end_s"]).to_numpy(dtype=np.float64)
    _refuse_first(end < start, "end_s", lambda r: f"ends (end_s {end[r]}) before it starts ({start[r]})")
    _refuse_first(  # a run starts at t = 0; -10 s drew at ts = -10,000,000
        start < 0, "start_s", lambda r: f"starts before the run (start_s {start[r]}; a run starts at 0)"
    )
    _refuse_first(  # end >= start here: the end is the later one
        end > MAX_TRACE_S,
        "end_s",
        lambda r: (
            f"ends at end_s {end[r]:g}, past the {MAX_TRACE_S:.3g} s a trace's "
            "microsecond timestamps hold (285 years: seconds in another unit?)"
        ),
    )
    _refuse_overlap(events, start, end)


def _refuse_overlap(events: pd.DataFrame, start: np.ndarray, end: np.ndarray) -> None:
    """FieldError naming two rows that overlap on one track (a slot's lane, the trainer's, the
    sync's): a trace's slices on one thread must nest, and an edited events file whose episode was
    moved onto a busy slot drew them overlapped. A run's own never do: a slot runs one episode at a
    time, its pauses between that episode's segments, and the trainer and the sync one step each.
    Sorted per track by start, each row must start at or after the row before it ends (then, by
    induction, after every earlier row ends)."""
    kind = events["kind"].to_numpy()
    lane_code, lanes = pd.factorize(events["lane"])  # integer codes: 1M rows in ~0.1 s
    track = np.where(kind == "train", -2, np.where(kind == "sync", -3, lane_code))
    order = np.lexsort((end, start, track))  # by track, then start, then end
    t, s, e = track[order], start[order], end[order]
    bad = np.flatnonzero((t[1:] == t[:-1]) & (s[1:] < e[:-1]))
    if len(bad):
        row, prev = int(order[bad[0] + 1]), int(order[bad[0]])
        name = {-2: "trainer", -3: "sync"}.get(int(t[bad[0]])) or str(lanes[t[bad[0]]])
        raise FieldError(
            f"row {row} of the events (start_s {start[row]:g}) starts before row {prev} on the same "
            f"track ({shown(name)}) ends (end_s {end[prev]:g}): a track runs one interval at a time",
            f"start_s[{row}]",
        )


def events_to_trace(
    events: pd.DataFrame,
    episodes: pd.DataFrame | None = None,
    name: str = "pipesim",
    trained: pd.DataFrame | None = None,
    max_flows: int = MAX_FLOWS,
    steps_key: str = "steps",
) -> dict[str, Any]:
    """Trace-event JSON (a dict) from a ``RunResult.events`` table and optional ``episode_table``
    and ``trained`` tables (the counter tracks need the episodes; the flow arrows the trained).
    Too many events: :class:`TooManyEvents`, naming the ``steps_key`` count that fits."""
    missing = {"kind", "lane", "start_s", "end_s", "version", "episode_id"} - set(events.columns)
    if missing:
        raise FieldError(f"events table lacks columns {sorted(missing)}", sorted(missing)[0])
    # the bound read in trace_bounds, where a test lowers it; the train rows: a row a step
    if len(events) > trace_bounds.MAX_TRACE_EVENTS:
        check_event_count(len(events), steps=int((events["kind"] == "train").sum()), steps_key=steps_key)
    for col in ("start_s", "end_s"):
        times = pd.to_numeric(events[col], errors="coerce").to_numpy(dtype=np.float64)
        bad = np.nonzero(~np.isfinite(times))[0]
        if len(bad):
            row = int(bad[0])
            value = str(events[col].iloc[row])
            raise FieldError(
                f"row {row} of the events has {col} = {shown(value)}: need a number", f"{col}[{row}]"
            )
    if not len(events):  # a header alone: an empty trace that opens blank, without a word
        raise FieldError("events: the table has no rows (a run writes at least one)", "events")
    _check_events(events)
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
    out += _counters_and_flows(events, episodes, trained, tids, max_flows)
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"source": "pipesim", "run": name}}


def run_to_trace(result: RunResult) -> dict[str, Any]:
    """Trace-event JSON (a dict) of one run (discards from its episode table's ``discarded_s``)."""
    key = "run.steps" if result.engine == "compute" else "steps"  # a run spec's steps
    return events_to_trace(
        result.events, result.episode_table, result.scenario.name, result.trained, steps_key=key
    )


def write_trace(result: RunResult | pd.DataFrame, path: str | Path) -> Path:
    """Write the trace of a run (or of an events table) to ``path``, whole or not at all (an
    interrupt or a full disk leaves ``path`` as it was); returns the path."""
    from pipesim.io.interrupts import write_text_atomic

    trace = run_to_trace(result) if isinstance(result, RunResult) else events_to_trace(result)
    p = Path(path)
    write_text_atomic(p, json.dumps(trace, separators=(",", ":")))
    return p
