# The validated config and the study it describes (tokenwatt.plan.study.Study: design, every path, priorities and
# shared params), and the wildcards' shapes. The library comes first: mirror.smk finds tokenwatt's own files, fetched
# from a remote module source or not, and imports from there.
import mimetypes
import os
import sys

# Parquet's registered media type; without it `snakemake --report` assumes text/plain and says so.
mimetypes.add_type("application/vnd.apache.parquet", ".parquet")


include: "mirror.smk"


from tokenwatt.analysis.products import (
    FULL_GRID,
    HALVING_ROUNDS,
    STUDY_RECORDS,
    POWER_TRACES,
    STEP_RECORDS,
    products_of,
    setting,
)  # noqa: E402
from tokenwatt.common.files import read_json  # noqa: E402
from tokenwatt.plan import allocation  # noqa: E402
from tokenwatt.plan.config import ConfigError, checked_config, load_schema  # noqa: E402
from tokenwatt.plan.layout import records_among, trial_of  # noqa: E402
from tokenwatt.plan.design import (
    CELL_PATTERN,
    PROFILE_PATTERN,
    SELECTION_PATTERN,
    STABLE_PATTERN,
    TOKENIZER_PATTERN,
)  # noqa: E402
from tokenwatt.plan.study import Study  # noqa: E402
from tokenwatt.selection.catalog import STEPS, step_records  # noqa: E402

# Weights not downloaded yet do not stop a plan (-n); the start checks (preflight.smk) stop a run before any job.
DOWNLOADS_NEEDED = []


def stop_before_any_job(sentence):
    """End Snakemake with ``sentence`` alone (exit code 1): a problem of the user's config or plan, which names the
    file and key to fix. Raised as an error, it would be headed by this rule file's line and a traceback into it,
    which say nothing the user can act on."""
    print(sentence, file=sys.stderr)
    sys.exit(1)


def _validate_config():
    """The config replaced by its validated form: checked against the schema and its rules, and the files Snakemake
    read it from (--configfile, then the Snakefile's configfile:) re-read for duplicate keys; none when a module is
    given its config as a dict (its configfile: is skipped then)."""
    # In the order Snakemake merges them: the Snakefile's configfile:, then --configfile's, which override it.
    given = list(workflow.overwrite_configfiles or [])
    files = [f for f in workflow.configfiles if f not in given] + given
    try:
        checked = checked_config(
            config,
            load_schema(WORKFLOW_DIR / "schemas/config.schema.yaml"),
            [] if workflow.modifier.skip_configfile else files,
            DOWNLOADS_NEEDED,
        )
    except ConfigError as err:
        stop_before_any_job(str(err))
    for line in DOWNLOADS_NEEDED:
        print(
            f"WARNING: this study cannot run yet (a dry run is fine): {line}",
            file=sys.stderr,
        )
    # Replaced, not updated: update() would keep the user's key order, and params compare by it.
    config.clear()
    config.update(checked)


_validate_config()
STUDY = Study(config, products_of(config), WORKFLOW_DIR, SCRIPTS)
LAYOUT = STUDY.layout


wildcard_constraints:
    budget=r"\d+",
    trial=r"\d+",
    split=r"train|eval",
    cell=CELL_PATTERN,
    tok=TOKENIZER_PATTERN,
    sel=SELECTION_PATTERN,
    level=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    profile=PROFILE_PATTERN,
    stable=STABLE_PATTERN,
    point=r"\d+",
    round=r"\d+",


def per_cell(value_of_cell, wildcard="cell"):
    """A rule's value that depends on its job's cell alone (``value_of_cell(cell)``), computed once per cell: the value
    itself where every cell gives the same, else a lookup by the job's ``wildcard`` (Study.by_cell says why).
    """
    cell_for = {
        "cell": STUDY.design.cell,
        "stable": STUDY.design.stable_cell,
    }[wildcard]
    return STUDY.by_cell(lambda key: value_of_cell(cell_for(key)), wildcard)


def trial_threads():
    """A metered trial's cores: every local core unless train.run_alone is false (then train.threads per device)."""
    if config["train"]["run_alone"]:
        return workflow.cores
    return per_cell(
        lambda cell: config["train"]["threads"] * STUDY.design.devices(cell)
    )


# --- a halving study's rounds (allocation.smk): each round's jobs exist once the checkpoint of the round before ran.
# Only inside input functions: they ask for the rounds' checkpoints (plan/allocation.py's walk says how).
def round_record(k):
    """Halving round ``k``'s checkpoint record; a damaged one stops the plan with the fix rather than a traceback."""
    path = checkpoints.halving_round.get(round=k).output.json
    try:
        return read_json(path)
    except ValueError as err:
        raise WorkflowError(f"{path} is unreadable ({err}): {allocation.DAMAGED_ROUND}")


