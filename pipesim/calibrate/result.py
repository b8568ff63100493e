"""What a calibration returns (:class:`Calibration`): the fitted values, the notes on what the log
left unidentified, the held-out residuals, and how it is printed and written.

**The held-out guard.** The residuals are the calibrated spec's relative error on steps it was not
fitted on, ``(logged - predicted) / logged``. Where the mean error on a column of :data:`GUARDED`
(the step's time, the response length, the trainer's phases) is larger than
:data:`HELD_OUT_LIMIT` and larger than the steps' own spread explains (:func:`noise`: the logged
and the simulated mean of ``k`` held-out steps each vary by ``sd / sqrt(k)``, so their difference
by ``sd sqrt(2 / k)``, taken at Student's 95% quantile over the log's ``n - 1`` degrees of
freedom; the sd of the steps less their outliers, :func:`outlying`), the spec does not reproduce its own log
there, and every prediction made from it is suspect: :attr:`Calibration.misses` names each such
column, :meth:`Calibration.text` prints a ``warning:`` line for it, :meth:`Calibration.table` writes
the same line into the calibrated spec's ``not_identified`` list, and ``pipesim calibrate`` prints
it on stderr too, after writing the spec (its exit status stays 0: the spec is written, and a script
reads the warning in it). The spread matters for an agent spec: its steps' generation waits on the
slowest of hundreds of heavy-tailed tool calls, and a log pipesim wrote from the spec itself (16
steps, 4 held out) missed its held-out ``step`` by 27% with a 95% band of 37%. Before, a multi-turn
spec whose fit read the episode's length as a turn's missed its held-out steps by 65% (step) and
259% (response length) and the command printed ``wrote ...`` and nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipesim.calibrate.fit import Fitted, t95
from pipesim.calibrate.frame import check_calibration
from pipesim.calibrate.log import TrainingLog

__all__ = [
    "GUARDED",
    "HELD_OUT_LIMIT",
    "MIN_HOLDOUT_STEPS",
    "OUTLIER_MADS",
    "OUTLIER_RATIO",
    "Calibration",
    "misses",
    "noise",
    "outlying",
    "without_outliers",
]

MIN_HOLDOUT_STEPS = 6
"""The fewest steps of which some are held out for validation."""
HELD_OUT_LIMIT = 0.25
"""The largest mean relative error on a :data:`GUARDED` column of the held-out steps that a
calibration passes without a warning. A fit of the shipped sample misses by 1-2%; a spec whose
steps are off by a quarter is not this log's run."""
GUARDED = (
    "timing_s/step",
    "response_length/mean",
    "timing_s/update_actor",
    "timing_s/old_log_prob",
    "timing_s/ref",
)
"""The held-out columns the guard reads, where the log has them: what a step takes, what it
generates, and the trainer's phases (each predicted step by step from its tokens; before, they
were not read, and a held-out ``update_actor`` missed by 59% drew no warning). Not ``gen``: an
asynchronous design's is the trainer's wait, which may be near 0 (a ``gen`` spike shows in the
step)."""
OUTLIER_MADS = 5.0
"""How many robust standard deviations (1.4826 x the median absolute deviation, the normal's sd
for normal steps) from the median a step's value must lie to be an outlier (:func:`outlying`). A
normal step lies past 5 sd with probability 6e-7: on a 2,000-step log, once in about 800 logs."""
OUTLIER_RATIO = 2.0
"""And how far above the median in proportion: more than twice it. A step's phases follow its
tokens, and ``gen`` its longest response, which vary with the drawn lengths: on the shipped sample
``gen`` at step 11 is 0.74x the median and 6 robust sds below it, and on a sample log of known
constants one step's ``gen`` was 0.49x (no response near the cap): short steps, not faults. A
stall, a retry or a checkpoint save adds to a step, a multiple of it (the walkthrough's spikes were
8-10x); a short step is not flagged."""
_MAD_SD = 1.4826
"""The median absolute deviation's factor to a normal's standard deviation."""


