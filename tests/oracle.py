"""An independent oracle: the rollout pipeline as a plain-Python event loop, no SimPy.

Written from the chapter's description of the semantics, deliberately straightforward: every
iteration scans all slots to find free ones and all running episodes to find the next event, and
a sync pushes the end time of every episode in flight. It is slow on purpose (this is the
"straightforward loop" the benchmark compares against) and small enough to check by eye.

Semantics, one iteration per distinct event time:
1. Unless a sync is running (or, when draining, requested), start episodes on the lowest free
   slots while ``started < (version + 1 + eta) * B``, consuming durations in order.
2. If the trainer is idle, no sync is requested or running, and B episodes are finished, train on
   the B that finished first.
3. Advance to the earliest end among running episodes, the training step and the sync.
4. At that time: a finished sync publishes version + 1; a finished training step requests a sync;
   finished episodes join the buffer (in start order when they tie).
5. A requested sync starts now when interrupting, or once no episode runs when draining; with
   interruption every running episode's end moves back by the sync time.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OracleResult:
    time: float
    trained: list[tuple[int, int, float]] = field(
        default_factory=list
    )  # (train version, ep version, duration)
    gen: list[tuple[int, float, float, int]] = field(default_factory=list)  # (slot, start, end, version)
    train: list[tuple[float, float, int]] = field(default_factory=list)
    sync: list[tuple[float, float, int]] = field(default_factory=list)
    started: int = 0
    buffered: int = 0
    running: int = 0


def oracle_pipeline(
    durations: list[float],
    n_slots: int,
    batch_size: int,
    train_time: float,
    sync_time: float,
    max_staleness: int = 0,
    interrupt: bool = True,
    steps: int = 10,
) -> OracleResult:
    pool = list(durations)
    t, version, started = 0.0, 0, 0
    running: dict[int, list[float]] = {}  # slot -> [end, start, version]; dict keeps start order
    buffer: list[tuple[int, float]] = []  # (version, duration) in finishing order
    durs: dict[int, float] = {}
    train_end: float | None = None
    sync_end: float | None = None
    pending = False
    res = OracleResult(time=0.0)
    while version < steps:
        while (
            sync_end is None
            and not (pending and not interrupt)
            and len(running) < n_slots
            and started < (version + 1 + max_staleness) * batch_size
        ):
            slot = min(s for s in range(n_slots) if s not in running)
            d = pool[started]
            running[slot] = [t + d, t, float(version)]
            durs[slot] = d
            started += 1
        if train_end is None and sync_end is None and not pending and len(buffer) >= batch_size:
            batch, buffer = buffer[:batch_size], buffer[batch_size:]
            res.trained += [(version, v, d) for v, d in batch]
            train_end = t + train_time
            res.train.append((t, train_end, version))
        candidates = [r[0] for r in running.values()]
        candidates += [x for x in (train_end, sync_end) if x is not None]
        t = min(candidates)
        if sync_end == t:
            sync_end, version = None, version + 1
        if train_end == t:
            train_end, pending = None, True
        for slot in [s for s, r in running.items() if r[0] == t]:
            end, start, v = running.pop(slot)
            buffer.append((int(v), durs.pop(slot)))
            res.gen.append((slot, start, end, int(v)))
        if pending and (interrupt or not running):
            pending, sync_end = False, t + sync_time
            res.sync.append((t, sync_end, version))
            for r in running.values():
                r[0] += sync_time
    res.time = t
    res.started = started
    res.buffered = len(buffer)
    res.running = len(running)
    return res
