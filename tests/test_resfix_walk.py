"""From a researcher's walkthrough: the pool-too-big refusal, a sweep stopped early, and the
episode table's column types.

1. ``--set`` order: ``--set max_staleness=100000 --set pool_size=3000`` was refused (the default
   pool of 6,401,408 tasks passed the 4,194,304 a run may draw) while the reverse order ran, and
   ``--set max_staleness=100000 --set steps=5`` showed ``steps 20``: the refusal was a plain
   FieldError, raised before the later ``--set`` applied. It is a CrossFieldError now, and the
   refusal of pairs no later one settles is judged on the final values.
2. That refusal named ``pool_size`` (never set) whatever the cause, wrote ``max_staleness``
   without its value and suggested neither a smaller ``max_staleness`` nor a ``pool_size``; a
   sweep refused by it named no axis value.
3. ``pipesim sweep`` interrupted without ``--csv`` printed nothing: the finished cells were lost.
4. ``episode_table["discarded_s"]`` was object (None) in a run that discarded nothing and float64
   in one that did, so two runs' tables concatenated as object.
"""

from __future__ import annotations

import itertools
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pipesim
from pipesim import PipelineConfig, Scenario
from pipesim.core.errors import MAX_DURATION_POOL
from pipesim.core.validate import CrossFieldError, FieldError, int_shown
from pipesim.io.cli import main
from pipesim.io.registry import apply_overrides
from pipesim.policies.groups import WholeGroups
from pipesim.workload.durations import AgentDurations, LogNormalDurations
from tests.test_results_columns import _result
from tests.test_sweep_interrupts import SWEEP, _on_threads, interrupt_on_eta2, quick

AGENT = Scenario(  # /tmp/wk_researcher/agent.yaml
    pipeline=PipelineConfig(
        n_slots=64, batch_size=64, train_time_s=60, sync_time_s=10, max_staleness=2, steps=20
    ),
    durations=AgentDurations(tool_median_s=2.0),
    name="agent-eta2-partial",
)

# -- 1. the same final values in any --set order: the same outcome ---------------------------------

ORDERS: list[tuple[str, list[str]]] = [
    ("staleness-then-pool", ["max_staleness=100000", "pool_size=3000"]),
    ("steps-then-pool", ["steps=70000", "pool_size=3000"]),
    ("slots-then-pool", ["n_slots=5000000", "pool_size=3000"]),
    ("staleness-steps-pool", ["max_staleness=100000", "steps=5", "pool_size=3000"]),
    ("staleness-and-steps-unsettled", ["max_staleness=100000", "steps=5"]),
    ("steps-and-batch-unsettled", ["steps=70000", "batch_size=32"]),
    ("whole-groups-and-staleness", ["batching=WholeGroups(4)", "max_staleness=100000", "pool_size=3000"]),
]


def _outcome(pairs: list[str]) -> tuple[str, Any, str]:
    """("ok", the scenario, "") or ("refused", the error's type and field, its message past the
    pair that heads it)."""
    try:
        scenario, _ = apply_overrides(AGENT, pairs)
    except FieldError as exc:
        return "refused", (type(exc), exc.field), str(exc).split(": ", 1)[1]
    return "ok", scenario, ""


@pytest.mark.parametrize("pairs", [r[1] for r in ORDERS], ids=[r[0] for r in ORDERS])
def test_the_same_final_values_in_any_set_order_give_the_same_outcome(pairs: list[str]) -> None:
    outcomes = {tuple(order): _outcome(list(order)) for order in itertools.permutations(pairs)}
    first = next(iter(outcomes.values()))
    assert all(o == first for o in outcomes.values()), outcomes
    if first[0] == "refused":  # judged on the final values: each one set is in the message
        for key, text in (p.split("=", 1) for p in pairs if "(" not in p):
            assert f"{key} {int_shown(int(text))}" in first[2], (key, first[2])


def test_the_settled_run_is_the_run_of_the_final_values() -> None:
    forward, _ = apply_overrides(AGENT, ["max_staleness=100000", "pool_size=3000"])
    assert forward == AGENT.with_(max_staleness=100000, pool_size=3000)


