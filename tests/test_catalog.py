"""The policy catalog: discovery, the safe ``Name(args)`` parser, user modules, and the layering rule
that no module of pipesim imports the scenarios package by name."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import inspect
import shlex
import sys
import textwrap
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pipesim
from pipesim.core.validate import FieldError
from pipesim.policies import catalog
from pipesim.policies.admission import AReaLThrottle
from pipesim.policies.base import Drain, PartialRollout
from pipesim.policies.faults import RetryFailed, Timeout
from pipesim.policies.replicas import LeastLoaded, PerReplicaSync, Replicas, RoundRobin
from pipesim.policies.updates import InFlightUpdate, SyncEveryK
from tests.test_refusals_core import check_refusal

PIPESIM_DIR = Path(pipesim.__file__).parent


@pytest.fixture
def clean_catalog() -> Iterator[None]:
    """A catalog as a fresh process has it (no module registered: an earlier test's in-process
    ``--policies`` run leaves its module there, e.g. test_cli's examples/headroom.py, whose
    HeadroomThrottle then resolved where this file expects it unknown), restored afterwards."""
    saved = list(catalog._registered)
    catalog._registered.clear()
    catalog._cache = None
    yield
    catalog._registered[:] = saved
    catalog._cache = None


def test_catalog_holds_every_policy_class_of_the_policy_modules() -> None:
    classes = catalog.policy_classes()
    # at least one class of each module and each slot, found by scanning (not a hand-kept list)
    for name in (
        "CountThrottle",
        "Drain",
        "PartialRollout",
        "OldestFinishedFirst",
        "AReaLThrottle",
        "QueueAhead",
        "LagBound",
        "InFlightUpdate",
        "AbortReprefill",
        "SyncEveryK",
        "DropStale",
        "WindowedFIFO",
        "DropFailed",
        "RetryFailed",
        "Timeout",
        "Replicas",
        "LeastLoaded",
        "RoundRobin",
        "PerReplicaSync",
        "WeightSyncCost",
        "VerlRollouter",
        "PipelineRLLag",
        "RollGroupExpiry",
    ):
        assert name in classes, name
    assert "CountsOnly" not in classes and "FullBatch" not in classes  # mixins, not policies
    assert "EpisodeLifecycle" not in classes
    assert set(catalog.duration_classes()) >= {
        "AgentDurations",
        "ExponentialDurations",
        "LogNormalDurations",
        "TraceDurations",
    }
    # every public dataclass defined in a policy module that fits a slot is catalogued
    for mod_name in catalog.POLICY_MODULES:
        mod = importlib.import_module(mod_name)
        for name, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == mod_name and dataclasses.is_dataclass(cls) and catalog.kinds_of(cls):
                assert name in classes, f"{mod_name}.{name}"
    assert catalog.policy_classes("admission")["AReaLThrottle"] is AReaLThrottle
    assert "Drain" not in catalog.policy_classes("admission")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("InFlightUpdate(load_time_s=2)", InFlightUpdate(load_time_s=2)),
        ("AReaLThrottle(max_concurrent=48)", AReaLThrottle(max_concurrent=48)),
        ("Replicas(2, LeastLoaded())", Replicas(2, LeastLoaded())),
        ("Replicas(n_replicas=3)", Replicas(3, RoundRobin())),
        ("SyncEveryK(k=2, inner=Drain())", SyncEveryK(k=2, inner=Drain())),
        ("SyncEveryK(3, Drain)", SyncEveryK(3, Drain())),
        ("Timeout(cap_s=600)", Timeout(cap_s=600)),
        ("RetryFailed(hazard_per_s=1e-3)", RetryFailed(1e-3)),
        ("PerReplicaSync(sync_times_s=[1, 2.5])", PerReplicaSync((1, 2.5))),
        ("drain", Drain()),
        ("partial-rollout", PartialRollout()),
        ("  Drain()  ", Drain()),
    ],
)
def test_parse_policy_builds_the_object(text: str, expected: object) -> None:
    assert catalog.parse_policy(text) == expected


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("InFlightUpdat(load_time_s=2)", ["unknown policy 'InFlightUpdat'", "did you mean InFlightUpdate"]),
        ("AReaLThrottle(max_concurrent=0)", ["AReaLThrottle(max_concurrent=0)", "max_concurrent must be"]),
        ("AReaLThrottle(max_cuncurrent=4)", ["unexpected keyword argument", "takes max_concurrent"]),
        ("Timeout(cap_s=-1)", ["Timeout(cap_s=-1): cap_s must be a finite number > 0"]),
        ("Timeout()", ["missing a required argument: 'cap_s'"]),
        ("Replicas(0)", ["n_replicas must be an integer >= 1"]),
        ("__import__('os').system('true')", ["not a policy"]),
        ("__import__('os')", ["unknown policy '__import__'"]),
        ("eval('1')", ["unknown policy 'eval'"]),
        ("Drain().sync", ["not a policy"]),
        ("SyncEveryK(inner=os.system)", ["only literals and catalogued calls"]),
        ("SyncEveryK(inner=lambda: 0)", ["only literals and catalogued calls"]),
        ("SyncEveryK(**{'k': 2})", ["**kwargs are not accepted"]),
        ("Drain(", ["cannot parse"]),
        ("", ["empty policy"]),
        ("1 + 2", ["not a policy"]),
        ("InFlightUpdate(load_time_s=x)", ["'x' is neither a number, a quoted string ('x')"]),
        ("SyncEveryK(inner=InFlightUpdat)", ["'InFlightUpdat' is neither", "did you mean InFlightUpdate"]),
    ],
)
def test_parse_policy_errors_are_one_line_value_errors(text: str, needles: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        catalog.parse_policy(text)
    msg = str(info.value)
    assert "\n" not in msg
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_parse_policy_checks_the_slot_and_suggests_within_it() -> None:
    check_refusal(lambda: catalog.parse_policy("Drain()", kind="admission"), FieldError, "admission")
    with pytest.raises(FieldError) as info:  # an unknown name: the field is the policy's type
        catalog.parse_policy("AReaLThrotle", kind="admission")
    err = info.value
    assert err.field == "type"
    # the suggestions are the slot's policies: the closest one, and no policy of another slot
    assert "AReaLThrottle" in str(err) and "CountThrottle" in str(err) and "Drain" not in str(err)


@given(st.text(max_size=40))
def test_parse_policy_on_any_text_raises_only_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        catalog.parse_policy(text)


def test_to_text_round_trips_every_default_constructible_class() -> None:
    for name, entry in catalog.catalog().items():
        try:
            obj = entry.cls()
        except (TypeError, ValueError):
            continue  # a required argument (Timeout, LagBound, ...)
        assert catalog.parse_policy(catalog.to_text(obj)) == obj, name
    nested = SyncEveryK(3, InFlightUpdate(0.5))
    assert catalog.to_text(nested) == "SyncEveryK(k=3, inner=InFlightUpdate(load_time_s=0.5))"
    assert catalog.parse_policy(catalog.to_text(nested)) == nested


USER_MODULE = """
from dataclasses import dataclass

