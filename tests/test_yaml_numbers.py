"""YAML files read numbers as YAML 1.2 does (:mod:`pipesim.io.yamlfile`), at every entry point.

PyYAML's YAML 1.1 resolver read ``n_slots: 016`` as 14 (octal), ``train_time_s: 0b101`` as 5,
``sync_time_s: 1:30:00`` as 5400 (base 60), ``1_000`` as 1000 and ``colocated: yes`` as true; a
run spec's ``n_gpus: 010`` ran on 8 GPUs. TOML and JSON refuse those forms. Now an integer with a
leading zero is refused naming its key, and the other forms are strings, which the field's own
check refuses naming the field. Rows: the entry point, the value, the error type and the field
(never the sentence, beyond the one word that tells which refusal it is).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pipesim.plan as plan
from pipesim.core.validate import FieldError
from pipesim.io import scenario_files as sf
from pipesim.io.scenario_schema import ScenarioFileError
from pipesim.io.yamlfile import AmbiguousNumber, NodeError, RepeatedKey, dump_yaml, load_yaml
from pipesim.plan import runspec
from pipesim.plan.checks import PlanError

pytestmark = pytest.mark.timeout(20)

SCENARIO = (
    "schema_version: 1\n"
    "pipeline: {{n_slots: {int}, batch_size: 4, steps: 3, train_time_s: {float}, colocated: {bool}}}\n"
)
PLAN = (
    "cluster: {{gpu: h100-sxm, n_gpus: {int}}}\n"
    "model: {{name: qwen3-0.6b, mfu: {float}, share_group_prefix: {bool}}}\n"
)
RUN = (
    "kind: compute\n"
    "cluster: {{gpu: h100-sxm, n_gpus: {int}}}\n"
    "model: {{name: qwen3-0.6b, max_model_len: 4096, mfu: {float}, share_group_prefix: {bool}}}\n"
    "workload: {{prompts_per_step: 4, samples_per_prompt: 4, prompt_tokens: 128,"
    " response: {{median_tokens: 200, sigma: 0.5}}, max_response_tokens: 1024}}\n"
    "design: {{placement: colocated, tp: 1, eta: 1, update: partial, sync_every: 1, oversample: 1.0}}\n"
    "run: {{steps: 3, seed: 5}}\n"
)
GOOD = {"int": "16", "float": "0.5", "bool": "true"}


def _scenario(p: Path) -> tuple[int, float, bool]:
    s = sf.load_scenario(p)
    return s.pipeline.n_slots, s.pipeline.train_time_s, s.pipeline.colocated


def _plan(p: Path) -> tuple[int, float, bool]:
    spec = plan.load(p)
    return spec.n_gpus, spec.mfu, spec.share_group_prefix


def _run(p: Path) -> tuple[int, float, bool]:
    spec = runspec.load(p).plan
    return spec.n_gpus, spec.mfu, spec.share_group_prefix


# name: (template, loader, error type, the field of each kind of value)
ENTRY: dict[str, tuple[str, Callable[[Path], tuple[int, float, bool]], type[FieldError], dict[str, str]]] = {
    "scenario": (
        SCENARIO,
        _scenario,
        ScenarioFileError,
        {"int": "pipeline.n_slots", "float": "pipeline.train_time_s", "bool": "pipeline.colocated"},
    ),
    "plan": (
        PLAN,
        _plan,
        PlanError,
        {"int": "cluster.n_gpus", "float": "model.mfu", "bool": "model.share_group_prefix"},
    ),
    "runspec": (
        RUN,
        _run,
        PlanError,
        {"int": "cluster.n_gpus", "float": "model.mfu", "bool": "model.share_group_prefix"},
    ),
}


def _write(tmp_path: Path, entry: str, kind: str, value: str) -> Path:
    template = ENTRY[entry][0]
    p = tmp_path / f"{entry}.yaml"
    p.write_text(template.format(**{**GOOD, kind: value}))
    return p


REFUSED: list[tuple[str, str, str]] = [  # id, kind of value, the YAML 1.1 form
    ("leading-zero-octal", "int", "016"),  # YAML 1.1: 14
    ("leading-zero-not-octal", "int", "08"),  # YAML 1.1: the text '08'
    ("leading-zero-negative", "int", "-010"),
    ("binary", "int", "0b10000"),  # YAML 1.1: 16
    ("hex", "int", "0x10"),  # YAML 1.1 and 1.2 core: 16; TOML too, but JSON not: written plainly
    ("octal-0o", "int", "0o20"),
    ("underscore", "int", "1_6"),
    ("base-60-int", "int", "0:16"),  # YAML 1.1: 16
    ("base-60-float", "float", "0:30.5"),
    ("underscore-float", "float", "0.5_0"),
    ("yes", "bool", "yes"),
    ("on", "bool", "on"),
    ("No", "bool", "No"),
    ("OFF", "bool", "OFF"),
]


@pytest.mark.parametrize("entry", list(ENTRY))
@pytest.mark.parametrize(("kind", "value"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_yaml_1_1_number_or_boolean_is_refused_naming_the_field_and_the_file(
    tmp_path: Path, entry: str, kind: str, value: str
) -> None:
    _, load, error, fields = ENTRY[entry]
    path = _write(tmp_path, entry, kind, value)
    with pytest.raises(error) as info:
        load(path)
    err = info.value
    assert err.field == fields[kind], str(err)
    assert err.file == str(path) and str(err).startswith(f"{path}: "), str(err)
    assert "\n" not in str(err)
    assert value in str(err)  # the value as written, not a number YAML 1.1 made of it
    if value.lstrip("-").startswith("0") and value.lstrip("-")[1:2].isdigit():
        assert "leading zero" in str(err), str(err)


READ: list[tuple[str, str, str, Any]] = [  # id, kind, the YAML text, the value read
    ("decimal", "int", "16", 16),
    ("plus", "int", "+16", 16),
    ("zero-padded-alike", "int", "07", 7),  # YAML 1.1 and 1.2 agree: read
    ("fraction", "float", "0.25", 0.25),
    ("leading-dot", "float", ".25", 0.25),
    ("exponent", "float", "25e-2", 0.25),
    ("exponent-dot", "float", "2.5E-1", 0.25),
    ("whole-float", "float", "1", 1.0),
    ("true", "bool", "true", True),
    ("True", "bool", "True", True),
    ("FALSE", "bool", "FALSE", False),
]


@pytest.mark.parametrize("entry", list(ENTRY))
@pytest.mark.parametrize(("kind", "text", "expected"), [r[1:] for r in READ], ids=[r[0] for r in READ])
def test_a_yaml_1_2_number_or_boolean_is_read(
    tmp_path: Path, entry: str, kind: str, text: str, expected: Any
) -> None:
    _, load, _, _ = ENTRY[entry]
    got = dict(zip(("int", "float", "bool"), load(_write(tmp_path, entry, kind, text))))[kind]
    assert got == expected and isinstance(got, bool) == isinstance(expected, bool)


SCALARS: list[tuple[str, Any]] = [  # YAML text, what the loader gives (YAML 1.2 core schema)
    ("16", 16),
    ("-16", -16),
    ("0", 0),
    ("-0", 0),
    ("1e3", 1000.0),
    ("1.5", 1.5),
    (".5", 0.5),
    ("5.", 5.0),
    ("-2.5E-3", -0.0025),
    (".inf", float("inf")),
    ("-.Inf", float("-inf")),
    ("+.INF", float("inf")),
    ("true", True),
    ("False", False),
    ("~", None),
    ("null", None),
    ("NULL", None),
    ("", None),
    ("0b101", "0b101"),
    ("0x1F", "0x1F"),
    ("0o17", "0o17"),
    ("1_000", "1_000"),
    ("1:30:00", "1:30:00"),
    ("2024-01-01", "2024-01-01"),  # YAML 1.1: a date
    ("yes", "yes"),
    ("Off", "Off"),
    ("y", "y"),
    ('"016"', "016"),  # quoted: text, as written
    ("'1:30'", "1:30"),
]


@pytest.mark.parametrize(("text", "value"), SCALARS, ids=[t or "empty" for t, _ in SCALARS])
def test_the_loader_resolves_scalars_by_the_yaml_1_2_core_schema(text: str, value: Any) -> None:
    got = load_yaml(f"a: {text}\n")["a"]
    assert got == value and type(got) is type(value)


def test_nan_is_a_float() -> None:
    got = load_yaml("a: .NaN\nb: .nan\n")
    assert all(v != v for v in got.values())


AMBIGUOUS: list[tuple[str, str, str]] = [  # id, document, the path refused
    ("value", "a: 016\n", "a"),
    ("nested", "a: {b: [1, 010]}\n", "a.b[1]"),
    ("key", "a: {016: x}\n", "a.016"),
    ("explicit-int", "a: !!int 016\n", "a"),
]


@pytest.mark.parametrize(("text", "path"), [r[1:] for r in AMBIGUOUS], ids=[r[0] for r in AMBIGUOUS])
def test_a_leading_zero_integer_is_refused_with_its_path(text: str, path: str) -> None:
    with pytest.raises(AmbiguousNumber) as info:
        load_yaml(text)
    assert info.value.path == path and "leading zero" in info.value.said()


@pytest.mark.parametrize(
    ("text", "path"), [("a: !!int 0x10\n", "a"), ("a: {b: !!float '1:30'}\n", "a.b")], ids=["int", "float"]
)
def test_an_explicit_tag_takes_the_decimal_forms_only(text: str, path: str) -> None:
    with pytest.raises(NodeError) as info:
        load_yaml(text)
    assert info.value.path == path and not isinstance(info.value, RepeatedKey)


def test_ordinary_yaml_still_reads() -> None:
    text = "base: &b {x: 1, y: 2.5}\nmore: {<<: *b, y: 3}\nlist: [a, 'b', 1, -2, 3.0, true, null]\n"
    assert load_yaml(text) == {
        "base": {"x": 1, "y": 2.5},
        "more": {"x": 1, "y": 3},
        "list": ["a", "b", 1, -2, 3.0, True, None],
    }


TEXTS = ["09", "018", "016", "1e3", "1.5e3", "yes", "0b1", "1:30", "TRUE", "-0", "5.", "null", "", "x"]


def test_strings_that_read_as_numbers_are_quoted_when_written() -> None:
    """PyYAML writes ``'09'`` and ``'1e3'`` plain (text to YAML 1.1), which YAML 1.2 reads as a
    number or refuses: :func:`dump_yaml` quotes them, so a file reads back as written."""
    data = {"a": TEXTS, "b": [1, -2, 1.5, 1e20, float("inf"), True, None]}
    assert load_yaml(dump_yaml(data, sort_keys=False)) == data


@pytest.mark.parametrize("name", ["09", "1e3", "2024-01-01"])
def test_a_scenario_named_like_a_number_exports_and_reads_back(name: str) -> None:
    scenario = sf.loads(f"schema_version = 1\nname = {name!r}\n", "toml")
    again = sf.loads(sf.dumps(scenario, "yaml"), "yaml", "x.yaml")
    assert again.name == name and again == scenario
