# Shared helpers: validated config, every output path, code digests and run order. The library comes first:
# mirror.smk finds tokenwatt's own files, fetched from a remote module source or not, and imports from there.
import functools
import mimetypes
import os
import sys
from pathlib import Path

# Parquet's registered media type; without it `snakemake --report` assumes text/plain and says so.
mimetypes.add_type("application/vnd.apache.parquet", ".parquet")


include: "mirror.smk"


from tokenwatt.common.codeclosure import code_digest as _closure_digest  # noqa: E402
from tokenwatt.plan.config import (
    ConfigError,
    checked_config,
    config_hash,
    load_schema,
    quality_settings,
)  # noqa: E402
from tokenwatt.plan.design import (
    CELL_PATTERN,
    PROFILE_PATTERN,
    TOKENIZER_PATTERN,
    Design,
)  # noqa: E402
from tokenwatt.common.measures import FIGURES, SCALING_FIGURES  # noqa: E402
from tokenwatt.plan.runorder import trial_priorities  # noqa: E402

try:
    # The files Snakemake read the config from (--configfile, then the Snakefile's configfile:), re-read for
    # duplicate keys; none when a module is given its config as a dict (its configfile: is skipped then).
    # Weights not downloaded yet do not stop a plan (-n); `refuse_missing_downloads` stops a run before any job.
    DOWNLOADS_NEEDED = []
    _validated = checked_config(
        config,
        load_schema(WORKFLOW_DIR / "schemas/config.schema.yaml"),
        [] if workflow.modifier.skip_configfile else workflow.configfiles,
        DOWNLOADS_NEEDED,
    )
except ConfigError as err:
    raise WorkflowError(str(err)) from None
for _line in DOWNLOADS_NEEDED:
    print(
        f"WARNING: this study cannot run yet (a dry run is fine): {_line}",
        file=sys.stderr,
    )


def refuse_missing_downloads():
    """At the start of a real run (onstart, which dry runs skip): weights a job would download mid-study."""
    if DOWNLOADS_NEEDED:
        raise WorkflowError(
            "tokenwatt cannot start this study:\n  " + "\n  ".join(DOWNLOADS_NEEDED)
        )


# Replaced, not updated: update() would keep the user's key order, and params compare by it.
config.clear()
config.update(_validated)

STUDY = config["study"]
DESIGN = Design(config)
TRIALS = DESIGN.trials
RESULTS = config["results"]
# Every figure the report embeds: the figures rule's, then the Scaling section's.
REPORT_FIGURES = FIGURES + SCALING_FIGURES
CONFIG_HASH = config_hash(config)


wildcard_constraints:
    budget=r"\d+",
    trial=r"\d+",
    split=r"train|eval",
    cell=CELL_PATTERN,
    tok=TOKENIZER_PATTERN,
    profile=PROFILE_PATTERN,


# The expensive rules are eligible for Snakemake's between-workflow cache when a run asks for it (--cache); marked
# only then, so that every other call does not open with a notice per rule that it could be cached.
BETWEEN_WORKFLOW_CACHE = workflow.workflow_settings.cache is not None


def shipped(*parts):
    """A file tokenwatt ships (a caption, the reference study, the story grammar), wherever the study runs: relative
    to the working directory when tokenwatt lies inside it (this checkout; a project's own copy), so that moving the
    folder changes no job's set of inputs; else absolute (a checkout elsewhere)."""
    path = WORKFLOW_DIR.parent.joinpath(*parts)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def user_or_shipped(path):
    """A file the config names: relative to the working directory, else (the embedded study's resources/...) to
    tokenwatt's own folder; returned as given when neither has it, so the error names the config's path.
    """
    if os.path.isabs(path) or os.path.exists(path) or not os.path.exists(shipped(path)):
        return path
    return shipped(path)


def res(*parts):
    """Every output lives under the configured results folder (normalised as pathlib would, at a
    fifth of its cost: a 15 000-trial plan asks for some 200 000 paths)."""
    return os.path.normpath(os.path.join(RESULTS, *parts))


def logfile(rule_name, *wildcard_parts):
    return res("logs", rule_name, *wildcard_parts) + ".log"


