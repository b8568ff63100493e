"""``pipesim run SPEC`` of a compute run: ``gen_util`` is not read as the GPUs' use.

On the compute engine ``gen_util`` is the share of the engines' ``max_num_seqs`` places in use
(0.03 for a busy engine), and it was printed right under the throughput with nothing saying so.
The GPUs' and engines' busy shares now sit above it, a note under the table names the slot
metrics, and ``--json`` carries the same word under ``notes``; the summary keeps its keys. A slot
run's output is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipesim.io.cli import main
from pipesim.plan.runspec import dumps
from tests.test_runspec import SPEC  # the same small spec

SLOT_METRICS = ("gen_util", "gen_util_active", "gen_util_total", "slot_idle_ratio")
"""The kernel's slot metrics, which on the compute engine count ``max_num_seqs`` places."""


def _table(text: str) -> dict[str, str]:
    """The printed summary: one ``key value`` line each (the title line has more words; ``wrote
    FILE`` says what was written)."""
    rows = [ln.split() for ln in text.splitlines() if not ln.startswith("wrote ")]
    return {r[0]: r[1] for r in rows if len(r) == 2}


def _keys(text: str) -> list[str]:
    return list(_table(text))


def test_a_compute_run_prints_the_busy_shares_above_gen_util_and_notes_the_slots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "run.toml"
    spec.write_text(dumps(SPEC, "toml"))
    assert main(["run", str(spec), "--json", str(tmp_path / "r.json")]) == 0
    out, err = capsys.readouterr()
    keys = _keys(out)
    assert keys.index("gpu_busy_share") < keys.index("gen_util")
    assert keys.index("engine_busy_share") < keys.index("gen_util")
    assert keys.index("throughput_per_hour") < keys.index("gpu_busy_share")
    assert keys[:4] == ["timing_s/gen", "timing_s/param_sync", "timing_s/update_actor", "timing_s/step"]
    notes = [ln for ln in err.splitlines() if "gen_util" in ln]
    assert len(notes) == 1  # one line, naming the slot metrics and the busy shares to read instead
    table = _table(out)
    for k in ("gen_util", "slot_idle_ratio", "gpu_busy_share", "engine_busy_share"):
        assert k in notes[0]
    assert (
        f"busy {table['gpu_busy_share']} " in notes[0]
        and f"engines {table['engine_busy_share']} " in notes[0]
    )
    saved = json.loads((tmp_path / "r.json").read_text())
    # the keys unchanged: every printed row is a summary key, and each slot metric has its note
    assert set(table) == set(saved["summary"]) and keys == list(saved["summary"])
    assert set(saved["notes"]) == {k for k in SLOT_METRICS if k in saved["summary"]} >= {"gen_util"}
    assert all("max_num_seqs" in v and "gpu_busy_share" in v for v in saved["notes"].values())


def test_the_note_goes_with_the_table_where_json_takes_standard_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "run.toml"
    spec.write_text(dumps(SPEC, "toml"))
    assert main(["run", str(spec), "--json", "-"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)  # standard output is the JSON alone
    assert "gen_util" in data["notes"] and "gen_util" in _table(err)
    assert any(ln.startswith("note: gen_util") for ln in err.splitlines())


def test_a_slot_run_prints_no_slot_note_and_keeps_its_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "synchronous", "--set", "steps=2"]) == 0
    out, err = capsys.readouterr()
    keys = _keys(out)
    assert keys[:2] == ["throughput_per_hour", "gen_util"]  # as before: the slot run's own meaning
    assert "max_num_seqs" not in out + err
