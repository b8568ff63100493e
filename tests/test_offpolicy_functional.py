"""Pure tensor functions against slow, obvious python-loop references, plus the golden 13.4 table."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from offpolicy.estimator import estimator_table, format_table
from offpolicy.functional import (
    group_advantages,
    mis_weights,
    ppo_policy_loss,
    selected_log_probs,
    seq_tis_weights,
    tis_weights,
)

torch.set_num_threads(1)
SHAPES = st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(0, 10_000))


def _pair(B: int, T: int, seed: int, scale: float = 1.5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    a = -torch.rand(B, T, generator=gen) * 3
    b = a + scale * torch.randn(B, T, generator=gen)
    mask = (torch.rand(B, T, generator=gen) < 0.7).float()
    return a, b, mask


@given(SHAPES)
@settings(max_examples=25, deadline=None)
def test_selected_log_probs_matches_loop(shape: tuple[int, int, int]) -> None:
    B, T, seed = shape
    gen = torch.Generator().manual_seed(seed)
    logits, targets = torch.randn(B, T, 7, generator=gen) * 3, torch.randint(7, (B, T), generator=gen)
    got = selected_log_probs(logits, targets)
    for b in range(B):
        for t in range(T):
            row = [float(x) for x in logits[b, t]]
            lse = math.log(sum(math.exp(x) for x in row))
            assert got[b, t].item() == pytest.approx(row[int(targets[b, t])] - lse, abs=1e-5)


@given(st.integers(1, 4), st.integers(1, 5), st.integers(0, 10_000), st.booleans())
@settings(max_examples=25, deadline=None)
def test_group_advantages_matches_loop(groups: int, k: int, seed: int, norm: bool) -> None:
    rewards = (torch.rand(groups * k, generator=torch.Generator().manual_seed(seed)) < 0.4).float()
    got = group_advantages(rewards, k, normalize_std=norm)
    for g in range(groups):
        vals = [float(r) for r in rewards[g * k : (g + 1) * k]]
        mean = sum(vals) / k
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / k)
        for i, v in enumerate(vals):
            want = (v - mean) / (std + 1e-6) if norm else v - mean
            assert got[g * k + i].item() == pytest.approx(want, abs=1e-5)


@given(SHAPES, st.floats(0.05, 0.5), st.floats(0.05, 0.5))
@settings(max_examples=25, deadline=None)
def test_ppo_policy_loss_matches_loop(shape: tuple[int, int, int], lo: float, hi: float) -> None:
    B, T, seed = shape
    old, new, mask = _pair(B, T, seed, scale=0.4)
    adv = torch.randn(B, T, generator=torch.Generator().manual_seed(seed + 1))
    loss, stats = ppo_policy_loss(new, old, adv, mask, lo, hi)
    total, clipped, n = 0.0, 0.0, 0.0
    for b in range(B):
        for t in range(T):
            if mask[b, t] == 0:
                continue
            r = math.exp(float(new[b, t]) - float(old[b, t]))
            a = float(adv[b, t])
            rc = min(max(r, 1 - lo), 1 + hi)
            total += -min(r * a, rc * a)
            clipped += rc * a < r * a
            n += 1
    assert loss.item() == pytest.approx(total / max(n, 1), abs=1e-5)
    assert stats["clip_frac"] == pytest.approx(clipped / max(n, 1), abs=1e-6)


def test_ppo_policy_loss_gradient_is_zero_where_clipped() -> None:
    old = torch.zeros(1, 2)
    new = torch.tensor([[0.5, 0.0]], requires_grad=True)  # ratio e^0.5 > 1.28: clipped for A > 0
    loss, _ = ppo_policy_loss(new, old, torch.ones(1, 2), torch.ones(1, 2), 0.2, 0.28)
    loss.backward()
    assert new.grad is not None
    assert new.grad[0, 0].item() == 0.0 and new.grad[0, 1].item() == pytest.approx(-0.5)


@given(SHAPES, st.floats(0.5, 4.0))
@settings(max_examples=25, deadline=None)
def test_tis_weights_match_loop(shape: tuple[int, int, int], cap: float) -> None:
    pi, mu, mask = _pair(*shape)
    got = tis_weights(pi, mu, mask, cap)
    for b in range(shape[0]):
        for t in range(shape[1]):
            want = min(math.exp(float(pi[b, t]) - float(mu[b, t])), cap) * float(mask[b, t])
            assert got[b, t].item() == pytest.approx(want, rel=1e-5, abs=1e-7)


@given(SHAPES, st.floats(0.1, 1.0), st.floats(1.0, 6.0))
@settings(max_examples=25, deadline=None)
def test_mis_weights_match_loop(shape: tuple[int, int, int], low: float, high: float) -> None:
    pi, mu, mask = _pair(*shape)
    got = mis_weights(pi, mu, mask, low, high)
    for b in range(shape[0]):
        for t in range(shape[1]):
            r = math.exp(float(pi[b, t]) - float(mu[b, t]))
            want = r * float(mask[b, t]) if low <= r <= high else 0.0
            assert got[b, t].item() == pytest.approx(want, rel=1e-5, abs=1e-6)


@given(SHAPES, st.floats(0.5, 4.0))
@settings(max_examples=25, deadline=None)
def test_seq_tis_weights_match_loop(shape: tuple[int, int, int], cap: float) -> None:
    pi, mu, mask = _pair(*shape, scale=0.3)
    got = seq_tis_weights(pi, mu, mask, cap)
    for b in range(shape[0]):
        s = sum((float(pi[b, t]) - float(mu[b, t])) * float(mask[b, t]) for t in range(shape[1]))
        w = min(math.exp(s), cap)
        for t in range(shape[1]):
            assert got[b, t].item() == pytest.approx(w * float(mask[b, t]), rel=1e-4, abs=1e-6)


def test_weights_are_detached() -> None:
    pi = torch.zeros(2, 3, requires_grad=True)
    for fn in (tis_weights, mis_weights, seq_tis_weights):
        assert not fn(pi, torch.zeros(2, 3), torch.ones(2, 3)).requires_grad


# Section 13.4 of the chapter, as printed: golden numbers by design (same generator, same draws).
CHAPTER_TABLE = """\
sigma KL(mu||pi) |           none |        full IS |        TIS C=2 |   MIS [0.5, 5]   (bias^2, variance)
  0.1      0.008 |  0.012,  0.166 |  0.000,  0.133 |  0.000,  0.131 |  0.000,  0.132
  0.5      0.033 |  0.046,  0.166 |  0.000,  0.152 |  0.001,  0.138 |  0.002,  0.150
  1.0      0.161 |  0.291,  0.117 |  0.000,  1.300 |  0.265,  0.163 |  0.368,  0.190
  2.0      0.425 |  0.737,  0.043 |  0.005, 10.202 |  0.741,  0.074 |  0.819,  0.127"""


def test_estimator_table_matches_chapter_exactly() -> None:
    assert format_table(estimator_table()) == CHAPTER_TABLE
