"""The tiny study crossed with the optimizer (design.optimizer) through Snakemake to its report: each level trains in a
folder of its own, records the bytes its state holds and its peak memory, and the report shows memory beside energy."""

import json

import polars as pl
import pytest
from workflow_helpers import clone, snakemake

# one worker runs the module's tests, which read the study it builds once (conftest.py)
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("optimizer")]
ARGS = ["--configfile", ".test/config/config.yaml", "optimizer.yaml"]


@pytest.fixture(scope="module")
def optimizer_study(built):
    def run(folder):
        work = clone(folder)
        # the tiny study's smaller budget alone: what is read is each level's record, table rows and report
        (work / "optimizer.yaml").write_text(
            "design: {optimizer: [adamw, adamw-8bit]}\nstudy: {name: optimizers, seed: 11, budgets: [1000], trials: 3}\n"
        )
        proc = snakemake(work, *ARGS, "--cores", "2", "--resources", "gpu=1")
        (folder / "terminal.txt").write_text(proc.stdout + proc.stderr)

    return built("optimizer", run)


def test_each_level_trains_in_its_folder_and_records_its_state_and_peak_memory(optimizer_study):
    record = json.loads((optimizer_study / "results/trials/optimizer=adamw-8bit/b1000/t1/metrics.json").read_text())
    assert record["levels"] == {"optimizer": "adamw-8bit"} and record["optimizer"] == "torchao.AdamW8bit"
    trials = pl.read_parquet(optimizer_study / "results/analysis/trials.parquet")
    assert trials["levels_optimizer"].unique(maintain_order=True).to_list() == ["adamw", "adamw-8bit"]
    # the tiny study's tensors are too small for torchao to quantize (under 4 096 values, or not a multiple of its
    # 256-value block: the 300 × 16 embedding), so both keep fp32 moments; the quantized bytes: test_optimizers.py
    per_level = dict(
        trials.group_by("levels_optimizer").agg(pl.col("optimizer_state_bytes_per_parameter").max()).rows()
    )
    assert per_level["adamw"] == pytest.approx(per_level["adamw-8bit"], rel=0.01) and 8 <= per_level["adamw"] < 8.1
    floor = pl.col("model_bytes") + pl.col("gradient_bytes") + pl.col("optimizer_state_bytes")
    assert trials.select((pl.col("peak_memory_bytes") > floor).all()).item()


def test_the_analysis_and_the_report_show_memory_by_optimizer(optimizer_study):
    conditions = pl.read_csv(optimizer_study / "results/analysis/conditions.csv")
    memory = conditions.filter(pl.col("measure") == "optimizer_state_bytes")
    assert sorted(memory["series"].unique().to_list()) == ["optimizer=adamw", "optimizer=adamw-8bit"]
    page = (optimizer_study / "results/report.html").read_text()
    assert "crossed with optimizer: adamw, adamw-8bit" in page and "Peak memory" in page
    terminal = (optimizer_study / "terminal.txt").read_text()
    assert "× 2 optimizer levels ×" in terminal
