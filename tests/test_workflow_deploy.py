"""tokenwatt inside someone else's project: as a Snakemake module, and run from another working directory.

Both reuse the shared tiny study's result store (TOKENWATT_STORE), so they restore its trials rather than
train them again: the store's keys hold no path, only what a job depends on."""

import re
import shutil

import pytest
from workflow_helpers import ROOT, copy_project, pin_release, planned_jobs, release, snakemake

pytestmark = pytest.mark.workflow

TINY = (ROOT / ".test" / "config" / "config.yaml").read_text()


def _store(study) -> dict:
    return {"TOKENWATT_STORE": str(study / "results" / "store")}


def test_a_project_using_tokenwatt_as_a_module_gets_its_report_in_its_own_folder(study, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "config.yaml").write_text(TINY)
    (project / "Snakefile").write_text(
        'configfile: "config.yaml"\n\n\n'
        f'module tokenwatt:\n    snakefile:\n        "{ROOT / "workflow" / "Snakefile"}"\n    config:\n        config\n\n\n'
        "use rule * from tokenwatt\n\n\n"
        # tokenwatt's own start and error hooks, which Snakemake runs for the main Snakefile only
        "onstart:\n    tokenwatt.onstart()\n\n\nonerror:\n    tokenwatt.onerror()\n"
    )
    proc = snakemake(project, "--cores", "2", "--resources", "gpu=1", env=_store(study))
    assert (project / "results" / "report.html").stat().st_size > 10_000
    assert len(list((project / "results" / "trials").glob("*/t*/metrics.json"))) == 6
    assert "restored" in proc.stdout + proc.stderr  # from the shared study's store: not trained again


def test_another_working_directory_holds_the_results_and_the_embedded_study_plans_from_there(study, tmp_path):
    snakefile = str(ROOT / "workflow" / "Snakefile")
    bare = tmp_path / "bare"
    bare.mkdir()
    plan = snakemake(bare, "-s", snakefile, "-n")  # no config here: the embedded default study
    assert "tokenwatt plan: 3 budgets × 5 trials" in plan.stdout + plan.stderr
    # The catalog's test layout: a folder with config/config.yaml, run as `--directory .test`.
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "config").mkdir(parents=True)
    (elsewhere / "config" / "config.yaml").write_text(TINY)
    snakemake(
        ROOT, "-s", snakefile, "--directory", str(elsewhere), "--cores", "2", "--resources", "gpu=1", env=_store(study)
    )
    assert (elsewhere / "results" / "report.html").stat().st_size > 10_000


def test_a_project_pinned_to_a_github_release_gets_its_report_with_the_rules_renamed(released):
    assert (released.project / "results" / "report.html").stat().st_size > 10_000
    assert len(list((released.project / "results" / "trials").glob("*/t*/metrics.json"))) == 6
    # each trial's line, found anywhere in the terminal: two jobs that finish together may print on one line
    restored = re.findall(
        r"↺ results/trials/\S+: restored from the store \([^)]*\), nothing trained", released.terminal
    )
    assert len(restored) == 6
    assert "tw_report" in released.terminal  # the renamed rules ran
    assert "ModuleNotFoundError" not in released.terminal


def test_a_new_release_reruns_only_the_jobs_whose_files_changed(released, tmp_path):
    project = copy_project(released.project, tmp_path / "project")
    with open(released.repo / "README.md", "a", encoding="utf-8") as readme:
        readme.write("\nA line that no job reads.\n")
    package = released.repo / "workflow" / "scripts" / "tokenwatt" / "__init__.py"
    version = package.read_text()
    assert '__version__ = "' in version
    package.write_text(re.sub(r'__version__ = "[^"]*"', '__version__ = "1.0.1"', version))  # every rule imports it
    release(released.repo, "v1.0.1")
    pin_release(project, "v1.0.1")
    assert planned_jobs(project, env=released.env) == {}
    report_module = released.repo / "workflow" / "scripts" / "tokenwatt" / "presentation" / "report.py"
    with open(report_module, "a", encoding="utf-8") as module:
        module.write("\nNEW_IN_THIS_RELEASE = 1\n")
    release(released.repo, "v1.0.2")
    pin_release(project, "v1.0.2")
    assert planned_jobs(project, env=released.env) == {"tw_report": 1, "tw_all": 1}
    snakemake(project, "--cores", "1", env=released.env)
    # A caption is an input, not code: a release that changes one reruns the report even when its commit is older
    # than the results (a tag made before this study ran), since the mirror rewrites it with the time of writing.
    with open(released.repo / "workflow" / "report" / "pe_by_budget.rst", "a", encoding="utf-8") as caption:
        caption.write("\nOne more sentence.\n")
    release(released.repo, "v1.0.3", committed="2001-01-01T00:00:00")
    pin_release(project, "v1.0.3")
    # While a run of the old pin holds the folder's lock, the new release may not change the files its jobs read.
    lock = project / ".snakemake" / "locks" / "0.input.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("results/report.html\n")
    refused = snakemake(project, "-n", check=False, env=released.env)
    assert refused.returncode != 0 and "would mix two releases" in refused.stdout + refused.stderr
    lock.unlink()
    assert planned_jobs(project, env=released.env) == {"tw_report": 1, "tw_all": 1}
    # A file one release ships and the next no longer lists leaves the project's mirror with it.
    manifest = released.repo / "workflow" / "MANIFEST.txt"
    listed = manifest.read_text()
    (released.repo / "resources" / "extra.json").write_text("{}\n")
    manifest.write_text(listed + "resources/extra.json\n")
    release(released.repo, "v1.0.4")
    pin_release(project, "v1.0.4")
    planned_jobs(project, env=released.env)
    mirrored = project / ".snakemake" / "tokenwatt" / "resources" / "extra.json"
    assert mirrored.read_text() == "{}\n"
    (released.repo / "resources" / "extra.json").unlink()
    manifest.write_text(listed)
    release(released.repo, "v1.0.5")
    pin_release(project, "v1.0.5")
    planned_jobs(project, env=released.env)
    assert not mirrored.exists() and (mirrored.parent / "story_grammar.json").exists()


def test_a_trial_rule_forced_by_its_new_name_is_measured_again_not_restored(released, study, tmp_path):
    project = copy_project(released.project, tmp_path / "project")
    # a copy of the store, which the new measurement replaces: other tests restore the shared one's trials
    store = shutil.copytree(study / "results" / "store", tmp_path / "store")
    metrics = project / "results" / "trials" / "b1000" / "t1" / "metrics.json"
    before = metrics.read_bytes()
    forced = snakemake(
        project,
        "--cores",
        "1",
        "--forcerun",
        "tw_train_trial",
        "--",
        str(metrics.relative_to(project)),
        env={**released.env, "TOKENWATT_STORE": str(store)},
    )
    assert "↺" not in forced.stdout + forced.stderr and metrics.read_bytes() != before
