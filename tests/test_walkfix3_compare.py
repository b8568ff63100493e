"""Walkthrough follow-ups to ``pipesim compare``.

* A design that failed before any seed finished for every design left no ``--json`` ("not
  written: --json f.json"), though docs/usage.md says the JSON carries the failure as ``error``: a
  script reading the file found none. It is written now, partial, with no rows and the error.
* A run spec's tool-call slot warning was printed once per seed (4 identical lines at --seeds 4),
  naming no design: now once per design, naming it.
* A bar's label dropped the table's trailing zeros (0.793 over the table's 0.7930).
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import pytest

import pipesim
from pipesim.compute.tool_slots import ToolSlotWarning
from pipesim.io import compare_figure
from pipesim.io.cli import main
from pipesim.io.cli_common import fmt_number
from pipesim.plan import runspec

FACTORY = """
from pipesim.io.registry import get_scenario
from pipesim.policies.base import CountThrottle


class Boom:
    def __init__(self):
        self.inner = CountThrottle()

    def admits(self, p):
        if p.version >= 1:
            raise RuntimeError("boom at version 1")
        return self.inner.admits(p)


def good():
    return get_scenario("fig13.1-async").with_(steps=2)


def flaky():
    return get_scenario("fig13.1-async").with_(steps=2, admission=Boom())
"""


@pytest.fixture
def factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "walkfix3_flaky.py").write_text(textwrap.dedent(FACTORY))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return "walkfix3_flaky"


def test_a_failure_before_any_seed_finished_still_writes_the_json_with_its_error(
    factory: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, page = tmp_path / "f.json", tmp_path / "f.html"
    good, flaky = f"{factory}:good", f"{factory}:flaky"
    argv = ["compare", good, flaky, "--seeds", "3", "--json", str(out), "--html", str(page), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"design '{flaky}', seed 0" in err and "not written: --html" in err and "--json" not in err
    payload = json.loads(out.read_text())
    assert payload["partial"] is True and payload["seeds_done"] == 0 and payload["seeds"] == 3
    assert payload["rows"] == [] and payload["notes"] == []
    assert f"design '{flaky}', seed 0" in payload["error"] and "boom at version 1" in payload["error"]
    assert payload["designs"] == {good: {"runs": 0}, flaky: {"runs": 0}}
    assert not page.exists()


def test_the_json_of_a_failure_before_any_seed_goes_to_stdout_with_a_dash(
    factory: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", f"{factory}:good", f"{factory}:flaky", "--seeds", "2", "--json", "-", "--quiet"]
    assert main(argv) == 2
    payload = json.loads(capsys.readouterr().out)
    assert payload["seeds_done"] == 0 and payload["error"]


SLOTTED = """
kind = "compute"
[cluster]
gpu = "h100-sxm"
n_gpus = 8
[model]
name = "qwen3-0.6b"
max_model_len = 16384
max_num_seqs = 16
[workload]
prompts_per_step = 16
samples_per_prompt = 4
prompt_tokens = 512
max_response_tokens = 1024
response = { median_tokens = 200, sigma = 0.5 }
agent = { turns = 4, tool_latency_s = 5.0, tool_latency_sigma = 0.5, observation_tokens = 200 }
[design]
placement = 4
tp = 1
eta = ETA
update = "partial"
[run]
steps = 4
seed = 0
"""
"""The walkthrough's ``--export-best`` run spec (eta 1: slot-limited at every seed); eta 0 is not."""


def _specs(tmp_path: Path) -> list[str]:
    names = []
    for eta in (1, 0):
        (tmp_path / f"eta{eta}.toml").write_text(SLOTTED.replace("ETA", str(eta)))
        names.append(f"eta{eta}.toml")
    return names


def test_a_design_s_warning_is_printed_once_naming_it_not_once_per_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    a, b = _specs(tmp_path)
    assert main(["compare", a, b, "--seeds", "3", "--quiet"]) == 0
    said = [s for s in capsys.readouterr().err.splitlines() if s.startswith("pipesim: warning:")]
    assert len(said) == 1, said
    assert said[0].startswith(f"pipesim: warning: design '{a}': episodes waiting on tool calls")


def test_compare_in_python_passes_each_design_s_warning_on_once(tmp_path: Path) -> None:
    a, b = _specs(tmp_path)
    designs = {"A": runspec.load(tmp_path / a, []), "B": runspec.load(tmp_path / b, [])}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cmp = pipesim.compare(designs, seeds=3)
    slots = [w for w in caught if issubclass(w.category, ToolSlotWarning)]
    assert [str(w.message)[:12] for w in slots] == ["design 'A': "]
    # the bars carry the table's own text, trailing zeros and all
    bars = {bar.name: list(bar.text) for bar in cmp.figure.data}
    busy = cmp.table.iloc[cmp.keys.index("engine_busy_share")]
    assert bars["engine busy share"] == [fmt_number(float(busy[(n, "mean")])) for n in ("A", "B")]


def test_a_bar_label_is_the_table_s_text() -> None:
    assert compare_figure.bar_label(0.793, fmt_number) == fmt_number(0.793) == "0.7930"
    assert compare_figure.bar_label(float("nan"), fmt_number) == ""
