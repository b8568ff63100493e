"""Saved runs that detect corruption (issue 44): a manifest of content hashes checked first, every
file read through one wrapper, the summary checked against its tables, atomic saves, and format 1
still loading, with a warning. docs/saved-runs.md says what is guaranteed.

On the code before (format 1, no manifest), 17 of 300 byte flips in the Parquet files loaded with
wrong cells, 65 of 100 in lineage.parquet raised a raw pyarrow or decode error, and an edited
summary (``episodes_trained = -5``) loaded unchecked."""

from __future__ import annotations

import json
import math
import random
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim import PipelineConfig, RetryFailed, Scenario, run
from pipesim.io import saved_files
from pipesim.io.parquet import read_parquet
from pipesim.io.saved import SavedRun, SavedRunError, UnverifiedRunWarning, _lineage, load, save

V1_FIXTURE = Path(__file__).parent / "data" / "saved-run-v1"
"""A run saved by pipesim's format-1 writer (commit 7cb4ce3): n_slots=4, batch_size=4, steps=2,
train_time_s=1, on a given pool of 40 durations (8 consumed, kept); 8 episodes launched and trained."""


def reseal(path: Path) -> None:
    """Rewrite the manifest of ``path`` for its files as they are now: an edit made along with
    its hashes, so that the loader's checks below the hashes are what refuses it."""
    files = {f.name: f.read_bytes() for f in sorted(path.iterdir()) if f.name != saved_files.MANIFEST}
    (path / saved_files.MANIFEST).write_bytes(saved_files.manifest_bytes(files))


@pytest.fixture(scope="module")
def small_run() -> pipesim.RunResult:
    """Retried failures (lineage with parents) on a given pool: every file a saved run can have."""
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=3, train_time_s=1.0, max_staleness=2),
        failures=RetryFailed(hazard_per_s=0.05),
    )
    r = run(sc, [float(1 + i % 7) for i in range(200)])
    assert r.summary()["episodes_restarted"] > 0 and r.pool is not None
    return r


@pytest.fixture
def saved(small_run: pipesim.RunResult, tmp_path: Path) -> Path:
    return save(small_run, tmp_path / "run")


def _assert_same(loaded: SavedRun, r: pipesim.RunResult | SavedRun) -> None:
    pd.testing.assert_frame_equal(loaded.events, r.events)
    pd.testing.assert_frame_equal(loaded.trained, r.trained)
    pd.testing.assert_frame_equal(loaded.episode_table, r.episode_table)
    a, b = loaded.summary(), r.summary()
    assert a.keys() == b.keys()
    assert all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)
    assert loaded.scenario == r.scenario and loaded.sim_time_s == r.sim_time_s
    lineage = _lineage(r)
    assert loaded.lineage is not None and lineage is not None
    pd.testing.assert_frame_equal(loaded.lineage, lineage)
    assert loaded.pool is not None and r.pool is not None and np.array_equal(loaded.pool, r.pool)


