# Before any job: the pre-flight check (what this machine cannot do for the study, refused at the start of a run
# and warned in a dry run; in a project that uses tokenwatt as a module too), the plan's cost preview, the jobs the
# user forced (computed again, never restored) and a report left from another config. Included last by common.smk:
# it reads its paths and the design.
import functools
import os
import sys
from pathlib import Path


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


# The rules whose planned jobs the checks weigh: the corpus's files, the outputs' room, the training device and meter.
_WEIGHED_RULES = ("corpus", "subset", "device_profile", "train_trial")


def _planned():
    """The jobs this run will run, by rule, under tokenwatt's own names (a project may rename them: `as tw_*`)."""
    import collections

    own = {
        getattr(rules, name).rule.name: name
        for name in _WEIGHED_RULES
        if rules.has(name)
    }
    return collections.Counter(
        own.get(job.rule.name, job.rule.name) for job in workflow.dag.needrun_jobs()
    )


@functools.cache
def preflight_refuse():
    """At the start of a real run (onstart, once the jobs to run are known): refuse before any job what this machine
    cannot do for them; the device and meter only where the jobs run here (a cluster's node checks its own). Once
    per run: a project that uses tokenwatt as a module may call it from its own onstart after tokenwatt did.
    """
    planned = _planned()
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
    from tokenwatt.plan.preview import cost_preview, workload_key

    logger.info(
        cost_preview(
            {(c, t): DESIGN.budget_of(c) for c, t in EXPECTED},
            DESIGN.shape(),
            config["train"]["epochs"],
            _finished_trials(),
            config["cost"],
            PILOT,
            workload_key(config),
        )
    )
    if PILOT_NOTE is not None:
        logger.info(PILOT_NOTE)
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
    return start_checked(wildcards)


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


# Read as a module of another workflow (`module tokenwatt: ...`): Snakemake runs the main Snakefile's onstart only.
_IN_A_MODULE = not workflow.modifier.is_main_snakefile()


def start_checked(wildcards):
    """An input function of the rules whose jobs come first (corpus; through forced_jobs_noted the tokenizer's, the
    subsets' and the training's); it adds no input. In a project that uses tokenwatt as a module, Snakemake would
    never run tokenwatt's onstart, and what the start checks refuse would fail a job later. Building the DAG calls this
    once the project's Snakefile is read, before any job: the checks are put before the project's own onstart handler
    (Snakemake's empty one when it has none), so that they run when the jobs to run are known, as they do here.
    """
    if workflow.is_main_process and _IN_A_MODULE:
        _start_checks_before_the_projects_onstart()
    return []


@functools.cache
def _start_checks_before_the_projects_onstart():
    # The handler Snakemake calls at the start of a real run (never with --no-hooks).
    projects = workflow._onstart

    def onstart(log):
        refuse_missing_downloads()
        preflight_refuse()
        projects(log)

    workflow._onstart = onstart


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
