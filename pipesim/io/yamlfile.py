"""YAML as pipesim's files read it: PyYAML's safe loader, stricter in two ways.

* A key given twice in one mapping is an error (PyYAML keeps the last one silently; TOML refuses
  it, so a YAML file must too: a second ``pipeline:`` table would otherwise replace the first).
* Numbers in exponent notation without a dot (``1e3``, ``6e1``, ``1e-300``) are floats, as in
  YAML 1.2 and TOML; PyYAML's YAML 1.1 resolver reads them as strings.

Errors are :class:`yaml.YAMLError`, as the safe loader's are, so callers keep one ``except``.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

from pipesim.core.errors import shown


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` refusing duplicate keys and reading ``1e3`` as a float."""

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
                raise ConstructorError(
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
