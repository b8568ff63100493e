"""Scenario files and ``--set``: a YAML merge key's order, a tuple written as a list, ``none`` in a
policy's arguments, an unknown nested policy named by its key, a non-UTF-8 file's line and byte."""

from __future__ import annotations

import pytest
import yaml

import pipesim
from pipesim.core.errors import FieldError
from pipesim.io import scenario_files as sf
from pipesim.io.overrides import parse_value
from pipesim.io.scenario_files import ScenarioFileError
from pipesim.io.yamlfile import RepeatedKey, load_yaml
from pipesim.workload.durations import AgentDurations

HEAD = "schema_version: 1\nname: x\n"

MERGES = [  # (id, pipeline's YAML, the steps and n_slots read)
    ("list-first-wins", "{<<: [{steps: 2, n_slots: 8}, {steps: 4, n_slots: 16}], batch_size: 8}", (2, 8)),
    ("list-reversed", "{<<: [{steps: 4, n_slots: 16}, {steps: 2, n_slots: 8}], batch_size: 8}", (4, 16)),
    ("own-key-wins", "{<<: [{steps: 2, n_slots: 8}], steps: 3, batch_size: 8}", (3, 8)),
    ("one-mapping", "{<<: {steps: 5, n_slots: 8}, batch_size: 8}", (5, 8)),
    ("mixed-sources", "{<<: [{steps: 2}, {steps: 4, n_slots: 16}], batch_size: 8}", (2, 16)),
]


@pytest.mark.parametrize(("text", "want"), [m[1:] for m in MERGES], ids=[m[0] for m in MERGES])
def test_a_merge_key_takes_the_first_mapping_listed(text: str, want: tuple[int, int]) -> None:
    scenario = sf.loads(f"{HEAD}pipeline: {text}\n", "yaml", "m.yaml")
    assert (scenario.pipeline.steps, scenario.pipeline.n_slots) == want


def test_merges_through_anchors_keep_the_order_and_leave_the_anchor_alone() -> None:
    text = "a: &a {x: 1, y: 1}\nb: &b {<<: *a, y: 2, z: 2}\nc: {<<: [*b, *a], w: 3}\nd: {<<: [*a, *b]}\n"
    assert load_yaml(text) == {
        "a": {"x": 1, "y": 1},
        "b": {"x": 1, "y": 2, "z": 2},
        "c": {"x": 1, "y": 2, "z": 2, "w": 3},
        "d": {"x": 1, "y": 1, "z": 2},
    }


REFUSED = [  # (id, YAML, the exception, its dotted path)
    ("repeated-merge", "p: {<<: {steps: 2}, <<: {steps: 4}, b: 8}\n", RepeatedKey, "p.<<"),
    ("repeat-inside-merged", "p: {<<: {steps: 2, steps: 4}}\n", RepeatedKey, "p.<<.steps"),
]


@pytest.mark.parametrize(("text", "kind", "path"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_repeated_merge_key_is_refused_by_its_path(text: str, kind: type, path: str) -> None:
    with pytest.raises(kind) as info:
        load_yaml(text)
    assert info.value.path == path and "given twice" in info.value.said()


def test_a_repeated_merge_key_in_a_file_names_the_key_and_line() -> None:
    text = f"{HEAD}pipeline: {{<<: {{steps: 2}}, <<: {{steps: 4}}, batch_size: 8}}\n"
    with pytest.raises(ScenarioFileError) as info:
        sf.loads(text, "yaml", "d.yaml")
    assert info.value.field == "pipeline.<<" and "line 3" in str(info.value)


@pytest.mark.parametrize("text", ["p: {<<: 3}\n", "p: {<<: [{a: 1}, 3]}\n"], ids=["scalar", "in-list"])
def test_a_merge_of_a_non_mapping_is_refused(text: str) -> None:
    with pytest.raises(yaml.YAMLError, match="merges a mapping"):
        load_yaml(text)


def test_a_mapping_merging_itself_is_refused_not_recursed() -> None:
    with pytest.raises(yaml.YAMLError, match="merges itself"):
        load_yaml("a: &a {<<: *a, x: 1}\n")


def _scenario() -> pipesim.Scenario:
    return pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=2, steps=3), durations=AgentDurations()
    )


@pytest.mark.parametrize("text", ["[50,100]", "[50, 100]", "(50,100)", "50:100"])
def test_a_tuple_field_reads_a_list_as_files_write_it(text: str) -> None:
    durations = parse_value(_scenario(), "durations.tokens_per_turn", text)
    assert durations.tokens_per_turn == (50.0, 100.0)


@pytest.mark.parametrize("word", ["none", "null", "None", "NULL"])
def test_none_and_null_are_none_in_a_policys_arguments(word: str) -> None:
    admission = parse_value(_scenario(), "admission", f"AReaLThrottle(max_concurrent={word})")
    assert admission.max_concurrent is None


def test_a_quoted_none_stays_text() -> None:
    with pytest.raises(FieldError) as info:  # a string where a count belongs: refused, not None
        parse_value(_scenario(), "admission", "AReaLThrottle(max_concurrent='none')")
    assert info.value.field == "admission"


NESTED: list[tuple[str, str, str, str, str]] = [  # (id, key, text, field, in the message)
    ("call", "weight_update", "SyncEveryK(inner=Nope())", "weight_update.inner", "Drain"),
    ("bare", "weight_update", "SyncEveryK(inner=Drian)", "weight_update.inner", "did you mean Drain"),
    ("positional", "weight_update", "SyncEveryK(2, Nope())", "weight_update.inner", "Drain"),
    ("outer", "weight_update", "Nope(k=2)", "weight_update", "unknown policy 'Nope'"),
]


@pytest.mark.parametrize(
    ("key", "text", "field", "said"), [n[1:] for n in NESTED], ids=[n[0] for n in NESTED]
)
def test_an_unknown_nested_policy_is_named_by_its_key(key: str, text: str, field: str, said: str) -> None:
    with pytest.raises(FieldError) as info:
        parse_value(_scenario(), key, text)
    assert info.value.field == field and str(info.value).startswith(f"{field}: ") and said in str(info.value)
    if field != key:  # the family of the slot, not every policy of every kind
        assert "AReaLThrottle" not in str(info.value)


UTF8 = [  # (id, bytes, format, line, byte)
    ("toml-line3", b'schema_version = 1\nname = "x"\n# caf\xe9\n', "toml", 3, 35),
    ("yaml-line1", b"name: \xff\n", "yaml", 1, 6),
    ("bom-then-bad", b'\xef\xbb\xbfschema_version = 1\nname = "\xe9"\n', "toml", 2, 30),
    ("cr-lines", b"a: 1\rb: \xe9\r", "yaml", 2, 8),
]


@pytest.mark.parametrize(("raw", "fmt", "line", "at"), [u[1:] for u in UTF8], ids=[u[0] for u in UTF8])
def test_a_non_utf8_file_names_its_line_and_byte(raw: bytes, fmt: str, line: int, at: int) -> None:
    with pytest.raises(ScenarioFileError) as info:
        sf.loads(raw, fmt, "u.file")
    said = str(info.value)
    assert said.startswith(f"u.file: line {line} is not UTF-8 text: byte {at} is 0x{raw[at]:02x}"), said
