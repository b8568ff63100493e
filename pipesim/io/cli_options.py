"""The command-line options that several commands share, defined once: ``pipesim`` and ``pipesim plan``.

Design: an option that two commands take (a scenario and its ``--set`` / ``--policies`` / ``--seed``,
a sweep axis ``--over``, ``--workers`` and ``--dask`` for parallel runs, ``--quiet``, the ``--json``
and ``--html`` outputs) has one spec in :data:`OPTIONS`: its flags, type, default, metavar and a
help text that ends in an example (the CLI's tests hold every help to that). A command adds it
with :func:`add_option` (keywords override the spec: a command's own help or default) or
:func:`add_options` (several, as specified). :mod:`pipesim.io.cli_parser` builds ``pipesim``'s
subcommands this way and :mod:`pipesim.plan` its own parser, so the two cannot drift apart.

``--dask`` means the same in both: ``local`` starts a LocalCluster of one-thread worker
processes, anything else is a scheduler address; :func:`open_dask` connects (or raises
:class:`DaskError` with the one line to print) and :func:`close_dask` shuts both down.

This module imports only argparse and :mod:`pipesim.io.cli_common` (``distributed`` when ``--dask`` is
used), so ``pipesim --help`` stays fast.
"""

from __future__ import annotations

import argparse
from typing import Any

from pipesim.io.cli_common import one_line

__all__ = [
    "OPTIONS",
    "POLICIES_HELP",
    "SCENARIO_HELP",
    "SET_HELP",
    "DaskError",
    "add_option",
    "add_options",
    "close_dask",
    "examples",
    "open_dask",
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
    "override a field, a policy (with arguments) or a factory parameter; repeatable; e.g. "
    "--set n_slots=8, --set 'weight_update=InFlightUpdate(load_time_s=2)', "
    "--set 'replicas=Replicas(2, LeastLoaded())', --set timeout=none, --set max_head_offpolicyness=4"
)
POLICIES_HELP = (
    "a module of your own policy classes, by dotted name or .py path, to name them in --set and "
    "--over (repeatable); e.g. --policies headroom.py"
)
OVER_HELP = (
    "an axis of the grid; repeatable; e.g. --over max_staleness=0,1,2 or "
    "--over 'replicas=Replicas(2, LeastLoaded()),Replicas(4, LeastLoaded())'"
)

OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "scenario": (("scenario",), {"help": SCENARIO_HELP}),
    "set": (("--set",), {"action": "append", "default": [], "metavar": "KEY=VALUE", "help": SET_HELP}),
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


def open_dask(address: str, n_workers: int) -> tuple[Any, Any]:
    """A Dask ``Client`` for ``--dask ADDRESS`` and the LocalCluster it started (None for an address).

    ``local`` starts ``n_workers`` worker processes of one thread each; anything else is a
    scheduler address, given 10 s to answer. :class:`DaskError` when ``distributed`` is missing or
    the cluster cannot be reached.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise DaskError("--dask needs dask[distributed]: pip install 'pipesim[dask]'") from None
    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
            client = Client(cluster)
        else:
            client = Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise DaskError(f"--dask: cannot connect to {address}: {one_line(exc)}") from None
    return client, cluster


def close_dask(client: Any, cluster: Any) -> None:
    """Close what :func:`open_dask` opened (either may be None)."""
    if client is not None:
        client.close()
    if cluster is not None:
        cluster.close()
