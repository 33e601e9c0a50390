"""The files of an installed distribution (a wheel from the package registry), found as ``importlib.metadata`` finds
them: a corpus that installs with pip and runs offline (``corpus.source: package``).

The plan lists them before any job (the corpus job's inputs, so a new release of the package reruns it, and the
pre-flight check, which names a package that is not installed) and the data stage reads them; both ask here.
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

SHOWN_FILES = 8  # files named in the message when no pattern matches


class NotInstalled(LookupError):
    """The distribution is not installed, or none of its files match; the message names the key and the way out."""


@dataclass(frozen=True)
class InstalledFiles:
    """A distribution's name and version as installed, its declared licence, and the files the patterns chose
    (``relative``: as the distribution's RECORD names them; ``paths``: where they are), in sorted order."""

    distribution: str
    version: str
    licence: str
    relative: tuple[str, ...]
    paths: tuple[Path, ...]


def _licence(meta: metadata.PackageMetadata) -> str:
    """The licence the distribution declares: its SPDX expression, its License field, or its classifiers."""
    if expression := meta.get("License-Expression"):
        return expression
    if (text := meta.get("License")) and len(text) < 200:  # some put the whole licence text here
        return text
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    return "; ".join(classifiers) or "not declared"


def installed_files(distribution: str, patterns: list[str]) -> InstalledFiles:
    """The files of ``distribution`` whose path in it matches any of ``patterns`` (``fnmatch``: ``*`` crosses
    folders, so ``*.txt`` is every text file); NotInstalled names what is missing."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise NotInstalled(
            f"corpus.package.distributions: {distribution!r} is not installed in this Python ({sys.prefix}); install "
            f"it where the workflow runs (pip install {distribution}), or correct the name"
        ) from None
    listed = sorted(str(f) for f in dist.files or [])
    chosen = [f for f in listed if any(fnmatch.fnmatch(f, p) for p in patterns)]
    if not chosen:
        shown = ", ".join(listed[:SHOWN_FILES]) + (", …" if len(listed) > SHOWN_FILES else "")
        raise NotInstalled(
            f"corpus.package.files: no file of {distribution} {dist.version} matches {', '.join(patterns)}; "
            f"its files: {shown or 'none listed'}"
        )
    return InstalledFiles(
        distribution=dist.metadata["Name"] or distribution,
        version=dist.version,
        licence=_licence(dist.metadata),
        relative=tuple(chosen),
        paths=tuple(Path(str(dist.locate_file(f))) for f in chosen),
    )
