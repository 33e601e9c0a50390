"""A halving study through Snakemake (allocation: halving): round 0 planned alone before it runs, each later round's
jobs only for the candidates the checkpoint before it kept, the budget kept, a rerun that retrains nothing, a lower
budget that stops after round 0 and a raised one that continues from there, and the report's answer."""

import json
import shutil

import polars as pl
import pytest
from workflow_helpers import ANALYSIS, FRESH_HASH_SEED, TINY, clone, copy_of_study, planned_jobs, snakemake

# one worker runs the module's tests, which read the study it builds once (conftest.py)
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("halving")]
# The tiny study's two budgets as rounds, three learning rates as candidates (1e-5 barely trains: it is dropped
# wherever the noise allows), two trial ids, a budget no round reaches.
HALVING = (
    "study: {trials: 2}\n"
    "train: {schedule: {kind: wsd, branch_every: 500}}\n"
    "design: {lr: [0.00001, 0.003, 0.01]}\n"
    "allocation: {method: halving, energy_j: 1.0e+9, keep: 0.5}\n"
)
ARGS = [*TINY, "halving.yaml"]
# What a changed allocation setting reruns: the rounds' checkpoints and the analysis, with the allocation product
RERUN = {**ANALYSIS, "allocation": 1}


@pytest.fixture(scope="module")
def halving(built):
    def run(folder):
        work = clone(folder)
        (work / "halving.yaml").write_text(HALVING)
        proc = snakemake(work, *ARGS, "--cores", "2", "--resources", "gpu=1")
        (work / "terminal.txt").write_text(proc.stdout + proc.stderr)

    return built("halving", run)


def _round(work, k):
    return json.loads((work / f"results/allocation/round{k}.json").read_text())


def _trials(work):
    return pl.read_parquet(work / "results/analysis/trials.parquet")


def _copy(halving, tmp_path):
    work = copy_of_study(halving, tmp_path)
    (work / "halving.yaml").write_text(HALVING)
    return work


def _budget(work, text):
    (work / "budget.yaml").write_text(text)
    return [*ARGS, "budget.yaml"]


def test_a_dry_run_plans_round_0_alone_before_any_round_has_run(tmp_path):
    work = clone(tmp_path)
    (work / "halving.yaml").write_text(HALVING)
    jobs = planned_jobs(work, *ARGS)
    # every candidate's two trial ids at the first budget, each from its stable run's first point; one checkpoint
    assert (jobs["train_trial"], jobs["train_stable"], jobs["halving_round"]) == (6, 6, 1)


def test_round_1_trains_only_the_candidates_round_0_kept(halving):
    first, second = _round(halving, 0), _round(halving, 1)
    assert first["next"] == "continue" and set(first["kept"]) | set(first["dropped"]) == {
        "lr=1e-05",
        "lr=0.003",
        "lr=0.01",
    }
    assert second["entering"] == first["next_candidates"] == first["kept"] and second["next"] == "final"
    trials = _trials(halving)
    ran = {(s, b) for s, b in trials.select("series", "budget").unique().iter_rows()}
    assert ran == {(c, 1000) for c in first["entering"]} | {(c, 2000) for c in first["kept"]}
    # a dropped candidate's stable run stops at its round-0 point
    for c in first["dropped"]:
        assert sorted(p.name for p in (halving / "results/stable" / c).glob("t1/*.pt")) == ["p1.pt"]


def test_the_report_gives_the_choice_its_spend_against_the_budget_and_every_drop(halving):
    answer = json.loads((halving / "results/analysis/allocation.json").read_text())
    last = _round(halving, 1)
    assert answer["chosen"]["candidate"] == last["kept"][0] and answer["within_budget"]
    assert answer["spent"] == pytest.approx(last["spent"]) and answer["spent"] <= 1e9
    # the spend is the study's total, each stable run once (cost.json's figures of the same trials)
    cost = json.loads((halving / "results/analysis/cost.json").read_text())
    assert answer["spent"] == pytest.approx(
        cost["total_energy_j"] + cost["checkpoint_energy_j"] + (cost["lost_energy_j"] or 0) + cost["eval_energy_j"],
        rel=1e-9,
    )
    assert [d["candidate"] for d in answer["dropped"]] == _round(halving, 0)["dropped"] + last["dropped"]
    page = (halving / "results/report.html").read_text()
    assert 'id="allocation"' in page and "Chosen by successive halving" in page


def test_no_table_of_the_halving_report_is_wider_than_its_box_at_1400_px(halving, tmp_path):
    from test_report_widths import _overflowing

    assert _overflowing((halving / "results/report.html").read_text(), tmp_path) == []


def test_an_unchanged_rerun_retrains_nothing(halving):
    assert planned_jobs(halving, *ARGS, env=FRESH_HASH_SEED) == {}


def test_a_budget_the_next_round_does_not_fit_stops_after_round_0_and_a_raised_one_continues_from_there(
    halving, tmp_path
):
    work = _copy(halving, tmp_path)
    first, finished_page = _round(work, 0), (work / "results/report.html").read_text()
    short = first["spent"] + 0.5 * first["next_estimate"]
    # round 1's trials and the stable stretches they branched from deleted, as if the study had stopped after round 0
    for c in first["kept"]:
        shutil.rmtree(work / "results/trials" / c / "b2000")
        for stretch in (work / "results/stable" / c).glob("t*/p[23].*"):
            stretch.unlink()
    # to its report: a halving study stopped after round 0 ends in one, as every study does
    snakemake(work, *_budget(work, f"allocation: {{energy_j: {short!r}}}\n"), "--cores", "2", "--resources", "gpu=1")
    stopped = _round(work, 0)
    assert stopped["next"] == "stop" and "above the budget" in stopped["why"]
    assert set(_trials(work)["budget"].to_list()) == {1000}  # nothing of round 1 trained
    answer = json.loads((work / "results/analysis/allocation.json").read_text())
    assert answer["within_budget"] and not answer["finished"] and answer["spent"] <= short
    page = (work / "results/report.html").read_text()  # the stopped study's own report, not the finished one copied
    assert page != finished_page and 'id="allocation"' in page
    # raised again: round 0's checkpoint decides to go on; round 1's trials train, round 0's none
    raised = _budget(work, "allocation: {energy_j: 1.0e+9}\n")
    jobs = planned_jobs(work, *raised)
    assert jobs["halving_round"] == 1 and "train_trial" not in jobs  # round 1's jobs: planned once round 0 has run
    # up to the allocation's answer and the trials table: its report is the finished study's, as the module's own
    # (test_the_report_gives_the_choice_its_spend_against_the_budget_and_every_drop)
    answer_and_trials = ["results/analysis/allocation.json", "results/analysis/trials.parquet"]
    snakemake(work, *raised, "--cores", "2", "--resources", "gpu=1", "--", *answer_and_trials)
    assert _round(work, 1)["next"] == "final"
    assert {(c, 2000) for c in first["kept"]} <= set(_trials(work).select("series", "budget").iter_rows())


def test_a_deleted_trial_of_a_finished_round_is_all_a_rerun_trains(halving, tmp_path):
    work = _copy(halving, tmp_path)
    kept = _round(work, 0)["kept"][0]
    shutil.rmtree(work / "results/trials" / kept / "b2000/t2")
    jobs = planned_jobs(work, *ARGS)
    assert (
        jobs["train_trial"] == 1
        and "train_stable" not in jobs
        and jobs == {**RERUN, "train_trial": 1, "halving_round": 1}
    )
