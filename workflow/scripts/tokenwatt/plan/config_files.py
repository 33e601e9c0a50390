"""Config files read for what their loader hides: a key written twice in one mapping, which PyYAML (and json.load)
resolves by keeping the last without a word."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from .config_messages import key_path


class _KeyLoader(yaml.SafeLoader):
    """Composes a YAML file's nodes (nothing is constructed but keys), to see every key as written."""


def _key_value(loader: _KeyLoader, node: yaml.Node) -> Any:
    try:
        return loader.construct_object(node, deep=True) if isinstance(node, yaml.ScalarNode) else repr(node.value)
    except yaml.YAMLError:
        return (node.tag, node.value)


def _repeated_keys(loader: _KeyLoader, node: yaml.Node, path: tuple, name: str) -> list[str]:
    problems = []
    if isinstance(node, yaml.MappingNode):
        first: dict[Any, yaml.Mark] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: keys written beside it override it, by design
                continue
            key = _key_value(loader, key_node)
            mark = key_node.start_mark
            here = (*path, key)
            try:
                seen = first.get(key)
            except TypeError:  # an unhashable key: not a config key anyway
                continue
            if seen is None:
                first[key] = mark
            else:
                where = (
                    f"line {mark.line + 1}"
                    if seen.line != mark.line
                    else f"line {mark.line + 1}, column {mark.column + 1}"
                )
                before = f"line {seen.line + 1}" + (f", column {seen.column + 1}" if seen.line == mark.line else "")
                problems.append(
                    f"{name} {where}: {key_path(here)} is given twice (first on {before}); the loader keeps "
                    "only the last, so remove or rename one"
                )
            problems += _repeated_keys(loader, value_node, here, name)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            problems += _repeated_keys(loader, item, (*path, i), name)
    return problems


def duplicate_keys(paths: Iterable[str | os.PathLike]) -> list[str]:
    """A key written twice in one mapping of a config file, with the file and both lines.

    Snakemake's loader (PyYAML, and json.load for JSON) keeps the last of two equal keys without a
    word, so a design with two levels of one name would silently lose one. A file that cannot be read
    or parsed is left to Snakemake, which has loaded it already and says so itself.
    """
    problems = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        name = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
        loader = _KeyLoader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                problems += _repeated_keys(loader, node, (), name)
        except yaml.YAMLError:
            continue
        finally:
            loader.dispose()
    return problems
