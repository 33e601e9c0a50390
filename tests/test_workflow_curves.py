"""Energy-to-quality curves through Snakemake: config/trajectory.yaml's protocol scaled down to the tiny data."""

import json

import polars as pl
import pytest
from workflow_helpers import clone, planned_jobs, snakemake

# one worker runs the module's tests, which read the study it builds once (conftest.py)
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("trajectory")]

# The follow-up study's protocol at the tiny study's size: synthetic stories, two budgets, four evaluation points.
SCALED = """
corpus: {source: synthetic, synthetic: {documents: 120, seed: 3}}
split: {eval_documents: 10}
tokenizer: {source: train, vocab_size: 300}
chunk: {length: 16}
study: {name: trajectory scaled down, seed: 5, budgets: [1000, 2000], trials: 3}
model: {source: config, preset: llama-tiny, overrides: {hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1,
        num_attention_heads: 2, num_key_value_heads: 1}}
train: {threads: 1, log_every: 20}
eval: {at_tokens: [300, 600, 900], max_tokens: 64}
meter: {kind: estimate, interval_s: 0.05, idle_seconds: 0.1}
profile: {matmul_size: 256, warmup_s: 0.1, windows: 5, window_s: 0.02, check_windows: 2, attempts: 1}
quality: {min_samples: 3}
analysis: {stopping: {early: {rule: marginal, min_gain_per_kj: 1000000.0, patience: 1}}}
"""
RUN = ["--configfile", "config/trajectory.yaml", "scaled.yaml"]


@pytest.fixture(scope="module")
def trajectory(built):
    def run(folder):
        work = clone(folder)
        (work / "scaled.yaml").write_text(SCALED)
        snakemake(work, *RUN, "--cores", "2", "--resources", "gpu=1")

    return built("trajectory", run)


def test_the_trajectory_config_plans_its_six_seeds_of_twenty_million_tokens_with_their_time_and_energy(tmp_path):
    proc = snakemake(clone(tmp_path / "plan"), "-n", "--configfile", "config/trajectory.yaml")
    out = proc.stdout + proc.stderr
    assert "1 budget × 6 trials = 6 trials" in out and "~120,000,000 of ~120,000,000 training tokens" in out
    # 120 M tokens at the pilot's 3 099 tokens/s plus 6 × 30 s: 10.8 h; at its 0.0209 J/token: 0.6967 kWh (estimated)
    assert "Time: ~10.8 h" in out and "plan.tokens_per_s" in out and "Energy: ~0.6967 kWh" in out


def test_every_trial_has_its_eval_curve_with_energy_at_each_point(trajectory):
    curves = pl.read_parquet(trajectory / "results-trajectory/analysis/curves.parquet")
    assert (
        curves.group_by("cell", "trial").len()["len"].to_list() == [4] * 6
    )  # three scheduled points and the final one
    assert curves["train_energy_j"].null_count() == 0 and curves.filter(pl.col("final")).height == 6


def test_the_report_answers_in_joules_with_the_trajectory_and_the_stopping_rule(trajectory):
    page = (trajectory / "results-trajectory/report.html").read_text()
    result = json.loads((trajectory / "results-trajectory/analysis/curves.json").read_text())
    assert result["status"] == "ok" and result["trajectory"]["anova"] and "early" in result["stopping"]
    assert "Training energy to reach each target" in page and "<h3>Trajectories</h3>" in page
    # that training lowers the loss is no finding: the test stays in curves.json for a replication, not in the page
    assert "RM-ANOVA of eval loss over the points" not in page
    assert "Stopping rule early" in page and "evaluation excluded)" in page


def test_changing_the_targets_reruns_the_curve_analysis_and_the_report_only(trajectory):
    (trajectory / "targets.yaml").write_text(
        "analysis: {targets: [{perplexity: 200.0}], stopping: {early: {rule: marginal, "
        "min_gain_per_kj: 1000000.0, patience: 1}}}\n"
    )
    assert planned_jobs(trajectory, *RUN, "targets.yaml") == {"curves": 1, "report": 1}


# config/scaling.yaml on the tiny data at the fewest trials its fit takes: its five model levels (h16 and h32 made tiny
# here), two of its learning rates (the fewest a tuned rate per size needs), three budgets (the fewest final points
# fit), one trial id (the fit needs none more: the jackknife over trial ids is test_scaling_units.py's and
# test_scaling_study.py's, on crafted records), 4 eval points (its cosine schedule makes the fit take each trial's
# final point only).
SCALING_TINY = """
corpus: {source: synthetic, synthetic: {documents: 120, seed: 3}}
split: {eval_documents: 10}
tokenizer: {source: train, vocab_size: 300}
chunk: {length: 16}
study: {name: scaling scaled down, seed: 5, budgets: [500, 1000, 2000], trials: 1}
design:
  model:
    h16: {preset: llama-tiny, overrides: {hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1}}
    h32: {preset: llama-tiny, overrides: {hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1}}
  lr: [0.003, 0.03]
train: {threads: 1, log_every: 20, run_alone: false}
eval: {points: 4, first_fraction: 0.1, max_tokens: 64}
meter: {kind: estimate, interval_s: 0.05, idle_seconds: 0.1}
profile: {matmul_size: 256, warmup_s: 0.1, windows: 5, window_s: 0.02, check_windows: 2, attempts: 1}
quality: {min_samples: 3}
scaling: {points: first_epoch, energy_budgets: [1.0, 10.0, 100.0], screen_replicates: 39}
"""


@pytest.mark.long
def test_the_scaling_config_fits_its_law_end_to_end_on_the_tiny_data(tmp_path):
    work = clone(tmp_path / "scaling")
    (work / "tiny-scaling.yaml").write_text(SCALING_TINY)
    # two trials at once (train.run_alone false): what this asks is the fit and the report, not the measurement
    snakemake(work, "--configfile", "config/scaling.yaml", "tiny-scaling.yaml", "--cores", "2", "--resources", "gpu=2")
    result = json.loads((work / "results-scaling/analysis/scaling.json").read_text())
    # config/scaling.yaml's five sizes, h16 and h32 made tinier here
    assert (
        result["status"] == "ok" and result["model_sizes"] == 5 and result["units"] == {"trial id": 1, "model size": 5}
    )
    assert result["points"] == "final" and "learning rate decays" in result["points_note"]
    assert len(result["learning_rates"]) == 5 * 3 and result["law_total"]["n_points"] == 5 * 3
    page = (work / "results-scaling/report.html").read_text()
    assert "Learning rate tuned per model size" in page and "Hoffmann et al. 2022" in page
    assert ("The energy-optimal allocation on this hardware" in page) != ("No allocation:" in page)
