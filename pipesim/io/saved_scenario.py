"""scenario.json: a saved run's scenario, written and read back with a placeholder in each slot
whose policy this process cannot build.

:func:`scenario_record` writes ``scenario.json``'s scenario keys: the scenario as data where every
policy is in the catalog; else ``scenario`` null, ``scenario_partial`` the rest of the scenario as
data and ``missing_policies`` (slot: text) the policies kept as text; and always
``policy_modules``, the module of each user class, so that a load can name the module to
register. :func:`read_scenario` reads them back, standing a
:class:`~pipesim.policies.missing.MissingPolicy` in each slot whose class is not registered here
(its table kept, to build it once its module is registered) or was outside the catalog at the save
(its text kept). A stand-in's name says so (:data:`STAND_IN_TAIL`, which :func:`saved_name` takes
off again), and a loaded run saved again loses nothing.

It lives apart from :mod:`pipesim.io.saved_checks`, which checks that a run's files agree with
each other: this module builds and takes apart a scenario through the policy catalog, which no
check needs. :mod:`pipesim.io.saved` calls both.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, cast

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.policies.catalog import UnknownPolicyError
from pipesim.policies.missing import MissingPolicy

__all__ = [
    "COMPUTE_STAND_IN",
    "OLD_STAND_IN",
    "STAND_IN_SLOTS",
    "STAND_IN_TAIL",
    "compute_stand_in",
    "read_scenario",
    "saved_name",
    "scenario_record",
]

OLD_STAND_IN = "(not kept: saved before pipesim kept each policy; SavedRun.scenario_repr has the run's)"
"""The text of the placeholders of a run saved with ``scenario: null`` and no per-slot record: any
of its main policies may be the one outside the catalog, so none of them stands in as run."""

STAND_IN_SLOTS = ("durations", "admission", "weight_update", "batching")


def scenario_record(scen: Any) -> tuple[dict[str, Any], str]:
    """scenario.json's scenario keys for ``scen``, and why some policy is kept as text only ("" when
    every policy is written as data). ``policy_modules`` (slot: the module of the user class in
    it) lets a load name the module to register. Where a policy is outside the catalog,
    ``scenario`` is null (a pipesim before the placeholders shows the stand-in it always did),
    ``scenario_partial`` is the rest of the scenario as data and ``missing_policies`` (slot:
    text) the policies kept as text. A loaded run's placeholders are written back as they were
    saved: a run saved again loses nothing."""
    from pipesim.io.scenario_files import POLICY_SLOTS, policy_to_dict, scenario_to_dict
    from pipesim.policies.faults import Timeout
    from pipesim.policies.missing import missing_policies
    from pipesim.policies.replicas import Replicas

    out: dict[str, Any] = {"policy_modules": _user_modules(scen, POLICY_SLOTS)}
    try:
        out["scenario"] = scenario_to_dict(scen)
        return out, ""
    except ValueError as exc:
        why = str(exc)
    tables: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for slot in POLICY_SLOTS:
        if (value := getattr(scen, slot)) is None:
            continue
        held = [m for m in missing_policies(value) if m.slot == slot]
        if held and held[0].data is not None:  # loaded from its table: written back as it was
            tables[slot] = held[0].data
            continue
        try:
            tables[slot] = policy_to_dict(value, slot)
        except ValueError:
            texts[slot] = held[0].text if held else repr(value)
            if isinstance(value, Timeout):  # the kernel reads only its cap: written as one
                tables[slot] = {"type": "Timeout", "cap_s": float(value.cap_s)}
                del texts[slot]
            elif isinstance(value, Replicas):  # its layout kept; its routing stands in
                tables[slot] = {"type": "Replicas", "n_replicas": value.n_replicas}
    partial = scenario_to_dict(cast(Any, _Without(scen, set(POLICY_SLOTS))))
    partial.update(tables, name=saved_name(scen))
    if not texts:  # every policy is data again (a loaded run's placeholders saved back)
        out["scenario"] = partial
        return out, ""
    out.update(scenario=None, scenario_partial=partial, missing_policies=texts)
    return out, why


class _Without:
    """``scen`` with the fields ``gone`` read as None (omitted by ``scenario_to_dict``)."""

    def __init__(self, scen: Any, gone: set[str]) -> None:
        self.scen, self.gone = scen, gone

    def __getattr__(self, name: str) -> Any:
        return None if name in self.gone else getattr(self.scen, name)


def _user_modules(scen: Any, slots: tuple[str, ...]) -> dict[str, str]:
    """slot -> the module of the first class in it that is not pipesim's (a placeholder's recorded one)."""
    from pipesim.policies.missing import MissingPolicy

    def first(obj: Any, depth: int) -> str:
        if isinstance(obj, MissingPolicy):
            return obj.module
        module = type(obj).__module__
        if not module.startswith("pipesim.") and not isinstance(obj, str | int | float | bool | tuple):
            return module
        items = (
            [getattr(obj, f.name) for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else []
        )
        items += list(obj) if isinstance(obj, tuple) else []
        return next((m for v in items if depth < 8 and v is not None and (m := first(v, depth + 1))), "")

    found = {slot: first(getattr(scen, slot), 0) for slot in slots if getattr(scen, slot) is not None}
    return {k: v for k, v in found.items() if v}


def read_scenario(sc: dict[str, Any], name: str, source: str) -> tuple[Any, list[Any]]:
    """The scenario scenario.json describes (``sc``; ``name`` from meta.json for a run that kept
    no scenario data), and the placeholders (:class:`~pipesim.policies.missing.MissingPolicy`)
    standing in its slots for the policies this process cannot build: a class not registered
    here (its table is kept, to build it once its module is registered), or one that was outside
    the catalog at the save (its text is kept). Call inside ``reading(scenario.json)``."""
    from pipesim.io.scenario_files import POLICY_SLOTS, scenario_from_dict
    from pipesim.policies.catalog import UnknownPolicyError
    from pipesim.policies.missing import MissingPolicy

    modules = _str_map(sc.get("policy_modules", {}), "policy_modules")
    if sc.get("scenario") is not None:
        data, texts = sc["scenario"], {}
    elif sc.get("scenario_partial") is not None:
        data, texts = sc["scenario_partial"], _str_map(sc.get("missing_policies"), "missing_policies")
    else:  # saved before the per-slot record: only the pipeline is known
        data = {"schema_version": 1, "name": name, "pipeline": sc["pipeline"]}
        texts = dict.fromkeys(STAND_IN_SLOTS, OLD_STAND_IN)
    if not isinstance(data, dict):
        raise FieldError(f"must be a table of scenario keys, got {type(data).__name__}", "scenario")
    if bad := [s for s in texts if s not in POLICY_SLOTS or s == "timeout"]:
        what = "pipesim's Timeout, rebuilt from its table" if bad[0] == "timeout" else "not a policy slot"
        raise FieldError(f"names {shown(bad[0])}: {what}", "missing_policies")
    # a slot standing in is not also built from a table (replicas keeps its n_replicas skeleton)
    data = {k: v for k, v in data.items() if k not in texts or k == "replicas"}
    missing = {s: MissingPolicy(s, t, modules.get(s, "")) for s, t in texts.items()}
    for _ in POLICY_SLOTS:  # each pass takes out one slot whose class is not registered here
        try:
            scenario = scenario_from_dict(_zero_staleness(data, missing), source=source)
            break
        except FieldError as exc:
            slot = exc.field.split(".")[0]
            unknown = isinstance(exc.__cause__, UnknownPolicyError)
            if not unknown or slot not in POLICY_SLOTS or slot in missing:
                raise
            table = data.pop(slot)
            missing[slot] = MissingPolicy(slot, _table_text(table), modules.get(slot, ""), table)
            if slot == "timeout" and isinstance(table, dict):  # the kernel reads only its cap
                data[slot] = {"type": "Timeout", "cap_s": table.get("cap_s")}
                del missing[slot]
            elif slot == "replicas" and isinstance(table, dict) and "n_replicas" in table:
                data[slot] = {"type": "Replicas", "n_replicas": table["n_replicas"]}
    else:
        raise FieldError("more policies failed to build than there are slots", "scenario")
    return _placed(scenario, missing, data), list(missing.values())


def _zero_staleness(data: dict[str, Any], missing: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``max_staleness`` 0 while a slot stands in: a placeholder counts as pipesim's
    own in :func:`~pipesim.policies.base.unread_staleness`, which lets the user's policy it stands
    for read the field; the saved value is put back after (:func:`_placed`)."""
    pipeline = data.get("pipeline")
    if not missing or not isinstance(pipeline, dict) or "max_staleness" not in pipeline:
        return data
    return {**data, "pipeline": {**pipeline, "max_staleness": 0}}


