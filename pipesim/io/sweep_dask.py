"""A quiet interrupt for ``pipesim sweep --dask``: the one line the process pool prints, not ~70.

Design: a Ctrl-C reaches the whole process group, the workers of ``--dask local`` included. Each
died in its asyncio runner with a KeyboardInterrupt traceback ("Process Dask Worker process (from
Nanny): ..."), and the cluster, closed with cells still running, logged a warning per cancelled
cell and lost worker, under the sweep's own "interrupted" line (the partial CSV was right). The
process pool's workers ignore Ctrl-C (the parent, which keeps the finished cells, stops them);
Dask's are made to as well, in two ways, since either alone leaves a gap:

* :func:`workers_ignore_interrupts` blocks SIGINT in the calling thread while the cluster starts:
  Dask's event-loop thread starts then and inherits the mask, and so does every worker process it
  spawns (a mask survives fork and exec), now and on a restart; a Ctrl-C in those seconds waits
  and stops the command once they are over. Its config names this module as a worker preload, so
  each worker also ignores SIGINT itself (:func:`dask_setup`; a worker of a cluster started
  elsewhere is the user's, and is left alone).
* :func:`quiet_dask_shutdown` closes the client and cluster with Dask's logging held back in this
  process (the scheduler and the nannies of a local cluster live here), and each worker's own
  logging stops while it is closing (the filter :func:`dask_setup` adds): Dask logs a cancelled
  cell as a warning there ("should exclusively happen in Worker.close()").
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["dask_setup", "quiet_dask_shutdown", "workers_ignore_interrupts"]

PRELOAD = "pipesim.io.sweep_dask"
"""This module, as Dask's ``distributed.worker.preload`` names it."""


@contextlib.contextmanager
def workers_ignore_interrupts() -> Iterator[None]:
    """SIGINT blocked in this thread for the block (a local cluster starting), with this module
    as a worker preload (:func:`dask_setup`); a SIGINT that came meanwhile is delivered after."""
    try:  # distributed's defaults loaded first: dask.config.set removes on exit a section it lacked
        import dask
        import distributed  # noqa: F401
    except ImportError:  # open_dask says what is missing
        yield
        return
    preload = [*(dask.config.get("distributed.worker.preload", None) or []), PRELOAD]
    main = threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask")
    if main:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with dask.config.set({"distributed.worker.preload": preload}):
            yield
    finally:
        if main:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


_CLOSING = ("closing", "closed", "closing_gracefully", "failed")


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run in each worker process of ``--dask local`` as it starts: ignore
    Ctrl-C (the sweep's process stops the cells) and drop the worker's log records once it is
    closing (cancelled cells' warnings)."""
    with contextlib.suppress(ValueError):  # not the main thread: the mask inherited holds it
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    def open_(record: logging.LogRecord) -> bool:
        return getattr(getattr(worker, "status", None), "name", "") not in _CLOSING

    for handler in logging.getLogger("distributed").handlers:
        handler.addFilter(open_)


@contextlib.contextmanager
def quiet_dask_shutdown(client: Any) -> Iterator[None]:
    """Dask's logging in this process silenced while the block (closing the client and cluster)
    runs; nothing is done without a client."""
    if client is None:
        yield
        return
    log = logging.getLogger("distributed")
    level = log.level
    log.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        log.setLevel(level)
