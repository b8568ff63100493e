"""offpolicy's configs take the defaults and the edges of each field's range.

Their refusals (before: ``RLConfig(lr=nan)`` trained on NaN, ``clip_low=1.5`` clipped the ratio
below zero, ``max_grad_norm=0`` zeroed every gradient, a bool was taken as a number and a float as
a count) are rows of ``tests/test_refusals_offpolicy.py``, asserting the field, not the sentence.
"""

from __future__ import annotations

from mismatch.probe import ProbeConfig
from offpolicy.base import BaseConfig
from offpolicy.model import ModelConfig
from offpolicy.rl import RLConfig


def test_the_defaults_and_edges_are_accepted() -> None:
    RLConfig()
    RLConfig(clip_low=0, clip_high=0, lr=1, normalize_std=True, seed=0)
    ModelConfig(vocab_size=30, alibi_slopes=(-1.0, 0, 0, 0))  # a slope of any sign is the user's choice
    BaseConfig(p_correct=0, aux_weight=0)
    RLConfig(seed=2**64 - 1)  # torch's largest seed
    ProbeConfig(n_prompts=4, batch_n=4)


def test_a_gym_name_is_checked_where_a_recipe_is_chosen() -> None:
    from offpolicy.base import DEFECT_BASE, ISSUE_BASE, base_config

    assert base_config("issue") is ISSUE_BASE and base_config("defect") is DEFECT_BASE
    # a name of no gym ("bogus" returned the defect recipe) is the row base-config-gym of
    # tests/test_refusals_offpolicy.py
