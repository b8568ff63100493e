"""The placements of a plan's space a design can use, the values no design can use, and why
(split from :mod:`pipesim.plan.build`, whose :func:`~pipesim.plan.build.candidates` calls them).

A value the spec lists falls in one of two kinds:

* **never valid** for this spec, whatever the other keys hold: a ``space.tp`` that does not
  split the model's attention heads (vLLM's rule, :func:`~pipesim.compute.roofline.check_tp`) or
  is wider than the cluster, a ``space.placement`` of as many trainer GPUs as the cluster has or
  more. :func:`check_values` refuses it, a :class:`~pipesim.plan.checks.PlanError` naming the key
  and the value, before any design is built.
* **left out** by a constraint, by memory or by the replica width: a placement below
  ``constraints.min_trainer_gpus``, a trainer too small to hold the model's weights, gradients
  and Adam state, a placement whose rollout GPUs a TP degree does not tile, a TP degree the
  model's weights do not fit at. The search goes on without it, and :func:`drop_note` says once
  what was left out and why (a :class:`SpaceDropWarning`, ``pipesim: warning: ...`` on stderr).
  Before, both kinds vanished without a word (``space.placement = [16, 70, 13]`` with
  ``space.tp = [2]`` on 64 GPUs searched "1 design", and ``space.tp = [2, 3]`` dropped 3).

What the second kind leaves in is :func:`placements`, per TP degree: the trainer-GPU counts a
design may use. A trainer that holds its state but not also a micro-batch's activations (an
estimate) stays in the space with a :class:`TrainerMemoryWarning` (:func:`tight_words`, which
:func:`~pipesim.plan.build.trainer_memory_note` says for a run spec too).

When nothing is left, :func:`placement_reasons` is what
:func:`~pipesim.plan.explain.no_candidates` says for a listed ``space.placement``: the real
cause per value (``space.placement 16, 24: below constraints.min_trainer_gpus=40``), not "no
split leaves a multiple of 1".
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence

from pipesim.compute import TrainerConfig
from pipesim.compute.roofline import check_tp
from pipesim.compute.trainer import DEFAULT_MICRO_BATCH_TOKENS
from pipesim.plan.checks import PlanError
from pipesim.plan.space import PlanSpec

__all__ = [
    "SpaceDropWarning",
    "TrainerMemoryWarning",
    "check_values",
    "drop_note",
    "placement_reasons",
    "placements",
    "tight_words",
    "tiles",
    "trainer_at",
]

SHOWN = 6
"""The most values one reason lists before ``and N more``: a note or refusal stays one short line."""


class SpaceDropWarning(UserWarning):
    """Values of ``space.placement`` or ``space.tp`` no design uses (a constraint, memory or the
    replica width leaves them out): the search goes on without them (:func:`drop_note`)."""


def trainer_at(spec: PlanSpec, t: int) -> TrainerConfig:
    """The trainer of placement ``t`` (0: colocated, on every GPU), with the framework's layout:
    ValueError where the layout refuses the GPUs or its state does not fit them."""
    return TrainerConfig(
        model=spec.model,
        gpu=spec.gpu,
        n_gpus=t or spec.n_gpus,
        mfu=spec.mfu if spec.framework is None else None,
        profile=spec.framework,
        sequence_parallel=spec.sequence_parallel,
        micro_batch_tokens=spec.micro_batch_tokens,
    )


def tiles(spec: PlanSpec, tp: int, t: int) -> bool:
    """Replicas of ``tp`` GPUs tile what placement ``t`` leaves for rollout (all GPUs colocated)."""
    rollout = spec.n_gpus - t
    return rollout >= tp and rollout % tp == 0


def placements(spec: PlanSpec, tp: int) -> list[int]:
    """Trainer-GPU counts allowed with replicas of ``tp`` GPUs (0: colocated): the placements the
    module's second kind leaves in. Those whose trainer holds its state but not a micro-batch's
    activations stay, with a :class:`TrainerMemoryWarning` naming them."""
    n, lo = spec.n_gpus, spec.constraints.min_trainer_gpus
    # colocated trains on all n GPUs, so it too must meet the trainer's minimum
    allowed = [t for t in [0] * (n >= lo) + list(range(max(lo, 1), n)) if tiles(spec, tp, t)]
    if spec.space.placement is not None:
        allowed = [t for t in allowed if t in spec.space.placement]
    fits, tight = [], []
    for t in allowed:
        try:
            cfg = trainer_at(spec, t)  # with the framework's layout: a placement it refuses is skipped
        except ValueError:
            continue
        fits.append(t)
        if cfg.memory_short_bytes > 0:
            tight.append(cfg)
    if tight:
        _warn_tight(spec, tight)
    return fits


class TrainerMemoryWarning(UserWarning):
    """A trainer placement whose weights and optimizer state fit its GPUs but leave less than one
    micro-batch's activations (an estimate, :attr:`~pipesim.compute.TrainerConfig.
    activation_bytes_per_gpu`): kept in the space, since the estimate is not a measurement."""


def tight_words(spec: PlanSpec, tight: list[TrainerConfig], advice: str) -> str:
    """The warning of trainers ``tight`` (:attr:`TrainerConfig.memory_short_bytes` > 0), one line."""
    gib = 2**30
    worst = min(tight, key=lambda c: c.n_gpus)
    counts = ", ".join(str(c.n_gpus) for c in sorted(tight, key=lambda c: c.n_gpus))
    return (
        f"a trainer of {counts} x {spec.gpu.name} for {spec.model.name} holds its weights and "
        f"optimizer state ({worst.state_bytes_per_gpu / gib:.1f} GiB per GPU on {worst.n_gpus}) but "
        f"not also a micro-batch's activations (about {worst.activation_bytes_per_gpu / gib:.1f} GiB "
        f"at {spec.micro_batch_tokens or DEFAULT_MICRO_BATCH_TOKENS} tokens) within "
        f"{spec.gpu.hbm_bytes / gib:.0f} GiB; {advice}"
    )


def _warn_tight(spec: PlanSpec, tight: list[TrainerConfig]) -> None:
    """The warning of :func:`placements`, on its caller's line (stacklevel 3)."""
    advice = (
        "such placements stay in the space but may not run: raise constraints.min_trainer_gpus or "
        "lower model.micro_batch_tokens"
    )
    warnings.warn(tight_words(spec, tight, advice), TrainerMemoryWarning, stacklevel=3)


def _tp_degrees(spec: PlanSpec) -> list[int]:
    """The TP degrees the model splits at, up to the cluster's GPUs."""
    out = []
    for tp in range(1, min(spec.n_gpus, spec.model.n_heads) + 1):
        try:
            check_tp(spec.model, tp)
        except ValueError:
            continue
        out.append(tp)
    return out


def check_values(spec: PlanSpec) -> None:
    """PlanError naming ``space.tp`` or ``space.placement`` and the value, for a value no design
    of this cluster and model can use whatever the other keys hold (the module's first kind)."""
    n = spec.n_gpus
    for tp in sorted(set(spec.space.tp)):
        if tp > n:
            msg = f"space.tp {tp}: a replica of {tp} GPUs is wider than the cluster (cluster.n_gpus = {n})"
            raise PlanError(msg, "space.tp")
        try:
            check_tp(spec.model, tp)
        except ValueError as e:
            ok = ", ".join(map(str, _tp_degrees(spec)))
            raise PlanError(
                f"space.tp {tp}: no TP degree of {spec.model.name} ({e}); its degrees on {n} GPUs: {ok}",
                "space.tp",
            ) from None
    for t in sorted(set(spec.space.placement or ())):
        if t > n:
            msg = f"space.placement {t}: more trainer GPUs than the cluster has (cluster.n_gpus = {n})"
            raise PlanError(msg, "space.placement")
        if t == n:
            raise PlanError(
                f"space.placement {t} trains on all {n} GPUs, leaving none for rollout "
                '("colocated" trains and generates on every GPU)',
                "space.placement",
            )


def _problem(spec: PlanSpec, t: int) -> tuple[str, str] | None:
    """Why no TP degree can use placement ``t`` (``0 < t < n_gpus``, or 0): ``(kind, detail)``
    with kind ``min`` (below ``constraints.min_trainer_gpus``) or ``trainer`` (the trainer refuses
    its GPUs, detail its words); None: a replica width may use it."""
    n, lo = spec.n_gpus, spec.constraints.min_trainer_gpus
    if (t or n) < lo:
        return "min", ""
    try:
        trainer_at(spec, t)
    except ValueError as e:
        said = str(e).removeprefix("n_gpus: ")
        return "trainer", f"the trainer's {'memory' if 'GiB per GPU' in said else 'layout'} ({said})"
    return None


def _values(ts: Sequence[int]) -> str:
    words = ["colocated" if t == 0 else str(t) for t in ts]
    more = f" and {len(words) - SHOWN} more" if len(words) > SHOWN else ""
    return ", ".join(words[:SHOWN]) + more


def placement_reasons(spec: PlanSpec, tps: Iterable[int], every: bool = False) -> list[str]:
    """Why the listed ``space.placement`` values are left out at the TP degrees ``tps`` (those the
    model fits at), one phrase per cause, the values grouped: below the minimum, a trainer that
    cannot hold the model (the words of the largest such), rollout GPUs a degree does not tile.
    ``every``: also say that colocated is not listed (the whole space is empty)."""
    n, lo = spec.n_gpus, spec.constraints.min_trainer_gpus
    tps = sorted(set(tps))
    low: list[int] = []
    held: list[tuple[int, str]] = []
    untiled: dict[int, list[int]] = {tp: [] for tp in tps}
    for t in sorted(set(spec.space.placement or ())):
        if t >= n:
            continue  # check_values refuses it
        found = _problem(spec, t)
        if found is None:
            for tp in tps:
                if not tiles(spec, tp, t):
                    untiled[tp].append(t)
        elif found[0] == "min":
            low.append(t)
        else:
            held.append((t, found[1]))
    out = []
    if 0 in low:
        out.append(f"colocated trains on all {n} GPUs, fewer than constraints.min_trainer_gpus={lo}")
    if splits := [t for t in low if t]:
        out.append(f"space.placement {_values(splits)}: below constraints.min_trainer_gpus={lo}")
    if held:
        ts = [t for t, _ in held]
        out.append(f"space.placement {_values(ts)}: {held[-1][1]}")
    for tp, ts in untiled.items():
        if 0 in ts:
            out.append(f"colocated at tp={tp}: replicas of {tp} GPUs do not tile {n} GPUs")
        if splits := [t for t in ts if t]:
            out.append(
                f"space.placement {_values(splits)} at tp={tp}: the rollout GPUs left are no multiple of {tp}"
            )
    if every and 0 not in (spec.space.placement or ()):
        out.append("colocated: not in space.placement")
    return out


def drop_note(spec: PlanSpec, tps: Iterable[int], tp_reasons: Mapping[int, str]) -> str | None:
    """The one line :func:`~pipesim.plan.build.candidates` warns with: the listed placements and
    TP degrees (``tp_reasons``: the engine's words for a degree the model does not fit at) no design
    uses, and why; None when every listed value is used somewhere."""
    said = placement_reasons(spec, tps) if spec.space.placement is not None else []
    said += [
        f"space.tp {tp}: {' '.join(why.split(';')[0].split())}" for tp, why in sorted(tp_reasons.items())
    ]
    if not said:
        return None
    return "space: left out of the search (docs/plan.md, The space): " + "; ".join(said)
