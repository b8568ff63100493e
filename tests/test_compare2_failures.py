"""A design that fails during ``pipesim.compare`` / ``pipesim compare`` (a policy that raises, a run
that stalls, a refusal): the error names the design and the seed, and the seeds every design had
finished are kept (``CompareFailed.partial``; the command prints and writes them, headed partial,
and exits 2). A table of one finished seed says it has no interval."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import pipesim
from pipesim.core.errors import PipelineError
from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.compare import CompareFailed, CompareRefused
from pipesim.io.registry import get_scenario
from pipesim.policies.base import CountThrottle

ASYNC = "fig13.1-async"
FAILING_SEED = 1


class _Raises:
    """An admission rule that, at seed 1, raises ``exc`` once a step has trained (``exc`` None:
    admits nothing, so the run stalls), and otherwise counts."""

    def __init__(self, exc: Exception | None) -> None:
        self.exc, self.inner = exc, CountThrottle()

    def admits(self, p: Any) -> bool:
        if p.scenario.seed == FAILING_SEED and self.exc is None:
            return False
        if p.scenario.seed == FAILING_SEED and p.version >= 1:
            raise self.exc
        return bool(self.inner.admits(p))


def _flaky(exc: Exception | None) -> Any:
    return get_scenario(ASYNC).with_(steps=2, admission=_Raises(exc))


@pytest.mark.parametrize(
    ("exc", "error_type", "failure_type"),
    [
        (RuntimeError("broke"), RuntimeError, CompareFailed),
        (None, PipelineError, CompareFailed),
        (FieldError("bad value", "knob"), FieldError, CompareRefused),
    ],
    ids=["policy-raises", "stalls", "refusal"],
)
def test_a_failing_design_names_itself_and_the_seed_and_keeps_the_finished_seeds(
    exc: Exception | None, error_type: type[Exception], failure_type: type[Exception]
) -> None:
    designs = {"good": get_scenario(ASYNC).with_(steps=2), "flaky": _flaky(exc)}
    with pytest.raises(failure_type) as info:
        pipesim.compare(designs, seeds=3)
    err = info.value
    assert isinstance(err, CompareFailed) and isinstance(err, RuntimeError)
    assert err.design == "flaky" and err.seed == FAILING_SEED
    assert isinstance(err.error, error_type) and err.__cause__ is err.error
    assert "'flaky'" in str(err) and f"seed {FAILING_SEED}" in str(err)
    assert err.done == FAILING_SEED and err.n == 3
    part = err.partial
    assert part is not None and part.partial and part.done == FAILING_SEED
    assert all(list(f.index) == list(range(FAILING_SEED)) for f in part.per_seed.values())
    if failure_type is CompareRefused:  # still a refusal: a ValueError naming the field
        assert isinstance(err, FieldError) and err.field == "designs['flaky'].knob"


def test_a_failure_at_the_first_seed_keeps_nothing() -> None:
    designs = {"good": get_scenario(ASYNC).with_(steps=2), "flaky": _flaky(RuntimeError("broke"))}
    with pytest.raises(CompareFailed) as info:  # seeds=1: the design's own seed, which is 1
        pipesim.compare({k: v.with_(seed=FAILING_SEED) for k, v in designs.items()})
    assert info.value.seed == FAILING_SEED and info.value.partial is None and info.value.done == 0


FACTORY = """
from pipesim.io.registry import get_scenario
from pipesim.policies.base import CountThrottle


class Flaky:
    def __init__(self):
        self.inner = CountThrottle()

    def admits(self, p):
        if p.scenario.seed == 1 and p.version >= 2:
            raise RuntimeError("flaky admission broke")
        return self.inner.admits(p)


def flaky():
    return get_scenario("fig13.1-async").with_(admission=Flaky())
"""


@pytest.fixture
def factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "compare2_flaky.py").write_text(textwrap.dedent(FACTORY))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return "compare2_flaky:flaky"


def test_the_command_prints_and_writes_the_finished_seeds_and_exits_2(
    factory: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, page = tmp_path / "c.json", tmp_path / "c.html"
    argv = ["compare", ASYNC, factory, "--seeds", "3", "--json", str(out_json), "--html", str(page)]
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert f"design '{factory}', seed 1" in cap.err and "Traceback" not in cap.err
    assert "partial" in cap.out and "episodes / hour" in cap.out
    payload = json.loads(out_json.read_text())
    assert payload["partial"] is True and payload["seeds_done"] == 1
    assert factory in payload["error"] and payload["designs"][factory]["runs"] == 1
    assert page.exists()


def test_one_finished_seed_is_headed_as_having_no_interval(
    factory: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", ASYNC, factory, "--seeds", "3"]) == 2
    header = capsys.readouterr().out.splitlines()[0]
    assert "partial" in header and "no interval" in header and "0..0" not in header