def outlying(x: np.ndarray) -> np.ndarray:
    """Which of ``x`` (above 0) are outliers: more than :data:`OUTLIER_MADS` robust standard
    deviations above the median and more than :data:`OUTLIER_RATIO` times it; all False with
    fewer than :data:`MIN_HOLDOUT_STEPS` values (too few for a robust spread)."""
    x = np.asarray(x, float)
    if len(x) < MIN_HOLDOUT_STEPS:
        return np.zeros(len(x), dtype=bool)
    med = float(np.median(x))
    sd = _MAD_SD * float(np.median(np.abs(x - med)))
    return (x - med > OUTLIER_MADS * sd) & (x > OUTLIER_RATIO * med)


def noise(log: TrainingLog, column: str, held: int) -> float:
    """The relative error on the mean of ``column`` over ``held`` held-out steps that the log's own
    spread explains at 95% (module docstring): ``t95(n - 1) sd sqrt(2 / held) / mean`` over the
    log's ``n`` steps (``param_sync`` over those that synced) less its outliers (:func:`outlying`:
    one step ten times as long widened the band to 180% and hid a 63% miss); 0 without two such
    steps."""
    x = log.col(column) if log.has(column) else np.zeros(0)
    x = x[x > 0] if column == "timing_s/param_sync" else x
    x = x[~outlying(x)]
    if len(x) < 2 or held < 1 or x.mean() <= 0:
        return 0.0
    return t95(len(x) - 1) * float(x.std(ddof=1)) * math.sqrt(2.0 / held) / float(x.mean())


def misses(
    residuals: dict[str, dict[str, float]], log: TrainingLog, held: int
) -> list[tuple[str, float, float]]:
    """Each :data:`GUARDED` column of ``residuals`` (of ``held`` held-out steps of ``log``) whose
    mean relative error exceeds both :data:`HELD_OUT_LIMIT` and its :func:`noise`: the column, the
    error and the noise."""
    out = []
    for column in GUARDED:
        r = residuals.get(column, {}).get("mean")
        if r is None:
            continue
        band = noise(log, column, held)
        if abs(r) > max(HELD_OUT_LIMIT, band):
            out.append((column, float(r), band))
    return out


def without_outliers(log: TrainingLog, column: str, r: float, held: list[int], flagged: list[int]) -> float:
    """The held-out relative error ``r`` on ``column`` as it would be without the ``flagged``
    steps: the held-out mean taken without them, and the prediction moved by what leaving them out
    of the fitted steps moves those steps' mean (the fit reproduces that mean: a spike in the
    fitted steps raises the prediction by about its share of their mean). An estimate, with no
    refit, of whether the outliers can explain a miss: before, any flagged step was named its
    likely cause, and a 133% miss of a fully-async log against a colocated spec was blamed on the
    async pipeline's fill at step 0 (cut, the miss stayed at 135%)."""
    x, steps = log.col(column), log.steps
    out = np.isin(steps, flagged)
    tested = np.isin(steps, held)
    if not tested.any():
        return r  # no held-out step in the log: nothing to take out
    seen = float(x[tested].mean())
    predicted = seen * (1.0 - r)
    fit, fit_kept = x[~tested], x[~tested & ~out]
    if len(fit_kept):
        predicted -= float(fit.mean()) - float(fit_kept.mean())
    kept = x[tested & ~out]
    if not len(kept) or kept.mean() <= 0:
        return 0.0  # every held-out step an outlier: they are the miss
    return (float(kept.mean()) - predicted) / float(kept.mean())


