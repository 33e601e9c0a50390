"""A branched study through Snakemake (train.schedule.branch_every): one stable run per trial, saved every 500 real
tokens by jobs of their own, and each budget a cooldown from its saved point; then what a new budget trains."""

import json

import polars as pl
import pytest
from workflow_helpers import ANALYSIS, FRESH_HASH_SEED, TINY, clone, planned_jobs, snakemake

# one worker runs the module's tests, which read the study it builds once (conftest.py)
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("branched")]
# The tiny study's budgets (1000, 2000) on two trials, each a wsd cooldown over its last 20 %: the 1000-token trials
# branch from the point at 500 tokens, the 2000-token ones from the third at 1500.
BRANCHED = "study: {trials: 2}\ntrain: {schedule: {kind: wsd, branch_every: 500}}\n"


@pytest.fixture(scope="module")
def branched(built):
    def run(folder):
        work = clone(folder)
        (work / "branched.yaml").write_text(BRANCHED)
        proc = snakemake(work, *TINY, "branched.yaml", "--cores", "2", "--resources", "gpu=1")
        (work / "terminal.txt").write_text(proc.stdout + proc.stderr)

    return built("branched", run)


def _config(work, budgets=None):
    extra = [] if budgets is None else [_with(work, f"study: {{budgets: {budgets}}}")]
    return [*TINY, "branched.yaml", *extra]


def _with(work, text):
    (work / "change.yaml").write_text(text)
    return "change.yaml"


def _record(work, budget, trial):
    return json.loads((work / f"results/trials/b{budget}/t{trial}/metrics.json").read_text())


def test_each_trial_has_one_stable_run_saved_at_each_point_its_budgets_branch_from_or_pass(branched):
    # each saved point with its stretch record beside it (what the stable run spent up to it)
    assert sorted(p.name for p in (branched / "results/stable/t1").iterdir()) == [
        f"p{k}.{ext}" for k in (1, 2, 3) for ext in ("json", "pt")
    ]
    for trial in (1, 2):
        short, long = _record(branched, 1000, trial), _record(branched, 2000, trial)
        assert (short["branch"]["from_point"], long["branch"]["from_point"]) == (1, 3)
        assert short["data_order"] == long["data_order"] == "drawn" and short["status"] == long["status"] == "ok"
        # both budgets continue one stable run: its first stretch is the same window, measured once
        first = [next(w for w in r["windows"] if w["name"] == "train_1") for r in (short, long)]
        assert first[0] == first[1]
        assert long["branch"]["stable_energy_j"] > short["branch"]["stable_energy_j"] > 0


def test_a_new_budget_inside_the_stable_run_trains_its_cooldown_and_the_larger_budgets_for_its_eval_point(branched):
    # no stable stretch trains again; the 2000-token cooldowns do, for an evaluation at the new budget's end (its
    # energy to a target is compared with theirs over the same segments: plan/evalgrid.py)
    jobs = planned_jobs(branched, *_config(branched, [1000, 1500, 2000]))
    assert jobs == {"subset": 2, "train_trial": 4, **ANALYSIS}


def test_a_longer_budget_extends_the_stable_run_by_its_stretches_and_trains_its_cooldown(branched):
    jobs = planned_jobs(branched, *_config(branched, [1000, 2000, 3000]))
    assert jobs == {"subset": 2, "train_stable": 2, "train_trial": 2, **ANALYSIS}


def test_an_unchanged_branched_rerun_has_nothing_to_do(branched):
    assert planned_jobs(branched, *_config(branched), env=FRESH_HASH_SEED) == {}


def test_the_studys_totals_count_each_stable_run_once(branched):
    trials = pl.read_parquet(branched / "results/analysis/trials.parquet")
    cost = json.loads((branched / "results/analysis/cost.json").read_text())
    longest = trials.filter(pl.col("budget") == 2000)["branch_stable_energy_j"].sum()
    shared = trials["branch_stable_energy_j"].sum() - longest
    assert cost["branch_shared_energy_j"] == pytest.approx(shared, rel=1e-12) and shared > 0
    assert cost["total_energy_j"] == pytest.approx(trials["energy_j"].sum() - shared, rel=1e-12)
    assert cost["stable_from"] == "stretch records" and cost["stable_runs"] == 2
    assert "each stable run counted once" in (branched / "results/report.html").read_text()
