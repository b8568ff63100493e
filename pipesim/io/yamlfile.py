"""YAML as pipesim's files read it: PyYAML's safe loader, stricter in three ways.

* Plain scalars are resolved as YAML 1.2's core schema reads them, not PyYAML's YAML 1.1: a
  number is a decimal integer (an optional sign, then digits) or a float (``1.5``, ``.5``,
  ``1e3``, ``-2.5E-3``, ``.inf``, ``-.Inf``, ``.nan``); a boolean is ``true`` or ``false`` (also
  ``True``/``TRUE``, ``False``/``FALSE``); ``null``, ``~`` or nothing is null. Everything else is
  a string: ``0b101``, ``0x1F``, ``0o17``, ``1_000``, ``1:30:00``, ``2024-01-01``, ``yes``,
  ``no``, ``on``, ``off``. YAML 1.1 read ``0b101`` as 5, ``1:30:00`` as 5400 (base 60),
  ``1_000`` as 1000, ``yes``/``on`` as true and a date as a date, where TOML and JSON refuse
  them; a string where a number or a boolean belongs is refused by the field's own check, naming
  it (``pipeline.train_time_s: expected a number, got '0b101'``), so the user writes it plainly.
* An integer with a leading zero that YAML 1.1 and 1.2 read differently (``016``, ``-010``,
  ``08``; not ``07``) is refused, naming its key (:class:`AmbiguousNumber`): YAML 1.1 reads
  ``016`` as octal 14 and YAML 1.2 as 16, and a file written for either must not be read as the
  other without a word (``n_gpus: 010`` ran on 8 GPUs).
  ``!!int`` and ``!!float`` given explicitly take the same forms only.
* A key given twice in one mapping is an error (PyYAML keeps the last one silently; TOML refuses
  it, so a YAML file must too: a second ``pipeline:`` table would otherwise replace the first).

Errors are :class:`yaml.YAMLError`, as the safe loader's are, so callers keep one ``except``; a
refusal of one value (:class:`NodeError`: a repeated key, an ambiguous number) has ``path``, the
key's dotted path in the document (``pipeline.batch_size``), which a file's refusal reports as its
field, and ``why``, the reason in one line.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pipesim.core.errors import shown

INT = re.compile(r"^[-+]?[0-9]+$")
"""YAML 1.2 core's integer (decimal only); one with a leading zero is refused when built."""
FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
"""YAML 1.2 core's float: a decimal fraction or exponent, infinity, not-a-number."""
BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
NULL = re.compile(r"^(?:~|null|Null|NULL|)$")


class NodeError(ConstructorError):
    """One value of the document refused: ``path`` its dotted path (``pipeline.batch_size``),
    ``why`` the reason in one line."""

    def __init__(self, path: str, why: str, *args: Any) -> None:
        super().__init__(*args)
        self.path = path
        self.why = why

    def said(self) -> str:
        """``path: why (line L, column C)``: the refusal in one line, for a file's error."""
        mark = self.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"{self.path}: {self.why}{where}" if self.path else f"{self.why}{where}"


class RepeatedKey(NodeError):
    """A key given twice in one mapping: ``path`` its dotted path (``pipeline.batch_size``)."""

    def __init__(self, path: str, *args: Any) -> None:
        super().__init__(path, "the key is given twice", *args)


class AmbiguousNumber(NodeError):
    """An integer written with a leading zero (``016``), which YAML 1.1 reads as octal."""


def _steps_to(root: Node | None, target: Node) -> list[str] | None:
    """The steps from ``root`` down to ``target`` (``.key`` through a mapping, to its value or to
    the key itself, ``[i]`` through a sequence); None when ``target`` is not below ``root``."""
    if root is target:
        return []
    children: list[tuple[str, Node]] = []
    if isinstance(root, MappingNode):
        for k, v in root.value:
            step = f".{k.value if isinstance(k, ScalarNode) else '?'}"
            children += [(step, v), (step, k)]
    elif isinstance(root, SequenceNode):
        children = [(f"[{i}]", v) for i, v in enumerate(root.value)]
    for step, child in children:
        below = _steps_to(child, target)
        if below is not None:
            return [step, *below]
    return None


