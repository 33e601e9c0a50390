"""Config files read for what their loader hides: a key written twice in one mapping, which PyYAML (and json.load)
resolves by keeping the last without a word; and the file and line that set a key, so that a problem is named where
the user wrote it, not where the workflow found it."""

from __future__ import annotations

import os
import re
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
        name = shown_name(path)
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


def shown_name(path: str | os.PathLike) -> str:
    """A config file as the user would type it: relative to the working directory where it lies below it."""
    return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)


def _key_line(node: yaml.Node | None, path: tuple) -> tuple[int, int | None]:
    """How deep ``path`` reaches into a composed YAML document, and the line (1-based) of the deepest key found."""
    depth, line = 0, None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            pair = next(
                ((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None
            )
            if pair is None:
                break
            line, node = pair[0].start_mark.line + 1, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
        depth += 1
    return depth, line


_MISSING = object()


def _value_at(data: Any, key: tuple) -> Any:
    """The value at ``key`` in loaded config data, or _MISSING (a merge key's values are not walked)."""
    try:
        for part in key:
            data = data[part]
    except (KeyError, IndexError, TypeError):
        return _MISSING
    return data


def where_set(paths: Iterable[str | os.PathLike], key: tuple, value: Any = None) -> str | None:
    """The file and line that set ``key`` (a path of keys and list indices) to ``value``: the last file that does
    (``paths`` in the order Snakemake merges them, a later one overriding); None where none does (a --config value
    over a file's, or a key the defaults fill in: a file's line would point at another value)."""
    found = None
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
            node, data = yaml.compose(text, Loader=yaml.SafeLoader), yaml.safe_load(text)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        depth, line = _key_line(node, key)
        if depth == len(key) and value is not _MISSING and _value_at(data, key) == value:
            found = f"{shown_name(path)} line {line}"
    return found


def problem_key(problem: str, config: Any) -> tuple:
    """The key a problem sentence starts with (``study.budgets[1]: ...``), resolved against the user's ``config``:
    a level's name may hold dots, so the path is matched key by key against what the config holds."""
    rest, node, path = problem.split(": ", 1)[0], config, []
    while rest:
        index = re.match(r"\[(\d+)\]", rest)
        if index and isinstance(node, list) and int(index[1]) < len(node):
            path.append(int(index[1]))
            node, rest = node[int(index[1])], rest[index.end() :]
            continue
        rest = rest[1:] if path and rest.startswith(".") else rest
        keys = (
            [k for k in node if isinstance(k, str) and re.match(re.escape(k) + r"(?=$|[.\[])", rest)]
            if isinstance(node, dict)
            else []
        )
        if not keys:
            break
        key = max(keys, key=len)
        path.append(key)
        node, rest = node[key], rest[len(key) :]
    return tuple(path)


def located(problems: list[str], config: Any, paths: Iterable[str | os.PathLike]) -> list[str]:
    """Each problem headed by the config file and line that set its key, where a file does."""
    paths = list(paths)
    out = []
    for problem in problems:
        key = problem_key(problem, config)
        where = where_set(paths, key, _value_at(config, key)) if key else None
        out.append(f"{where}: {problem}" if where else problem)
    return out
