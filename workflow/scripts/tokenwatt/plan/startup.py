"""What a run says and checks before any job: the pre-flight check (what this machine cannot do for the study, refused
at the start of a run and warned in a dry run), the plan's cost preview, and after a failed run a report left from
another config. Functions of the study and plain values; rules/preflight.smk hands them what Snakemake knows (the
jobs a run will run, whether it is a dry run) and raises or logs what they return.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..common.files import read_json, traceback_file
from . import allocation, capacity, disk, optimizers, preflight
from .design import condition_name
from .memory import memory_warnings
from .preview import RUNTIME_UNKNOWN_MIN, cost_preview, own_job, planned_rate, shared_process_note, workload_key
from .study import Study

# The rules whose planned jobs the checks weigh: the corpus's files, the outputs' room, the training device and meter.
WEIGHED_RULES = ("corpus", "subset", "device_profile", "train_trial")

# Trial ids a paired ratio needs measured under both conditions (analysis.curves.censored.MIN_EXACT_PAIRS: with two,
# the censored-normal likelihood has no maximum); a test holds the two equal.
MIN_PAIRED_TRIALS = 3


def _machine(study: Study) -> list[preflight.Finding]:
    devices: dict[str, int] = {}
    for cell in study.design.cells:  # each training device, and the most devices its trials ask for
        device = study.design.train_config(cell)["device"]
        devices[device] = max(devices.get(device, 1), study.design.devices(cell))
    found = preflight.machine_findings(study.config["meter"], devices)
    problems = optimizers.machine_problems(study.config, trains_on_gpu(study))
    return found + [preflight.Finding(key, sentence, on_node=True) for key, sentence in problems]


def _files(study: Study, planned: Mapping[str, int]) -> list[preflight.Finding]:
    """The findings about files: the local corpus (when its job is planned), the results folder and its free disk."""
    corpus = study.config["corpus"]
    local = corpus["local"]["files"] if corpus["source"] == "local" else []
    found = preflight.local_corpus_files(local) if planned.get("corpus") else []
    if corpus["source"] == "package" and planned.get("corpus"):
        found += preflight.package_corpus(corpus["package"]["distributions"], corpus["package"]["files"])
    if found := found + preflight.results_folder(study.layout.root):
        return found
    return preflight.free_disk(study.layout.root, disk_plan_of(study, planned))


def disk_plan_of(study: Study, planned: Mapping[str, int]) -> disk.DiskPlan:
    """What the planned jobs will write (``disk``): the data stage from the corpus's files, and the trials to run, taken
    as the largest of the design's (the count is known here, not which)."""
    corpus, design = study.config["corpus"], study.design
    read = study.corpus_inputs() if corpus["source"] in ("local", "package") else []
    cuda = any(design.train_config(c)["device"] == "auto" for c in design.cells) and preflight.visible_cuda_devices()
    trials = []
    for cell_id, _ in study.layout.expected:
        cell = design.cell(cell_id)
        train = design.train_config(cell)
        params = disk.model_parameters(design.model_config(cell), design.tokenizer_config(design.tokenizer_key(cell)))
        kind = "cuda" if train["device"].startswith("cuda") or (train["device"] == "auto" and cuda) else "cpu"
        trials.append((params, design.tokens(cell) * train["epochs"], kind))
    interval = study.config["meter"]["interval_s"]
    trials.sort(key=lambda t: disk.trial_seconds(t[0], t[1], t[2], study.pilot), reverse=True)
    return disk.disk_plan(
        planned,
        disk.corpus_characters(corpus, read),
        len(design.factors.get("selection", {})),
        trials[: planned.get("train_trial", 0)],
        study.pilot,
        interval,
        "the Hub corpus's data stage (its size is not known before it downloads)"
        if corpus["source"] == "hf" and planned.get("corpus")
        else None,
        keep_checkpoints=bool(study.config["train"].get("keep_checkpoint")),
    )


def corpus_refusal(study: Study) -> str | None:
    """Why the corpus's training chunks on disk cannot fill the study's budgets, or None (``capacity``): a plan, a
    dry run's included, is refused, since every trial of that budget would fail at its subset."""
    refusals, _ = capacity.corpus_problems(study.config, study.design, study.layout, study.corpus_inputs())
    return "tokenwatt cannot run this plan:\n  " + "\n  ".join(refusals) if refusals else None


