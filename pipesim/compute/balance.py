"""How a step's samples reach the data-parallel ranks, and how long each mini-batch waits for its
busiest rank.

A data-parallel trainer synchronises its ranks at every micro-batch (FSDP gathers the parameters
layer by layer; every backward ends in a gradient reduction) and at every optimizer step, so a
mini-batch lasts as long as its busiest rank. How busy each rank is depends on how the framework
deals the step's samples out, which :data:`BALANCES` names:

* ``"exact"``: every rank holds the same tokens (the mean); the closed form of
  :mod:`pipesim.compute.phases` without samples. The ``ideal`` profile's.
* ``"step"``: verl up to October 2025, which is the code behind its ``fully_async_policy`` README
  (volcengine/verl ``b25bb7d4f``, ``verl/trainer/ppo/ray_trainer.py::_balance_batch``): the whole
  step's batch is cut into ``world_size`` partitions of equal size and balanced total tokens by the
  largest differencing method (``verl/utils/seqlen_balancing.py::karmarkar_karp`` with
  ``equal_size=True``), each partition keeps the batch's order (``_check_and_sort_partitions``), a
  data-parallel rank's data is its ``world_size / dp`` consecutive partitions (with Ulysses the
  sequence-parallel group gathers its members'), and ``dp_actor.update_policy`` then slices that
  data into mini-batches in order. Totals are balanced over the step, not per mini-batch: a
  mini-batch of a rank that drew a 28K-token sample waits for it, and so does every other rank.
  verl's own PR #3605 ("DP workload balance", 62221fa13, 23 Oct 2025): "all ranks must synchronize
  after mini batch in DP. Stragglers with longer sequences delay all workers."
* ``"sorted"``: verl since that PR, its default path (``_balance_batch`` at ``b178a3c``): the step
  is cut into ``dp`` equal-size partitions balanced on verl's workload estimate
  ``24576 t + t^2`` for ``t`` tokens (``seqlen_balancing.py::calculate_workload``), and each
  partition is ordered by that workload, the even places rising then the odd ones falling ("smaller
  micro-batches at both ends"), so the ranks' ``j``-th mini-batches hold alike samples.
* ``"mini_batch"``: the PR's other remedy (``_balance_batch(keep_minibatch=True)``): each
  mini-batch's samples are balanced over the ``dp`` ranks on their own.

The batch order matters under ``"step"``: a synchronous colocated trainer gets its batch in prompt
order (``TrainerConfig.batch_order = "submission"``); a fully asynchronous one in the order prompt
groups complete (``"arrival"``). :func:`rank_loads` returns each rank's tokens per mini-batch;
:mod:`pipesim.compute.phases` times each mini-batch at its busiest rank.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from pipesim.core.errors import shown
from pipesim.core.validate import refuse

BALANCES = ("exact", "step", "sorted", "mini_batch")
"""How a framework deals samples to ranks (module docstring)."""


SMALL_ITEMS = 32
"""Up to this many items, :func:`_small_partitions` (plain lists) beats the array bookkeeping."""


def _small_partitions(w: list[float], order: list[int], k: int) -> list[list[int]]:
    """:func:`_partition_array` in plain lists, each set a (sum, root, items) triple (the root
    decides ties, as there)."""
    heap: list[tuple[float, int, list[tuple[float, int, list[int]]]]] = []
    for tie, start in enumerate(range(0, len(w), k)):
        sets = [(w[i], i, [i]) for i in reversed(order[start : start + k])]
        heap.append((sets[-1][0] - sets[0][0], tie, sets))
    heapq.heapify(heap)
    tie = len(heap)
    pop, push = heapq.heappop, heapq.heappush
    while len(heap) > 1:
        a = pop(heap)[2]
        b = pop(heap)[2]
        merged = [(sa + sb, ra, ia + ib) for (sa, ra, ia), (sb, _, ib) in zip(a, reversed(b), strict=True)]
        merged.sort(reverse=True)
        push(heap, (-(merged[0][0] - merged[-1][0]), tie, merged))
        tie += 1
    return [sorted(items) for _, _, items in heap[0][2]]


def _partition_array(weights: Sequence[float] | np.ndarray, k: int) -> np.ndarray:
    """:func:`equal_size_partitions` as a ``(k, n / k)`` array of indices (rows the partitions)."""
    w = np.asarray(weights, dtype=float).reshape(-1)
    n = len(w)
    if k < 1 or n % k:
        raise ValueError(f"weights: {n} items do not split into {k} partitions of equal size")
    if not np.isfinite(w).all():
        raise ValueError("weights: must all be finite numbers, got NaN or infinity")
    if k == 1 or not n:
        return np.arange(n).reshape(k, n // k)
    order = np.argsort(w, kind="stable")  # by (weight, index)
    if n == k:
        return order[::-1].reshape(k, 1).copy()
    if n <= SMALL_ITEMS:
        return np.array(_small_partitions(w.tolist(), order.tolist(), k)).reshape(k, n // k)
    # Each state's sets as (sum, root) pairs, largest first: a set's root is its first item (the
    # one it started from, and the one it keeps while it takes in other states' sets), so
    # verl's ties between equal sums, broken by the sets' item lists, are broken by the root.
    heads = order.reshape(-1, k)[:, ::-1]
    sums = w[heads]
    pairs = list(zip(sums.ravel().tolist(), heads.ravel().tolist(), strict=True))
    heap = [(s, t, pairs[t * k : (t + 1) * k]) for t, s in enumerate((sums[:, -1] - sums[:, 0]).tolist())]
    # Keyed (minus the spread, tie): distinct keys, so the pops come as with one push at a time.
    heapq.heapify(heap)
    parent = list(range(n))  # a merged-away set's root points at the root that took it in
    tie = len(heap)
    pop, push = heapq.heappop, heapq.heappush
    while len(heap) > 1:
        a = pop(heap)[2]
        b = pop(heap)[2]
        merged = []
        for (sa, ra), (sb, rb) in zip(a, reversed(b), strict=True):
            merged.append((sa + sb, ra))
            parent[rb] = ra
        merged.sort(reverse=True)
        push(heap, (-(merged[0][0] - merged[-1][0]), tie, merged))
        tie += 1
    root = np.array(parent)
    while True:  # pointer jumping: every item to its set's root
        up = root[root]
        if np.array_equal(up, root):
            break
        root = up
    place = np.empty(n, dtype=np.intp)
    place[[r for _, r in heap[0][2]]] = np.arange(k)
    return np.argsort(place[root], kind="stable").reshape(k, n // k)


def equal_size_partitions(weights: Sequence[float], k: int) -> list[list[int]]:
    """Indices of ``weights`` in ``k`` partitions of equal size and near-equal sums, by the largest
    differencing method (Karmarkar-Karp) as verl runs it with ``equal_size=True``: the items,
    sorted, are taken ``k`` at a time as states of ``k`` one-item sets; the two states of largest
    spread are merged, the largest set of one with the smallest of the other, until one is left.
    The item count must be a multiple of ``k``; each partition comes back in index order. The
    weights are read as float64 and must be finite (``ValueError`` naming ``weights``); ties, in
    sums as in weights, go as in the list-based code this replaced (kept in
    ``tests/test_balance_fast.py``); states of equal spread are taken in the order they were made,
    where verl's ``State.__lt__`` takes the one whose largest set is larger first: the two can deal
    differently when many states tie (all-zero padding, say); not yet followed."""
    return _partition_array(weights, k).tolist()


def verl_workload(tokens: np.ndarray) -> np.ndarray:
    """verl's estimate of a sequence's training cost from its tokens (``calculate_workload``:
    ``12 h^2 t + 2 h t^2`` at ``h`` 4,096, scaled), which ``"sorted"`` balances and orders by."""
    return 24576.0 * tokens + tokens * tokens


def _both_ends(part: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``part`` (indices in index order) ordered by weight (then index), the even places rising and
    the odd ones falling."""
    ranked = part[np.argsort(weight[part], kind="stable")]
    return np.concatenate([ranked[::2], ranked[1::2][::-1]])


