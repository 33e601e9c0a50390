# Before any job (tokenwatt/plan/startup.py): the pre-flight check, refused at the start of a run and warned in a dry
# run, in a project that uses tokenwatt as a module too; the plan's cost preview; the jobs the user forced (computed
# again, never restored); after a failed run, a report left from another config. Here only what needs Snakemake's own
# objects: which jobs this run will run, whether it is a dry run, and its hooks.
import functools
import os
import sys

from tokenwatt.plan import startup


@functools.cache
def start_checks():
    """At the start of a real run (onstart, once the jobs to run are known): refuse before any job what this machine
    cannot do for them. Once per run: a project that uses tokenwatt as a module may call it from its own onstart after
    tokenwatt did."""
    planned = startup.planned_by_rule(workflow.dag.needrun_jobs(), rules)
    if why := startup.interim_refusal(planned, interim_rules(), asked_interim_only()):
        # the sentence alone, after the job table the logger prints: this rule file's line would say nothing to act on
        logger.error(why)
        sys.exit(1)
    # --resources gpu=N (absent: not limited); Snakemake 9 keeps a Resource, earlier a number
    gpus = workflow.global_resources.get("gpu")
    gpus = getattr(gpus, "value", gpus)
    if why := startup.refusal(
        STUDY, planned, workflow.local_exec, DOWNLOADS_NEEDED, gpus
    ):
        raise WorkflowError(why)


def interim_rules():
    """The interim report's rules by the names Snakemake runs them under (a project may rename them: ``as tw_*``)."""
    own = ["interim", "interim_aggregate", "interim_report"]
    own += [f"interim_{p.name}" for p in STUDY.products]
    own += [f"interim_{p.name}_figures" for p in STUDY.products if p.figures]
    return {getattr(rules, name).rule.name for name in own if rules.has(name)}


def asked_interim_only():
    """Whether the run's targets are the interim report's alone: its rules, or files under results/interim/."""
    targets, folder = workflow.dag_settings.targets, LAYOUT.interim() + os.sep
    return bool(targets) and all(
        t in interim_rules() or os.path.normpath(t).startswith(folder) for t in targets
    )


def forced_jobs_noted(wildcards):
    """An input function of every rule that restores from the result store (tokenwatt/common/store.py); it adds no
    input. Building the DAG calls it before any job runs, in a project that uses tokenwatt as a module too, whose
    onstart Snakemake never calls: the jobs the user forced (--forcerun/-R, -F, -f) compute again rather than restore,
    so a trial forced to be measured again is measured again. Passed in the environment, which every job inherits (a
    local script, an sbatch job: --export=ALL); a job's own Snakemake (on a cluster node) keeps what it inherited.
    """
    if workflow.is_main_process:
        _note_forced_jobs()
    return start_checked(wildcards)


@functools.cache
def _note_forced_jobs():
    from tokenwatt.common.store import FORCED_ENV, forced_spec

    settings = workflow.dag_settings
    os.environ[FORCED_ENV] = forced_spec(
        settings.forceall,
        settings.forcerun,
        settings.targets if settings.forcetargets else (),
        [r.name for r in workflow.rules],
    )


def start_checked(wildcards, in_a_module=not workflow.modifier.is_main_snakefile()):
    """An input function of the rules whose jobs come first (corpus; through forced_jobs_noted the tokenizer's, the
    subsets' and the training's); it adds no input. ``in_a_module`` is decided while this file is read (Snakemake
    forgets a module's modifier once the module is read). Read as a module of another workflow, tokenwatt's onstart never
    runs (Snakemake runs the main Snakefile's only), and what the start checks refuse would fail a job later. Building
    the DAG calls this once the project's Snakefile is read, before any job: the checks are put before the project's
    own onstart handler (Snakemake's empty one when it has none), so that they run when the jobs to run are known.
    """
    if workflow.is_main_process and in_a_module:
        _start_checks_before_the_projects_onstart()
    return []


@functools.cache
def _start_checks_before_the_projects_onstart():
    # Snakemake has no public hook for a module's start: its handler of a real run (never with --no-hooks) is
    # wrapped, the one place a module's checks can run once the jobs are known and before any job.
    projects = workflow._onstart

    def onstart(log):
        start_checks()
        projects(log)

    workflow._onstart = onstart


def _said_at_parse():
    """What the main Snakemake says once it has read the study (a job's own Snakemake, on a node, says nothing)."""
    output = workflow.output_settings  # None where Snakemake only parses (--lint)
    if output is not None:
        # A failed job's sentence once on the terminal: where Snakemake prints a failed job's log itself (the rich
        # logger always, the plain one with --show-failed-logs), the job does not print it too (common.files.logged).
        from tokenwatt.common.files import LOG_SHOWN_ENV

        shown = output.show_failed_logs or "rich" in output.log_handler_settings
        os.environ[LOG_SHOWN_ENV] = "1" if shown else "0"
        # a cluster's login node only plans and submits: the device and meter are the nodes' to check
        remote = startup.submits_only(startup.intended_executor())
        # a halving study whose first round alone the budget cannot pay for, in a dry run and a real run alike
        if why := startup.halving_refusal(STUDY):
            stop_before_any_job(why)
        if output.dryrun:
            # a plan whose budgets the corpus on disk cannot fill is refused here; a real run, at its start checks
            if why := startup.corpus_refusal(STUDY):
                stop_before_any_job(why)
            for warning in startup.dry_run_warnings(STUDY, remote):
                print(warning, file=sys.stderr)
        if remote:
            for line in startup.runtime_lines(STUDY):
                logger.info(line)
    lines, warnings = startup.preview(STUDY)
    for warning in warnings:
        logger.warning(warning)
    for line in lines:
        logger.info(line)


if workflow.is_main_process:
    _said_at_parse()