def design_warnings(study: Study) -> list[str]:
    """What the config asks that the analysis cannot answer, said before any job: budgets above the corpus's estimated
    tokens, fewer trial ids than a paired ratio needs, and cells whose weights, gradients and optimizer state exceed the
    device's memory (``memory``)."""
    _, warnings = capacity.corpus_problems(study.config, study.design, study.layout, study.corpus_inputs())
    trials = study.config["study"]["trials"]
    if trials < MIN_PAIRED_TRIALS and len(study.design.cells) > 1:
        warnings.append(
            f"study.trials is {trials}: a ratio between conditions paired by trial id (energy to a target, PE, "
            f"perplexity) needs at least {MIN_PAIRED_TRIALS} trial ids measured under both, so the report can give "
            f"none; set study.trials to {MIN_PAIRED_TRIALS} or more (5 for intervals of a useful width)"
        )
    return warnings + memory_warnings(study.design, trains_on_gpu(study))


def refusal(
    study: Study, planned: Mapping[str, int], local_exec: bool, downloads: list[str], gpus: int | None = None
) -> str | None:
    """Why a real run cannot start (``planned``: its jobs by tokenwatt's rule names), or None: weights a job would
    download mid-study, then what this machine cannot do for the jobs; the device and meter only where the jobs run
    here (``local_exec``: a cluster's node checks its own). ``gpus``: the run's ``--resources gpu=N`` (None: not
    limited), which a local trial on more devices would wait for forever."""
    if downloads:
        return "tokenwatt cannot start this study:\n  " + "\n  ".join(downloads)
    if (planned.get("subset") or planned.get("train_trial")) and (why := corpus_refusal(study)):
        return why
    found = _files(study, planned)
    if local_exec and (planned.get("train_trial") or planned.get("device_profile")):
        found += _machine(study)
        most = max(study.design.devices(c) for c in study.design.cells)
        if planned.get("train_trial") and gpus is not None and most > gpus:
            found.append(
                preflight.Finding(
                    "train.devices",
                    f"train.devices (or a design.devices level) asks for {most} devices, each trial's job gpu={most}, "
                    f"but this run allows gpu={gpus}: run it with --resources gpu={most}",
                )
            )
    return "tokenwatt cannot start this study here:\n  " + preflight.report(found) if found else None


def interim_refusal(planned: Mapping[str, int], interim: set[str], asked_interim_only: bool) -> str | None:
    """Why a run that asked for the interim report alone (``asked_interim_only``) cannot start, or None: the interim
    report only reads what the study finished (``interim``: its rules' names), and these jobs (``planned``, by rule)
    would run the study's own beside the running study. Snakemake plans them where a file the report reads is one the
    study is remaking (its data stage rerun for a changed config or corpus): nothing of it is finished under this
    config yet."""
    own = {rule: n for rule, n in planned.items() if rule not in interim}
    if not asked_interim_only or not own:
        return None
    jobs = ", ".join(f"{n} {rule}" for rule, n in sorted(own.items()))
    return (
        f"tokenwatt: the interim report runs no job of the study, and now it would run {jobs}: the study is remaking "
        "files its finished trials or data summaries read (its data stage runs, for a changed config or corpus), so "
        "nothing it reads is finished under this config yet; run the interim report again once the study's data "
        "stage is done and a trial has finished (`snakemake -n` lists what the study has left)"
    )


def dry_run_warnings(study: Study, submits_only: bool = False) -> list[str]:
    """A plan is made on any machine (a laptop, a cluster's login node): what this one lacks is said, not refused;
    under a cluster executor (``submits_only``) the device and meter are the nodes' to check, never this machine's."""
    findings = _files(study, {"corpus": 1}) + ([] if submits_only else _machine(study))
    return [
        "WARNING: this machine cannot run the study as configured (a dry run is fine): "
        + f.sentence
        + (" (under a cluster executor, the node's job checks this)" if f.on_node else "")
        for f in findings
    ]


def intended_executor(frame: Any = None) -> str | None:
    """The executor the command line asked for (--executor, or a profile's ``executor:``), or None where Snakemake was
    not started from its command line. Snakemake hands the workflow its executor only when it executes, after the
    Snakefile is read, so a plan would otherwise not know that it is made on a node that only submits: read from the
    command line's parsed arguments, on the stack above this call."""
    frame = frame or sys._getframe(1)
    while frame is not None:
        args = frame.f_locals.get("args") if frame.f_code.co_name == "args_to_api" else None
        if isinstance(getattr(args, "executor", None), str):
            return args.executor
        frame = frame.f_back
    return None


def submits_only(executor: str | None) -> bool:
    """Whether ``executor`` runs the jobs elsewhere (a cluster's: SLURM), so that this machine only plans and submits."""
    if executor in (None, "local", "dryrun", "touch"):
        return False
    try:
        from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

        return not ExecutorPluginRegistry().get_plugin(executor).common_settings.local_exec
    except Exception:  # noqa: BLE001 - an executor Snakemake itself will refuse, with its own message
        return False