@dataclass(frozen=True)
class HeadroomThrottle:
    '''Admit while fewer than ``headroom`` batches are ahead of the trainer.'''

    headroom: int = 1

    def __post_init__(self) -> None:
        if self.headroom < 1:
            raise ValueError(f"headroom must be >= 1, got {self.headroom}")

    def admits(self, p) -> bool:
        return p.started < (p.version + 1 + self.headroom) * p.batch_size
"""


def _user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_register_module_adds_user_policies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_catalog: None
) -> None:
    _user_module(tmp_path, monkeypatch, "my_policies_a")
    assert catalog.register_module("my_policies_a") == ["HeadroomThrottle"]
    obj = catalog.parse_policy("HeadroomThrottle(headroom=2)", kind="admission")
    assert type(obj).__name__ == "HeadroomThrottle" and obj.headroom == 2
    # the user's class raises a plain ValueError (no field): the catalog's FieldError names the call
    err = check_refusal(lambda: catalog.parse_policy("HeadroomThrottle(headroom=0)"), FieldError, "")
    assert "HeadroomThrottle(headroom=0)" in str(err)
    check_refusal(lambda: catalog.register_module("no_such_module_xyz"), FieldError, "module")


def test_entry_point_group_adds_user_policies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_catalog: None
) -> None:
    _user_module(tmp_path, monkeypatch, "my_policies_b")
    eps = [EntryPoint("mine", "my_policies_b", catalog.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(
        catalog, "entry_points", lambda group: eps if group == catalog.ENTRY_POINT_GROUP else []
    )
    assert "HeadroomThrottle" in catalog.policy_classes("admission")
    from pipesim.io.registry import get_scenario, parse_value

    scen = get_scenario("synchronous")
    assert type(parse_value(scen, "admission", "HeadroomThrottle(3)")).__name__ == "HeadroomThrottle"


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
        ):
            names.append(node.args[0].value)
    return names


def test_no_pipesim_module_imports_scenarios_by_name() -> None:
    for path in sorted(PIPESIM_DIR.rglob("*.py")):
        bad = [m for m in _imported_modules(path) if m == "scenarios" or m.startswith("scenarios.")]
        assert not bad, f"{path.relative_to(PIPESIM_DIR.parent)} imports {bad}"


def test_scenarios_register_through_entry_points() -> None:
    from importlib.metadata import entry_points

    from pipesim.io.registry import ENTRY_POINT_GROUP, registry

    names = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert {"chapter13", "systems"} <= names
    reg = registry()
    for name in ("synchronous", "chapter13:chapter_scenario", "systems:areal", "systems:slime_drain"):
        assert name in reg, name
    assert reg["systems:slime_drain"].description != "(no description)"


def test_a_user_package_registers_scenarios_through_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipesim.io import registry as reg_mod

    (tmp_path / "my_scenarios_c.py").write_text(
        "from pipesim import PipelineConfig, Scenario\n"
        "def small(n_slots: int = 4) -> Scenario:\n"
        "    '''A tiny pipeline.'''\n"
        "    return Scenario(pipeline=PipelineConfig(n_slots=n_slots, batch_size=n_slots, steps=2))\n"
        "SCENARIOS = {'small': small}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    real = reg_mod.entry_points
    mine = EntryPoint("mine", "my_scenarios_c:SCENARIOS", reg_mod.ENTRY_POINT_GROUP)
    monkeypatch.setattr(reg_mod, "entry_points", lambda group: [*real(group=group), mine])
    entry = reg_mod.registry()["mine:small"]
    assert entry.description == "A tiny pipeline." and "systems:areal" in reg_mod.registry()
    scen, given = reg_mod.build(entry, ["n_slots=2", "steps=3"])
    assert scen.pipeline.n_slots == 2 and scen.pipeline.steps == 3 and given == {"n_slots": "2", "steps": "3"}


def test_a_run_saved_with_a_plugin_policy_reports_with_or_without_its_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_catalog: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run saved under ``--policies FILE`` names the plug-in's class in scenario.json. Loading it
    where that module is not registered is not a corrupt file: the run loads with its saved pipeline
    and a one-line warning naming the class and ``--policies``; with ``--policies`` it loads whole."""
    from pipesim.io.cli import main
    from pipesim.io.saved import load

    user = tmp_path / "plug.py"
    user.write_text(textwrap.dedent(USER_MODULE))
    run = tmp_path / "run"
    setting = ["--set", "admission=HeadroomThrottle(headroom=2)", "--set", "steps=3"]
    before = list(catalog._registered)
    assert main(["run", "synchronous", "--policies", str(user), *setting, "--save", str(run)]) == 0
    catalog._registered[:] = before  # a later process: the plug-in is not registered
    catalog._cache = None
    with pytest.raises(catalog.UnknownPolicyError):
        catalog.lookup("HeadroomThrottle")
    with pytest.warns(UserWarning, match="HeadroomThrottle.*--policies"):
        saved = load(run)
    assert saved.scenario.pipeline.steps == 3 and "HeadroomThrottle(headroom=2)" in saved.scenario_repr
    capsys.readouterr()
    assert main(["report", str(run), "--out", str(tmp_path / "a.html")]) == 0
    err = capsys.readouterr().err
    assert "pipesim: warning:" in err and "HeadroomThrottle" in err and "Traceback" not in err
    assert main(["report", str(run), "--policies", str(user), "--out", str(tmp_path / "b.html")]) == 0
    assert "warning" not in capsys.readouterr().err
    assert type(load(run).scenario.admission).__name__ == "HeadroomThrottle"


