"""Predict published results of real systems. ``python -m scenarios.published [--json FILE] [--workers N]``.

The scenarios behind every row of ``shared/reference/published_claims.md`` (verl, AReaL, APRIL, ROLL), each
built **from the setup its source states** on the compute-grounded engine (:mod:`pipesim.compute`):
the model, the GPU type and count, the placement and split, the batch and group size, the length
limits and the staleness knobs, run through the system's preset (:mod:`scenarios.systems`). The
hardware-efficiency constants are the engine's global ones (:data:`pipesim.compute.DEFAULT_EFFICIENCY`,
:data:`pipesim.compute.DEFAULT_TRAINER_MFU`, ``EngineConfig``'s defaults); no scenario sets one.
Under the **transfer** protocol the trainer's framework profile is refitted on the verl study's
calibration row instead (:mod:`~scenarios.published.fit`, the one place it is chosen).

Where a source leaves a value out it is chosen **once**, in :mod:`~scenarios.published.common`
(``UNSTATED``; the registry entry of response lengths each model uses, ``LENGTHS_*``), with the
reason in a comment, and the same choice is used for every claim. Each setup value's source is in
the comment next to it.

Steady state and extrapolation: a run simulates a few steps (``steps`` in each experiment), long
enough for the pipeline to fill; the steady step time is the mean over the steps after the first
``warmup`` ones, and a headline over the published step count ``N`` is the first ``warmup`` steps
as simulated plus ``N - warmup`` steady steps. Response lengths are the registry's, in tokens
(:mod:`pipesim.compute.lengths`), stationary here: no source gives a length trajectory (see
``docs/published.md``). Each row is a range over a length band and seeds (``low``, ``high``).

The printed table has, per row, the protocol (``stated`` or ``transfer``), the claim, the
published value, the predicted point and range and their ratio; every verl step time comes with its
``gen`` and ``update_actor`` rows. ``--json FILE`` writes the rows as a list of ``{"claim",
"system", "source", "unit", "published", "predicted", "protocol", "phase", "low", "high",
"calibration"}`` (``calibration``: shown, not scored). A row is within 25% when
``abs(predicted / published - 1) <= 0.25``. AReaL's "throughput grows with eta" is a trend row:
``predicted`` is 1.0 when, in trained tokens per second paired over seeds (95% t intervals), no
eta step falls and the whole range rises (:class:`~scenarios.published.areal.Trend`), else 0.0.

The package, by module: :mod:`~scenarios.published.common` (the choices made once, measuring a
run, the memoised runs), :mod:`~scenarios.published.fit` (the trainer's constants), one module
per system with its setup and the source of each value
(:mod:`~scenarios.published.verl`, :mod:`~scenarios.published.areal`,
:mod:`~scenarios.published.april`, :mod:`~scenarios.published.roll`), the claims
(:mod:`~scenarios.published.claims`) and the table and command line
(:mod:`~scenarios.published.table`). The names below are re-exported here.
"""

from __future__ import annotations

from scenarios.published import areal, common
from scenarios.published.april import APRIL_N, APRIL_OVERSAMPLE, APRIL_PROMPTS, april_engine, april_run
from scenarios.published.areal import (
    AREAL_ETA,
    AREAL_GPUS,
    AREAL_STEPS,
    AREAL_TREND_ETAS,
    AREAL_TREND_SEEDS,
    Rise,
    areal_engine,
    areal_run,
    areal_sync,
    areal_throughput,
    areal_trend,
    areal_workload,
)
from scenarios.published.claims import (
    CLAIMS,
    RUNS,
    VERL_CALIBRATION,
    VERL_PROFILE_ROW,
    VERL_STUDY,
    Claim,
    _areal_trend,
    verl_fit,
)
from scenarios.published.common import (
    LENGTH_BAND,
    LENGTHS_7B_BASE,
    LENGTHS_DISTILL,
    LENGTHS_QWEN3,
    POINT,
    PROMPT_TOKENS,
    UNSTATED,
    Measured,
    Unstated,
    Variant,
    math_workload,
    measure,
    rises,
    rollout_throughput,
)
from scenarios.published.fit import TrainerFit, fit_trainer, trainer_config, update_actor_s
from scenarios.published.roll import ROLL_GPUS, ROLL_RATIO, roll_engine, roll_run
from scenarios.published.table import json_rows, main, predict, scores, table, within, write_json
from scenarios.published.verl import (
    VERL_STEPS,
    VERL_SYNC_STEP,
    verl_async,
    verl_colocate,
    verl_step_s,
    verl_workload,
)

__all__ = [
    "APRIL_N", "APRIL_OVERSAMPLE", "APRIL_PROMPTS", "AREAL_ETA", "AREAL_GPUS", "AREAL_STEPS",
    "AREAL_TREND_ETAS", "AREAL_TREND_SEEDS", "CLAIMS", "LENGTH_BAND", "LENGTHS_7B_BASE",
    "LENGTHS_DISTILL", "LENGTHS_QWEN3",
    "POINT", "PROMPT_TOKENS", "ROLL_GPUS", "ROLL_RATIO", "RUNS", "UNSTATED",
    "VERL_CALIBRATION", "VERL_PROFILE_ROW", "VERL_STEPS", "VERL_STUDY", "VERL_SYNC_STEP", "Claim",
    "Measured", "Rise", "TrainerFit",
    "Unstated", "Variant", "fit_trainer", "scores", "trainer_config", "update_actor_s", "verl_fit",
    "_areal_trend", "april_engine", "april_run", "areal",
    "areal_engine", "areal_run", "areal_sync", "areal_throughput", "areal_trend", "areal_workload", "common",
    "json_rows", "main", "math_workload", "rises", "measure", "predict", "roll_engine",
    "roll_run", "rollout_throughput", "table", "verl_async", "verl_colocate", "verl_step_s",
    "verl_workload", "within", "write_json",
]  # fmt: skip
