"""The command-line options that several commands share, defined once: ``pipesim`` and ``pipesim plan``.

Design: an option that two commands take (a scenario and its ``--set`` / ``--policies`` / ``--seed``,
a sweep axis ``--over``, ``--workers`` and ``--dask`` for parallel runs, ``--quiet``, the ``--json``
and ``--html`` outputs) has one spec in :data:`OPTIONS`: its flags, type, default, metavar and a
help text that ends in an example (the CLI's tests hold every help to that). A command adds it
with :func:`add_option` (keywords override the spec: a command's own help or default) or
:func:`add_options` (several, as specified). :mod:`pipesim.io.cli_parser` builds ``pipesim``'s
subcommands this way and :mod:`pipesim.plan` its own parser, so the two cannot drift apart.

``--set`` refuses a key given twice, as ``--over`` does (:class:`SetPairs`, :func:`repeated_key`):
the last value used to win without a word (``--set run.steps=10 --set run.steps=20`` ran 20). A
key that replaces a table an earlier key changed inside (``durations.median_s=60`` then
``durations=...``) is refused too; a table first and then one of its fields edits the table set.
``pipesim plan``, whose parser is its own, has the same check where it reads the spec
(:func:`pipesim.plan.specfile.check_sets`). ``--seed`` beside ``--set seed=`` (or ``run.seed=``)
gives one key twice as well, and is refused the same way (:func:`seed_given_twice`). The readers
of pairs (``apply_overrides``, ``runspec.load``) keep the last value: ``pipesim trace RUN.json
--set`` lays the user's pairs over the recipe's, and there the last is meant to win.

:class:`Parser` is every ``pipesim`` command's parser (``pipesim plan`` has its own): a one-line
usage on errors, no prefix matching, and the seed refused where both ``--seed`` and ``--set`` give it.

``--dask`` means the same in both: ``local`` starts a LocalCluster of one-thread worker
processes, anything else is a scheduler address; :func:`open_dask` connects (or raises
:class:`DaskError` with the one line to print) and :func:`close_dask` shuts both down.

This module imports only argparse, :mod:`pipesim.io.cli_common` and :mod:`pipesim.core.validate`
(``distributed`` when ``--dask`` is used), so ``pipesim --help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from pipesim.core.validate import key_shown
from pipesim.io.cli_common import one_line

__all__ = [
    "OPTIONS",
    "POLICIES_HELP",
    "SCENARIO_HELP",
    "SET_HELP",
    "DaskError",
    "Parser",
    "SetPairs",
    "add_option",
    "add_options",
    "close_dask",
    "examples",
    "open_dask",
    "policies_help",
    "repeated_key",
    "repeated_problem",
    "seed_given_twice",
]

WORKERS_PER_CPU = 4
"""The most ``--workers`` processes per CPU: each is a process with its own copy of pipesim, and a
simulation is CPU-bound, so more only add memory (1,000 on 2 CPUs started one process per task)."""


def max_workers() -> int:
    """The most worker processes a pool of pipesim's own takes on this machine."""
    import os

    return WORKERS_PER_CPU * (os.cpu_count() or 1)


def workers_problem(n: int | None) -> str | None:
    """What is wrong with a ``--workers`` count (None: not given, or nothing wrong): below 1, or
    above :data:`WORKERS_PER_CPU` per CPU of this machine."""
    import os

    if n is None:
        return None
    if n < 1:
        return f"--workers must be at least 1, got {n}"
    most = max_workers()
    if n > most:
        return (
            f"--workers {n:,}: at most {most} on this machine ({os.cpu_count() or 1} CPUs, "
            f"{WORKERS_PER_CPU} processes each: the runs are CPU-bound, and each worker is a process)"
        )
    return None


SCENARIO_HELP = (
    "a registered name (pipesim list), a scenario file (.toml, .yaml, .yml), package.module:factory "
    "or path/to/file.py:factory; e.g. systems:areal, my.toml, ./mine.py:make"
)
SET_HELP = (
    "override a field, a policy (with arguments) or a factory parameter; repeatable, each key once; e.g. "
    "--set n_slots=8, --set 'weight_update=InFlightUpdate(load_time_s=2)', "
    "--set 'replicas=Replicas(2, LeastLoaded())', --set timeout=none, --set max_head_offpolicyness=4"
)
POLICIES_USE = {
    "over": "to name them in --set and --over",
    "set": "to name them in --set and in a scenario file",
    "list": "for --keys to list them and SCENARIO to name them",
    "report": "that the saved run's scenario names",
}
"""What ``--policies`` is for, by command (:func:`policies_help`): ``over`` where the command has
``--over`` (sweep); its help named ``--over`` on run, trace and export, and ``--set`` and ``--over``
on list and report, which have neither."""


