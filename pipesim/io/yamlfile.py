"""YAML as pipesim's files read it: PyYAML's safe loader, stricter in four ways.

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
  it, so a YAML file must too: a second ``pipeline:`` table would otherwise replace the first),
  ``<<`` included.
* A merge key (``<<: *base``, ``<<: [*a, *b]``, a YAML 1.1 type kept for anchors' sake) merges as
  its spec says: the mapping's own keys win, then the mappings in the order listed. PyYAML 6.0.4
  let the last one listed win (yaml/pyyaml#953: ``<<: [{steps: 2}, {steps: 4}]`` read 4).

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

from pipesim.core.errors import MAX_DURATION_POOL, shown

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


MAX_VALUES = MAX_DURATION_POOL + (1 << 16)
"""The most scalars (keys and values) a YAML file may hold: a trace's 4,194,304 durations
(:data:`~pipesim.core.errors.MAX_DURATION_POOL`, the most a run draws) and 65,536 more for every
other key. Each one costs a node and marks before it is a value (about 450 bytes), so the count
refuses a file as it is read, not once it is built: a 16 MB file of 8M values is refused after
17 s at 1.4 GB of peak RSS (a 14 MB file of 1.8M values loads in 12.5 s at 965 MB)."""


class TooManyValues(NodeError):
    """A file holding more than :data:`MAX_VALUES` scalars: ``path`` the array that holds the most."""

    def __init__(self, path: str, mark: Any) -> None:
        why = (
            f"the file holds more than {MAX_VALUES:,} values; an array holds at most "
            f"{MAX_DURATION_POOL:,} (the most durations a run draws)"
        )
        super().__init__(path, why, None, None, why, None)
        self.problem_mark = None if mark is None or path else mark


def _key_at(text: Any, count: int) -> str:
    """The dotted key of the array holding the ``count``-th scalar of ``text`` (``durations.values``):
    the document read again as events, without building it; "" where it cannot be told."""
    from yaml.events import (
        CollectionEndEvent,
        MappingStartEvent,
        ScalarEvent,
        SequenceStartEvent,
    )

    stack: list[list[Any]] = []  # [is_mapping, key, expecting_key]
    seen = 0
    try:
        for event in yaml.parse(text, Loader=_Base):
            top = stack[-1] if stack else None
            if isinstance(event, ScalarEvent):
                seen += 1
                if seen >= count:
                    return ".".join(str(f[1]) for f in stack if f[0] is not None and f[1] is not None)
                if top is not None and top[0] and top[2]:
                    top[1], top[2] = event.value, False
                    continue
            if isinstance(event, MappingStartEvent | SequenceStartEvent):
                stack.append([isinstance(event, MappingStartEvent), None, True])
                continue
            if isinstance(event, CollectionEndEvent):
                stack.pop()
                top = stack[-1] if stack else None
            if top is not None and top[0]:
                top[2] = True  # a value was read: the next scalar is a key
    except (yaml.YAMLError, IndexError):
        return ""
    return ""


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


_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it (``yaml.__with_libyaml__``), else the
pure-Python one. Only the scanner, parser and composer are in C; the constructor and the resolver
(the overrides below) stay Python, so both read a file alike. The C one is the one that matters
for a long trace: a 2 MB flow list of 250,000 durations took 7.4 s and 304 MB of peak RSS with the
Python parser, 2.0 s and 227 MB with libyaml
(``/usr/bin/time -v``; 110 MB of it is pipesim's own imports)."""


class StrictLoader(_Base):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's where installed) reading plain scalars as YAML 1.2's core
    schema does, and refusing a leading-zero integer and a key given twice (see the module
    docstring)."""

    yaml_implicit_resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}
    _root: Node | None = None
    _values = 0
    _text: Any = ""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._text = stream  # to name the key where a file holds too many values
        self._flat: dict[int, Any] = {}  # a mapping node's pairs with its ``<<`` merged in

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode:  # counted as each node is made: a bound before millions are built
            self._values += 1
            if self._values > MAX_VALUES:
                mark = self.get_mark() if hasattr(self, "get_mark") else None
                raise TooManyValues(_key_at(self._text, self._values), mark)
        return super().resolve(kind, value, implicit)

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
        self._check_repeats(node)
        flat = MappingNode(node.tag, self._flattened(node), node.start_mark, node.end_mark)
        return dict(yaml.constructor.BaseConstructor.construct_mapping(self, flat, deep=deep))

    def _check_repeats(self, node: MappingNode) -> None:
        """RepeatedKey where ``node`` gives one key twice, ``<<`` included (a second merge key
        replaced the first silently)."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            merge = key_node.tag == MERGE
            key = "<<" if merge else self.construct_object(key_node, deep=True)
            try:
                duplicate = (MERGE if merge else key) in seen
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
            seen.add(MERGE if merge else key)

    def _flattened(self, node: MappingNode) -> list[tuple[Node, Node]]:
        """``node``'s pairs with its ``<<`` merged in as the merge key's spec orders them: the
        mapping's own keys win, then the merged mappings in the order listed (``<<: [*a, *b]``
        takes a key from ``a`` before ``b``). PyYAML 6.0.4 let the last mapping listed win
        (yaml/pyyaml#953) and rewrote the node in place; this reads the nodes without changing
        them, once each (an alias merged many times is flattened once)."""
        done = self._flat.get(id(node))
        if done is _BUSY:
            raise ConstructorError(None, None, "a mapping merges itself (<<)", node.start_mark)
        if done is not None:
            return list(done)
        self._flat[id(node)] = _BUSY
        own: list[tuple[Node, Node]] = []
        merged: list[tuple[Node, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag != MERGE:
                if key_node.tag == "tag:yaml.org,2002:value":
                    key_node.tag = "tag:yaml.org,2002:str"
                own.append((key_node, value_node))
                continue
            listed = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
            for sub in listed:
                if not isinstance(sub, MappingNode):
                    why = f"<< merges a mapping or a list of mappings, not a {sub.id}"
                    raise self._refuse(sub, why)
                self._check_repeats(sub)
                merged += self._flattened(sub)
        kept = {_identity(k) for k, _ in own}
        pairs: list[tuple[Node, Node]] = []
        for pair in merged:  # the first mapping listed that gives a key wins
            if (key := _identity(pair[0])) not in kept:
                kept.add(key)
                pairs.append(pair)
        self._flat[id(node)] = pairs + own
        return pairs + own


def _identity(key: Node) -> Any:
    """A key node as a merge compares it: a scalar by its tag and text, anything else by itself."""
    return (key.tag, key.value) if isinstance(key, ScalarNode) else id(key)


MERGE = "tag:yaml.org,2002:merge"
_BUSY: Any = object()
"""What :meth:`StrictLoader._flattened` holds for a mapping it is flattening (one that merges
itself is refused)."""


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
