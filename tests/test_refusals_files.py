"""Files a user hands pipesim (scenario files, saved runs, traces to fit, duration CSVs) are refused
with a :class:`FieldError` carrying the dotted key inside the file (``err.field``, ``""`` where the
whole file is refused) and the file (``err.file``). Rows: content or mutation, type, field; never
the sentence."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import pipesim
from pipesim import PipelineConfig, Scenario, TraceDurations
from pipesim.core.validate import FieldError
from pipesim.io import scenario_files as sf
from pipesim.io.fit import fit_trace
from pipesim.io.fit_readers import FitError
from pipesim.io.saved import load
from pipesim.io.saved_files import SavedRunError
from pipesim.io.scenario_schema import ScenarioFileError
from pipesim.io.yamlfile import RepeatedKey, load_yaml

V1 = "schema_version = 1\n"
TOML: list[tuple[str, str, str]] = [  # id, the file's text, the field
    ("no-schema-version", "[pipeline]\nn_slots = 8\n", "schema_version"),
    ("newer-schema", "schema_version = 2\n", "schema_version"),
    ("schema-text", 'schema_version = "1"\n', "schema_version"),
    ("unknown-key", V1 + "bogus = 1\n", "bogus"),
    ("unknown-pipeline-key", V1 + "[pipeline]\nn_slot = 8\n", "pipeline.n_slot"),
    ("n_slots-text", V1 + '[pipeline]\nn_slots = "8"\n', "pipeline.n_slots"),
    ("colocated-int", V1 + "[pipeline]\ncolocated = 1\n", "pipeline.colocated"),
    ("n_slots-zero", V1 + "[pipeline]\nn_slots = 0\n", "pipeline.n_slots"),  # PipelineConfig's, nested
    ("max_staleness-negative", V1 + "[pipeline]\nmax_staleness = -1\n", "pipeline.max_staleness"),
    ("seed-text", V1 + 'seed = "x"\n', "seed"),
    ("seed-negative", V1 + "seed = -1\n", "seed"),  # Scenario's own check
    ("pool_size-zero", V1 + "pool_size = 0\n", "pool_size"),
    ("timeout-number", V1 + "timeout = 600\n", "timeout"),
    ("timeout-cap", V1 + "[timeout]\ncap_s = -1\n", "timeout.cap_s"),
    ("admission-unknown-type", V1 + '[admission]\ntype = "AReaLThrotle"\n', "admission.type"),
    ("admission-wrong-kind", V1 + '[admission]\ntype = "Drain"\n', "admission.type"),
    ("admission-no-type", V1 + "[admission]\nmax_concurrent = 4\n", "admission.type"),
    (
        "admission-field",
        V1 + '[admission]\ntype = "AReaLThrottle"\nmax_concurrent = 0\n',
        "admission.max_concurrent",
    ),
    (
        "nested-unknown-key",
        V1 + '[weight_update]\ntype = "SyncEveryK"\n[weight_update.inner]\ntype = "Drain"\nx = 1\n',
        "weight_update.inner.x",
    ),
    ("nested-int", V1 + '[weight_update]\ntype = "SyncEveryK"\nk = 2.5\n', "weight_update.k"),
    ("nested-zero", V1 + '[weight_update]\ntype = "SyncEveryK"\nk = 0\n', "weight_update.k"),
    ("trace-value", V1 + '[durations]\ntype = "TraceDurations"\nvalues = [1, "x"]\n', "durations.values[1]"),
    (
        "trace-negative",
        V1 + '[durations]\ntype = "TraceDurations"\nvalues = [1, -2]\n',
        "durations.values[1]",
    ),
    ("draws", V1 + '[durations]\ntype = "AgentDurations"\ndraws = "torch"\n', "durations.draws"),
    (
        "tokens-per-turn",
        V1 + '[durations]\ntype = "AgentDurations"\ntokens_per_turn = [1]\n',
        "durations.tokens_per_turn",
    ),
    ("failures-missing", V1 + '[failures]\ntype = "RetryFailed"\n', "failures.hazard_per_s"),
    (
        "replicas-more-than-slots",
        V1 + '[pipeline]\nn_slots = 2\n[replicas]\ntype = "Replicas"\nn_replicas = 4\n',
        "pipeline.n_slots",
    ),
    (
        "max_staleness-unread",
        V1 + '[pipeline]\nmax_staleness = 2\n[admission]\ntype = "RollGroupAdmission"\nratio = 1\n',
        "pipeline.max_staleness",
    ),
    ("not-toml", V1 + "[pipeline\n", ""),
]

YAML: list[tuple[str, str, str]] = [
    ("top-level-list", "- 1\n- 2\n", ""),
    (
        "nested-routing",
        "schema_version: 1\nreplicas: {type: Replicas, n_replicas: 2, routing: {type: Nope}}\n",
        "replicas.routing.type",
    ),
    ("not-yaml", "schema_version: 1\nname: !!python/object/apply:os.system [true]\n", ""),
    ("batch_size-zero", "schema_version: 1\npipeline: {batch_size: 0}\n", "pipeline.batch_size"),
    # a key given twice: PyYAML alone keeps the second and drops the first silently
    ("table-twice", "schema_version: 1\npipeline: {batch_size: 8}\npipeline: {steps: 2}\n", "pipeline"),
    ("key-twice", "schema_version: 1\npipeline: {batch_size: 8, batch_size: 16}\n", "pipeline.batch_size"),
    (
        "key-twice-in-a-list",
        "schema_version: 1\ndurations: {type: TraceDurations, values: [1, 2]}\nx: [{a: 1, a: 2}]\n",
        "x[0].a",
    ),
]


@pytest.mark.parametrize(
    ("suffix", "text", "field"),
    [(".toml", *r[1:]) for r in TOML] + [(".yaml", *r[1:]) for r in YAML],
    ids=[f"toml/{r[0]}" for r in TOML] + [f"yaml/{r[0]}" for r in YAML],
)
def test_a_bad_scenario_file_names_the_file_and_the_key(
    tmp_path: Path, suffix: str, text: str, field: str
) -> None:
    path = tmp_path / f"bad{suffix}"
    path.write_text(text)
    with pytest.raises(ScenarioFileError) as info:
        sf.load_scenario(path)
    assert (info.value.field, info.value.file) == (field, str(path)), str(info.value)


_STEP = st.one_of(st.sampled_from(["pipeline", "a", "b"]), st.just(0))  # a key, or a list's first item


@given(steps=st.lists(_STEP, max_size=4), key=st.sampled_from(["batch_size", "x"]))
def test_a_yaml_key_given_twice_is_named_by_its_dotted_path(steps: list[str | int], key: str) -> None:
    """However deep, through mappings and lists, the repeated key's path is the field."""
    text, want = f"{{{key}: 1, {key}: 2}}", ""
    for step in reversed(steps):
        text = f"[{text}]" if isinstance(step, int) else f"{{{step}: {text}}}"
    for step in [*steps, key]:
        want += f"[{step}]" if isinstance(step, int) else f".{step}" if want else step
    with pytest.raises(RepeatedKey) as info:
        load_yaml(text)
    assert info.value.path == want


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda p: sf.save_scenario(Scenario(), p / "x.json"), ""),
        (lambda p: sf.dumps(Scenario(), "json"), "format"),
        (lambda p: sf.load_scenario(p / "absent.toml"), ""),
    ],
    ids=["save-suffix", "dump-format", "absent-file"],
)
def test_scenario_file_calls_name_what_they_refuse(
    tmp_path: Path, call: Callable[[Path], object], field: str
) -> None:
    with pytest.raises(FieldError) as info:
        call(tmp_path)
    assert info.value.field == field


