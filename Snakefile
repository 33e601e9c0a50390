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


rule all:
    input:
        ALL_TARGETS,
    default_target: True


rule data:
    input:
        DATA_TARGETS,


onstart:
    refuse_missing_downloads()


onerror:
    warn_if_report_is_stale()