@pytest.mark.parametrize("kind", ["ValueError", "KeyError", "RuntimeError"])
def test_a_plugin_policy_that_raises_is_named_with_its_exception_type_on_the_command_line(
    tmp_path: Path, clean_catalog: None, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A user's ValueError read as a pipesim refusal ("pipesim: error: bad"): no type, no policy.
    The one line now names the exception's type and the role and class that raised it."""
    from pipesim.io.cli import main

    user = tmp_path / "raising.py"
    user.write_text(
        textwrap.dedent(
            f"""
            class Raises:
                def admits(self, p):
                    if p.started > 5:
                        raise {kind}("bad")
                    return True
            """
        )
    )
    assert main(["run", "synchronous", "--policies", str(user), "--set", "admission=Raises()"]) == 2
    err = capsys.readouterr().err
    assert kind in err and "admission" in err and "Raises" in err and "Traceback" not in err


def test_a_policy_file_whose_name_is_no_module_name_runs_in_sweep_workers(
    tmp_path: Path, clean_catalog: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``my-policies.py`` was imported under a private name only the parent process knew: every
    cell of ``pipesim sweep --workers 2`` failed in its worker ("No module named
    '_pipesim_user_...'"), where ``pipesim run`` worked. The name now spells the path, and
    workers find the file by it."""
    from pipesim.io.cli import main

    user = tmp_path / "my-policies.py"
    user.write_text(textwrap.dedent(USER_MODULE))
    out = tmp_path / "s.csv"
    over = "admission=HeadroomThrottle(headroom=1),HeadroomThrottle(headroom=2)"
    argv = ["sweep", "synchronous", "--policies", str(user), "--set", "steps=2", "--over", over]
    assert main([*argv, "--workers", "2", "--csv", str(out)]) == 0
    assert main([*argv, "--workers", "1", "--csv", str(tmp_path / "one.csv")]) == 0
    assert "failed" not in capsys.readouterr().err
    assert out.read_text() == (tmp_path / "one.csv").read_text()  # the workers ran what one process runs


def test_a_user_class_under_the_name_of_a_builtin_is_warned_and_the_builtin_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_catalog: None
) -> None:
    """A user's ``CountThrottle`` in ``--policies shadow.py`` ran pipesim's CountThrottle with no
    word. The catalog still keeps pipesim's (a plug-in never replaces a built-in), and says so."""
    (tmp_path / "shadowing_mod.py").write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass

            @dataclass(frozen=True)
            class CountThrottle:
                def admits(self, p) -> bool:
                    return p.started < (p.version + 1) * p.batch_size
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "shadowing_mod", raising=False)
    with pytest.warns(UserWarning, match="CountThrottle.*pipesim's"):
        catalog.register_module("shadowing_mod")
    assert catalog.lookup("CountThrottle") is pipesim.CountThrottle


def test_a_user_module_of_new_names_registers_without_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_catalog: None
) -> None:
    import warnings

    _user_module(tmp_path, monkeypatch, "fresh_names_mod")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert catalog.register_module("fresh_names_mod") == ["HeadroomThrottle"]


def test_list_keys_and_export_take_the_policies_a_file_adds(
    tmp_path: Path, clean_catalog: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pipesim list --keys --policies FILE`` was refused ("unrecognized arguments"), and
    ``export --policies`` told the user to run the file without the ``--policies`` it needs."""
    from pipesim.io.cli import main

    user = tmp_path / "plug.py"
    user.write_text(textwrap.dedent(USER_MODULE))
    assert main(["list", "--keys", "--policies", str(user)]) == 0
    assert "HeadroomThrottle" in capsys.readouterr().out
    out = tmp_path / "hr.toml"
    setting = ["--set", "admission=HeadroomThrottle(headroom=2)"]
    assert main(["export", "synchronous", "--policies", str(user), *setting, "--out", str(out)]) == 0
    hint = capsys.readouterr().out.split("run it: ", 1)[1].rstrip().rstrip(")")
    argv = shlex.split(hint)[1:]  # the printed command, less "pipesim"
    assert main([*argv, "--set", "steps=2"]) == 0
