"""The trainer fit's notes (:func:`pipesim.calibrate.trainer.fit_trainer_profile`): why a
constant is not fitted, in the user's terms, and what a logged trainer faster than the spec's
model allows is told. Split out of :mod:`pipesim.calibrate.trainer`, which re-exports the names it
had."""

from __future__ import annotations

import math
import re
from collections.abc import Collection

from pipesim.calibrate.log import TrainingLog
from pipesim.calibrate.trainer_inputs import config
from pipesim.compute.phases import FrameworkProfile
from pipesim.plan.runspec import RunSpec

__all__ = ["HOLDS", "absent", "fails", "faster_than_peak", "left_out", "recompute_note", "too_fast"]

HOLDS = {
    "fwd_bwd_efficiency": ("update_actor",),
    "fwd_efficiency": ("old_log_prob", "ref"),
    "optimizer_step_s": ("update_actor",),
    "micro_batch_s": ("update_actor", "old_log_prob", "ref"),
}
"""The logged phases whose observations hold each of the profile's trainer constants (the
remainder holds ``step_s`` and ``sample_s``): a fit that puts an efficiency out of range leaves its
phases out (:func:`left_out`), and the constants no phase left holds keep the profile's values."""
_FIXED_TERMS = {
    "fwd_bwd_efficiency": "communication, micro-batch and optimizer-step costs",
    "fwd_efficiency": "communication and micro-batch costs",
}
_EFFICIENCY = re.compile(r"(\w*efficiency) must be .*, got (\S+)$")


def too_fast(why: str) -> tuple[str, float] | None:
    """The efficiency a failed fit's message (the solver's ``... efficiency must be in (0, 1], got
    1.48``) put out of range, and its value: above 1, or at or below 0 (a phase shorter than the
    model's fixed terms); None for another failure."""
    m = _EFFICIENCY.search(why)
    try:
        got = float(m.group(2)) if m is not None else math.nan
    except ValueError:
        return None
    if m is None or m.group(1) not in HOLDS or not (got > 1 or got <= 0):
        return None
    return m.group(1), got


def faster_than_peak(why: str, phases: Collection[str] = ()) -> str | None:
    """The user's words for a fit that put an efficiency out of range (:func:`too_fast`): the
    logged trainer is faster than peak; None for another failure. ``phases``: the logged phases
    that hold it (none given: :data:`HOLDS`'). Before, the validator's text was the note, and an
    efficiency below 0 was said so ("fwd_bwd_efficiency must be a finite number > 0.0, got
    -7.255"): a phase shorter than the model's fixed terms alone (its communication above all),
    which no efficiency up to 1 gives either."""
    fast = too_fast(why)
    if fast is None:
        return None
    name, got = fast
    check = "check the spec's GPU, model or GPU count against the logged run's"
    if got > 1:
        return f"(the logged trainer is faster than peak: {name} would be {got:.3g}, above 1; {check})"
    said = " and ".join(f"timing_s/{p}" for p in phases) or " or ".join(f"timing_s/{p}" for p in HOLDS[name])
    return (
        f"(the logged trainer is faster than peak: {said} {'are' if len(phases) > 1 else 'is'} shorter than "
        f"the model's fixed terms alone, its {_FIXED_TERMS[name]}, so no {name} fits "
        f"{'them' if len(phases) > 1 else 'it'} (the fit gives {got:.4g}); {check})"
    )


def left_out(
    why: str, dropped: Collection[str], kept: Collection[str], fix: Collection[str], base: FrameworkProfile
) -> tuple[str, list[str]]:
    """The note on the ``dropped`` phases, left out of the fit because the fit with them failed as
    ``why`` says (:func:`too_fast`), and the constants that only they held (none of ``kept``, the
    phases still fitted, holds them; none in ``fix``), which keep ``base``'s values. Before, the
    whole profile was kept, and a log whose ``update_actor`` alone was faster than peak kept the
    profile's ``fwd_efficiency`` too (held-out ``old_log_prob`` 94% off), though its
    ``old_log_prob`` identifies one."""
    gone = [
        k for k, ph in HOLDS.items() if set(ph) & set(dropped) and not set(ph) & set(kept) and k not in fix
    ]
    said = " and ".join(f"timing_s/{p}" for p in dropped)
    it, them = ("it", "it") if len(dropped) == 1 else ("they", "them")
    values = " and ".join(f"{k} {getattr(base, k):.4g}" for k in gone)
    kept_said = (
        f", the profile's {values} kept (no phase left in the fit holds {'it' if len(gone) == 1 else 'them'})"
    )
    note = (
        f"trainer: the profile's constants could not be fitted to {said} {faster_than_peak(why, dropped)}; "
        f"{it} {'is' if it == 'it' else 'are'} left out of the fit{kept_said if gone else ''}, and the other "
        f"constants fitted without {them}"
    )
    return note, gone


def recompute_note(log: TrainingLog, rs: RunSpec) -> list[str]:
    """A note when the spec's trainer recomputes the old log-probs and the log, which times other
    phases, has no ``old_log_prob`` column (the remainder and ``fwd_efficiency`` then go unfitted)."""
    if not config(rs).recompute_old_logp or log.has("timing_s/old_log_prob"):
        return []
    return [
        "timing_s/old_log_prob: the spec's trainer recomputes the old log-probs (model.recompute_old_logp, "
        "default true) but the log has no such column: the remainder (step_s) is not fitted, and a run "
        "of the spec times old_log_prob from the profile; a trainer that uses the rollout's log-probs "
        "(verl's use_rollout_log_probs): set model.recompute_old_logp = false in the spec"
    ]


def absent(k: str, log: TrainingLog, rs: RunSpec) -> str:
    """Why ``k`` is in no observation of the fit: which logged phase would hold it."""
    if k in ("fwd_bwd_efficiency", "optimizer_step_s"):
        return "no timing_s/update_actor column, the phase that holds it"
    if k == "fwd_efficiency":
        return "no timing_s/old_log_prob or timing_s/ref column, the phases that hold it"
    if k == "micro_batch_s":
        return "no logged phase holds it"
    if k == "step_s":
        tcfg = config(rs)
        need = ["timing_s/step", "timing_s/gen", "timing_s/update_actor"]
        need += ["timing_s/old_log_prob"] * tcfg.recompute_old_logp + ["timing_s/ref"] * tcfg.reference_model
        missing = [c for c in need if not log.has(c)]
        if missing:
            return (
                f"the remainder, step less gen and the phases, needs {', '.join(missing)}: without "
                "it the remainder would absorb the missing phase"
            )
    return "no logged phase holds it"


def fails(why: str) -> str:
    """Why a fit with a constant failed, in the user's terms where the solver's message allows: the
    constant it put out of range and the value (the solver's own message otherwise)."""
    fast = faster_than_peak(why)
    if fast is not None:
        return f"a fit with it fails {fast}"
    m = re.search(r"(\w+) must be .*, got (\S+)$", why)
    if m is None:
        return f"a fit with it fails: {why}"
    try:
        got = f"{float(m.group(2)):.4g}"
    except ValueError:
        got = m.group(2)
    return f"fitted with it, {m.group(1)} comes out {got}, outside its range"