def test_a_saved_run_lists_every_file_and_loads_verified(saved: Path, small_run: pipesim.RunResult) -> None:
    manifest = json.loads((saved / "manifest.json").read_text())
    on_disk = sorted(f.name for f in saved.iterdir() if f.name != "manifest.json")
    assert sorted(manifest["files"]) == on_disk and "pool.parquet" in on_disk and "lineage.parquet" in on_disk
    assert json.loads((saved / "meta.json").read_text())["version"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a verified run loads without the format-1 warning
        _assert_same(load(saved), small_run)


FLIPS_PER_FILE = 34


def test_no_byte_flip_in_any_file_loads_silently_wrong(saved: Path, small_run: pipesim.RunResult) -> None:
    """34 seeded single-byte flips in each of the 9 files (306 in all): each is refused naming the
    flipped file, or (only possible in the manifest's indentation) loads the very same run."""
    rng = random.Random(44)
    names = sorted(f.name for f in saved.iterdir())
    assert len(names) == 9
    refused: dict[str, int] = dict.fromkeys(names, 0)
    for name in names:
        f = saved / name
        original = f.read_bytes()
        for _ in range(FLIPS_PER_FILE):
            at = rng.randrange(len(original))
            flipped = bytearray(original)
            flipped[at] ^= rng.randrange(1, 256)
            f.write_bytes(bytes(flipped))
            try:
                loaded = load(saved)
            except SavedRunError as exc:
                assert str(exc).startswith(f"{f}:"), (name, at, str(exc))
                refused[name] += 1
            else:
                _assert_same(loaded, small_run)
        f.write_bytes(original)
    assert {n: k for n, k in refused.items() if k < FLIPS_PER_FILE and n != "manifest.json"} == {}
    assert refused["manifest.json"] >= FLIPS_PER_FILE // 2  # most of its bytes are content
    _assert_same(load(saved), small_run)  # restored: loads again


def _flip_last(name: str) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        data = bytearray((d / name).read_bytes())
        data[-1] ^= 0xFF
        (d / name).write_bytes(bytes(data))

    return edit


def _edit_manifest(change: Callable[[dict], None], keep_own_hash: bool) -> Callable[[Path], None]:
    """Edit the parsed manifest, and either keep its stored own hash or recompute it."""

    def edit(d: Path) -> None:
        body = json.loads((d / "manifest.json").read_text())
        stored = body.pop("manifest_sha256")
        change(body)
        own = stored if keep_own_hash else saved_files.sha256_hex(saved_files._canonical(body))
        (d / "manifest.json").write_text(json.dumps({**body, "manifest_sha256": own}))

    return edit


def _resealed(edit: Callable[[Path], None]) -> Callable[[Path], None]:
    def both(d: Path) -> None:
        edit(d)
        reseal(d)

    return both


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    return lambda d: (d / name).write_bytes(data)


def _escape(body: dict) -> None:
    body["files"]["../outside.parquet"] = body["files"].pop("pool.parquet")


def _events(change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        change(read_parquet(d / "events.parquet")).to_parquet(d / "events.parquet", index=False)

    return edit


def _drop_trained_row(d: Path) -> None:
    read_parquet(d / "trained.parquet").iloc[1:].to_parquet(d / "trained.parquet", index=False)


REFUSALS: list[tuple[str, Callable[[Path], None], str, str]] = [
    ("flipped-lineage", _flip_last("lineage.parquet"), "lineage.parquet", "does not match its hash"),
    ("flipped-meta", _flip_last("meta.json"), "meta.json", "does not match its hash"),
    (
        "cut-events",
        lambda d: _write("events.parquet", (d / "events.parquet").read_bytes()[:100])(d),
        "events.parquet",
        "does not match its hash",
    ),
    ("missing-trained", lambda d: (d / "trained.parquet").unlink(), "trained.parquet", "missing"),
    ("added-file", _write("notes.txt", b"mine"), "notes.txt", "not listed in manifest.json"),
    ("added-dir", lambda d: (d / "sub").mkdir(), "sub", "not listed in manifest.json"),
    ("manifest-not-json", _write("manifest.json", b"{nope"), "manifest.json", "Expecting"),
    ("manifest-not-utf8", _write("manifest.json", b"\xff\xfe{}"), "manifest.json", "utf-8"),
    ("manifest-a-list", _write("manifest.json", b"[]"), "manifest.json", "not a pipesim saved-run manifest"),
    (
        "manifest-a-dir",
        lambda d: ((d / "manifest.json").unlink(), (d / "manifest.json").mkdir()),
        "manifest.json",
        "is a directory",
    ),
    (
        "manifest-own-hash",
        _edit_manifest(lambda b: b["files"]["events.parquet"].update(bytes=1), True),
        "manifest.json",
        "own hash does not match",
    ),
    (
        "manifest-no-own-hash",
        _write("manifest.json", b'{"format": "pipesim-run-manifest", "algorithm": "sha256"}'),
        "manifest.json",
        "manifest_sha256",
    ),
    ("manifest-escape", _edit_manifest(_escape, False), "manifest.json", "not a plain file name"),
    (
        "manifest-bad-size",
        _edit_manifest(lambda b: b["files"]["meta.json"].update(bytes=-1), False),
        "manifest.json",
        "files.meta.json.bytes",
    ),
    (
        "lineage-not-parquet",
        _resealed(_write("lineage.parquet", b"PAR1 not parquet PAR1")),
        "lineage.parquet",
        "",
    ),
    (
        "lineage-columns",
        _resealed(lambda d: pd.DataFrame({"a": [1]}).to_parquet(d / "lineage.parquet")),
        "lineage.parquet",
        "lacks the columns episode_id, parent",
    ),
    ("meta-not-utf8", _resealed(_write("meta.json", b'{"format": "\xff"}')), "meta.json", "utf-8"),
    (
        "meta-version-3",
        _resealed(_write("meta.json", b'{"format": "pipesim-run", "version": 3}')),
        "meta.json",
        "version 3",
    ),
    ("summary-nested", _resealed(_write("summary.json", b"[" * 100_000)), "summary.json", ""),
    ("trained-row-dropped", _resealed(_drop_trained_row), "episodes.parquet", "trained.parquet has"),
    ("v2-without-manifest", lambda d: (d / "manifest.json").unlink(), "manifest.json", "format-2"),
    # events the views cannot read or that contradict the run (resealed: the hashes pass); a NaN
    # slot stopped the report with "cannot convert float NaN to integer", naming no file
    ("events-nan-slot", _resealed(_events(lambda e: e.assign(slot=np.nan))), "events.parquet", "slot"),
    ("events-str", _resealed(_events(lambda e: e.astype({"version": str}))), "events.parquet", "version"),
    (
        "events-negative-time",
        _resealed(_events(lambda e: e.assign(end_s=-e["end_s"]))),
        "events.parquet",
        "not inside the run",
    ),
    (
        "events-past-the-end",
        _resealed(_events(lambda e: e.assign(end_s=e["end_s"] * 10))),
        "events.parquet",
        "inside",
    ),
    ("events-empty", _resealed(_events(lambda e: e.iloc[:0])), "events.parquet", "train events"),
]


@pytest.mark.parametrize(("edit", "file", "says"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_a_damaged_saved_run_is_refused_naming_the_file(
    saved: Path, edit: Callable[[Path], None], file: str, says: str
) -> None:
    """Before: a raw ArrowInvalid / UnicodeDecodeError / RecursionError from load, or a silent load."""
    edit(saved)
    with pytest.raises(SavedRunError) as info:
        load(saved)
    message = str(info.value)
    assert message.startswith(f"{saved / file}:"), message
    assert says in message and "\n" not in message and len(message) < 600


SUMMARY_EDITS = [
    ("episodes_trained", -5.0),
    ("episodes_launched", 1.0),
    ("episodes_in_flight", 99.0),
    ("episodes_failed", 0.0),
    ("episodes_restarted", 0.0),
    ("episodes_truncated", 3.0),
    ("episodes_buffered", 7.0),
    ("staleness_max", 9.0),
    ("staleness_mean", 0.25),
    ("throughput_per_hour", 1.0),
    ("sim_time_s", 1.0),
]


@pytest.mark.parametrize(("key", "value"), SUMMARY_EDITS, ids=[k for k, _ in SUMMARY_EDITS])
def test_a_summary_that_disagrees_with_its_tables_is_refused_naming_the_field(
    saved: Path, key: str, value: float
) -> None:
    """Edited with its hashes rewritten (or in a format-1 run, which has none), it loaded and the
    report showed it."""
    summary = json.loads((saved / "summary.json").read_text())
    assert summary[key] != value
    (saved / "summary.json").write_text(json.dumps({**summary, key: value}))
    reseal(saved)
    with pytest.raises(SavedRunError) as info:
        load(saved)
    assert (info.value.field, info.value.file) == (key, str(saved / "summary.json")), str(info.value)
    assert "\n" not in str(info.value)


@pytest.fixture(scope="module")
def saved_once(small_run: pipesim.RunResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(small_run, tmp_path_factory.mktemp("once") / "run")


@settings(max_examples=50)
@given(
    key=st.sampled_from(["episodes_trained", "episodes_launched", "episodes_aborted", "staleness_max"]),
    delta=st.one_of(st.integers(-(10**6), 10**6).filter(bool).map(float), st.floats(1e-6, 1e6)),
)
def test_any_changed_count_is_refused(saved_once: Path, key: str, delta: float) -> None:
    """Any count moved by any amount, its hashes rewritten, is refused naming the count."""
    original = (saved_once / "summary.json").read_bytes()
    summary = json.loads(original)
    summary[key] += delta
    try:
        (saved_once / "summary.json").write_text(json.dumps(summary))
        reseal(saved_once)
        with pytest.raises(SavedRunError) as info:
            load(saved_once)
        assert (info.value.field, info.value.file) == (key, str(saved_once / "summary.json"))
    finally:
        (saved_once / "summary.json").write_bytes(original)
        reseal(saved_once)


def _siblings(d: Path) -> list[str]:
    return sorted(f.name for f in d.parent.iterdir())


def _failing_after(n: int, real: Callable, exc: BaseException) -> Callable:
    calls = [0]

    def fn(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == n + 1:
            raise exc
        return real(*args, **kwargs)

    return fn


@pytest.mark.parametrize(
    ("target", "patch"),
    [
        ("pipesim.io.saved_files._write_synced", 3),  # three files written, then the disk fails
        ("pandas.DataFrame.to_parquet", 1),  # the second table cannot be written
        ("os.rename", 1),  # the new run cannot be renamed into place (the old one moved aside)
    ],
    ids=["write", "parquet", "rename"],
)
@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()], ids=["error", "ctrl-c"])
@pytest.mark.parametrize("existing", ["nothing", "empty", "run"], ids=["new", "over-empty", "over-a-run"])
def test_a_save_that_fails_midway_leaves_no_run_or_the_previous_one_whole(
    small_run: pipesim.RunResult,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    patch: int,
    exc: BaseException,
    existing: str,
) -> None:
    """Before: save wrote into the target, so a failure left a directory that half loaded (a new
    run) or a mix of the new and the previous run's files."""
    d = tmp_path / "runs" / "run"
    before = None
    if existing == "run":
        before = load(save(run(Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=1))), d))
    elif existing == "empty":
        d.mkdir(parents=True)
    if target == "os.rename" and existing == "nothing":
        patch = 0  # the only rename: into place
    module, _, attr = target.rpartition(".")
    owner = pd.DataFrame if module == "pandas.DataFrame" else __import__(module, fromlist=[attr])
    monkeypatch.setattr(owner, attr, _failing_after(patch, getattr(owner, attr), exc))
    with pytest.raises(type(exc)):
        save(small_run, d)
    monkeypatch.undo()
    if existing == "nothing":
        assert not d.parent.exists() or _siblings(d) == [], _siblings(d)
    elif existing == "empty":
        assert _siblings(d) == ["run"] and list(d.iterdir()) == []
    else:
        assert before is not None
        assert _siblings(d) == ["run"]
        again = load(d)
        for table in ("events", "trained", "episode_table"):
            pd.testing.assert_frame_equal(getattr(again, table), getattr(before, table))
        assert again.summary() == before.summary()


def test_a_save_over_a_run_replaces_it_whole_and_leaves_nothing_beside(
    small_run: pipesim.RunResult, tmp_path: Path
) -> None:
    d = tmp_path / "run"
    save(run(Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=1))), d)
    (tmp_path / "empty").mkdir()
    for target in (d, tmp_path / "empty"):
        save(small_run, target)
        _assert_same(load(target), small_run)
    assert _siblings(d) == ["empty", "run"]
    (d / "meta.json").write_text("{")  # a damaged run is still a saved run: replaced, not refused
    save(small_run, d)
    _assert_same(load(d), small_run)


