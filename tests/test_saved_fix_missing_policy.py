"""A saved run whose policy this process cannot build: the loaded scenario holds a placeholder
(``MissingPolicy``) that refuses to run, naming the slot, the saved policy and the fix.

It used to hold pipesim's default policy there: ``pipesim.run(loaded.scenario)`` ran another
design (1955 episodes/h for a run saved at 1789), as did compare, sweeps and reruns built on it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pipesim
from pipesim import PipelineConfig, Scenario, run
from pipesim.core.validate import FieldError
from pipesim.policies.base import Drain
from pipesim.policies.missing import MissingPolicy, missing_policies
from pipesim.policies.replicas import Replicas
from tests.test_saved_integrity import reseal

ROOT = Path(__file__).resolve().parents[1]
SMALL = PipelineConfig(n_slots=8, batch_size=8, steps=3)

USER_MODULE = """
from dataclasses import dataclass

@dataclass(frozen=True)
class TightCap:
    '''Admit while started < (version + 1) * batch_size + extra.'''

    extra: int = 2

    def admits(self, p) -> bool:
        return p.started < (p.version + 1) * p.batch_size + self.extra
"""

SCRIPT = """
import json, sys, warnings
import pipesim
from pipesim.policies.catalog import register_module

path, register = sys.argv[1], sys.argv[2] == "1"
if register:
    register_module("{module}")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    loaded = pipesim.load(path)
out = {{
    "warnings": [str(w.message) for w in caught],
    "exact": loaded.scenario_exact,
    "name": loaded.scenario.name,
    "admission": repr(loaded.scenario.admission),
    "summary_tp": loaded.summary()["throughput_per_hour"],
    "n_events": len(loaded.events),
    "html": "policies as run" in loaded._repr_html_(),
}}
try:
    again = pipesim.run(loaded.scenario)
    cols = ["kind", "lane", "start_s", "end_s", "version"]
    out["rerun_events"] = again.events[cols].astype(str).values.tolist()
    out["saved_events"] = loaded.events[cols].astype(str).values.tolist()
except Exception as exc:
    out["error"] = [type(exc).__name__, getattr(exc, "field", None), str(exc), isinstance(exc, ValueError)]
