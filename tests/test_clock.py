"""The SimPy adapter (:mod:`pipesim.core.clock`): its canary, its methods, and its monopoly.

The canary checks, against the installed SimPy, the internals the adapter relies on: the queue's
entry layout ``(time, priority, event id, event)``, the event-id counter, the clock attribute, and
what ``step`` reads of an event (``callbacks``, ``_ok``, ``_value``). If an upgrade of SimPy
changes one of them, these tests fail and name the adapter, the one module to fix.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import simpy
from simpy.events import NORMAL, URGENT

from pipesim.core.clock import END_OF_INSTANT, Clock

ADAPTER = "pipesim/core/clock.py"
PRIVATE = re.compile(r"\._queue\b|\b_eid\b|\._ok\b|\._value\b|\._now\b|callbacks\s*=(?!=)")


def test_canary_the_queue_entry_layout() -> None:
    env = simpy.Environment()
    ev = env.event()
    ev.succeed("x")
    queue = getattr(env, "_queue", None)
    assert isinstance(queue, list), f"SimPy's Environment._queue changed: fix {ADAPTER}"
    entry = queue[0] if len(queue) == 1 else None
    assert isinstance(entry, tuple) and len(entry) == 4, f"entry layout: fix {ADAPTER}"
    t, priority, eid, got = queue[0]
    assert (t, priority, got) == (0, NORMAL, ev) and isinstance(eid, int), f"entry layout: fix {ADAPTER}"
    assert isinstance(next(env._eid), int), f"Environment._eid changed: fix {ADAPTER}"  # type: ignore[attr-defined]
    assert env._now == env.now == 0, f"Environment._now changed: fix {ADAPTER}"  # type: ignore[attr-defined]
    assert (ev._ok, ev._value) == (True, "x"), f"Event._ok/_value changed: fix {ADAPTER}"  # type: ignore[attr-defined]
    assert ev.callbacks == [], f"Event.callbacks changed: fix {ADAPTER}"
    env.step()
    assert ev.callbacks is None and not queue, f"a processed event's callbacks are None: fix {ADAPTER}"
    assert URGENT < NORMAL < END_OF_INSTANT, f"priorities: fix {ADAPTER}"


def test_wake_at_fires_at_the_absolute_time_after_what_is_scheduled_then() -> None:
    env, order = Clock(), []
    at = 3.0328602909390034  # no float delay reaches it from 0.9641832992453796 (tests/test_engine_paths.py)

    def sleeper(name: str, first_s: float):  # type: ignore[no-untyped-def]
        yield env.timeout(first_s)
        wake = env.wake_up()
        yield env.wake_at(wake, at)
        order.append((name, env.now))
        yield env.wake_at(wake, at + 1.0)  # processed: the same event, reused
        order.append((name, env.now))

    env.process(sleeper("a", 0.9641832992453796))
    env.process(sleeper("b", 0.5))
    env.run()
    assert order == [("b", at), ("a", at), ("b", at + 1.0), ("a", at + 1.0)]


def test_free_until_and_advance_to_take_a_wake_up_in_place() -> None:
    env = Clock()
    assert env.free_until(5.0) and env.idle()
    env.timeout(2.0)
    assert env.free_until(1.9) and not env.free_until(2.0) and not env.idle()
    env.advance_to(1.5)
    assert env.now == 1.5
    assert not env.take_in_place(2.0) and env.now == 1.5  # the timeout at 2 comes first
    assert env.take_in_place(1.75) and env.now == 1.75
    env.run()
    assert env.now == 2.0 and env.idle()


def test_call_at_first_due_and_drop_first() -> None:
    env, calls = Clock(), []
    mine = env.call_at(4.0, lambda ev: calls.append(("mine", env.now, ev.value)), value=7)
    env.call_at(4.0, lambda ev: calls.append(("other", env.now, ev.value)))
    assert env.first_due(3.9) is None
    t, cb, value = env.first_due(4.0)  # type: ignore[misc]
    assert (t, value) == (4.0, 7) and cb is not None  # the first pushed comes first
    env.drop_first()
    assert mine.callbacks is None  # marked processed, never called
    env.run()
    assert calls == [("other", 4.0, None)]


def test_the_end_of_instant_comes_after_everything_at_its_time() -> None:
    env, order = Clock(), []
    end = env.end_of_instant()
    end.callbacks.append(lambda _ev: order.append(("end", env.now)))  # type: ignore[union-attr]

    def proc():  # type: ignore[no-untyped-def]
        yield env.timeout(1.0)
        end.fire()  # fired first at t = 1 ...
        env.timeout(0.0).callbacks.append(lambda _ev: order.append(("later", env.now)))  # type: ignore[union-attr]
        order.append(("proc", env.now))

    env.process(proc())
    env.run()
    assert order == [("proc", 1.0), ("later", 1.0), ("end", 1.0)]  # ... processed last at t = 1


@pytest.mark.parametrize("stall", [False, True])
def test_run_until_says_whether_the_event_came(stall: bool) -> None:
    env = Clock()
    done = env.event()
    if not stall:
        env.timeout(3.0).callbacks.append(lambda _ev: done.succeed())  # type: ignore[union-attr]
    env.timeout(10.0)  # after done: not processed when done stops the run
    assert env.run_until(done) is (not stall)
    assert env.now == (3.0 if not stall else 10.0)


def test_no_other_module_touches_simpy_internals() -> None:
    root = Path(__file__).resolve().parent.parent
    hits = []
    for path in sorted((root / "pipesim").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == ADAPTER:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if PRIVATE.search(line.split("#")[0]):
                hits.append(f"{rel}:{n}: {line.strip()}")
    assert hits == [], "SimPy's private names belong in the adapter, " + ADAPTER
    assert PRIVATE.search((root / ADAPTER).read_text())  # the pattern finds what it looks for


def test_a_compute_replica_refuses_a_host_without_the_adapter() -> None:
    from types import SimpleNamespace

    from pipesim import GPUS, MODELS
    from pipesim.compute.cost import EngineConfig, ReplicaCost
    from pipesim.compute.engine import ComputeReplica

    cfg = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=1024)
    host = SimpleNamespace(env=simpy.Environment(), updates=[], on_finished=lambda *a: None)
    with pytest.raises(TypeError, match="Clock"):
        ComputeReplica(host, 4, 0, ReplicaCost(cfg), object())  # type: ignore[arg-type]
