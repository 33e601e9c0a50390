# tokenwatt: how does the number of training tokens change energy-aware parameter
# efficiency? One DAG from corpus to report; see README.md and config/README.md.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/corpus.smk"
include: "workflow/rules/tokens.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/interim.smk"


# Every file a user reads, so the default target rebuilds one that was deleted (Snakemake does not rerun a job for
# a missing output that no job to be run needs): trials and report (ALL_TARGETS), device profiles, analysis, figures.
ANALYSIS_OUTPUTS = [getattr(rules, name).output for name in ("aggregate", "stats", "curves", "scaling", "figures")
                    if rules.has(name)]


rule all:
    input:
        ALL_TARGETS,
        DEVICE_PROFILES,
        ANALYSIS_OUTPUTS,
    default_target: True


rule data:
    input:
        DATA_TARGETS,


onstart:
    refuse_missing_downloads()
    mark_forced_jobs()


onerror:
    warn_if_report_is_stale()
