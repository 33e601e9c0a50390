"""The energy-to-target command: any table of eval points in, the workflow's censored medians and paired ratios out."""

import json
import math

import polars as pl
import pytest
from curve_study import budget_study
from tokenwatt.analysis.curves.targets import energy_to_target, energy_to_target_comparisons, energy_to_target_summary
from workflow_helpers import run_script

COLUMNS = ("--condition", "budget", "--trial", "seed", "--energy", "joules", "--loss", "loss")


def run_cli(*args):
    return run_script("energy_to_target.py", *args)


@pytest.fixture(scope="module")
def curves():
    return budget_study(shift={(100_000, 3): 0.6})  # trial 3 at 100K never reaches loss 3.6: censored


@pytest.fixture
def table(curves, tmp_path):
    path = tmp_path / "points.csv"
    curves.select(
        pl.format("{}K", pl.col("budget") // 1000).alias("budget"),
        pl.col("trial").alias("seed"),
        pl.col("train_energy_j").alias("joules"),
        pl.col("eval_loss").alias("loss"),
    ).sample(fraction=1.0, shuffle=True, seed=3).write_csv(path)  # rows in any order
    return path


def test_the_command_gives_the_workflows_medians_and_paired_ratios_and_writes_them_as_json(curves, table, tmp_path):
    out = tmp_path / "e.json"
    done = run_cli(table, *COLUMNS, "--target", 3.6, "--json", out)
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    reached = energy_to_target(curves, [{"loss": 3.6}])
    theirs = energy_to_target_summary(reached).to_dicts()
    assert {r["condition"] for r in got["conditions"]} == {"100K", "200K", "400K"}
    for mine, ref in zip(sorted(got["conditions"], key=lambda r: int(r["condition"][:-1])), theirs):
        assert (mine["n"], mine["n_reached"], mine["n_censored"]) == (ref["n"], ref["n_reached"], ref["n_censored"])
        assert mine["energy_median_j"] == pytest.approx(ref["energy_median_j"], rel=1e-9)
    pairs = {(r["condition"], r["over"]): r for r in got["ratios"]}
    for ref in energy_to_target_comparisons(reached):
        mine = (
            pairs.get((f"{ref.budget_b // 1000}K", f"{ref.budget_a // 1000}K"))
            or pairs[(f"{ref.budget_a // 1000}K", f"{ref.budget_b // 1000}K")]
        )
        direct = mine["condition"] == f"{ref.budget_b // 1000}K"
        assert (mine["ratio"] if direct else 1 / mine["ratio"]) == pytest.approx(ref.paired.ratio, rel=1e-5)
        assert mine["p"] == pytest.approx(ref.paired.p, rel=1e-4) and mine["n_pairs"] == 8
    assert "Kaplan–Meier median" in done.stdout and "paired by trial id" in done.stdout
    assert next(line for line in done.stdout.splitlines() if line.strip().startswith("100K")).split()[1:4] == [
        "8",
        "7",
        "1",
    ]


@pytest.mark.parametrize(
    "args, says",
    [
        (("--condition", "budget", "--trial", "seed", "--energy", "joule", "--loss", "loss"), "no column 'joule'"),
        (("--condition", "budget", "--trial", "seed", "--energy", "budget", "--loss", "loss"), "is not numeric"),
    ],
)
def test_a_column_the_command_cannot_use_is_named_with_exit_code_2(table, args, says):
    done = run_cli(table, *args, "--target", 3.6)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


@pytest.fixture
def curves_parquet(curves, tmp_path):
    """The workflow's own table of eval points, written as aggregate.py writes results/analysis/curves.parquet."""
    from tokenwatt.common.files import write_parquet

    path = tmp_path / "curves.parquet"
    write_parquet(path, curves)
    return path


def test_the_command_reads_the_workflows_own_curves_parquet_and_a_target_perplexity(curves, curves_parquet, tmp_path):
    out = tmp_path / "e.json"
    args = ("--condition", "budget", "--trial", "trial", "--energy", "train_energy_j", "--loss", "eval_loss")
    done = run_cli(curves_parquet, *args, "--target-perplexity", math.exp(3.6), "--json", out)
    assert done.returncode == 0, done.stderr
    got = json.loads(out.read_text())
    assert got["target_loss"] == pytest.approx(3.6) and got["target_perplexity"] == pytest.approx(math.exp(3.6))
    reached = energy_to_target(curves, [{"loss": 3.6}])
    theirs = {r["budget"]: r for r in energy_to_target_summary(reached).to_dicts()}
    for mine in got["conditions"]:
        assert mine["energy_median_j"] == pytest.approx(theirs[int(mine["condition"])]["energy_median_j"], rel=1e-9)
    assert f"energy to perplexity {math.exp(3.6):g} (loss 3.6 nats)" in done.stdout


@pytest.mark.parametrize("targets", [(), ("--target", "3.6", "--target-perplexity", "36")])
def test_exactly_one_target_is_asked_for(table, targets):
    done = run_cli(table, *COLUMNS, *targets)
    assert done.returncode == 2 and "--target" in done.stderr


def test_help_names_the_table_it_reads_with_an_example():
    done = run_cli("--help")
    assert done.returncode == 0 and ".csv or .parquet" in done.stdout
    assert "energy_to_target.py results/analysis/curves.parquet --condition budget" in done.stdout


def test_a_table_of_several_series_is_refused_unless_series_is_the_condition(curves, tmp_path):
    from tokenwatt.common.files import write_parquet

    path = tmp_path / "curves.parquet"
    two = pl.concat([curves.with_columns(series=pl.lit(name)) for name in ("model=small", "model=large")])
    write_parquet(path, two)
    args = ("--trial", "trial", "--energy", "train_energy_j", "--loss", "eval_loss", "--target", 3.6)
    done = run_cli(path, "--condition", "budget", *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "filter the table to one series" in line and "--condition series" in line
    assert "series" not in run_cli(path, "--condition", "series", *args).stderr
