"""The faster dealing of :mod:`pipesim.compute.balance` against the code it replaced: today's
Karmarkar-Karp partition (verl's ``karmarkar_karp`` with ``equal_size=True``) and today's
``rank_samples``, kept here verbatim as slow references. The new code must give the same
partitions (same index sets, in the same order) and the same loads, bit for bit, ties included."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pipesim.compute.balance import (
    BALANCES,
    equal_size_partitions,
    loads_of,
    rank_loads,
    rank_samples,
    verl_workload,
)


def ref_partitions(weights: Sequence[float], k: int) -> list[list[int]]:
    """Today's ``equal_size_partitions`` (before the fast one), verbatim."""
    n = len(weights)
    if k < 1 or n % k:
        raise ValueError(f"weights: {n} items do not split into {k} partitions of equal size")
    order = sorted(range(n), key=lambda i: (weights[i], i))
    heap: list[tuple[float, int, list[tuple[float, list[int]]]]] = []
    for tie, start in enumerate(range(0, n, k)):
        sets = sorted(((float(weights[i]), [i]) for i in order[start : start + k]), reverse=True)
        heapq.heappush(heap, (-(sets[0][0] - sets[-1][0]), tie, sets))
    tie = len(heap)
    while len(heap) > 1:
        _, _, a = heapq.heappop(heap)
        _, _, b = heapq.heappop(heap)
        merged = sorted(
            ((sa + sb, ia + ib) for (sa, ia), (sb, ib) in zip(a, reversed(b), strict=True)), reverse=True
        )
        heapq.heappush(heap, (-(merged[0][0] - merged[-1][0]), tie, merged))
        tie += 1
    return [sorted(items) for _, items in heap[0][2]]


def _ref_both_ends(part: list[int], weight: np.ndarray) -> list[int]:
    ranked = sorted(part, key=lambda i: (weight[i], i))
    return ranked[::2] + ranked[1::2][::-1]


def _ref_cuts(local: int, mini_sizes: Sequence[float]) -> list[int]:
    total, cum, out = float(sum(mini_sizes)), 0.0, [0]
    for size in mini_sizes:
        cum += size
        out.append(round(local * cum / total))
    return out


def _ref_by_mini(local: np.ndarray, mini_sizes: Sequence[float]) -> list[np.ndarray]:
    cuts = _ref_cuts(len(local), mini_sizes)
    return [local[cuts[j] : cuts[j + 1]] for j in range(len(mini_sizes))]


def ref_rank_samples(
    sample_tokens: Sequence[float], world: int, dp: int, mini_sizes: Sequence[float], balance: str
) -> list[list[np.ndarray]]:
    """Today's ``rank_samples`` (before the fast one), verbatim but for the partition it calls."""
    tokens = np.asarray(sample_tokens, dtype=float)
    n = len(tokens)
    if balance == "step":
        padded = np.concatenate([tokens, np.zeros((-n) % world)])
        parts = ref_partitions(padded.tolist(), world)
        per_rank = world // dp
        return [
            _ref_by_mini(padded[[i for p in parts[r * per_rank : (r + 1) * per_rank] for i in p]], mini_sizes)
            for r in range(dp)
        ]
    if balance == "sorted":
        padded = np.concatenate([tokens, np.zeros((-n) % dp)])
        weight = verl_workload(padded)
        parts = ref_partitions(weight.tolist(), dp)
        return [_ref_by_mini(padded[_ref_both_ends(part, weight)], mini_sizes) for part in parts]
    assert balance == "mini_batch"
    cuts = _ref_cuts(n, mini_sizes)
    out: list[list[np.ndarray]] = [[] for _ in range(dp)]
    for j in range(len(mini_sizes)):
        chunk = tokens[cuts[j] : cuts[j + 1]]
        chunk = np.concatenate([chunk, np.zeros((-len(chunk)) % dp)])
        for r, part in enumerate(ref_partitions(chunk.tolist(), dp)):
            out[r].append(chunk[part])
    return out


def _bits(a: np.ndarray) -> bytes:
    """The exact bytes of a float array (so 0.0 and -0.0, or two NaNs, are told apart)."""
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()