def code_digest(script):
    """Digest of a rule's script and every library module it imports (its import closure).

    Snakemake cannot see modules a script imports; passing this as a param makes an
    edit to them a rerun trigger (and part of the between-workflow cache key).
    """
    return _closure_digest(SCRIPTS / script, SCRIPTS)


# --- paths; the design module names every cell's folder ({cell}: b10000, or model=small/b10000)
def trial_files(cell, trial):
    prefix = res("trials", cell, f"t{trial}") + "/"
    return [
        prefix + name
        for name in ("metrics.json", "power.parquet", "steps.parquet", "curve.parquet")
    ]


def trial_metrics(cell, trial):
    return trial_files(cell, trial)[0]


def data_file(tok, name):
    """A tokenizer's data ({tok}: "" for the study's tokenizer, tok=<model level>/ for a level's own)."""
    return res("data", f"{tok}{name}")


def subset_file(tok, budget, trial):
    return res("subsets", f"{tok}b{budget}", f"t{trial}.json")


def profile_file(key):
    return res("device", f"{key}profile.json")


def corpus_inputs(wildcards):
    source = config["corpus"]["source"]
    if source == "synthetic":
        return [user_or_shipped(config["corpus"]["synthetic"]["grammar"])]
    if source == "local":
        # A missing file is left to the pre-flight check, which names corpus.local.files (Snakemake would refuse the
        # plan with "Missing input files"); a dry run plans all the same.
        return [f for f in config["corpus"]["local"]["files"] if os.path.exists(f)]
    return []


# Every (cell, trial) the study runs; the trial is the subject of the repeated-measures design.
EXPECTED = DESIGN.keys()
# The trial whose power trace the figures show for each cell.
TRACE_KEYS = [(c.id, TRIALS[0]) for c in DESIGN.cells]

DATA_TARGETS = [
    data_file(tok, "chunks_eval.parquet") for tok in DESIGN.tokenizer_keys()
] + [
    subset_file(tok, b, t)
    for tok in DESIGN.tokenizer_keys()
    for b in DESIGN.budgets
    for t in TRIALS
]
TRIAL_TARGETS = [f for c, t in EXPECTED for f in trial_files(c, t)]
# Trial outputs too, so a deleted power.parquet or metrics.json is rebuilt by the default target.
ALL_TARGETS = [res("report.html"), *TRIAL_TARGETS]


# --- the interim report (interim.smk): finished trials only, never retrained
def finished():
    """(cell, trial) of every trial whose files all exist now (metrics.json is written and restored last; a trial
    with one of its files deleted is left out rather than rebuilt: the interim report never runs a study's job).
    """
    return [
        (c, t) for c, t in EXPECTED if all(Path(f).exists() for f in trial_files(c, t))
    ]


def finished_files(kind):
    # ancient(): a finished trial is read as it is, never retrained for this report
    return lambda wildcards: [ancient(trial_files(c, t)[kind]) for c, t in finished()]


def interim_path(*parts):
    return res("interim", *parts)


def _interim(path):
    """A file of the analysis stage (results/analysis/…, results/figures/…, the report) moved under
    results/interim/; anything else (captions, the reference study) as it is."""
    staged = str(path).startswith(
        tuple(res(stage) + os.sep for stage in ("analysis", "figures"))
    )
    return (
        interim_path(os.path.relpath(path, RESULTS))
        if staged or str(path) == res("report.html")
        else path
    )


def interim_named(files, **replaced):
    """A final rule's named inputs or outputs for its interim twin (the interim rules are derived from the final
    ones, never listed twice); ``replaced`` names inputs the interim rule reads otherwise (only what exists now).
    """
    return {
        name: (
            replaced[name]
            if name in replaced
            else (
                [_interim(p) for p in value]
                if isinstance(value, list)
                else _interim(value)
            )
        )
        for name, value in ((name, files.get(name)) for name in files.keys())
    }


def interim_positional(files):
    """A final rule's unnamed inputs or outputs for its interim twin."""
    return [] if list(files.keys()) else [_interim(p) for p in files]


def existing_profiles(wildcards):
    return [p for p in DEVICE_PROFILES if Path(p).exists()]