def policies_help(use: str) -> str:
    """``--policies``'s help where its classes are used as :data:`POLICIES_USE` ``[use]`` says."""
    return (
        f"a module of your own policy classes, by dotted name or .py path, {POLICIES_USE[use]} "
        "(repeatable); e.g. --policies headroom.py"
    )


POLICIES_HELP = policies_help("over")
"""``--policies``'s default help: the option table's, which sweep takes as it is."""


SEED_KEYS = ("seed", "run.seed")
"""The ``--set`` keys that give what ``--seed`` gives: a scenario's seed and a run spec's."""


def seed_given_twice(sets: Sequence[str], seed: int | None) -> str | None:
    """The refusal of ``--seed`` beside a ``--set`` of the seed (:data:`SEED_KEYS`), naming the
    key; None where at most one of them gives it. Before, ``--seed`` won without a word: ``pipesim
    run async-eta2 --set seed=4 --seed 3`` ran seed 3 under the header ``(seed 3) with seed=4``."""
    if seed is None:
        return None
    for pair in sets:
        key, eq, value = pair.partition("=")
        if eq and key.strip() in SEED_KEYS:
            key = key.strip()
            return (
                f"{key} is given twice, by --set {key}={value.strip()[:40]} and by --seed {seed}; give "
                "the seed once (--seed would replace the --set without a word)"
            )
    return None


OVER_HELP = (
    "an axis of the grid; repeatable; e.g. --over max_staleness=0,1,2 or "
    "--over 'weight_update=Drain(),InFlightUpdate(load_time_s=2)'"
)


def repeated_key(pairs: Sequence[str], start: int = 0) -> tuple[str, str] | None:
    """The first key of the ``KEY=VALUE`` ``pairs`` that would silently undo an earlier one, and
    that earlier key; None where none does. It undoes one when it is the same key again, or a table
    that an earlier key changed a field of (``durations`` after ``durations.median_s``,
    ``workload.response`` after ``workload.response.sigma``). A table first and then one of its
    fields edits the table set, and is no repeat. A pair without ``=`` is left to the reader."""
    seen: list[str] = []
    for i, pair in enumerate(pairs):
        key, eq, _ = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            continue
        if i >= start:  # the pairs before start were checked already (one --set at a time)
            for earlier in seen:
                if earlier == key or earlier.startswith(key + "."):
                    return key, earlier
        seen.append(key)
    return None


def repeated_problem(key: str, earlier: str) -> str:
    """What :func:`repeated_key`'s finding means, naming the key first (``steps is given twice...``)."""
    name = key_shown(key)
    if key == earlier:
        return f"{name} is given twice; give each key once (the last would replace the first without a word)"
    before = key_shown(earlier)
    return (
        f"{name} after {before}: it replaces all of {name}, and {before} would be lost without a word; "
        f"give {name} first, then {before}"
    )


class SetPairs(argparse.Action):
    """``--set KEY=VALUE``, appended as argparse's ``append`` does; a key given twice (or a table
    after one of its fields, :func:`repeated_key`) is a usage error naming the key."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        pairs = [*(getattr(namespace, self.dest, None) or []), values]
        found = repeated_key(pairs, start=len(pairs) - 1)  # the new pair against the earlier: O(n)
        if found is not None:
            raise argparse.ArgumentError(self, repeated_problem(*found))
        setattr(namespace, self.dest, pairs)


class Parser(argparse.ArgumentParser):
    """argparse with a one-line usage on errors (the full usage is in ``--help``), and without
    prefix matching: ``--seed 3`` of ``sweep`` (which has only ``--seeds``) is an error, not 3 seeds.
    A command given its seed twice, by ``--seed`` and by ``--set seed=`` (a run spec's
    ``run.seed=``), is refused as a ``--set`` key given twice is
    (:func:`~pipesim.io.cli_options.seed_given_twice`), whichever comes first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # the subcommands' parsers are of this class too
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extra = super().parse_known_args(args, namespace)
        problem = seed_given_twice(getattr(parsed, "set", None) or (), getattr(parsed, "seed", None))
        if problem is not None:  # the pair is known only once both are parsed, in either order
            self.error(problem)
        return parsed, extra

    def error(self, message: str) -> NoReturn:
        usage = " ".join(self.format_usage().split())
        self.exit(2, f"{usage}\n{self.prog}: error: {message}\n")


OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "scenario": (("scenario",), {"help": SCENARIO_HELP}),
    "set": (("--set",), {"action": SetPairs, "default": [], "metavar": "KEY=VALUE", "help": SET_HELP}),
    "policies": (
        ("--policies",),
        {"action": "append", "default": [], "metavar": "MODULE", "help": POLICIES_HELP},
    ),
    "seed": (("--seed",), {"type": int, "metavar": "N", "help": "the seed, in [0, 2**64); e.g. --seed 3"}),
    "over": (("--over",), {"action": "append", "default": [], "metavar": "KEY=V1,V2,...", "help": OVER_HELP}),
    "workers": (
        ("--workers",),
        {"type": int, "metavar": "N", "help": "local process pool size (>= 1); e.g. --workers 2"},
    ),
    "dask": (
        ("--dask",),
        {
            "metavar": "local|tcp://HOST:PORT",
            "help": "run on a Dask cluster; e.g. --dask local or --dask tcp://10.0.0.5:8786",
        },
    ),
    "quiet": (("--quiet",), {"action": "store_true", "help": "no progress bar; e.g. --quiet"}),
    "json": (("--json",), {"metavar": "PATH", "help": "write the results as JSON; e.g. --json out.json"}),
    "html": (("--html",), {"metavar": "PATH", "help": "write an HTML page; e.g. --html out.html"}),
}
"""Each shared option by name: its flags and its ``add_argument`` keywords."""


def add_option(parser: Any, name: str, **overrides: Any) -> argparse.Action:
    """Add the shared option ``name`` (a key of :data:`OPTIONS`) to ``parser`` (a parser or an
    argument group); ``overrides`` replace keywords of its spec (``help=``, ``default=``; a value
    of None for ``metavar`` restores argparse's own)."""
    flags, spec = OPTIONS[name]
    kwargs = {**spec, **overrides}
    kwargs = {k: v for k, v in kwargs.items() if not (k == "metavar" and v is None)}
    action: argparse.Action = parser.add_argument(*flags, **kwargs)
    return action


def add_options(parser: Any, *names: str) -> None:
    """Add the shared options ``names`` as specified, in that order."""
    for name in names:
        add_option(parser, name)


def examples(*lines: str) -> str:
    """The ``examples:`` epilog of a command's ``--help``."""
    return "examples:\n" + "\n".join(f"  {ln}" for ln in lines)


class DaskError(Exception):
    """``--dask`` cannot be used: the message is the one line to print (it names ``--dask``)."""


DASK_CONNECT_TIMEOUT_S = 10.0
"""Seconds ``--dask ADDRESS`` has to connect and complete Dask's handshake, all of it together."""

DASK_SCHEDULER_PORT, DASK_DASHBOARD_PORT = 8786, 8787
_GRACE_S = 1.0


