"""The bug-fix gyms: deterministic tasks, a word tokenizer, and a multi-turn environment.

Two gyms share the file format, the tokenizer and the environment. The default is the
``issue`` gym (section at the end): four lines show the defect and only the issue names the
bug. The ``defect`` gym, described first, is the original one, where the bug is the only line
showing the defect; pass ``gym="defect"`` for it.

Design
------
A task is an issue ("issue : <var> is <adjective>") and a file of ``N_LINES`` numbered
assignment lines ``<n> <var> = <a> <op> <b>``. Exactly one line assigns the variable the issue
names, and that line is the bug: it shows its defect, ``<n> <var> = <a> / 0`` (a division by
zero no other line has). Variables are assigned once per file, in a random order, so:

* without reading, the issue says nothing about the line: a blind ``fix`` succeeds 1 time in
  ``N_LINES`` = 5;
* after ``read`` the observation shows the file, and the answer is the number of the line that
  assigns the issue's variable, which is also the line that divides by zero. Right-hand sides
  use a separate pool of input names, so "assigns" is never confused with "uses".

Why the visible defect: without it, the answer needs the two-hop lookup "issue variable ->
matching left-hand side -> that line's number". Our TinyAgent, supervised on demonstrations
for 500 CPU steps (with and without ALiBi), stayed at the blind loss floor; with the
defect, the circuit (a steep ALiBi head ties the defect to its line number, a global head
copies it) forms in about 300 steps, so the warm start is built in seconds.

An episode is a sequence of agent actions, each a short run of tokens closed by ``<eoa>``:
``read <eoa>`` (observation: the file between ``<obs>`` and ``</obs>``) or ``fix <n> <eoa>``
(ends the episode, reward 1 if ``n`` is the buggy line). Anything else, or an action longer
than ``MAX_ACTION_TOKENS``, is *invalid*: the episode ends with reward 0 and ``invalid=True``,
so invalid actions are counted apart from wrong fixes. After ``max_turns`` actions without a
fix the episode is *truncated* with reward 0.

Task generation uses its own ``torch.Generator`` seeded with ``TASK_SEED``; tasks 0-19 are the
training split and 20-29 the held-out split (different files and different issue/variable
pairings). ``make_demo_tasks`` draws further tasks from another seed for the supervised warm
start, excluding any that coincide with a gym task.

The ``issue`` gym (the default, ``make_tasks(split)``): the issue is needed
----------------------------------------------------------------------------------------
In the ``"defect"`` gym a policy can ignore the issue: the only ``/ 0`` line is the
bug. The ``issue`` gym gives ``N_DEFECT_LINES`` = 4 of the 5 lines the same defect, ``/ 0``:
the bug and three decoys with the same surface features; one line is clean. The bug is the
``/ 0`` line that assigns the variable the issue names. So:

* a blind guess still scores 1/5, and without reading the issue says nothing about the line;
* a rule that reads the file but ignores the issue can only pick among the four ``/ 0`` lines:
  1/4 in expectation under the generator (the bug is uniform among them whatever the file
  shows). The held-out split makes this exact for every rule that looks at positions: its
  ``N_ISSUE_HELDOUT`` = 40 tasks enumerate each (bug line, clean line) pair twice, so for each
  clean-line position the bug is on each of the four ``/ 0`` lines equally often;
* only the issue's variable, matched against the left-hand sides, names the line.

The issue gym has ``N_ISSUE_TRAIN`` = 400 random training tasks and the 40 balanced held-out
tasks; its words are the default gym's pools, so the tokenizer (vocabulary) is the same.
Demonstration tasks come from another seed and never equal a task of either gym.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from offpolicy.checks import FieldError, refuse, shown

N_LINES = 5
N_TASKS, N_TRAIN = 30, 20
TASK_SEED = 1234
MAX_ACTION_TOKENS = 3

VARIABLES = ("total", "count", "rate", "size", "offset", "limit", "score", "delta", "index", "width", "depth")
INPUTS = ("a", "b", "c", "x", "y", "k")
OPS = ("+", "-", "*")
BUG_RHS = "/ 0"  # the defect the buggy line shows: a division by zero
ADJECTIVES = ("wrong", "off", "broken", "negative", "zero")
PAD, BOS, EOA, OBS, END_OBS = "<pad>", "<bos>", "<eoa>", "<obs>", "</obs>"
SPECIALS = (PAD, BOS, EOA, OBS, END_OBS)
ACTION_WORDS = ("read", "fix")
GYMS = ("defect", "issue")
N_DEFECT_LINES = 4  # issue gym: lines showing BUG_RHS (the bug and three decoys)
N_ISSUE_TRAIN, N_ISSUE_HELDOUT = 400, 40
ISSUE_TASK_SEED = 4321
DEFAULT_GYM = (
    "issue"  # every default (make_tasks, the base, the CLIs, the co-simulation); "defect" on request
)


@dataclass(frozen=True)
class Task:
    """One bug-fix task.

    Attributes:
        task_id: position in the gym (0-29), or -1-based ids for demonstration tasks.
        issue: issue text, whitespace-separated words.
        lines: the file's lines, each "<n> <var> = <a> <op> <b>" with n = 1..N_LINES.
        bug_line: 1-based number of the buggy line.
    """

    task_id: int
    issue: str
    lines: tuple[str, ...]
    bug_line: int

    @property
    def source(self) -> str:
        """The file as text, one numbered line per row."""
        return "\n".join(self.lines) + "\n"


def _draw_task(task_id: int, gen: torch.Generator) -> Task:
    """Draw one task from ``gen`` (fixed draw order: variables, bug line, inputs, ops, adjective)."""
    var_idx = torch.randperm(len(VARIABLES), generator=gen)[:N_LINES].tolist()
    bug = int(torch.randint(N_LINES, (1,), generator=gen).item())
    inputs = torch.randint(len(INPUTS), (N_LINES, 2), generator=gen).tolist()
    ops = torch.randint(len(OPS), (N_LINES,), generator=gen).tolist()
    adjective = ADJECTIVES[int(torch.randint(len(ADJECTIVES), (1,), generator=gen).item())]
    lines = tuple(
        f"{n + 1} {VARIABLES[v]} = {INPUTS[i[0]]} " + (BUG_RHS if n == bug else f"{OPS[o]} {INPUTS[i[1]]}")
        for n, (v, i, o) in enumerate(zip(var_idx, inputs, ops))
    )
    issue = f"issue : {VARIABLES[var_idx[bug]]} is {adjective}"
    return Task(task_id=task_id, issue=issue, lines=lines, bug_line=bug + 1)


def _draw_issue_task(
    task_id: int, gen: torch.Generator, bug: int | None = None, clean: int | None = None
) -> Task:
    """An issue-gym task from ``gen``: four ``/ 0`` lines, the bug is the one assigning the issue's
    variable. ``bug`` / ``clean`` (0-based lines, clean != bug) fix those positions; otherwise they
    are drawn (bug uniform, clean uniform among the other lines). Draw order: variables, bug,
    clean, inputs, ops, adjective."""
    var_idx = torch.randperm(len(VARIABLES), generator=gen)[:N_LINES].tolist()
    drawn_bug = int(torch.randint(N_LINES, (1,), generator=gen).item())
    drawn_clean = int(torch.randint(N_LINES - 1, (1,), generator=gen).item())
    bug = drawn_bug if bug is None else bug
    if clean is None:
        clean = [n for n in range(N_LINES) if n != bug][drawn_clean]
    if not (0 <= bug < N_LINES and 0 <= clean < N_LINES and clean != bug):
        raise FieldError(f"bug and clean must be distinct lines in [0, {N_LINES}), got {bug}, {clean}", "bug")
    inputs = torch.randint(len(INPUTS), (N_LINES, 2), generator=gen).tolist()
    ops = torch.randint(len(OPS), (N_LINES,), generator=gen).tolist()
    adjective = ADJECTIVES[int(torch.randint(len(ADJECTIVES), (1,), generator=gen).item())]
    lines = tuple(
        f"{n + 1} {VARIABLES[v]} = {INPUTS[i[0]]} " + (f"{OPS[o]} {INPUTS[i[1]]}" if n == clean else BUG_RHS)
        for n, (v, i, o) in enumerate(zip(var_idx, inputs, ops))
    )
    issue = f"issue : {VARIABLES[var_idx[bug]]} is {adjective}"
    return Task(task_id=task_id, issue=issue, lines=lines, bug_line=bug + 1)


def _issue_tasks() -> list[Task]:
    """The issue gym: ``N_ISSUE_TRAIN`` random training tasks, then 40 held-out tasks (from a
    stream of their own) that enumerate every (bug line, clean line) pair twice."""
    gen = torch.Generator().manual_seed(ISSUE_TASK_SEED)
    train = [_draw_issue_task(i, gen) for i in range(N_ISSUE_TRAIN)]
    pairs = [(b, c) for b in range(N_LINES) for c in range(N_LINES) if c != b]
    reps = N_ISSUE_HELDOUT // len(pairs)
    gen = torch.Generator().manual_seed(ISSUE_TASK_SEED + 1)  # the held-out split's own stream
    held = [_draw_issue_task(N_ISSUE_TRAIN + k, gen, b, c) for k, (b, c) in enumerate(pairs * reps)]
    return train + held


def check_gym(gym: object) -> None:
    """ValueError naming ``gym`` unless it is one of :data:`GYMS`."""
    if gym not in GYMS:
        raise refuse("gym", f"must be one of {GYMS}, got {shown(gym)}")


def make_tasks(split: str = "all", gym: str = DEFAULT_GYM) -> list[Task]:
    """The gym's tasks, deterministic. ``gym='issue'`` (default): ``'train'`` (400), ``'heldout'``
    (40) or ``'all'`` (440); ``gym='defect'``: 20 train, 10 held-out, 30 in all."""
    check_gym(gym)
    if gym == "issue":
        tasks, n_train = _issue_tasks(), N_ISSUE_TRAIN
    else:
        gen = torch.Generator().manual_seed(TASK_SEED)
        tasks, n_train = [_draw_task(i, gen) for i in range(N_TASKS)], N_TRAIN
    if split == "all":
        return tasks
    if split == "train":
        return tasks[:n_train]
    if split == "heldout":
        return tasks[n_train:]
    raise refuse("split", f"must be 'train', 'heldout' or 'all', got {shown(split)}")


def make_demo_tasks(n: int, seed: int = 99, gym: str = DEFAULT_GYM) -> list[Task]:
    """``n`` extra tasks for demonstrations, never identical (issue and file) to a task of either gym."""
    check_gym(gym)
    gen = torch.Generator().manual_seed(seed)
    taken = {(t.issue, t.lines) for g in GYMS for t in make_tasks("all", g)}
    draw = _draw_issue_task if gym == "issue" else _draw_task
    out: list[Task] = []
    while len(out) < n:
        task = draw(-1 - len(out), gen)
        if (task.issue, task.lines) not in taken:
            out.append(task)
    return out


class Tokenizer:
    """Word-level tokenizer whose vocabulary is built from the tasks plus the action grammar.

    Ids are assigned in a fixed order (specials, action words, line numbers, then the sorted
    remaining words), so the same task list always gives the same ids.
    """

    def __init__(self, tasks: Sequence[Task]) -> None:
        numbers = [str(n) for n in range(1, N_LINES + 1)]
        words: set[str] = set()
        for task in tasks:
            words.update(task.issue.split())
            for line in task.lines:
                words.update(line.split())
        fixed = [*SPECIALS, *ACTION_WORDS, *numbers]
        rest = sorted(words - set(fixed))
        self.vocab: list[str] = fixed + rest
        self.ids: dict[str, int] = {w: i for i, w in enumerate(self.vocab)}
        self.pad_id, self.bos_id, self.eoa_id = self.ids[PAD], self.ids[BOS], self.ids[EOA]
        self.obs_id, self.end_obs_id = self.ids[OBS], self.ids[END_OBS]
        self.read_id, self.fix_id = self.ids["read"], self.ids["fix"]
        self.line_ids: dict[int, int] = {self.ids[s]: int(s) for s in numbers}  # token id -> line number

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """Words -> ids; an unknown word raises ValueError."""
        try:
            return [self.ids[w] for w in text.split()]
        except KeyError as err:
            raise FieldError(f"text: unknown word {err.args[0]!r}", "text") from None

    def decode(self, ids: Sequence[int]) -> str:
        """Ids -> space-joined words."""
        return " ".join(self.vocab[i] for i in ids)


def build_tokenizer(tasks: Sequence[Task] | None = None) -> Tokenizer:
    """Tokenizer over ``tasks`` (default: the defect gym's 30 tasks, whose words cover every pool;
    the issue gym's tasks give the same vocabulary and ids)."""
    return Tokenizer(make_tasks("all", "defect") if tasks is None else tasks)


def prompt_ids(task: Task, tok: Tokenizer) -> list[int]:
    """The episode's opening tokens: ``<bos>`` and the issue."""
    return [tok.bos_id, *tok.encode(task.issue)]


def observation_ids(task: Task, tok: Tokenizer) -> list[int]:
    """The ``read`` tool's observation: the numbered file between ``<obs>`` and ``</obs>``."""
    body = [i for line in task.lines for i in tok.encode(line)]
    return [tok.obs_id, *body, tok.end_obs_id]


@dataclass(frozen=True)
class StepResult:
    """What the environment answers to one complete action.

    Attributes:
        kind: 'read', 'fix' or 'invalid'.
        done: whether the episode ends here.
        reward: 1.0 for a correct fix, else 0.0.
        observation: tokens appended to the context (empty unless a read continues the episode).
    """

    kind: str
    done: bool
    reward: float
    observation: tuple[int, ...]


def parse_action(action: Sequence[int], tok: Tokenizer) -> tuple[str, int]:
    """Action tokens (ending in ``<eoa>``) -> ('read', 0), ('fix', line) or ('invalid', 0)."""
    if list(action) == [tok.read_id, tok.eoa_id]:
        return "read", 0
    if len(action) == 3 and action[0] == tok.fix_id and action[2] == tok.eoa_id and action[1] in tok.line_ids:
        return "fix", tok.line_ids[action[1]]
    return "invalid", 0


def env_step(task: Task, tok: Tokenizer, action: Sequence[int], turn: int, max_turns: int) -> StepResult:
    """Apply one complete action at 0-based ``turn``; the episode is truncated after ``max_turns``."""
    kind, line = parse_action(action, tok)
    if kind == "fix":
        return StepResult("fix", True, float(line == task.bug_line), ())
    if kind == "invalid":
        return StepResult("invalid", True, 0.0, ())
    if turn + 1 >= max_turns:  # a read that uses the last turn: truncated, no observation needed
        return StepResult("read", True, 0.0, ())
    return StepResult("read", False, 0.0, tuple(observation_ids(task, tok)))


def max_episode_len(max_turns: int) -> int:
    """Upper bound on an episode's token count, for sizing the model's context."""
    prompt = 1 + 5
    obs = 2 + N_LINES * 6
    return prompt + max_turns * MAX_ACTION_TOKENS + (max_turns - 1) * obs
