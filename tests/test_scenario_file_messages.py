"""Scenario-file refusals that name the key or say what is wrong (yamlfix): a key given twice in
TOML or YAML, an empty file, an array longer than a run can draw, a path save_scenario cannot
write; and YAML read with libyaml's parser where it is installed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipesim.io import yamlfile
from pipesim.io.registry import resolve
from pipesim.io.scenario_files import ScenarioFileError, loads, save_scenario

DUPLICATES = [  # (fmt, text, dotted key, line)
    ("toml", "schema_version = 1\n[pipeline]\nn_slots = 16\nn_slots = 8\n", "pipeline.n_slots", 4),
    ("toml", "schema_version = 1\nseed = 1\nseed = 2\n", "seed", 3),
    (
        "toml",
        "schema_version = 1\n[durations]\ntype = 'A'\n[weight_update]\ntype = 'x'\ntype = 'y'\n",
        "weight_update.type",
        6,
    ),
    ("toml", "schema_version = 1\n[weight_update.inner]\nk = 1\n k = 2\n", "weight_update.inner.k", 4),
    ("yaml", "schema_version: 1\npipeline:\n  n_slots: 16\n  n_slots: 8\n", "pipeline.n_slots", 4),
    ("yaml", "schema_version: 1\nseed: 1\nseed: 2\n", "seed", 3),
]


@pytest.mark.parametrize(("fmt", "text", "key", "line"), DUPLICATES)
def test_a_key_given_twice_is_named_without_parser_noise(fmt: str, text: str, key: str, line: int) -> None:
    with pytest.raises(ScenarioFileError) as info:
        loads(text, fmt, "f")
    message = str(info.value)
    assert info.value.field == key
    assert message.startswith(f"f: {key}: the key is given twice (line {line}, column ")
    assert "<unicode string>" not in message and "while reading" not in message


def test_a_toml_file_it_cannot_read_plainly_keeps_tomllib_message() -> None:
    text = 'schema_version = 1\nname = """\nseed = 1\n"""\nname = "b"\n'  # a multi-line string above
    with pytest.raises(ScenarioFileError, match="not valid TOML: Cannot overwrite a value"):
        loads(text, "toml", "f")


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("toml", ""),
        ("yaml", ""),
        ("toml", "# only a comment\n\n"),
        ("yaml", "# only a comment\n"),
        ("yaml", "  \n"),
    ],
)
def test_an_empty_file_says_it_is_empty(fmt: str, text: str) -> None:
    with pytest.raises(ScenarioFileError, match="the file is empty") as info:
        loads(text, fmt, "f")
    assert str(info.value).startswith("f: ")


def test_yaml_is_read_by_libyaml_where_installed() -> None:
    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML without libyaml: the Python parser is the only one")
    assert issubclass(yamlfile.StrictLoader, yaml.CSafeLoader)


@pytest.mark.parametrize("fmt", ["toml", "yaml"])
def test_too_long_an_array_is_refused_naming_its_key_and_the_bound(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipesim.io import scenario_files

    monkeypatch.setattr(scenario_files, "MAX_ARRAY_VALUES", 5)
    monkeypatch.setattr(yamlfile, "MAX_VALUES", 12)
    monkeypatch.setattr(yamlfile, "MAX_DURATION_POOL", 5)
    values = ", ".join(["1.0"] * 20)
    text = {
        "toml": f"schema_version = 1\n[durations]\ntype = 'TraceDurations'\nvalues = [{values}]\n",
        "yaml": f"schema_version: 1\ndurations:\n  type: TraceDurations\n  values: [{values}]\n",
    }[fmt]
    with pytest.raises(ScenarioFileError) as info:
        loads(text, fmt, "f")
    assert info.value.field == "durations.values"
    assert "at most 5" in str(info.value)


def test_yaml_value_bound_is_the_pool_and_a_margin() -> None:
    from pipesim.core.errors import MAX_DURATION_POOL
    from pipesim.io.scenario_files import MAX_ARRAY_VALUES

    assert MAX_ARRAY_VALUES == MAX_DURATION_POOL < yamlfile.MAX_VALUES


def _scenario():  # type: ignore[no-untyped-def]
    return resolve("systems:areal").build()


@pytest.mark.parametrize("where", ["missing_parent", "a_directory", "parent_is_a_file"])
def test_save_scenario_names_a_path_it_cannot_write(where: str, tmp_path: Path) -> None:
    (tmp_path / "d.toml").mkdir()
    (tmp_path / "f").write_text("x")
    target = {
        "missing_parent": tmp_path / "nope" / "x.toml",
        "a_directory": tmp_path / "d.toml",
        "parent_is_a_file": tmp_path / "f" / "x.toml",
    }[where]
    with pytest.raises(ScenarioFileError) as info:
        save_scenario(_scenario(), target)
    assert str(info.value).startswith(f"{target}: ")
    assert ".tmp" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.toml", "f"]  # nothing written beside
