"""The bug-fix gym and the batched sampler, driven by scripted policies (no training)."""

from __future__ import annotations

import torch
from torch import nn

from offpolicy.gym import (
    N_LINES,
    build_tokenizer,
    env_step,
    make_demo_tasks,
    make_tasks,
    observation_ids,
    parse_action,
)
from offpolicy.rollout import collate, continue_episodes, new_episode, sample_episodes

torch.set_num_threads(1)
TOK = build_tokenizer()


class ScriptedPolicy(nn.Module):
    """A 'model' whose logits put all mass on a scripted next token (or uniform over lines).

    ``oracle``: read, then fix the line that assigns the issue's variable.
    Otherwise blind: fix immediately, with a uniform distribution over the line numbers.
    """

    def __init__(self, oracle: bool) -> None:
        super().__init__()
        self.oracle = oracle

    def next_logits(self, prefix: list[int]) -> torch.Tensor:
        logits = torch.full((len(TOK),), -1e9)
        last = TOK.vocab[prefix[-1]]
        line_tokens = [TOK.ids[str(n)] for n in range(1, N_LINES + 1)]
        if last == "fix":
            if self.oracle:
                var = prefix[3]
                obs = prefix.index(TOK.obs_id)
                lhs = [obs + 2 + 6 * k for k in range(N_LINES)]  # positions of assigned variables
                line = next(k + 1 for k, pos in enumerate(lhs) if prefix[pos] == var)
                logits[TOK.ids[str(line)]] = 0.0
            else:
                logits[line_tokens] = 0.0
        elif last in ("read",) or prefix[-1] in TOK.line_ids and TOK.vocab[prefix[-2]] == "fix":
            logits[TOK.eoa_id] = 0.0
        elif last == "</obs>" or not self.oracle:
            logits[TOK.fix_id] = 0.0
        else:
            logits[TOK.read_id] = 0.0
        return logits

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        B, T = ids.shape
        out = torch.zeros(B, T, len(TOK))
        for b in range(B):
            row = ids[b].tolist()
            for t in range(T):
                if row[t] != TOK.pad_id:
                    out[b, t] = self.next_logits(row[: t + 1])
        return out


def test_tasks_are_deterministic_and_split() -> None:
    tasks = make_tasks("all", "defect")
    assert (
        len(tasks) == 30
        and len(make_tasks("train", "defect")) == 20
        and len(make_tasks("heldout", "defect")) == 10
    )
    assert tasks == make_tasks("all", "defect")
    assert make_tasks("heldout", "defect") == tasks[20:]
    train_files = {t.lines for t in make_tasks("train", "defect")}
    assert not any(t.lines in train_files for t in make_tasks("heldout", "defect"))


def test_exactly_one_line_assigns_the_issue_variable() -> None:
    for task in make_tasks("all", "defect") + make_demo_tasks(50, gym="defect"):
        var = task.issue.split()[2]
        assigning = [int(line.split()[0]) for line in task.lines if line.split()[1] == var]
        assert assigning == [task.bug_line]
        assert all(var not in line.split()[2:] for line in task.lines)  # never on a right-hand side
        defective = [int(line.split()[0]) for line in task.lines if line.endswith("/ 0")]
        assert defective == [task.bug_line]


def test_bug_lines_cover_every_position() -> None:
    counts = torch.bincount(
        torch.tensor([t.bug_line for t in make_demo_tasks(500, gym="defect")]), minlength=N_LINES + 1
    )
    assert counts[0] == 0 and (counts[1:] > 60).all()


def test_demo_tasks_never_equal_gym_tasks() -> None:
    gym = {(t.issue, t.lines) for t in make_tasks("all", "defect")}
    assert not any((t.issue, t.lines) in gym for t in make_demo_tasks(300, gym="defect"))


