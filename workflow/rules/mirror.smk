# tokenwatt's own files wherever the workflow runs from: this checkout, or a remote module source (github(...),
# gitlab(...)) whose data files are mirrored into the working directory. Included first by common.smk: it puts
# the library on sys.path (SCRIPTS) and names the folder of the shipped files (WORKFLOW_DIR).
import os
import shutil
import sys
import uuid
from pathlib import Path

from snakemake.sourcecache import LocalSourceFile

# Where a remote module source's data files are mirrored, in the working directory: a path that stays when the
# version does, so that a new tag reruns only the jobs whose files changed.
REMOTE_MIRROR = Path(".snakemake", "tokenwatt")


def _workflow_dirs():
    """tokenwatt's workflow/ folder on this machine, for the files it ships (schemas, captions, resources), and the
    folder its library is imported from. Both are found from this file, never from the working directory or the main
    Snakefile: a user's project runs tokenwatt as a module, or from another --directory.

    From a remote module source (github(...), gitlab(...)) Snakemake fetches only what a directive names. Every file
    of workflow/MANIFEST.txt is fetched into Snakemake's source cache (a folder per tag or commit; per run for a
    branch): the library is imported, and its digests taken, from there, where the scripts Snakemake runs find it
    beside them. The data files are also mirrored under REMOTE_MIRROR, which the rules name as inputs.

    Only the main Snakemake changes the mirror, never while another run holds this folder's lock (its jobs would
    read two releases' files), and removes what an older release listed; a job's own Snakemake (a cluster node)
    writes only a file that is missing, where .snakemake is not shared. A mirrored file is rewritten only when its
    bytes change, and then carries the time of writing, so the jobs that read it rerun; a file new to the mirror takes
    the source's own time (the commit's), so a project whose .snakemake folder was deleted does not see every job as
    outdated.
    """
    here = workflow.current_basedir
    if isinstance(here, LocalSourceFile):
        local = Path(here.get_path_or_uri(secret_free=True)).parent
        return local, local / "scripts"
    with open(workflow.source_path("../MANIFEST.txt"), encoding="utf-8") as manifest:
        listed = [
            line.strip()
            for line in manifest
            if line.strip() and not line.startswith("#")
        ]
    fetched = {path: Path(workflow.source_path(f"../../{path}")) for path in listed}
    scripts = fetched["workflow/scripts/tokenwatt/__init__.py"].parents[1]
    wanted = {
        REMOTE_MIRROR / path: (source, _repository_bytes(source))
        for path, source in fetched.items()
        if not path.startswith("workflow/scripts/")
    }
    changed = [
        m
        for m, (_, content) in wanted.items()
        if m.exists() and m.read_bytes() != content
    ]
    # a dot file is another process's file being written
    stale = [
        p
        for p in REMOTE_MIRROR.rglob("*")
        if p.is_file() and p not in wanted and not p.name.startswith(".")
    ]
    main = workflow.is_main_process
    if main and (changed or stale):
        locks = Path(".snakemake", "locks")
        if locks.is_dir() and any(locks.iterdir()):
            raise WorkflowError(
                f"tokenwatt from {here} ships other files than the run that holds this folder's lock "
                f"(.snakemake/locks) uses, e.g. {(changed or stale)[0]}; changing them now would mix two releases "
                "in one study. Let that run finish, or keep its pin until it has; if none runs (a crash left its "
                "lock), run snakemake --unlock with the old pin, or remove .snakemake/locks."
            )
    for mirrored, (source, content) in wanted.items():
        if not mirrored.exists() or (main and mirrored in changed):
            _write_mirrored(mirrored, content, source)
    if main:
        for path in stale:
            path.unlink(missing_ok=True)
    return Path.cwd() / REMOTE_MIRROR / "workflow", scripts


def _repository_bytes(fetched):
    """A fetched file's bytes as the repository holds them. Snakemake reads a git source through GitPython, which
    drops the file's last newline; every listed file ends in exactly one (tests/test_environment.py), so adding it
    back is exact: the rules' inputs are keyed by content (the result store), and a lost newline in the metrics
    schema would make every trial look new."""
    content = fetched.read_bytes()
    return content if content.endswith(b"\n") else content + b"\n"


def _write_mirrored(mirrored, content, source):
    new = not mirrored.exists()
    mirrored.parent.mkdir(parents=True, exist_ok=True)
    partial = mirrored.with_name(f".{mirrored.name}.{uuid.uuid4().hex}")
    partial.write_bytes(content)
    if new:
        shutil.copystat(source, partial)
    # atomic: a job's Snakemake may be reading the mirror meanwhile
    os.replace(partial, mirrored)


WORKFLOW_DIR, SCRIPTS = _workflow_dirs()
sys.path.insert(0, str(SCRIPTS))