print(json.dumps(out))
"""


def _module(tmp_path: Path, name: str) -> Any:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_MODULE))
    sys.path.insert(0, str(tmp_path))
    try:
        from pipesim.policies import catalog

        catalog.register_module(name)
        return sys.modules[name]
    finally:
        sys.path.remove(str(tmp_path))


def _load_elsewhere(tmp_path: Path, path: Path, module: str, register: bool) -> dict[str, Any]:
    """Load ``path`` in a fresh process (the module importable, registered only if ``register``)."""
    script = tmp_path / "load_it.py"
    script.write_text(SCRIPT.format(module=module))
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(script), str(path), "1" if register else "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def clean_catalog() -> Any:
    from pipesim.policies import catalog

    registered = list(catalog._registered)
    yield
    catalog._registered[:] = registered
    catalog._cache = None


def test_a_run_of_an_unregistered_policy_reads_but_refuses_to_rerun(
    tmp_path: Path, clean_catalog: None
) -> None:
    mod = _module(tmp_path, "fixpol_a")
    result = run(Scenario(pipeline=SMALL, admission=mod.TightCap(extra=2), name="capped"))
    path = result.save(tmp_path / "run")

    plain = _load_elsewhere(tmp_path, path, "fixpol_a", register=False)
    # the saved run reads as it was saved
    assert plain["summary_tp"] == result.summary()["throughput_per_hour"]
    assert plain["n_events"] == len(result.events) and plain["html"]
    assert not plain["exact"] and "stand-in" in plain["name"]
    assert "TightCap(extra=2)" in plain["admission"]  # the placeholder prints the saved policy
    assert any("register_module('fixpol_a')" in w for w in plain["warnings"])  # the load warns
    # ... but its scenario refuses to run, naming the slot, the policy and the fix
    kind, field, message, is_value_error = plain["error"]
    assert is_value_error and field == "admission"
    assert "TightCap(extra=2)" in message and "register_module('fixpol_a')" in message
    assert "--policies fixpol_a.py" in message

    registered = _load_elsewhere(tmp_path, path, "fixpol_a", register=True)
    assert registered["exact"] and registered["name"] == "capped" and not registered["warnings"]
    assert "error" not in registered, registered.get("error")
    assert registered["rerun_events"] == registered["saved_events"]  # the round trip is exact


def test_a_loaded_stand_in_saved_again_keeps_the_policy(tmp_path: Path, clean_catalog: None) -> None:
    """Its placeholder is written back as its saved table: registered later, it runs the design."""
    mod = _module(tmp_path, "fixpol_b")
    result = run(Scenario(pipeline=SMALL, admission=mod.TightCap(extra=3), name="capped"))
    path = result.save(tmp_path / "run")
    data = json.loads((path / "scenario.json").read_text())
    data["scenario"]["admission"]["type"] = "NotRegisteredHere"  # as a process without the module sees it
    (path / "scenario.json").write_text(json.dumps(data))
    reseal(path)
    with pytest.warns(UserWarning, match="could not be rebuilt"):
        loaded = pipesim.load(path)
    assert isinstance(loaded.scenario.admission, MissingPolicy)
    assert loaded.scenario.admission.text == "NotRegisteredHere(extra=3)"
    with pytest.warns(UserWarning):
        resaved = pipesim.load(loaded.save(tmp_path / "again"))
    saved = json.loads((tmp_path / "again" / "scenario.json").read_text())
    assert saved["scenario"]["admission"] == {"type": "NotRegisteredHere", "extra": 3}
    assert resaved.scenario == loaded.scenario  # its name too: the stand-in's tail is not saved
    assert json.loads((tmp_path / "again" / "meta.json").read_text())["name"] == "capped"


def _outside(**fields: Any) -> Scenario:
    @dataclass(frozen=True)
    class Local:  # a local class: outside the catalog, never registrable
        def admits(self, p: Any) -> bool:
            return bool(p.started < (p.version + 1) * p.batch_size + 1)

    return Scenario(pipeline=SMALL, admission=Local(), **fields)


def test_a_policy_outside_the_catalog_keeps_the_rest_of_the_scenario(tmp_path: Path) -> None:
    """The other policies, the seed and the pool size used to be replaced by the defaults."""
    sc = _outside(weight_update=Drain(), seed=3, pool_size=500, name="mine")
    with pytest.warns(UserWarning, match="admission"):
        path = run(sc).save(tmp_path / "mine")
    with pytest.warns(UserWarning, match="admission"):
        loaded = pipesim.load(path)
    got = loaded.scenario
    assert (got.weight_update, got.seed, got.pool_size, got.pipeline) == (Drain(), 3, 500, SMALL)
    assert [m.slot for m in missing_policies(got)] == ["admission"]
    assert "Local()" in got.admission.text and got.admission.module == __name__
    with pytest.raises(FieldError) as info:
        run(got)
    assert info.value.field == "admission" and "Local()" in str(info.value)


def test_a_missing_batch_policy_is_refused_before_any_simulated_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its ``select`` is first asked after a batch of episodes: the run refuses it up front."""
    placeholder = MissingPolicy("batching", "MyBatches(k=2)", "mybatches")
    sc = Scenario(pipeline=SMALL, batching=placeholder)
    import pipesim.io.api as api

    def no_engine(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the engine was built")

    monkeypatch.setattr(api, "Pipeline", no_engine)
    with pytest.raises(FieldError) as info:
        run(sc)
    assert info.value.field == "batching" and "MyBatches(k=2)" in str(info.value)
    assert "register_module('mybatches')" in str(info.value)


def test_a_routing_rule_outside_the_catalog_stands_in_inside_its_replicas(tmp_path: Path) -> None:
    @dataclass(frozen=True)
    class MyRouting:
        def choose(self, engines: Any) -> Any:
            return next((e for e in engines if e.accepting), None)

    sc = Scenario(pipeline=SMALL, replicas=Replicas(2, MyRouting()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = run(sc).save(tmp_path / "r")
        loaded = pipesim.load(path)
    replicas = loaded.scenario.replicas
    assert isinstance(replicas, Replicas) and replicas.n_replicas == 2
    assert isinstance(replicas.routing, MissingPolicy) and "MyRouting()" in replicas.routing.text
    with pytest.raises(FieldError) as info:
        run(loaded.scenario)
    assert info.value.field == "replicas"


def test_a_run_saved_before_the_per_slot_record_stands_in_every_main_policy(tmp_path: Path) -> None:
    """``scenario: null`` with only the repr: any main policy may be the one that was outside."""
    with pytest.warns(UserWarning):
        path = run(_outside(name="old")).save(tmp_path / "old")
    data = json.loads((path / "scenario.json").read_text())
    for key in ("scenario_partial", "missing_policies", "policy_modules"):
        data.pop(key)
    (path / "scenario.json").write_text(json.dumps(data))
    reseal(path)
    with pytest.warns(UserWarning, match="could not be rebuilt"):
        loaded = pipesim.load(path)
    slots = [m.slot for m in missing_policies(loaded.scenario)]
    assert slots == ["durations", "admission", "weight_update", "batching"]
    assert loaded.scenario.pipeline == SMALL and not loaded.scenario_exact
    with pytest.raises(FieldError) as info:
        run(loaded.scenario)
    assert info.value.field == "durations"  # the first stand-in the run reaches names its slot


def test_a_stand_in_beside_a_rule_with_its_own_staleness_bound_still_loads(tmp_path: Path) -> None:
    """A user's weight update may read max_staleness, which pipesim's own rules beside it do not:
    the saved design was valid, so its stand-in must load with the saved max_staleness."""
    from pipesim.policies.systems import PipelineRLLag

    @dataclass(frozen=True)
    class MyUpdate:
        def blocks_admission(self, p: Any) -> bool:
            return bool(p.syncing)

        def sync(self, p: Any) -> Any:
            p.begin_sync(pause=True)
            yield p.timeout(p.config.sync_time_s)
            p.end_sync()

    pipeline = PipelineConfig(n_slots=8, batch_size=8, steps=3, max_staleness=2)
    sc = Scenario(pipeline=pipeline, admission=PipelineRLLag(max_lag=1), weight_update=MyUpdate())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = pipesim.load(run(sc).save(tmp_path / "lag"))
    assert loaded.scenario.pipeline.max_staleness == 2
    assert loaded.scenario.admission == PipelineRLLag(max_lag=1)
    assert isinstance(loaded.scenario.weight_update, MissingPolicy)


def test_a_compute_run_refuses_a_stand_in_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_compute builds its own engine: it asks as pipesim.run does, before any simulated work."""
    from pipesim.compute import Cluster, TokenWorkload, run_compute
    from pipesim.core.validate import FieldError as _FieldError
    from tests.test_compute_engine import SMALL

    def no_engine(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run built its pipeline")

    monkeypatch.setattr("pipesim.compute.cluster.Pipeline", no_engine)
    stand_in = MissingPolicy(slot="batching", text="MyBatch()", module="mypol")
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=4, steps=2), batching=stand_in)
    with pytest.raises(_FieldError) as err:
        run_compute(sc, Cluster(engine=SMALL, n_gpus=2), TokenWorkload(max_response_tokens=512))
    assert err.value.field == "batching" and "register_module('mypol')" in str(err.value)


@pytest.mark.parametrize("text", ["\x1b[2J\x1b[31mEVIL\r\n", "Cap(\x07)", "x" * 5000])
def test_saved_text_reaches_messages_escaped_and_bounded(text: str) -> None:
    """A saved scenario.json is data: an escape sequence in a policy's text cleared the terminal."""
    from pipesim.policies.missing import PRIVATE_PREFIX, fix_hint

    err = MissingPolicy(slot="admission", text=text, module="mypol").error()
    hint = fix_hint(PRIVATE_PREFIX + b"/tmp/x\x1b[31mEVIL\nline2".hex())
    for message in (str(err), hint):
        assert all(c.isprintable() for c in message) and len(message) < 1200


def test_naming_a_stand_in_says_what_it_stands_for() -> None:
    """Re-saving a loaded stand-in advised registering pipesim.policies.missing.MissingPolicy."""
    from pipesim.policies.catalog import name_of

    with pytest.raises(FieldError) as err:
        name_of(MissingPolicy(slot="durations", text="MyDur(3)", module="mypol"))
    assert err.value.field == "durations" and "MyDur(3)" in str(err.value)
    assert "pipesim.policies.missing" not in str(err.value)


def _partial(**over: object) -> dict:  # type: ignore[type-arg]
    from pipesim.io.scenario_files import scenario_to_dict

    data = scenario_to_dict(pipesim.Scenario(name="capped"))
    return {"scenario": None, "scenario_partial": {**data, **over}, "policy_modules": {}}


def test_a_slot_standing_in_is_not_also_built_from_its_table() -> None:
    """A slot both kept as a table (of a class not here) and named in missing_policies failed the
    whole load with 'unknown policy TightCap'; the stand-in is what the save meant."""
    from pipesim.io.saved_checks import read_scenario

    sc = _partial(admission={"type": "TightCap", "cap": 1})
    sc["missing_policies"] = {"admission": "TightCap(cap=1)"}
    scenario, missing = read_scenario(sc, "capped", "scenario.json")
    assert [m.slot for m in missing] == ["admission"] and isinstance(scenario.admission, MissingPolicy)


def test_a_timeout_named_as_missing_is_refused_naming_the_key() -> None:
    """It was refused with the loader's own stand-in in the message ('timeout must be a Timeout ...,
    got MissingPolicy(...)'): the timeout slot holds pipesim's Timeout, rebuilt from its table."""
    from pipesim.io.saved_checks import read_scenario

    sc = _partial()
    sc["missing_policies"] = {"timeout": "MyTimeout()"}
    with pytest.raises(FieldError) as err:
        read_scenario(sc, "capped", "scenario.json")
    assert err.value.field == "missing_policies" and "MissingPolicy(" not in str(err.value)