@given(
    k=st.integers(1, 16),
    per=st.integers(1, 12),
    lo=st.integers(-3, 0),
    hi=st.integers(0, 6),
    data=st.data(),
)
@example(k=1, per=64, lo=0, hi=0, data=None)
@example(k=16, per=1, lo=0, hi=3, data=None)
def test_the_fast_partition_is_todays_on_tied_integer_weights(
    k: int, per: int, lo: int, hi: int, data: st.DataObject | None
) -> None:
    """Integer weights from a small range (many ties, zeros and negatives): same partitions, same
    order, as the reference; and the same whether the weights come as ints or floats."""
    n = k * per
    if data is None:
        w = [(i * 7) % (hi - lo + 1) + lo for i in range(n)]
    else:
        w = data.draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    expected = ref_partitions(w, k)
    assert equal_size_partitions(w, k) == expected
    assert equal_size_partitions([float(x) for x in w], k) == expected
    assert equal_size_partitions(np.asarray(w, dtype=float), k) == expected


@given(
    k=st.integers(1, 16),
    per=st.integers(1, 12),
    spread=st.floats(0.0, 3.0),
    ties=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_fast_partition_is_todays_on_long_tailed_lengths(
    k: int, per: int, spread: float, ties: bool, seed: int
) -> None:
    """Log-normal lengths, rounded to tokens (ties) or not (sums that round differently in
    another order): the same partitions as the reference."""
    rng = np.random.default_rng(seed)
    w = rng.lognormal(5.0, spread, k * per)
    w = (w.round() if ties else w).tolist()
    assert equal_size_partitions(w, k) == ref_partitions(w, k)


@pytest.mark.parametrize(("n", "k"), [(8192, 64), (8192, 8), (4096, 16), (1024, 1), (64, 64)])
def test_the_fast_partition_is_todays_at_trainer_sizes(n: int, k: int) -> None:
    """The sizes the pipeline benchmark deals (a step of 8,192 samples over 64 or 8 GPUs)."""
    rng = np.random.default_rng(n + k)
    w = np.minimum(rng.lognormal(7.0, 1.2, n), 28_672.0).round()
    assert equal_size_partitions(w.tolist(), k) == ref_partitions(w.tolist(), k)
    work = verl_workload(w).tolist()
    assert equal_size_partitions(work, k) == ref_partitions(work, k)


@given(
    world=st.sampled_from([1, 2, 4, 8, 16]),
    sp=st.sampled_from([1, 2]),
    n_mini=st.integers(1, 4),
    n=st.integers(1, 70),
    hi=st.sampled_from([3, 30, 28_672]),
    balance=st.sampled_from([b for b in BALANCES if b != "exact"]),
    seed=st.integers(0, 2**16),
)
def test_rank_samples_and_loads_are_todays_for_every_balance(
    world: int, sp: int, n_mini: int, n: int, hi: int, balance: str, seed: int
) -> None:
    """Every rank's samples of every mini-batch, and the loads, equal the reference's bit for bit
    (padding, uneven mini-batches and tied lengths included)."""
    dp = max(1, world // sp)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, hi + 1, n).astype(float).tolist()
    cuts = np.sort(rng.integers(0, n + 1, n_mini - 1))
    sizes = tuple(float(s) for s in np.diff(np.concatenate([[0], cuts, [n]])) if s) or (float(n),)
    expected = ref_rank_samples(tokens, world, dp, sizes, balance)
    got = rank_samples(tokens, world, dp, sizes, balance)
    assert len(got) == len(expected) == dp
    for g, e in zip(got, expected, strict=True):
        assert len(g) == len(e) == len(sizes)
        assert [_bits(x) for x in g] == [_bits(x) for x in e]
    want = loads_of(expected, len(sizes))
    assert _bits(rank_loads(tokens, world, dp, sizes, balance)) == _bits(want)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_weight_is_refused_by_name(bad: float) -> None:
    with pytest.raises(ValueError, match="weights"):
        equal_size_partitions([1.0, bad, 2.0, 3.0], 2)


@pytest.mark.parametrize(("n", "k"), [(5, 2), (3, 0), (4, -1)])
def test_an_uneven_split_is_refused_by_name(n: int, k: int) -> None:
    with pytest.raises(ValueError, match="weights"):
        equal_size_partitions([1.0] * n, k)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_no_items_make_k_empty_partitions(k: int) -> None:
    """Nothing to deal: ``k`` empty partitions (the list-based code raised ``IndexError``)."""
    assert equal_size_partitions([], k) == [[] for _ in range(k)]
