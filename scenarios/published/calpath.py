"""The transfer protocol through the user's path: a log, a run spec, ``pipesim calibrate``.

The published table's transfer rows take their trainer from verl's calibration row
(:data:`scenarios.published.claims.VERL_CALIBRATION`: 128 H20s split 64:64, fully async, staleness
0.5, partial rollout). This module puts that row through exactly what a user runs:

1. the run spec of the row's setup, ``examples/published/verl_async_128.toml`` (:data:`SPEC`; each
   value with its source beside it), one spec step being one *trainer* step (128 prompts x 16);
2. the log, ``examples/published/verl_async_128_log.csv`` (:data:`LOG`), written by
   :func:`write_log` with :func:`pipesim.calibrate.published.published_log` from the README's means
   (:func:`rows`): the README's step covers ``trigger_parameter_sync_step`` = 4 trainer steps, so
   each phase is its mean over 4; the tokens are not published, so they are what the stated setup
   trains per trainer step: the stated run (``verl_async(128, 0.5, True)``, the length entry
   ``math-reasoning-7b`` under the 28K cap) simulated, its steady trained tokens per sample (an
   asynchronous trainer trains the short samples first: 1,912 tokens where the entry's closed-form
   mean is 1,943), the prompt's :data:`~pipesim.compute.profiles.CALIBRATION_PROMPT_TOKENS` apart.
   These are the tokens the direct fit read. A table of means is one distinct step, written
   :data:`REPEAT` times (the fewest a log may hold);
3. :func:`calibrated`: :func:`pipesim.calibrate.calibrate` on the two (the API under
   ``pipesim calibrate LOG --spec SPEC --out OUT``), once per process (memoised);
4. :func:`transfer_fit`: the spec's profile with the calibrated constants
   (:func:`pipesim.calibrate.trainer.fitted_profile`), as the :class:`TrainerFit` that
   :func:`scenarios.published.fit.trainer_config` builds every transfer row's trainer on.

What the log identifies (``pipesim.calibrate.trainer``): ``update_actor`` sets
``fwd_bwd_efficiency`` at the profile's fixed costs (the tokens do not vary, so ``micro_batch_s``
and ``optimizer_step_s`` are kept); the remainder (step less ``gen`` and ``update_actor``, 1.08 s
per trainer step) is shorter than the profile's per-sample part (2,048 x 1.33 ms), so it is put
per sample (``sample_s``, ``step_s`` 0). Those are the two constants, and the observations, of the
direct fit :func:`scenarios.published.fit.fit_trainer`: the calibrated profile equals it
(``tests/test_published_calpath.py``, to 1e-9), so the table's numbers do not move with the path.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

from pipesim.calibrate import Calibration, calibrate, read_log
from pipesim.calibrate.published import published_log
from pipesim.calibrate.trainer import fitted_profile
from pipesim.compute.profiles import CALIBRATION_PROMPT_TOKENS
from pipesim.plan.runspec import RunSpec, load
from scenarios.published.fit import TrainerFit

__all__ = ["LOG", "REPEAT", "SPEC", "calibrated", "rows", "transfer_fit", "write_log"]

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "published" / "verl_async_128.toml"
"""The run spec of the calibration row's setup."""
LOG = ROOT / "examples" / "published" / "verl_async_128_log.csv"
"""The verl-style log written from the row's published means (:func:`write_log`)."""
REPEAT = 3
"""A table of means is one distinct step: written 3 times, the fewest steps a log may hold."""
FIRST_STEP = 4
"""The log's first step: the README's means are over 400 steps, a steady state, so the rows are
numbered past the preset's warm-up (one sync period, ``trigger_parameter_sync_step`` = 4 trainer
steps, as ``verl_async`` measures it); ``pipesim calibrate`` deals each row's samples to the ranks
as the spec's run deals that step (:func:`pipesim.calibrate.trainer.dealt`)."""


def rows() -> list[dict[str, float]]:
    """The calibration row as one record of :func:`published_log`, per trainer step: the README's
    step, ``gen`` and ``update_actor`` over ``trigger_parameter_sync_step`` trainer steps, and the
    stated setup's mean prompt and response tokens (module docstring)."""
    from scenarios.published.claims import VERL_ROWS
    from scenarios.published.common import POINT
    from scenarios.published.verl import VERL_MINI, VERL_N, VERL_REQUIRE_BATCHES, VERL_SYNC_STEP, verl_async

    published = {c.phase: c.published for c in VERL_ROWS if c.calibration}
    k = VERL_SYNC_STEP
    samples = VERL_REQUIRE_BATCHES * VERL_MINI * VERL_N  # one trainer step (the spec's batch)
    per_sample = verl_async(128, 0.5, True, POINT).steady_tokens / samples
    return [
        {
            "step_s": published["step"] / k,
            "gen": published["gen"] / k,
            "update_actor": published["update_actor"] / k,
            "response_tokens": per_sample - CALIBRATION_PROMPT_TOKENS,
            "prompt_tokens": float(CALIBRATION_PROMPT_TOKENS),
        }
    ]


def write_log(path: str | Path = LOG) -> Path:
    """Write the log of :func:`rows` (:data:`REPEAT` steps) as CSV at ``path``; returns it."""
    p = Path(path)
    published_log(rows(), repeat=REPEAT, first_step=FIRST_STEP).to_csv(p, index=False)
    return p


@cache
def _calibrated(spec: str, log: str) -> tuple[RunSpec, Calibration]:
    rs = load(spec)
    return rs, calibrate(read_log(log), rs)


def calibrated(spec: str | Path = SPEC, log: str | Path = LOG) -> tuple[RunSpec, Calibration]:
    """The run spec and ``pipesim calibrate``'s fit of it to the log (memoised per file pair)."""
    return _calibrated(str(spec), str(log))


def transfer_fit(spec: str | Path = SPEC, log: str | Path = LOG) -> TrainerFit:
    """The transfer protocol's trainer: the spec's framework profile with the calibrated values."""
    from scenarios.published.claims import VERL_CALIBRATION

    rs, cal = calibrated(spec, log)
    base = fitted_profile(rs, cal.values)
    name = f"{base.name} (calibrated)"
    src = f"pipesim calibrate {Path(log).name} --spec {Path(spec).name} ({VERL_CALIBRATION})"
    return TrainerFit(dataclasses.replace(base, name=name, source=src), VERL_CALIBRATION)


def main(argv: list[str] | None = None) -> int:
    """``python -m scenarios.published.calpath``: rewrite the log (:data:`LOG`), print the fit."""
    import argparse

    argparse.ArgumentParser(
        prog="python -m scenarios.published.calpath",
        description=f"Rewrite {LOG.relative_to(ROOT)} from the README's means; print its calibration.",
    ).parse_args(argv)
    print(f"wrote {write_log()}")
    print(calibrated()[1].text())
    return 0


if __name__ == "__main__":
    from pipesim.io.interrupts import reader_may_leave

    raise SystemExit(reader_may_leave(main))