def round_inputs(wildcards):
    """A halving round's checkpoint inputs (Layout.round_inputs) from one walk of the rounds before it; the records
    beside them read as they are (ancient)."""
    k = int(wildcards.round)
    found = LAYOUT.round_inputs(
        k, allocation.walk(STUDY.design, round_record, k).trials
    )
    return {**found, "beside": [ancient(p) for p in found["beside"]]}


def study_trials():
    """Every (cell, trial) the study runs: the design's, or a halving study's rounds as far as they went."""
    if STUDY.allocation is None:
        return LAYOUT.expected
    return allocation.walk(STUDY.design, round_record).trials


def per_trial(files_of):
    """An input list over the study's trials: fixed without allocation, else a function the rounds decide."""
    if STUDY.allocation is None:
        return files_of(LAYOUT.expected)
    return lambda wildcards: files_of(study_trials())


def analysis_input(file, interim):
    """A file an analysis product reads (tokenwatt.analysis.products): the aggregate's or another product's under
    results/analysis/ (results/interim/analysis/ for the interim twin), or the selection steps' records (the interim
    twin's: those written so far), or the power traces the figures show (POWER_TRACES: the first trial of each cell;
    the interim twin's: each cell's first finished)."""
    if file == STEP_RECORDS:
        records = [p for paths in step_records(LAYOUT).values() for p in paths]
        return existing(*records) if interim else records
    if file == POWER_TRACES:
        if interim:
            return lambda wildcards: [
                ancient(LAYOUT.trial(c, t).power) for c, t in LAYOUT.first_finished()
            ]
        return per_trial(
            lambda trials: [
                LAYOUT.trial(c, t).power
                for c, t in LAYOUT.trace_keys(
                    None if STUDY.allocation is None else trials
                )
            ]
        )
    if file == HALVING_ROUNDS:
        if interim:
            return existing(
                *(LAYOUT.halving_round(k) for k in range(len(STUDY.design.budgets)))
            )
        return lambda wildcards: [
            LAYOUT.halving_round(k)
            for k in range(allocation.walk(STUDY.design, round_record).rounds)
        ]
    if file == STUDY_RECORDS:
        return existing(
            *(LAYOUT.trial(c, t).metrics for c, t in LAYOUT.expected),
            *LAYOUT.stretch_records(),
        )
    if file == FULL_GRID:
        return existing(*STUDY.full_grid_files())
    path = LAYOUT.analysis(file)
    return LAYOUT.interim_of(path) if interim else path


def figure_output(name, ext, interim):
    """A figure a figures rule draws; the study's is also listed in Snakemake's --report."""
    if interim:
        return LAYOUT.interim_of(LAYOUT.figure(name, ext))
    return report(
        LAYOUT.figure(name, ext),
        caption=f"../report/{name}.rst",
        category="Figures",
        subcategory=ext.upper(),
    )


def analysis_output(file, interim, category=None):
    """A file an analysis product writes; a table (``category``) is also listed in Snakemake's --report."""
    path = LAYOUT.analysis(file)
    if interim or category is None:
        return LAYOUT.interim_of(path) if interim else path
    stem = file.rsplit(".", 1)[0]
    return report(path, caption=f"../report/{stem}.rst", category=category)


def existing(*paths):
    """An input function of the paths that exist now, each ancient: read as it is, never built for the interim report
    (a finished trial, a measured profile, a data summary)."""
    return lambda wildcards: [ancient(p) for p in paths if os.path.exists(p)]


# --- the interim report's inputs (interim.smk)
def finished_files(kind):
    """An input function: one of the four files of every trial finished now (metrics.json is written and restored
    last; a trial with one of its files deleted is left out rather than rebuilt). ancient(): a finished trial is read
    as it is, never retrained for this report."""
    return lambda wildcards: [
        ancient(getattr(LAYOUT.trial(c, t), kind)) for c, t in LAYOUT.finished()
    ]


def interim_files(files, **replaced):
    """A final rule's named inputs or outputs for its interim twin; ``replaced`` names inputs the interim rule reads
    otherwise (only what exists now). The interim rules are derived from the final ones, never listed twice.
    """

    def moved(value):
        if isinstance(value, list):
            return [LAYOUT.interim_of(p) for p in value]
        return LAYOUT.interim_of(value)

    return {
        name: replaced[name] if name in replaced else moved(files.get(name))
        for name in files.keys()
    }


include: "preflight.smk"
