"""tokenwatt's shipped files in the working directory, for a study that runs it from a remote module source
(github(...), gitlab(...)), from which Snakemake fetches only what a directive names.

Every file of workflow/MANIFEST.txt is fetched into Snakemake's source cache (a folder per tag or commit; per run for a
branch), where the library is imported from and digested; the data files (schemas, captions, resources) are also
mirrored under MIRROR, which the rules name as inputs: a path that stays when the version does, so that a new tag
reruns only the jobs whose files changed.

Only the main Snakemake changes the mirror, never while another run holds this folder's lock (its jobs would read
two releases' files), and removes what an older release listed; a job's own Snakemake (a cluster node) writes only a
file that is missing, where .snakemake is not shared. A mirrored file is rewritten only when its bytes change, and then
carries the time of writing, so the jobs that read it rerun; a file new to the mirror takes the source's own time (the
commit's), so a project whose .snakemake folder was deleted does not see every job as outdated.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

MIRROR = Path(".snakemake", "tokenwatt")


class MirrorError(RuntimeError):
    """The mirror cannot change now; the message says why and what to do."""


def repository_bytes(fetched: Path) -> bytes:
    """A fetched file's bytes as the repository holds them. Snakemake reads a git source through GitPython, which
    drops the file's last newline; every listed file ends in exactly one (tests/test_environment.py), so adding it
    back is exact: the rules' inputs are keyed by content (the result store), and a lost newline in the metrics
    schema would make every trial look new."""
    content = fetched.read_bytes()
    return content if content.endswith(b"\n") else content + b"\n"


def _write(mirrored: Path, content: bytes, source: Path) -> None:
    new = not mirrored.exists()
    mirrored.parent.mkdir(parents=True, exist_ok=True)
    partial = mirrored.with_name(f".{mirrored.name}.{uuid.uuid4().hex}")
    partial.write_bytes(content)
    if new:
        shutil.copystat(source, partial)
    os.replace(partial, mirrored)  # atomic: a job's Snakemake may be reading the mirror meanwhile


def mirror(fetched: Mapping[str, Path], main: bool, source: str) -> Path:
    """Mirror the fetched data files (``fetched``: MANIFEST path → file in the source cache; the library's own are
    imported from there and not mirrored) into MIRROR under the working directory; ``main``: this is the main
    Snakemake, not a job's. Returns the mirrored workflow/ folder."""
    wanted = {
        MIRROR / path: (file, repository_bytes(file))
        for path, file in fetched.items()
        if not path.startswith("workflow/scripts/")
    }
    changed = [m for m, (_, content) in wanted.items() if m.exists() and m.read_bytes() != content]
    # a dot file is another process's file being written
    stale = [p for p in MIRROR.rglob("*") if p.is_file() and p not in wanted and not p.name.startswith(".")]
    if main and (changed or stale):
        locks = Path(".snakemake", "locks")
        if locks.is_dir() and any(locks.iterdir()):
            raise MirrorError(
                f"tokenwatt from {source} ships other files than the run that holds this folder's lock "
                f"(.snakemake/locks) uses, e.g. {(changed or stale)[0]}; changing them now would mix two releases "
                "in one study. Let that run finish, or keep its pin until it has; if none runs (a crash left its "
                "lock), run snakemake --unlock with the old pin, or remove .snakemake/locks."
            )
    for mirrored, (file, content) in wanted.items():
        if not mirrored.exists() or (main and mirrored in changed):
            _write(mirrored, content, file)
    if main:
        for path in stale:
            path.unlink(missing_ok=True)
    return Path.cwd() / MIRROR / "workflow"
