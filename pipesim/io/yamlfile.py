"""YAML as pipesim's files read it: PyYAML's safe loader, stricter in two ways.

* A key given twice in one mapping is an error (PyYAML keeps the last one silently; TOML refuses
  it, so a YAML file must too: a second ``pipeline:`` table would otherwise replace the first).
* Numbers in exponent notation without a dot (``1e3``, ``6e1``, ``1e-300``) are floats, as in
  YAML 1.2 and TOML; PyYAML's YAML 1.1 resolver reads them as strings.

Errors are :class:`yaml.YAMLError`, as the safe loader's are, so callers keep one ``except``; a
repeated key is a :class:`RepeatedKey` whose ``path`` is the key's dotted path in the document
(``pipeline.batch_size``), which a file's refusal reports as its field.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pipesim.core.errors import shown


class RepeatedKey(ConstructorError):
    """A key given twice in one mapping: ``path`` its dotted path (``pipeline.batch_size``)."""

    def __init__(self, path: str, *args: Any) -> None:
        super().__init__(*args)
        self.path = path


def _steps_to(root: Node | None, target: Node) -> list[str] | None:
    """The steps from ``root`` down to ``target`` (``.key`` through a mapping, ``[i]`` through a
    sequence); None when ``target`` is not below ``root``."""
    if root is target:
        return []
    children: list[tuple[str, Node]] = []
    if isinstance(root, MappingNode):
        children = [(f".{k.value if isinstance(k, ScalarNode) else '?'}", v) for k, v in root.value]
    elif isinstance(root, SequenceNode):
        children = [(f"[{i}]", v) for i, v in enumerate(root.value)]
    for step, child in children:
        below = _steps_to(child, target)
        if below is not None:
            return [step, *below]
    return None


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` refusing duplicate keys and reading ``1e3`` as a float."""

    _root: Node | None = None

    def construct_document(self, node: Node) -> Any:
        self._root = node  # where a repeated key's path starts
        return super().construct_document(node)

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


_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789"))


def load_yaml(text: str) -> Any:
    """The document in ``text`` (``yaml.YAMLError`` when it is not valid, or repeats a key)."""
    return yaml.load(text, Loader=StrictLoader)  # StrictLoader is a SafeLoader: no objects built