def existing(*paths):
    """An input function of the paths that exist now, each ancient: read as it is, never built for the interim report."""
    return lambda wildcards: [ancient(p) for p in paths if Path(p).exists()]


def interim_traces():
    """Per cell, the power trace of its first finished trial."""
    first = {}
    for c, t in finished():
        first.setdefault(c, t)
    return sorted(first.items())


# Subsets outrank every trial so that a budget the corpus cannot fill fails before any
# training starts (the scheduler runs ready jobs by priority); the device profile outranks
# everything, so CS_TFLOPS is measured before any trial heats the device.
SUBSET_PRIORITY = len(EXPECTED) + 1
PROFILE_PRIORITY = SUBSET_PRIORITY + 1
MEASURE_PROFILE = config["metric"]["cs_tflops"] == "measure"
# One device profile per hardware level and precision (the design's profile keys; "" when one).
PROFILES = {key: profile_file(key) for key in DESIGN.profile_keys()}
DEVICE_PROFILES = list(PROFILES.values()) if MEASURE_PROFILE else []
QUALITY_SETTINGS = quality_settings(config)
# The typed record every trial writes; validated when written and when read.
METRICS_SCHEMA = shipped("workflow", "schemas", "metrics.schema.yaml")


# Computed once: a priority per trial (recomputing the order per job made planning quadratic).
TRIAL_PRIORITY = trial_priorities(EXPECTED, STUDY["seed"], STUDY["run_order"])


def train_priority(wildcards):
    return TRIAL_PRIORITY[(wildcards.cell, int(wildcards.trial))]


def cell_of(wildcards):
    return DESIGN.cell(wildcards.cell)


def trial_runtime(wildcards):
    """A trial's time limit in minutes (SLURM's --time), from the plan's estimate of its length (plan.*)."""
    from tokenwatt.plan.preview import trial_runtime_min

    cell = cell_of(wildcards)
    return trial_runtime_min(
        cell.budget, DESIGN.train_config(cell)["epochs"], config["plan"]
    )


def trial_inputs(wildcards):
    cell = cell_of(wildcards)
    tok = DESIGN.tokenizer_key(cell)
    return {
        "subset": subset_file(tok, cell.budget, wildcards.trial),
        "train": data_file(tok, "chunks_train.parquet"),
        "eval": data_file(tok, "chunks_eval.parquet"),
        "tokenizer": data_file(tok, "tokenizer"),
    }


def hardware_resources(cell_for):
    """The scheduler resources the design's hardware levels set (gpu_model, slurm_partition, constraint),
    each a function of the job's wildcards; "" where a level leaves one unset (the executor ignores it).
    """
    names = sorted({name for c in DESIGN.cells for name in DESIGN.resources(c)})
    return {
        name: (
            lambda wildcards, name=name: DESIGN.resources(cell_for(wildcards)).get(
                name, ""
            )
        )
        for name in names
    }


# --- the pre-flight check (tokenwatt/plan/preflight.py): what this machine cannot do for the study, said before any job
def _preflight_machine():
    from tokenwatt.plan.preflight import machine_findings

    devices = [DESIGN.train_config(c)["device"] for c in DESIGN.cells]
    return machine_findings(config["meter"], devices)


def _preflight_files(planned):
    """The findings about files: the local corpus (when its job is planned), the results folder and its free disk."""
    from tokenwatt.plan.preflight import (
        free_disk,
        local_corpus_files,
        planned_bytes,
        results_folder,
    )

    local = (
        config["corpus"]["local"]["files"]
        if config["corpus"]["source"] == "local"
        else []
    )
    found = local_corpus_files(local) if planned.get("corpus") else []
    if found := found + results_folder(RESULTS):
        return found
    sizes = sum(os.path.getsize(f) for f in local if os.path.isfile(f))
    return free_disk(RESULTS, planned_bytes(planned, sizes))