def test_a_format_1_run_loads_with_a_warning_and_saves_as_format_2(tmp_path: Path) -> None:
    with pytest.warns(UnverifiedRunWarning) as record:  # its type says it: no hashes to check
        old = load(V1_FIXTURE)
    assert len(record) == 1 and record[0].filename == __file__  # points at the caller
    assert old.summary()["episodes_trained"] == 8 == len(old.trained) == len(old.episode_table)
    assert old.pool is not None and len(old.pool) == 8 and old.lineage is not None
    assert old.scenario.name == "format-1 fixture" and old.sim_time_s == 31.0
    new = save(old, tmp_path / "v2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = load(new)
    _assert_same(again, old)


@pytest.mark.parametrize(
    ("edit", "file", "says"),
    [
        (
            lambda d: (d / "summary.json").write_text(
                json.dumps({**json.loads((d / "summary.json").read_text()), "episodes_trained": -5})
            ),
            "summary.json",
            "episodes_trained is -5",
        ),
        (_write("lineage.parquet", b"PAR1 not parquet PAR1"), "lineage.parquet", ""),
        (_flip_last("meta.json"), "meta.json", ""),
    ],
    ids=["summary-count", "lineage", "meta"],
)
def test_a_damaged_format_1_run_is_still_refused_naming_the_file(
    tmp_path: Path, edit: Callable[[Path], None], file: str, says: str
) -> None:
    """Without hashes the checks below them still name the file (lineage raised ArrowInvalid)."""
    d = Path(shutil.copytree(V1_FIXTURE, tmp_path / "v1"))
    edit(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnverifiedRunWarning)  # given once meta.json is read
        with pytest.raises(SavedRunError) as info:
            load(d)
    assert str(info.value).startswith(f"{d / file}:") and says in str(info.value)


@pytest.mark.parametrize("meta", [b"[" * 100_000, b"\xff"], ids=["nested", "utf8"])
def test_save_refuses_a_directory_whose_meta_is_not_a_saved_runs(
    small_run: pipesim.RunResult, tmp_path: Path, meta: bytes
) -> None:
    """Before: nested JSON or bad UTF-8 in meta.json raised a raw RecursionError or
    UnicodeDecodeError from save; now it is no saved run, so a non-empty directory save refuses."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "meta.json").write_bytes(meta)
    with pytest.raises(SavedRunError) as info:
        save(small_run, tmp_path / "d")
    assert (info.value.field, info.value.file) == ("", str(tmp_path / "d"))
    assert (tmp_path / "d" / "meta.json").read_bytes() == meta and _siblings(tmp_path / "d") == ["d"]


@pytest.mark.parametrize("target", [".", ".."])
def test_save_refuses_the_current_directory_or_one_above_it(
    small_run: pipesim.RunResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """A save replaces its directory whole (a rename), which cannot be done to the directory the
    process runs in or one above it. Before, '.' (empty) and '..' (a saved run holding the current
    directory) were written into, file by file."""
    run_dir = save(run(Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=1))), tmp_path / "run")
    before = sorted(f.name for f in run_dir.iterdir())
    here = run_dir / "work" if target == ".." else tmp_path / "work"
    here.mkdir()
    monkeypatch.chdir(here)
    with pytest.raises(SavedRunError) as info:
        save(small_run, target)
    assert (info.value.field, info.value.file) == ("", str(here if target == "." else here.parent))
    assert list(here.iterdir()) == []  # nothing written, nothing beside
    inside = [*before, "work"] if target == ".." else before
    assert sorted(f.name for f in run_dir.iterdir()) == sorted(inside)
    assert _siblings(run_dir) == (["run"] if target == ".." else ["run", "work"])


def test_cli_run_save_to_the_current_directory_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: written into '.', file by file; with atomic saves alone, refused only after the run."""
    from pipesim.io.cli import main

    monkeypatch.chdir(tmp_path)
    small = ["--set", "n_slots=8", "--set", "batch_size=8", "--set", "steps=3", "--set", "pool_size=none"]
    assert main(["run", "async-eta1", *small, "--save", "."]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1  # no summary: the run never started
    assert "--save" in err and "the current directory or one above it" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("engine", ["gpu", 3, None])
def test_an_engine_in_meta_that_is_neither_slots_nor_compute_is_refused(saved: Path, engine: object) -> None:
    """meta.json's ``engine`` (written for a compute run, absent for a slot run) is checked, named."""
    meta = json.loads((saved / "meta.json").read_text())
    (saved / "meta.json").write_text(json.dumps({**meta, "engine": engine}))
    reseal(saved)
    with pytest.raises(SavedRunError, match="engine"):
        load(saved)


def test_a_slot_run_saves_no_engine_and_loads_as_slots(saved: Path) -> None:
    assert "engine" not in json.loads((saved / "meta.json").read_text())
    loaded = load(saved)
    assert loaded.engine == "slots" and loaded.runspec is None
    again = save(loaded, saved.parent / "again")
    assert "engine" not in json.loads((again / "meta.json").read_text())