def _leading_zero(text: str) -> str | None:
    """Why ``text``, an integer with a leading zero, is refused and what to write; None where
    YAML 1.1 and 1.2 read it alike (``07``, ``00``)."""
    digits = text.lstrip("+-")
    sign = "-" if text.startswith("-") else ""
    decimal = f"{sign}{int(digits)}"
    if all(c in "01234567" for c in digits):
        if int(digits, 8) == int(digits):
            return None
        old = f"octal {sign}{int(digits, 8)}"
    else:
        old = f"the text {shown(text)}"
    return (
        f"{text}: a leading zero is ambiguous (YAML 1.1 reads it as {old}, YAML 1.2 as {decimal}); "
        f"write {decimal}, or quote it for text"
    )


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` reading plain scalars as YAML 1.2's core schema does, and refusing a
    leading-zero integer and a key given twice (see the module docstring)."""

    yaml_implicit_resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}
    _root: Node | None = None

    def _refuse(self, node: Node, why: str, kind: type[NodeError] = NodeError) -> NodeError:
        path = "".join(_steps_to(self._root, node) or []).lstrip(".")
        return kind(path, why, None, None, why, node.start_mark)

    def construct_document(self, node: Node) -> Any:
        self._root = node  # where a refused value's path starts
        return super().construct_document(node)

    def construct_yaml_int(self, node: ScalarNode) -> int:  # type: ignore[override]
        text = str(self.construct_scalar(node))
        if not INT.match(text):
            raise self._refuse(node, f"{shown(text)} is not a decimal integer")
        if text.lstrip("+-").startswith("0") and (why := _leading_zero(text)) is not None:
            raise self._refuse(node, why, AmbiguousNumber)
        return int(text)

    def construct_yaml_float(self, node: ScalarNode) -> float:  # type: ignore[override]
        text = str(self.construct_scalar(node))
        if not FLOAT.match(text) and not INT.match(text):
            raise self._refuse(node, f"{shown(text)} is not a decimal number")
        lower = text.lower()
        if lower.endswith((".inf", ".nan")):
            return float(lower.replace(".", ""))
        return float(text)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<: *anchor``: its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the safe loader says so itself
                break
            if duplicate:
                name = "".join([*(_steps_to(self._root, node) or []), f".{key}"]).lstrip(".")
                raise RepeatedKey(
                    name,
                    "while reading a mapping",
                    node.start_mark,
                    f"the key {shown(key)} is given twice",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class SafeDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` quoting every string that either YAML 1.1 or :class:`StrictLoader`
    reads as something else: ``'yes'`` and ``'0b1'`` as before, and ``'09'`` and ``'1e3'``, which
    PyYAML writes plain (text to YAML 1.1) and StrictLoader reads as a number or refuses."""


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)
for _tag, _pattern, _first in (  # in this order: a scalar takes the first that matches
    ("tag:yaml.org,2002:bool", BOOL, "tTfF"),
    ("tag:yaml.org,2002:int", INT, "-+0123456789"),
    ("tag:yaml.org,2002:float", FLOAT, "-+.0123456789"),
    ("tag:yaml.org,2002:null", NULL, ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:merge", re.compile(r"^<<$"), "<"),
):
    StrictLoader.add_implicit_resolver(_tag, _pattern, list(_first))
    SafeDumper.add_implicit_resolver(_tag, _pattern, list(_first))  # after YAML 1.1's own


def load_yaml(text: str) -> Any:
    """The document in ``text`` (``yaml.YAMLError`` when it is not valid, repeats a key or holds a
    leading-zero integer)."""
    return yaml.load(text, Loader=StrictLoader)  # StrictLoader is a SafeLoader: no objects built


def dump_yaml(data: Any, **options: Any) -> str:
    """``data`` as YAML text that :func:`load_yaml` reads back the same (``yaml.safe_dump``'s
    ``options``)."""
    return str(yaml.dump(data, Dumper=SafeDumper, **options))