# -- 2. the refusal names the largest term's field, every term's value, and the fixes that fit -----

FIX = re.compile(r"(steps|max_staleness|batch_size|n_slots) <= ([\d,]+)")
POOL = re.compile(r"pool_size from ([\d,]+) \(steps x batch_size\) to ([\d,]+)( with pool_draw 'stable')?")

REFUSALS: list[tuple[str, dict[str, Any], dict[str, Any], str, set[str]]] = [
    ("walkthrough", {"max_staleness": 100_000}, {}, "max_staleness", {"max_staleness", "batch_size", "pool"}),
    ("staleness-1e18", {"max_staleness": 10**18}, {}, "max_staleness", {"max_staleness", "pool"}),
    ("steps", {"steps": 10**6}, {}, "steps", {"steps", "batch_size"}),
    ("slots", {"n_slots": 2**24, "batch_size": 4}, {}, "n_slots", {"n_slots", "pool"}),
    (
        "filtering-groups",
        {"steps": 40_000},
        {"batching": WholeGroups(4, filter_rate=0.5)},
        "steps",
        {"steps", "batch_size", "pool"},
    ),
]


def _refused(pipe: dict[str, Any], extra: dict[str, Any]) -> CrossFieldError:
    with pytest.raises(CrossFieldError) as info:
        AGENT.with_(**pipe, **extra)
    return info.value