def _placed(scenario: Any, missing: dict[str, Any], data: dict[str, Any]) -> Any:
    """``scenario`` with each placeholder in its slot (a routing one inside ``Replicas``), named as a
    stand-in (a report or a table of it would otherwise pass for the design that ran), and the
    saved ``max_staleness`` back."""
    from pipesim.policies.base import UnreadStaleness
    from pipesim.policies.replicas import Replicas

    if not missing:
        return scenario
    put = {s: m for s, m in missing.items() if s != "replicas"}
    if (m := missing.get("replicas")) is not None:
        put["replicas"] = dataclasses.replace(scenario.replicas or Replicas(1), routing=m)
    out = dataclasses.replace(scenario, **put, name=_stand_in_name(scenario.name, ", ".join(missing)))
    saved = dict(data.get("pipeline") or {}).get("max_staleness", out.pipeline.max_staleness)
    if saved == out.pipeline.max_staleness:
        return out
    pipeline = dataclasses.replace(out.pipeline, max_staleness=saved)
    try:
        return dataclasses.replace(out, pipeline=pipeline)
    except UnreadStaleness:  # the saved design was valid with the user's policy in that slot
        object.__setattr__(out, "pipeline", pipeline)
        return out


STAND_IN_TAIL = re.compile(r" \(stand-in: [a-z_, ]+ not rebuilt\)$")
"""The tail :func:`read_scenario` adds to a stand-in's name (taken off again when it is saved)."""