def _cuts(local: int, mini_sizes: Sequence[float]) -> list[int]:
    """Positions cutting a rank's ``local`` samples into its share of each mini-batch, in order."""
    total, cum, out = float(sum(mini_sizes)), 0.0, [0]
    for size in mini_sizes:
        cum += size
        out.append(round(local * cum / total))
    return out


def _by_mini(local: np.ndarray, mini_sizes: Sequence[float]) -> list[np.ndarray]:
    """One rank's ``local`` samples sliced in order into its share of each mini-batch."""
    cuts = _cuts(len(local), mini_sizes)
    return [local[cuts[j] : cuts[j + 1]] for j in range(len(mini_sizes))]


def rank_samples(
    sample_tokens: Sequence[float], world: int, dp: int, mini_sizes: Sequence[float], balance: str
) -> list[list[np.ndarray]]:
    """Each data-parallel rank's samples (their tokens), mini-batch by mini-batch: ``out[r][j]``,
    for a step whose samples hold ``sample_tokens`` in batch order, cut into mini-batches of
    ``mini_sizes`` samples and dealt out over ``world`` GPUs as ``balance`` says (module
    docstring). A batch that does not split into equal partitions is padded with empty samples
    (verl asserts instead). ``"exact"`` has no samples to deal: it is refused here."""
    check_balance(balance)
    tokens = np.asarray(sample_tokens, dtype=float)
    n = len(tokens)
    if balance == "step":
        padded = np.concatenate([tokens, np.zeros((-n) % world)])
        if world == dp == 1:  # one partition, the whole batch in order
            return [_by_mini(padded, mini_sizes)]
        per_rank = (world // dp) * (len(padded) // world)
        dealt = padded[_partition_array(padded, world).reshape(-1)]
        return [_by_mini(dealt[r * per_rank : (r + 1) * per_rank], mini_sizes) for r in range(dp)]
    if balance == "sorted":
        padded = np.concatenate([tokens, np.zeros((-n) % dp)])
        weight = verl_workload(padded)
        parts = _partition_array(weight, dp)
        return [_by_mini(padded[_both_ends(part, weight)], mini_sizes) for part in parts]
    if balance == "mini_batch":
        cuts = _cuts(n, mini_sizes)
        out: list[list[np.ndarray]] = [[] for _ in range(dp)]
        for j in range(len(mini_sizes)):
            chunk = tokens[cuts[j] : cuts[j + 1]]
            chunk = np.concatenate([chunk, np.zeros((-len(chunk)) % dp)])
            for r, part in enumerate(_partition_array(chunk, dp)):
                out[r].append(chunk[part])
        return out
    raise refuse("balance", "must name a dealing to deal samples (step, sorted or mini_batch), got 'exact'")


def rank_loads(
    sample_tokens: Sequence[float], world: int, dp: int, mini_sizes: Sequence[float], balance: str
) -> np.ndarray:
    """Tokens of each data-parallel rank (columns, ``dp``) in each mini-batch (rows) of
    :func:`rank_samples`; ``"exact"``: every rank the mean share of each mini-batch."""
    check_balance(balance)
    total = float(np.sum(sample_tokens)) if len(sample_tokens) else 0.0
    if balance == "exact" or not len(sample_tokens):
        whole = float(sum(mini_sizes)) or 1.0
        return np.array([[total * size / whole / dp] * dp for size in mini_sizes]).reshape(
            len(mini_sizes), dp
        )
    return loads_of(rank_samples(sample_tokens, world, dp, mini_sizes, balance), len(mini_sizes))


def loads_of(ranks: list[list[np.ndarray]], n_mini: int) -> np.ndarray:
    """The tokens of :func:`rank_samples`' dealing: rows the ``n_mini`` mini-batches, columns the
    ranks."""
    return np.array([[float(r[j].sum()) for r in ranks] for j in range(n_mini)]).reshape(n_mini, len(ranks))


def busiest(loads: np.ndarray) -> tuple[np.ndarray, float]:
    """Per mini-batch, the busiest rank's tokens; and over the whole step, the busiest rank's
    total (a forward-only phase balances its micro-batches within a rank, so it waits only for the
    rank with the most tokens in all)."""
    if loads.size == 0:
        return np.zeros(len(loads)), 0.0
    return loads.max(axis=1), float(loads.sum(axis=0).max())


def mean_factor(loads: np.ndarray) -> float:
    """How much longer the step's mini-batches take than with exactly balanced ranks (>= 1)."""
    total = loads.sum()
    if total <= 0:
        return 1.0
    return float(loads.max(axis=1).sum() * loads.shape[1] / total)


def check_balance(value: object) -> str:
    """``value`` if it is one of :data:`BALANCES`; else ``ValueError`` naming ``balance``."""
    if value not in BALANCES:
        raise refuse("balance", f"must be one of {', '.join(BALANCES)}, got {shown(value)}")
    return str(value)


__all__ = [
    "BALANCES",
    "busiest",
    "check_balance",
    "equal_size_partitions",
    "loads_of",
    "mean_factor",
    "rank_loads",
    "rank_samples",
    "verl_workload",
]
