"""offpolicy: RL on a tiny coding agent when the data come from another policy.

The question
    An asynchronous RL system samples with weights that are ``k`` updates old (staleness) and
    with an inference engine whose numerics differ from the trainer's (mismatch). Either way the
    *behaviour policy* mu that produced the tokens is not the trainer's pi_old. What does that do
    to learning, and do importance corrections help?

The pieces
    gym         deterministic bug-fix tasks. An episode is multi-turn: ``read`` shows the
                numbered file, ``fix <n>`` ends it with reward 1 on the buggy line; invalid
                actions end it with 0 and are counted apart. Blind guess = 1/5. The default,
                ``gym="issue"`` (400 train, 40 held out): four lines show the defect ``/ 0`` and
                only the issue's variable identifies the bug (a rule that ignores the issue
                scores 1/4). ``gym="defect"`` (20 train, 10 held out): the bug is the only
                ``/ 0`` line, so the issue can be ignored.
    model       TinyAgent, a ~162k-parameter decoder-only transformer, and checkpoints that
                refuse corrupt files or other architectures with a clear ``CheckpointError``.
    base        the RL base of each gym: a supervised warm start that reads but mostly answers
                wrong (``ISSUE_BASE`` for the default gym).
    rollout     batched sampling (one forward per decode step for the whole batch) that records
                each token's behaviour log-prob ``sample_logp`` and weight version; episodes are
                plain data, can be paused and continued under newer weights, and ``collate`` turns
                any list of them into a training batch. Non-finite logits, losses or gradient
                norms (an lr far too large) raise ``Diverged``; the scripts keep such a run as
                diverged (held-out 0, counted as collapsed) instead of failing.
    functional  the math as pure tensor functions: ``selected_log_probs``, group advantages,
                the PPO policy loss, ``tis_weights``, ``mis_weights``, ``seq_tis_weights``.
    rl          ``RLConfig``, ``rl_update``, ``train_rl`` (on-policy) and ``evaluate``; an
                ``EvalSpec`` makes the training loops report the *current* policy's held-out
                pass rate and invalid share every k steps (own generator: training unchanged).
    update      ``offpolicy_update`` (the decoupled objective), ``train_offpolicy`` (sampling with
                the version ``lag`` updates old, optionally through ``sampler`` such as
                ``fp8_copy``). With ``lag=0, correction='none'`` it equals ``train_rl`` exactly.

The decoupled objective
    Two ratios are kept apart: the behaviour weight w = pi_old / mu (a detached constant that
    corrects *which distribution sampled the data*) and PPO's rho = pi_theta / pi_old (clipped,
    it limits *how far one update moves*). Loss = -mean over policy tokens of
    ``w * min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)``. Corrections choose w:
    ``none`` (w = 1, mu ignored), ``tis`` (min(pi_old/mu, C), C = 2), ``mis`` (pi_old/mu inside
    [0.5, 5], else 0: IcePop) and ``seq-tis`` (one capped weight per episode). Every update
    reports ``mismatch`` (mean |log pi_old - log mu|), ``over_cap`` and the health distribution
    (mean, p99, max of |log pi_old - log mu|) recommended as a step-0 monitor.

Experiments (scripts, results under ``results/offpolicy``)
    ``python -m offpolicy.estimator``  bias/variance table of section 13.4 (exact digits);
    ``python -m offpolicy.staleness``  staleness x correction grid over seeds, with a figure;
    ``python -m offpolicy.fp8``        fp8-rounded sampler; ``python -m offpolicy.lr_sweep``
    lag 8 at several learning rates (staleness is counted in updates, so speed matters).

The package imports only torch (and the torch-only ``mismatch.health``); plotly is imported
lazily by the function that writes a figure.
"""

from __future__ import annotations

from offpolicy.base import BaseConfig, make_rl_base, train_base
from offpolicy.functional import (
    group_advantages,
    mis_weights,
    ppo_policy_loss,
    selected_log_probs,
    seq_tis_weights,
    tis_weights,
)
from offpolicy.gym import Task, Tokenizer, build_tokenizer, make_tasks
from offpolicy.model import CheckpointError, ModelConfig, TinyAgent, load_checkpoint, save_checkpoint
from offpolicy.rl import EvalSpec, RLConfig, compute_advantages, evaluate, rl_update, sample_step, train_rl
from offpolicy.rollout import (
    Diverged,
    Episode,
    behavior_stats,
    collate,
    continue_episodes,
    new_episode,
    sample_episodes,
)
from offpolicy.update import (
    CORRECTIONS,
    Snapshot,
    behavior_weights,
    fp8_copy,
    offpolicy_update,
    take_snapshot,
    train_offpolicy,
)

__all__ = [
    "CORRECTIONS",
    "BaseConfig",
    "CheckpointError",
    "Diverged",
    "Episode",
    "EvalSpec",
    "ModelConfig",
    "RLConfig",
    "Snapshot",
    "Task",
    "TinyAgent",
    "Tokenizer",
    "behavior_stats",
    "behavior_weights",
    "build_tokenizer",
    "collate",
    "compute_advantages",
    "continue_episodes",
    "evaluate",
    "fp8_copy",
    "group_advantages",
    "load_checkpoint",
    "make_rl_base",
    "make_tasks",
    "mis_weights",
    "new_episode",
    "offpolicy_update",
    "ppo_policy_loss",
    "rl_update",
    "sample_episodes",
    "sample_step",
    "save_checkpoint",
    "selected_log_probs",
    "seq_tis_weights",
    "take_snapshot",
    "tis_weights",
    "train_base",
    "train_offpolicy",
    "train_rl",
]
