"""``pipesim compare --policies FILE``: a design whose scenario file names a class of the user's
own module runs, as under ``pipesim run --policies FILE``. Compare had no ``--policies`` option,
though its unknown-policy error told the user to pass one ("unrecognized arguments")."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipesim.io.cli import main
from pipesim.policies import catalog

POLICY_MODULE = '''
from dataclasses import dataclass

@dataclass(frozen=True)
class CmpSyncWhenBuffered:
    """Sync (partial rollout) once at least n finished episodes are buffered."""

    n: int = 2

    def pauses_only(self):
        return True

    def blocks_admission(self, p):
        return p.syncing

    def sync(self, p):
        if p.version + 1 < p.config.steps:
            yield p.buffered_at_least(self.n)
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()
'''

DESIGN = """schema_version = 1
name = "{name}"
[pipeline]
n_slots = 8
batch_size = 4
train_time_s = 5
sync_time_s = 2
max_staleness = 1
steps = 3
[weight_update]
type = "CmpSyncWhenBuffered"
n = {n}
"""

KEYS = ("throughput_per_hour", "staleness_mean", "gen_util", "episodes_trained", "sim_time_s")
SEEDS = 2


@pytest.fixture
def own_policies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two designs that name the user's weight update, in a fresh directory, and a catalog (and
    import path) whose registrations are undone after the test."""
    monkeypatch.setattr(catalog, "_registered", [])
    monkeypatch.setattr(catalog, "_cache", None)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cmppol.py").write_text(POLICY_MODULE)
    (tmp_path / "a.toml").write_text(DESIGN.format(name="a", n=1))
    (tmp_path / "b.toml").write_text(DESIGN.format(name="b", n=3))
    yield tmp_path
    for name in [
        m for m, mod in sys.modules.items() if str(getattr(mod, "__file__", "")).startswith(str(tmp_path))
    ]:
        del sys.modules[name]


def test_compare_runs_designs_that_name_a_class_of_a_policies_module_as_run_does(
    own_policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = own_policies / "cmp.json"
    args = ["compare", "a.toml", "b.toml", "--seeds", str(SEEDS), "--policies", "cmppol.py"]
    assert main([*args, "--quiet", "--json", str(out)]) == 0, capsys.readouterr().err
    rows = {r["metric"]: r["values"] for r in json.loads(out.read_text())["rows"]}
    for design in ("a.toml", "b.toml"):
        runs = []
        for seed in range(SEEDS):
            one = own_policies / f"{design}.{seed}.json"
            assert (
                main(["run", design, "--policies", "cmppol.py", "--seed", str(seed), "--json", str(one)]) == 0
            )
            runs.append(json.loads(one.read_text())["summary"])
        for key in KEYS:
            mean = sum(r[key] for r in runs) / SEEDS
            assert rows[key][design]["mean"] == pytest.approx(mean, rel=1e-12), (design, key)
    # the two designs differ (n=1 against n=3), so the table is not one design twice
    assert rows["staleness_mean"]["a.toml"] != rows["staleness_mean"]["b.toml"]


def test_compare_without_policies_names_the_option_it_takes(
    own_policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", "a.toml", "b.toml"]) == 2
    err = capsys.readouterr().err
    assert "CmpSyncWhenBuffered" in err and "--policies" in err


def test_compare_refuses_an_output_that_is_the_policies_module(
    own_policies: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (own_policies / "cmppol.py").read_text()
    assert main(["compare", "a.toml", "b.toml", "--policies", "cmppol.py", "--json", "cmppol.py"]) == 2
    assert "--json" in capsys.readouterr().err
    assert (own_policies / "cmppol.py").read_text() == before