def runtime_lines(study: Study) -> list[str]:
    """Under a cluster executor: each trial's time limit (the runtime resource, SLURM's --time) as the plan derives it,
    or, with no rate to derive it from, a warning that every trial gets a flat guess."""
    if planned_rate(study.pilot) is None:
        return [
            f"WARNING: every trial's time limit (runtime, SLURM's --time) is a flat {RUNTIME_UNKNOWN_MIN} min, a guess: "
            "no plan.tokens_per_s measured this study's pace. A trial that needs longer is stopped at it (and resumed "
            "from its checkpoint by a retry); measure the pace first (on a GPU: bash benchmarks/gpu_validate.sh "
            "CONFIG.yaml) and set plan.tokens_per_s, or set runtime under the profile's set-resources: train_trial."
        ]
    limits = sorted({study.trial_runtime(c.id) for c in study.design.cells})
    shown = f"{limits[0]} min" if len(limits) == 1 else f"{limits[0]}–{limits[-1]} min"
    return [
        f"Time limits: each trial's runtime (SLURM's --time) is {shown}, derived from the plan's pace "
        f"({planned_rate(study.pilot):,.0f} tokens/s): 1.5 × its estimated seconds + 15 min."
    ]


def preview(study: Study) -> tuple[list[str], list[str]]:
    """The plan's lines (its cost preview, and the pilot's, compile and shared-process notes where there are any) and
    its warnings: one per finished trial's record that cannot be read (named, never fatal here, so -n, --summary and
    --unlock still work; aggregation reports it with the fix), then ``design_warnings``."""
    finished, warnings = {}, []
    for c, t in study.layout.expected:
        path = Path(study.layout.trial(c, t).metrics)
        if path.exists():
            try:
                finished[(c, t)] = read_json(path)
            except (ValueError, OSError) as err:
                warnings.append(
                    f"{path} is unreadable ({err}); delete it and rerun: its trial is restored from the store, "
                    "or trained again if the store has none"
                )
    config, design = study.config, study.design
    trained = design.trained_tokens()
    halving = study.allocation
    # a halving study plans round 0 (every candidate at the first budget); its later rounds, below
    keys = (
        study.layout.expected if halving is None else allocation.round_trials(design, allocation.candidates(design), 0)
    )
    shape = (
        design.shape()
        if halving is None
        else f"round 0 of {len(design.budgets)}: {len(allocation.candidates(design))} candidates × {len(design.trials)} trials"
    )
    lines = [
        cost_preview(
            {(c, t): trained[c] if halving is None else design.tokens(design.cell(c)) for c, t in keys},
            shape,
            config["train"]["epochs"],
            {key: record for key, record in finished.items() if key in set(keys)},
            config["cost"],
            study.pilot,
            workload_key(dict(config)),
            on_gpu=trains_on_gpu(study),
        )
    ]
    if halving is not None:
        lines += halving_plan(study, finished)[0]
    notes = (study.pilot_note, design.compile_note(), shared_process_note(dict(config)))
    lines += [note for note in notes if note is not None]
    return lines, warnings + design_warnings(study)


def halving_plan(study: Study, finished: Mapping[Any, dict[str, Any]]) -> tuple[list[str], str | None]:
    """A halving study's rounds as the plan knows them (plan/allocation.py), each round's energy from the finished
    trials' joules per token, else the pilot's; and why it cannot start (round 0 alone above the budget), or None."""
    halving = study.allocation
    assert halving is not None
    metered = [m for m in map(own_job, finished.values()) if m.get("energy_j") and m.get("real_tokens")]
    if metered:
        rate, origin = (
            statistics.median(m["energy_j"] / m["real_tokens"] for m in metered),
            f"{len(metered)} finished trial(s)",
        )
    elif study.pilot.get("joules_per_token"):
        rate, origin = float(study.pilot["joules_per_token"]), "plan.joules_per_token, a pilot"
    else:
        rate, origin = None, ""
    return allocation.plan_lines(study.design, halving, rate, origin)


def halving_refusal(study: Study) -> str | None:
    """Why a halving study cannot start: its round 0 alone is estimated above its budget by its pilot
    (``halving_plan``). Only before any of its trials has finished: once one has, the rounds' checkpoints keep the
    budget from measured figures, and a resume, an interim report or the final one must not be refused."""
    if study.allocation is None:
        return None
    layout = study.layout
    if any(os.path.exists(layout.trial(c, t).metrics) for c, t in layout.expected):
        return None
    why = halving_plan(study, {})[1]
    return f"tokenwatt cannot run this plan:\n  {why}" if why else None


