"""A log file's bytes as a frame, and which of its columns the fit reads
(:func:`pipesim.calibrate.log.read_log`, ``docs/calibrate.md``).

Reading is pandas' (:func:`read_frame`: CSV and TSV as strings, JSON lines as parsed and typed), but pandas
quietly settles two things the user should: a column given twice (it keeps the first of a CSV's
and the last of a JSON line's; :func:`repeated_columns` refuses either, naming the column) and a
``--columns`` map that reads one column as two metrics or takes over ``step``'s
(:func:`column_mapping`). Where the map gives a metric's own column to another name
(``"timing_s/gen" = "timing_s/step"``), that metric is not read from it (:func:`shadowed`) and
``read_log`` says so in a note.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.calibrate.cells import COLUMNS, TYPED, LogError, column_numbers, row_name
from pipesim.calibrate.log import (
    CSV_SUFFIXES,
    JSONL_SUFFIXES,
    LOG_SUFFIXES,
    LOG_SUFFIXES_SAID,
    listed_steps,
)
from pipesim.core.errors import shown

__all__ = ["READ_NOTES", "column_mapping", "complete_rows", "json_records", "merged_records", "reach"]
__all__ += ["read_frame", "repeated_columns", "shadowed"]


def read_frame(p: Path, raw: bytes, step: str | None = None, steps: str | None = None) -> pd.DataFrame:
    """The log's cells: a CSV's or TSV's as strings (its numbers are read from them), a JSON line's
    as parsed, marked :data:`~pipesim.calibrate.cells.TYPED` (a number written as a string is
    refused there). The suffixes are :data:`~pipesim.calibrate.log.LOG_SUFFIXES`; the bytes UTF-8
    (:func:`~pipesim.calibrate.logscan.check_utf8`). ``step`` (the log's step column) and ``steps``
    (``--steps``): a long log's steps are counted first (:func:`~pipesim.calibrate.logscan.precount`)."""
    import io

    from pipesim.calibrate.logscan import check_utf8, precount

    suffix = p.suffix.lower()
    if suffix not in LOG_SUFFIXES:
        hint = " (JSON lines, one object per step, are named .jsonl)" if suffix == ".json" else ""
        raise LogError(f"{p}: a log is {LOG_SUFFIXES_SAID}, got {shown(suffix or 'no suffix')}{hint}", "log")
    if not raw.strip():
        raise LogError(f"{p}: the file is empty (no header, no rows)", "log")
    if suffix in JSONL_SUFFIXES and raw.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
        raise LogError(
            f"{p}: holds a JSON array, not JSON lines: write one JSON object per line (one per step)", "log"
        )
    check_utf8(p, raw)
    if step is not None:
        precount(p, raw, step, steps)
    try:
        if suffix in JSONL_SUFFIXES:
            raw, records, notes = json_records(p, raw)
            frame = (
                pd.DataFrame.from_records(records)
                if records is not None  # verl's file logger's nested records, flattened
                else pd.read_json(io.BytesIO(raw), lines=True, dtype=False)
            )
            frame.attrs[TYPED] = True  # its cells have types: a quoted number is text (cells.py)
        else:
            sep = CSV_SUFFIXES[suffix]
            raw, notes = complete_rows(p, raw, sep)
            frame = pd.read_csv(io.BytesIO(raw), sep=sep, dtype=str)
        frame.attrs[READ_NOTES] = notes
        return frame
    except LogError:
        raise
    except (ValueError, pd.errors.ParserError) as e:
        raise LogError(f"{p}: cannot read it as {suffix[1:]}: {' '.join(str(e).split())}", "log") from None


READ_NOTES = "pipesim_read_notes"
"""The frame's attribute holding :func:`read_frame`'s notes (a partial last line dropped), which
:func:`pipesim.calibrate.log.read_log` passes on."""


def json_records(p: Path, raw: bytes) -> tuple[bytes, list[dict[str, Any]] | None, list[str]]:
    """A JSON-lines log checked line by line: its complete lines, the records flattened where
    they are verl's file logger's (else None: pandas reads the lines), and the notes.

    * A line that is no JSON object: a LogError naming its line (pandas named a byte position:
      "Unexpected character found when decoding 'null' at position 1909").
    * The last line cut mid-write (no newline after it, and no JSON: a killed run; verl's file
      logger writes each record and its newline unbuffered) is dropped, with a note: the run's
      complete steps are its log, as a CSV's last complete row is. A cut line anywhere else, or
      one ended by a newline, is no write cut short and is refused.
    * verl's ``file`` logger (``trainer.logger=[..., file]``) writes ``{"step": N, "data":
      {"timing_s/gen": ..., ...}}`` (``FileLogger.log``, ``verl/utils/tracking.py`` lines
      250-252 at volcengine/verl b178a3c): the ``data`` object's metrics are read as the
      record's columns. Before, the log had no column but ``step`` and ``data`` ("nothing to
      calibrate from")."""
    import json

    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark, which pandas took for a bad value
    lines = raw.split(b"\n")
    parsed: list[tuple[int, Any]] = []
    notes: list[str] = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as e:
            if i == len(lines) and parsed:  # the last line, with no newline after it
                notes.append(
                    f"log: its last line ({i}) is cut mid-write (a run stopped while writing it?) "
                    f"and is left out; the {len(parsed)} complete lines are read"
                )
                raw = raw[: len(raw) - len(line)]
                break
            why = getattr(e, "msg", None) or str(e)
            raise LogError(
                f"{p}: line {i} is not a JSON object ({why}); one JSON object per line", "log"
            ) from None
        if not isinstance(obj, dict):
            raise LogError(
                f"{p}: line {i} holds a JSON {type(obj).__name__}, not an object; one JSON object per "
                "line (one per step)",
                "log",
            )
        parsed.append((i, obj))
    if not any(isinstance(o.get("data"), dict) for _, o in parsed):
        return raw, None, notes
    records = []
    for i, obj in parsed:
        data = obj.get("data")
        if not isinstance(data, dict):
            records.append(obj)
            continue
        rest = {k: v for k, v in obj.items() if k != "data"}
        if clash := sorted(set(rest).intersection(data)):
            raise LogError(
                f"{p}: line {i}: {shown(clash[0])} is given both in the record and in its 'data'; keep one",
                str(clash[0]),
            )
        records.append({**rest, **data})
    notes.append("log: each record's 'data' object read as its columns (verl's file logger writes them so)")
    return raw, records, notes


def complete_rows(p: Path, raw: bytes, sep: str) -> tuple[bytes, list[str]]:
    """A CSV's bytes without a last row cut mid-write, and the note saying so; a LogError naming
    any other row with fewer fields than the header (pandas fills a short row's last cells with
    NaN, and the fit went on without them; a long row pandas refuses itself).

    The last line short of the header with no newline after it is a run killed while writing it
    (a logger writes a row and its newline together): it is left out, with a note, and the
    complete rows before it are read, as a JSON-lines log's cut last line is (:func:`json_records`).
    Before, the file was refused ("Expected 9 fields in line 25, saw 6"), leaving a killed run's
    log unusable. A short row anywhere else, or one ended by a newline, was written whole and is
    refused, naming its line."""
    from pipesim.calibrate.logscan import short_row

    n, short, whole, at_end = short_row(raw, sep)
    if short is None:
        return raw, []
    line, k = short
    if not at_end or raw.endswith((b"\n", b"\r")):  # not the last line, or ended by a newline
        ends = " (it ends in a newline: written whole)" if at_end else ""
        raise LogError(
            f"{p}: a short row at line {line}, saw {k} of the header's {n} fields{ends}: every row gives "
            "every column (an empty cell where there is no value); only a last line cut mid-write, with "
            "no newline after it, is left out",
            "log",
        )
    note = (
        f"log: its last line ({line}) is cut mid-write ({k} of the header's {n} fields, no newline after "
        f"it: a run stopped while writing it?) and is left out; the {whole} complete rows are read"
    )
    return raw[: max(raw.rfind(b"\n"), raw.rfind(b"\r")) + 1], [note]


def repeated_columns(p: Path, raw: bytes, used: set[str]) -> None:
    """LogError naming a column of ``used`` that the log holds twice: pandas keeps the first of a
    CSV's (the second becomes ``name.1``) and the last of a JSON line's, so the fit read one of two
    columns without a word. Which one is the log's is the user's to say."""
    import csv
    import io
    import json

    from pipesim.calibrate.logscan import wide_fields

    text = raw.decode("utf-8-sig", errors="replace")
    if (sep := CSV_SUFFIXES.get(p.suffix.lower())) is not None:
        with wide_fields(raw):
            header = next(csv.reader(io.StringIO(text, newline=""), delimiter=sep), [])
        seen: set[str] = set()
        for name in header:
            if name in seen and name in used:
                raise LogError(f"{p}: column {shown(name)} is given twice in the header; keep one", name)
            seen.add(name)
        return

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        for k in used.intersection(keys):
            if keys.count(k) > 1:
                raise LogError(f"{p}: column {shown(k)} is given twice in a line; keep one", k)
        return dict(items)

    for line in text.splitlines():
        if line.strip():
            try:
                json.loads(line, object_pairs_hook=pairs)
            except (ValueError, RecursionError) as e:
                if isinstance(e, LogError):
                    raise
                continue  # pandas read the line: what json refuses here it took


def shadowed(columns: dict[str, str]) -> dict[str, str]:
    """verl's names whose own column the map gives to another name (``"timing_s/gen" =
    "timing_s/step"``): the map says what that column is, so the name is not read from it."""
    claimed = set(columns.values())
    return {c: c for c in ("step", *COLUMNS) if c not in columns and c in claimed}


def column_mapping(path: str | Path, columns: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """verl's name -> the log's column, the map's over the names' own, and each mapped column's
    verl name; LogError where the map reads one column as two names, or takes ``step``'s."""
    mapped: dict[str, str] = {}
    for name, source in columns.items():
        if source in mapped:
            raise LogError(
                f"{path}: the column map reads the log's column {shown(source)} as both {mapped[source]} "
                f"and {name}; one column holds one metric",
                source,
            )
        mapped[source] = name
    taken = shadowed(columns)
    if "step" in taken:
        raise LogError(
            f"{path}: the column map reads the log's 'step' column as {mapped['step']}; map step to "
            "the column of step numbers too (--columns: step = ...)",
            "step",
        )
    own = {c: c for c in ("step", *COLUMNS) if c not in taken}
    return {**own, **columns}, mapped


INSIDE_STEP = ("timing_s/save_checkpoint", "timing_s/testing")
"""Phases verl times inside ``timing_s/step`` that no simulated step has: a checkpoint save every
``save_freq`` steps and a validation every ``test_freq`` (``ray_trainer.py``'s ``fit``: both under
``marked_timer("step", ...)``). Left in, one save 10x a step's length fitted ``step_s`` at 33.6 s
for 3.0 (a user's walkthrough), with nothing flagged."""


def inside_step(p: Path, df: pd.DataFrame, frame: pd.DataFrame) -> list[str]:
    """Subtract the :data:`INSIDE_STEP` columns the log has (an empty cell: 0 s, the steps that
    neither saved nor validated) from ``timing_s/step`` in place; a note for each."""
    notes: list[str] = []
    if "timing_s/step" not in frame.columns:
        return notes
    for name in INSIDE_STEP:
        if name not in df.columns:
            continue
        extra = column_numbers(p, df, name, name).fillna(0.0)
        timed = extra > 0
        if not timed.any():
            continue
        frame["timing_s/step"] = frame["timing_s/step"] - extra.to_numpy()
        where = listed_steps(frame["step"][timed.to_numpy()])
        notes.append(f"timing_s/step: {name} subtracted at step {where} (verl times it inside the step)")
        if (frame["timing_s/step"] <= 0).any():
            i = int(np.flatnonzero((frame["timing_s/step"] <= 0).to_numpy())[0])
            raise LogError(
                f"{p}: {row_name(df, i)}: {name} is not shorter than timing_s/step, which holds it", name
            )
    return notes


def renumbered(
    path: str | Path, frame: pd.DataFrame, first_step: int, first: float | None = None
) -> list[str]:
    """``frame``'s steps less ``first_step`` (in place), and the note on the log's origin.

    ``first``: the log's first step before ``--steps`` cut it (None: ``frame``'s), which the note
    and the check judge: ``--steps`` is in the log's own numbers, before the renumbering. Before,
    the cut log's first step was judged, and a log numbered from 0 cut with ``--steps 1:`` was
    said to start at step 1 "as verl numbers them" (the advice, --first-step 1, moved
    fwd_bwd_efficiency from 0.361 to 0.470, true 0.35)."""
    if isinstance(first_step, bool) or not isinstance(first_step, int | np.integer) or first_step < 0:
        raise LogError(f"first_step must be an integer >= 0, got {shown(first_step)}", "first_step")
    first = float(frame["step"].min()) if first is None else float(first)
    if first_step > first:
        raise LogError(
            f"{path}: first_step (--first-step) {first_step} is after the log's step {first:g}; it is the "
            "number the log gives the run's first step (verl: 1)",
            "first_step",
        )
    if first_step:
        frame["step"] = frame["step"] - first_step
        return [f"step: the log's step s read as the run's step s - {first_step} (--first-step {first_step})"]
    if first == 1:
        return [
            "step: the log starts at step 1, as verl numbers them, and is read from the run's step 1 (its "
            "second); each step's samples are dealt to the ranks as that run step's were, so the "
            "trainer's constants move with the numbering: --first-step 1 reads verl's step 1 as the first"
        ]
    return []


def merged_records(path: str | Path, frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Records of one step as one row, and a note naming the steps logged again with equal values.

    Records that hold different columns are verl's fully-async trainer, which logs a parameter
    version in two calls at the same step: the aggregated metrics, then
    ``timing_s/wait_last_valid`` and ``timing_s/param_sync`` (``fully_async_trainer.py``,
    ``_trigger_parameter_sync_after_step``, lines 525-567 at volcengine/verl b178a3c). A column
    given again with the same value is a row written twice (a logger resumed from a checkpoint
    writes its step again): read once, with a note naming the step (before: silently). A column
    given two different values at one step (a restarted run logging a step anew) is refused: which
    is the log's is the user's to say."""
    by = frame.groupby("step", sort=False)
    for c in frame.columns:
        if c == "step":
            continue
        n = by[c].nunique(dropna=True)
        if (n > 1).any():
            step = float(n.index[(n > 1).to_numpy()][0])
            raise LogError(
                f"{path}: column 'step': step {step:g} is given twice, with two values of {shown(c)} "
                "(records of one step may add columns, or repeat them, not change them)",
                "step",
            )
    counts = by.count()  # each column's values at each step (NaN not counted)
    again = pd.Series(sorted(counts.index[(counts > 1).any(axis=1).to_numpy()]), dtype=float)
    notes = []
    if len(again):
        said = "step" if len(again) == 1 else "steps"
        notes.append(
            f"step: {said} {listed_steps(again)} given again with the same values (a logger writing a row "
            "again, after a resume?); read once"
        )
    return by.first().reset_index(), notes


REACH_NOTE_STEPS = 200
"""The fewest steps before a log's first step (the run's steps each simulation runs and the fit
does not use) that :func:`reach` notes, where they also outnumber the log's own steps."""


def reach(path: str | Path, frame: pd.DataFrame, steps: str | None, first_step: int) -> list[str]:
    """The steps ``frame`` (the run's step numbers, renumbered by ``first_step``) makes every
    simulation run, checked: a log's step ``s`` is the run's step ``s``, so each simulation runs
    the run from its step 0 through the log's last step. A LogError naming ``steps`` past
    :data:`~pipesim.calibrate.frame.MAX_LOG_STEPS` (:func:`~pipesim.calibrate.frame.reach_error`;
    before, ``--steps 199900:`` ran into the run's task pool, refused as ``run.steps (199,975)``, a
    key the user never set); a note where the steps before the log's first outnumber its own
    (calibrate's time grows with the steps run, not the steps kept)."""
    from pipesim.calibrate.frame import MAX_LOG_STEPS, reach_error, too_many

    if len(frame) > MAX_LOG_STEPS:
        raise LogError(too_many(path, len(frame)), "steps")
    first, last = int(frame["step"].min()), int(frame["step"].max())
    if last + 1 > MAX_LOG_STEPS:
        raise reach_error(path, last, cut=steps, first_step=first_step)
    if first < max(len(frame), REACH_NOTE_STEPS):
        return []
    return [
        f"step: a log's step s is the run's step s, so each simulation runs the run's steps 0 to {last:,}, "
        f"{(last + 1) / len(frame):.0f}x the {len(frame)} kept (from step {first:,}), and calibrate's time "
        "grows with them (docs/calibrate.md, 'The log': 100 steps from step 4,000 took 18 times as long "
        "as from step 0)"
    ]