# -- saved runs ------------------------------------------------------------------------------------
def _set_algorithm(d: Path) -> None:
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["algorithm"] = "md5"
    (d / "manifest.json").write_text(json.dumps(manifest))


def _not_a_directory(d: Path) -> None:
    shutil.rmtree(d)
    d.write_text("x")


SAVED: list[tuple[str, Callable[[Path], object], str, str]] = [  # id, mutation, field, file (relative)
    ("meta-removed", lambda d: (d / "meta.json").unlink(), "", "meta.json"),
    ("file-added", lambda d: (d / "x.txt").write_text("x"), "", "x.txt"),
    ("summary-edited", lambda d: (d / "summary.json").write_text("{}"), "", "summary.json"),
    ("manifest-algorithm", _set_algorithm, "algorithm", "manifest.json"),
    ("not-a-directory", _not_a_directory, "", ""),
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "run"
    pipesim.run(Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=2))).save(path)
    return path


@pytest.mark.parametrize(("mutate", "field", "file"), [s[1:] for s in SAVED], ids=[s[0] for s in SAVED])
def test_a_damaged_saved_run_names_the_file(
    saved: Path, tmp_path: Path, mutate: Callable[[Path], object], field: str, file: str
) -> None:
    d = tmp_path / "run"
    shutil.copytree(saved, d)
    mutate(d)
    with pytest.raises(SavedRunError) as info:
        load(d)
    assert (info.value.field, info.value.file) == (field, str(d / file) if file else str(d)), str(info.value)


