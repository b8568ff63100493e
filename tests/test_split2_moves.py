"""Moved code keeps its old names, and the names tests patch are still the ones the code reads.

slime's presets moved to :mod:`scenarios.systems_slime`, the search's rungs to
:mod:`pipesim.plan.rungs` and the planner's options to :mod:`pipesim.plan.options`; each is
re-exported where callers found it, as the same object. Other tests monkeypatch names of
:mod:`pipesim.plan.search` and :mod:`pipesim.plan`: a patch of a name the code no longer reads
passes silently, so here each patched name raises, and the path that reads it must see that.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import pipesim.plan as plan
from pipesim.io.registry import registry
from pipesim.plan.space import Design
from scenarios import systems, systems_slime
from tests.test_plan import small_spec
from tests.test_plan_outputs import tiny_spec

search_mod = importlib.import_module("pipesim.plan.search")  # the package re-exports a function of that name

SLIME = ("slime", "slime_drain", "slime_fully_async", "april")


@pytest.mark.parametrize("name", SLIME)
def test_slime_presets_are_re_exported_as_the_same_objects(name: str) -> None:
    assert getattr(systems, name) is getattr(systems_slime, name)


@pytest.mark.parametrize("name", ["slime_drain", "slime_fully_async", "april"])
def test_the_registry_builds_the_moved_presets(name: str) -> None:
    assert systems.PRESETS[name] is getattr(systems_slime, name)
    small = dict(n_slots=16, batch_size=8, steps=2)
    assert registry()[f"systems:{name}"].build(**small) == getattr(systems_slime, name)(**small)


@pytest.mark.parametrize(
    "old,new,name",
    [(search_mod, "rungs", "promote"), (search_mod, "rungs", "rung_steps"), (plan, "options", "parser")],
)
def test_moved_plan_names_are_the_same_objects(old: Any, new: str, name: str) -> None:
    assert getattr(old, name) is getattr(importlib.import_module(f"pipesim.plan.{new}"), name)


class _Read(Exception):
    """Raised by a patched name: the code read it."""


def _raise(*a: Any, **k: Any) -> Any:
    raise _Read


def test_search_reads_candidates_from_its_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_mod, "candidates", _raise)
    with pytest.raises(_Read):
        search_mod.search(small_spec())


@pytest.mark.parametrize("name", ["ceiling", "proved"])
def test_first_cut_reads_ceiling_and_proved_from_the_search_module(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(search_mod, "ceiling", lambda spec, d, memo=None: 1.0)
    monkeypatch.setattr(search_mod, "proved", lambda spec, d: False)
    monkeypatch.setattr(search_mod, name, _raise)
    ev = SimpleNamespace(evaluate=_raise, progress=False)
    with pytest.raises(_Read):
        search_mod.first_cut(small_spec(), ev, [Design(trainer_gpus=2)], 2, 1, 0)


def test_an_interrupted_search_reads_finished_from_its_module(monkeypatch: pytest.MonkeyPatch) -> None:
    def stopped(*a: Any, **k: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(search_mod, "Evaluator", lambda *a: SimpleNamespace(evaluate=stopped, progress=False))
    monkeypatch.setattr(search_mod, "finished", _raise)
    with pytest.raises(_Read):
        search_mod.search(small_spec())


@pytest.mark.parametrize("name", ["plan", "load", "progress_wanted"])
def test_the_command_reads_its_patched_names_from_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(plan, name, _raise)
    with pytest.raises(_Read):
        plan.main([str(tiny_spec(tmp_path)), "--no-cache", "--no-sensitivity"])
