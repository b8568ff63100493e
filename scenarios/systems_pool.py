"""The task pool of the system presets: larger than the default, drawn stable.

A preset's policies may launch more tasks than the run trains (ROLL's expiry, verl's queue
eviction, APRIL's aborted over-sampling: 2.7 x the plain default pool for APRIL without partial
rollouts at 8 samples per prompt), so a preset sets ``pool_size`` to :func:`preset_pool_size`,
four times a count throttle's need. A set pool used to be one draw of its size
(:func:`pipesim.io.api.draw_pool`, as the chapter's), and the size follows the knobs, so
``max_head_offpolicyness`` and ``steps`` acted as a second seed: AReaL's throughput kept rising with
eta (2,071.5 / 2,075.7 / 2,083.5 episodes/h at eta 2 / 4 / 8), where on one pool it is flat from
eta 2. A preset's pool is now drawn with ``pool_draw = "stable"``, in the default pool's fixed
chunks (:func:`pipesim.workload.pools.draw_stable`), so its first durations are the same whatever
its size: presets of one seed run on the same episodes whatever their knobs. Both fields are
the scenario's own, so a preset written to a file, saved with a run or swept keeps them.
"""

from __future__ import annotations

from pipesim import PipelineConfig
from pipesim.core.errors import MAX_DURATION_POOL
from pipesim.core.validate import FieldError

POOL_FORMULA = "4 x ((steps + {bound} + 2) x batch_size + n_slots)"


def preset_pool_size(p: PipelineConfig) -> int:
    """The tasks a preset's pool holds: :data:`POOL_FORMULA` with ``bound`` = ``max_staleness``."""
    return 4 * ((p.steps + p.max_staleness + 2) * p.batch_size + p.n_slots)


def check_preset_pool(p: PipelineConfig, bound: str = "max_staleness") -> None:
    """FieldError unless the preset's pool fits :data:`~pipesim.core.errors.MAX_DURATION_POOL`,
    naming the key that grew it (``bound``: the preset's name for ``max_staleness``): the pool is
    derived, so ``pool_size``, which the user never set, is not the field to name."""
    size = preset_pool_size(p)
    if size <= MAX_DURATION_POOL:
        return
    if p.n_slots > (p.steps + p.max_staleness + 2) * p.batch_size:
        field, value = "n_slots", p.n_slots
    elif p.max_staleness > p.steps:
        field, value = bound, p.max_staleness
    elif p.steps > p.batch_size:
        field, value = "steps", p.steps
    else:
        field, value = "batch_size", p.batch_size
    raise FieldError(
        f"{field} ({value:,}): the preset's task pool, {POOL_FORMULA.format(bound=bound)}, would be "
        f"{size:,}, more than the {MAX_DURATION_POOL:,} durations a run may draw (steps {p.steps:,}, "
        f"{bound} {p.max_staleness:,}, batch_size {p.batch_size:,}, n_slots {p.n_slots:,})",
        field,
    )
