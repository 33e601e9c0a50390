# Shared helpers: validated config, every output path, code digests and run order. The library comes first:
# mirror.smk finds tokenwatt's own files, fetched from a remote module source or not, and imports from there.
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
    SELECTION_PATTERN,
    TOKENIZER_PATTERN,
    Design,
)  # noqa: E402
from tokenwatt.common.measures import FIGURES, SCALING_FIGURES  # noqa: E402
from tokenwatt.analysis.products import (
    STEP_RECORDS,
    products_of,
    setting,
)  # noqa: E402
from tokenwatt.plan.preview import pilot_of  # noqa: E402
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
# The analyses this study runs after aggregation, in the report's order (one rule each, analysis.smk).
STUDY_PRODUCTS = products_of(config)


wildcard_constraints:
    budget=r"\d+",
    trial=r"\d+",
    split=r"train|eval",
    cell=CELL_PATTERN,
    tok=TOKENIZER_PATTERN,
    sel=SELECTION_PATTERN,
    level=r"[A-Za-z0-9][A-Za-z0-9._-]*",
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


def code_digest(script, *modules):
    """Digest of a rule's script and every library module it imports (its import closure), and of ``modules`` (dotted
    names the script imports at run time: an analysis product's function) with theirs.

    Snakemake cannot see modules a script imports; passing this as a param makes an
    edit to them a rerun trigger (and part of the between-workflow cache key).
    """
    return _closure_digest(SCRIPTS / script, SCRIPTS, modules)


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


def subset_file(tok, sel, budget, trial):
    """A trial's subset of one tokenizer's chunks ({sel}: "" without a selection factor, sel=<level>/ with one)."""
    return res("subsets", f"{tok}{sel}b{budget}", f"t{trial}.json")


def selection_file(level, name):
    """A selection level's step outputs (selection.smk); its training documents are docs_train.parquet."""
    return res("data", f"sel={level}", name)


def profile_file(key):
    return res("device", f"{key}profile.json")


def product_input(file, interim):
    """A file an analysis product reads (tokenwatt.analysis.products): the aggregate's or another product's under
    results/analysis/ (results/interim/analysis/ for the interim twin), or the selection steps' records (the interim
    twin's: those written so far)."""
    if file == STEP_RECORDS:
        return existing(*SELECTION_RECORDS) if interim else SELECTION_RECORDS
    return interim_path("analysis", file) if interim else res("analysis", file)


def product_output(file, interim, category=None):
    """A file an analysis product writes; a table (``category``) is also listed in Snakemake's --report."""
    if interim:
        return interim_path("analysis", file)
    path = res("analysis", file)
    if category is None:
        return path
    stem = file.rsplit(".", 1)[0]
    return report(path, caption=f"../report/{stem}.rst", category=category)


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
    subset_file(tok, sel, b, t)
    for tok, sel in DESIGN.data_keys()
    for b in DESIGN.budgets
    for t in TRIALS
]
TRIAL_TARGETS = [f for c, t in EXPECTED for f in trial_files(c, t)]
# Trial outputs too, so a deleted power.parquet or metrics.json is rebuilt by the default target.
ALL_TARGETS = [res("report.html"), *TRIAL_TARGETS]


include: "interim_paths.smk"


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


# The config's pilot (plan.*), if it measured this study's workload: the plan's time and each trial's time limit.
PILOT, PILOT_NOTE = pilot_of(config)
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
    return trial_runtime_min(cell.budget, DESIGN.train_config(cell)["epochs"], PILOT)


# What a data step's meter window needs (decontamination and the selection steps; selection.meter picks the meter):
# other meter keys rerun none of them.
SELECTION_METER = {
    key: config["meter"][key] for key in ("interval_s", "cpu_tdp_w", "rapl_root")
}


def chunked_documents(wildcards):
    """The documents a chunk job tokenizes: a selection level's training documents ({sel}: sel=<level>/), the
    study's, or the eval documents, chunked once for every level (those that pass selection.eval_filters, if set).
    """
    if wildcards.split == "eval" and EVAL_FILTERS:
        return res("data", "docs_eval_kept.parquet")
    if (
        wildcards.split == "train" and not wildcards.sel
    ):  # cleared of eval copies (a level's are, by its near_dup)
        return res("data", "decontaminated.parquet")
    return res("data", f"{wildcards.sel}docs_{wildcards.split}.parquet")


def trial_inputs(wildcards):
    cell = cell_of(wildcards)
    tok, sel = DESIGN.tokenizer_key(cell), DESIGN.selection_key(cell)
    ordered = DESIGN.ordered_level(cell)
    return {
        "subset": subset_file(tok, sel, cell.budget, wildcards.trial),
        "train": data_file(tok, f"{sel}chunks_train.parquet"),
        "eval": data_file(tok, "chunks_eval.parquet"),
        "tokenizer": data_file(tok, "tokenizer"),
        # a level that trains in an order of its own (as read, or a curriculum): that order, by document
        **(
            {"order": selection_file(ordered, "order.parquet")}
            if ordered is not None
            else {}
        ),
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


# --- params the final rules and their interim twins share (analysis.smk, report.smk, interim.smk)
def aggregate_params(interim):
    """The aggregate rule's params, and its interim twin's: mid-study most subjects are incomplete, so the interim
    report describes every finished trial (the tests use complete ones) and names the rest as not finished yet.
    """
    return dict(
        expected=EXPECTED,
        paths=[trial_metrics(c, t) for c, t in EXPECTED],
        profiles=PROFILES,
        cs_keys=DESIGN.cs_profile_keys(),
        absent="not finished yet" if interim else "no metrics",
        metric=config["metric"],
        quality=QUALITY_SETTINGS,
        cost=config["cost"],
        exclude_flagged=config["quality"]["exclude_flagged"],
        require_complete=not interim,
        code=code_digest("aggregate.py"),
    )


def figures_params(trace_keys):
    """The figures rule's params, and its interim twin's (the traces of the trials finished so far)."""
    return dict(
        trace_keys=trace_keys,
        style=config["figures"],
        currency=config["cost"]["currency"],
        code=code_digest("figures.py"),
    )


# The report imports each product's section by name (Product.section): its code digest names them, as its imports
# do not.
REPORT_SECTIONS = [
    f"tokenwatt.presentation.sections.{p.section}" for p in STUDY_PRODUCTS
]


def report_params(interim):
    """The report rule's params, and the interim report's."""
    return dict(
        config=config,
        config_hash=CONFIG_HASH,
        profiles=PROFILES,
        figure_names=REPORT_FIGURES,
        interim=interim,
        code=code_digest("report.py", *REPORT_SECTIONS),
    )


include: "preflight.smk"
