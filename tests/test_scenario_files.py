"""Scenario files: every registered scenario round-trips through TOML and YAML to an equal Scenario
with equal results; loading never runs code; errors name the file, the key and the expected type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim import PipelineConfig, Scenario, run
from pipesim.core.validate import FieldError
from pipesim.io import scenario_files as sf
from pipesim.io.registry import registry
from pipesim.policies.admission import AReaLThrottle
from pipesim.policies.base import Drain
from pipesim.policies.batching import DropStale
from pipesim.policies.faults import RetryFailed, Timeout
from pipesim.policies.replicas import GroupAffinity, LeastLoaded, PerReplicaSync, Replicas, RoundRobin
from pipesim.policies.updates import InFlightUpdate, SyncEveryK
from pipesim.workload.durations import (
    AgentDurations,
    ExponentialDurations,
    LogNormalDurations,
    TraceDurations,
)

NAMES = list(registry())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", NAMES)
def test_every_registered_scenario_round_trips_with_equal_results(name: str, tmp_path: Path) -> None:
    scen = registry()[name].build()
    loaded = {}
    for suffix in (".toml", ".yaml"):
        path = sf.save_scenario(scen, tmp_path / f"s{suffix}")
        loaded[suffix] = sf.load_scenario(path)
        assert loaded[suffix] == scen, suffix
        assert repr(loaded[suffix]) == repr(scen)
    assert run(loaded[".toml"]).summary() == run(scen).summary()


SMALL = PipelineConfig(n_slots=8, batch_size=8, steps=3, max_staleness=1)
VARIANTS = {
    "lognormal+timeout": Scenario(
        pipeline=SMALL, durations=LogNormalDurations(60.0, 0.8), timeout=Timeout(300.0)
    ),
    "exponential+retry": Scenario(
        pipeline=SMALL, durations=ExponentialDurations(50.0), failures=RetryFailed(1e-3), pool_size=500
    ),
    "trace": Scenario(
        pipeline=SMALL, durations=TraceDurations.from_values([10.5, 20, 30, 45.25], cycle=True)
    ),
    "agent-numpy": Scenario(pipeline=SMALL, durations=AgentDurations(mean_turns=4, draws="numpy")),
    "replicas-leastloaded": Scenario(
        pipeline=SMALL, replicas=Replicas(2, LeastLoaded()), weight_update=InFlightUpdate(2)
    ),
    "replicas-roundrobin": Scenario(pipeline=SMALL, replicas=Replicas(4, RoundRobin())),
    "per-replica-sync": Scenario(
        pipeline=SMALL, replicas=Replicas(2), weight_update=PerReplicaSync(sync_times_s=(1.0, 5.0))
    ),
    "nested": Scenario(
        pipeline=SMALL,
        admission=AReaLThrottle(max_concurrent=6),
        weight_update=SyncEveryK(2, Drain()),
        batching=DropStale(requeue=True),
        seed=12,
        name="nested",
    ),
}


@pytest.mark.parametrize("key", list(VARIANTS))
def test_policies_and_duration_models_round_trip(key: str) -> None:
    scen = VARIANTS[key]
    for fmt in ("toml", "yaml"):
        text = sf.dumps(scen, fmt)
        assert sf.loads(text, fmt, f"{key}.{fmt}") == scen
    assert run(sf.loads(sf.dumps(scen), "toml")).summary() == run(scen).summary()


def test_file_layout_and_none_convention() -> None:
    scen = VARIANTS["nested"]
    data = tomllib.loads(sf.dumps(scen))
    assert data["schema_version"] == sf.SCHEMA_VERSION == 1
    assert data["weight_update"] == {"type": "SyncEveryK", "k": 2, "inner": {"type": "Drain"}}
    assert data["admission"] == {"type": "AReaLThrottle", "max_concurrent": 6}
    assert data["durations"]["type"] == "AgentDurations"
    # None with a None default is written by omitting the key
    for key in ("pool_size", "timeout", "failures", "replicas"):
        assert key not in data
    assert "max_concurrent" not in tomllib.loads(sf.dumps(Scenario()))["admission"]
    # "none" is read as None where the field allows None
    text = (
        'schema_version = 1\npool_size = "none"\n'
        '[admission]\ntype = "AReaLThrottle"\nmax_concurrent = "none"\n'
    )
    assert sf.loads(text) == Scenario(admission=AReaLThrottle(None))
    assert "None" in (sf.__doc__ or "") and "omit" in (sf.__doc__ or "")
    # a file with only the version is the default scenario
    assert sf.loads("schema_version = 1\n") == Scenario()


def test_yaml_loading_never_executes_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "evil.yaml"
    path.write_text(f'schema_version: 1\nname: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(sf.ScenarioFileError) as info:
        sf.load_scenario(path)
    assert (info.value.field, info.value.file) == ("", str(path))  # not YAML pipesim reads: the whole file
    assert not marker.exists()
    toml = tmp_path / "evil.toml"
    toml.write_text('schema_version = 1\n[admission]\ntype = "os.system"\n')
    with pytest.raises(sf.ScenarioFileError) as info:
        sf.load_scenario(toml)
    assert (info.value.field, info.value.file) == ("admission.type", str(toml))  # no policy of that name


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        ("[pipeline]\nn_slots = 8\n", ["schema_version: missing"]),
        ("schema_version = 2\n", ["schema_version: 2 is newer"]),
        ("schema_version = 1\nbogus = 1\n", ["bogus: unknown key", "valid keys: schema_version, pipeline"]),
        (
            "schema_version = 1\n[pipeline]\nn_slot = 8\n",
            ["pipeline.n_slot: unknown key", "did you mean 'n_slots'"],
        ),
        (
            'schema_version = 1\n[pipeline]\nn_slots = "8"\n',
            ["pipeline.n_slots: expected an integer, got '8'"],
        ),
        ("schema_version = 1\n[pipeline]\ncolocated = 1\n", ["pipeline.colocated: expected a bool"]),
        ("schema_version = 1\n[pipeline]\nn_slots = 0\n", ["pipeline", "n_slots must be an integer >= 1"]),
        ('schema_version = 1\nseed = "x"\n', ["seed: expected an integer"]),
        ("schema_version = 1\ntimeout = 600\n", ["timeout: expected a table naming a Timeout"]),
        ("schema_version = 1\n[timeout]\ncap_s = -1\n", ["timeout.cap_s: Timeout(cap_s=-1): cap_s must be"]),
        (
            'schema_version = 1\n[admission]\ntype = "AReaLThrotle"\n',
            ["admission.type: unknown", "AReaLThrottle"],
        ),
        (
            'schema_version = 1\n[admission]\ntype = "Drain"\n',
            ["admission.type: Drain does not fit admission"],
        ),
        ("schema_version = 1\n[admission]\nmax_concurrent = 4\n", ["admission.type: missing"]),
        (
            'schema_version = 1\n[admission]\ntype = "AReaLThrottle"\nmax_concurrent = 0\n',
            ["admission.max_concurrent: AReaLThrottle(max_concurrent=0): max_concurrent must be"],
        ),
        (
            'schema_version = 1\n[weight_update]\ntype = "SyncEveryK"\n'
            '[weight_update.inner]\ntype = "Drain"\nx = 1\n',
            ["weight_update.inner.x: unknown key"],
        ),
        (
            'schema_version = 1\n[weight_update]\ntype = "SyncEveryK"\nk = 2.5\n',
            ["weight_update.k: expected an integer, got 2.5"],
        ),
        (
            'schema_version = 1\n[durations]\ntype = "TraceDurations"\nvalues = [1, "x"]\n',
            ["durations.values[1]: expected a number"],
        ),
        (
            'schema_version = 1\n[durations]\ntype = "AgentDurations"\ndraws = "torch"\n',
            ["durations.draws: expected one of 'chapter', 'numpy'"],
        ),
        (
            'schema_version = 1\n[durations]\ntype = "AgentDurations"\ntokens_per_turn = [1]\n',
            ["durations.tokens_per_turn: expected 2 values"],
        ),
        ('schema_version = 1\n[failures]\ntype = "RetryFailed"\n', ["failures.hazard_per_s: missing"]),
        ("schema_version = 1\n[pipeline\n", ["not valid TOML"]),
    ],
)
def test_bad_files_name_the_file_the_key_and_the_expected_type(
    content: str, needles: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(sf.ScenarioFileError) as info:
        sf.load_scenario(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_yaml_reads_exponents_as_numbers(tmp_path: Path) -> None:
    """(A key given twice, which PyYAML alone keeps silently, is a row of test_refusals_files.py.)"""
    path = tmp_path / "twice.yaml"
    path.write_text("schema_version: 1\npipeline: {train_time_s: 6e1, sync_time_s: 1e1}\n")
    cfg = sf.load_scenario(path).pipeline
    assert (cfg.train_time_s, cfg.sync_time_s) == (60.0, 10.0)  # YAML 1.1 read 6e1 as text


def test_a_byte_order_mark_is_read_past(tmp_path: Path) -> None:
    for name in ("bom.toml", "bom.yaml"):
        path = tmp_path / name
        text = "schema_version = 1\n" if name.endswith("toml") else "schema_version: 1\n"
        path.write_bytes(b"\xef\xbb\xbf" + text.encode())
        assert sf.load_scenario(path) == Scenario()


def test_a_policy_outside_the_catalog_cannot_be_written() -> None:
    class Mine:
        def admits(self, p: object) -> bool:
            return True

    with pytest.raises(FieldError) as info:
        sf.dumps(Scenario(admission=Mine()))  # type: ignore[arg-type]
    assert info.value.field == "admission"


def test_yaml_text_is_plain_data() -> None:
    text = sf.dumps(VARIANTS["replicas-leastloaded"], "yaml")
    assert "!!" not in text
    data = yaml.safe_load(text)
    assert data["replicas"] == {"type": "Replicas", "n_replicas": 2, "routing": {"type": "LeastLoaded"}}


def test_the_documented_example_loads() -> None:
    import textwrap

    example = textwrap.dedent((sf.__doc__ or "").split("::", 1)[1].split("In YAML")[0])
    scen = sf.loads(example, "toml", "docstring")
    assert scen.admission == AReaLThrottle(max_concurrent=48)
    assert scen.weight_update == SyncEveryK(2, Drain())
    assert scen.replicas == Replicas(2, LeastLoaded()) and scen.timeout == Timeout(600.0)
    assert scen.durations == LogNormalDurations(68.0, 0.9) and scen.pipeline.max_staleness == 2


def _routing_rules(depth: int) -> st.SearchStrategy[Any]:
    """Every catalogued routing rule, GroupAffinity nesting another rule up to ``depth`` deep."""
    leaves = st.sampled_from([RoundRobin(), LeastLoaded()])
    if depth == 0:
        return leaves
    nested = st.builds(GroupAffinity, st.integers(1, 64), _routing_rules(depth - 1))
    return st.one_of(leaves, nested, st.builds(GroupAffinity, st.integers(1, 64)))


@settings(max_examples=40, deadline=None)
@given(routing=_routing_rules(2), n_replicas=st.integers(1, 4), fmt=st.sampled_from(["toml", "yaml"]))
def test_every_routing_rule_round_trips_and_each_run_routes_with_a_fresh_copy(
    routing: Any, n_replicas: int, fmt: str
) -> None:
    scen = Scenario(
        pipeline=PipelineConfig(n_slots=8, max_staleness=1, batch_size=4),
        replicas=Replicas(n_replicas, routing),
    )
    back = sf.loads(sf.dumps(scen, fmt), fmt)
    assert back == scen and repr(back) == repr(scen)
    assert back.replicas is not None
    first, second = back.replicas.fresh_routing(), back.replicas.fresh_routing()
    assert first == routing == second
    if isinstance(routing, GroupAffinity):  # per-run state is never shared between runs
        assert first is not second and first._home is not second._home


SYSTEMS = [n for n in NAMES if n.startswith("systems:")]


@pytest.mark.parametrize("preset", SYSTEMS)
@pytest.mark.parametrize("fmt", ["toml", "yaml"])
def test_every_system_preset_exports_in_its_knob_names_and_loads_back_equal(preset: str, fmt: str) -> None:
    entry = registry()[preset]
    data = sf.system_to_dict(preset)
    assert set(data["system"]) == {"name", *entry.parameters()}  # every knob, by the system's name
    assert sf.loads(sf.dumps(data, fmt), fmt) == entry.build()


@settings(max_examples=25, deadline=None)
@given(eta=st.integers(0, 8), cap=st.none() | st.integers(1, 256), fmt=st.sampled_from(["toml", "yaml"]))
def test_an_edited_areal_knob_changes_the_scenario_as_areal_s_own_knob(
    eta: int, cap: int | None, fmt: str
) -> None:
    text = sf.dumps(
        sf.system_to_dict("systems:areal", max_head_offpolicyness=eta, max_concurrent_rollouts=cap), fmt
    )
    assert f"max_head_offpolicyness{' = ' if fmt == 'toml' else ': '}{eta}" in text
    loaded = sf.loads(text, fmt)
    assert loaded == registry()["systems:areal"].build(
        max_head_offpolicyness=eta, max_concurrent_rollouts=cap
    )
    assert loaded.pipeline.max_staleness == eta  # AReaL's eta bounds the staleness
    assert loaded.admission == AReaLThrottle(cap)  # its concurrency cap throttles admission


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("bogus = 1\n", "system.bogus"),
        ("staleness_threshold = 0.5\n", "system.staleness_threshold"),  # verl's knob, not AReaL's
        ("max_head_offpolicyness = -1\n", "system.max_head_offpolicyness"),
    ],
)
def test_a_system_file_refuses_a_knob_naming_it(extra: str, field: str) -> None:
    text = sf.dumps(sf.system_to_dict("systems:areal")).replace("max_head_offpolicyness = 2\n", "")
    with pytest.raises(FieldError) as info:
        sf.loads(text + extra)
    assert info.value.field == field


def test_system_to_dict_refuses_an_unknown_knob() -> None:
    with pytest.raises(FieldError) as info:
        sf.system_to_dict("systems:verl_fully_async", max_head_offpolicyness=2)
    assert info.value.field == "system.max_head_offpolicyness"


def test_export_writes_a_system_preset_in_its_own_knob_names(tmp_path: Path) -> None:
    from pipesim.io.cli import main

    out = tmp_path / "areal.toml"
    assert main(["export", "systems:areal", "--set", "max_head_offpolicyness=8", "--out", str(out)]) == 0
    table = tomllib.loads(out.read_text())["system"]
    assert table["max_head_offpolicyness"] == 8 and table["max_concurrent_rollouts"] == "none"
    assert sf.load_scenario(out) == registry()["systems:areal"].build(max_head_offpolicyness=8)


@settings(max_examples=25, deadline=None)
@given(
    n=st.sampled_from([1, 2, 4, 8]),
    extra=st.integers(0, 40),
    partial=st.booleans(),
    fmt=st.sampled_from(["toml", "yaml"]),
)
def test_april_exports_slime_s_own_knobs_and_its_count_is_slime_s(
    n: int, extra: int, partial: bool, fmt: str
) -> None:
    """``systems:april`` writes slime's knobs (``--over-sampling-batch-size`` in prompts,
    ``--partial-rollout``, ``--n-samples-per-prompt``); the file loads back to the preset, whose
    over-sampling factor is that count over the rollout batch (B / n prompts); the old keyword
    names build the same scenario, with a DeprecationWarning."""
    from pipesim.policies.admission import OverSample
    from scenarios import systems

    batch = systems.CHAPTER.batch_size
    over = batch // n + extra  # slime samples at least the rollout batch
    knobs = dict(over_sampling_batch_size=over, partial_rollout=partial, n_samples_per_prompt=n)
    text = sf.dumps(sf.system_to_dict("systems:april", **knobs), fmt)
    assert f"over_sampling_batch_size{' = ' if fmt == 'toml' else ': '}{over}" in text
    loaded = sf.loads(text, fmt)
    assert loaded == registry()["systems:april"].build(**knobs)
    assert loaded.admission == OverSample(over * n / batch)
    assert loaded.batching.samples_per_group == n  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match="over_sampling_batch_size"):
        old = systems.april(oversample_factor=over * n / batch, carry_over=partial, samples_per_prompt=n)
    assert loaded == old


@pytest.mark.parametrize("preset", SYSTEMS)
def test_set_on_an_exported_preset_file_builds_what_it_builds_on_the_preset(
    preset: str, tmp_path: Path
) -> None:
    """``--set steps=N`` on ``systems:areal`` sizes the preset's task pool for N steps; on its
    exported file it was applied after the build, so the file kept the pool drawn for the preset's
    own steps (another run: 1,872 samples/h for 1,884 at 3 steps). Knobs and pool keys now go to
    the factory for the file as for the name, with the file's values as the knobs' defaults."""
    from pipesim.io.overrides import build
    from pipesim.io.registry import PresetFile, resolve

    path = tmp_path / "preset.toml"
    path.write_text(sf.dumps(sf.system_to_dict(preset)))
    entry = resolve(str(path))
    assert isinstance(entry, PresetFile)
    for pairs in ([], ["steps=3"], ["steps=3", "batch_size=16"], ["n_slots=32"]):
        from_file, _ = build(entry, pairs)
        from_name, _ = build(registry()[preset], pairs)
        assert from_file == from_name, pairs


def test_an_edited_preset_file_takes_the_presets_knobs_over_its_own(tmp_path: Path) -> None:
    from pipesim.io.overrides import build
    from pipesim.io.registry import resolve

    path = tmp_path / "areal.toml"
    path.write_text(sf.dumps(sf.system_to_dict("systems:areal", max_head_offpolicyness=4)))
    entry = resolve(str(path))
    assert entry.parameters()["max_head_offpolicyness"].default == 4  # the file's value
    areal = registry()["systems:areal"]
    assert build(entry, ["steps=3"])[0] == build(areal, ["max_head_offpolicyness=4", "steps=3"])[0]
    assert build(entry, ["max_head_offpolicyness=1"])[0] == areal.build(max_head_offpolicyness=1)
    with pytest.raises(FieldError) as info:
        build(entry, ["max_head_offpolicyness=-1"])
    assert info.value.field == "max_head_offpolicyness"


def test_yaml_null_is_none_where_toml_writes_none(tmp_path: Path) -> None:
    """TOML has no null, so a file writes None as "none"; YAML's own null was refused
    ("expected a table naming a Timeout, got None") where its "none" was read."""
    null, text = tmp_path / "null.yaml", tmp_path / "text.yaml"
    null.write_text("schema_version: 1\ntimeout: null\n")
    text.write_text("schema_version: 1\ntimeout: none\n")
    assert sf.load_scenario(null) == sf.load_scenario(text)
    assert sf.load_scenario(null).timeout is None