def test_parse_and_env_step() -> None:
    task = make_tasks("train", "defect")[0]
    fix = [TOK.fix_id, TOK.ids[str(task.bug_line)], TOK.eoa_id]
    assert parse_action(fix, TOK) == ("fix", task.bug_line)
    assert env_step(task, TOK, fix, 0, 3).reward == 1.0
    wrong = [TOK.fix_id, TOK.ids[str(task.bug_line % N_LINES + 1)], TOK.eoa_id]
    assert env_step(task, TOK, wrong, 0, 3).reward == 0.0
    read = env_step(task, TOK, [TOK.read_id, TOK.eoa_id], 0, 3)
    assert not read.done and list(read.observation) == observation_ids(task, TOK)
    assert env_step(task, TOK, [TOK.read_id, TOK.eoa_id], 2, 3).done  # turn cap
    bad = env_step(task, TOK, [TOK.eoa_id], 0, 3)
    assert bad.kind == "invalid" and bad.done and bad.reward == 0.0


def test_tokenizer_round_trip() -> None:
    task = make_tasks("heldout", "defect")[3]
    assert TOK.decode(TOK.encode(task.issue)) == task.issue
    assert len(TOK) == len(set(TOK.vocab))


def test_blind_policy_scores_about_one_in_five() -> None:
    eps = sample_episodes(
        ScriptedPolicy(oracle=False), make_tasks("train", "defect"), TOK, torch.Generator().manual_seed(0), 40
    )
    rate = sum(e.reward for e in eps) / len(eps)
    assert 0.15 < rate < 0.25
    assert all(e.n_reads == 0 and not e.invalid for e in eps)


def test_oracle_policy_scores_one_and_reads() -> None:
    eps = sample_episodes(
        ScriptedPolicy(oracle=True), make_tasks("all", "defect"), TOK, torch.Generator().manual_seed(0), 2
    )
    assert all(e.reward == 1.0 and e.n_reads == 1 and e.n_turns == 2 for e in eps)
    assert all(e.turn_tokens == [2, 3] for e in eps)


def test_invalid_actions_end_the_episode_and_are_counted() -> None:
    class Babbler(nn.Module):
        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            logits = torch.full((*ids.shape, len(TOK)), -1e9)
            logits[..., TOK.ids["="]] = 0.0
            return logits

    eps = sample_episodes(
        Babbler(), make_tasks("train", "defect")[:3], TOK, torch.Generator().manual_seed(0), 2
    )
    assert all(e.done and e.invalid and e.reward == 0.0 and e.turn_tokens == [3] for e in eps)


def test_paused_episodes_continue_under_a_new_version() -> None:
    policy = ScriptedPolicy(oracle=True)
    eps = [new_episode(t, TOK) for t in make_tasks("train", "defect")[:4]]
    gen = torch.Generator().manual_seed(0)
    continue_episodes(policy, eps, TOK, gen, version=3, max_new_actions=1)
    assert all(not e.done and e.n_turns == 1 for e in eps)
    continue_episodes(policy, eps, TOK, gen, version=5)
    assert all(e.done and e.reward == 1.0 for e in eps)
    for e in eps:
        sampled = [v for v, m in zip(e.versions, e.action_mask) if m]
        assert sampled == [3, 3, 5, 5, 5]


def test_collate_aligns_masks_with_next_tokens() -> None:
    eps = sample_episodes(
        ScriptedPolicy(oracle=True), make_tasks("train", "defect")[:2], TOK, torch.Generator().manual_seed(0)
    )
    eps += sample_episodes(
        ScriptedPolicy(oracle=False), make_tasks("train", "defect")[:2], TOK, torch.Generator().manual_seed(0)
    )
    batch = collate(eps, TOK.pad_id)
    assert batch["ids"].shape[1] == max(len(e.tokens) for e in eps)
    for b, e in enumerate(eps):
        targets = batch["ids"][b, 1:][batch["action_mask"][b] > 0].tolist()
        assert targets == [tok for tok, m in zip(e.tokens, e.action_mask) if m]
    assert batch["rewards"].tolist() == [e.reward for e in eps]
