"""The row order of the ``trained`` table: episodes by (step, end, id), stable.

:attr:`RunResult.trained <pipesim.results.run.RunResult.trained>` lists the trained episodes in the
order the trainer took them. A plain ``lexsort`` over three keys is correct but, over a million
episodes, its temporaries are a run's peak memory; the sort here uses what runs give (ids rise in
launch order; steps often train equal counts) to sort fewer, smaller keys, falling back to the
``lexsort`` where that does not hold. It is apart from :mod:`pipesim.results.run` because it is
a sort over the columns with its own memory tactics, not the definition of a table or a summary
key; ``run`` still imports it as ``_training_order``.
"""

from __future__ import annotations

import numpy as np

from pipesim.results.columns import EpisodeColumns

__all__ = ["training_order"]


def training_order(c: EpisodeColumns, sel: np.ndarray) -> np.ndarray:
    """The order that sorts episodes ``sel`` by (step, end, id), stable.

    Ids rise along the episode list (launch order) in every run, so ties in (step, end) keep
    list order and the id key is dropped; and when every step trained the same number of
    episodes, the steps are sorted one by one as the rows of a matrix. Each key is read when it
    is needed and dropped after (a million episodes make these temporaries the peak memory).
    """
    n = len(sel)
    if n < 2:
        return np.arange(n)
    ids = c.id[sel]
    if not (ids[1:] > ids[:-1]).all():
        return np.lexsort((ids, c.end_s[sel], c.trained_step[sel]))
    del ids
    rel = c.trained_step[sel]
    rel -= rel.min()
    if int(rel.max()) < np.iinfo(np.int16).max:
        rel = rel.astype(np.int16)  # a stable sort of 16-bit integers is a radix sort
    by_step = np.argsort(rel, kind="stable")
    sizes = np.bincount(rel)
    del rel
    if sizes.min() > 0 and (sizes == sizes[0]).all():
        rows = by_step.reshape(len(sizes), int(sizes[0]))
        ends = c.end_s[sel[rows]]
        within = np.argsort(ends, axis=1)  # not stable, but much faster: right unless ends tie
        srt = np.take_along_axis(ends, within, axis=1)
        ties = np.nonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))[0]
        del srt
        if len(ties):  # the steps with tied ends, again with a stable sort
            within[ties] = np.argsort(ends[ties], axis=1, kind="stable")
        del ends
        return np.take_along_axis(rows, within, axis=1).ravel()
    return np.lexsort((c.end_s[sel], c.trained_step[sel]))