def trains_on_gpu(study: Study) -> bool:
    """Whether the study's trials train on a GPU as configured (train.device cuda, a hardware level's, or the NVML
    meter), not as this machine would place device auto: the plan is often made where the trials do not run."""
    devices = {study.design.train_config(c)["device"] for c in study.design.cells}
    from ..measurement.kinds import gpu_kind

    return gpu_kind(study.config["meter"]["kind"]) or any(d.startswith("cuda") for d in devices)


def stale_reports(study: Study) -> list[str]:
    """After a failed run: each report (final, interim) that describes another config than this run's; it is kept,
    not deleted, and said."""
    found = []
    for page in (Path(study.layout.report), Path(study.layout.interim("report.html"))):
        if page.exists():
            shown = re.search(
                r'name="tokenwatt-config-hash" content="([0-9a-f]+)"', page.read_text(encoding="utf-8")[:4000]
            )
            if shown is None or shown.group(1) != study.hash:
                found.append(
                    f"{page} was made from another config than this run's (config hash "
                    f"{shown.group(1) if shown else 'unknown'}, now {study.hash}); it does not show this study"
                )
    return found


def _stopped_from_outside(output: str, log: Path) -> bool:
    """A job whose output is missing and whose log has no error of its own: it started (its log exists) and was
    stopped from outside (out of memory, kill -9, the machine or a scheduler); a job that failed on an error of its
    own, which its log and Snakemake already say, or that never started, is not."""
    if os.path.exists(output) or not log.exists():
        return False
    return not traceback_file(log).exists() and "Traceback" not in log.read_text(errors="replace")


def stopped_jobs(study: Study) -> list[str]:
    """After a failed run: each trial and device profile that was stopped from outside, named with the fix."""
    return stopped_profiles(study) + stopped_trials(study)


def stopped_profiles(study: Study) -> list[str]:
    """Each device profile stopped from outside mid-measurement: it has no state to resume, so the rerun measures it
    again from its start."""
    found = []
    for key, output in study.layout.profiles().items():
        log = Path(study.layout.log("device_profile", f"{key}profile"))
        if output in study.device_profiles and _stopped_from_outside(output, log):
            which = f" {key.rstrip('/')}" if key else ""
            found.append(
                f"the device profile{which} was stopped from outside before it "
                f"finished (out of memory, kill -9, or the machine or a scheduler stopped it; its log {log} has no "
                "error of its own): rerun the same command (after `snakemake --unlock` if Snakemake was stopped too) "
                "and it is measured again from its start"
            )
    return found


def stopped_trials(study: Study) -> list[str]:
    """After a failed run: each trial that was stopped from outside mid-training (out of memory, a kill -9, the machine
    or a scheduler): no outputs, no error of its own in its log, a heartbeat of its training. Named with the fix, and
    where the rerun resumes it."""
    found = []
    for cell_id, trial in study.layout.expected:
        folder, log = (
            Path(study.layout.checkpoint(cell_id, trial)),
            Path(study.layout.log("train_trial", cell_id, f"t{trial}")),
        )
        if not (folder / "heartbeat.json").exists() or not _stopped_from_outside(
            study.layout.trial(cell_id, trial).metrics, log
        ):
            continue
        try:
            beat = json.loads((folder / "heartbeat.json").read_text())
        except (OSError, ValueError):
            beat = {}
        # a save it was stopped in: its file became the checkpoint if the staged one is gone (training/resume.py)
        if beat.get("pending") and not (folder / f".state.pt.{beat.get('pid')}.tmp").exists():
            beat = {**beat, **beat["pending"]}
        cell = study.design.cell(cell_id)
        where = (
            f"it resumes from its checkpoint at step {beat['written']['step']}"
            if (folder / "state.pt").exists() and beat.get("written")
            else "it starts again from its first step (no checkpoint had been saved: set train.checkpoint_every)"
        )
        found.append(
            f"{condition_name(cell.series, cell.budget)} trial {trial} was stopped from outside before it finished, "
            f"at step {beat.get('step', '?')} (out of memory, kill -9, or the machine or a scheduler stopped it; its "
            f"log {log} has no error of its own): rerun the same command (after `snakemake --unlock` if Snakemake was "
            f"stopped too) and {where}; the work lost is recorded apart"
        )
    return found


def planned_by_rule(jobs: Any, rules: Any) -> dict[str, int]:
    """The jobs a run will run (``jobs``: Snakemake's needrun jobs), by rule, under tokenwatt's own names (a project
    may rename them: ``as tw_*``; ``rules``: Snakemake's rules namespace)."""
    own = {getattr(rules, name).rule.name: name for name in WEIGHED_RULES if rules.has(name)}
    counts: dict[str, int] = {}
    for job in jobs:
        name = own.get(job.rule.name, job.rule.name)
        counts[name] = counts.get(name, 0) + 1
    return counts