# -- traces: fitting and duration CSVs ---------------------------------------------------------------
def _trace(tmp_path: Path, rows: list[str], name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(rows) + "\n")
    return path


GOOD = ["seconds,turns"] + [f"{10 + i},{1 + i % 4}" for i in range(30)]
FIT: list[tuple[str, list[str], dict[str, object], str, bool]] = [  # id, rows, kwargs, field, in the file
    ("no-column", GOOD, {"column": "secs"}, "secs", True),
    ("no-numbers", ["seconds"] + ["x"] * 20, {"column": "seconds"}, "seconds", True),
    ("too-few", GOOD[:5], {"column": "seconds"}, "seconds", True),
    ("constant", ["seconds"] + ["5"] * 20, {"column": "seconds"}, "seconds", True),
    (
        "bad-turns",
        GOOD[:1] + [f"{10 + i},0" for i in range(30)],
        {"column": "seconds", "turns_column": "turns"},
        "turns",
        True,
    ),
    ("scale", GOOD, {"column": "seconds", "scale": -1.0}, "--scale", False),
]


@pytest.mark.parametrize(("rows", "kw", "field", "in_file"), [f[1:] for f in FIT], ids=[f[0] for f in FIT])
def test_a_trace_that_cannot_be_fitted_names_the_column(
    tmp_path: Path, rows: list[str], kw: dict[str, object], field: str, in_file: bool
) -> None:
    path = _trace(tmp_path, rows)
    with pytest.raises(FitError) as info:
        fit_trace(path, **kw)  # type: ignore[arg-type]
    assert (info.value.field, info.value.file) == (field, str(path) if in_file else None)


@pytest.mark.parametrize(
    ("name", "field"), [("absent.csv", ""), ("trace.xlsx", "")], ids=["absent", "suffix"]
)
def test_a_trace_file_that_cannot_be_read_is_refused_whole(tmp_path: Path, name: str, field: str) -> None:
    path = tmp_path / name
    if name != "absent.csv":
        path.write_text("x\n")
    with pytest.raises(FitError) as info:
        fit_trace(path, "seconds")
    assert (info.value.field, info.value.file) == (field, str(path))


@pytest.mark.parametrize(
    ("rows", "column", "field"),
    [(["episode,seconds", "0,3.5"], "secs", "column"), (["seconds", "1", "oops"], "seconds", "seconds[1]")],
    ids=["no-column", "not-a-number"],
)
def test_a_duration_csv_names_the_column_and_row(
    tmp_path: Path, rows: list[str], column: str, field: str
) -> None:
    path = _trace(tmp_path, rows)
    with pytest.raises(FieldError) as info:
        TraceDurations.from_csv(path, column)
    assert (info.value.field, info.value.file) == (field, str(path))


def _nest(depth: int) -> str:
    return "[" * depth + "]" * depth


def _deep_loaders(tmp_path: Path) -> list[tuple[str, Callable[[int], object], type[FieldError], int]]:
    """(id, a call reading a value nested ``depth`` arrays deep, what it raises when too deep, the
    levels around the value: the file's top table, and a plan's ``[space]``)."""
    from pipesim.plan import specfile
    from pipesim.plan.checks import PlanError
    from pipesim.plan.sets import apply_sets

    def plan_file(suffix: str, line: str) -> Callable[[int], object]:
        def read(depth: int) -> object:
            path = tmp_path / f"p{depth}{suffix}"
            path.write_text(line.format(_nest(depth)))
            return specfile.read(path)

        return read

    return [
        ("scenario-toml", lambda d: sf.loads(V1 + f"name = {_nest(d)}\n"), ScenarioFileError, 1),
        (
            "scenario-yaml",
            lambda d: sf.loads(f"schema_version: 1\nname: {_nest(d)}\n", "yaml"),
            ScenarioFileError,
            1,
        ),
        ("plan-toml", plan_file(".toml", "[space]\neta = {}\n"), PlanError, 2),
        ("plan-yaml", plan_file(".yaml", "space:\n  eta: {}\n"), PlanError, 2),
        ("set-value", lambda d: apply_sets({}, [f"space.eta={_nest(d)}"], ("space",)), PlanError, 0),
    ]