@pytest.mark.parametrize(
    ("pipe", "extra", "field", "fixes"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_a_pool_past_the_bound_names_its_largest_term_and_the_fixes_that_fit(
    pipe: dict[str, Any], extra: dict[str, Any], field: str, fixes: set[str]
) -> None:
    err = _refused(pipe, extra)
    assert err.field == f"pipeline.{field}", str(err)
    # the values it was refused at, with a pool set (the default pool is what it was refused for)
    sc = AGENT.with_(**pipe, **extra, pool_size=MAX_DURATION_POOL, pool_draw="stable")
    p, msg = sc.pipeline, str(err)
    for name in ("steps", "max_staleness", "batch_size", "n_slots"):
        assert f"{name} {int_shown(getattr(p, name))}" in msg, (name, msg)  # every term's value
    assert f"= {int_shown(sc.default_pool_size)} tasks" in msg, msg
    said = {m.group(1): int(m.group(2).replace(",", "")) for m in FIX.finditer(msg)}
    pool = POOL.search(msg)
    assert set(said) | ({"pool"} if pool else set()) == fixes, msg
    for name, most in said.items():  # each bound is the largest value that fits
        AGENT.with_(**{**pipe, name: most}, **extra)
        with pytest.raises(CrossFieldError):
            AGENT.with_(**{**pipe, name: most + 1}, **extra)
    if pool:  # from steps x batch_size to the largest pool the scenario takes (a whole draw's bound)
        least, top = (int(g.replace(",", "")) for g in pool.groups()[:2])
        draw = {"pool_draw": "stable"} if pool.group(3) else {}
        assert least == p.steps * p.batch_size and top <= MAX_DURATION_POOL
        for size in (least, top):
            AGENT.with_(**pipe, **extra, **draw, pool_size=size).check_pool_size()
        with pytest.raises(FieldError):
            AGENT.with_(**pipe, **extra, **draw, pool_size=least - 1).check_pool_size()
        if top < MAX_DURATION_POOL:
            with pytest.raises(FieldError):
                AGENT.with_(**pipe, **extra, **draw, pool_size=top + 1)


def test_the_scenario_itself_refuses_a_huge_staleness_naming_it() -> None:
    with pytest.raises(CrossFieldError) as info:
        Scenario(pipeline=PipelineConfig(n_slots=64, batch_size=64, steps=3, max_staleness=10**18))
    assert info.value.field == "pipeline.max_staleness"
    assert "steps 3 + max_staleness 1,000,000,000,000,000,000 + 1" in str(info.value)


def test_a_sweep_refused_by_a_cell_names_its_axis_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "schema_version: 1\nname: agent-eta2-partial\nseed: 0\npipeline: {n_slots: 64, batch_size: 64, "
        "train_time_s: 60, sync_time_s: 10, max_staleness: 2, steps: 20}\n"
        "durations: {type: AgentDurations, tool_median_s: 2.0}\nweight_update: {type: PartialRollout}\n"
    )
    assert main(["sweep", str(path), "--over", "max_staleness=0,100000", "--seeds", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--over max_staleness=100000: max_staleness is the largest term" in err, err


# -- 3. an interrupted sweep prints its finished cells, headed as partial --------------------------


def _table_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.strip() and not ln.startswith(("partial:", "note:"))]


def test_an_interrupted_sweep_without_csv_prints_the_finished_cells_as_partial(
    one_thread: ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _on_threads(monkeypatch, one_thread, interrupt_on_eta2)
    assert main(SWEEP) == 130
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        "pipesim: interrupted: 2 of 4 cells had finished; nothing written (no --csv)"
    ]
    lines = out.splitlines()
    assert lines[0].startswith("partial: interrupted after 2 of 4 cells had finished"), out
    rows = _table_lines(out)
    assert len(rows) == 3 and rows[0].split()[:3] == ["design", "max_staleness", "n_seeds"], out
    cells = [r.split()[-5:-2] for r in rows[1:]]  # max_staleness, n_seeds, throughput_per_hour_mean
    assert cells == [["0", "1", "1"], ["1", "1", "2"]]  # the cells that finished, in grid order


def test_the_partial_table_has_the_complete_tables_columns(
    one_thread: ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _on_threads(monkeypatch, one_thread, quick)
    assert main(SWEEP) == 0
    whole = _table_lines(capsys.readouterr().out)
    monkeypatch.undo()
    _on_threads(monkeypatch, one_thread, interrupt_on_eta2)
    assert main(SWEEP) == 130
    part = _table_lines(capsys.readouterr().out)
    assert part[0].split() == whole[0].split() and len(whole) == 5


# -- 4. the episode table's column types are the same in every run --------------------------------


def _pair() -> tuple[pd.DataFrame, pd.DataFrame]:
    pipe = PipelineConfig(n_slots=8, batch_size=6, train_time_s=20, sync_time_s=5, max_staleness=1, steps=5)
    base = Scenario(pipeline=pipe, durations=LogNormalDurations(30.0, 1.0), seed=1)  # no torch draws
    kept = pipesim.run(base).episode_table
    dropping = base.with_(batching=pipesim.DropStale(), admission=pipesim.AReaLThrottle())
    dropped = pipesim.run(dropping).episode_table
    assert kept["discarded_s"].isna().all() and dropped["discarded_s"].notna().any()
    return kept, dropped


def test_episode_table_dtypes_are_the_same_with_and_without_discards() -> None:
    kept, dropped = _pair()
    empty = _result([], [], 0.0).episode_table
    assert kept.dtypes.to_dict() == dropped.dtypes.to_dict() == empty.dtypes.to_dict()
    both = pd.concat([kept, dropped], ignore_index=True)
    assert both.dtypes.to_dict() == kept.dtypes.to_dict()
    for col in ("duration_s", "start_s", "end_s", "discarded_s"):
        assert kept[col].dtype == np.float64, col
    # the module docstring's rule: events and trained are int32 where every value fits; in
    # episode_table ids, slots and version are int64, newest_version int32 where it fits
    pipe = PipelineConfig(n_slots=8, batch_size=6, steps=3)
    run = pipesim.run(Scenario(pipeline=pipe, durations=LogNormalDurations(30.0, 1.0)))
    for table in (run.events, run.trained):
        ints = [c for c in table.columns if pd.api.types.is_integer_dtype(table[c])]
        assert ints and all(table[c].dtype == np.int32 for c in ints), table.dtypes
    eps = run.episode_table
    for col in ("episode_id", "task_id", "slot", "replica", "version"):
        assert eps[col].dtype == np.int64, col
    assert eps["newest_version"].dtype == np.int32