@dataclass
class Calibration:
    """What a calibration fitted, how well it predicts held-out steps, and from which log."""

    values: dict[str, Fitted]
    not_identified: list[str]
    residuals: dict[str, dict[str, float]]
    log: TrainingLog
    held_out: list[int] = field(default_factory=list)
    seed: int = 0

    def __post_init__(self) -> None:  # each field checked (frame.check_calibration), a LogError
        check_calibration(self)

    @property
    def misses(self) -> list[str]:
        """One warning per held-out column the calibrated spec misses (module docstring); empty
        when it holds its log (or had no held-out steps)."""
        from pipesim.calibrate.checks import outlier_steps

        found = misses(self.residuals, self.log, len(self.held_out))
        flagged = outlier_steps(self.log) if found else []
        return [
            f"held-out {column}: the calibrated spec misses the logged mean by {abs(r):.0%} "
            f"(mean relative error {r:+.3f}; limit {HELD_OUT_LIMIT:.0%}, the steps' spread {band:.0%}); "
            f"{self._why(column, r, band, flagged)} (docs/calibrate.md, the held-out guard)"
            for column, r, band in found
        ]

    def _why(self, column: str, r: float, band: float, flagged: list[int]) -> str:
        """The likely cause of a miss on ``column``: the outlier steps the notes flag where leaving
        them out would close it (:func:`without_outliers`), else a spec that is not the log's."""
        named = ", ".join(str(s) for s in flagged)
        many = len(flagged) > 1
        if flagged and abs(without_outliers(self.log, column, r, self.held_out, flagged)) <= max(
            HELD_OUT_LIMIT, band
        ):
            them = "them" if many else "it"
            return (
                f"the log's outlier {'steps' if many else 'step'} {named} (see the notes) likely "
                f"{'cause' if many else 'causes'} it, the fit took {them} as logged: leave {them} out "
                "(empty the cells, or cut with --steps A:B) and calibrate again"
            )
        aside = (
            f" (the outlier {'steps' if many else 'step'} {named} in the notes do{'' if many else 'es'} "
            "not explain it)"
            if flagged
            else ""
        )
        return f"its predictions do not reproduce this log{aside}: is the log from a run of this spec?"

    def table(self) -> dict[str, Any]:
        """The ``[calibration]`` table of the calibrated spec (a miss's warning in
        ``not_identified``, first)."""
        steps = self.log.steps
        return {
            "values": {k: _sig(v.value) for k, v in self.values.items()},
            "intervals": {k: [_sig(v.lo), _sig(v.hi)] for k, v in self.values.items()},
            "method": {k: v.how for k, v in self.values.items()},
            "residuals": self.residuals,
            "log": self.log.path,
            "log_sha256": self.log.sha256,
            "steps": f"{int(steps.min())}:{int(steps.max()) + 1}",
            "not_identified": [f"warning: {w}" for w in self.misses] + list(self.not_identified),
            "seed": self.seed,
        }

    def text(self) -> str:
        per = self.log.per_row
        what = f"{len(self.log)} steps" if per == 1 else f"{len(self.log)} rows of {per} trainer steps"
        lines = [f"calibrated from {self.log.path} ({what}, sha256 {self.log.sha256[:12]}...)"]
        for k, v in self.values.items():
            lines.append(f"  {k:<24} {v.value:>12.5g}   95% [{v.lo:.5g}, {v.hi:.5g}]   ({v.how})")
        for note in self.not_identified:  # what the log leaves unidentified, and how the fit read it
            lines.append(f"  note: {note}")
        if self.residuals:
            rows = "steps" if self.log.per_row == 1 else "rows"
            lines.append(f"held-out {rows} {_listed(self.held_out)}: (logged - predicted) / logged")
            for k, r in self.residuals.items():
                lines.append(f"  {k:<28} " + ", ".join(f"{m} {x:+.3f}" for m, x in r.items()))
        elif len(self.log) < MIN_HOLDOUT_STEPS:
            lines.append(f"no held-out validation: fewer than {MIN_HOLDOUT_STEPS} steps")
        else:
            lines.append("no held-out validation: the log has no timing column to predict")
        lines += [f"warning: {w}" for w in self.misses]
        return "\n".join(lines)


def _listed(steps: list[int]) -> str:
    """The held-out steps as a list, its middle elided past 10 (a 2,000-step log holds out 500)."""
    if len(steps) <= 10:
        return str(steps)
    return f"[{steps[0]}, {steps[1]}, ..., {steps[-1]}] ({len(steps):,})"


def _sig(x: float) -> float:
    """``x`` to six significant digits (what a calibrated spec shows)."""
    return float(f"{x:.6g}")
