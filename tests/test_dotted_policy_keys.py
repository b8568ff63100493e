"""Dotted keys into a policy's fields, from a user's walkthrough.

``--set durations.FIELD=...`` changed one field of the duration model, but ``--set
weight_update.load_time_s=3`` and ``--over weight_update.n=16,64`` were "unknown key": a policy's
own fields (a built-in's or a ``--policies`` class's) could be changed only by giving the whole
object again. Now ``ROLE.FIELD`` reaches every policy role whose object is a dataclass, the class
validates the value, and a sweep's column is the dotted key.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.cli_sweep import parse_over
from pipesim.io.overrides import apply_overrides
from pipesim.io.registry import get_scenario
from pipesim.io.sweep_exec import run_summary
from pipesim.io.sweep_grid import grid
from pipesim.policies import catalog
from pipesim.policies.faults import Timeout
from pipesim.policies.updates import InFlightUpdate, SyncEveryK

SMALL = ["steps=2"]

USER_MODULE = '''
"""A user's policies: one a dataclass, one a plain class."""
from dataclasses import dataclass


@dataclass(frozen=True)
class SyncWhenBuffered:
    n: int = 8

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n must be an integer >= 1, got {self.n!r}")

    def pauses_only(self) -> bool:
        return True

    def blocks_admission(self, p):
        return p.syncing

    def sync(self, p):
        if p.version + 1 < p.config.steps:
            yield p.buffered_at_least(self.n)
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


@dataclass(frozen=True)
class CappedThrottle:
    cap: int = 32

    def __post_init__(self) -> None:
        if isinstance(self.cap, bool) or not isinstance(self.cap, int) or self.cap < 1:
            raise ValueError(f"cap must be an integer >= 1, got {self.cap!r}")

    def admits(self, p) -> bool:
        return p.started < (p.version + 1 + p.max_staleness) * p.batch_size and p.n_running < self.cap


class PlainThrottle:
    """Not a dataclass: its fields are no dotted keys."""

    def __init__(self, cap: int = 4) -> None:
        self.cap = cap

    def admits(self, p) -> bool:
        return p.n_running < self.cap
