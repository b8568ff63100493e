"""The default duration pool, drawn so that its first durations do not depend on its size.

A scenario that sets no ``pool_size`` runs on ``(steps + max_staleness + 1) x batch_size + n_slots``
durations (more under a group filter: ``Scenario.pool_for``), a size that follows the design.
:class:`~pipesim.workload.durations.AgentDurations` draws the turn counts, then the tokens, then the
tool latencies of the whole pool, so one draw of another size changed every duration: two designs
that differed in eta alone, or in steps, ran on different episodes, a second seed hidden in the
design (``--set max_staleness=4`` and ``--set max_head_offpolicyness=4`` gave 2,034.3 and 2,035.1
episodes/h). The chapter consumes one pool in order so that every design sees the same episodes;
:func:`draw_stable` keeps that for the default pool, and for a set ``pool_size`` with ``pool_draw =
"stable"`` (the system presets'). A set ``pool_size`` is otherwise one draw of that size, as the
chapter's ``agent_episode_durations(n, generator)``, so the chapter's tables are unchanged.

A whole draw holds [pool_size, max_turns] arrays at once, so :func:`check_whole_draw` bounds its
cells by :data:`~pipesim.workload.durations.MAX_WHOLE_DRAW_CELLS` when the scenario is built (a
whole pool of 65,536 at ``durations.max_turns=4000`` took 6.7 GB; at 8,000 torch's raw allocation
error); a chunk here holds at most ``MAX_CHUNK_CELLS``, within that bound, at any size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from pipesim.core.validate import CrossFieldError
from pipesim.workload.durations import (
    MAX_WHOLE_DRAW_CELLS,
    AgentDurations,
    DurationModel,
    _check_count,
    chapter_generator,
    draw,
)
from pipesim.workload.seconds import Array, as_durations

__all__ = [
    "FIRST_CHUNK",
    "FIRST_CHUNK_CELLS",
    "MAX_CHUNK_CELLS",
    "check_whole_draw",
    "chunk_sizes",
    "draw_stable",
    "whole_draw_cells",
]

FIRST_CHUNK = 64
"""Durations the first chunk holds; each next chunk holds twice the last, up to
``MAX_CHUNK_CELLS`` turn cells. The chunks' sizes depend on the model alone, never on the pool's
size, which is what keeps a pool's start the same; doubling keeps a pool of 10 to one small draw
and a pool of a million to some twenty (chunks of 1,024 made the chapter's draw of 1.28M
durations 8x slower than one draw)."""
FIRST_CHUNK_CELLS = 1 << 16
"""Turn cells the first chunk holds at most: 64 durations of up to 1,024 turns; one of 65,536
turns (a pool of 10 at max_turns 65,536 drew 64 x 65,536 cells, 172 MB, for 27 MB drawn at once)."""
MAX_CHUNK_CELLS = 1 << 24
"""Turn cells (durations x ``max_turns``) one chunk holds at most: 419,430 durations of 40 turns.
At most ``MAX_WHOLE_DRAW_CELLS``, which ``AgentDurations.sample_turns`` refuses past."""
assert FIRST_CHUNK_CELLS <= MAX_CHUNK_CELLS <= MAX_WHOLE_DRAW_CELLS  # every chunk is a draw allowed


def whole_draw_cells(model: DurationModel, n: int) -> int:
    """The turn cells one draw of ``n`` durations of ``model`` holds: ``n x max_turns`` for a model
    that draws per-turn arrays (:class:`AgentDurations`), 0 for one that draws a value a duration."""
    return n * model.max_turns if isinstance(model, AgentDurations) else 0


def check_whole_draw(model: DurationModel, pool_size: int) -> None:
    """CrossFieldError naming ``pool_size`` where one draw of ``pool_size`` durations of ``model``
    (``pool_draw="whole"``) holds more than ``MAX_WHOLE_DRAW_CELLS`` turn cells: refused when the
    scenario is built, before anything runs. Either field settles it (``--set pool_size=none`` after
    ``--set durations.max_turns=4000`` on a chapter preset), and so does ``pool_draw="stable"``."""
    cells = whole_draw_cells(model, pool_size)
    if cells <= MAX_WHOLE_DRAW_CELLS or not isinstance(model, AgentDurations):
        return
    turns = model.max_turns
    raise CrossFieldError(
        f"pool_size ({pool_size:,}) drawn whole (pool_draw 'whole') at durations.max_turns ({turns:,}) "
        f"is {cells:,} turn cells, past the {MAX_WHOLE_DRAW_CELLS:,} one draw may hold "
        "(MAX_WHOLE_DRAW_CELLS, about 2 GB): set pool_size none (the default pool is drawn in chunks), "
        f"pool_draw 'stable', or fewer turns (durations.max_turns <= {MAX_WHOLE_DRAW_CELLS // pool_size:,} "
        f"at this pool_size; pool_size <= {MAX_WHOLE_DRAW_CELLS // turns:,} at these turns)",
        "pool_size",
    )


def chunk_sizes(max_turns: int) -> Iterator[int]:
    """The sizes of the chunks a default pool of a model with ``max_turns`` is drawn in, forever."""
    cap = max(1, MAX_CHUNK_CELLS // max_turns)
    size = max(1, min(FIRST_CHUNK, FIRST_CHUNK_CELLS // max_turns))  # a pool of 10 stays small
    while True:
        yield size
        size = min(2 * size, cap)


def draw_stable(model: DurationModel, n: int, seed: int) -> Array:
    """The ``n`` durations of a scenario's default pool: :func:`~pipesim.workload.durations.draw`'s
    generator, drawn in the chunks of :func:`chunk_sizes` and cut at ``n``, so the first ``k`` are
    the same for every ``n >= k``. Only :class:`AgentDurations` needs it: the other models draw one value at a
    time, in order, and are stable already (a trace is replayed as it is; a user's model is drawn
    as it draws)."""
    if not isinstance(model, AgentDurations):
        return draw(model, n, seed)
    _check_count(n)
    gen: Any = chapter_generator(seed) if model.draws == "chapter" else np.random.default_rng(seed)
    chunks, drawn = [], 0
    sizes = chunk_sizes(model.max_turns)
    while drawn < n:
        part: Any = model.sample(next(sizes), gen)
        chunks.append(part.numpy() if model.draws == "chapter" else part)
        drawn += len(part)
    return as_durations(np.concatenate(chunks)[:n] if chunks else np.zeros(0))
