"""The token ledger of a run: every generated token is trained, discarded, buffered or in flight.

``generated`` is the engines' own count (decode tokens their fluid clocks integrated); the other
terms sum the side table (:class:`~pipesim.compute.workload.TokenSource`, ``generated`` per
episode) by the episode's status at the end of the run, so the closure

    generated == trained + discarded + buffered + in_flight

is a check, not an identity. ``discarded`` splits into ``discarded_stale`` (the batch policy
dropped a finished episode: status ``discarded``), ``discarded_filtered`` (status ``discarded``
too, but dropped by dynamic filtering: a rejected group of
:class:`~pipesim.policies.groups.WholeGroups`, whose ids the run passes in as ``filtered``),
``discarded_over_length`` (status ``discarded``, a truncated sample that a policy dropping
over-length samples removed: :class:`~pipesim.policies.batching.DropOverlong`),
``discarded_aborted`` (taken off an engine mid-generation: ``aborted``) and ``discarded_failed``
(``failed``). Every episode is in exactly one term, so filtering or length dropping moves tokens
out of ``discarded_stale`` and the closure stays exact. Recomputed tokens (a
preemption's or a sync's re-prefill) are prefill, not generation, and are not in the ledger; the
engines count them (``recompute_tokens``). ``truncated_trained`` (informational, inside
``trained``) is the tokens of trained samples cut at ``max_response_tokens``.

``offpolicy_trained`` (informational, inside ``trained``) is the tokens of trained samples that a
policy older than the trainer's generated (:func:`offpolicy_tokens`): all of a sample whose
newest generating version is older than the version that trained it, and the part a partial
rollout generated before its last weight update (``Episode.tokens_before_update``) of a sample
trained on the version it finished under. The chapter's Section 13.3 point, per token: "no single
policy generated it". A synchronous run trains none. (slime's ``off_policy_ratio``, which APRIL's
README puts at "about 40%", counts something else, the prefixes of resumed samples over the tokens
decoded: ``partial_rollout/off_policy_ratio`` in a compute run's summary.)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from pipesim.core.errors import shown
from pipesim.results.columns import EpisodeColumns

if TYPE_CHECKING:
    from pipesim.compute.engine import ComputeReplica
    from pipesim.compute.source import TokenSource
    from pipesim.core.episode import Episode


@dataclass(frozen=True)
class TokenLedger:
    generated: float
    trained: float
    discarded_stale: float
    discarded_filtered: float
    discarded_aborted: float
    discarded_failed: float
    buffered: float
    in_flight: float
    truncated_trained: float
    discarded_over_length: float = 0.0
    offpolicy_trained: float = 0.0

    @property
    def discarded(self) -> float:
        return (
            self.discarded_stale
            + self.discarded_filtered
            + self.discarded_over_length
            + self.discarded_aborted
            + self.discarded_failed
        )

    @property
    def accounted(self) -> float:
        return self.trained + self.discarded + self.buffered + self.in_flight

    def closes(self, rel_tol: float = 1e-9) -> bool:
        """Whether generated equals the sum of the four terms (to float rounding)."""
        return math.isclose(self.generated, self.accounted, rel_tol=rel_tol, abs_tol=1e-6)

    def as_dict(self) -> dict[str, float]:
        d = {f"tokens_{k}": v for k, v in asdict(self).items()}
        d["tokens_discarded"] = self.discarded
        return d


_STATUS = {
    "trained": "trained",
    "discarded": "discarded_stale",
    "aborted": "discarded_aborted",
    "failed": "discarded_failed",
    "buffered": "buffered",
    "running": "in_flight",
}
_TERMS = (*dict.fromkeys(_STATUS.values()), "discarded_filtered", "discarded_over_length")
"""The ledger's terms, in the order of the bins :func:`token_ledger` sums into."""
_BIN = {term: i for i, term in enumerate(_TERMS)}


def _sum_by(bins: npt.NDArray[np.intp], tokens: npt.NDArray[np.float64], n: int) -> list[float]:
    """Per bin, the tokens added one at a time in the arrays' order (``np.bincount`` accumulates
    sequentially: the same float additions, in the same order, as a loop over the episodes)."""
    return [float(x) for x in np.bincount(bins, weights=tokens, minlength=n)] if len(bins) else [0.0] * n


def token_ledger(
    episodes: Sequence[Episode],
    source: TokenSource,
    engines: Sequence[ComputeReplica],
    filtered: Collection[int] = (),
    over_length: bool = False,
    newest: npt.NDArray[np.int64] | None = None,
) -> TokenLedger:
    """The ledger of a finished run (call the engines' ``flush`` first, as ``run_compute`` does).

    ``filtered``: ids of discarded episodes that the filter rejected. ``over_length``: the batch
    policy drops truncated samples (:class:`~pipesim.policies.batching.DropOverlong`), so a
    discarded sample that was truncated was dropped for its length. The others were stale.
    Each term is summed over the episodes in id order, as columns (the side table read as arrays).
    ``newest``: per episode, the newest version it generated under (``RunResult.newest_versions``),
    for ``offpolicy_trained`` (0 without it).
    """
    cols = EpisodeColumns(episodes)  # archived episodes are read from their arrays, not rebuilt
    ids = np.asarray(cols.id, dtype=np.intp)
    codes = np.asarray(cols.status, dtype=np.intp)
    to_bin = np.array([_BIN.get(_STATUS.get(name, ""), -1) for name in cols.status_names], dtype=np.intp)
    bins = to_bin[codes] if len(codes) else np.zeros(0, dtype=np.intp)
    if (bad := np.flatnonzero(bins < 0)).size:
        i = int(bad[0])
        raise ValueError(f"episode {int(ids[i])} has an unknown status {shown(cols.status_names[codes[i]])}")
    tokens = np.array(source.generated, dtype=np.float64)[ids]
    trunc = np.array(source.truncated, dtype=bool)[ids]
    stale = bins == _BIN["discarded_stale"]
    if filtered:
        rejected = stale & np.isin(ids, np.fromiter(filtered, dtype=np.intp, count=len(filtered)))
        bins[rejected] = _BIN["discarded_filtered"]
        stale &= ~rejected
    if over_length:
        bins[stale & trunc] = _BIN["discarded_over_length"]
    sums = dict(zip(_TERMS, _sum_by(bins, tokens, len(_TERMS)), strict=True))
    trained = bins == _BIN["trained"]
    cut = trained & trunc
    truncated = _sum_by(np.zeros(int(cut.sum()), dtype=np.intp), tokens[cut], 1)[0]
    generated = sum(e.tokens_generated for e in engines)
    off = 0.0
    if newest is not None and trained.any():
        off_each = offpolicy_tokens(
            tokens[trained],
            cols.tokens_before_update[trained],
            cols.trained_version[trained],
            newest[trained],
        )
        off = _sum_by(np.zeros(len(off_each), dtype=np.intp), off_each, 1)[0]
    return TokenLedger(generated=generated, truncated_trained=truncated, offpolicy_trained=off, **sums)


def offpolicy_tokens(
    tokens: npt.NDArray[np.float64],
    before_update: npt.NDArray[np.float64],
    trained_version: npt.ArrayLike,
    newest_version: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Per trained sample, its tokens that a policy older than the trainer's generated.

    A sample whose newest generating version is older than the version that trained it is
    off-policy whole; one trained on the version it finished under is off-policy for the tokens it
    generated before its last weight update (``before_update``, at most its tokens)."""
    stale = np.asarray(trained_version) > np.asarray(newest_version)
    return np.where(stale, tokens, np.minimum(before_update, tokens))
