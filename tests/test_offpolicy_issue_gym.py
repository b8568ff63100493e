"""The issue gym: the issue is needed to find the line (scripted rules; the RL lift is slow-marked)."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
import torch

from offpolicy.gym import (
    BUG_RHS,
    N_DEFECT_LINES,
    N_LINES,
    Task,
    build_tokenizer,
    make_demo_tasks,
    make_tasks,
)
from offpolicy.rollout import sample_episodes
from tests.test_offpolicy_gym import ScriptedPolicy

torch.set_num_threads(1)
TOK = build_tokenizer()
TRAIN, HELD = make_tasks("train", "issue"), make_tasks("heldout", "issue")
Rule = Callable[[Task], int]  # a file-only rule: the task's lines -> a line number (never the issue)


def defects(task: Task) -> list[int]:
    return [int(line.split()[0]) for line in task.lines if line.endswith(BUG_RHS)]


def lhs(task: Task) -> list[str]:
    return [line.split()[1] for line in task.lines]


def score(rule: Rule, tasks: list[Task]) -> float:
    return sum(rule(Task(t.task_id, "", t.lines, -1)) == t.bug_line for t in tasks) / len(tasks)


def test_issue_gym_shape_and_split() -> None:
    assert len(TRAIN) == 400 and len(HELD) == 40 and make_tasks("all", "issue") == TRAIN + HELD
    assert make_tasks("heldout", "issue") == HELD  # deterministic
    assert not {t.lines for t in HELD} & {t.lines for t in TRAIN}
    assert build_tokenizer(make_tasks("all", "issue")).vocab == TOK.vocab  # same words, same ids
    for task in TRAIN[:100] + HELD + make_demo_tasks(100, gym="issue"):
        var = task.issue.split()[2]
        assert [n for n, v in enumerate(lhs(task), 1) if v == var] == [task.bug_line]
        assert all(var not in line.split()[2:] for line in task.lines)
        assert len(defects(task)) == N_DEFECT_LINES and task.bug_line in defects(task)
    # held-out: every (bug line, clean line) pair exactly twice
    clean = Counter((t.bug_line, next(n for n in range(1, N_LINES + 1) if n not in defects(t))) for t in HELD)
    assert len(clean) == 20 and set(clean.values()) == {2}
    taken = {(t.issue, t.lines) for g in ("defect", "issue") for t in make_tasks("all", g)}
    assert not any((t.issue, t.lines) in taken for t in make_demo_tasks(300, gym="issue"))
    # a gym of no name: the row tasks-gym of tests/test_refusals_offpolicy.py


def test_blind_guess_scores_one_in_five_and_the_oracle_one() -> None:
    blind = sample_episodes(ScriptedPolicy(oracle=False), HELD, TOK, torch.Generator().manual_seed(41), 10)
    assert 0.15 < sum(e.reward for e in blind) / len(blind) < 0.25
    oracle = sample_episodes(
        ScriptedPolicy(oracle=True), TRAIN[:40] + HELD, TOK, torch.Generator().manual_seed(41), 1
    )
    assert all(e.reward == 1.0 and e.n_reads == 1 for e in oracle)


def _rank_rule(k: int) -> Rule:
    """The k-th /0 line from the top (k = 0: what a policy trained on the defect gym does)."""
    return lambda t: defects(t)[k]


def _position_prior_rule() -> Rule:
    """The /0 line at the position most often buggy in training (ties: first)."""
    counts = Counter(t.bug_line for t in TRAIN)
    return lambda t: max(defects(t), key=lambda n: (counts[n], -n))


def _variable_prior_rule() -> Rule:
    """The /0 line whose variable was most often the bug's variable in training."""
    counts = Counter(t.issue.split()[2] for t in TRAIN)
    return lambda t: max(defects(t), key=lambda n: (counts[lhs(t)[n - 1]], -n))


def _nearest_neighbour_rule() -> Rule:
    """The answer of the most similar training file (shared words per line), if it is a /0 line."""

    def rule(t: Task) -> int:
        def overlap(u: Task) -> int:
            return sum(a == b for la, lb in zip(t.lines, u.lines) for a, b in zip(la.split(), lb.split()))

        best = max(TRAIN, key=overlap)
        return best.bug_line if best.bug_line in defects(t) else defects(t)[0]

    return rule