DEEP_IDS = ["scenario-toml", "scenario-yaml", "plan-toml", "plan-yaml", "set"]


@pytest.mark.parametrize("depth", [None, 600, 5000])
@pytest.mark.parametrize("case", range(5), ids=DEEP_IDS)
def test_a_value_nested_too_deep_is_refused_naming_the_file_not_a_recursion_error(
    tmp_path: Path, case: int, depth: int | None
) -> None:
    """At 600 and 5,000 levels the parsers themselves recursed out (a RecursionError with no file
    or key); one level past the limit they parse, and the nesting check refuses it the same way."""
    from pipesim.core.validate import MAX_NESTING

    name, call, kind, around = _deep_loaders(tmp_path)[case]
    depth = MAX_NESTING - around + 1 if depth is None else depth
    with pytest.raises(kind) as info:
        call(depth)
    if name.startswith("plan"):
        assert info.value.file == str(tmp_path / f"p{depth}.{name[5:]}")
    if name == "set-value":
        assert info.value.field == "space.eta"


@pytest.mark.parametrize("case", range(5), ids=DEEP_IDS)
def test_a_value_nested_to_the_limit_is_not_refused_for_its_depth(tmp_path: Path, case: int) -> None:
    """:data:`~pipesim.core.validate.MAX_NESTING` levels, the file's own included, are read
    (whatever the key's own check then says of the value)."""
    from pipesim.core.validate import MAX_NESTING

    _, call, _, around = _deep_loaders(tmp_path)[case]
    try:
        call(MAX_NESTING - around)
    except FieldError as e:
        assert e.field == "name"  # the key's own check, not the whole file refused


def _depth(x: object) -> int:
    """The slow reference: the recursive depth of lists and dicts (0 for a scalar)."""
    if isinstance(x, dict):
        return 1 + max((_depth(v) for v in x.values()), default=0)
    if isinstance(x, list):
        return 1 + max((_depth(v) for v in x), default=0)
    return 0


NESTS = st.recursive(
    st.integers(0, 3) | st.text(max_size=2),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=2), kids, max_size=3),
    max_leaves=40,
)


@given(NESTS, st.integers(0, 8))
def test_the_nesting_check_agrees_with_a_recursive_depth(data: object, limit: int) -> None:
    from pipesim.core.validate import nested_too_deep

    assert nested_too_deep(data, limit) == (_depth(data) > limit)


@st.composite
def shared_nests(draw: st.DrawFn) -> object:
    """Containers built bottom-up, each holding earlier ones, so one object sits at several depths
    (as YAML aliases make it): the walk that skips a container seen before must still take its
    deepest place."""
    built: list[object] = [0]
    for _ in range(draw(st.integers(1, 12))):
        kids = draw(st.lists(st.sampled_from(built), max_size=3))
        built.append(kids if draw(st.booleans()) else {str(i): k for i, k in enumerate(kids)})
    return built[-1]


_X: list[object] = [[0]]


@given(shared_nests(), st.integers(0, 8))
@example([[_X], _X], 3)  # met first at depth 1 (the last item is walked first), then at depth 2
def test_the_nesting_check_counts_a_shared_container_at_its_deepest(data: object, limit: int) -> None:
    from pipesim.core.validate import nested_too_deep

    assert nested_too_deep(data, limit) == (_depth(data) > limit)


def test_a_self_referring_value_is_too_deep_not_a_hang() -> None:
    from pipesim.core.validate import nested_too_deep

    loop: list[object] = [1]
    loop.append(loop)  # yaml.safe_load("&a [1, *a]") builds this
    assert nested_too_deep(loop) and nested_too_deep({"k": [loop]}, 5)
