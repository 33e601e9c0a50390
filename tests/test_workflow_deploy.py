"""tokenwatt inside someone else's project: as a Snakemake module, and run from another working directory.

Both reuse the shared tiny study's result store (TOKENWATT_STORE), so they restore its trials rather than
train them again: the store's keys hold no path, only what a job depends on."""

import pytest
from workflow_helpers import ROOT, snakemake

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
        "use rule * from tokenwatt\n"
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