'''


@pytest.fixture
def user_policies(tmp_path: Path) -> Iterator[Path]:
    """The user's module as a file for ``--policies``; the catalog is restored afterwards."""
    saved = list(catalog._registered)
    catalog._cache = None
    path = tmp_path / "mypol.py"
    path.write_text(USER_MODULE)
    yield path
    catalog._registered[:] = saved
    catalog._cache = None


def _small() -> Any:
    return apply_overrides(get_scenario("synchronous"), SMALL)[0]


SET_CASES = [  # (pairs, the role, the object the pairs should give)
    (["weight_update=InFlightUpdate()", "weight_update.load_time_s=3"], "weight_update", InFlightUpdate(3.0)),
    (["weight_update=SyncEveryK(k=2)", "weight_update.k=3"], "weight_update", SyncEveryK(k=3)),
    (["timeout=Timeout(cap_s=600)", "timeout.cap_s=300"], "timeout", Timeout(cap_s=300.0)),
]


@pytest.mark.parametrize(("pairs", "role", "expected"), SET_CASES)
def test_set_a_policy_field_equals_setting_the_object(pairs: list[str], role: str, expected: Any) -> None:
    scen = apply_overrides(_small(), pairs)[0]
    assert getattr(scen, role) == expected
    direct = _small().with_(**{role: expected})
    assert scen == direct
    assert run_summary(scen) == run_summary(direct)


def test_run_on_the_command_line_takes_a_dotted_policy_key(tmp_path: Path) -> None:
    outs = []
    for setting in (
        ["weight_update=InFlightUpdate()", "weight_update.load_time_s=3"],
        ["weight_update=InFlightUpdate(3)"],
    ):
        out = tmp_path / f"run{len(outs)}.json"
        argv = ["run", "synchronous", "--set", "steps=2", "--json", str(out)]
        assert main([*argv, *(a for s in setting for a in ("--set", s))]) == 0
        outs.append(pd.read_json(out, typ="series")["summary"])
    assert outs[0] == outs[1]


def test_sweep_over_a_policy_field_is_labelled_by_the_dotted_key(tmp_path: Path) -> None:
    scen = _small().with_(weight_update=InFlightUpdate())
    over = parse_over(scen, ["weight_update.load_time_s=1,30"])
    assert over == {"weight_update.load_time_s": [1.0, 30.0]}
    cells = grid(scen, over)
    assert [c.labels["weight_update.load_time_s"] for c in cells] == [1.0, 30.0]
    assert [c.scenario.weight_update for c in cells] == [InFlightUpdate(1.0), InFlightUpdate(30.0)]
    tables = []
    for axis in ("weight_update.load_time_s=1,30", "weight_update=InFlightUpdate(1),InFlightUpdate(30)"):
        csv = tmp_path / f"sweep{len(tables)}.csv"
        argv = ["sweep", "synchronous", "--set", "steps=2", "--workers", "1", "--quiet", "--csv", str(csv)]
        if axis.startswith("weight_update."):  # the set policy first, then an axis over its field
            argv += ["--set", "weight_update=InFlightUpdate()"]
        assert main([*argv, "--over", axis]) == 0
        tables.append(pd.read_csv(csv))
    assert list(tables[0]["weight_update.load_time_s"]) == [1, 30]
    assert tables[0]["throughput_per_hour"].tolist() == tables[1]["throughput_per_hour"].tolist()
    first, second = tables[0]["throughput_per_hour"]
    assert first != second  # the field did change the run


def test_sweep_over_a_duration_field_equals_sweeping_whole_models(tmp_path: Path) -> None:
    """--over durations.FIELD is an axis like a policy's field (it was refused, while --set took
    it): each cell's model is the design's own with the field changed."""
    scen = tmp_path / "mine.yaml"
    scen.write_text(
        "schema_version: 1\nname: mine\npipeline: {n_slots: 8, batch_size: 8, steps: 2}\n"
        "durations: {type: LogNormalDurations, median_s: 60.0, sigma: 0.8}\n"
    )
    tables = []
    for axis in (
        "durations.median_s=30,90",
        "durations=LogNormalDurations(median_s=30, sigma=0.8),LogNormalDurations(median_s=90, sigma=0.8)",
    ):
        csv = tmp_path / f"d{len(tables)}.csv"
        assert main(["sweep", str(scen), "--over", axis, "--workers", "1", "--quiet", "--csv", str(csv)]) == 0
        tables.append(pd.read_csv(csv))
    assert list(tables[0]["durations.median_s"]) == [30, 90]
    assert tables[0]["throughput_per_hour"].tolist() == tables[1]["throughput_per_hour"].tolist()
    assert tables[0]["throughput_per_hour"].nunique() == 2


def test_one_axis_sets_the_field_of_each_designs_own_policy() -> None:
    designs = {
        "a": _small().with_(weight_update=InFlightUpdate(1.0)),
        "b": _small().with_(weight_update=SyncEveryK(k=1, inner=InFlightUpdate())),
    }
    with pytest.raises(FieldError) as err:  # SyncEveryK has no load_time_s: named, with its fields
        grid(designs, {"weight_update.load_time_s": [2.0]})
    assert err.value.field == "weight_update.load_time_s" and "SyncEveryK" in str(err.value)
    designs["b"] = _small().with_(weight_update=InFlightUpdate(9.0))
    cells = grid(designs, {"weight_update.load_time_s": [2.0]})
    assert [c.scenario.weight_update for c in cells] == [InFlightUpdate(2.0), InFlightUpdate(2.0)]


def test_a_users_policy_class_takes_dotted_keys(user_policies: Path, tmp_path: Path) -> None:
    pol = ["--policies", str(user_policies)]
    csv = tmp_path / "sw.csv"
    argv = ["sweep", "async-eta2", *pol, "--set", "steps=2", "--set", "weight_update=SyncWhenBuffered()"]
    assert (
        main([*argv, "--over", "weight_update.n=16,64", "--workers", "1", "--quiet", "--csv", str(csv)]) == 0
    )
    assert list(pd.read_csv(csv)["weight_update.n"]) == [16, 64]
    outs = []
    for setting in (["admission=CappedThrottle()", "admission.cap=4"], ["admission=CappedThrottle(cap=4)"]):
        out = tmp_path / f"run{len(outs)}.json"
        sets = [a for s in ["steps=2", *setting] for a in ("--set", s)]
        assert main(["run", "synchronous", *pol, *sets, "--json", str(out)]) == 0
        outs.append(pd.read_json(out, typ="series")["summary"])
    assert outs[0] == outs[1]


ERROR_CASES = [  # (pairs, the field the FieldError names, words the message holds)
    (
        ["weight_update.load_time_s=3"],
        "weight_update.load_time_s",
        ["weight_update", "PartialRollout", "no fields"],
    ),
    (
        ["weight_update=SyncEveryK()", "weight_update.kk=3"],
        "weight_update.kk",
        ["weight_update", "SyncEveryK", "its fields: k, inner"],
    ),
    (
        ["weight_update=InFlightUpdate()", "weight_update.load_time_s=-1"],
        "weight_update.load_time_s",
        [">= 0"],
    ),
    (
        ["weight_update=InFlightUpdate()", "weight_update.load_time_s=soon"],
        "weight_update.load_time_s",
        ["soon"],
    ),
    (
        ["weight_update=SyncEveryK()", "weight_update.inner=Drain()"],
        "weight_update.inner",
        ["give weight_update whole"],
    ),
    (
        ["weight_update=SyncEveryK()", "weight_update.inner.k=2"],
        "weight_update.inner.k",
        ["SyncEveryK(..., inner=...)"],
    ),
    (["timeout.cap_s=300"], "timeout.cap_s", ["timeout is none", "timeout="]),
]


@pytest.mark.parametrize(("pairs", "field", "words"), ERROR_CASES)
def test_a_bad_dotted_key_or_value_names_the_key(pairs: list[str], field: str, words: list[str]) -> None:
    with pytest.raises(FieldError) as err:
        apply_overrides(_small(), pairs)
    assert err.value.field == field
    for word in words:
        assert word in str(err.value)


@pytest.mark.parametrize(
    ("setting", "field", "words"),
    [
        (["admission=CappedThrottle()", "admission.cap=0"], "admission.cap", ["cap must be an integer >= 1"]),
        (
            ["admission=CappedThrottle()", "admission.eta=2"],
            "admission.eta",
            ["CappedThrottle", "its fields: cap"],
        ),
        (
            ["admission=PlainThrottle()", "admission.cap=2"],
            "admission.cap",
            ["not a dataclass", "admission=PlainThrottle("],
        ),
    ],
)
def test_a_users_class_refuses_by_its_own_rules(
    user_policies: Path, capsys: pytest.CaptureFixture[str], setting: list[str], field: str, words: list[str]
) -> None:
    sets = [a for s in ["steps=2", *setting] for a in ("--set", s)]
    assert main(["run", "synchronous", "--policies", str(user_policies), *sets]) == 2
    err = capsys.readouterr().err
    assert field in err
    for word in words:
        assert word in err


def test_the_valid_keys_list_the_fields_of_the_policies() -> None:
    from pipesim.io.overrides import over_keys, valid_keys

    scen = _small().with_(weight_update=SyncEveryK(k=2))
    assert {"weight_update.k", "weight_update.inner"} <= set(valid_keys(scen))
    assert "weight_update.k" in over_keys(scen) and any(k.startswith("durations.") for k in over_keys(scen))
    assert "seed" in valid_keys(scen) and "seed" not in over_keys(scen)
    assert not any(k.startswith("timeout.") for k in valid_keys(scen))  # none: no fields
