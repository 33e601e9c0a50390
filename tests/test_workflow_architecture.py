"""The tiny study crossed with the model family (design.architecture) through Snakemake to its report: every family at
the tiny study's one named size, each counted in its own FLOPs, and the factor read by the analyses as any other."""

import json

import polars as pl
import pytest
from tokenwatt.analysis.efficiency import flops_per_token
from tokenwatt.plan.architectures import MATCH_TOLERANCE
from workflow_helpers import clone, snakemake

# one worker runs the module's tests, which read the study it builds once (conftest.py)
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("families")]
FAMILIES = ["llama", "gpt-neox", "mamba"]
ARGS = ["--configfile", ".test/config/config.yaml", "architecture.yaml"]
# The tiny study's smaller budget alone: every family's three trial ids, the fewest the RM-ANOVA takes; how the factor
# crosses the budget is read as any factor's is (test_workflow_design.py's two-way study).
FAMILIES_AT_ONE_BUDGET = f"design: {{architecture: [{', '.join(FAMILIES)}]}}\nstudy: {{name: families, seed: 11, budgets: [1000], trials: 3}}\n"


@pytest.fixture(scope="module")
def families(built):
    def run(folder):
        work = clone(folder)
        (work / "architecture.yaml").write_text(FAMILIES_AT_ONE_BUDGET)
        proc = snakemake(work, *ARGS, "--cores", "2", "--resources", "gpu=1")
        (folder / "terminal.txt").write_text(proc.stdout + proc.stderr)

    return built("architecture", run)


def _trials(work):
    return pl.read_parquet(work / "results/analysis/trials.parquet")


def test_every_family_trains_at_the_named_size_in_a_folder_of_its_own(families):
    record = json.loads((families / "results/trials/architecture=mamba/b1000/t1/metrics.json").read_text())
    assert (record["levels"], record["family"]) == ({"architecture": "mamba"}, "mamba")
    trials = _trials(families)
    assert trials.height == 9 and trials["levels_architecture"].unique(maintain_order=True).to_list() == FAMILIES
    sizes = trials.group_by("family", maintain_order=True).agg(
        (pl.col("params") - 2 * pl.col("embedding_params")).first().alias("n")
    )
    assert sizes["family"].to_list() == FAMILIES
    assert all(abs(n / sizes["n"][0] - 1) <= MATCH_TOLERANCE for n in sizes["n"])


def test_each_trials_flops_are_its_familys_own_count(families):
    trials = _trials(families)
    for row in trials.iter_rows(named=True):
        assert row["flops"] == flops_per_token(row, row["context"]).times(row["padded_tokens"] or row["real_tokens"])
    per_token = trials.group_by("family").agg((pl.col("flops") / pl.col("padded_tokens")).first()).rows()
    assert len({round(v) for _, v in per_token}) == 3  # three counts, not one 6N


def test_the_analyses_read_the_family_as_a_factor_and_the_report_shows_it(families):
    stats = json.loads((families / "results/analysis/stats.json").read_text())
    assert [e["effect"] for e in stats["anova"]["pe"]["effects"]] == ["architecture"]
    page = (families / "results/report.html").read_text()
    assert "crossed with architecture: llama, gpt-neox, mamba" in page and "architecture mamba, 1K" in page
    terminal = (families / "terminal.txt").read_text()
    assert "tokenwatt plan: 1 budget × 3 architecture levels × 3 trials = 9 trials" in terminal
