"""A verl-style log written from published per-step numbers, so a published run goes through
``pipesim calibrate`` like a user's own: the published table's transfer rows take their trainer
from such a log of verl's calibration row, calibrated by this command
(:mod:`scenarios.published.calpath`, ``docs/calibrate.md``, "The published rows through this path").

:func:`published_log` takes one record per step, with the names verl's README tables use
(``step``, ``gen``, ``old_log_prob``, ``update_actor``, ``ref``, ``param_sync``, ``step_s``
for the whole step: those published) plus the step's mean ``response_tokens`` and
``prompt_tokens`` (published, or what the stated setup gives: say which in the caller), and returns
the log in verl's metric names (:data:`pipesim.calibrate.log.COLUMNS`): ``timing_s/gen``,
``timing_s/old_log_prob``, ``timing_s/update_actor``, ``timing_s/step``, ``response_length/mean``,
``prompt_length/mean``. Write it with ``to_csv`` and run ``pipesim calibrate`` on the file.

What such a log identifies is what :mod:`pipesim.calibrate.trainer` says for any log. A table of
means (verl's ``fully_async_policy`` README gives each phase's mean over 400 steps, one row per
setup) is one distinct step: written ``repeat`` times it gives the efficiencies at the profile's
fixed costs and nothing else (the tokens do not vary, which the calibration says), with intervals
of zero width that measure nothing but the rounding; the published steps themselves would give
more. A missing ``step_s`` is the sum of the phases given (no remainder is then identified), with
``param_sync`` in it only where ``step_includes_sync`` (default True) says the step holds the sync:
as the calibration reads the step (:mod:`pipesim.calibrate.steptime`: verl's colocated trainer
times its sync inside the step, its fully-async trainer apart), pass False for a split design's
published row, else its sync is read as a remainder. A published ``step_s`` is taken as it is.
A record needs the two token counts and at least one time (``step_s``, ``gen`` or
``update_actor``): a published table of step times alone (hours over a number of steps) is a log
of ``timing_s/step``, which calibrates the decode overhead, and with ``gen`` the trainer's scale
(:mod:`pipesim.calibrate.scale`).

Every value is checked: a missing required key or a value that is not a finite number ``>= 0``
(``>= 1`` for the tokens: a prompt and a response hold at least one) is a
:class:`~pipesim.core.validate.FieldError` naming ``rows[i].key``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from pipesim.core.validate import check_int, check_number, refuse, shown, within

__all__ = ["PUBLISHED_KEYS", "published_log"]

REQUIRED = ("response_tokens", "prompt_tokens")
TIMES = ("step_s", "gen", "update_actor")
"""A record holds at least one of these: a time to calibrate against."""
OPTIONAL = ("step", "gen", "update_actor", "old_log_prob", "ref", "param_sync", "step_s")
PUBLISHED_KEYS = REQUIRED + OPTIONAL
"""The keys a record may hold (seconds for the phases, tokens for the lengths)."""
_VERL = {
    "gen": "timing_s/gen",
    "param_sync": "timing_s/param_sync",
    "old_log_prob": "timing_s/old_log_prob",
    "ref": "timing_s/ref",
    "update_actor": "timing_s/update_actor",
}


def published_log(
    rows: Sequence[Mapping[str, float]],
    repeat: int = 1,
    first_step: int = 0,
    step_includes_sync: bool = True,
) -> pd.DataFrame:
    """The verl-style log of ``rows`` (module docstring), each written ``repeat`` times as
    consecutive steps (a table of means: ``repeat >= 3``, the fewest steps a log may hold),
    numbered from ``first_step`` (a table of means over a long run describes its steady state:
    number its rows past the warm-up, which is what ``pipesim calibrate`` matches them to)."""
    from pipesim.calibrate.cells import MAX_STEP
    from pipesim.calibrate.frame import MAX_LOG_STEPS

    check_int("repeat", repeat, 1, MAX_LOG_STEPS, "the most steps a log may hold")
    check_int("first_step", first_step, 0, MAX_STEP, "the largest step number")
    if not isinstance(step_includes_sync, bool):
        raise refuse("step_includes_sync", f"must be True or False, got {shown(step_includes_sync)}")
    if isinstance(rows, Mapping | str) or not isinstance(rows, Sequence) or not rows:
        raise refuse("rows", "must be a non-empty sequence of records (one per published step)")
    if len(rows) * repeat > MAX_LOG_STEPS:
        raise refuse(
            "repeat",
            f"x {len(rows)} rows must be at most {MAX_LOG_STEPS:,} steps (what a log holds), got {repeat}",
        )
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise refuse(
                f"rows[{i}]", f"must be a record of {', '.join(REQUIRED)}, and a time ({', '.join(TIMES)})"
            )
        with within(f"rows[{i}]"):
            for key in row:
                if key not in PUBLISHED_KEYS:
                    raise refuse(str(key), f"unknown key; a record holds {', '.join(PUBLISHED_KEYS)}")
            for key in REQUIRED:
                if key not in row:
                    raise refuse(key, "missing")
            if not any(key in row for key in TIMES):
                raise refuse(
                    "step_s",
                    "missing: a record needs a time, step_s (the whole step), gen or update_actor",
                )
            for key, value in row.items():
                check_number(key, value, 1.0 if key.endswith("_tokens") else 0.0)
        rec = {verl: float(row[k]) for k, verl in _VERL.items() if k in row}
        parts = [v for k, v in rec.items() if step_includes_sync or k != "timing_s/param_sync"]
        rec["timing_s/step"] = float(row["step_s"]) if "step_s" in row else sum(parts)
        rec["response_length/mean"] = float(row["response_tokens"])
        rec["prompt_length/mean"] = float(row["prompt_tokens"])
        out += [rec] * repeat
    df = pd.DataFrame(out)
    steps = [float(r.get("step", i)) for i, r in enumerate(rows)]
    numbered = repeat > 1 or len(set(steps)) < len(steps)
    df.insert(0, "step", range(first_step, first_step + len(df)) if numbered else steps)
    return df
