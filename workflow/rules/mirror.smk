# tokenwatt's own files wherever the workflow runs from: this checkout, or a remote module source (github(...),
# gitlab(...)) whose files are fetched into Snakemake's source cache and whose data files are mirrored into the
# working directory (tokenwatt/common/mirror.py). Included first by common.smk: it puts the library on sys.path
# (SCRIPTS) and names the folder of the shipped files (WORKFLOW_DIR). Found from this file, never from the working
# directory or the main Snakefile: a user's project runs tokenwatt as a module, or from another --directory.
import sys
from pathlib import Path

from snakemake.sourcecache import LocalSourceFile


def _workflow_dirs():
    here = workflow.current_basedir
    if isinstance(here, LocalSourceFile):
        local = Path(here.get_path_or_uri(secret_free=True)).parent
        return local, local / "scripts"
    with open(workflow.source_path("../MANIFEST.txt"), encoding="utf-8") as manifest:
        listed = [line.strip() for line in manifest if line.strip() and line[0] != "#"]
    fetched = {path: Path(workflow.source_path(f"../../{path}")) for path in listed}
    scripts = fetched["workflow/scripts/tokenwatt/__init__.py"].parents[1]
    sys.path.insert(0, str(scripts))
    from tokenwatt.common.mirror import MirrorError, mirror

    try:
        return mirror(fetched, workflow.is_main_process, str(here)), scripts
    except MirrorError as err:
        raise WorkflowError(str(err)) from None


WORKFLOW_DIR, SCRIPTS = _workflow_dirs()
sys.path.insert(0, str(SCRIPTS))
