# Shared helpers: validated config, every output path, code digests and run order.
import mimetypes
import sys
from pathlib import Path

# Parquet's registered media type; without it `snakemake --report` assumes text/plain and says so.
mimetypes.add_type("application/vnd.apache.parquet", ".parquet")

SCRIPTS = Path(workflow.basedir) / "workflow" / "scripts"
sys.path.insert(0, str(SCRIPTS))

from tokenwatt.codeclosure import code_digest as _closure_digest  # noqa: E402
from tokenwatt.config import ConfigError, config_hash, load_schema, validate_config  # noqa: E402
from tokenwatt.measures import FIGURES  # noqa: E402
from tokenwatt.quality import quality_settings  # noqa: E402
from tokenwatt.runorder import trial_priorities  # noqa: E402

try:
    _validated = validate_config(config, load_schema(Path(workflow.basedir) / "workflow/schemas/config.schema.yaml"))
except ConfigError as err:
    raise WorkflowError(str(err)) from None
# Replaced, not updated: update() would keep the user's key order, and params compare by it.
config.clear()
config.update(_validated)

STUDY = config["study"]
BUDGETS = sorted(STUDY["budgets"])
TRIALS = list(range(1, STUDY["trials"] + 1))
RESULTS = config["results"]
CONFIG_HASH = config_hash(config)


wildcard_constraints:
    budget=r"\d+",
    trial=r"\d+",
    split=r"train|eval",


def res(*parts):
    """Every output lives under the configured results folder."""
    return str(Path(RESULTS, *parts))


def logfile(rule_name, *wildcard_parts):
    return res("logs", rule_name, *wildcard_parts) + ".log"


def code_digest(script):
    """Digest of a rule's script and every library module it imports (its import closure).

    Snakemake cannot see modules a script imports; passing this as a param makes an
    edit to them a rerun trigger (and part of the between-workflow cache key).
    """
    return _closure_digest(SCRIPTS / script, SCRIPTS)


def trial_files(budget, trial):
    prefix = res("trials", f"b{budget}", f"t{trial}") + "/"
    return [prefix + name for name in ("metrics.json", "power.parquet", "steps.parquet")]


def trial_metrics(budget, trial):
    return trial_files(budget, trial)[0]


def corpus_inputs(wildcards):
    source = config["corpus"]["source"]
    if source == "synthetic":
        return [config["corpus"]["synthetic"]["grammar"]]
    if source == "local":
        return config["corpus"]["local"]["files"]
    return []


# Every (budget, trial) the study runs; the trial is the subject of the repeated-measures design.
EXPECTED = [(b, t) for b in BUDGETS for t in TRIALS]
# The trial whose power trace the figures show for each budget.
TRACE_KEYS = [(b, TRIALS[0]) for b in BUDGETS]

DATA_TARGETS = [res("data", "chunks_eval.parquet")] + [
    res("subsets", f"b{b}", f"t{t}.json") for b in BUDGETS for t in TRIALS
]
TRIAL_TARGETS = [f for b, t in EXPECTED for f in trial_files(b, t)]
# Trial outputs too, so a deleted power.parquet or metrics.json is rebuilt by the default target.
ALL_TARGETS = [res("report.html"), *TRIAL_TARGETS]

# --- the interim report (interim.smk): finished trials only, never retrained
def finished():
    """(budget, trial) of every trial whose metrics.json exists now (written last, so its trace files exist too)."""
    return [(b, t) for b, t in EXPECTED if Path(trial_metrics(b, t)).exists()]


def finished_files(kind):
    # ancient(): a finished trial is read as it is, never retrained for this report
    return lambda wildcards: [ancient(trial_files(b, t)[kind]) for b, t in finished()]


def interim_path(*parts):
    return res("interim", *parts)


def existing_profile(wildcards):
    return [DEVICE_PROFILE] if MEASURE_PROFILE and Path(DEVICE_PROFILE).exists() else []


def interim_traces():
    """Per budget, the power trace of its first finished trial."""
    first = {}
    for b, t in finished():
        first.setdefault(b, t)
    return sorted(first.items())


# Subsets outrank every trial so that a budget the corpus cannot fill fails before any
# training starts (the scheduler runs ready jobs by priority); the device profile outranks
# everything, so CS_TFLOPS is measured before any trial heats the device.
SUBSET_PRIORITY = len(BUDGETS) * len(TRIALS) + 1
PROFILE_PRIORITY = SUBSET_PRIORITY + 1
MEASURE_PROFILE = config["metric"]["cs_tflops"] == "measure"
DEVICE_PROFILE = res("device", "profile.json")
QUALITY_SETTINGS = quality_settings(config)
# The typed record every trial writes; validated when written and when read.
METRICS_SCHEMA = "workflow/schemas/metrics.schema.yaml"


# Computed once: a priority per trial (recomputing the order per job made planning quadratic).
TRIAL_PRIORITY = trial_priorities(BUDGETS, TRIALS, STUDY["seed"], STUDY["run_order"])


def train_priority(wildcards):
    return TRIAL_PRIORITY[(int(wildcards.budget), int(wildcards.trial))]


def _finished_trials():
    """Finished trials' records for the cost preview; an unreadable one is named, never fatal here,
    so -n, --summary and --unlock still work (aggregation reports it with the fix)."""
    from tokenwatt.files import read_json

    found = {}
    for b, t in EXPECTED:
        path = Path(trial_metrics(b, t))
        if path.exists():
            try:
                found[(b, t)] = read_json(path)
            except (ValueError, OSError) as err:
                logger.warning(f"{path} is unreadable ({err}); delete it and rerun to train that trial again")
    return found


if workflow.is_main_process:
    from tokenwatt.preview import cost_preview

    logger.info(cost_preview(BUDGETS, TRIALS, config["train"]["epochs"], _finished_trials(), config["cost"]))


def warn_if_report_is_stale():
    """After a failed run, say whether results/report.html describes another config (it is kept, not deleted)."""
    import re

    for page in (Path(res("report.html")), Path(interim_path("report.html"))):
        if page.exists():
            found = re.search(r'name="tokenwatt-config-hash" content="([0-9a-f]+)"', page.read_text(encoding="utf-8")[:4000])
            if found is None or found.group(1) != CONFIG_HASH:
                logger.warning(f"{page} was made from another config than this run's (config hash "
                               f"{found.group(1) if found else 'unknown'}, now {CONFIG_HASH}); it does not show this study")