def preflight_refuse():
    """At the start of a real run (onstart, once the jobs to run are known): refuse before any job what this machine
    cannot do for them; the device and meter only where the jobs run here (a cluster's node checks its own).
    """
    import collections

    planned = collections.Counter(job.rule.name for job in workflow.dag.needrun_jobs())
    found = _preflight_files(planned)
    if workflow.local_exec and (
        planned.get("train_trial") or planned.get("device_profile")
    ):
        found += _preflight_machine()
    if found:
        from tokenwatt.plan.preflight import report

        raise WorkflowError(
            "tokenwatt cannot start this study here:\n  " + report(found)
        )


_OUTPUT = workflow.output_settings  # None where Snakemake only parses (--lint)
if workflow.is_main_process and _OUTPUT is not None:
    # A failed job's sentence once on the terminal: where Snakemake prints a failed job's log itself (the rich logger
    # always, the plain one with --show-failed-logs), the job does not print it too (tokenwatt.common.files.logged).
    from tokenwatt.common.files import LOG_SHOWN_ENV

    _shown = _OUTPUT.show_failed_logs or "rich" in _OUTPUT.log_handler_settings
    os.environ[LOG_SHOWN_ENV] = "1" if _shown else "0"
    if _OUTPUT.dryrun:
        # A plan is made on any machine (a laptop, a cluster's login node): what this one lacks is said, not refused.
        for _found in _preflight_files({"corpus": 1}) + _preflight_machine():
            _where = (
                " (under a cluster executor, the node's job checks this)"
                if _found.on_node
                else ""
            )
            print(
                f"WARNING: this machine cannot run the study as configured (a dry run is fine): {_found.sentence}{_where}",
                file=sys.stderr,
            )


def _finished_trials():
    """Finished trials' records for the cost preview; an unreadable one is named, never fatal here,
    so -n, --summary and --unlock still work (aggregation reports it with the fix)."""
    from tokenwatt.common.files import read_json

    found = {}
    for c, t in EXPECTED:
        path = Path(trial_metrics(c, t))
        if path.exists():
            try:
                found[(c, t)] = read_json(path)
            except (ValueError, OSError) as err:
                logger.warning(
                    f"{path} is unreadable ({err}); delete it and rerun: its trial is restored from the store, "
                    "or trained again if the store has none"
                )
    return found


if workflow.is_main_process:
    from tokenwatt.plan.preview import cost_preview

    logger.info(
        cost_preview(
            {(c, t): DESIGN.budget_of(c) for c, t in EXPECTED},
            DESIGN.shape(),
            config["train"]["epochs"],
            _finished_trials(),
            config["cost"],
            config["plan"],
        )
    )
    if (note := DESIGN.compile_note()) is not None:
        logger.info(note)


def forced_jobs_noted(wildcards):
    """An input function of every rule that restores from the result store (tokenwatt/common/store.py); it adds no
    input. Building the DAG calls it before any job runs, in a project that uses tokenwatt as a module too, whose
    onstart Snakemake never calls: the jobs the user forced (--forcerun/-R, -F, -f) compute again rather than restore,
    so a trial forced to be measured again is measured again. Passed in the environment, which every job inherits (a
    local script, an sbatch job: --export=ALL); a job's own Snakemake (on a cluster node) keeps what it inherited.
    """
    if workflow.is_main_process:
        _note_forced_jobs()
    return []


@functools.cache
def _note_forced_jobs():
    """Once per run: the settings are the same for every job."""
    from tokenwatt.common.store import FORCED_ENV, forced_spec

    settings = workflow.dag_settings
    os.environ[FORCED_ENV] = forced_spec(
        settings.forceall,
        settings.forcerun,
        settings.targets if settings.forcetargets else (),
        [r.name for r in workflow.rules],
    )


def warn_if_report_is_stale():
    """After a failed run, say whether results/report.html describes another config (it is kept, not deleted)."""
    import re

    for page in (Path(res("report.html")), Path(interim_path("report.html"))):
        if page.exists():
            found = re.search(
                r'name="tokenwatt-config-hash" content="([0-9a-f]+)"',
                page.read_text(encoding="utf-8")[:4000],
            )
            if found is None or found.group(1) != CONFIG_HASH:
                logger.warning(
                    f"{page} was made from another config than this run's (config hash "
                    f"{found.group(1) if found else 'unknown'}, now {CONFIG_HASH}); it does not show this study"
                )