def open_dask(address: str, n_workers: int, timeout_s: float | None = None) -> tuple[Any, Any]:
    """A Dask ``Client`` for ``--dask ADDRESS`` and the LocalCluster it started (None for an address).

    ``local`` starts ``n_workers`` worker processes of one thread each; anything else is a
    scheduler address, given ``timeout_s`` (:data:`DASK_CONNECT_TIMEOUT_S`) to connect and answer,
    on a wall clock: Dask's own timeout covers only the connection, and a peer that accepts it and
    never speaks (a firewall, a stuck process) held the command forever. A peer that answers in
    another protocol (the dashboard's HTTP, on 8787) made Dask read its bytes as a frame length
    and fail to allocate exabytes (a MemoryError); it is named as not a scheduler. :class:`DaskError`
    (one line naming ``--dask``) when ``distributed`` is missing or the cluster cannot be used.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise DaskError("--dask needs dask[distributed]: pip install 'pipesim[dask]'") from None
    if address == "local":
        try:
            cluster = LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
            return Client(cluster), cluster
        except (OSError, TimeoutError, ValueError) as exc:
            raise DaskError(f"--dask: cannot start a local Dask cluster: {one_line(exc)}") from None
    limit = DASK_CONNECT_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        return _connect_within(Client, address, limit), None
    except DaskError:
        raise
    except (OSError, TimeoutError) as exc:  # refused, unreachable: Dask retries until its timeout
        raise DaskError(
            f"--dask: cannot connect to the Dask scheduler at {address} within {limit:g} s: {one_line(exc)}"
        ) from None
    except ValueError as exc:  # not an address Dask reads (an unknown scheme)
        raise DaskError(f"--dask: cannot connect to {address}: {one_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - MemoryError included: another protocol's bytes as a frame
        raise DaskError(_not_a_scheduler(address, exc, limit)) from None


def _connect_within(client_type: Any, address: str, limit: float) -> Any:
    """``client_type(address)`` made in a daemon thread and waited for ``limit`` seconds (and
    :data:`_GRACE_S`, so that Dask's own timeout answers first where it holds); its exception is
    raised here. Past the limit the thread is left behind (a daemon: it does not
    hold the process at exit), and a client it makes later is closed there."""
    import threading

    box: dict[str, Any] = {}
    lock = threading.Lock()

    def connect() -> None:
        try:
            client = client_type(address, timeout=f"{limit}s")
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc
            return
        with lock:
            if "late" not in box:
                box["client"] = client
                return
        client.close()  # the caller gave up on it

    thread = threading.Thread(target=connect, name="pipesim --dask connect", daemon=True)
    thread.start()
    thread.join(limit + _GRACE_S)  # Dask's own timeout first, where it holds (a refused connection)
    with lock:
        if "client" in box:
            return box["client"]
        if "error" in box:  # asyncio's CancelledError is no Exception: the caller catches those
            err = box["error"]
            raise err if isinstance(err, Exception) else RuntimeError(f"{type(err).__name__}: {err}")
        box["late"] = True
    raise DaskError(
        f"--dask: cannot connect to the Dask scheduler at {address} within {limit:g} s: it accepted the "
        f"connection but did not complete Dask's handshake (is a Dask scheduler listening there? its "
        f"port is usually {DASK_SCHEDULER_PORT})"
    )


def _not_a_scheduler(address: str, exc: BaseException, limit: float) -> str:
    """The line for a peer at ``address`` that answered, but not in Dask's protocol."""
    reply = _first_reply(address, min(limit, 2.0))
    hint = f"a scheduler is usually port {DASK_SCHEDULER_PORT}"
    if reply.startswith("HTTP/"):
        said = f"it answered {reply!r}, a web server's reply"
        hint = f"the dashboard is usually port {DASK_DASHBOARD_PORT}, the scheduler {DASK_SCHEDULER_PORT}"
    elif reply:
        said = f"it answered {reply!r}"
    else:
        said = f"its reply is not Dask's protocol: {type(exc).__name__}: {one_line(exc)}"
    return f"--dask {address}: not a Dask scheduler ({said}; {hint})"


def _first_reply(address: str, limit: float) -> str:
    """The first line (80 characters at most) that a TCP peer at ``address`` answers to a plain
    HTTP request within ``limit`` seconds, or "" (not TCP, no answer, nothing printable)."""
    import socket

    try:
        from distributed.comm.addressing import parse_address, parse_host_port

        scheme, loc = parse_address(address)
        if scheme != "tcp":
            return ""
        host, port = parse_host_port(loc)
        with socket.create_connection((host, port), timeout=limit) as sock:
            sock.sendall(b"GET / HTTP/1.0\r\nHost: pipesim\r\n\r\n")
            data = sock.recv(200)
    except Exception:  # noqa: BLE001 - only to describe a failure already found
        return ""
    first = data.split(b"\n", 1)[0].decode("ascii", "replace").strip()
    return first[:80] if first.isprintable() else ""


def close_dask(client: Any, cluster: Any) -> None:
    """Close what :func:`open_dask` opened (either may be None)."""
    if client is not None:
        client.close()
    if cluster is not None:
        cluster.close()
