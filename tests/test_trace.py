"""The Perfetto / Chrome trace: counter tracks and flow arrows agree with the run they come from."""

from __future__ import annotations

import math

import pytest

import pipesim
from pipesim.io.trace import US, run_to_trace


@pytest.mark.parametrize("eta, drop", [(0, False), (2, False), (1, True)])
def test_counters_and_flows_follow_the_run(eta: int, drop: bool) -> None:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(
            n_slots=8, batch_size=6, train_time_s=20, sync_time_s=5, max_staleness=eta, steps=5
        ),
        batching=pipesim.DropStale() if drop else pipesim.OldestFinishedFirst(),
        admission=pipesim.AReaLThrottle() if drop else pipesim.CountThrottle(),
        seed=eta,
    )
    r = pipesim.run(sc)
    events = run_to_trace(r)["traceEvents"]
    eps = r.episode_table
    spans = [(a * US, math.inf if math.isnan(b) else b * US) for a, b in zip(eps["start_s"], eps["end_s"])]
    in_flight = [e for e in events if e["ph"] == "C" and e["name"] == "episodes in flight"]
    assert in_flight and max(e["args"]["episodes"] for e in in_flight) <= sc.pipeline.n_slots
    for e in in_flight[:-1]:  # the level after each instant, counted from the episodes themselves
        assert e["args"]["episodes"] == sum(a <= e["ts"] < b for a, b in spans), e
    buffered = [e for e in events if e["ph"] == "C" and e["name"] == "buffered"]
    assert buffered[-1]["args"]["episodes"] == r.summary()["episodes_buffered"]
    assert min(e["args"]["episodes"] for e in buffered) >= 0
    # at every training step the level equals the engine's own count once the batch is taken
    level_at = {e["ts"]: e["args"]["episodes"] for e in buffered}
    train = sorted(e["ts"] for e in events if e["ph"] == "X" and e["cat"] == "train")
    for (_step, _st, _tr, _run, in_buffer, _dr), ts in zip(r.ledger_log, train):
        assert level_at[ts] == in_buffer
    version = [e for e in events if e["ph"] == "C" and e["name"] == "version"]
    assert version[-1]["args"]["version"] == sc.pipeline.steps
    starts = {e["id"]: e["ts"] for e in events if e["ph"] == "s"}
    ends = {e["id"]: e["ts"] for e in events if e["ph"] == "f"}
    assert set(starts) == set(ends) == set(r.trained["episode_id"].astype(int))
    assert all(starts[i] <= ends[i] for i in starts)  # an episode is consumed after it ends


def test_flows_are_left_out_above_max_flows() -> None:
    from pipesim.io.trace import events_to_trace

    r = pipesim.run(pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=8, batch_size=8, steps=3)))
    t = events_to_trace(r.events, r.episode_table, trained=r.trained, max_flows=5)["traceEvents"]
    assert not [e for e in t if e["ph"] in ("s", "f")]
    assert [e for e in t if e["ph"] == "C"]


def test_a_saved_run_gives_the_same_trace_discards_included(tmp_path: pytest.TempPathFactory) -> None:
    from pipesim.io.trace import events_to_trace

    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(
            n_slots=8, batch_size=6, train_time_s=20, sync_time_s=5, max_staleness=1, steps=5
        ),
        batching=pipesim.DropStale(),
        admission=pipesim.AReaLThrottle(),
        seed=1,
    )
    r = pipesim.run(sc)
    assert r.episode_table["discarded_s"].notna().any()  # the case the saved tables must carry
    loaded = pipesim.load(r.save(tmp_path / "run"))  # type: ignore[operator]
    live = run_to_trace(r)["traceEvents"]
    again = events_to_trace(loaded.events, loaded.episode_table, sc.name, loaded.trained)["traceEvents"]
    buffered = [[e for e in t if e["ph"] == "C" and e["name"] == "buffered"] for t in (live, again)]
    assert buffered[0] == buffered[1]
    assert min(e["args"]["episodes"] for e in buffered[1]) >= 0


def test_a_trace_too_large_to_open_is_refused_naming_the_events(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    """Above MAX_TRACE_EVENTS the trace is refused before any JSON is built (a verl-scale run was
    gigabytes), one line naming ``events`` from the CLI; at the bound it is written."""
    from pipesim.core.validate import FieldError
    from pipesim.io import trace_bounds
    from pipesim.io.cli import main

    res = pipesim.run(pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=3)))
    monkeypatch.setattr(trace_bounds, "MAX_TRACE_EVENTS", len(res.events) - 1)
    with pytest.raises(FieldError) as info:
        run_to_trace(res)
    assert info.value.field == "events"
    out = tmp_path / "t.json"  # type: ignore[operator]
    assert main(["trace", "fig13.1-sync", "--out", str(out)]) == 2
    assert not out.exists()
    monkeypatch.setattr(trace_bounds, "MAX_TRACE_EVENTS", len(res.events))
    assert run_to_trace(res)["traceEvents"]


def test_run_writes_its_other_outputs_before_a_refused_trace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    """``pipesim run --trace`` of a run too large to trace: the JSON and the saved run are kept
    (the trace comes last), the command exits 2 naming events. The bound is the run's lower
    bound of events (checked before the run), under its real count: only the run can tell."""
    from pipesim.io import trace_bounds
    from pipesim.io.cli import main
    from pipesim.io.cli_common import build_scenario

    p = build_scenario("fig13.1-sync", [], None)[0].pipeline
    monkeypatch.setattr(trace_bounds, "MAX_TRACE_EVENTS", trace_bounds.min_events(p.steps, p.batch_size))
    js, saved, tr = (tmp_path / n for n in ("r.json", "saved", "t.json"))  # type: ignore[operator]
    argv = ["run", "fig13.1-sync", "--json", str(js), "--save", str(saved), "--trace", str(tr)]
    assert main(argv) == 2
    assert js.exists() and saved.is_dir() and not tr.exists()


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ("negative-start", "start_s[0]"),  # drew at ts = -10,000,000 without a word
        ("header-only", "events"),  # wrote an empty trace that opens blank
    ],
)
def test_an_events_table_no_run_could_write_is_refused_naming_the_field(edit: str, field: str) -> None:
    from pipesim.core.validate import FieldError
    from pipesim.io.api import run as run_scenario
    from pipesim.io.registry import get_scenario
    from pipesim.io.trace import events_to_trace

    events = run_scenario(get_scenario("fig13.1-sync").with_(steps=2)).events.copy()
    if edit == "negative-start":
        events.loc[0, "start_s"] = -10.0
    else:
        events = events.iloc[:0]
    with pytest.raises(FieldError) as info:
        events_to_trace(events)
    assert info.value.field == field


def test_a_trace_without_flow_arrows_says_so() -> None:
    """Above MAX_FLOWS trained episodes the arrows are left out; the command said only 'wrote'."""
    import pandas as pd

    from pipesim.io.trace import MAX_FLOWS, flows_note

    assert flows_note(None) == "" and flows_note(pd.DataFrame({"x": range(MAX_FLOWS)})) == ""
    assert "no flow arrows: 20,001 trained episodes" in flows_note(pd.DataFrame({"x": range(MAX_FLOWS + 1)}))