def saved_name(scen: Any) -> str:
    """The name a save writes for ``scen``: a loaded stand-in's own name, without its tail."""
    from pipesim.policies.missing import missing_policies

    name = str(scen.name)
    return STAND_IN_TAIL.sub("", name) if missing_policies(scen) else name


def _stand_in_name(name: str, slots: str) -> str:
    """``NAME (stand-in: SLOTS not rebuilt)``, NAME cut to keep it within a scenario name's length."""
    from pipesim.config import MAX_NAME_CHARS

    tail = f" (stand-in: {slots} not rebuilt)"
    return name[: max(1, MAX_NAME_CHARS - len(tail))] + tail


COMPUTE_STAND_IN = "compute engine"
"""The slots part of a compute run's stand-in name: ``NAME (stand-in: compute engine not rebuilt)``."""


@dataclasses.dataclass(frozen=True)
class _ComputeRun(MissingPolicy):
    """The durations placeholder of a saved compute run's scenario (:func:`compute_stand_in`)."""

    def error(self) -> UnknownPolicyError:
        return UnknownPolicyError(
            "durations: this scenario is the kernel's stand-in of a compute run (pipesim run SPEC "
            "--save): the compute engine drew its episodes token by token from its run spec, not "
            "from these durations, so a run of it would be another design; rerun the spec the "
            "run kept, SavedRun.runspec: pipesim.plan.runspec.run(pipesim.plan.runspec.from_dict("
            'saved.runspec["runspec"])), or `pipesim run` on the spec file',
            "durations",
        )


def compute_stand_in(scenario: Any, table: Any) -> Any:
    """The scenario of a saved compute run (``pipesim run SPEC --save``) marked as the kernel's
    stand-in it is: the compute engine generated its episodes token by token from its run spec and
    never read this scenario's durations, so :func:`pipesim.run` of it ran another design (864/h
    for a saved 11,700/h) under the run's name. Its durations slot holds a :class:`_ComputeRun`
    placeholder, which refuses to run, naming the spec to rerun from (``SavedRun.runspec``), and
    keeps the saved durations ``table`` (a save writes it back as it was: :func:`saved_name` takes
    the name's tail off again)."""
    held = _ComputeRun("durations", _table_text(table), "", table)
    return dataclasses.replace(scenario, durations=held, name=_stand_in_name(scenario.name, COMPUTE_STAND_IN))


def _str_map(value: Any, field: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise FieldError(f"must be a table of slot names to text, got {shown(value)}", field)
    return value


def _table_text(table: Any) -> str:
    """A saved policy table as the text ``parse_policy`` reads: ``Name(field=value, ...)``."""
    if isinstance(table, dict) and isinstance(table.get("type"), str):
        args = ", ".join(f"{k}={_table_text(v)}" for k, v in table.items() if k != "type")
        return f"{table['type']}({args})"
    if isinstance(table, list):
        return f"({', '.join(_table_text(v) for v in table)}{',' if len(table) == 1 else ''})"
    return repr(table)
