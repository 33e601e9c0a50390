"""The library modules a rule's script runs: its import closure inside ``tokenwatt``.

Snakemake reruns a job when its script changes, but cannot see the modules that script
imports. The rules pass a digest of the whole closure as a param, derived here from the
source itself, so no hand-kept list can drift from what the code really imports.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = "tokenwatt"
# Modules that only return text for the terminal and write nothing: they cannot change any output,
# so they are left out of every digest and editing them never reruns a job.
DISPLAY_ONLY = {"tokenwatt.presentation.progress", "tokenwatt.common.failures"}
# Modules that read files of their package at run time (module file → that folder, both under the scripts folder):
# a rule whose closure holds the module digests the folder's files with it, byte for byte (a template's whitespace is
# its output's), so editing a report template reruns the report and nothing that renders none.
READS = {"tokenwatt/presentation/templating.py": "tokenwatt/presentation/templates"}


# This module's own source keys every kept entry too: a release that parses or prints modules otherwise never reads
# an entry an earlier one wrote.
_OWN_SOURCE = Path(__file__).read_text(encoding="utf-8")


def _cache_folder() -> Path:
    """Where parsed modules are kept between runs (TOKENWATT_CODE_CACHE, else the user's cache folder)."""
    if folder := os.environ.get("TOKENWATT_CODE_CACHE"):
        return Path(folder)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tokenwatt" / "code"


def _kept(kind: str, source: str, module: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, kept on disk under the digest of what it is computed from (``kind``, the source text, the module
    it is read as, this Python's version, as ast's printed form may change with it, and this module's own code), so an
    entry is never stale. Every
    Snakemake call (a dry run, each job's own Snakemake on a cluster node) digests the same ~100 modules, and parsing
    them was a fifth of a plan's time. A folder that cannot be read or written only costs the parse."""
    key = hashlib.sha256("\0".join((kind, module, sys.version, _OWN_SOURCE, source)).encode()).hexdigest()
    path = _cache_folder() / key[:2] / f"{key}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    value = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        partial.write_text(json.dumps(value), encoding="utf-8")
        os.replace(partial, path)  # atomic: another process may read it meanwhile
    except OSError:
        pass
    return value


@functools.cache
def _imported(source: str, module: str) -> frozenset[str]:
    """Dotted names of the ``tokenwatt`` modules that one module's source imports (at any depth of the code).
    Cached by source text, here and on disk: every rule's digest walks the same shared modules, and parsing is the
    cost."""
    return frozenset(_kept("imports", source, module, lambda: sorted(_parse_imports(source, module))))


def _parse_imports(source: str, module: str) -> set[str]:
    package = module.rsplit(".", 1)[0] if "." in module else module
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative at any depth: from .x import y, from . import x, from ..x import y
                parts = package.split(".")
                if node.level - 1 >= len(parts):
                    continue  # beyond the top-level package: not ours
                base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
            if base.split(".")[0] != PACKAGE:
                continue
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from tokenwatt import figures` names a module
    return found


class Library:
    """The ``tokenwatt`` modules under one scripts folder as one parse sees them: which file a dotted name is, and each
    file's text, looked up once. A Snakemake parse digests ~30 rules' closures over the same ~100 modules; a fresh
    Library per digest (the default) reads the files again, for a caller whose files may change between digests."""

    def __init__(self, scripts_dir: Path) -> None:
        self.scripts_dir = scripts_dir
        self._files: dict[str, Path | None] = {}
        self._texts: dict[Path, str] = {}

    def file_of(self, name: str) -> Path | None:
        """The file of a dotted module name; None for a name imported from a module (a function), not a module."""
        if name not in self._files:
            parts = name.split(".")
            # a package before a module of the same name, as Python's import does
            candidates = (
                self.scripts_dir.joinpath(*parts, "__init__.py"),
                self.scripts_dir.joinpath(*parts).with_suffix(".py"),
            )
            self._files[name] = next((c for c in candidates if c.is_file()), None)
        return self._files[name]

    def text(self, path: Path) -> str:
        if path not in self._texts:
            self._texts[path] = path.read_text(encoding="utf-8")
        return self._texts[path]


def closure(script: Path, scripts_dir: Path, also: tuple[str, ...] = (), library: Library | None = None) -> list[Path]:
    """The script and every ``tokenwatt`` module it reaches through imports, sorted, as files; ``also``: dotted names
    of modules the script imports by name at run time (an analysis product's function), with their own closures."""
    library = library or Library(scripts_dir)
    seen: dict[Path, None] = {script: None}
    todo = [(script, PACKAGE)]
    for name in also:
        found = library.file_of(name)
        if found is None:
            raise ValueError(f"{name} is not a module of {scripts_dir}")
        seen[found] = None
        todo.append((found, name if found.name != "__init__.py" else name + ".__init__"))
    while todo:
        path, module = todo.pop()
        for name in _imported(library.text(path), module):
            if any(name == d or name.startswith(d + ".") for d in DISPLAY_ONLY):
                continue
            # every module on the way to a submodule runs too (tokenwatt/__init__.py)
            for depth in range(1, name.count(".") + 2):
                prefix = ".".join(name.split(".")[:depth])
                found = library.file_of(prefix)
                if found is not None and found not in seen:
                    seen[found] = None
                    todo.append((found, prefix if found.name != "__init__.py" else prefix + ".__init__"))
    return sorted(seen, key=lambda p: p.relative_to(scripts_dir).as_posix())


def code_digest(script: Path, scripts_dir: Path, also: tuple[str, ...] = (), library: Library | None = None) -> str:
    """Short digest of a script and its import closure (``also``: see ``closure``): each file's name and its syntax
    tree, so a comment, a docstring or a reformatting (snakefmt, ruff format) reruns nothing, while any change to what
    the code does reruns its jobs; and the files its modules read (READS), as they are. ``library``: the files as one
    parse read them (Library), else read now."""
    library = library or Library(scripts_dir)
    h = hashlib.sha256()
    modules = closure(script, scripts_dir, also, library)
    for path in modules:
        h.update(path.relative_to(scripts_dir).as_posix().encode())
        h.update(_canonical(library.text(path)).encode())
    for path in read_files(modules, scripts_dir):
        h.update(path.relative_to(scripts_dir).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def read_files(modules: list[Path], scripts_dir: Path) -> list[Path]:
    """The files that the modules of a closure read from their package at run time (READS), sorted."""
    names = {p.relative_to(scripts_dir).as_posix() for p in modules}
    folders = [scripts_dir / folder for module, folder in READS.items() if module in names]
    return sorted(
        (f for folder in folders for f in folder.rglob("*") if f.is_file() and "__pycache__" not in f.parts),
        key=lambda p: p.relative_to(scripts_dir).as_posix(),
    )


@functools.cache
def _canonical(source: str) -> str:
    """``_printed(source)``, kept on disk as ``_imported`` is."""
    return _kept("canonical", source, "", lambda: _printed(source))


def _printed(source: str) -> str:
    """The source as its syntax tree prints it (no comments, no docstrings, one layout). ast.unparse, not ast.dump:
    the dump's fields change between Python versions (3.12 adds type_params); the printed tree is far more stable
    (not guaranteed; the project pins 3.11).
    Docstrings go, and a module's ``__version__ = ...``: no rule's code reads a docstring, and the version only labels
    what a trial records, so neither a correction of the documentation nor a new release number reruns a job."""
    tree = ast.parse(source)
    tree.body = [statement for statement in tree.body if not _sets_version(statement)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and _has_docstring(
            node
        ):
            # a module may be empty; a class's or a function's body may not
            node.body = node.body[1:] or ([] if isinstance(node, ast.Module) else [ast.Pass()])
    return ast.unparse(tree)


def _has_docstring(node: ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    first = node.body[0] if node.body else None
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def _sets_version(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Assign) and [ast.unparse(t) for t in statement.targets] == ["__version__"]
