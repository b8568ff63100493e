"""A learning rate so large that training's numbers stop being finite: the run is kept as diverged.

Measured before: ``python -m offpolicy.staleness --lr 1e6`` (and ``fp8 --lr``, ``lr_sweep --lrs``,
``scenarios.cosim --lr``) died with a torch traceback from ``torch.multinomial`` ("probability
tensor contains either inf, nan or element < 0") after the first update, losing the sweep where it
stood, though an lr sweep exists to find where training breaks. Now sampling, the loss and the
gradient norm raise :class:`offpolicy.rollout.Diverged`, and the scripts keep the run: its history
up to there, ``diverged`` saying where, a held-out pass rate of 0, counted as collapsed. Runs are
two steps; lr 1e6 (<= ``LR_MAX``) breaks TinyAgent within them.
"""

from __future__ import annotations

import copy
import importlib
import json
import math
from functools import cache
from pathlib import Path

import pytest
import torch

from offpolicy import Diverged
from offpolicy.checks import LR_MAX
from offpolicy.experiment import (
    DIVERGED_HELDOUT,
    fmt_ci,
    history_mean,
    run_one,
    summary_table,
    write_reward_figure,
)
from offpolicy.gym import Tokenizer, make_tasks
from offpolicy.model import TinyAgent
from offpolicy.rl import RLConfig
from offpolicy.rollout import sample_episodes
from offpolicy.update import train_offpolicy
from tests.test_offpolicy_resume_fp8 import shared_load_base

torch.set_num_threads(1)
HUGE_LR = 1e6  # TinyAgent's forward overflows from about 1e5; the first update takes it there
assert HUGE_LR <= LR_MAX
SMALL = RLConfig(episodes_per_step=16, group_size=4, minibatches=2, seed=13, lr=HUGE_LR)


@cache
def _base() -> tuple[TinyAgent, Tokenizer]:
    base, tok, _ = shared_load_base()  # load_base, once per process for the scripts below too
    return base, tok


def test_sampling_from_weights_that_are_not_finite_raises_diverged_not_a_torch_error() -> None:
    base, tok = _base()
    model = copy.deepcopy(base)
    with torch.no_grad():
        next(model.parameters()).fill_(math.nan)
    with pytest.raises(Diverged) as info:
        sample_episodes(model, make_tasks("train")[:2], tok, torch.Generator().manual_seed(0), 2)
    assert info.value.where == "logits"


def test_a_diverging_training_loop_hands_back_the_steps_before_it() -> None:
    base, tok = _base()
    with pytest.raises(Diverged) as info:
        train_offpolicy(copy.deepcopy(base), make_tasks("train"), tok, SMALL, 20)
    exc = info.value
    assert exc.step is not None and 0 <= exc.step < 20 and exc.where in ("logits", "loss", "gradient")
    assert [r["step"] for r in exc.history] == list(range(exc.step))


def test_a_diverged_run_is_recorded_as_collapsed_and_the_tables_still_read_it(tmp_path: Path) -> None:
    base, tok = _base()
    run = run_one(base, tok, 0, "none", 0, 2, HUGE_LR, eval_every=0)
    assert run["diverged"] is not None and run["diverged"]["step"] < 2
    assert run["heldout"] == DIVERGED_HELDOUT and len(run["history"]) == run["diverged"]["step"]
    json.dumps(run)  # stored as it is
    healthy = run_one(base, tok, 0, "none", 1, 2, 3e-4, eval_every=0, eval_episodes=2)  # 80 held out
    assert healthy["diverged"] is None and len(healthy["history"]) == 2
    lines = summary_table([run, healthy], keys=("lr",)).splitlines()
    assert lines[1].endswith("| 1/1") and lines[2].endswith("| 0/1")  # the diverged lr: collapsed
    assert "(n=1)" in lines[1] or "n/a" in lines[1]  # its reward cell: the steps it never reached
    assert math.isnan(history_mean(run, "reward", 2)) and fmt_ci([math.nan]) == "n/a"
    assert fmt_ci([0.5, math.nan]).endswith("(n=1)")  # a cell says it is over fewer runs
    write_reward_figure([run, healthy], tmp_path / "f.html", ("lr",), "t")
    assert (tmp_path / "f.html").stat().st_size > 0


SCRIPTS = [  # each script that trains at a learning rate given on its command line
    ("staleness", ["--lr", "1e6", "--lags", "0", "--corrections", "none"]),
    ("lr_sweep", ["--lrs", "1e6", "--lags", "0"]),
    ("fp8", ["--lr", "1e6", "--corrections", "none"]),
]


@pytest.mark.parametrize(("script", "args"), SCRIPTS, ids=[s for s, _ in SCRIPTS])
def test_each_script_finishes_a_diverging_run_and_keeps_it(
    script: str,
    args: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = importlib.import_module(f"offpolicy.{script}")
    monkeypatch.setattr(module, "load_base", shared_load_base)
    main = module.main
    out = tmp_path / "runs.json"
    assert main([*args, "--steps", "2", "--seeds", "1", "--eval-every", "0", "--json", str(out)]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert runs and all(r["diverged"] is not None and r["heldout"]["pass_rate"] == 0.0 for r in runs)
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err and "DIVERGED" in printed.out
    assert "| 1/1" in out.with_suffix(".txt").read_text()  # counted as collapsed in the table