def test_no_rule_that_ignores_the_issue_beats_a_quarter_by_much() -> None:
    """The defect gym's winning rule (fix the /0 line) and every other file-only rule we could
    write score <= 0.3 held-out; the bug is uniform among the four /0 lines."""
    rules: dict[str, Rule] = {f"rank {k}": _rank_rule(k) for k in range(N_DEFECT_LINES)}
    rules["the line after the clean one"] = lambda t: next(
        (n for n in defects(t) if n - 1 not in defects(t) and n > 1), defects(t)[0]
    )
    rules["position prior"] = _position_prior_rule()
    rules["variable prior"] = _variable_prior_rule()
    rules["nearest training file"] = _nearest_neighbour_rule()
    scores = {name: score(rule, HELD) for name, rule in rules.items()}
    assert max(scores.values()) <= 0.3, scores
    # uniformly among the /0 lines: exactly 1/4 in expectation, on any split
    assert sum(1 / len(defects(t)) for t in HELD) / len(HELD) == 0.25
    rng = np.random.default_rng(43)
    rand = [score(lambda t: int(rng.choice(defects(t))), HELD) for _ in range(50)]
    assert 0.2 < sum(rand) / len(rand) < 0.3
    # ...and with the issue, reading the file identifies the line
    assert score(lambda t: t.bug_line, HELD) == 0.0  # the rule sees no bug_line (sanity of `score`)
    read = [lhs(t).index(t.issue.split()[2]) + 1 for t in HELD]
    assert read == [t.bug_line for t in HELD]


def swap_issue(task: Task) -> Task:
    """The same file with the issue naming another /0 line's variable: the bug moves there."""
    words = task.issue.split()
    other = [n for n in defects(task) if n != task.bug_line][task.task_id % (N_DEFECT_LINES - 1)]
    words[2] = lhs(task)[other - 1]
    return Task(task.task_id, " ".join(words), task.lines, other)


def test_swapping_the_issue_moves_the_bug() -> None:
    for task in HELD:
        moved = swap_issue(task)
        assert moved.lines == task.lines and moved.bug_line != task.bug_line
        assert moved.bug_line in defects(task)


@pytest.mark.slow
def test_rl_lifts_the_issue_gym_from_the_base() -> None:
    """Distributional, over 5 seeds: the issue-gym base scores about a blind guess held-out, 40
    steps of train_rl lift the mean to >= 0.6, and the trained policies follow the issue: with
    the issue renamed to a decoy's variable they fix the line it now names, not the old one."""
    from offpolicy.base import ISSUE_BASE, make_rl_base
    from offpolicy.rl import RLConfig, evaluate, train_rl

    base = make_rl_base(TOK, ISSUE_BASE)
    held = evaluate(base, HELD, TOK, 8, torch.Generator().manual_seed(1000))
    assert held["pass_rate"] < 0.35 and held["reads"] > 0.9
    finals, swapped = [], []
    for seed in (51, 52, 53, 54, 55):
        model = copy.deepcopy(base)
        train_rl(model, TRAIN, TOK, RLConfig(seed=seed), 40)
        finals.append(evaluate(model, HELD, TOK, 8, torch.Generator().manual_seed(1000 + seed))["pass_rate"])
        moved = [swap_issue(t) for t in HELD]
        swapped.append(
            evaluate(model, moved, TOK, 8, torch.Generator().manual_seed(2000 + seed))["pass_rate"]
        )
    assert sum(finals) / len(finals) >= 0.6, finals
    assert sum(swapped) / len(swapped) >= 0.5, swapped


def test_the_issue_gym_is_the_default_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """make_tasks, the RL base, the experiment CLIs and the co-simulation default to the issue
    gym; the defect gym stays available by name."""
    from offpolicy.base import DEFECT_BASE, ISSUE_BASE, base_config
    from offpolicy.gym import DEFAULT_GYM
    from scenarios.cosim import CosimConfig

    assert DEFAULT_GYM == "issue" and make_tasks("train") == TRAIN and make_tasks("heldout") == HELD
    assert base_config() == ISSUE_BASE and base_config("defect") == DEFECT_BASE
    assert len(make_tasks("all", "defect")) == 30
    assert CosimConfig().gym == "issue" and CosimConfig(gym="defect").gym == "defect"  # bogus: row cosim-gym
    import argparse

    from offpolicy import fp8, lr_sweep, staleness

    seen: dict[str, object] = {}
    orig = argparse.ArgumentParser.parse_args

    def spy(self: argparse.ArgumentParser, *a: object, **k: object) -> argparse.Namespace:
        seen.update(vars(orig(self, *a, **k)))  # type: ignore[call-overload]
        raise SystemExit(0)  # stop before any experiment runs

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", spy)
    for module in (staleness, fp8, lr_sweep):  # each CLI's --gym defaults to the issue gym
        seen.clear()
        with pytest.raises(SystemExit):
            module.main([])
        assert seen["gym"] == "issue", module.__name__
