"""Which speed hint lied: ``check_promises`` names the hint whose shortcut changes the trace.

Where the runs with and without the engine's shortcuts differ (:mod:`pipesim.testing.promises`),
every hint the engine acted on is a suspect, and the message listed them all: a lying
``ConcurrencyCap.closed`` was reported beside ``OldestFinishedFirst.min_items`` and
``PartialRollout.pauses_only``, both kept. The runs take milliseconds, so :func:`blame_hints`
reruns the scenario with one hint *hidden* from the engine at a time and names the hint without
which the run matches the run with no shortcuts.

A hint is hidden by wrapping its policy (:func:`hiding`), not by an engine option: the wrapper is
a subclass of the policy's class, named as it is, whose hidden method is None -- which is how a
``runtime_checkable`` Protocol reads a member as absent, so the engine does not see the hint --
and whose every other attribute reads the policy's own (a method is the policy's bound method,
so a policy whose ``admits`` calls its own ``closed`` still does). The engine is untouched. In
those reruns ``p.scenario`` holds the wrapper: ``isinstance`` still reads it as the policy's
class, ``type(...) is`` does not (the weight update, read so by other policies' promises, is
never wrapped).

The hints and the shortcuts they feed (:mod:`pipesim.core.quiet`, :mod:`pipesim.core.decisions`):

* ``closed`` (admission) and ``pauses_only`` (weight update) together allow quiet completions;
  hiding either turns that shortcut off, so no rerun can tell them apart. ``pauses_only`` is
  never the one blamed: the port refuses a pausing weight update that touches episodes in flight
  otherwise (``abort_running``, ``stretch_running``), and every action first finishes the
  completions the engine slept past, so its lie changes no trace. Where the weight update is a
  user's, the message still mentions it.
* ``min_items`` (batching) lets the trainer skip asking for a batch, and feeds quiet completions
  while the trainer waits.

The suspects are tried in two ways: hiding one (a hint whose hiding alone makes the traces agree
is the one), then, where none alone does (two hints lie) and hiding both does, showing one alone
(each that alone changes the trace is named). Where two hints are needed together, or hiding
them changes nothing (the engine's own shortcut at fault), the message lists every hint acted
on, as before. At most five reruns, each milliseconds on the kit's scenarios.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipesim.config import Scenario

ROLES: tuple[tuple[str, str], ...] = (
    ("admission", "closed"),
    ("batching", "min_items"),
    ("weight_update", "pauses_only"),
)
"""Each hint the engine acts on, by the scenario field of its policy and its method."""

ENABLER = ("weight_update", "pauses_only")
"""The hint that only allows another's shortcut (quiet completions need it with ``closed``)."""

DOC = "(docs/policies.md, 'Hints that make runs faster')"


def held_hints(scenario: Scenario) -> list[tuple[str, str]]:
    """The hints of ``scenario``'s policies the engine acts on, as (role, method), in
    :data:`ROLES` order: a ``pauses_only`` that answers False promises nothing."""
    from pipesim.core.port import ClosedHint, MinItemsHint, pauses_only

    protocols = {"closed": ClosedHint, "min_items": MinItemsHint}
    held = [
        (role, method) for role, method in ROLES[:2] if isinstance(getattr(scenario, role), protocols[method])
    ]
    if pauses_only(scenario.weight_update):
        held.append(ENABLER)
    return held


def hint_name(scenario: Scenario, hint: tuple[str, str]) -> str:
    """``Policy.method``, the class named as the engine names it."""
    return f"{type(getattr(scenario, hint[0])).__name__}.{hint[1]}"


def hiding(policy: Any, hidden: str) -> Any:
    """``policy`` with its method ``hidden`` invisible to the engine (see the module). Every
    attribute of its own (a dataclass field, a slot) and every method or descriptor of its class
    reads ``policy``'s; a plain class attribute (``drops_work = True``) is inherited as it is.
    Raises where the class cannot be subclassed, for :func:`blame_hints` to fall back on."""
    cls = type(policy)

    def forward(name: str) -> property:
        return property(lambda self: getattr(object.__getattribute__(self, INNER), name))

    names = set(getattr(policy, "__dict__", {}))
    names.update(n for k in cls.__mro__[:-1] for n, v in vars(k).items() if hasattr(v, "__get__"))
    namespace: dict[str, Any] = {n: forward(n) for n in names if not n.startswith("__") and n != hidden}
    namespace.update(
        {
            hidden: None,
            "__qualname__": cls.__qualname__,
            "__module__": cls.__module__,
            "__eq__": object.__eq__,
            "__hash__": object.__hash__,
            "__repr__": lambda self: repr(policy),
        }
    )
    wrapper: Any = object.__new__(type(cls.__name__, (cls,), namespace))
    object.__setattr__(wrapper, INNER, policy)
    return wrapper


INNER = "_pipesim_hidden_inner"
"""The wrapper's attribute holding the policy it wraps."""


def with_shown(scenario: Scenario, shown: set[tuple[str, str]]) -> Scenario:
    """``scenario`` with every hint it holds but ``shown`` hidden from the engine."""
    changes: dict[str, Any] = {}
    for role, method in held_hints(scenario):
        if (role, method) not in shown:
            changes[role] = hiding(changes.get(role, getattr(scenario, role)), method)
    return scenario.with_(**changes) if changes else scenario


def blame_hints(
    scenario: Scenario, plain: tuple[Any, ...], run: Callable[[Scenario], tuple[Any, ...]]
) -> str:
    """The clause of a 'promises hold' failure that names the lying hint(s) of ``scenario``,
    whose run with the shortcuts differs from ``plain`` (its trace without them); ``run`` gives a
    scenario's trace with the shortcuts on."""
    held = held_hints(scenario)
    if not held:
        return "no policy declares a hint, so the engine's own shortcut is wrong: please report it"
    listed = ", ".join(hint_name(scenario, h) for h in held)
    fallback = f"the hints the engine acted on: {listed}; one promises more than its policy keeps {DOC}"
    suspects = [h for h in held if h != ENABLER]
    try:
        agree = [h for h in suspects if run(with_shown(scenario, set(held) - {h})) == plain]
        if len(agree) == 1:
            return _named(scenario, agree, "with it alone hidden from the engine, the runs agree")
        if agree:  # needed together
            return fallback
        alone: list[tuple[str, str]] = []
        if len(suspects) > 1 and run(with_shown(scenario, {ENABLER})) == plain:  # the hints, not
            # the engine: with them all hidden the runs agree
            alone = [h for h in suspects if run(with_shown(scenario, {h, ENABLER})) != plain]
    except Exception:  # noqa: BLE001 - a policy that cannot be wrapped: the list, as before
        return fallback
    if alone:
        return _named(scenario, alone, "the shortcut each feeds changes the run alone")
    return fallback


def _named(scenario: Scenario, hints: list[tuple[str, str]], why: str) -> str:
    """The clause naming ``hints`` as the ones that lie, with the evidence ``why``."""
    names = " and ".join(hint_name(scenario, h) for h in hints)
    verb = "promises" if len(hints) == 1 else "each promise"
    out = (
        f"{names} {verb} more than {'its policy keeps' if len(hints) == 1 else 'their policies keep'}: {why}"
    )
    wu = scenario.weight_update
    if ("admission", "closed") in hints and not type(wu).__module__.startswith("pipesim."):
        out += f" (or {hint_name(scenario, ENABLER)}, which that shortcut needs with it)"
    return f"{out} {DOC}"
