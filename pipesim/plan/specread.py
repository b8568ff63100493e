"""A spec file (a plan spec or a run spec) read into tables, before any key is looked at.

A file is read as UTF-8 (a byte-order mark is skipped), a regular file of at most
:data:`~pipesim.core.readfile.SPEC_MAX_BYTES` (:mod:`pipesim.core.readfile`); its suffix says TOML or
YAML, any other is an error (a ``.json`` is told to be named ``.yaml``, which reads JSON); YAML's
numbers are YAML 1.2's (:mod:`pipesim.io.yamlfile`: ``0b101`` is text, ``010`` is refused); a
YAML key given twice is an error, as in TOML; YAML's ``null`` is a key not given; arrays or tables
nested more than :data:`~pipesim.core.validate.MAX_NESTING` levels are refused (the parser's own
RecursionError included). Every refusal is a :class:`~pipesim.plan.checks.PlanError` naming the file.
:mod:`pipesim.plan.specfile` reads a plan spec's tables from here, and so do the run specs.
:func:`gpu_table` reads ``[cluster] gpu`` given as a table of a GPU's datasheet figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipesim.core.errors import shown
from pipesim.core.readfile import SPEC_MAX_BYTES, read_bytes
from pipesim.core.validate import MAX_NESTING, nested_too_deep
from pipesim.plan.checks import PlanError, Table

SUFFIXES = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}
NEEDS = "a plan spec needs [cluster] gpu and n_gpus, and [model] name"

_TOO_DEEP = object()
"""What :func:`read` holds when the parser itself recursed too deep."""


def read(path: str | Path) -> dict[str, Any]:
    """The tables of a spec file; PlanError (naming the file) when it cannot be read or parsed."""
    p = Path(path)
    fmt = SUFFIXES.get(p.suffix.lower())
    if fmt is None:
        hint = " (JSON is YAML: name the file .yaml)" if p.suffix.lower() == ".json" else ""
        raise PlanError(f"{path}: a plan spec is TOML (.toml) or YAML (.yaml, .yml){hint}", "", str(path))
    try:
        raw = read_bytes(p, "spec files", SPEC_MAX_BYTES)  # a FIFO, /dev/zero, a huge file: refused
    except OSError as e:
        raise PlanError(f"{path}: cannot read: {e.strerror or e}", "", str(path)) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PlanError(f"{path}: not UTF-8 text", "", str(path)) from None
    data: Any
    if fmt == "yaml":
        import yaml

        from pipesim.io.yamlfile import NodeError, RepeatedKey, load_yaml

        try:
            data = load_yaml(text)  # YAML 1.2's numbers; a key given twice, ``n_gpus: 010`` refused
        except NodeError as e:
            if isinstance(e, RepeatedKey):
                raise PlanError(f"{path}: not valid YAML: {_yaml_problem(e)}", e.path, str(path)) from None
            raise PlanError(f"{path}: {e.said()}", e.path, str(path)) from None
        except yaml.YAMLError as e:
            raise PlanError(f"{path}: not valid YAML: {_yaml_problem(e)}", "", str(path)) from None
        except RecursionError:
            data = _TOO_DEEP
        except ValueError as e:  # an integer past Python's digit limit, which the parser converts
            raise PlanError(f"{path}: not valid YAML: {too_long_int(e)}", "", str(path)) from None
        if data is None:
            raise PlanError(f"{path}: the file is empty; {NEEDS}", "", str(path))
    else:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            from pipesim.io.scenario_text import repeated_toml_key

            if (twice := repeated_toml_key(text, str(e))) is not None:  # tomllib names only a line
                key, line, column = twice
                said = f"{key}: the key is given twice (line {line}, column {column})"
                raise PlanError(f"{path}: {said}", key, str(path)) from None
            raise PlanError(f"{path}: not valid TOML: {e}", "", str(path)) from None
        except RecursionError:
            data = _TOO_DEEP
        except ValueError as e:  # an integer past Python's digit limit, which the parser converts
            raise PlanError(f"{path}: not valid TOML: {too_long_int(e)}", "", str(path)) from None
    if data is _TOO_DEEP or nested_too_deep(data):
        raise PlanError(f"{path}: arrays or tables nest more than {MAX_NESTING} levels deep", "", str(path))
    if not isinstance(data, dict):
        msg = f"{path}: a plan spec is a table of tables, got {type(data).__name__} {shown(data)}"
        raise PlanError(msg, "", str(path))
    return data


def too_long_int(e: ValueError) -> str:
    """What a parser's ValueError means, in the spec's words rather than Python's: the one a valid
    TOML or YAML text raises is an integer longer than ``sys.get_int_max_str_digits()`` digits
    (Python refuses to convert it; no spec value comes near it)."""
    import sys

    if "digits" in str(e):
        limit = sys.get_int_max_str_digits()
        return f"an integer has more than {limit:,} digits (no spec value comes near it)"
    return " ".join(str(e).split())[:200]


def _yaml_problem(e: Any) -> str:
    """A YAML error as ``problem (line L, column C)``."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None)
    if problem is None:
        return " ".join(str(e).split())
    return f"{problem}" + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else "")


def gpu_table(cl: Table) -> Any:
    """``[cluster] gpu`` given as an inline table of :class:`~pipesim.compute.GPUSpec`'s fields (a
    GPU the catalog does not hold, by its datasheet figures in the fields' SI units), as a
    GPUSpec; None where ``gpu`` is not a table (a catalog name, read by the caller). Every field
    is required, a key the GPUSpec lacks is refused, each named ``cluster.gpu.KEY``."""
    from dataclasses import fields

    from pipesim.compute import GPUSpec

    raw = cl.raw("gpu")
    if not isinstance(raw, dict):
        return None
    keys = [f.name for f in fields(GPUSpec)]
    t = cl.table("gpu", keys, "a table")
    t.require(*keys, why="a GPU outside the catalog gives every GPUSpec field (docs/runspec.md)")
    kw: dict[str, Any] = {"name": t.string("name")}
    for k in (k for k in keys if k != "name"):  # the figures, each a number above 0
        v = t.number(k, above=0)
        kw[k] = int(v) if k == "hbm_bytes" and float(v).is_integer() else v
    if not kw["name"]:
        raise PlanError("cluster.gpu.name must be a non-empty string, got ''", "cluster.gpu.name")
    return GPUSpec(**kw)
