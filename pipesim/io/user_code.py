"""User code named on the command line: a ``.py`` file, or a factory in a file or a module.

Design: a user's file or module is imported only because the user named it (``--policies
mine.py``, ``pipesim run mine.py:make``, ``pipesim run mypkg.scenarios:make``), never by scanning.
A ``.py`` file is imported under its own name when that name finds this very file, so that the
classes it defines pickle to sweep workers (a process pool re-imports them by module name);
otherwise (``my-policies.py``, or a name another module holds, such as ``random.py``) under a
private name that spells the file's path, ``_pipesim_user_<path in hex>``, which
:class:`UserFileFinder` -- on ``sys.meta_path`` in every process that imports
:mod:`pipesim.io.api`, the sweep workers' preload -- turns back into the file. Every failure is a
``ValueError`` (or the user's own exception from :func:`import_file`) whose message names the
spec, so the CLI reports it in one line.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from pipesim.config import Scenario
from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.policies.missing import PRIVATE_PREFIX as PRIVATE_PREFIX  # read by saved runs too


def private_name(path: Path) -> str:
    """The module name a user's file is imported under when its own name cannot be: the prefix
    and its resolved path's UTF-8 bytes in hex, so any process can find the file again."""
    return PRIVATE_PREFIX + str(path).encode().hex()


class UserFileFinder(importlib.abc.MetaPathFinder):
    """Finds the module :func:`private_name` names: a worker unpickling a class of a user's
    ``my-policies.py`` imports it by that name and gets the same file."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PRIVATE_PREFIX):
            return None
        try:
            file = Path(bytes.fromhex(fullname[len(PRIVATE_PREFIX) :]).decode())
        except ValueError:  # not hex, or not UTF-8: not one of ours
            return None
        return importlib.util.spec_from_file_location(fullname, file) if file.is_file() else None


def install_finder() -> None:
    """Put one :class:`UserFileFinder` on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, UserFileFinder) for f in sys.meta_path):
        sys.meta_path.append(UserFileFinder())


install_finder()


def import_file(path: Path) -> ModuleType:
    """Import a user's ``.py`` file. Under its own name (``mine`` for ``dir/mine.py``, its folder
    appended to ``sys.path``) when that name finds this very file, so that its classes pickle to
    sweep workers; otherwise under a private name."""
    path = path.resolve()
    stem = path.stem
    if stem.isidentifier():
        existing = sys.modules.get(stem)
        if existing is not None:
            if Path(getattr(existing, "__file__", None) or "").resolve() == path:
                return existing
        else:
            folder = str(path.parent)
            if folder not in sys.path:
                sys.path.append(folder)
            found = importlib.util.find_spec(stem)
            if found is not None and found.origin and Path(found.origin).resolve() == path:
                return importlib.import_module(stem)
    mod_name = private_name(path)
    if mod_name in sys.modules:  # imported already (a sweep worker that unpickled a class of it)
        return sys.modules[mod_name]
    spec_obj = importlib.util.spec_from_file_location(mod_name, path)
    if spec_obj is None or spec_obj.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec_obj)
    sys.modules[mod_name] = mod  # dataclasses look their module up by name
    try:
        spec_obj.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    return mod


def user_file_problem(path: str | Path) -> str | None:
    """What keeps the user's ``.py`` at ``path`` (as given) from being imported, as the readers of
    :mod:`pipesim.core.readfile` say it (``no such file 'x.py'``, ``'fifo.py' is a FIFO (a named
    pipe), not a file``, ``'d.py' is a directory``), or None for a regular file. Checked without
    opening it: a directory, a FIFO or a device link was called "no such file", and Python's import
    of a FIFO waits for a writer. ``pipesim run x.py:make`` and ``--policies x.py`` ask it."""
    from pipesim.core.readfile import check_file

    try:
        check_file(path)
    except FileNotFoundError:
        return f"no such file {shown(str(path))}"
    except OSError as exc:
        return f"{shown(str(path))} {exc.strerror or exc}"
    return None


def is_module_path(where: str) -> bool:
    """Whether ``where`` (of ``where:factory``) can name a factory: a ``.py`` path or a dotted module name."""
    return where.endswith(".py") or all(part.isidentifier() for part in where.split("."))


def import_factory(where: str, attr: str, spec: str) -> Callable[..., Scenario]:
    """The factory (or a Scenario, wrapped in one) ``attr`` of the file or module ``where``.

    ``where`` must satisfy :func:`is_module_path`; ValueError (naming ``spec``) for anything that
    cannot be imported or is neither a Scenario nor callable.
    """
    if where.endswith(".py"):
        path = Path(where)
        if (problem := user_file_problem(where)) is not None:
            raise FieldError(f"{spec}: {problem}", spec)
        try:
            mod = import_file(path)
        except Exception as exc:  # noqa: BLE001 - the user's file: report, do not crash
            raise FieldError(f"{spec}: importing {where} failed: {type(exc).__name__}: {exc}", spec) from None
    else:
        try:
            mod = importlib.import_module(where)
        except Exception as exc:  # noqa: BLE001 - ImportError or an error inside the user's module
            raise FieldError(
                f"{spec}: cannot import module {shown(where)}: {type(exc).__name__}: {exc}", spec
            ) from None
    if not hasattr(mod, attr):
        names = [n for n, _ in inspect.getmembers(mod, callable) if not n.startswith("_")]
        close = difflib.get_close_matches(attr, names, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise FieldError(f"{spec}: {where} has no {shown(attr)}{hint}", spec)
    obj = getattr(mod, attr)
    if isinstance(obj, Scenario):
        return const_factory(obj)
    if not callable(obj):
        raise FieldError(f"{spec}: {attr} is neither a Scenario nor a function returning one", spec)
    fn: Callable[..., Scenario] = obj
    return fn


def const_factory(value: Scenario) -> Callable[..., Scenario]:
    """A factory that returns ``value``."""
    return lambda: value
