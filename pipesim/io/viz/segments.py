"""The data a run's timeline draws: its generation segments as one frame, and its retries.

:func:`segments_frame` joins each generation segment of a run's events table (one per episode and
policy version it generated under) with its episode's task, duration, versions, staleness at
training and status, and gives it the row ``y`` of its (replica, slot) lane; :func:`retried_ids`
names the episodes that relaunch a failed or aborted one; :func:`version_groups` splits the segments
by version, each with its legend band and that band's colour. They are pandas and numpy only (no
plotly), split from :mod:`pipesim.io.viz.timeline`, which draws them, so that module stays a
readable size and this part can be used (and tested) without a figure.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipesim.io.viz.palette import band_color
from pipesim.io.viz.runs import band_label
from pipesim.results.run import RunResult

__all__ = ["episode_info", "lane_index", "retried_ids", "segments_frame", "version_groups"]


def lane_index(gen: pd.DataFrame) -> dict[tuple[int, int], int]:
    """Row of each (replica, slot) pair of ``gen`` (rows with those columns), in sorted order."""
    pairs = sorted({(int(r), int(s)) for r, s in zip(gen["replica"], gen["slot"])})
    return {p: i for i, p in enumerate(pairs)}


def episode_info(result: RunResult) -> pd.DataFrame:
    """Per episode: task, duration, versions, staleness at training (text), status and marks.

    ``generated_s`` is the seconds of generation the run holds for it: its ``duration_s`` once it
    has ended, and for one still running at the run's end the length of its generation segments
    so far (pauses left out), so ``duration_s`` is what it was sampled to take. ``duration_text``
    says which: ``"duration 12.3 s"``, or ``"generated 209.6 s of 319.5 s planned"`` while running.
    """
    eps = result.episode_table.set_index("episode_id")
    tr = result.trained.set_index("episode_id")
    info = eps[["task_id", "duration_s", "version", "newest_version", "status", "truncated"]].copy()
    stale = tr["staleness"].reindex(info.index)
    info["staleness"] = stale
    info["stale_text"] = [f"{int(s)}" if s == s else "not trained" for s in stale]
    running = (info["status"] == "running").to_numpy()
    generated = info["duration_s"].to_numpy(dtype=np.float64, copy=True)
    if running.any():
        ev = result.events
        gen = ev[(ev["kind"] == "gen") & ~ev["complete"].astype(bool)]
        so_far = (gen["end_s"] - gen["start_s"]).groupby(gen["episode_id"].to_numpy()).sum()
        generated[running] = so_far.reindex(info.index[running]).fillna(0.0).to_numpy()
    info["generated_s"] = generated
    info["duration_text"] = [
        f"generated {g:.1f} s of {d:.1f} s planned" if r else f"duration {d:.1f} s"
        for g, d, r in zip(generated, info["duration_s"].to_numpy(), running)
    ]
    return info


def segments_frame(result: RunResult) -> pd.DataFrame:
    """The run's generation segments joined with episode information and a row index ``y``."""
    ev = result.events
    gen = ev[ev["kind"] == "gen"]
    info = episode_info(result)
    seg = gen.join(info.rename(columns={"version": "version_episode"}), on="episode_id")
    lanes = lane_index(gen)
    seg["y"] = [lanes[(int(r), int(s))] for r, s in zip(seg["replica"], seg["slot"])]
    return seg


def retried_ids(result: Any) -> np.ndarray:
    """Ids of the episodes that relaunch a failed or aborted one (their parent is set)."""
    cols = getattr(result, "columns", None)
    if cols is not None and hasattr(cols, "parent"):
        parent = np.asarray(cols.parent)
        return np.asarray(cols.id)[parent >= 0]  # type: ignore[no-any-return]
    lineage = getattr(result, "lineage", None)  # a loaded run keeps the parents beside its tables
    if lineage is not None and len(lineage):
        return lineage.loc[lineage["parent"] >= 0, "episode_id"].to_numpy()  # type: ignore[no-any-return]
    return np.zeros(0, dtype=np.int64)


def version_groups(
    seg: pd.DataFrame, colors: Sequence[str]
) -> Iterator[tuple[int, pd.DataFrame, str, str | None]]:
    """Per version of ``seg`` in order: the version, its segments, its legend band's label and,
    where its trace would be the first to list its band but is not the band's first version, the
    band's colour (:func:`~pipesim.io.viz.palette.band_color`) for a legend-only entry before it,
    else None. A legend shows a band in the colour of the first trace in it: without the entry, a
    band whose first version had no segment here showed another version's colour."""
    seen: set[str] = set()
    for v, g in seg.groupby("version", sort=True):
        version = int(str(v))
        lo, _, label = band_label(version, len(colors))
        yield version, g, label, band_color(lo, colors) if label not in seen and version != lo else None
        seen.add(label)
